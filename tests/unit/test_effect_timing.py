"""How a scenario times a change with the effect probe (:mod:`cnibench.scenarios.effect`): the
change is made whatever becomes of the probe, the probe is stopped however the change ends
(Ctrl-C included), its clock is this host's or mapped, and a set-up keeps the value for its
first run only.

The endpoints are stand-ins that replay a probe's output: what is tested is what the scenario
does with the command's lines and its own clock, which a real pod cannot be made to choose
(tests/lab runs the real probe).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import pytest

from cnibench.backends.base import CommandResult, Node, NodeRole
from cnibench.errors import ToolError
from cnibench.scenarios.base import Prepared
from cnibench.scenarios.effect import (
    EffectProbe,
    TimedEffect,
    change_measurements,
    effect_evidence,
    keep_effect,
    take_effect,
    time_change,
    time_effect,
)
from cnibench.tools.effect_probe import Effect


@dataclass
class ReplayedCommand:
    """A started probe whose lines are written by ``lines(started_ns)`` when it starts."""

    lines: Callable[[int], list[str]]
    started_ns: int = 0
    stopped: int = 0
    fail_start: bool = False

    def first_line(self, *, timeout: float) -> str:
        if self.fail_start:
            raise ToolError("perl: not found", tool="perl")
        return self.lines(self.started_ns)[0]

    def wait(self, *, timeout: float) -> CommandResult:
        return CommandResult((), 0, "\n".join(self.lines(self.started_ns)) + "\n", "", 0.1)

    def stop(self) -> None:
        self.stopped += 1


@dataclass
class ReplayingPod:
    """An endpoint whose :meth:`start` hands out one :class:`ReplayedCommand`; its clock is
    this host's shifted by ``clock_offset`` seconds (another machine's)."""

    lines: Callable[[int], list[str]]
    clock_offset: float = 0.0
    fail_start: bool = False
    commands: list[ReplayedCommand] = field(default_factory=list)

    name: str = "pol-deny"
    ip: str = "10.0.0.4"

    @property
    def node(self) -> Node:
        return Node("node-client", NodeRole.CLIENT, "192.0.2.1")

    def run(self, argv: Sequence[str], *, timeout: float) -> CommandResult:
        raise AssertionError("the probe is started, never run")

    def start(self, argv: Sequence[str]) -> ReplayedCommand:
        assert argv[0] == "perl"
        started = int((time.monotonic() + self.clock_offset) * 1e9)
        command = ReplayedCommand(self.lines, started, fail_start=self.fail_start)
        self.commands.append(command)
        return command


def blocked_after(answered: int, blocked: int) -> Callable[[int], list[str]]:
    """A probe log: ``answered`` attempts answered, then ``blocked`` timed out, 10 ms apart,
    the first at the probe's start."""

    def lines(start_ns: int) -> list[str]:
        out = [f"start 42 {start_ns} syscall"]
        for seq in range(answered + blocked):
            at = start_ns + seq * 10_000_000
            outcome = "answered 200 pol-srv" if seq < answered else "timeout"
            out.append(f"a {seq} {at} {at + 1_000_000} {outcome}")
        return [*out, "end effect 9"]

    return lines


def test_the_change_is_timed_from_its_acknowledgment_and_the_probe_is_stopped() -> None:
    pod = ReplayingPod(blocked_after(answered=1, blocked=8))
    changes: list[float] = []
    timed = time_change(
        pod,  # type: ignore[arg-type]
        "10.0.0.2",
        80,
        effect=Effect.blocking(),
        change=lambda: changes.append(time.monotonic()),
        within=5,
    )
    assert isinstance(timed, TimedEffect)
    assert changes
    assert timed.clock == "shared"
    assert timed.timing.old_state == 1
    assert timed.timing.seconds is not None
    assert timed.request_seconds is not None
    (command,) = pod.commands
    assert command.stopped >= 1


def test_another_machines_clock_is_mapped_to_this_ones() -> None:
    # The pod's clock runs an hour ahead: read as is, every attempt would be "before" the change.
    pod = ReplayingPod(blocked_after(answered=0, blocked=5), clock_offset=3600.0)
    timed = time_effect(
        pod,  # type: ignore[arg-type]
        "10.96.0.10",
        80,
        effect=Effect.blocking(),
        since=time.monotonic(),
        within=5,
    )
    assert isinstance(timed, TimedEffect)
    assert timed.clock.startswith("mapped ±")
    assert timed.timing.seconds is not None
    assert 0 <= timed.timing.seconds < 1.0


def test_a_probe_that_cannot_start_still_lets_the_change_be_made() -> None:
    pod = ReplayingPod(blocked_after(0, 1), fail_start=True)
    made: list[bool] = []
    timed = time_change(
        pod,  # type: ignore[arg-type]
        "10.0.0.2",
        80,
        effect=Effect.blocking(),
        change=lambda: made.append(True),
        within=5,
    )
    assert made == [True]
    assert isinstance(timed, ToolError)
    assert pod.commands[0].stopped >= 1
    prepared = Prepared()
    keep_effect(prepared, "enforcement", timed)
    assert "perl: not found" in str(
        effect_evidence(prepared, "enforcement")["enforcement_probe_error"]
    )
    assert take_effect(prepared, "enforcement", "policy_enforcement_time")[0] == []


def test_an_interrupted_change_stops_the_probe() -> None:
    pod = ReplayingPod(blocked_after(1, 8))

    def interrupted() -> None:
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        time_change(
            pod,  # type: ignore[arg-type]
            "10.0.0.2",
            80,
            effect=Effect.blocking(),
            change=interrupted,
            within=5,
        )
    assert pod.commands[0].stopped >= 1


def test_leaving_the_probe_stops_it_even_on_an_error() -> None:
    pod = ReplayingPod(blocked_after(1, 8))
    with (
        pytest.raises(RuntimeError),
        EffectProbe(
            pod,  # type: ignore[arg-type]
            "10.0.0.2",
            80,
            effect=Effect.blocking(),
            max_seconds=5,
        ),
    ):
        raise RuntimeError("boom")
    assert pod.commands[0].stopped == 1


def test_a_set_up_keeps_the_value_for_its_first_run_and_the_evidence_for_its_proof() -> None:
    pod = ReplayingPod(blocked_after(answered=2, blocked=6))
    timed = time_change(
        pod,  # type: ignore[arg-type]
        "10.0.0.2",
        80,
        effect=Effect.blocking(),
        change=lambda: None,
        within=5,
    )
    assert isinstance(timed, TimedEffect)
    prepared = Prepared()
    keep_effect(prepared, "enforcement", timed)
    evidence = effect_evidence(prepared, "enforcement")
    assert evidence["enforcement_probe_interval_ms"] == 10.0
    assert evidence["enforcement_consecutive"] == 3
    assert evidence["enforcement_probe_clock"] == "shared"
    assert evidence == effect_evidence(prepared, "enforcement")  # read, not taken
    first, raw = take_effect(prepared, "enforcement", "policy_enforcement_time")
    assert [(m.metric, m.unit) for m in first] == [
        ("policy_enforcement_time", "s"),
        ("policy_enforcement_time_leaks", "count"),
    ]
    assert raw["policy_enforcement_time-probe.txt"].startswith("start 42 ")
    assert take_effect(prepared, "enforcement", "policy_enforcement_time") == ([], {})


def _new_service(
    pod: ReplayingPod, change: Callable[[], object], *, within: float
) -> TimedEffect | ToolError:
    """One more Service at 198.18.192.3 timed as the baseline times it."""
    return time_change(
        pod,  # type: ignore[arg-type]
        "198.18.192.3",
        80,
        effect=Effect.answering("bl-srv"),
        change=change,
        within=within,
    )


def answered_after(waiting: int, answered: int, by: str = "bl-srv") -> Callable[[int], list[str]]:
    """A probe log: ``waiting`` attempts refused, then ``answered`` answered by ``by``, 10 ms
    apart, the first at the probe's start."""

    def lines(start_ns: int) -> list[str]:
        out = [f"start 42 {start_ns} syscall"]
        for seq in range(waiting + answered):
            at = start_ns + seq * 10_000_000
            outcome = f"answered 200 {by}" if seq >= waiting else "refused"
            out.append(f"a {seq} {at} {at + 1_000_000} {outcome}")
        return [*out, "end effect 9"]

    return lines


def test_a_change_in_force_before_its_request_returned_is_timed_from_the_request() -> None:
    # The lab loads node after node: the client's node answers 30 ms into a 150-ms request.
    # Read from the acknowledgment, the first attempt after it would give 150 ms and more.
    pod = ReplayingPod(answered_after(waiting=3, answered=40))
    timed = _new_service(pod, lambda: time.sleep(0.15), within=5)
    assert isinstance(timed, TimedEffect)
    assert timed.timing.held_during_request > 0
    measurements, raw = change_measurements(timed, "new_service_time")
    values = {m.metric: m.value for m in measurements}
    assert timed.request_seconds is not None
    assert timed.request_seconds >= 0.15
    assert 0.0 < values["new_service_time"] < 0.1
    assert values["new_service_time_leaks"] == 0
    assert set(raw) == {"new_service_time.json", "new_service_time-probe.txt"}
    assert '"new_service_time_from_request_seconds"' in raw["new_service_time.json"]


def test_answers_by_another_pod_meanwhile_are_leaks() -> None:
    lines = answered_after(waiting=3, answered=40)

    def mixed(start_ns: int) -> list[str]:
        # Attempts 3 and 4 (30 and 40 ms after the request) answered by another pod.
        return [
            line.replace("bl-srv", "other") if line.startswith(("a 3 ", "a 4 ")) else line
            for line in lines(start_ns)
        ]

    pod = ReplayingPod(mixed)
    timed = _new_service(pod, lambda: None, within=5)
    assert isinstance(timed, TimedEffect)
    values = {m.metric: m.value for m in change_measurements(timed, "new_service_time")[0]}
    assert values["new_service_time_leaks"] == 2
    assert 0.04 <= values["new_service_time"] < 0.06


def test_a_change_in_force_before_its_request_gives_no_value() -> None:
    pod = ReplayingPod(answered_after(waiting=0, answered=30))
    timed = _new_service(pod, lambda: time.sleep(0.02), within=5)
    assert isinstance(timed, TimedEffect)
    assert timed.timing.held_before_request > 0
    assert change_measurements(timed, "new_service_time")[0] == []


def test_a_change_not_in_force_gives_no_value_and_says_so() -> None:
    pod = ReplayingPod(answered_after(waiting=20, answered=0))
    timed = _new_service(pod, lambda: None, within=0.1)
    assert isinstance(timed, TimedEffect)
    measurements, raw = change_measurements(timed, "new_service_time")
    assert measurements == []
    assert '"new_service_time_from_request_seconds": "not in force"' in raw["new_service_time.json"]
