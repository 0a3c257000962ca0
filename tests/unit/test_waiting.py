"""cnibench.waiting: the one bounded wait every layer uses (real clock, real sleeps, short)."""

from __future__ import annotations

import ast
import functools
import itertools
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

import cnibench
from cnibench import waiting
from cnibench.errors import ProvisioningError, ToolError
from cnibench.waiting import Deadline, poll, poll_until, wait_for


def test_wait_for_returns_the_first_value_and_stops_calling() -> None:
    answers = iter([None, False, "10.0.0.7", "never asked"])
    calls: list[int] = []

    def address() -> str | bool | None:
        calls.append(1)
        return next(answers)

    assert wait_for(address, timeout=5, what="an address", interval=0.01) == "10.0.0.7"
    assert len(calls) == 3


def test_the_timeout_says_what_was_awaited_for_how_long_and_what_was_seen_last() -> None:
    with pytest.raises(ProvisioningError) as raised:
        wait_for(
            lambda: None,
            timeout=0.3,
            what="the Gateway cnibench-gw to get an address",
            interval=0.05,
            last_seen=lambda: "no\naddress",
            error=ProvisioningError,
        )
    assert str(raised.value) == (
        "waited 0.3 s for the Gateway cnibench-gw to get an address: last seen: no address"
    )


def test_a_long_wait_is_named_in_whole_seconds_and_without_detail_when_none() -> None:
    deadline = Deadline(120)
    deadline._end = time.monotonic()  # a 120 s wait whose time is up, without waiting it
    with pytest.raises(TimeoutError, match=r"^waited 120 s for the pod to be Ready$"):
        wait_for(lambda: False, timeout=deadline, what="the pod to be Ready")


def test_the_callers_exception_factory_is_used() -> None:
    error = functools.partial(ToolError, tool="tcpdump")
    with pytest.raises(ToolError) as raised:
        wait_for(lambda: None, timeout=0, what="the capture to start", error=error)
    assert raised.value.tool == "tcpdump"


def test_without_time_the_condition_is_tried_once() -> None:
    calls: list[int] = []

    def never() -> None:
        calls.append(1)

    assert poll(never, timeout=0) is None
    assert len(calls) == 1


class _Clock:
    """Virtual time for :mod:`cnibench.waiting`: ``sleep`` advances ``monotonic`` exactly, so
    the schedule is checked without depending on how busy the machine is."""

    def __init__(self) -> None:
        self.now = 1000.0

    def monotonic(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        assert seconds >= 0
        self.now += seconds


def test_the_condition_is_tried_at_the_interval_until_the_deadline(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    clock = _Clock()
    monkeypatch.setattr(waiting, "time", clock)
    stamps: list[float] = []

    def never() -> None:
        stamps.append(clock.monotonic())

    started = clock.monotonic()
    assert poll(never, timeout=0.5, interval=0.1) is None
    # 0 s, 0.1 s ... 0.5 s: six attempts, the last at the deadline itself, none after it.
    assert [round(s - started, 6) for s in stamps] == [0.0, 0.1, 0.2, 0.3, 0.4, 0.5]
    assert clock.monotonic() - started == pytest.approx(0.5)


def test_the_interval_is_kept_on_a_real_clock() -> None:
    """The same on the real clock, with room for a busy machine: a late wake-up only
    lengthens a gap, so none is shorter than the interval, except the last, which is cut to
    try once more at the deadline (on a loaded machine the earlier tries may have used up
    most of it)."""
    stamps: list[float] = []

    def never() -> None:
        stamps.append(time.monotonic())

    started = time.monotonic()
    assert poll(never, timeout=0.3, interval=0.1) is None
    gaps = [b - a for a, b in itertools.pairwise(stamps)]
    assert gaps, "tried more than once"
    assert all(gap >= 0.09 for gap in gaps[:-1]), gaps
    assert gaps[-1] >= 0.09 or stamps[-1] - started >= 0.29, (gaps, stamps[-1] - started)


def test_a_growing_interval_doubles_up_to_its_bound(monkeypatch: pytest.MonkeyPatch) -> None:
    """On virtual time: on the real clock a loaded machine (CI at a load average of 15 on two
    cores, 2026-12-01) wakes a 0.2 s sleep up 0.35 s late, which says nothing of the schedule."""
    clock = _Clock()
    monkeypatch.setattr(waiting, "time", clock)
    stamps: list[float] = []

    def never() -> None:
        stamps.append(clock.monotonic())

    poll(never, timeout=1.0, interval=0.05, growth=2.0, max_interval=0.2)
    gaps = [round(b - a, 6) for a, b in itertools.pairwise(stamps)]
    # 0.05, 0.1, then the bound until the deadline; the last gap is cut to end at it.
    assert gaps == [0.05, 0.1, 0.2, 0.2, 0.2, 0.2, 0.05]
    assert stamps[-1] - stamps[0] == pytest.approx(1.0)


def test_an_error_not_retried_propagates_at_once() -> None:
    calls: list[int] = []

    def broken() -> None:
        calls.append(1)
        raise ProvisioningError("HTTP 403")

    with pytest.raises(ProvisioningError, match="HTTP 403"):
        wait_for(broken, timeout=10, what="a CRD", interval=0.01)
    assert len(calls) == 1


def test_a_retried_error_is_the_last_seen_and_the_cause() -> None:
    calls: list[int] = []

    def refused() -> None:
        calls.append(1)
        raise ConnectionRefusedError(f"connection refused ({len(calls)})")

    with pytest.raises(ProvisioningError) as raised:
        wait_for(
            refused,
            timeout=0.2,
            what="Prometheus to be ready",
            interval=0.05,
            error=ProvisioningError,
            retry=(OSError,),
        )
    assert len(calls) >= 3
    assert str(raised.value).endswith(f"last seen: connection refused ({len(calls)})")
    assert isinstance(raised.value.__cause__, ConnectionRefusedError)


def test_a_value_after_retried_errors_is_returned() -> None:
    answers = iter([OSError("not yet"), OSError("not yet"), 200])

    def ready() -> int:
        answer = next(answers)
        if isinstance(answer, Exception):
            raise answer
        return answer

    assert wait_for(ready, timeout=5, what="ready", interval=0.01, retry=(OSError,)) == 200


def test_poll_raises_the_retried_error_of_the_last_attempt() -> None:
    def refused() -> None:
        raise ConnectionResetError("reset")

    with pytest.raises(ConnectionResetError):
        poll(refused, timeout=0.1, interval=0.02, retry=(OSError,))


def test_waits_sharing_a_deadline_end_together(monkeypatch: pytest.MonkeyPatch) -> None:
    """On virtual time (a busy machine's late wake-ups would only blur the check): the second
    wait has only what the first left of the deadline, which is nothing."""
    clock = _Clock()
    monkeypatch.setattr(waiting, "time", clock)
    started = clock.monotonic()
    deadline = Deadline(0.3)
    assert poll(lambda: None, timeout=deadline, interval=0.05) is None
    assert clock.monotonic() - started == pytest.approx(0.3)
    assert poll(lambda: None, timeout=deadline, interval=0.05) is None
    assert clock.monotonic() - started == pytest.approx(0.3)


# -- poll_until: how egress and policy checks wait for a Kubernetes CNI to catch up ----------


def test_poll_until_stops_at_the_first_accepted_result_and_counts_attempts() -> None:
    answers = iter(["client", "client", "gateway", "never"])
    result, attempts = poll_until(
        lambda: next(answers), lambda s: s == "gateway", seconds=10, interval=0.01
    )
    assert (result, attempts) == ("gateway", 3)


def test_poll_until_without_time_returns_the_first_result() -> None:
    result, attempts = poll_until(lambda: "wrong", lambda s: s == "right", seconds=0)
    assert (result, attempts) == ("wrong", 1)


def test_poll_until_accepts_a_falsy_result() -> None:
    result, attempts = poll_until(lambda: 0, lambda n: n == 0, seconds=0)
    assert (result, attempts) == (0, 1)


def test_poll_until_raises_a_retried_error_once_the_time_is_up_and_others_at_once() -> None:
    calls: list[int] = []

    def failing() -> str:
        calls.append(1)
        raise ToolError("reset", tool="iperf3")

    with pytest.raises(ToolError):
        poll_until(failing, bool, seconds=0.5, retry=(ToolError,))
    assert len(calls) == 2
    calls.clear()
    with pytest.raises(ToolError):
        poll_until(failing, bool, seconds=10)
    assert len(calls) == 1


# -- settle: the one fixed pause -------------------------------------------------------------


def test_settle_pauses_the_time_it_is_given(monkeypatch: pytest.MonkeyPatch) -> None:
    clock = _Clock()
    monkeypatch.setattr(waiting, "time", clock)
    waiting.settle(0.6, why="the CNI to program the case")
    assert clock.monotonic() == pytest.approx(1000.6)


def test_settle_of_no_time_returns_at_once(monkeypatch: pytest.MonkeyPatch) -> None:
    slept: list[float] = []
    monkeypatch.setattr(waiting.time, "sleep", slept.append)
    waiting.settle(0.0, why="nothing: the lab's nftables load is synchronous")
    assert slept == []


@pytest.mark.parametrize(
    ("seconds", "why", "message"),
    [
        (-1.0, "a rule", "seconds >= 0, not -1.0 \\(for a rule\\)"),
        (float("nan"), "a rule", "seconds >= 0, not nan"),
        (float("inf"), "a rule", "seconds >= 0, not inf"),
        (1.0, " ", "settle needs a reason"),
    ],
    ids=["negative", "nan", "infinite", "no-reason"],
)
def test_settle_refuses_a_time_that_is_no_pause_and_a_pause_without_a_reason(
    seconds: float, why: str, message: str
) -> None:
    with pytest.raises(ValueError, match=message):
        waiting.settle(seconds, why=why)


# -- no hand-written wait comes back ----------------------------------------------------------
#
# Every module's syntax tree is read, so no spelling escapes: a ``while``/``for`` loop or a
# comprehension that calls a clock (``time.monotonic``/``time``/``perf_counter`` and their
# ``_ns`` forms, however imported or aliased, or a ``Deadline``'s ``remaining()``/``expired()``)
# is a hand-written wait, and so is any call of a function named ``sleep``. waiting.py is where
# both belong; load pacing is the one other place, listed below with what it paces.

_CLOCKS = frozenset(
    {"monotonic", "monotonic_ns", "perf_counter", "perf_counter_ns", "time", "time_ns"}
)
_DEADLINE_READS = frozenset({"remaining", "expired"})
_LOOPS = (
    ast.While,
    ast.For,
    ast.AsyncFor,
    ast.ListComp,
    ast.SetComp,
    ast.DictComp,
    ast.GeneratorExp,
)

LOAD_PACING: dict[tuple[str, str], str] = {
    ("tools/locust_runner.py", "_run"): (
        "locust's users send for the run's duration while gevent.sleep yields to them"
    ),
    ("tools/epoll_load.py", "run_epoll_load"): (
        "the epoll load's event loop starts users at the spawn rate, spaces a user's requests"
        " by `wait` and ends the run at its duration"
    ),
}
"""Module (under src/cnibench) and function whose sleep or clock loop paces generated load:
the time it spends is the measurement's own, not a wait for something to become true."""


@dataclass(frozen=True)
class HandWait:
    """A hand-written wait found in a module: its line, the function holding it, and what
    gives it away."""

    line: int
    function: str
    what: str


class _HandWaits(ast.NodeVisitor):
    """Collects the :class:`HandWait` of one module (see the section's comment)."""

    def __init__(self, tree: ast.Module) -> None:
        self.found: list[HandWait] = []
        self._function: list[str] = []
        self._time_modules = {"time"}
        self._clock_names: set[str] = set()
        self._sleep_names = {"sleep"}
        for node in ast.walk(tree):  # the names a clock goes by, wherever they are bound
            if isinstance(node, ast.Import):
                self._time_modules |= {a.asname or a.name for a in node.names if a.name == "time"}
            elif isinstance(node, ast.ImportFrom) and node.module == "time":
                self._clock_names |= {a.asname or a.name for a in node.names if a.name in _CLOCKS}
                self._sleep_names |= {a.asname or a.name for a in node.names if a.name == "sleep"}
        for node in ast.walk(tree):  # then what is assigned one: ``perf = time.perf_counter``
            if isinstance(node, ast.Assign) and self._names_clock(node.value):
                self._clock_names |= {t.id for t in node.targets if isinstance(t, ast.Name)}

    def _names_clock(self, node: ast.expr) -> bool:
        if isinstance(node, ast.Name):
            return node.id in self._clock_names
        return (
            isinstance(node, ast.Attribute)
            and isinstance(node.value, ast.Name)
            and node.value.id in self._time_modules
            and node.attr in _CLOCKS
        )

    def _clock_read(self, call: ast.Call) -> str | None:
        """How ``call`` reads a clock, e.g. ``"time.monotonic()"``, or ``None``."""
        func = call.func
        reads_deadline = isinstance(func, ast.Attribute) and func.attr in _DEADLINE_READS
        if self._names_clock(func) or reads_deadline:
            return f"{ast.unparse(func)}()"
        return None

    def _where(self) -> str:
        return ".".join(self._function) or "<module>"

    def visit_FunctionDef(self, node: ast.FunctionDef) -> None:
        self._function.append(node.name)
        self.generic_visit(node)
        self._function.pop()

    def visit_AsyncFunctionDef(self, node: ast.AsyncFunctionDef) -> None:
        self._function.append(node.name)
        self.generic_visit(node)
        self._function.pop()

    def visit_Call(self, node: ast.Call) -> None:
        func = node.func
        name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
        if name in self._sleep_names:
            self.found.append(HandWait(node.lineno, self._where(), f"{ast.unparse(func)}()"))
        self.generic_visit(node)

    def generic_visit(self, node: ast.AST) -> None:
        if isinstance(node, _LOOPS):
            reads = {
                read
                for inner in ast.walk(node)
                if isinstance(inner, ast.Call) and (read := self._clock_read(inner))
            }
            if reads:
                loop = type(node).__name__.lower()
                what = f"{loop} loop reading {', '.join(sorted(reads))}"
                self.found.append(HandWait(node.lineno, self._where(), what))
        super().generic_visit(node)


def hand_waits(source: str) -> list[HandWait]:
    """Every loop reading a clock and every ``sleep`` call in ``source`` (Python text), by
    line."""
    tree = ast.parse(source)
    visitor = _HandWaits(tree)
    visitor.visit(tree)
    return sorted(visitor.found, key=lambda found: found.line)


_SRC = Path(cnibench.__file__).parent


@functools.cache
def _src_hand_waits() -> dict[tuple[str, str], tuple[str, ...]]:
    """(module, function) to its hand waits (``line: what``), over src/cnibench but
    waiting.py."""
    found: dict[tuple[str, str], tuple[str, ...]] = {}
    for path in sorted(_SRC.rglob("*.py")):
        module = path.relative_to(_SRC).as_posix()
        if module == "waiting.py":
            continue
        for wait in hand_waits(path.read_text()):
            site = (module, wait.function)
            found[site] = (*found.get(site, ()), f"{wait.line}: {wait.what}")
    return found


def test_no_module_waits_by_hand() -> None:
    hand = [
        f"{module}:{wait}"
        for (module, function), waits in _src_hand_waits().items()
        if (module, function) not in LOAD_PACING
        for wait in waits
    ]
    assert hand == [], f"hand-written waits; use cnibench.waiting: {hand}"


@pytest.mark.parametrize("site", list(LOAD_PACING), ids=["/".join(site) for site in LOAD_PACING])
def test_listed_load_pacing_still_paces_and_says_so_in_its_code(site: tuple[str, str]) -> None:
    module, function = site
    assert site in _src_hand_waits(), f"{module} {function} no longer paces load: unlist it"
    source = (_SRC / module).read_text()
    (defined,) = [
        node
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name == function
    ]
    text = ast.get_source_segment(source, defined) or ""
    assert "load pacing" in text.lower(), f"{module} {function} does not call it load pacing"


# KubePod.run's loop before it went through cnibench.waiting, as in pods.py at commit 506334e
# (lines 151-173, the clients' calls shortened): a spelling the old line-by-line check, which
# looked for ``deadline = time.monotonic()``, let through.
_OLD_POD_EXEC = """
def run(self, argv, *, timeout):
    started = time.monotonic()
    session = stream()
    stdout = []
    stderr = []
    try:
        while session.is_open():
            remaining = timeout - (time.monotonic() - started)
            if remaining <= 0:
                raise ToolError("did not finish", tool=tool)
            session.update(timeout=min(1.0, remaining))
            if session.peek_stdout():
                stdout.append(session.read_stdout())
    finally:
        session.close()
"""


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        (_OLD_POD_EXEC, [HandWait(8, "run", "while loop reading time.monotonic()")]),
        (
            "import time\ndeadline = time.monotonic() + 5\n"
            "while time.monotonic() < deadline:\n    time.sleep(0.1)\n",
            [
                HandWait(3, "<module>", "while loop reading time.monotonic()"),
                HandWait(4, "<module>", "time.sleep()"),
            ],
        ),
        (
            "from time import perf_counter as now\ndef f(items):\n"
            "    for item in items:\n        if now() > 3:\n            break\n",
            [HandWait(3, "f", "for loop reading now()")],
        ),
        (
            "import time\ndef f():\n    clock = time.perf_counter\n"
            "    while clock() < 3:\n        pass\n",
            [HandWait(4, "f", "while loop reading clock()")],
        ),
        (
            "def f(procs, deadline):\n    for p in procs:\n"
            "        p.wait(timeout=deadline.remaining())\n",
            [HandWait(2, "f", "for loop reading deadline.remaining()")],
        ),
        (
            "import time as t\nready = any(t.time() > 3 for _ in range(9))\n",
            [HandWait(2, "<module>", "generatorexp loop reading t.time()")],
        ),
        ("import gevent\ngevent.sleep(3)\n", [HandWait(2, "<module>", "gevent.sleep()")]),
        (
            "from time import sleep as pause\nclass C:\n    def m(self):\n        pause(1)\n",
            [HandWait(4, "m", "pause()")],
        ),
        (
            "import time\nstarted = time.monotonic()\nfor x in range(3):\n    print(x)\n"
            "took = time.monotonic() - started\n",
            [],
        ),
        ("from cnibench.waiting import poll\npoll(lambda: None, timeout=1)\n", []),
    ],
    ids=[
        "old-pods-exec-loop",
        "monotonic-deadline-and-sleep",
        "clock-imported-under-another-name",
        "clock-aliased-to-a-local",
        "deadline-read-in-a-loop",
        "clock-in-a-generator",
        "gevent-sleep",
        "sleep-imported-under-another-name",
        "a-duration-measured-around-a-loop-is-no-wait",
        "waiting-itself",
    ],
)
def test_the_check_finds_every_spelling_of_a_hand_wait(
    source: str, expected: list[HandWait]
) -> None:
    assert hand_waits(source) == expected
