"""The regression comparison: threshold syntax, metric directions, the log-scale interval,
matching, the gate's verdicts and its table and Markdown (cnibench.report.compare)."""

from __future__ import annotations

import math
import re
import warnings
from pathlib import Path

import numpy as np
import pytest
import scipy.stats
from compare_support import Condition, write_result_set

from cnibench import stats
from cnibench.errors import ConfigError, InsufficientDataError
from cnibench.report import compare_results
from cnibench.report.compare import (
    COMPARISON_COLUMNS,
    METRIC_DIRECTIONS,
    Answer,
    Direction,
    Verdict,
    compare_result_sets,
    log_ratio_interval,
    parse_threshold,
    write_markdown,
)
from cnibench.results import load_results

SCENARIOS_DIR = Path(__file__).resolve().parents[2] / "src" / "cnibench" / "scenarios"
TOOLS_DIR = SCENARIOS_DIR.parent / "tools"
"""Where measurements are made: the scenarios, and the tools' declarations of what a baseline
run of them records."""
BASE = [10.0e9, 10.4e9, 9.8e9, 10.1e9]
"""Throughput of four baseline runs, bits/s."""


def _scipy_log_interval(baseline, candidate, level=0.95):
    """Ratio of geometric means and its interval from scipy's Welch test on the logs."""
    result = scipy.stats.ttest_ind(np.log(candidate), np.log(baseline), equal_var=False)
    ci = result.confidence_interval(confidence_level=level)
    ratio = scipy.stats.gmean(candidate) / scipy.stats.gmean(baseline)
    return ratio, math.exp(ci.low), math.exp(ci.high)


def _sets(tmp_path, baseline, candidate):
    base = write_result_set(tmp_path / "base", baseline, session_id="20261122T100000Z-00000a")
    cand = write_result_set(tmp_path / "cand", candidate, session_id="20261122T110000Z-00000b")
    return load_results(base), load_results(cand)


# ---------------------------------------------------------------- threshold syntax


@pytest.mark.parametrize(
    ("text", "fraction"),
    [
        ("5%", 0.05),
        ("0.05", 0.05),
        (" 2.5 % ", 0.025),
        ("0%", 0.0),
        ("0", 0.0),
        (".1", 0.1),
        ("100%", 1.0),
    ],
    ids=["percent", "fraction", "spaces", "zero-percent", "zero", "leading-dot", "hundred"],
)
def test_threshold_accepts_percent_or_fraction(text, fraction):
    assert parse_threshold(text) == pytest.approx(fraction)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("-5%", "must not be negative"),
        ("-0.05", "must not be negative"),
        ("101%", "at most 100%"),
        ("5", "write 5% for per cent"),
        ("1", "write 1% for per cent"),
        ("five", "write a percentage such as 5%"),
        ("", "write a percentage such as 5%"),
        ("5%%", "write a percentage such as 5%"),
        ("nan", "write a percentage such as 5%"),
        ("inf%", "write a percentage such as 5%"),
        ("1e-2", "write a percentage such as 5%"),
    ],
    ids=[
        "negative-percent",
        "negative-fraction",
        "over-100",
        "bare-5",
        "bare-1",
        "word",
        "empty",
        "double-percent",
        "nan",
        "inf",
        "exponent",
    ],
)
def test_bad_threshold_is_one_line_config_error(text, message):
    with pytest.raises(ConfigError) as caught:
        parse_threshold(text)
    assert message in str(caught.value)
    assert "\n" not in str(caught.value)


# ---------------------------------------------------------------- directions


def test_every_gated_metric_is_one_a_scenario_records():
    paths = [*SCENARIOS_DIR.glob("*.py"), *TOOLS_DIR.glob("*.py")]
    sources = "\n".join(path.read_text() for path in paths)
    recorded = set(re.findall(r'Measurement\(\s*"([a-z0-9_]+)"', sources)) | {"cpu", "ram"}
    assert set(METRIC_DIRECTIONS) - recorded == set()


@pytest.mark.parametrize(
    ("metric", "direction"),
    [
        ("throughput", Direction.HIGHER_IS_BETTER),
        ("requests_per_second", Direction.HIGHER_IS_BETTER),
        ("new_connections_per_second", Direction.HIGHER_IS_BETTER),
        ("latency_avg", Direction.LOWER_IS_BETTER),
        ("rtt_mean", Direction.LOWER_IS_BETTER),
        ("rr_mean", Direction.LOWER_IS_BETTER),
        ("cpu", Direction.LOWER_IS_BETTER),
        ("ram", Direction.LOWER_IS_BETTER),
    ],
)
def test_direction_of_the_headline_metrics(metric, direction):
    assert METRIC_DIRECTIONS[metric] is direction


def test_counts_and_diagnostics_are_not_gated():
    for metric in ("retransmits", "throughput_sender", "failed_requests", "receive_rate"):
        assert metric not in METRIC_DIRECTIONS


# ---------------------------------------------------------------- the log-scale interval


@pytest.mark.parametrize(
    ("baseline", "candidate"),
    [
        (BASE, [8.1e9, 8.3e9, 7.9e9]),
        ([103.0, 150.0], [240.0, 235.0]),
        ([1.0, 2.0, 4.0, 8.0, 16.0], [3.0, 3.1]),
    ],
    ids=["throughput", "two-runs", "wide"],
)
@pytest.mark.parametrize("level", [0.95, 0.9])
def test_log_ratio_interval_equals_scipy_welch_on_logs(baseline, candidate, level):
    got = log_ratio_interval(baseline, candidate, level=level)
    ratio, low, high = _scipy_log_interval(baseline, candidate, level)
    assert got.ratio == pytest.approx(ratio, rel=1e-12)
    assert (got.low, got.high) == pytest.approx((low, high), rel=1e-9)
    assert (got.n_baseline, got.n_candidate) == (len(baseline), len(candidate))


def test_log_interval_stays_positive_and_finite_where_fieller_does_not():
    # Two baseline runs far apart: the baseline mean is not clearly non-zero at n = 2.
    baseline, candidate = [1.0e9, 9.0e9], [4.0e9, 5.0e9]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", stats.DegenerateDataWarning)
        fieller = stats.compare(baseline, candidate)
    assert not (math.isfinite(fieller.ratio_ci_low) and fieller.ratio_ci_low > 0)
    got = log_ratio_interval(baseline, candidate)
    assert 0.0 < got.low < got.ratio < got.high < math.inf


def test_swapping_the_sides_inverts_the_interval():
    forward = log_ratio_interval(BASE, [8.1e9, 8.3e9, 7.9e9])
    backward = log_ratio_interval([8.1e9, 8.3e9, 7.9e9], BASE)
    assert backward.ratio == pytest.approx(1.0 / forward.ratio)
    assert (backward.low, backward.high) == pytest.approx((1.0 / forward.high, 1.0 / forward.low))


def test_non_positive_values_are_refused():
    with pytest.raises(InsufficientDataError, match="positive"):
        log_ratio_interval([0.0, 1.0], [1.0, 2.0])


# ---------------------------------------------------------------- matching


def test_conditions_match_on_scenario_cni_condition_and_parameters(tmp_path):
    same = Condition({"throughput": BASE})
    other_cni = Condition({"throughput": BASE}, cni="vxlan")
    other_params = Condition(
        {"throughput": BASE},
        parameters={"placement": "same-node", "load": "idle", "tool": "iperf3", "x": 1},
    )
    base, cand = _sets(tmp_path, [same, other_cni], [same, other_params])
    comparison = compare_result_sets(base, cand, allow_missing=True)
    assert comparison.frame["cni"].tolist() == ["routed"]
    assert [key[1] for key in comparison.only_baseline] == ["vxlan"]
    assert [key[3] for key in comparison.only_candidate] == [
        '{"load": "idle", "placement": "same-node", "tool": "iperf3", "x": 1}'
    ]
    assert (
        "only in the baseline (missing in the candidate, not gated (--allow-missing)):"
        " baseline/vxlan/same-node-idle-iperf3"
    ) in comparison.text()
    # Unless allowed, the condition the candidate lacks fails the gate, named.
    strict = compare_result_sets(base, cand).frame.set_index("cni")
    assert strict.loc["vxlan", "verdict"] == Verdict.MISSING
    assert strict.loc["vxlan", "regression"]


def test_failed_unverified_and_ungated_records_are_left_out(tmp_path):
    baseline = Condition(
        {"throughput": [*BASE, 1.0], "retransmits": [1.0, 2.0, 3.0, 4.0, 5.0]}, failed_runs=(4,)
    )
    unverified = Condition({"throughput": [1.0, 1.0]}, cni="vxlan", verified=False)
    candidate = Condition({"throughput": BASE, "retransmits": [9.0, 9.0, 9.0, 9.0]})
    base, cand = _sets(tmp_path, [baseline, unverified], [candidate, unverified])
    frame = compare_results(base, cand)
    assert frame["metric"].tolist() == ["throughput"]
    row = frame.iloc[0]
    assert row["n_baseline"] == len(BASE)
    # The one estimator of every table: the geometric mean of every run (none trimmed).
    assert row["baseline_mean"] == pytest.approx(scipy.stats.gmean(BASE))


def test_nothing_in_common_is_insufficient_data(tmp_path):
    base, cand = _sets(
        tmp_path,
        [Condition({"throughput": BASE})],
        [Condition({"throughput": BASE}, condition="cross-node-idle-iperf3")],
    )
    with pytest.raises(InsufficientDataError, match="no condition is in both"):
        compare_results(base, cand)


def test_a_side_without_usable_runs_is_insufficient_data(tmp_path):
    base, cand = _sets(
        tmp_path,
        [Condition({"throughput": BASE})],
        [Condition({"throughput": BASE}, verified=False)],
    )
    with pytest.raises(InsufficientDataError, match="candidate has no successful verified run"):
        compare_results(base, cand)


# ---------------------------------------------------------------- verdicts and the gate


@pytest.mark.parametrize(
    ("metric", "factor", "threshold"),
    [
        ("throughput", 0.80, 0.05),
        ("throughput", 0.97, 0.05),
        ("throughput", 0.97, 0.0),
        ("throughput", 1.20, 0.05),
        ("throughput", 1.00, 0.05),
        ("throughput", 0.95, 0.05),
        ("rtt_mean", 1.20, 0.05),
        ("rtt_mean", 1.05, 0.05),
        ("rtt_mean", 0.80, 0.05),
        ("cpu", 1.03, 0.05),
    ],
    ids=[
        "throughput-20pct-lower",
        "throughput-3pct-lower",
        "throughput-3pct-lower-threshold-0",
        "throughput-higher",
        "throughput-same",
        "throughput-at-threshold",
        "rtt-20pct-higher",
        "rtt-at-threshold",
        "rtt-lower",
        "cpu-3pct-higher",
    ],
)
def test_verdict_follows_the_one_sided_test_the_threshold_and_the_direction(
    tmp_path, metric, factor, threshold
):
    """A regression is a ratio worse than the threshold that is also significantly worse:
    scipy's one-sided Welch test on the logs at the gate's 1 % (one comparison, so Holm
    changes nothing). The whole interval beyond the threshold (the old rule) caught a real
    10 % regression 30 % of the time at n = 5. With one session a side that is only what the
    runs say: the answer is undecided, and says so; a given session SD of 0 decides it by
    Student's t on the logs."""
    noise = np.array([1.0, 1.01, 0.99, 1.005, 0.995])
    baseline = (1000.0 * noise).tolist()
    candidate = (1000.0 * factor * noise[::-1] * 1.002).tolist()
    base, cand = _sets(tmp_path, [Condition({metric: baseline})], [Condition({metric: candidate})])
    row = compare_results(base, cand, threshold=threshold).iloc[0]
    decided = compare_results(base, cand, threshold=threshold, session_sd=0.0).iloc[0]

    ratio, low, high = _scipy_log_interval(baseline, candidate)
    higher_is_better = metric == "throughput"
    one_sided = scipy.stats.ttest_ind(
        np.log(candidate),
        np.log(baseline),
        equal_var=False,
        alternative="less" if higher_is_better else "greater",
    ).pvalue
    if higher_is_better:
        worse, beyond, better = high < 1, ratio < 1 - threshold, low > 1
    else:
        worse, beyond, better = low > 1, ratio > 1 + threshold, high < 1
    regression = beyond and one_sided <= 0.01
    expected = Verdict.WORSE if worse else Verdict.BETTER if better else Verdict.NO_CHANGE
    assert row["verdict"] == expected
    assert not row["regression"]
    assert row["answer"] == Answer.UNDECIDED
    assert ("regressed at the runs' noise alone" in row["decide"]) == regression
    assert row["p_value"] == pytest.approx(one_sided)
    assert (row["ratio"], row["ci_low"], row["ci_high"]) == pytest.approx((ratio, low, high))
    student = scipy.stats.ttest_ind(
        np.log(candidate),
        np.log(baseline),
        alternative="less" if higher_is_better else "greater",
    ).pvalue
    assert decided["p_value"] == pytest.approx(student)
    assert bool(decided["regression"]) == (beyond and student <= 0.01)


@pytest.mark.parametrize("metric", ["throughput", "rtt_mean"])
def test_the_cases_above_reach_every_verdict(tmp_path, metric):
    """Each direction's cases give regression, worse (an interval across the threshold),
    better and no change, so the test above checks every branch of the rule."""
    noise = np.array([1.0, 1.01, 0.99, 1.005, 0.995])
    worse = 0.97 if metric == "throughput" else 1.03
    seen = set()
    for factor in (0.8, 1.2, 1.0, worse):
        base, cand = _sets(
            tmp_path / str(factor),
            [Condition({metric: (1000.0 * noise).tolist()})],
            [Condition({metric: (1000.0 * factor * noise[::-1] * 1.002).tolist()})],
        )
        seen.add(compare_results(base, cand, session_sd=0.0).iloc[0]["verdict"])
    assert seen == {Verdict.REGRESSION, Verdict.WORSE, Verdict.BETTER, Verdict.NO_CHANGE}


def test_one_baseline_run_or_non_positive_values_give_na_and_never_fail_the_gate(tmp_path):
    # One *candidate* run fails the gate instead (tests/unit/test_gate_loopholes.py).
    base, cand = _sets(
        tmp_path,
        [Condition({"throughput": [10.0e9], "cpu": [0.0, 0.0, 0.0]})],
        [Condition({"throughput": [1.0e9, 1.1e9, 0.9e9], "cpu": [90.0, 91.0, 92.0]})],
    )
    comparison = compare_result_sets(base, cand)
    assert set(comparison.frame["verdict"]) == {Verdict.NOT_APPLICABLE}
    assert not comparison.regressed
    assert all(comparison.frame["note"] != "")
    # Without an interval nothing is decided, and each row says what would decide it.
    assert comparison.answer is Answer.UNDECIDED
    assert all(comparison.frame["decide"] != "")


def test_table_is_worst_first_with_regressions_on_top(tmp_path):
    noise = [1.0, 1.01, 0.99]
    baseline = Condition({"throughput": [1e9 * v for v in noise], "rtt_mean": noise})
    candidate = Condition(
        {"throughput": [0.5e9 * v for v in noise], "rtt_mean": [1.3 * v for v in noise]}
    )
    faster = Condition({"throughput": [1e9 * v for v in noise]}, condition="cross-node-idle-iperf3")
    slightly = Condition(
        {"throughput": [0.98e9 * v for v in noise]}, condition="cross-node-idle-iperf3"
    )
    base, cand = _sets(tmp_path, [baseline, faster], [candidate, slightly])
    frame = compare_results(base, cand, session_sd=0.0)
    assert list(frame.columns) == list(COMPARISON_COLUMNS)
    # throughput halved (x0.5) is worse than rtt x1.3, both regressions, then the 2 % loss.
    assert frame[["metric", "condition"]].values.tolist() == [
        ["throughput", "same-node-idle-iperf3"],
        ["rtt_mean", "same-node-idle-iperf3"],
        ["throughput", "cross-node-idle-iperf3"],
    ]
    assert frame["regression"].tolist() == [True, True, False]


# ---------------------------------------------------------------- output


def _regressed(tmp_path, session_sd=0.01):
    """Throughput halved, CPU the same; one session a side, with a session SD given."""
    noise = [1.0, 1.01, 0.99]
    base, cand = _sets(
        tmp_path,
        [Condition({"throughput": [1e9 * v for v in noise], "cpu": [50.0 * v for v in noise]})],
        [Condition({"throughput": [0.5e9 * v for v in noise], "cpu": [50.0 * v for v in noise]})],
    )
    return compare_result_sets(base, cand, session_sd=session_sd)


def test_regression_line_names_metric_condition_ratio_and_interval(tmp_path):
    comparison = _regressed(tmp_path)
    (line,) = comparison.regression_lines()
    row = comparison.regressions.iloc[0]
    assert line.startswith("REGRESSION throughput of baseline/routed/same-node-idle-iperf3: ")
    # Four significant digits (report.tables.format_number), the one format of every table.
    assert f"ratio {row['ratio']:#.4g}" in line
    assert f"{row['ci_low']:#.4g}-{row['ci_high']:#.4g}" in line
    assert "n = 3 vs 3" in line
    assert "below 0.9500" in line


def test_text_table_answers_first_then_one_line_per_comparison(tmp_path):
    comparison = _regressed(tmp_path)
    lines = comparison.text().splitlines()
    assert lines[0].startswith("REGRESSED: 1 regression beyond 5%; ")
    assert "; 2 metric comparisons of 1 condition" in lines[0]
    # One baseline session: the session-to-session SD is the one given, and the table says so.
    assert lines[1].startswith("session-to-session SD 1% as given by --session-sd")
    assert "false-alarm rate" in lines[0]
    assert "session SD 1% as given" in lines[0]
    assert lines[2].split()[:3] == ["verdict", "metric", "condition"]
    assert lines[3].split()[:2] == ["REGRESSION", "throughput"]
    assert len(lines) == 5


def test_markdown_is_a_table_with_one_row_per_comparison(tmp_path):
    comparison = _regressed(tmp_path)
    markdown = comparison.markdown()
    rows = [line for line in markdown.splitlines() if line.startswith("|")]
    # The regression's table (verdict ... why), then the one within threshold, folded.
    header, separator, regressed, within_header, within_separator, within = rows
    assert header.count("|") == separator.count("|") == 10
    assert regressed.count("|") - regressed.count("\\|") == 10
    assert [cell.strip() for cell in regressed.split("|")[1:4]] == [
        "**REGRESSION**",
        "throughput",
        "baseline/routed/same-node-idle-iperf3",
    ]
    assert within.split("|")[1].strip() == "cpu"
    assert within_header.count("|") == within.count("|") == 8
    # Numbers are right-aligned where the Markdown is shown.
    assert separator.split("|")[4].strip().endswith(":")
    assert within_separator.split("|")[3].strip().endswith(":")
    assert markdown.startswith("### cnibench compare: **REGRESSED** (1 regression beyond 5%")
    assert markdown.index("#### Regressed") < markdown.index("<details>") < markdown.index("| cpu")


def test_markdown_escapes_table_syntax_in_names(tmp_path):
    odd = Condition({"throughput": BASE}, condition="a|b_c")
    base, cand = _sets(tmp_path, [odd], [odd])
    markdown = compare_result_sets(base, cand).markdown()
    (body,) = [line for line in markdown.splitlines() if "a\\|b" in line]
    assert "a\\|b\\_c" in body
    assert body.count("|") - body.count("\\|") == 9  # undecided: 7 cells and what decides it


def test_markdown_file_is_written_whole(tmp_path):
    comparison = _regressed(tmp_path)
    path = write_markdown(comparison, tmp_path / "comment.md")
    assert path.read_text() == comparison.markdown()
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []


def test_markdown_into_a_missing_directory_is_a_config_error(tmp_path):
    comparison = _regressed(tmp_path)
    with pytest.raises(ConfigError, match="cannot write --markdown"):
        write_markdown(comparison, tmp_path / "missing" / "comment.md")
    assert not (tmp_path / "missing").exists()


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"threshold": -0.05}, "threshold must be a fraction in"),
        ({"threshold": 5}, "threshold must be a fraction in"),
        ({"threshold": "5%"}, "threshold must be a fraction in"),
        ({"level": 1.0}, "level must be strictly between 0 and 1"),
    ],
    ids=["negative-threshold", "percent-number", "text-threshold", "level-1"],
)
def test_library_options_are_checked(tmp_path, options, message):
    base, cand = _sets(
        tmp_path, [Condition({"throughput": BASE})], [Condition({"throughput": BASE})]
    )
    with pytest.raises(ConfigError, match=message):
        compare_results(base, cand, **options)


# ---------------------------------------------------------------- issue 23: modes, sessions


def _several_sessions(tmp_path, means, *, metric="throughput"):
    """A baseline directory of A/A sessions, one per mean, each with the same relative noise."""
    noise = [1.0, 1.01, 0.99, 1.005, 0.995]
    for i, mean in enumerate(means):
        write_result_set(
            tmp_path / "base",
            [Condition({metric: [mean * v for v in noise]})],
            session_id=f"20261122T1{i}0000Z-00000{i}",
        )
    return load_results(tmp_path / "base", sessions="all")


def test_several_baseline_sessions_put_their_variance_into_the_interval(tmp_path):
    base = _several_sessions(tmp_path, [100.0, 104.0, 97.0])
    cand_dir = write_result_set(
        tmp_path / "cand",
        [Condition({"throughput": [95.0, 95.5, 94.5, 95.2, 94.8]})],
        session_id="20261123T100000Z-00000c",
    )
    comparison = compare_result_sets(base, load_results(cand_dir))
    assert comparison.between is not None
    assert "session-to-session SD" in comparison.text().splitlines()[1]
    # By hand: the three session means of the logs have the runs' own noise removed.
    logs = [
        np.log(np.array([m * v for v in [1.0, 1.01, 0.99, 1.005, 0.995]])) for m in (100, 104, 97)
    ]
    means = np.array([v.mean() for v in logs])
    within = np.mean([v.var(ddof=1) / v.size for v in logs])
    assert comparison.between.variance == pytest.approx(means.var(ddof=1) - within)
    # Wider than Welch on the pooled runs, which treats 15 runs of 3 sessions as independent.
    row = comparison.frame.iloc[0]
    pooled = np.concatenate([np.exp(v) for v in logs])
    _, low, high = _scipy_log_interval(pooled, [95.0, 95.5, 94.5, 95.2, 94.8])
    assert row["ci_high"] / row["ci_low"] > high / low


def test_one_baseline_session_warns_that_session_variance_is_missing(tmp_path):
    comparison = _regressed(tmp_path, session_sd=None)
    assert comparison.between is None
    assert "the false-alarm rate can be far above 1%" in comparison.warning()
    assert "give --session-sd" in comparison.warning()
    assert "far above 1%" in comparison.markdown()
    assert comparison.answer is Answer.UNDECIDED


def test_non_inferiority_fails_unless_the_bound_clears_the_threshold(tmp_path):
    noise = np.array([1.0, 1.01, 0.99, 1.005, 0.995])
    base, cand = _sets(
        tmp_path,
        [Condition({"throughput": (1000.0 * noise).tolist()})],
        [Condition({"throughput": (1000.0 * 0.97 * noise[::-1]).tolist()})],
    )
    _, low, _ = _scipy_log_interval((1000.0 * noise).tolist(), (970.0 * noise[::-1]).tolist())
    strict = compare_result_sets(base, cand, threshold=0.02, mode="non-inferiority")
    lenient = compare_result_sets(base, cand, threshold=0.10, mode="non-inferiority")
    assert low < 0.98  # 3 % worse: not shown within 2 %
    assert strict.frame.iloc[0]["verdict"] == Verdict.NOT_SHOWN
    assert strict.regressed
    assert low > 0.90  # shown within 10 %
    assert not lenient.regressed
    with pytest.raises(ConfigError, match="mode must be one of"):
        compare_result_sets(base, cand, mode="superiority")


def test_a_total_failure_fails_the_gate(tmp_path):
    base, cand = _sets(
        tmp_path,
        [Condition({"throughput": [10e9, 10.2e9, 9.9e9]})],
        [Condition({"throughput": [0.0, 0.0, 0.0]})],
    )
    comparison = compare_result_sets(base, cand)
    assert comparison.regressed
    (line,) = comparison.regression_lines()
    assert "TOTAL FAILURE: every candidate run is 0" in line
