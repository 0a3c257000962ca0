"""The verdict's contrast planner and statistics on synthetic result frames.

The frames have the columns of :func:`cnibench.results.load_results` that the verdict reads.
Expected pairs are written out by hand from the issue's list (gateway on vs off, N rules vs 0
per engine, ...), not derived from the declarations under test; ratios and intervals are
recomputed here with numpy/scipy.
"""

from __future__ import annotations

import itertools
import json
import math
import re
from collections.abc import Iterable, Mapping

import numpy as np
import pandas as pd
import pytest
from matplotlib.figure import Figure
from scipy import stats as sps

from cnibench import report
from cnibench.errors import ConfigError
from cnibench.scenarios import SCENARIOS

_UNITS = {
    "throughput": "bits/s",
    "rtt_mean": "us",
    "cpu": "%",
    "ram": "MB",
    "rr_mean": "us",
    "latency_avg": "us",
}


class _Frame:
    """Builds a tidy results frame one (CNI, condition, metric) group at a time."""

    def __init__(self) -> None:
        self.rows: list[dict[str, object]] = []
        self.clock = 0

    def add(
        self,
        scenario: str,
        cni: str,
        condition: str,
        parameters: Mapping[str, object],
        metric: str,
        values: Iterable[float],
        *,
        status: str = "ok",
        verified: bool = True,
    ) -> _Frame:
        for repetition, value in enumerate(values):
            self.clock += 1
            self.rows.append(
                {
                    "session_id": "s1",
                    "run_id": f"{scenario}-{cni}-{condition}-r{repetition}",
                    "time": f"2026-11-24T00:{self.clock // 60:02d}:{self.clock % 60:02d}+00:00",
                    "cni": cni,
                    "scenario": scenario,
                    "condition": condition,
                    "parameters": json.dumps(dict(parameters), sort_keys=True),
                    "repetition": repetition,
                    "metric": metric,
                    "value": float(value),
                    "unit": _UNITS.get(metric, "ratio"),
                    "verified": verified,
                    "status": status,
                }
            )
        return self

    def frame(self) -> pd.DataFrame:
        return pd.DataFrame(self.rows)


def _all_conditions(scenario: str, cnis: Iterable[str], metric: str = "cpu") -> pd.DataFrame:
    """Every condition of a scenario on each CNI, three runs of one metric each."""
    built = _Frame()
    for cni in cnis:
        for condition in SCENARIOS[scenario].conditions():
            built.add(scenario, cni, condition.id, condition.parameters, metric, [50, 51, 52])
    return built.frame()


def _pairs(df: pd.DataFrame, **kwargs: object) -> set[tuple[str, str]]:
    return {(p.treatment, p.control) for p in report.plan_contrasts(df, **kwargs)}


# --------------------------------------------------------------------------------------------
# Each scenario's declared contrasts
# --------------------------------------------------------------------------------------------


def test_egress_compares_gateway_on_with_off():
    assert _pairs(_all_conditions("egress", ["vxlan"])) == {("gateway-on", "gateway-off")}


def test_wireguard_compares_on_with_off_for_the_same_measurement():
    assert _pairs(_all_conditions("wireguard", ["vxlan"])) == {
        ("on-rr", "off-rr"),
        ("on-iperf3", "off-iperf3"),
    }


def test_l7_compares_policy_on_with_off():
    assert _pairs(_all_conditions("l7", ["vxlan"])) == {("policy-on", "policy-off")}


def test_baseline_compares_cross_with_same_node_and_loaded_with_idle_per_tool():
    pairs = _pairs(_all_conditions("baseline", ["vxlan"]))
    tools = ("iperf3", "sockperf", "ab", "wrk")
    expected = {
        (f"cross-node-{load}-{tool}", f"same-node-{load}-{tool}")
        for load in ("idle", "loaded")
        for tool in tools
    } | {
        (f"{placement}-loaded-{tool}", f"{placement}-idle-{tool}")
        for placement in ("same-node", "cross-node")
        for tool in tools
    }
    assert pairs == expected


def test_policy_compares_n_rules_with_zero_per_engine_and_on_with_off():
    pairs = _pairs(_all_conditions("policy", ["vxlan"]))
    expected = set()
    for placement, engine, clients in itertools.product(
        ("same-node", "cross-node"), ("iptables", "nftables-set"), (1, 50)
    ):
        on = f"on-{placement}-{engine}-r{{rules}}-c{clients}-new-connections"
        expected.add((on.format(rules=1000), on.format(rules=0)))
        expected.add((on.format(rules=0), f"off-{placement}-c{clients}"))
    assert pairs == expected


def test_priority_has_no_contrast_even_with_two_cnis():
    assert report.plan_contrasts(_all_conditions("priority", ["routed", "vxlan"])) == []


def test_split_compares_each_weighted_backends_share_with_its_weight():
    built = _Frame()
    for weights, shares in (({"v1": 60, "v2": 40}, (0.61, 0.39)), ({"v1": 100, "v2": 0}, (1, 0))):
        params = {"weights": json.dumps(weights), "users": 10}
        condition = "-".join(f"{k}-{v}" for k, v in weights.items()) + "-u10"
        for backend, share in zip(weights, shares, strict=True):
            built.add("split", "vxlan", condition, params, f"share@{backend}", [share] * 3)
    planned = report.plan_contrasts(built.frame())
    found = {(p.treatment, p.metric, p.expected_share) for p in planned}
    # The weight-0 backend has no ratio (its share must be 0; verification checks that).
    assert found == {
        ("v1-60-v2-40-u10", "share@v1", 0.6),
        ("v1-60-v2-40-u10", "share@v2", 0.4),
        ("v1-100-v2-0-u10", "share@v1", 1.0),
    }
    assert all(p.control == "configured weights" for p in planned)


def test_only_primary_metrics_are_compared():
    built = _Frame()
    for state in ("on", "off"):
        for metric in ("throughput", "throughput_sender", "retransmits", "cpu"):
            built.add("egress", "vxlan", f"gateway-{state}", {"gateway": state}, metric, [5, 6])
    metrics = {p.metric for p in report.plan_contrasts(built.frame())}
    assert metrics == {"throughput", "cpu"}


# --------------------------------------------------------------------------------------------
# Everything else equal, by parameters
# --------------------------------------------------------------------------------------------


def test_a_control_with_another_parameter_value_is_not_paired():
    built = _Frame()
    built.add("egress", "vxlan", "gateway-on", {"gateway": "on", "mtu": 1500}, "cpu", [1, 2])
    built.add("egress", "vxlan", "gateway-off", {"gateway": "off", "mtu": 1400}, "cpu", [1, 2])
    notes: list[str] = []
    assert report.plan_contrasts(built.frame(), notes=notes) == []
    assert len(notes) == 1
    assert "gateway-on not compared (no control condition" in notes[0]


def test_pairing_follows_parameters_not_condition_ids():
    built = _Frame()
    # Ids that would mislead a string match: the parameters say which is which.
    built.add("egress", "vxlan", "a", {"gateway": "off"}, "cpu", [1, 2])
    built.add("egress", "vxlan", "b", {"gateway": "on"}, "cpu", [1, 2])
    assert _pairs(built.frame()) == {("b", "a")}


def test_failed_and_unverified_runs_do_not_make_a_contrast():
    built = _Frame()
    built.add("egress", "vxlan", "gateway-on", {"gateway": "on"}, "cpu", [1, 2], verified=False)
    built.add("egress", "vxlan", "gateway-off", {"gateway": "off"}, "cpu", [1, 2])
    built.add("egress", "vxlan", "gateway-on", {"gateway": "on"}, "ram", [1, 2], status="failed")
    built.add("egress", "vxlan", "gateway-off", {"gateway": "off"}, "ram", [1, 2])
    assert report.plan_contrasts(built.frame()) == []


# --------------------------------------------------------------------------------------------
# The reference CNI
# --------------------------------------------------------------------------------------------


def test_every_cni_is_compared_with_the_first_measured_only():
    df = _all_conditions("egress", ["calico", "antrea", "cilium"])
    cni_pairs = {
        (p.cni, p.control_cni, p.treatment, p.control)
        for p in report.plan_contrasts(df)
        if p.kind == "cni"
    }
    assert cni_pairs == {
        (cni, "calico", condition, condition)
        for cni in ("antrea", "cilium")
        for condition in ("gateway-off", "gateway-on")
    }


def test_reference_option_chooses_the_reference():
    df = _all_conditions("egress", ["calico", "antrea", "cilium"])
    planned = report.plan_contrasts(df, reference="cilium")
    assert {(p.cni, p.control_cni) for p in planned if p.kind == "cni"} == {
        ("calico", "cilium"),
        ("antrea", "cilium"),
    }


def test_unknown_reference_is_a_one_line_error():
    df = _all_conditions("egress", ["calico", "antrea"])
    with pytest.raises(ConfigError, match=r"^reference CNI 'flannel' is not in the results") as e:
        report.verdict(df, reference="flannel")
    assert "\n" not in str(e.value)
    assert "calico, antrea" in str(e.value)


# --------------------------------------------------------------------------------------------
# Numbers and words
# --------------------------------------------------------------------------------------------


def _egress(on: list[float], off: list[float], metric: str = "throughput") -> pd.DataFrame:
    built = _Frame()
    built.add("egress", "vxlan", "gateway-off", {"gateway": "off"}, metric, off)
    built.add("egress", "vxlan", "gateway-on", {"gateway": "on"}, metric, on)
    return built.frame()


def test_ratio_is_of_truncated_means_and_interval_is_welch_on_logs():
    # Evenly spread runs (no outlier run to exclude), in a shuffled order.
    rng = np.random.default_rng(3)
    off = list(rng.permutation(10e9 * (1 + 0.02 * np.linspace(-1, 1, 12))))
    on = list(rng.permutation(8e9 * (1 + 0.03 * np.linspace(-1, 1, 12))))
    row = report.verdict(_egress(on, off)).iloc[0]
    # With 12 runs scipy's trim_mean cuts one run per end.
    assert row.ratio == pytest.approx(sps.trim_mean(on, 0.1) / sps.trim_mean(off, 0.1), rel=1e-12)
    kept_on, kept_off = np.sort(on)[1:-1], np.sort(off)[1:-1]
    welch = sps.ttest_ind(np.log(kept_on), np.log(kept_off), equal_var=False)
    ci = welch.confidence_interval(0.95)
    assert row.ci_low == pytest.approx(math.exp(ci.low), rel=1e-9)
    assert row.ci_high == pytest.approx(math.exp(ci.high), rel=1e-9)
    assert row.p_value == pytest.approx(welch.pvalue, rel=1e-9)
    assert (row.n_treatment, row.n_control) == (10, 10)
    shown = re.fullmatch(
        r"egress gateway on vxlan: throughput ×(\d\.\d+) \(95 % CI (\d\.\d+)-(\d\.\d+),"
        r" n = 10 vs 10\)",
        row.verdict,
    )
    assert shown is not None, row.verdict
    numbers = [float(x) for x in shown.groups()]
    assert numbers == pytest.approx([row.ratio, row.ci_low, row.ci_high], abs=0.005)


def test_an_outlier_run_is_left_out_as_in_the_bar_chart():
    off = [100.0, 101.0, 99.0, 100.5, 99.5, 100.2, 160.0]  # the last run is far off
    on = [90.0, 91.0, 89.0, 90.5, 89.5, 90.2, 90.1]
    row = report.verdict(_egress(on, off)).iloc[0]
    assert row.n_control == 6
    assert row.ratio == pytest.approx(np.mean(on) / np.mean(off[:-1]), rel=1e-12)


def test_an_interval_covering_one_says_no_detectable_difference():
    row = report.verdict(_egress([100, 104, 97, 101], [99, 103, 100, 98])).iloc[0]
    assert row.ci_low <= 1.0 <= row.ci_high
    assert not row.significant
    match = re.fullmatch(
        r"egress gateway on vxlan: throughput no detectable difference"
        r" \(CI (\d\.\d+)-(\d\.\d+), n = 4 vs 4\)",
        row.verdict,
    )
    assert match is not None, row.verdict
    assert float(match.group(1)) <= 1.0 <= float(match.group(2))


def test_a_uselessly_wide_interval_prints_plain_decimals():
    # Two runs that disagree by a factor of 30 (as rtt under load did in a smoke run): the
    # interval spans orders of magnitude and its low bound must not print as "8.5e-06".
    row = report.verdict(_egress([10.0, 300.0], [60.0, 70.0])).iloc[0]
    assert row.ci_low < 0.01 < 100 < row.ci_high, (row.ci_low, row.ci_high)
    match = re.fullmatch(
        r"egress gateway on vxlan: throughput no detectable difference"
        r" \(CI (\d+\.?\d*)-(\d+\.?\d*), n = 2 vs 2\)",
        row.verdict,
    )
    assert match is not None, row.verdict
    low, high = (float(bound) for bound in match.groups())
    assert low == pytest.approx(row.ci_low, rel=0.05)
    assert high == pytest.approx(row.ci_high, rel=0.01)


def test_fewer_than_two_runs_gives_no_interval_and_no_nan_in_words():
    row = report.verdict(_egress([100.0], [90.0, 91.0])).iloc[0]
    assert math.isnan(row.ci_low)
    assert math.isnan(row.p_adjusted)
    assert "fewer than 2 runs" in row.verdict
    assert not re.search(r"\b(nan|inf)\b", row.verdict)


def _holm_by_hand(p: list[float]) -> list[float]:
    m = len(p)
    order = sorted(range(m), key=lambda i: p[i])
    adjusted = [0.0] * m
    running = 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (m - rank) * p[i]))
        adjusted[i] = running
    return adjusted


def test_holm_adjusted_p_values_over_all_contrasts_of_a_verdict():
    built = _Frame()
    rng = np.random.default_rng(11)
    # Five CNIs with modest, noisy differences: several raw p-values near 0.05.
    for i, cni in enumerate(("ref", "a", "b", "c", "d")):
        for state in ("off", "on"):
            level = 100 * (1 + 0.02 * i) * (0.97 if state == "on" else 1.0)
            values = level * (1 + 0.02 * rng.standard_normal(4))
            built.add("egress", cni, f"gateway-{state}", {"gateway": state}, "cpu", values)
    table = report.verdict(built.frame())
    assert len(table) == 5 + 4 * 2  # 5 gateway contrasts, 4 CNIs x 2 conditions vs ref
    expected = _holm_by_hand(table["p_value"].tolist())
    assert table["p_adjusted"].tolist() == pytest.approx(expected, rel=1e-12)
    assert table["significant"].tolist() == [p <= 0.05 for p in expected]
    survivors = table[(table.p_value < 0.05) & (table.p_adjusted > 0.05)]
    assert not survivors.empty, "the data should give a raw-significant, Holm-insignificant row"
    for line in survivors["verdict"]:
        assert "but no detectable difference after Holm's correction (adjusted p = " in line


def test_stats_holm_matches_the_textbook_example():
    # Holm (1979) style example: p sorted 0.01, 0.02, 0.03, 0.04 -> 0.04, 0.06, 0.06, 0.06.
    from cnibench.stats import holm_adjusted

    assert holm_adjusted([0.03, 0.01, 0.04, 0.02]).tolist() == pytest.approx(
        [0.06, 0.04, 0.06, 0.06]
    )
    with pytest.raises(ValueError, match="p-values must lie in"):
        holm_adjusted([0.5, 1.5])


def test_rows_are_sorted_by_effect_size():
    built = _Frame()
    for cni, cost in (("x", 0.9), ("y", 0.5), ("z", 0.99)):
        built.add("egress", cni, "gateway-off", {"gateway": "off"}, "cpu", [100, 101, 99])
        built.add(
            "egress", cni, "gateway-on", {"gateway": "on"}, "cpu", [100 * cost, 101 * cost, 99]
        )
    table = report.verdict(built.frame())
    effects = np.abs(np.log(table["ratio"].to_numpy(dtype=float)))
    assert list(effects) == sorted(effects, reverse=True)
    assert (table.iloc[0].cni, table.iloc[0].kind) == ("y", "feature")


def test_split_share_ratio_is_observed_over_configured():
    built = _Frame()
    params = {"weights": json.dumps({"v1": 60, "v2": 40}), "users": 10}
    built.add("split", "vxlan", "v1-60-v2-40-u10", params, "share@v1", [0.62, 0.63, 0.61])
    built.add("split", "vxlan", "v1-60-v2-40-u10", params, "share@v2", [0.38, 0.37, 0.39])
    table = report.verdict(built.frame()).set_index("metric")
    assert table.loc["share@v1", "ratio"] == pytest.approx(0.62 / 0.6)
    one_sample = sps.ttest_1samp(np.log([0.62, 0.63, 0.61]), math.log(0.6))
    assert table.loc["share@v1", "p_value"] == pytest.approx(one_sample.pvalue, rel=1e-9)
    assert table.loc["share@v1", "n_control"] == 0
    assert "share of v1 vs configured 60 % on vxlan" in table.loc["share@v1", "verdict"]


def test_verdict_columns_are_the_notebook_contract():
    table = report.verdict(_egress([1.0, 1.1], [1.2, 1.3]))
    for column in (
        "scenario",
        "cni",
        "metric",
        "treatment",
        "control",
        "ratio",
        "ci_low",
        "ci_high",
        "n_treatment",
        "n_control",
        "p_value",
        "p_adjusted",
        "verdict",
    ):
        assert column in table.columns


# --------------------------------------------------------------------------------------------
# Forest plot
# --------------------------------------------------------------------------------------------


def test_forest_plot_has_one_row_per_contrast_on_a_log_axis_with_a_line_at_one():
    built = _Frame()
    for cni, cost in (("x", 0.9), ("y", 0.5)):
        built.add("egress", cni, "gateway-off", {"gateway": "off"}, "cpu", [100, 101, 99])
        built.add("egress", cni, "gateway-on", {"gateway": "on"}, "cpu", [90 * cost, 91 * cost])
    table = report.verdict(built.frame())
    figure = report.figure_forest(table)
    assert isinstance(figure, Figure)
    ax = figure.axes[0]
    assert ax.get_xscale() == "log"
    assert len(ax.get_yticklabels()) == len(table)
    assert any(list(line.get_xdata()) == [1.0, 1.0] for line in ax.get_lines())
    # Results instead of the verdict: the same plot.
    again = report.figure_forest(built.frame())
    labels = [t.get_text() for t in again.axes[0].get_yticklabels()]
    assert labels == [t.get_text() for t in ax.get_yticklabels()]


def test_forest_plot_of_something_else_is_a_one_line_error():
    with pytest.raises(ConfigError, match="figure_forest needs the verdict"):
        report.figure_forest(pd.DataFrame({"a": [1]}))


def test_a_narrow_interval_prints_bounds_that_differ():
    # nginx's weighted round robin is nearly exact: shares agree to 1e-5 between runs (as in a
    # real lab split run), and the printed interval must still have two different bounds.
    built = _Frame()
    params = {"weights": json.dumps({"v1": 60, "v2": 40}), "users": 10}
    built.add("split", "vxlan", "v1-60-v2-40-u10", params, "share@v1", [0.600000, 0.600016])
    line = report.verdict(built.frame()).iloc[0].verdict
    low, high = re.search(r"CI (\d\.\d+)-(\d\.\d+)", line).groups()
    assert low != high, line
    assert float(low) <= 1.0 <= float(high), line


def _one_clear_cost_among_noise(noisy: int) -> pd.DataFrame:
    """Gateway on vs off: on vxlan throughput 5 % lower in twelve tight runs each (a
    detectable difference); on ``noisy`` further CNIs two runs that disagree wildly (large
    ratios whose intervals cover 1)."""
    built = _Frame()
    spread = 1 + 0.002 * np.linspace(-1, 1, 12)
    built.add("egress", "vxlan", "gateway-off", {"gateway": "off"}, "throughput", 10e9 * spread)
    built.add("egress", "vxlan", "gateway-on", {"gateway": "on"}, "throughput", 9.5e9 * spread)
    for i in range(noisy):
        cni = f"noisy{i}"
        built.add("egress", cni, "gateway-off", {"gateway": "off"}, "throughput", [10e9, 12e9])
        built.add("egress", cni, "gateway-on", {"gateway": "on"}, "throughput", [1e9, 40e9 + i])
    return built.frame()


def test_a_long_verdict_prints_the_detectable_difference_first_and_counts_the_rest():
    table = report.verdict(_one_clear_cost_among_noise(noisy=5))
    clear = "egress gateway on vxlan: throughput ×0.950"
    gateway_lines = [line for line in table["verdict"] if "egress gateway on" in line]
    assert len(gateway_lines) == 6
    # By effect alone the clear 5 % cost comes after the noise.
    assert not table["verdict"].iloc[0].startswith(clear)
    assert int(table["significant"].sum()) == 1
    lines = report.verdict_summary(table, limit=3, full_at="cnibench report results/x")
    heading, *body, last = lines
    assert heading.startswith(f"verdict: {len(table)} planned contrast(s)")
    assert "1 detectable difference(s)" in heading
    assert len(body) == 3
    assert body[0].startswith(f"  {clear}"), body
    assert all("no detectable difference" in line for line in body[1:])
    assert last == (
        f"  ... {len(table) - 3} more not shown, each with no detectable difference;"
        " every line: cnibench report results/x"
    )


def test_a_short_verdict_prints_every_line_in_effect_order():
    table = report.verdict(_one_clear_cost_among_noise(noisy=1))
    lines = report.verdict_summary(table, limit=len(table))
    assert [line.strip() for line in lines[1:]] == list(table["verdict"])
    assert "detectable difference(s)" not in lines[0]
    with pytest.raises(ConfigError, match="limit must be at least 1"):
        report.verdict_summary(table, limit=0)
