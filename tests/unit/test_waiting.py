"""cnibench.waiting: the one bounded wait every layer uses (real clock, real sleeps, short)."""

from __future__ import annotations

import functools
import itertools
import re
import time
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


def test_a_growing_interval_doubles_up_to_its_bound() -> None:
    stamps: list[float] = []

    def never() -> None:
        stamps.append(time.monotonic())

    poll(never, timeout=1.0, interval=0.05, growth=2.0, max_interval=0.2)
    gaps = [b - a for a, b in itertools.pairwise(stamps)]
    assert gaps[0] == pytest.approx(0.05, abs=0.04)
    assert gaps[1] == pytest.approx(0.1, abs=0.04)
    assert gaps[2] == pytest.approx(0.2, abs=0.04)
    assert gaps[3] == pytest.approx(0.2, abs=0.04)


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


def test_waits_sharing_a_deadline_end_together() -> None:
    deadline = Deadline(0.3)
    started = time.monotonic()
    assert poll(lambda: None, timeout=deadline, interval=0.05) is None
    assert poll(lambda: None, timeout=deadline, interval=0.05) is None
    assert time.monotonic() - started < 0.45


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


# -- no hand-written deadline loop comes back -------------------------------------------------

_HAND_LOOP = re.compile(r"deadline\s*=\s*time\.monotonic\(\)")


def test_no_module_writes_its_own_deadline_loop() -> None:
    src = Path(cnibench.__file__).parent
    found = [
        f"{path.relative_to(src)}:{number}"
        for path in sorted(src.rglob("*.py"))
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if _HAND_LOOP.search(line)
    ]
    assert found == [], f"hand-written waits; use cnibench.waiting: {found}"


def test_the_loop_check_recognises_a_hand_loop() -> None:
    assert _HAND_LOOP.search("    deadline = time.monotonic() + timeout")
