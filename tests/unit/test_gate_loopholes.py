"""The regression gate's loopholes of issue 32, closed: a zero or failed candidate run, too few
candidate runs, identical (quantised) runs and per-node CPU no longer pass unseen."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

import pytest
from compare_support import run_compare

from cnibench.records import RunRecord, RunStatus
from cnibench.report.compare import Answer, Verdict, compare_result_sets
from cnibench.results import ResultsStore, load_results

UNITS = {
    "throughput": "bits/s",
    "requests_per_second": "requests/s",
    "connection_success_rate": "ratio",
    "cpu": "%",
    "cpu@egress-gw": "cores",
}
NOISE = (1.0, 1.01, 0.99, 1.005, 0.995)
THROUGHPUT = [10e9 * v for v in NOISE]
"""Five baseline runs, bits/s."""


def _write(
    directory: Path,
    values: Mapping[str, Sequence[float]],
    *,
    session: str,
    failed: Sequence[int] = (),
) -> Path:
    """One session of one condition through the real results store: ``values[metric]`` is
    one value per repetition; repetitions in ``failed`` are recorded as failed runs."""
    store = ResultsStore(directory, session_id=session)
    runs = max(len(v) for v in values.values())
    for repetition in range(runs):
        run_id = f"egress-r{repetition}"
        bad = repetition in failed
        records = [
            RunRecord(
                session_id=session,
                run_id=run_id,
                time=f"2026-11-27T10:00:{repetition:02d}+00:00",
                backend="lab",
                provider="lab",
                cni="vxlan",
                cni_version="6.1",
                scenario="egress",
                condition="gateway-on",
                parameters={"gateway": "on"},
                repetition=repetition,
                metric=metric,
                value=float("nan") if bad else series[repetition],
                unit=UNITS[metric],
                verified=True,
                status=RunStatus.FAILED if bad else RunStatus.OK,
                reason="iperf3 died" if bad else "",
            )
            for metric, series in values.items()
            if repetition < len(series)
        ]
        store.write_run(run_id, records)
    return directory


def _compare(tmp_path, baseline, candidate, *, failed=(), **options):
    base = _write(tmp_path / "base", baseline, session="20261127T100000Z-00000a")
    cand = _write(tmp_path / "cand", candidate, session="20261127T110000Z-00000b", failed=failed)
    return compare_result_sets(load_results(base), load_results(cand), **options)


def _row(comparison, metric):
    frame = comparison.frame
    (index,) = frame.index[frame["metric"] == metric]
    return frame.loc[index]


def test_a_candidate_with_one_zero_run_fails_the_gate_naming_it(tmp_path):
    candidate = [10e9, 0.0, 10.1e9, 9.9e9, 10e9]
    comparison = _compare(tmp_path, {"throughput": THROUGHPUT}, {"throughput": candidate})
    assert comparison.regressed
    (line,) = comparison.regression_lines()
    assert "egress-r1" in line
    assert "at 0" in line
    assert _row(comparison, "throughput")["verdict"] == Verdict.FAILED_RUNS


def test_a_failed_candidate_run_fails_the_gate_naming_it_and_its_reason(tmp_path):
    comparison = _compare(
        tmp_path, {"throughput": THROUGHPUT}, {"throughput": THROUGHPUT}, failed=(3,)
    )
    assert comparison.regressed
    (line,) = comparison.regression_lines()
    assert "egress-r3" in line
    assert "iperf3 died" in line


def test_failed_runs_are_left_out_when_asked(tmp_path):
    candidate = [10e9, 0.0, 10.1e9, 9.9e9, 10e9]
    comparison = _compare(
        tmp_path,
        {"throughput": THROUGHPUT},
        {"throughput": candidate},
        allow_failed_runs=True,
    )
    assert not comparison.regressed
    row = _row(comparison, "throughput")
    assert row["n_candidate"] == 4
    assert "left out: egress-r1" in row["note"]


@pytest.mark.parametrize("runs", [1, 2], ids=["one-run", "two-runs"])
def test_fewer_than_three_candidate_runs_cannot_pass_and_are_undecided(tmp_path, runs):
    """Too few runs is not a regression: the gate cannot decide, and names the runs that
    would (exit 3, not 0)."""
    comparison = _compare(
        tmp_path, {"throughput": THROUGHPUT}, {"throughput": THROUGHPUT[:runs]}, session_sd=0.01
    )
    assert not comparison.regressed
    assert comparison.answer is Answer.UNDECIDED
    row = _row(comparison, "throughput")
    assert row["verdict"] == Verdict.TOO_FEW_RUNS
    assert row["answer"] == Answer.UNDECIDED
    assert f"measure at least {3 - runs} more" in row["decide"]


def test_three_candidate_runs_like_the_baseline_pass(tmp_path):
    comparison = _compare(
        tmp_path, {"throughput": THROUGHPUT}, {"throughput": THROUGHPUT[:3]}, session_sd=0.01
    )
    assert not comparison.regressed
    assert comparison.answer is Answer.WITHIN


@pytest.mark.parametrize(
    ("candidate", "regressed", "answer"),
    [(0.90, True, Answer.REGRESSED), (0.98, False, Answer.WITHIN), (1.0, False, Answer.WITHIN)],
    ids=["10pct-worse", "2pct-worse", "same"],
)
def test_identical_runs_are_judged_by_the_exact_ratio(tmp_path, candidate, regressed, answer):
    """A quantised metric (every run the same on each side) has no noise to test against:
    identical runs 10 % worse than identical baselines are a regression beyond 5 %."""
    comparison = _compare(
        tmp_path,
        {"requests_per_second": [1000.0] * 5},
        {"requests_per_second": [1000.0 * candidate] * 5},
    )
    row = _row(comparison, "requests_per_second")
    assert comparison.regressed is regressed
    assert row["answer"] == answer
    assert row["ratio"] == pytest.approx(candidate)


def test_per_node_cpu_is_gated_and_lower_is_better(tmp_path):
    gateway = [0.10 * v for v in NOISE]
    comparison = _compare(
        tmp_path,
        {"throughput": THROUGHPUT, "cpu@egress-gw": gateway},
        {"throughput": THROUGHPUT, "cpu@egress-gw": [1.5 * v for v in gateway]},
        session_sd=0.01,
    )
    row = _row(comparison, "cpu@egress-gw")
    assert row["direction"] == "lower is better"
    assert row["verdict"] == Verdict.REGRESSION
    assert comparison.regressed


def test_the_command_names_a_zero_run_and_takes_allow_failed_runs(tmp_path):
    base = _write(tmp_path / "base", {"throughput": THROUGHPUT}, session="20261127T100000Z-a")
    cand = _write(
        tmp_path / "cand",
        {"throughput": [10e9, 0.0, 10.1e9, 9.9e9, 10e9]},
        session="20261127T110000Z-b",
    )
    failing = run_compare(base, cand)
    assert failing.returncode == 1, failing.stderr
    (line,) = failing.stderr.splitlines()
    assert line.startswith("cnibench: FAILED RUNS throughput of egress/vxlan/gateway-on")
    assert "egress-r1" in line
    assert run_compare(base, cand, "--allow-failed-runs", "--session-sd", "1%").returncode == 0
