"""stop_processes: SIGTERM, one shared grace, then SIGKILL to each survivor's group (real
processes, each in a session of its own as the lab starts them, so the group kill stays theirs).
"""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator

import pytest

from cnibench.backends.lab.runner import ManagedProcess, stop_processes

_IGNORES_TERM = (
    "import signal, sys, time\n"
    "signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
    "print('ready', flush=True)\n"
    "time.sleep(60)\n"
)


@pytest.fixture
def started() -> Iterator[list[ManagedProcess]]:
    processes: list[ManagedProcess] = []
    yield processes
    for proc in processes:  # whatever a failing test left behind, by PID
        if proc.popen.poll() is None:
            proc.popen.kill()
            proc.popen.wait(timeout=10)


def _start(started: list[ManagedProcess], name: str, argv: list[str]) -> ManagedProcess:
    popen = subprocess.Popen(argv, stdout=subprocess.PIPE, start_new_session=True)
    proc = ManagedProcess(name, "host", tuple(argv), popen, None)
    started.append(proc)
    return proc


def test_processes_that_end_on_sigterm_are_stopped_without_waiting_the_grace(
    started: list[ManagedProcess],
) -> None:
    procs = [_start(started, f"sleep-{i}", ["sleep", "60"]) for i in range(3)]
    began = time.monotonic()
    assert stop_processes(procs, grace=5.0) == []
    assert time.monotonic() - began < 2.0
    assert all(proc.popen.returncode is not None for proc in procs)


def test_a_process_ignoring_sigterm_is_killed_once_the_shared_grace_is_over(
    started: list[ManagedProcess],
) -> None:
    stubborn = _start(started, "stubborn", [sys.executable, "-c", _IGNORES_TERM])
    assert stubborn.popen.stdout is not None
    assert stubborn.popen.stdout.readline() == b"ready\n"  # its handler is in place
    polite = _start(started, "polite", ["sleep", "60"])
    began = time.monotonic()
    assert stop_processes([stubborn, polite], grace=0.5) == []
    took = time.monotonic() - began
    assert 0.5 <= took < 3.0, took
    assert stubborn.popen.returncode == -9
    assert polite.popen.returncode == -15
