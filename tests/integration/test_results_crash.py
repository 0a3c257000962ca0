"""A writer killed with SIGKILL mid-session loses at most the run it was writing.

A child process writes many large runs (so each write takes measurable time) and is killed at a
seeded random moment after its first few runs exist. The parent then checks that every run
file that exists is complete and intact, that leftover temporary files are ignored by
``load_results`` and removed by ``sweep_temp``.
"""

from __future__ import annotations

import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from cnibench.results import ResultsStore, load_results

SESSION_ID = "20261122T103500Z-c4a5h0"
RUNS = 400
RECORDS_PER_RUN = 400
BLOB = "x" * 1500
RAW_REPEAT = 400
"""The raw output of each run is BLOB * RAW_REPEAT (600 kB)."""

WRITER = """
import sys
from cnibench.records import RunRecord
from cnibench.results import ResultsStore

root, session_id, runs, per_run, blob, raw_repeat = sys.argv[1:7]
store = ResultsStore(root, session_id=session_id)
for run in range(int(runs)):
    run_id = f"run-{run:04d}"
    records = [
        RunRecord(
            session_id=session_id, run_id=run_id, time="2026-11-22T10:35:00+00:00",
            backend="lab", provider="lab", cni="routed", cni_version="6.18",
            scenario="baseline", condition="cross-node", parameters={"blob": blob, "index": i},
            repetition=run, metric="m", value=float(run * 100000 + i), unit="1", verified=True,
        )
        for i in range(int(per_run))
    ]
    store.write_run(run_id, records, raw={"tool.txt": blob * int(raw_repeat)})
"""


def _visible_run_files(session_dir: Path) -> list[Path]:
    runs = session_dir / "runs"
    if not runs.is_dir():
        return []
    return sorted(p for p in runs.iterdir() if p.suffix == ".json" and not p.name.startswith("."))


def _temp_files(session_dir: Path) -> list[Path]:
    return sorted(p for p in session_dir.rglob(".*.tmp-*") if p.is_file())


def _kill_writer_mid_session(root: Path, delay: float) -> None:
    child = subprocess.Popen(
        [
            sys.executable,
            "-c",
            WRITER,
            str(root),
            SESSION_ID,
            str(RUNS),
            str(RECORDS_PER_RUN),
            BLOB,
            str(RAW_REPEAT),
        ],
        stderr=subprocess.PIPE,
    )
    try:
        deadline = time.monotonic() + 60
        while len(_visible_run_files(root / SESSION_ID)) < 3:
            if child.poll() is not None:
                raise AssertionError(f"writer exited early: {child.stderr.read().decode()[-2000:]}")  # type: ignore[union-attr]
            if time.monotonic() > deadline:
                raise AssertionError("writer did not write 3 runs within 60 s")
            time.sleep(0.01)
        time.sleep(delay)
        child.send_signal(signal.SIGKILL)
        assert child.wait(timeout=10) == -signal.SIGKILL, "the writer finished before the kill"
    finally:
        if child.poll() is None:
            child.kill()
            child.wait(timeout=10)
        if child.stderr is not None:
            child.stderr.close()


@pytest.mark.parametrize("seed", [1, 2, 3, 4], ids=lambda seed: f"seed-{seed}")
def test_sigkill_loses_at_most_the_run_in_progress(tmp_path: Path, seed: int) -> None:
    delay = random.Random(seed).uniform(0.0, 0.4)
    _kill_writer_mid_session(tmp_path, delay)
    session_dir = tmp_path / SESSION_ID
    run_files = _visible_run_files(session_dir)
    leftovers = _temp_files(session_dir)

    df = load_results(tmp_path)

    run_ids = [path.stem for path in run_files]
    # Runs are written in order: the complete ones form a prefix of the sequence.
    assert run_ids == [f"run-{run:04d}" for run in range(len(run_ids))]
    assert sorted(set(df["run_id"])) == run_ids
    for run, run_id in enumerate(run_ids):
        rows = df[df["run_id"] == run_id]
        assert rows["value"].tolist() == [float(run * 100000 + i) for i in range(RECORDS_PER_RUN)]
        raw = session_dir / "raw" / run_id / "tool.txt"
        assert raw.stat().st_size == len(BLOB) * RAW_REPEAT

    store = ResultsStore(tmp_path, session_id=SESSION_ID)
    assert store.sweep_temp() == leftovers
    assert _temp_files(session_dir) == []
    assert load_results(tmp_path).equals(df)
