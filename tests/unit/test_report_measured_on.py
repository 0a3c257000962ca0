"""The line that gives the answer's numbers their date and machine
(:func:`cnibench.report.data.measured_on`); a real lab run's is checked in
tests/integration/test_report_lab_verdict.py."""

from __future__ import annotations

import pandas as pd

from cnibench.report.data import measured_on


def _runs(*times: str, session: str = "s1") -> pd.DataFrame:
    return pd.DataFrame({"time": list(times), "session_id": [session] * len(times)})


def _machine(session: str, backend: str, *, cpus: int = 2, kernel: str = "6.1.0-9") -> dict:
    return {
        "session_id": session,
        "backend": backend,
        "cpu_count": cpus,
        "cpu_model": "AMD EPYC 7B13",
        "memory_bytes": 24 * 2**30,
        "kernel": kernel,
    }


def test_one_session_names_its_span_and_its_machine() -> None:
    runs = _runs("2026-11-28T15:09:30+00:00", "2026-11-28T15:02:10+00:00")
    line = measured_on(runs, pd.DataFrame([_machine("s1", "lab"), _machine("s1", "lab")]))
    assert line == (
        "measured 2026-11-28 15:02-15:09 UTC on 2 CPUs AMD EPYC 7B13, 24 GiB, kernel 6.1.0-9 (lab)"
    )


def test_sessions_over_days_and_machines_name_each_once() -> None:
    runs = pd.concat([_runs("2026-11-27T23:50:00Z"), _runs("2026-11-28T00:20:00Z", session="s2")])
    environments = pd.DataFrame(
        [
            _machine("s1", "lab"),
            _machine("s2", "kube", cpus=8, kernel="6.8.0"),
            _machine("other", "kube", cpus=64),  # a session these runs are not from
        ]
    )
    line = measured_on(runs, environments)
    assert line.startswith("measured 2026-11-27 23:50 to 2026-11-28 00:20 UTC on "), line
    assert "2 CPUs AMD EPYC 7B13, 24 GiB, kernel 6.1.0-9 (lab)" in line
    assert "8 CPUs AMD EPYC 7B13, 24 GiB, kernel 6.8.0 (kube)" in line
    assert "64 CPUs" not in line


def test_no_fingerprint_says_so_and_no_runs_say_nothing() -> None:
    runs = _runs("2026-11-28T15:02:10Z")
    assert measured_on(runs, pd.DataFrame()) == (
        "measured 2026-11-28 15:02-15:02 UTC (no machine fingerprint recorded)"
    )
    assert measured_on(runs.iloc[0:0], pd.DataFrame()) == ""
