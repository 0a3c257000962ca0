"""The gate decides (issue: "the gate answers three ways and exits three ways"): 0 within
threshold, 1 regressed, 3 undecided naming what would decide it; one baseline session cannot
bound false alarms; the false-alarm rate is the baselines' own; an impossible 0, a missing
metric or condition fails; the Markdown fits a pull-request comment; JUnit XML for CI.

The inputs are the committed kind study (docs/results/kind-2026-11-27, real measurements):
its first two sessions measured flannel with kube-proxy iptables (the second without the
1000-Service condition), copied and edited as each case says. Each case is one a user found
passing (or printing a fixed rate) before.
"""

from __future__ import annotations

import json
import math
import shutil
import xml.etree.ElementTree as ET
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from compare_support import Condition, run_compare, write_result_set
from scipy import stats as sps

from cnibench.cli import EXIT_FAILED, EXIT_OK, EXIT_UNDECIDED, EXIT_USAGE
from cnibench.report.compare import (
    MARKDOWN_LIMIT,
    Answer,
    Verdict,
    compare_result_sets,
    zero_is_impossible,
)
from cnibench.results import load_results
from cnibench.stats.ratios import false_alarm_beyond, false_alarm_not_cleared

STUDY = Path(__file__).resolve().parents[2] / "docs" / "results" / "kind-2026-11-27"
IPTABLES = ("20261127T154725Z-7745a0", "20261127T155417Z-c4539a")
"""The study's two flannel sessions with kube-proxy iptables (the second lacks 1000svc)."""
SOCKPERF = "baseline/flannel/cross-node-idle-sockperf"

Record = dict[str, Any]


def _copy(
    session: str,
    results: Path,
    *,
    new_id: str | None = None,
    edit: Callable[[Record], Record | None] | None = None,
) -> Path:
    """Copy one of the study's sessions into ``results`` (under ``new_id``, as another session),
    passing each record through ``edit`` (``None`` drops it)."""
    target = results / (new_id or session)
    shutil.copytree(STUDY / session, target)
    for path in sorted((target / "runs").glob("*.json")):
        run = json.loads(path.read_text())
        records = []
        for record in run["records"]:
            if new_id:
                record["session_id"] = new_id
            kept = edit(record) if edit else record
            if kept is not None:
                records.append(kept)
        if new_id:
            run["session_id"] = new_id
        run["records"] = records
        path.write_text(json.dumps(run))
    return results


@pytest.fixture(scope="module")
def iptables(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A baseline of the study's two iptables sessions (A/A: the same code, two sessions)."""
    base = tmp_path_factory.mktemp("iptables")
    for session in IPTABLES:
        _copy(session, base)
    return base


def _candidate(tmp_path: Path, edit: Callable[[Record], Record | None]) -> Path:
    return _copy(IPTABLES[0], tmp_path / "cand", new_id="20261128T100000Z-cand00", edit=edit)


def _scaled(metric: str, factor: float) -> Callable[[Record], Record]:
    def edit(record: Record) -> Record:
        if record["metric"] == metric:
            record["value"] *= factor
        return record

    return edit


def _stderr_lines(done: Any, prefix: str) -> list[str]:
    return [line for line in done.stderr.splitlines() if line.startswith(f"cnibench: {prefix}")]


def test_a_15_percent_throughput_cut_with_undecided_rows_exits_undecided(iptables, tmp_path):
    """Before: "no regression beyond 5% in 29 metric comparisons", exit 0, while the throughput
    row read undecided."""
    candidate = _copy(
        IPTABLES[0],
        tmp_path / "cand",
        new_id="20261128T100000Z-cut015",
        edit=_scaled("throughput", 0.85),
    )
    done = run_compare(iptables, candidate)
    assert done.returncode == EXIT_UNDECIDED == 3, done.stderr
    headline = done.stdout.splitlines()[0]
    assert headline.startswith("UNDECIDED: ")
    assert "no regression" not in done.stdout.lower()
    (line,) = [line for line in _stderr_lines(done, "UNDECIDED throughput") if "iperf3" in line]
    assert "ratio 0.8366" in line
    assert "measure more baseline sessions" in line  # what would decide it


def test_one_baseline_session_says_it_cannot_bound_false_alarms_and_exits_undecided(tmp_path):
    """Before: a fixed "false-alarm rate 50.7 %" (a simulated scenario's) and exit 0."""
    base = _copy(IPTABLES[0], tmp_path / "base")
    cand = _copy(IPTABLES[0], tmp_path / "cand", new_id="20261128T100000Z-same00")
    done = run_compare(base, cand)
    assert done.returncode == EXIT_UNDECIDED, done.stderr
    headline = done.stdout.splitlines()[0]
    assert "50.7" not in done.stdout
    assert "false-alarm rate not bounded: one session a side" in headline
    assert "give --session-sd" in headline
    # Each undecided row names what would decide it.
    lines = _stderr_lines(done, "UNDECIDED")
    assert lines
    assert all("--session-sd" in line for line in lines)


def test_a_given_session_sd_is_stated_and_used(tmp_path):
    base = _copy(IPTABLES[0], tmp_path / "base")
    cand = _copy(IPTABLES[0], tmp_path / "cand", new_id="20261128T100000Z-same00")
    baseline, candidate = load_results(base, sessions="all"), load_results(cand)
    comparison = compare_result_sets(baseline, candidate, session_sd=0.03)
    headline = comparison.headline()
    assert "session SD 3% as given by --session-sd" in headline
    rate = comparison.false_alarm
    assert rate is not None
    assert rate.rate is not None
    assert f"false-alarm rate at most {100 * rate.rate:.2g}% for these baselines" in headline
    assert "1 baseline session of 5 runs" in headline
    # A larger SD widens every interval it enters.
    wider = compare_result_sets(baseline, candidate, session_sd=0.10).frame
    narrow = comparison.frame
    assert (np.log(wider.ci_high / wider.ci_low) >= np.log(narrow.ci_high / narrow.ci_low)).all()


def test_the_false_alarm_rate_follows_the_baselines_at_hand(tmp_path):
    """Not the nearest entry of a fixed table: baselines of the same design (3 sessions of 5
    runs) but different session-to-session spread give different stated rates."""
    noise = (1.0, 1.01, 0.99, 1.005, 0.995)

    def stated(name: str, shifts: tuple[float, ...]) -> float:
        for i, shift in enumerate(shifts):
            values = [1e9 * math.exp(shift) * v for v in noise]
            write_result_set(
                tmp_path / name,
                [Condition({"throughput": values})],
                session_id=f"20261127T1{i}0000Z-{name}{i}",
            )
        cand = write_result_set(
            tmp_path / f"{name}-cand",
            [Condition({"throughput": [1e9 * v for v in noise]})],
            session_id="20261127T200000Z-cand",
        )
        comparison = compare_result_sets(
            load_results(tmp_path / name, sessions="all"), load_results(cand)
        )
        assert comparison.false_alarm is not None
        rate = comparison.false_alarm.rate
        assert rate is not None
        assert comparison.false_alarm.describe() in comparison.headline()
        return rate

    quiet = stated("quiet", (-0.002, 0.0, 0.002))
    noisy = stated("noisy", (-0.05, 0.0, 0.06))
    # A quiet metric must also pass the 5 % threshold to alarm: its rate is far below 1 %.
    assert quiet < 1e-4 < noisy < 0.01


def test_a_candidate_latency_of_0_fails_the_gate_naming_the_run(iptables, tmp_path):
    """Before: lower-is-better zeros were "n/a" and the gate passed."""

    def zero(record: Record) -> Record:
        if record["metric"] == "latency_avg" and record["run_id"].endswith("sockperf-r0a0"):
            record["value"] = 0.0
        return record

    candidate = _candidate(tmp_path, zero)
    done = run_compare(iptables, candidate)
    assert done.returncode == EXIT_FAILED, done.stderr
    (line,) = _stderr_lines(done, "FAILED RUNS latency_avg")
    assert f"of {SOCKPERF}: candidate run baseline-flannel-cross-node-idle-sockperf-r0a0" in line
    assert "latency_avg at 0" in line
    assert done.stdout.startswith("REGRESSED: FAILED RUNS in 1")
    allowed = run_compare(iptables, candidate, "--allow-failed-runs")
    assert allowed.returncode != EXIT_FAILED
    assert not _stderr_lines(allowed, "FAILED RUNS")


@pytest.mark.parametrize(
    ("metric", "impossible"),
    [
        ("latency_avg", True),
        ("rtt_mean", True),
        ("rr_p99", True),
        ("requests_per_second", True),
        ("new_connections_per_second", True),
        ("throughput", True),
        ("cpu", False),
        ("ram", False),
        ("cpu@egress-gw", False),
        ("retransmits", False),
    ],
    ids=lambda value: str(value),
)
def test_where_zero_is_impossible(metric, impossible):
    assert zero_is_impossible(metric) is impossible


def test_a_metric_the_candidate_lacks_is_named_and_fails(iptables, tmp_path):
    """Before: a candidate without any latency_avg record passed and nothing named it."""

    def drop(record: Record) -> Record | None:
        return None if record["metric"] == "latency_avg" else record

    candidate = _candidate(tmp_path, drop)
    done = run_compare(iptables, candidate)
    assert done.returncode == EXIT_FAILED, done.stderr
    missing = _stderr_lines(done, "MISSING latency_avg")
    assert len(missing) == 4  # each sockperf condition of the candidate's session
    assert f"MISSING latency_avg of {SOCKPERF}: the candidate recorded no latency_avg" in (
        "\n".join(missing)
    )
    allowed = run_compare(iptables, candidate, "--allow-missing")
    assert allowed.returncode != EXIT_FAILED
    assert "missing in the candidate (not gated, --allow-missing): latency_avg of" in (
        allowed.stdout
    )


def test_a_condition_the_candidate_lacks_is_named_and_fails(iptables, tmp_path):
    """Before: one "only in the baseline" line, and the gate passed."""

    def drop(record: Record) -> Record | None:
        return None if record["condition"].endswith("iptables-100svc") else record

    candidate = _candidate(tmp_path, drop)
    baseline = load_results(iptables, sessions="all")
    comparison = compare_result_sets(baseline, load_results(candidate))
    assert comparison.regressed
    missing = comparison.frame[comparison.frame["verdict"] == Verdict.MISSING]
    assert set(missing["condition"]) == {"cross-node-idle-sockperf-service-iptables-100svc"}
    assert len(missing) == 6  # its latency_avg, p50, p99, cpu, ram, cpu@flanneld
    assert comparison.answer is Answer.REGRESSED
    assert all("the candidate did not run this condition" in n for n in missing["note"])
    allowed = compare_result_sets(baseline, load_results(candidate), allow_missing=True)
    assert not allowed.regressed
    assert "only in the baseline (missing in the candidate, not gated" in allowed.text()


def test_a_regression_beside_undecided_rows_exits_1(tmp_path):
    """A regression is decided, whatever else is undecided."""
    noise = [1.0, 1.01, 0.99, 1.005, 0.995]
    wide = [1.0, 1.3, 0.7, 1.2, 0.8]
    base = write_result_set(
        tmp_path / "base",
        [Condition({"throughput": [1e9 * v for v in noise], "rtt_mean": [100 * v for v in wide]})],
        session_id="20261127T100000Z-base",
    )
    cand = write_result_set(
        tmp_path / "cand",
        [Condition({"throughput": [5e8 * v for v in noise], "rtt_mean": [100 * v for v in wide]})],
        session_id="20261127T110000Z-cand",
    )
    done = run_compare(base, cand, "--session-sd", "1%")
    assert done.returncode == EXIT_FAILED, done.stderr
    assert _stderr_lines(done, "REGRESSION throughput")
    assert _stderr_lines(done, "UNDECIDED rtt_mean")
    assert done.stdout.startswith("REGRESSED: 1 regression beyond 5%; 1 undecided")


def test_the_markdown_of_the_whole_study_fits_a_comment(tmp_path):
    """Before: ``compare --markdown`` of the study against itself was 99,104 characters."""
    markdown = tmp_path / "comment.md"
    done = run_compare(STUDY, STUDY, "--markdown", markdown)
    text = markdown.read_text()
    assert len(text) <= MARKDOWN_LIMIT == 65_536
    # Undecided first, what is within threshold folded, every row there.
    assert text.index("#### Undecided") < text.index("<details><summary>Within threshold")
    assert "left out to fit a comment" not in text
    body = [line for line in text.splitlines() if line.startswith("| ") and "---" not in line]
    headers = [line for line in body if line.startswith("| metric |")]
    assert len(body) - len(headers) == 245  # every metric comparison of the study
    assert done.returncode == EXIT_UNDECIDED, done.stderr


def test_junit_has_a_test_case_per_comparison_and_undecided_as_its_own_error(tmp_path):
    junit = tmp_path / "junit.xml"
    done = run_compare(STUDY, STUDY, "--junit", junit)
    assert done.returncode == EXIT_UNDECIDED, done.stderr
    suite = ET.parse(junit).getroot().find("testsuite")
    assert suite is not None
    cases = suite.findall("testcase")
    assert len(cases) == 245
    errors = [case.find("error") for case in cases if case.find("error") is not None]
    assert suite.get("errors") == str(len(errors)) != "0"
    assert {error.get("type") for error in errors} == {"undecided"}
    assert all(error.get("message", "").startswith("UNDECIDED ") for error in errors)
    assert suite.get("failures") == "0"


def test_junit_writes_failures_for_what_fails_the_gate(iptables, tmp_path):
    def edit(record: Record) -> Record | None:
        if record["metric"] == "latency_p99":
            return None
        if record["metric"] == "latency_avg" and record["run_id"].endswith("sockperf-r0a0"):
            record["value"] = 0.0
        return record

    candidate = _candidate(tmp_path, edit)
    junit = tmp_path / "gate.xml"
    done = run_compare(iptables, candidate, "--junit", junit, "--allow-missing")
    assert done.returncode == EXIT_FAILED, done.stderr
    suite = ET.parse(junit).getroot().find("testsuite")
    assert suite is not None
    failures = [f for case in suite.findall("testcase") if (f := case.find("failure")) is not None]
    assert {f.get("type") for f in failures} == {"failed-runs"}
    skipped = [s for case in suite.findall("testcase") if (s := case.find("skipped")) is not None]
    assert len(skipped) == 4  # latency_p99 of the four sockperf conditions: allowed, not gated
    properties = {p.get("name"): p.get("value") for p in suite.iter("property")}
    assert properties["answer"] == "regressed"
    strict = run_compare(iptables, candidate, "--junit", junit)
    assert strict.returncode == EXIT_FAILED
    suite = ET.parse(junit).getroot().find("testsuite")
    assert suite is not None
    kinds = {
        f.get("type")
        for case in suite.findall("testcase")
        if (f := case.find("failure")) is not None
    }
    assert kinds == {"failed-runs", "missing"}


def test_the_help_names_the_exit_codes():
    done = run_compare("--help")
    assert done.returncode == EXIT_OK
    help_text = " ".join(done.stdout.split())
    assert "3 undecided" in help_text
    assert "--session-sd SD" in help_text
    assert "--junit FILE" in help_text
    assert "--allow-missing" in help_text
    assert EXIT_USAGE == 2


# ---------------------------------------------------------------- the rate's statistics


@pytest.mark.parametrize(
    ("limit", "critical", "df"),
    [(1.5, 2.0, 3.0), (3.0, 2.5, 4.0), (0.5, 3.0, 1.3), (2.0, 2.0, math.inf), (1.0, 4.0, 50.0)],
    ids=["limit-binds", "far-limit", "few-df", "known-se", "many-df"],
)
def test_the_false_alarm_of_one_test_matches_a_simulation(limit, critical, df):
    rng = np.random.default_rng(7)
    z = rng.standard_normal(1_000_000)
    ratio = np.sqrt(rng.chisquare(df, z.size) / df) if math.isfinite(df) else 1.0
    simulated = float(np.mean((z > limit) & (z / ratio > critical)))
    assert false_alarm_beyond(limit, critical, df) == pytest.approx(simulated, abs=4e-4)
    not_cleared = float(np.mean(z + critical * ratio >= limit + 2.0))
    assert false_alarm_not_cleared(limit + 2.0, critical, df) == pytest.approx(
        not_cleared, abs=2e-3
    )


def test_without_a_limit_the_false_alarm_is_the_t_tests_own():
    assert false_alarm_beyond(0.0, 2.2, 6.0) == pytest.approx(float(sps.t.sf(2.2, 6.0)))
