"""An interrupted ``cnibench run`` removes its labs: no namespace, link, process or state left.

The run is a real child process benchmarking the egress scenario on a real lab; it is
interrupted (SIGINT as Ctrl-C sends it, and SIGTERM) once its lab exists, at a seeded point
during set-up or measurement.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from cnibench import load_results

STATE_ROOT = Path("/run/cnibench")


def _labs_owned_by(pid: int) -> dict[str, dict[str, object]]:
    owned = {}
    for lab_json in STATE_ROOT.glob("cb*/lab.json"):
        try:
            info = json.loads(lab_json.read_text())
        except (OSError, ValueError):
            continue  # being written or removed right now
        if info.get("owner_pid") == pid:
            owned[lab_json.parent.name] = info
    return owned


def _namespaces() -> set[str]:
    out = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True, check=True)
    return {line.split()[0] for line in out.stdout.splitlines() if line.strip()}


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return (
        Path(f"/proc/{pid}").exists()
        and "zombie" not in Path(f"/proc/{pid}/status").read_text().lower()
    )


@pytest.mark.parametrize(
    ("signum", "delay_seed"),
    [(signal.SIGINT, 1), (signal.SIGINT, 2), (signal.SIGTERM, 3)],
    ids=["sigint-early", "sigint-later", "sigterm"],
)
def test_interrupted_run_leaves_nothing(tmp_path, lab_backend, signum, delay_seed):
    results = tmp_path / "results"
    run = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "cnibench.cli",
            "run",
            "--cluster",
            "lab",
            "--scenario",
            "egress",
            "--cni",
            "routed",
            "--profile",
            "smoke",
            "--results-dir",
            str(results),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 90
        labs: dict[str, dict[str, object]] = {}
        while not labs and time.monotonic() < deadline and run.poll() is None:
            labs = _labs_owned_by(run.pid)
            time.sleep(0.1)
        assert labs, f"the run never created a lab: {run.stderr.read() if run.poll() else ''}"
        # A seeded point after the lab exists: set-up, verification or measurement.
        time.sleep(random.Random(delay_seed).uniform(0.5, 6.0))
        run.send_signal(signum)
        _, stderr = run.communicate(timeout=120)
    finally:
        if run.poll() is None:
            run.kill()
            run.wait()

    assert run.returncode == 130, stderr
    assert "Traceback" not in stderr
    leftovers = {ns for ns in _namespaces() if any(ns.startswith(f"{lab}-") for lab in labs)}
    assert leftovers == set()
    for lab_id, info in labs.items():
        assert not (STATE_ROOT / lab_id).exists()
        pids = [p["pid"] for p in info.get("processes", [])]  # type: ignore[union-attr]
        assert [pid for pid in pids if _alive(pid)] == []
    if results.exists():
        # Whatever was recorded before the interrupt is complete and loadable.
        frame = load_results(results)
        assert set(frame.scenario) <= {"egress"}
