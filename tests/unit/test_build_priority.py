"""The background builds of ``nox -s tests`` get their CPU share through their session's
autogroup (sched(7)): a process's own nice does not make a session of its own yield to other
sessions. Checked on this kernel with the noxfile's own function (read from its source: the
test virtualenv has no nox), on a real process in a session of its own."""

from __future__ import annotations
import __future__

import ast
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from noxfile_syntax import constant, function_node

if not Path("/proc/self/autogroup").exists():
    pytest.skip("this kernel has no autogroups (CONFIG_SCHED_AUTOGROUP)", allow_module_level=True)


class _Log:
    def __init__(self) -> None:
        self.lines: list[str] = []

    def log(self, line: str) -> None:
        self.lines.append(line)


def _noxfile_function(name: str) -> Callable[..., Any]:
    module = ast.Module(body=[function_node(name)], type_ignores=[])
    namespace: dict[str, Any] = {}
    flags = __future__.annotations.compiler_flag  # its annotations name nox: never evaluated
    exec(compile(module, "noxfile.py", "exec", flags=flags, dont_inherit=True), namespace)
    function: Callable[..., Any] = namespace[name]
    return function


def _constant(name: str) -> int:
    value = constant(name)
    assert isinstance(value, int)
    return value


@pytest.fixture
def leader() -> Iterator[int]:
    """A process leading a session of its own, as the builds' chain does."""
    process = subprocess.Popen(["sleep", "60"], start_new_session=True)
    try:
        yield process.pid
    finally:
        process.kill()
        process.wait()


def _group_nice(pid: int) -> int:
    return int(Path(f"/proc/{pid}/autogroup").read_text().split()[-1])


def test_the_builds_session_gets_the_nice_of_each_phase(leader: int) -> None:
    set_nice = _noxfile_function("_autogroup_nice")
    alone, beside = _constant("BUILDS_NICE_ALONE"), _constant("BUILDS_NICE_BESIDE")
    assert alone > 0 > beside  # yield to the measured tests, lead beside the kind tier
    log = _Log()
    assert _group_nice(leader) == 0
    set_nice(log, leader, alone)
    assert _group_nice(leader) == alone
    set_nice(log, leader, beside)
    assert _group_nice(leader) == beside
    assert log.lines == [
        f"background builds: autogroup nice {alone}",
        f"background builds: autogroup nice {beside}",
    ]


def test_a_session_that_is_gone_is_said_in_one_line() -> None:
    set_nice = _noxfile_function("_autogroup_nice")
    process = subprocess.Popen(["true"], start_new_session=True)
    process.wait()
    log = _Log()
    set_nice(log, process.pid, 5)  # reaped: no /proc entry (unless the pid was reused)
    assert len(log.lines) == 1
    assert log.lines[0].startswith("background builds: autogroup nice 5 not set ("), log.lines


def test_the_builds_lead_only_once_the_measured_tests_are_done() -> None:
    """In ``tests``: the nice that yields is set when the builds start, the one that leads
    after the measured tests, once the kind tier has started."""
    tests = function_node("tests")
    marks = {
        "BUILDS_NICE_ALONE": "_autogroup_nice(session, builds.pid, BUILDS_NICE_ALONE)",
        "measured": "'-m', 'measured'",
        "kind": "_start_kind_tier(",
        "BUILDS_NICE_BESIDE": "_autogroup_nice(session, builds.pid, BUILDS_NICE_BESIDE)",
    }
    calls = [(n.lineno, ast.unparse(n)) for n in ast.walk(tests) if isinstance(n, ast.Call)]
    first = {
        name: min(line for line, text in calls if mark in text) for name, mark in marks.items()
    }
    assert sorted(first, key=first.__getitem__) == list(marks)
