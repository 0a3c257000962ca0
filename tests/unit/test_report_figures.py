"""Figures and tables of the report, checked on the data they draw (synthetic tidy results)."""

from __future__ import annotations

import itertools
import json
import math
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest
import scipy.stats
from matplotlib.collections import LineCollection
from matplotlib.patches import Rectangle

from cnibench import report, stats
from cnibench.errors import ConfigError, InsufficientDataError

SEED = 20261122


def _row(
    run_id, cni, condition, metric, value, *, status="ok", minute=0, params=None, unit="bits/s"
):
    params = params or {}
    row = {
        "session_id": "s1",
        "run_id": run_id,
        "time": pd.Timestamp("2026-11-22T10:00:00Z") + pd.Timedelta(minutes=minute),
        "backend": "lab",
        "provider": "lab",
        "cni": cni,
        "cni_version": "1",
        "scenario": "egress" if "rules" not in params else "policy",
        "condition": condition,
        "repetition": minute,
        "metric": metric,
        "value": value,
        "unit": unit,
        "verified": True,
        "status": status,
        "reason": "" if status == "ok" else "iperf3 timed out",
        "environment_id": "e1",
        "options": "{}",
        "parameters": json.dumps(params, sort_keys=True),
    }
    row.update({f"param_{k}": v for k, v in params.items()})
    return row


@pytest.fixture
def egress_frame() -> pd.DataFrame:
    """Two CNIs x two conditions; vxlan/gateway-on has a planted outlier and a failed run."""
    rng = np.random.default_rng(SEED)
    rows = []
    for cni, base in (("vxlan", 9e9), ("routed", 12e9)):
        for condition, factor in (("gateway-off", 1.0), ("gateway-on", 0.7)):
            for i in range(6):
                value = base * factor * (1 + 0.01 * rng.standard_normal())
                if cni == "vxlan" and condition == "gateway-on" and i == 3:
                    value = base * factor * 0.2  # a broken run far from the others
                rows.append(
                    _row(f"{cni}-{condition}-{i}", cni, condition, "throughput", value, minute=i)
                )
            rows.append(
                _row(
                    f"{cni}-{condition}-f",
                    cni,
                    condition,
                    "throughput",
                    math.nan,
                    status="failed",
                    minute=9,
                )
            )
    return pd.DataFrame(rows)


def _bars(figure):
    ax = figure.axes[0]
    return [patch for patch in ax.patches if isinstance(patch, Rectangle)]


def test_bar_heights_are_geometric_means_of_every_ok_run(egress_frame):
    # The planted outlier is in the bar (flagged, never dropped): dropping ordinary runs by a
    # MAD rule is what made the old intervals cover 84-91 % instead of 95 %.
    figure = report.figure_bars(egress_frame, "egress", "throughput")
    heights = [bar.get_height() for bar in _bars(figure)]
    expected = [
        scipy.stats.gmean(group[group["status"] == "ok"]["value"].to_numpy())
        for _, group in egress_frame.groupby(["cni", "condition"], sort=False)
    ]
    assert heights == pytest.approx(expected, rel=1e-12)


def test_bar_error_bars_are_student_t_intervals_of_the_logs(egress_frame):
    figure = report.figure_bars(egress_frame, "egress", "throughput")
    spans = sorted(
        v
        for collection in figure.axes[0].collections
        if isinstance(collection, LineCollection)
        for seg in collection.get_segments()
        for v in (seg[0][1], seg[1][1])
    )
    expected = []
    for _, group in egress_frame.groupby(["cni", "condition"], sort=False):
        logs = np.log(group[group["status"] == "ok"]["value"].to_numpy())
        low, high = scipy.stats.t.interval(
            0.95, logs.size - 1, loc=logs.mean(), scale=scipy.stats.sem(logs)
        )
        expected += [math.exp(low), math.exp(high)]
    assert min(spans) > 0
    assert spans == pytest.approx(sorted(expected), rel=1e-9)


def test_bar_figure_names_the_flagged_outlier_run(egress_frame):
    figure = report.figure_bars(egress_frame, "egress", "throughput")
    notes = " ".join(text.get_text() for text in figure.texts)
    assert "vxlan-gateway-on-3" in notes
    assert "failed run" in notes


def test_bar_figure_without_the_metric_raises(egress_frame):
    with pytest.raises(InsufficientDataError, match="latency"):
        report.figure_bars(egress_frame, "egress", "latency")


def test_runs_figure_is_a_seaborn_strip_of_every_ok_run(egress_frame):
    figure = report.figure_runs(egress_frame, "egress", "throughput")
    strips = {c.get_label(): c for c in figure.axes[0].collections if c.get_label()[0] != "_"}
    expected = egress_frame[
        (egress_frame["cni"] == "routed")
        & (egress_frame["condition"] == "gateway-off")
        & (egress_frame["status"] == "ok")
    ]["value"].to_numpy()
    points = np.asarray(strips["routed / gateway-off"].get_offsets())
    assert sorted(points[:, 1]) == pytest.approx(sorted(expected))
    # Jittered around one x per (condition, CNI): the strip, not a line in run order.
    assert np.ptp(points[:, 0]) > 0
    assert len({round(float(x)) for x in points[:, 0]}) == 1


def test_runs_figure_draws_cnibench_intervals_never_a_seaborn_bootstrap(egress_frame):
    figure = report.figure_runs(egress_frame, "egress", "throughput")
    ax = figure.axes[0]
    intervals = sorted(
        (float(seg[0][1]), float(seg[1][1]))
        for collection in ax.collections
        if collection.get_label() == "_interval"
        for seg in collection.get_segments()
    )
    centres = sorted(
        float(seg[0][1])
        for collection in ax.collections
        if collection.get_label() == "_estimate"
        for seg in collection.get_segments()
    )
    expected_intervals, expected_centres = [], []
    for _, group in egress_frame.groupby(["cni", "condition"], sort=False):
        logs = np.log(group[group["status"] == "ok"]["value"].to_numpy())
        low, high = scipy.stats.t.interval(
            0.95, logs.size - 1, loc=logs.mean(), scale=scipy.stats.sem(logs)
        )
        expected_intervals.append((math.exp(low), math.exp(high)))
        expected_centres.append(math.exp(logs.mean()))
    assert len(intervals) == 4
    for drawn, wanted in zip(intervals, sorted(expected_intervals), strict=True):
        assert drawn == pytest.approx(wanted, rel=1e-9)
    assert centres == pytest.approx(sorted(expected_centres), rel=1e-9)


def test_seaborn_is_imported_by_the_figures_when_they_draw(egress_frame, tmp_path):
    # In a fresh interpreter: importing the report costs no seaborn, drawing runs and ECDFs does.
    frame = tmp_path / "frame.pkl"
    egress_frame.to_pickle(frame)
    probe = (
        "import sys, pandas as pd\n"
        "from cnibench import report\n"
        "before = 'seaborn' in sys.modules\n"
        f"report.figure_runs(pd.read_pickle({str(frame)!r}), 'egress', 'throughput')\n"
        "print(before, 'seaborn' in sys.modules)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["False", "True"]


def test_table_runs_has_runs_then_avg_and_sample_std(egress_frame):
    table = report.table_runs(egress_frame, "egress", "gateway-off", cni="vxlan")
    values = egress_frame[
        (egress_frame["cni"] == "vxlan")
        & (egress_frame["condition"] == "gateway-off")
        & (egress_frame["status"] == "ok")
    ]["value"].to_numpy()
    column = table["throughput [bits/s]"]
    assert list(table.index) == [f"Run {i}" for i in range(1, 7)] + ["Avg", "Std Dev"]
    assert column["Avg"] == pytest.approx(sum(values) / 6)
    assert column["Std Dev"] == pytest.approx(math.sqrt(sum((values - values.mean()) ** 2) / 5))


def test_table_runs_with_several_cnis_needs_cni(egress_frame):
    with pytest.raises(ConfigError, match="cni="):
        report.table_runs(egress_frame, "egress", "gateway-off")


# --- traffic split, on synthetic request records ---------------------------------------------


def _split_records(rng, users, weights, seconds=30.0, rate=200.0):
    names = sorted(weights)
    p = np.array([weights[n] for n in names], dtype=float)
    n = int(seconds * rate)
    return pd.DataFrame(
        {
            "time": np.sort(rng.uniform(1_700_000_000.0, 1_700_000_000.0 + seconds, n)),
            "backend": rng.choice(names, size=n, p=p / p.sum()),
            "users": float(users),
            "weights": json.dumps(weights),
        }
    )


@pytest.mark.parametrize(
    "weights", [{"v1": 90, "v2": 10}, {"a": 1, "b": 1, "c": 2}], ids=["90-10", "1-1-2"]
)
def test_split_reference_lines_are_the_normalised_weights(weights):
    records = _split_records(np.random.default_rng(SEED), 10, weights)
    figure = report.figure_split_shares(records, weights=weights)
    lines = {line.get_label(): line for line in figure.axes[0].get_lines()}
    total = sum(weights.values())
    for name, weight in weights.items():
        assert list(lines[f"{name} weight"].get_ydata()) == pytest.approx([weight / total] * 2)


def test_split_share_lines_are_shares_in_5_second_windows():
    weights = {"v1": 80, "v2": 20}
    records = _split_records(np.random.default_rng(SEED), 10, weights)
    figure = report.figure_split_shares(records)
    line = next(x for x in figure.axes[0].get_lines() if x.get_label() == "v1 share")
    t = records["time"].to_numpy()
    window = np.floor((t - t.min()) / 5.0)
    expected = [
        float(np.mean(records["backend"].to_numpy()[window == w] == "v1"))
        for w in np.unique(window)
    ]
    assert list(line.get_ydata()) == pytest.approx(expected)
    assert list(line.get_xdata()) == pytest.approx(list(np.unique(window) * 5.0))


def test_split_distance_per_users_level_is_total_variation():
    rng = np.random.default_rng(SEED)
    weights = {"v1": 50, "v2": 50}
    records = pd.concat([_split_records(rng, users, weights) for users in (1, 10, 50)])
    figure = report.figure_split_distance(records)
    whole = next(x for x in figure.axes[0].get_lines() if x.get_label() == "whole run")
    expected = [
        abs(float(np.mean(level["backend"] == "v1")) - 0.5) for _, level in records.groupby("users")
    ]
    assert list(whole.get_xdata()) == [1.0, 10.0, 50.0]
    assert list(whole.get_ydata()) == pytest.approx(expected)


def test_split_records_without_weights_raise():
    records = _split_records(np.random.default_rng(SEED), 10, {"v1": 1}).drop(columns="weights")
    with pytest.raises(ConfigError, match="weights"):
        report.figure_split_shares(records)


# --- policy scaling, on synthetic tidy rows --------------------------------------------------


@pytest.fixture
def policy_frame() -> pd.DataFrame:
    rng = np.random.default_rng(SEED)
    rows = []
    for engine, slope in (("iptables", 0.002), ("nftables", 0.0002)):
        for rules in (0, 100, 1000):
            for clients in (1, 4):
                for rep in range(3):
                    params = {"engine": engine, "rules": rules, "clients": clients}
                    value = 1e9 / (1 + slope * rules) * clients * (1 + 0.01 * rng.standard_normal())
                    run = f"p-{engine}-{rules}-{clients}-{rep}"
                    rows.append(
                        _row(
                            run,
                            "vxlan",
                            f"{engine}-{rules}-{clients}",
                            "throughput",
                            value,
                            minute=rep,
                            params=params,
                        )
                    )
                    rows.append(
                        _row(
                            run,
                            "vxlan",
                            f"{engine}-{rules}-{clients}",
                            "latency_mean",
                            0.1 + slope * rules,
                            minute=rep,
                            params=params,
                            unit="ms",
                        )
                    )
    return pd.DataFrame(rows)


def test_policy_scaling_has_one_line_per_engine_with_mean_per_rule_count(policy_frame):
    figure = report.figure_policy_scaling(policy_frame, x="rules", metrics=["throughput"])
    lines = {c.get_label(): c.lines[0] for c in figure.axes[0].containers}
    label = "vxlan clients=4 engine=nftables"
    assert set(lines) == {
        f"vxlan clients={c} engine={e}" for c in (1, 4) for e in ("iptables", "nftables")
    }
    rows = policy_frame[
        (policy_frame["metric"] == "throughput")
        & (policy_frame["param_engine"] == "nftables")
        & (policy_frame["param_clients"] == 4)
    ]
    # The same estimator as the bars, the table and the verdict: the geometric mean.
    expected = [scipy.stats.gmean(rows[rows["param_rules"] == r]["value"]) for r in (0, 100, 1000)]
    assert list(lines[label].get_xdata()) == [0, 100, 1000]
    assert list(lines[label].get_ydata()) == pytest.approx(expected)


def test_pod_scaling_puts_clients_on_the_x_axis(policy_frame):
    figure = report.figure_pod_scaling(policy_frame, metrics=["latency_mean"])
    lines = [container.lines[0] for container in figure.axes[0].containers]
    assert {tuple(line.get_xdata()) for line in lines} == {(1.0, 4.0)}
    assert figure.axes[0].get_xlabel() == "number of clients"


def test_policy_scaling_without_the_parameter_raises(egress_frame):
    with pytest.raises(ConfigError, match="rules"):
        report.figure_policy_scaling(egress_frame, x="rules")


# --- request times ---------------------------------------------------------------------------


@pytest.fixture
def request_times() -> pd.DataFrame:
    rng = np.random.default_rng(SEED)
    parts = []
    for condition, scale in (("off-rr", 200.0), ("on-rr", 900.0)):
        parts.append(
            pd.DataFrame(
                {
                    "cni": "vxlan",
                    "condition": condition,
                    "time_us": rng.lognormal(np.log(scale), 0.2, 500),
                }
            )
        )
    return pd.concat(parts, ignore_index=True)


def test_rr_ecdf_x_are_sorted_times_and_ends_at_one(request_times):
    figure = report.figure_rr_ecdf(request_times)
    line = next(x for x in figure.axes[0].get_lines() if x.get_label() == "vxlan / on-rr")
    times = request_times[request_times["condition"] == "on-rr"]["time_us"].to_numpy()
    # seaborn's ecdfplot starts each step line at -inf, proportion 0.
    assert line.get_xdata()[0] == -math.inf
    assert list(line.get_xdata()[1:]) == sorted(times)
    assert line.get_ydata()[-1] == 1.0
    assert figure.axes[0].get_xscale() == "log"


def test_rr_ecdf_has_one_facet_per_cni_with_the_same_colour_per_condition(request_times):
    routed = request_times.assign(cni="routed", time_us=request_times["time_us"] * 0.8)
    figure = report.figure_rr_ecdf(pd.concat([request_times, routed], ignore_index=True))
    assert [ax.get_title() for ax in figure.axes] == ["vxlan", "routed"]
    lines = [{line.get_label(): line for line in ax.get_lines()} for ax in figure.axes]
    assert [sorted(panel) for panel in lines] == [
        ["vxlan / off-rr", "vxlan / on-rr"],
        ["routed / off-rr", "routed / on-rr"],
    ]
    for condition in ("off-rr", "on-rr"):
        assert lines[0][f"vxlan / {condition}"].get_color() == (
            lines[1][f"routed / {condition}"].get_color()
        )
    times = routed[routed["condition"] == "on-rr"]["time_us"].to_numpy()
    assert list(lines[1]["routed / on-rr"].get_xdata()[1:]) == sorted(times)


def test_rr_histogram_counts_every_request_once(request_times):
    figure = report.figure_rr_histogram(request_times)
    steps = figure.axes[0].patches
    assert [int(step.get_data().values.sum()) for step in steps] == [500, 500]
    assert figure.axes[0].get_xscale() == "log"


def test_rr_histogram_table_shows_describe_statistics(request_times):
    figure = report.figure_rr_histogram(request_times)
    table = figure.axes[1].tables[0]
    cells = {(r, c): cell.get_text().get_text() for (r, c), cell in table.get_celld().items()}
    times = request_times[request_times["condition"] == "off-rr"]["time_us"].to_numpy()
    assert cells[(1, 1)] == "500"
    assert cells[(1, 2)] == f"{times.mean():.1f}"
    assert cells[(1, 5)] == f"{times.std(ddof=1):.1f}"


# --- readability: units per axis, error bars, legends, labels, primary metrics ---------------


def _baseline_rows(cnis, *, runs=3, conditions=None):
    """Baseline-shaped rows: sockperf latency tens of µs, wrk latency ms, both recorded in µs."""
    rng = np.random.default_rng(SEED)
    conditions = conditions or [
        (placement, load)
        for placement in ("same-node", "cross-node")
        for load in ("idle", "loaded")
    ]
    rows = []
    for cni in cnis:
        for placement, load in conditions:
            for tool, level in (("sockperf", 30.0), ("wrk", 6000.0)):
                condition = f"{placement}-{load}-{tool}"
                params = {"placement": placement, "load": load, "tool": tool}
                for rep in range(runs):
                    row = _row(
                        f"{cni}-{condition}-{rep}",
                        cni,
                        condition,
                        "latency_avg",
                        level * (1 + 0.05 * rng.standard_normal()),
                        minute=rep,
                        params=params,
                        unit="us",
                    )
                    row["scenario"] = "baseline"
                    rows.append(row)
    return pd.DataFrame(rows)


def _tick_numbers(ax):
    ax.figure.draw_without_rendering()
    return [
        (tick, float(label.get_text()))
        for tick, label in zip(ax.get_yticks(), ax.get_yticklabels(), strict=True)
        if label.get_text() and ax.get_ylim()[0] <= tick <= ax.get_ylim()[1]
    ]


def test_bars_of_different_tools_get_their_own_axis_so_small_bars_stay_visible():
    frame = _baseline_rows(["vxlan"])
    figure = report.figure_bars(frame, "baseline", "latency_avg")
    assert len(figure.axes) == 2
    for ax in figure.axes:
        top = ax.get_ylim()[1]
        heights = [p.get_height() for p in ax.patches if isinstance(p, Rectangle)]
        assert heights
        assert min(heights) > 0.25 * top


@pytest.mark.parametrize(
    ("tool", "unit", "per_recorded_us"),
    [("sockperf", "µs", 1.0), ("wrk", "ms", 1e-3)],
    ids=["sockperf-in-us", "wrk-in-ms"],
)
def test_each_value_axis_uses_one_unit_and_its_ticks_are_plain_numbers(tool, unit, per_recorded_us):
    frame = _baseline_rows(["vxlan"])
    figure = report.figure_bars(frame, "baseline", "latency_avg")
    ax = next(a for a in figure.axes if tool in a.get_title())
    assert ax.get_ylabel() == f"latency_avg [{unit}]"
    # The printed number is the tick's position (recorded µs) in the axis' single unit.
    for position, printed in _tick_numbers(ax):
        assert printed == pytest.approx(position * per_recorded_us, rel=1e-3, abs=1e-9)


@pytest.mark.parametrize(
    ("unit", "largest", "label"),
    [
        ("us", 900.0, "µs"),
        ("us", 1500.0, "ms"),
        ("ms", 0.5, "µs"),
        ("ms", 2500.0, "s"),
        ("bits/s", 2.5e9, "Gbit/s"),
        ("bits/s", 800e6, "Mbit/s"),
        ("requests/s", 45_000.0, "kreq/s"),
        ("%", 250.0, "%"),
    ],
    ids=["900us", "1500us", "half-ms", "2500ms", "2.5Gbit", "800Mbit", "45kreq", "percent"],
)
def test_axis_unit_keeps_the_largest_value_between_1_and_1000(unit, largest, label):
    shown = report.axis_unit(unit, largest)
    assert shown.label == label
    if unit != "%":
        assert 1.0 <= largest * shown.factor < 1000.0


def _bar_lows(frame):
    figure = report.figure_bars(frame, "egress", "throughput")
    segments = next(c for c in figure.axes[0].collections if isinstance(c, LineCollection))
    legend_text = " ".join(t.get_text() for legend in figure.legends for t in legend.texts)
    return figure, [min(seg[0][1], seg[1][1]) for seg in segments.get_segments()], legend_text


def test_a_positive_metric_has_a_log_scale_bar_that_stays_above_zero():
    # Two runs far apart: Student-t with one degree of freedom reaches far below zero; the
    # summary's log-scale interval does not, and nothing needs cutting.
    rows = [
        _row(f"r{i}", "vxlan", "gateway-off", "throughput", value, minute=i)
        for i, value in enumerate((1e9, 9e9))
    ]
    assert stats.confidence_interval(np.array([1e9, 9e9]), level=0.95).low < 0
    _, lows, legend = _bar_lows(pd.DataFrame(rows))
    assert min(lows) > 0.0
    assert "cut at 0" not in legend


def test_lower_error_bar_of_a_non_negative_metric_is_cut_at_zero():
    # One run measured 0 bits/s: the interval is the linear one, which reaches below zero.
    rows = [
        _row(f"r{i}", "vxlan", "gateway-off", "throughput", value, minute=i)
        for i, value in enumerate((0.0, 9e9))
    ]
    figure, lows, legend = _bar_lows(pd.DataFrame(rows))
    assert min(lows) == 0.0
    assert figure.axes[0].get_ylim()[0] == 0.0
    assert "cut at 0" in legend


def _legend_clear_of_axes(figure):
    """No legend box overlaps an axes or the figure's title."""
    figure.draw_without_rendering()
    renderer = figure.canvas.get_renderer()
    legends = figure.legends + [ax.get_legend() for ax in figure.axes if ax.get_legend()]
    assert legends
    title = figure._suptitle
    for legend in legends:
        box = legend.get_window_extent(renderer)
        for ax in figure.axes:
            if ax.axison:
                assert not box.overlaps(ax.get_window_extent(renderer)), ax.get_title()
        if title is not None and title.get_text():
            assert not box.overlaps(title.get_window_extent(renderer)), title.get_text()


def test_long_cni_labels_leave_the_title_readable():
    # The kind study's labels ran the legend into the title when it sat at the upper right.
    rows = [
        _row(f"{cni}-{i}", cni, "gateway-off", "throughput", 1e9 * (1 + i), minute=i)
        for cni in ("cilium:napi=threaded", "kube-router:gateway=traefik,kube-proxy=nftables")
        for i in range(3)
    ]
    _legend_clear_of_axes(report.figure_bars(pd.DataFrame(rows), "egress", "throughput"))


def _forest_table():
    rows = []
    for scenario, count in (("baseline", 6), ("egress", 3)):
        for i in range(count):
            ratio = 0.6 + 0.1 * i
            rows.append(
                {
                    "scenario": scenario,
                    "contrast": f"{scenario} contrast {i}",
                    "metric": "throughput",
                    "ratio": ratio,
                    "ci_low": ratio * 0.9,
                    "ci_high": ratio * 1.1,
                    "significant": i % 2 == 0,
                    "level": 0.95,
                }
            )
    return pd.DataFrame(rows)


@pytest.mark.parametrize(
    "draw",
    [
        lambda f, p, t: report.figure_bars(f, "egress", "throughput"),
        lambda f, p, t: report.figure_runs(f, "egress", "throughput"),
        lambda f, p, t: report.figure_policy_scaling(p, metrics=["throughput", "latency_mean"]),
        lambda f, p, t: report.figure_rr_ecdf(t),
        lambda f, p, t: report.figure_rr_histogram(t),
        lambda f, p, t: report.figure_forest(_forest_table()),
    ],
    ids=["bars", "runs", "policy-scaling", "rr-ecdf", "rr-histogram", "forest"],
)
def test_legend_sits_outside_every_axes(draw, egress_frame, policy_frame, request_times):
    _legend_clear_of_axes(draw(egress_frame, policy_frame, request_times))


def test_split_legends_sit_outside_every_axes():
    rng = np.random.default_rng(SEED)
    weights = {"v1": 50, "v2": 50}
    records = pd.concat([_split_records(rng, users, weights) for users in (1, 10)])
    _legend_clear_of_axes(report.figure_split_shares(records))
    _legend_clear_of_axes(report.figure_split_distance(records))


def test_tick_labels_of_many_groups_do_not_overlap():
    conditions = [(f"placement-{i}-with-a-long-name", "idle") for i in range(8)]
    frame = _baseline_rows(["vxlan", "routed", "flannel-host-gw"], conditions=conditions)
    figure = report.figure_bars(frame, "baseline", "latency_avg")
    figure.draw_without_rendering()
    renderer = figure.canvas.get_renderer()
    for ax in figure.axes:
        boxes = sorted(
            (label.get_window_extent(renderer) for label in ax.get_xticklabels()),
            key=lambda box: box.x0,
        )
        assert len(boxes) == 8
        for left, right in itertools.pairwise(boxes):
            assert left.x1 <= right.x0 + 0.5


def test_forest_has_one_section_per_scenario_and_metric_with_its_own_contrasts():
    table = _forest_table()
    table.loc[table.index[:2], "metric"] = "latency_avg"
    figure = report.figure_forest(table)
    titles = [ax.get_title(loc="left") for ax in figure.axes]
    assert sorted(titles) == sorted(
        {f"{s}: {m}" for s, m in zip(table["scenario"], table["metric"], strict=True)}
    )
    for ax in figure.axes:
        scenario, metric = ax.get_title(loc="left").split(": ")
        mine = table[(table["scenario"] == scenario) & (table["metric"] == metric)]
        # The section's title names the scenario, so the lines leave it out.
        assert [label.get_text() for label in ax.get_yticklabels()] == [
            contrast.removeprefix(f"{scenario} ") for contrast in mine["contrast"]
        ]


def test_panels_of_comparable_values_share_one_value_axis():
    # CPU under two tools: one unit, similar magnitudes, so the panels stay comparable.
    frame = _baseline_rows(["vxlan"])
    frame["metric"] = "cpu"
    frame["unit"] = "%"
    frame["value"] = np.where(frame["param_tool"] == "wrk", 80.0, 40.0) + frame.index % 3
    figure = report.figure_bars(frame, "baseline", "cpu")
    first, second = figure.axes
    assert first.get_ylim() == second.get_ylim()


def test_an_interval_far_above_the_bars_ends_at_three_bar_heights_with_its_value_shown():
    # Two runs 1 and 9 Gbit/s: the upper end of the two-run interval is hundreds of Gbit/s;
    # a second CNI with close runs keeps a short bar of about the same height.
    rows = [
        _row(f"r{i}", "vxlan", "gateway-off", "throughput", value, minute=i)
        for i, value in enumerate((1e9, 9e9))
    ] + [
        _row(f"s{i}", "routed", "gateway-off", "throughput", value, minute=i)
        for i, value in enumerate((4.9e9, 5.1e9))
    ]
    frame = pd.DataFrame(rows)
    (wide,) = report.bar_summary(
        frame[frame["cni"] == "vxlan"], scenario="egress", metric="throughput"
    )["ci_high"]
    assert wide > 3 * 5.1e9
    figure, _, legend = _bar_lows(frame)
    ax = figure.axes[0]
    tallest = max(patch.get_height() for patch in ax.patches)
    assert ax.get_ylim()[1] == pytest.approx(3 * tallest)
    marks = [t.get_text() for t in ax.texts if t.get_text().startswith("↑")]
    assert marks == [f"↑ {wide / 1e9:.3g}"]  # in the axis' unit, Gbit/s
    assert "off the axis" in legend


def test_intervals_within_three_bar_heights_leave_the_axis_alone():
    rows = [
        _row(f"r{i}", "vxlan", "gateway-off", "throughput", value, minute=i)
        for i, value in enumerate((4.9e9, 5.1e9, 5.0e9))
    ]
    figure, _, legend = _bar_lows(pd.DataFrame(rows))
    assert not [t for t in figure.axes[0].texts if t.get_text().startswith("↑")]
    assert "off the axis" not in legend
    assert figure.axes[0].get_ylim()[1] < 3 * 5.1e9
