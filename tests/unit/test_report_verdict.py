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
from statsmodels.stats.power import GofChisquarePower, TTestPower
from statsmodels.stats.proportion import confint_proportions_2indep

from cnibench import report, stats
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
    """Builds a tidy results frame one (CNI, condition, metric) group at a time.

    Runs are timed in rounds, as ``cnibench run`` interleaves conditions: repetition k of
    every group comes in hour k, so every contrast is interleaved (``sequential=True``: each
    group's runs follow the previous group's, one condition after the other)."""

    def __init__(self, *, sequential: bool = False, session: str = "s1") -> None:
        self.rows: list[dict[str, object]] = []
        self.clock = 0
        self.sequential = sequential
        self.session = session

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
            hour = 0 if self.sequential else repetition
            assert hour < 24, "more repetitions than the clock tells apart"
            assert self.clock < 3600, "more runs than the clock tells apart"
            self.rows.append(
                {
                    "session_id": self.session,
                    "run_id": f"{self.session}-{scenario}-{cni}-{condition}-r{repetition}",
                    "time": (
                        f"2026-11-24T{hour:02d}:{self.clock // 60:02d}:{self.clock % 60:02d}+00:00"
                    ),
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


def _split(per_run: list[dict[str, int]], weights: dict[str, int]) -> pd.DataFrame:
    """One split condition: per run, requests per backend and the shares they make."""
    built = _Frame()
    params = {"weights": json.dumps(weights), "users": 10}
    condition = "-".join(f"{k}-{v}" for k, v in weights.items()) + "-u10"
    for backend in weights:
        counts = [run[backend] for run in per_run]
        built.add("split", "vxlan", condition, params, f"requests@{backend}", counts)
        shares = [run[backend] / sum(run.values()) for run in per_run]
        built.add("split", "vxlan", condition, params, f"share@{backend}", shares)
    for row in built.rows:
        if str(row["metric"]).startswith("requests@"):
            row["unit"] = "count"
    return built.frame()


def test_a_split_is_one_contrast_per_condition_not_one_per_backend():
    # v1 and v2 shares are one question (one is 1 minus the other): one test per split.
    df = pd.concat(
        [
            _split([{"v1": 610, "v2": 390}] * 3, {"v1": 60, "v2": 40}),
            _split([{"v1": 1000, "v2": 0}] * 3, {"v1": 100, "v2": 0}),
        ]
    )
    planned = report.plan_contrasts(df)
    assert {(p.treatment, p.metric) for p in planned} == {
        ("v1-60-v2-40-u10", "shares"),
        ("v1-100-v2-0-u10", "shares"),
    }
    assert all(p.control == "configured weights" for p in planned)
    assert {json.loads(p.weights)["v1"] for p in planned} == {0.6, 1.0}


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


def test_ratio_is_of_geometric_means_and_the_centre_of_its_paired_interval_on_logs():
    rng = np.random.default_rng(3)
    off = list(rng.permutation(10e9 * (1 + 0.02 * np.linspace(-1, 1, 12))))
    on = list(rng.permutation(8e9 * (1 + 0.03 * np.linspace(-1, 1, 12))))
    row = report.verdict(_egress(on, off)).iloc[0]
    assert row.scale == "ratio"
    # Every run, none trimmed: the ratio of geometric means, the estimate of the run table.
    assert row.ratio == pytest.approx(sps.gmean(on) / sps.gmean(off), rel=1e-12)
    # Run k of each side came in round k: the interval is the paired t's on the log ratios.
    paired = sps.ttest_rel(np.log(on), np.log(off))
    ci = paired.confidence_interval(0.95)
    assert row.ci_low == pytest.approx(math.exp(ci.low), rel=1e-9)
    assert row.ci_high == pytest.approx(math.exp(ci.high), rel=1e-9)
    # The printed ratio is the centre of its interval on the log scale (not ×175 in 72.7-751).
    assert row.ratio**2 == pytest.approx(row.ci_low * row.ci_high, rel=1e-9)
    assert row.p_value == pytest.approx(paired.pvalue, rel=1e-9)
    assert (row.n_treatment, row.n_control) == (12, 12)
    shown = re.fullmatch(
        r"egress gateway on vxlan: throughput ×(\d\.\d+) \(95 % CI (\d\.\d+)-(\d\.\d+),"
        r" n = 12 rounds, paired\)",
        row.verdict,
    )
    assert shown is not None, row.verdict
    ratio, low, high = (float(x) for x in shown.groups())
    assert ratio == pytest.approx(row.ratio, abs=0.005)
    # Bounds are rounded outwards: never narrower than the interval.
    assert row.ci_low - 0.01 < low <= row.ci_low
    assert row.ci_high <= high < row.ci_high + 0.01


def test_an_outlying_run_is_counted_not_dropped():
    off = [100.0, 101.0, 99.0, 100.5, 99.5, 100.2, 160.0]  # the last run is far off
    on = [90.0, 91.0, 89.0, 90.5, 89.5, 90.2, 90.1]
    row = report.verdict(_egress(on, off)).iloc[0]
    assert row.n_control == 7
    assert row.ratio == pytest.approx(sps.gmean(on) / sps.gmean(off), rel=1e-12)


def test_an_interval_covering_one_is_undecided_and_names_the_rounds_for_5_percent():
    on, off = [100, 108, 93, 101], [99, 101, 100, 98]
    row = report.verdict(_egress(on, off)).iloc[0]
    assert row.ci_low <= 1.0 <= row.ci_high
    assert not row.significant
    assert not row.equivalent
    match = re.fullmatch(
        r"egress gateway on vxlan: throughput undecided ×(\d\.\d+) \(95 % CI"
        r" (\d\.\d+)-(\d\.\d+), n = 4 rounds, paired\): this design detects about ±(\d+) %;"
        r" ±5 % needs about (\d+) rounds per side",
        row.verdict,
    )
    assert match is not None, row.verdict
    assert float(match.group(2)) <= 1.0 <= float(match.group(3))
    # Independently: statsmodels' power of the paired t test on the log ratios (power 0.8),
    # from the SD of the differences raised to its 80 % upper bound (3 df) for the rounds.
    differences = np.log(on) - np.log(off)
    sd = differences.std(ddof=1)
    power = TTestPower()
    upper = sd * math.sqrt(3 / sps.chi2.ppf(0.2, 3))
    rounds = power.solve_power(effect_size=math.log(1.05) / upper, alpha=0.05, power=0.8)
    assert int(match.group(5)) == math.ceil(rounds)
    detects = power.solve_power(nobs=4, alpha=0.05, power=0.8) * sd
    assert int(match.group(4)) == round(100 * math.expm1(detects))


def test_a_margin_says_same_within_when_the_whole_interval_is_inside():
    spread = 1 + 0.002 * np.linspace(-1, 1, 10)
    df = _egress(list(10e9 * spread[::-1]), list(10e9 * spread))
    row = report.verdict(df, margin=0.02).iloc[0]
    welch = sps.ttest_ind(np.log(10e9 * spread[::-1]), np.log(10e9 * spread), equal_var=False)
    ci = welch.confidence_interval(0.95)
    assert math.exp(ci.low) >= 0.98
    assert math.exp(ci.high) <= 1.02
    assert row.equivalent
    assert row.verdict.startswith("egress gateway on vxlan: throughput same within ±2 % ×1.00")
    # Without a margin the default ±5 % holds as well.
    assert " same within ±5 % " in report.verdict(df).iloc[0].verdict
    # A 4 % cost, tightly measured, is neither the same within ±2 % nor undecided.
    cost = report.verdict(_egress(list(9.6e9 * spread[::-1]), list(10e9 * spread)), margin=0.02)
    assert cost.iloc[0].significant
    assert not cost.iloc[0].equivalent
    with pytest.raises(ConfigError, match="margin must be a fraction"):
        report.verdict(df, margin=2.0)


def test_an_interval_excluding_one_never_prints_as_if_it_contained_it():
    # Bounds 1.004-1.03 at two decimals would read "1.00-1.03".
    assert report.interval_text(1.004, 1.03, null=1.0) == "1.004-1.030"
    assert report.interval_text(0.97, 0.99962, null=1.0) == "0.9700-0.9997"
    low, _ = report.interval_text(1.00001, 1.2, null=1.0).split("-")
    assert float(low) > 1.0
    # Rounded outwards: the printed interval is never narrower than the real one.
    assert report.interval_text(0.4321, 2.2789, null=1.0) == "0.43-2.28"


def test_a_bound_over_100_does_not_round_the_other_to_zero():
    # Two runs of rtt under load in CI: ratio 2.79, 95 % CI 0.0689-113.08. Printed "0-114",
    # the lower bound of a ratio read as zero (and as "no bound" in the HTML check).
    assert report.interval_text(0.0689, 113.08, null=1.0) == "0.06-114"
    assert report.interval_text(99.5, 250.2, null=1.0) == "99.50-251"
    assert report.interval_text(-150.4, 0.031, null=0.0) == "-151 to 0.04"


def test_a_uselessly_wide_interval_prints_plain_decimals():
    # Two runs that disagree by a factor of 30 (as rtt under load did in a smoke run): the
    # interval spans orders of magnitude and its low bound must not print as "8.5e-06".
    row = report.verdict(_egress([10.0, 300.0], [60.0, 70.0])).iloc[0]
    assert row.ci_low < 0.01 < 100 < row.ci_high, (row.ci_low, row.ci_high)
    match = re.search(r"\(95 % CI (\d+\.?\d*)-(\d+\.?\d*), n = 2 rounds, paired\)", row.verdict)
    assert match is not None, row.verdict
    assert "e-" not in row.verdict
    low, high = (float(bound) for bound in match.groups())
    assert low == pytest.approx(row.ci_low, rel=0.05)
    assert high == pytest.approx(row.ci_high, rel=0.01)


def test_a_zero_control_is_a_difference_in_the_metrics_unit():
    # The gateway node's own CPU: idle without the gateway, 0.37 cores with it.
    built = _Frame()
    off = [0.0, 0.0, 0.0, 0.0, 0.0]
    on = [0.37, 0.36, 0.38, 0.375, 0.365]
    built.add("egress", "vxlan", "gateway-off", {"gateway": "off"}, "cpu@egress-gw", off)
    built.add("egress", "vxlan", "gateway-on", {"gateway": "on"}, "cpu@egress-gw", on)
    for row in built.rows:
        row["unit"] = "cores"
    got = report.verdict(built.frame()).iloc[0]
    assert got.scale == "difference"
    welch = sps.ttest_ind(on, off, equal_var=False)
    ci = welch.confidence_interval(0.95)
    assert got.estimate == pytest.approx(np.mean(on) - np.mean(off))
    assert (got.ci_low, got.ci_high) == pytest.approx((ci.low, ci.high))
    assert got.significant
    assert got.verdict.startswith(
        "egress gateway on vxlan: cpu@egress-gw +0.37 cores (95 % CI 0.36-0.38; 0.00 → 0.37,"
    ), got.verdict
    assert (math.floor(100 * ci.low), math.ceil(100 * ci.high)) == (36, 38)


def test_a_near_zero_control_is_a_difference_too():
    # A control 100 times smaller would print "×100" and head the list; a difference says it.
    built = _Frame()
    built.add("egress", "vxlan", "gateway-off", {"gateway": "off"}, "cpu", [0.01, 0.012, 0.011])
    built.add("egress", "vxlan", "gateway-on", {"gateway": "on"}, "cpu", [1.0, 1.1, 1.05])
    row = report.verdict(built.frame()).iloc[0]
    assert row.scale == "difference"
    assert math.isnan(row.ratio)
    assert "+1.04 %" in row.verdict


def test_a_yes_no_metric_is_a_difference_of_proportions_with_newcombes_interval():
    built = _Frame()
    built.add("egress", "vxlan", "gateway-off", {"gateway": "off"}, "cpu", [1, 1, 1, 1, 1])
    built.add("egress", "vxlan", "gateway-on", {"gateway": "on"}, "cpu", [1, 1, 0, 1, 1])
    for row in built.rows:
        row["unit"] = "bool"
    got = report.verdict(built.frame()).iloc[0]
    assert got.scale == "proportion"
    low, high = confint_proportions_2indep(4, 5, 5, 5, method="newcomb", compare="diff")
    assert (got.estimate, got.ci_low, got.ci_high) == pytest.approx((-0.2, low, high))
    assert got.p_value == pytest.approx(sps.fisher_exact([[4, 1], [5, 0]]).pvalue)
    # 4/5 as a proportion with its Clopper-Pearson interval, 0.2836-0.9949.
    assert "4/5 = 0.80 (Clopper-Pearson 0.283-0.995) vs 5/5" in got.verdict, got.verdict


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


def test_holm_adjusted_p_values_within_each_question_and_no_interval_contradicts_its_call():
    built = _Frame()
    rng = np.random.default_rng(7)
    # Five CNIs with modest, noisy differences: several raw p-values near 0.05.
    for i, cni in enumerate(("ref", "a", "b", "c", "d")):
        for state in ("off", "on"):
            level = 100 * (1 + 0.02 * i) * (0.97 if state == "on" else 1.0)
            values = level * (1 + 0.02 * rng.standard_normal(4))
            built.add("egress", cni, f"gateway-{state}", {"gateway": state}, "cpu", values)
    table = report.verdict(built.frame())
    assert len(table) == 5 + 4 * 2  # 5 gateway contrasts, 4 CNIs x 2 conditions vs ref
    # The questions: the gateway on each CNI (one contrast each), each CNI against the
    # reference over both conditions (two each).
    assert table.groupby("question").size().sort_values().tolist() == [1] * 5 + [2] * 4
    expected = pd.Series(np.nan, index=table.index)
    for _, members in table.groupby("question"):
        expected[members.index] = _holm_by_hand(members["p_value"].tolist())
    assert table["p_adjusted"].tolist() == pytest.approx(expected.tolist(), rel=1e-12)
    assert table["significant"].tolist() == [p <= 0.05 for p in expected]
    survivors = table[(table.p_value < 0.05) & (table.p_adjusted > 0.05)]
    assert not survivors.empty, "the data should give a raw-significant, Holm-insignificant row"
    # Every line's interval carries its call: it excludes 1 exactly when a cost is called.
    excludes = (table["ci_low"] > 1.0) | (table["ci_high"] < 1.0)
    assert excludes.tolist() == table["significant"].tolist()
    for line in table["verdict"]:
        assert "no detectable difference" not in line
    for line in survivors["verdict"]:
        assert " undecided " in line or " same within ±5 % " in line


def test_stats_holm_matches_the_textbook_example():
    # Holm (1979) style example: p sorted 0.01, 0.02, 0.03, 0.04 -> 0.04, 0.06, 0.06, 0.06.
    from cnibench.stats import holm_adjusted

    assert holm_adjusted([0.03, 0.01, 0.04, 0.02]).tolist() == pytest.approx(
        [0.06, 0.04, 0.06, 0.06]
    )
    with pytest.raises(ValueError, match="p-values must lie in"):
        holm_adjusted([0.5, 1.5])


def test_rows_are_grouped_by_feature_and_sorted_by_a_standardized_effect_within():
    built = _Frame()
    for cni, cost in (("x", 0.9), ("y", 0.5), ("z", 0.99)):
        built.add("egress", cni, "gateway-off", {"gateway": "off"}, "cpu", [100, 101, 99])
        built.add(
            "egress", cni, "gateway-on", {"gateway": "on"}, "cpu", [100 * cost, 101 * cost, 99]
        )
    table = report.verdict(built.frame())
    # Grouped: the gateway's three contrasts together, then each CNI pair.
    assert list(dict.fromkeys(table["feature"])) == ["gateway", "y vs x", "z vs x"]
    tested = table[
        np.isfinite(table["p_value"].to_numpy(dtype=float)) & (table["feature"] == "gateway")
    ]
    # Independently: |mean log difference| over the pooled SD of the logs (Cohen's d).
    effects = []
    for row in tested.itertuples():
        frame = built.frame()

        def logs(cni, condition, frame=frame):
            picked = frame[(frame.cni == cni) & (frame.condition == condition)]
            return np.log(picked["value"].to_numpy(dtype=float))

        # Paired by round: the mean log ratio over the SD of one run (the differences' SD
        # over sqrt 2), so paired and unpaired lines order alike.
        d = logs(row.cni, row.treatment) - logs(row.control_cni, row.control)
        effects.append(abs(d.mean()) / (d.std(ddof=1) / math.sqrt(2)))
    assert effects == sorted(effects, reverse=True)
    assert tested["effect_size"].tolist() == pytest.approx(effects)


def test_split_is_one_pooled_test_against_the_weights():
    # Near-exact counts (1202-1204 of 2004, nginx's round robin): no difference, however
    # tight the per-run shares are.
    runs = [{"v1": 1202, "v2": 802}, {"v1": 1204, "v2": 800}, {"v1": 1203, "v2": 801}]
    row = report.verdict(_split(runs, {"v1": 60, "v2": 40})).iloc[0]
    pooled = sps.chisquare([3609, 2403], f_exp=[0.6 * 6012, 0.4 * 6012])
    assert row.scale == "split"
    assert row.p_value == pytest.approx(pooled.pvalue)
    assert not row.significant
    assert "consistent with the weights" in row.verdict
    # The requests stated are those at which the split test itself, pooling 3 runs, reaches
    # power 0.9: more than the many-runs chi-square's count, which has less power here.
    stated = re.search(r"a 5-point skew needs about (\d+) requests over 3 run\(s\)", row.verdict)
    assert stated is not None, row.verdict
    needed = int(stated.group(1))
    assert stats.split_test_power({"v1": 60, "v2": 40}, requests=needed, runs=3) >= 0.9
    assert stats.split_test_power({"v1": 60, "v2": 40}, requests=needed - 1, runs=3) < 0.9
    many_runs = GofChisquarePower().solve_power(
        effect_size=math.sqrt(0.05**2 * (1 / 0.6 + 1 / 0.4)),
        nobs=None,
        n_bins=2,
        alpha=0.01,
        power=0.9,
    )
    assert needed > math.ceil(many_runs)
    assert row.runs_needed == needed
    # 6012 requests over 3 runs: the many-runs count (1429) said enough; the test has not.
    assert needed > 6012
    assert "too few here" in row.verdict


def test_split_advice_allows_for_a_dispersion_estimated_from_few_runs():
    # Shares 57-62 % over 5 runs of 1000: the dispersion is estimated with 4 df. Taken as the
    # truth, it planned designs that delivered 0.78 instead of 0.9 at 2 points of spread.
    runs = [{"v1": v1, "v2": 1000 - v1} for v1 in (570, 620, 590, 605, 585)]
    weights = {"v1": 60, "v2": 40}
    row = report.verdict(_split(runs, weights)).iloc[0]
    test = stats.split_test(runs, weights)
    assert test.dispersion_df == 4
    allowed = stats.skew_detection_plan(
        weights,
        runs=5,
        requests_per_run=1000,
        dispersion=test.dispersion_estimate,
        dispersion_df=4,
    )
    plug_in = stats.skew_detection_plan(
        weights, runs=5, requests_per_run=1000, dispersion=test.dispersion
    )
    assert allowed.statement() in row.verdict
    assert "allowing for a dispersion estimated with 4 df" in row.verdict
    assert allowed.runs_needed > plug_in.runs_needed


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
    for cni, cost, off in (("x", 0.9, [100, 101, 99]), ("y", 0.5, [100, 103, 98])):
        built.add("egress", cni, "gateway-off", {"gateway": "off"}, "cpu", off)
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
    # Runs that agree to 1e-5 (as nginx's round robin shares do): the printed interval must
    # still have two different bounds.
    line = report.verdict(_egress([0.600000, 0.600016], [0.600004, 0.600010])).iloc[0].verdict
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
    # By |log ratio| the clear 5 % cost came after the noise; by a standardized effect (the
    # tight runs make it many SDs) it comes first.
    assert table["verdict"].iloc[0].startswith(clear)
    assert int(table["significant"].sum()) == 1
    lines = report.verdict_summary(table, limit=3, full_at="cnibench report results/x")
    heading, *body, last = lines
    assert heading.startswith(f"verdict: {len(table)} tested contrast(s)")
    assert "1 cost(s) and outcome(s)" in heading
    assert len(body) == 3
    assert body[0].startswith(f"  {clear}"), body
    assert all(" undecided " in line for line in body[1:])
    # What is not shown is counted by call.
    assert last == (
        f"  ... {len(table) - 3} more not shown ({len(table) - 3} undecided);"
        " every line: cnibench report results/x"
    )


def test_a_short_verdict_prints_every_line_in_effect_order():
    table = report.verdict(_one_clear_cost_among_noise(noisy=1))
    lines = report.verdict_summary(table, limit=len(table))
    assert [line.strip() for line in lines[1:]] == list(table["verdict"])
    assert "detectable difference(s)" not in lines[0]
    with pytest.raises(ConfigError, match="limit must be at least 1"):
        report.verdict_summary(table, limit=0)


def test_a_yes_no_outcome_no_contrast_covers_is_stated_as_a_proportion():
    # Priority plans no contrast (its result is which policy won), yet "4 of 5 probes
    # reachable" must reach the verdict as 4/5 with its interval, not as 1.00 from the 4.
    built = _Frame()
    params = {"case": "k8s-deny"}
    built.add("priority", "vxlan", "k8s-deny", params, "reachable", [1, 1, 0, 1, 1])
    for row in built.rows:
        row["unit"] = "bool"
    table = report.verdict(built.frame())
    (line,) = table["verdict"]
    exact = sps.binomtest(4, 5).proportion_ci(0.95, method="exact")
    # Rounded outwards with the decimals it takes for an upper bound below 1 not to print
    # as 1.00 (0.9949 would): 0.283-0.995.
    assert (math.floor(1000 * exact.low), math.ceil(1000 * exact.high)) == (283, 995)
    assert line.startswith(
        "priority k8s-deny on vxlan: reachable 4/5 = 0.80 (95 % CI 0.283-0.995, Clopper-Pearson"
    ), line
    assert math.isnan(table["p_value"].iloc[0])


def test_a_cni_contrast_the_reference_lacks_is_named_not_silently_dropped():
    built = _Frame()
    built.add("egress", "routed", "gateway-off", {"gateway": "off"}, "cpu", [50, 51, 52])
    built.add("egress", "vxlan", "gateway-off", {"gateway": "off"}, "cpu", [50, 51, 52])
    built.add("egress", "vxlan", "gateway-on", {"gateway": "on"}, "cpu", [60, 61, 62])
    table = report.verdict(built.frame())
    assert table.attrs["reference"] == "routed"
    assert any(
        "egress vxlan vs reference routed: gateway-on not compared" in note
        for note in table.attrs["notes"]
    ), table.attrs["notes"]
    lines = report.verdict_summary(table, full_at="cnibench report r/")
    assert lines[-1] == (
        "  1 note(s) on what was not compared and why: see the report (cnibench report r/)"
    )


def test_a_scenario_the_reference_did_not_run_takes_its_first_cni_as_reference():
    # As in the demo: wireguard and priority on vxlan first, egress on two other labels.
    built = _Frame()
    built.add(
        "wireguard", "vxlan", "off-rr", {"encryption": "off", "measurement": "rr"}, "cpu", [5, 6]
    )
    for cni in ("routed:napi=threaded", "vxlan:napi=threaded"):
        for state in ("off", "on"):
            built.add("egress", cni, f"gateway-{state}", {"gateway": state}, "cpu", [50, 51, 53])
    table = report.verdict(built.frame())
    cni_rows = table[table["kind"] == "cni"]
    assert set(cni_rows["control_cni"]) == {"routed:napi=threaded"}
    assert set(cni_rows["cni"]) == {"vxlan:napi=threaded"}
    assert len(cni_rows) == 2
    # The reference of the group of comparable configurations is named.
    assert table.attrs["references"] == {
        "egress: routed:napi=threaded, vxlan:napi=threaded": "routed:napi=threaded"
    }


def test_a_treatment_far_below_its_control_stays_a_ratio():
    # Userspace WireGuard at a fiftieth of the throughput: ×0.02, not "-10730707021 bits/s".
    off = [10.9e9, 11.0e9, 10.8e9, 10.95e9, 11.05e9]
    on = [0.21e9, 0.22e9, 0.215e9, 0.218e9, 0.212e9]
    row = report.verdict(_egress(on, off)).iloc[0]
    assert row.scale == "ratio"
    assert row.ratio == pytest.approx(sps.gmean(on) / sps.gmean(off))


def test_a_large_difference_is_printed_with_one_prefix_and_a_readable_interval():
    # A near-zero control of a large quantity, falling below it: every number in G, the
    # interval's negative bounds joined by "to".
    built = _Frame()
    off = [0.0, 0.0, 0.0]
    on = [-10.7e9, -10.9e9, -10.6e9]
    built.add("egress", "vxlan", "gateway-off", {"gateway": "off"}, "throughput", off)
    built.add("egress", "vxlan", "gateway-on", {"gateway": "on"}, "throughput", on)
    row = report.verdict(built.frame()).iloc[0]
    ci = sps.ttest_ind(on, off, equal_var=False).confidence_interval(0.95)
    low, high = math.floor(100 * ci.low / 1e9) / 100, math.ceil(100 * ci.high / 1e9) / 100
    assert row.verdict.startswith(
        f"egress gateway on vxlan: throughput -10.7G bits/s (95 % CI {low:.2f}G to"
        f" {high:.2f}G; 0.00G → -10.7G, n = 3 rounds, paired)"
    ), row.verdict
