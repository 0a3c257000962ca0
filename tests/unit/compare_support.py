"""Result sets for the comparison tests, written through the real results store.

The values are made up (these are unit tests of the matching, statistics and gate logic); the
lab tier compares result sets that real lab runs wrote (tests/lab/test_lab_compare.py).
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from cnibench.records import ParamValue, RunRecord, RunStatus
from cnibench.results import ResultsStore

UNITS = {
    "throughput": "bits/s",
    "rtt_mean": "us",
    "latency_avg": "us",
    "requests_per_second": "requests/s",
    "cpu": "%",
    "ram": "MB",
    "retransmits": "count",
    "throughput_sender": "bits/s",
}


@dataclass(frozen=True)
class Condition:
    """One condition's runs: metric -> one value per run (index = repetition)."""

    values: Mapping[str, Sequence[float]]
    condition: str = "same-node-idle-iperf3"
    cni: str = "routed"
    scenario: str = "baseline"
    parameters: Mapping[str, ParamValue] = field(
        default_factory=lambda: {"placement": "same-node", "load": "idle", "tool": "iperf3"}
    )
    verified: bool = True
    failed_runs: Sequence[int] = ()
    """Repetitions recorded as failed (their values must never count)."""


def write_result_set(
    results_dir: Path, conditions: Sequence[Condition], *, session_id: str
) -> Path:
    """Write one session holding ``conditions``; return the results directory."""
    store = ResultsStore(results_dir, session_id=session_id)
    for number, condition in enumerate(conditions):
        runs = max(len(values) for values in condition.values.values())
        for repetition in range(runs):
            run_id = f"c{number}-r{repetition}"
            failed = repetition in condition.failed_runs
            records = [
                RunRecord(
                    session_id=session_id,
                    run_id=run_id,
                    time=f"2026-11-22T10:{number:02d}:{repetition:02d}+00:00",
                    backend="lab",
                    provider="lab",
                    cni=condition.cni,
                    cni_version="6.1",
                    scenario=condition.scenario,
                    condition=condition.condition,
                    parameters=dict(condition.parameters),
                    repetition=repetition,
                    metric=metric,
                    value=float("nan") if failed else values[repetition],
                    unit=UNITS[metric],
                    verified=condition.verified,
                    status=RunStatus.FAILED if failed else RunStatus.OK,
                    reason="iperf3 died" if failed else "",
                )
                for metric, values in condition.values.items()
                if repetition < len(values)
            ]
            store.write_run(run_id, records)
    return results_dir


def run_compare(*args: object) -> subprocess.CompletedProcess[str]:
    """``cnibench compare ARGS`` in a child process, as a user runs it (exit code, stdout and
    stderr)."""
    return subprocess.run(
        [sys.executable, "-m", "cnibench.cli", "compare", *map(str, args)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
