"""The effect probe: its argv, its parser on captured real output (fixtures/effect_probe), and
the time to effect read from the attempts (the first of k in a row after the acknowledgment,
the leaks before it)."""

from __future__ import annotations

import statistics
from collections import Counter
from pathlib import Path

import pytest

from cnibench.errors import ConfigError, ParseError
from cnibench.tools.effect_probe import (
    EFFECT_PROBE_SCRIPT,
    Effect,
    ProbeAttempt,
    ProbeOutcome,
    effect_probe_argv,
    parse_effect_probe,
    parse_probe_start,
    time_to_effect,
)

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "effect_probe"


def fixture(name: str) -> str:
    return (FIXTURES / name).read_text()


def cmd_field(name: str, field: str) -> str:
    """A ``field: value`` line of a fixture's ``.cmd`` file."""
    for line in fixture(f"{name}.cmd").splitlines():
        if line.startswith(f"{field}: "):
            return line.split(": ", 1)[1]
    raise AssertionError(f"{name}.cmd has no {field}")


def attempts(*outcomes: str, start: float = 100.0, step: float = 0.01) -> list[ProbeAttempt]:
    """Attempts every ``step`` s from ``start``: ``"v1"`` answered 200 by v1, ``"v2"`` by v2,
    otherwise that outcome."""
    made = []
    for seq, outcome in enumerate(outcomes):
        at = start + seq * step
        if outcome in ("v1", "v2"):
            made.append(ProbeAttempt(seq, at, at + 0.001, ProbeOutcome.ANSWERED, 200, outcome))
        else:
            made.append(ProbeAttempt(seq, at, at + 0.5, ProbeOutcome(outcome)))
    return made


def test_argv_is_perl_with_the_script_and_the_plan_in_milliseconds() -> None:
    argv = effect_probe_argv(
        "198.19.2.2", 80, effect=Effect.blocking(), max_seconds=30, interval=0.01
    )
    assert argv[:3] == ["perl", "-e", EFFECT_PROBE_SCRIPT]
    # host, port, interval ms, attempt timeout ms, most ms, most attempts, stop after, stop on
    assert argv[3:] == ["198.19.2.2", "80", "10", "500", "30000", "3001", "50", "blocked"]


def test_argv_names_the_backend_an_answer_must_come_from() -> None:
    argv = effect_probe_argv("10.96.0.10", 8080, effect=Effect.answering("bl-srv"), max_seconds=1)
    assert argv[-1] == "answered=bl-srv"


@pytest.mark.parametrize(
    "options",
    [
        {"max_seconds": 0},
        {"max_seconds": 1, "interval": -0.01},
        {"max_seconds": 1, "attempt_timeout": float("nan")},
        {"max_seconds": 1, "stop_after": -1},
        {"max_seconds": 1, "max_attempts": 0},
    ],
    ids=["no-time", "negative-interval", "nan-timeout", "negative-stop", "no-attempts"],
)
def test_argv_refuses_a_plan_that_cannot_run(options: dict[str, float]) -> None:
    with pytest.raises(ConfigError):
        effect_probe_argv("198.19.2.2", 80, effect=Effect.blocking(), **options)  # type: ignore[arg-type]


@pytest.mark.parametrize("name", ["", "two words"], ids=["empty", "two-words"])
def test_a_backend_name_is_one_word(name: str) -> None:
    with pytest.raises(ConfigError):
        Effect.answering(name)


def test_every_attempt_of_a_steady_backend_is_answered_by_it_at_10_ms() -> None:
    log = parse_effect_probe(fixture("answered.txt"))
    assert log.start.clock == "syscall"
    assert log.ended == "time"
    assert {(a.outcome, a.status, a.answered_by) for a in log.attempts} == {
        (ProbeOutcome.ANSWERED, 200, "v1")
    }
    assert [a.seq for a in log.attempts] == list(range(len(log.attempts)))
    assert 0.009 <= statistics.median(log.intervals()) <= 0.011
    assert all(attempt.start >= log.start.started for attempt in log.attempts)


def test_a_weighted_proxy_is_answered_by_both_backends_and_runs_its_time() -> None:
    log = parse_effect_probe(fixture("split.txt"))
    seen = Counter(attempt.answered_by for attempt in log.attempts)
    assert set(seen) == {"v1", "v2"}
    assert seen["v1"] > seen["v2"] > 0  # nginx's 3:1 weights
    assert log.ended == "time"  # never 20 answers by v1 in a row


def test_answers_by_the_other_backend_are_leaks() -> None:
    log = parse_effect_probe(fixture("split.txt"))
    timing = time_to_effect(
        log.attempts, since=log.start.started, effect=Effect.answering("v1"), consecutive=30
    )
    assert timing.seconds is None  # 30 in a row by v1 never happen at 3:1 round robin
    assert timing.leaks == sum(a.answered_by == "v2" for a in log.attempts)


def test_a_closed_port_is_refused_and_the_probe_stops_once_it_held() -> None:
    log = parse_effect_probe(fixture("refused.txt"))
    assert [a.outcome for a in log.attempts] == [ProbeOutcome.REFUSED] * 5
    assert all(a.blocked for a in log.attempts)
    assert log.ended == "effect"


def test_a_lab_policy_is_timed_from_its_acknowledgment_to_the_first_blocked_attempt() -> None:
    name = "lab_policy_applied.txt"
    log = parse_effect_probe(fixture(name))
    requested = int(cmd_field(name, "requested_ns")) / 1e9
    acknowledged = int(cmd_field(name, "acknowledged_ns")) / 1e9
    timing = time_to_effect(
        log.attempts, since=acknowledged, effect=Effect.blocking(), requested=requested
    )
    # Written out from the log: the first attempt at or after the acknowledgment that starts
    # three blocked in a row.
    after = [a for a in log.attempts if a.start >= acknowledged]
    first = next(i for i in range(len(after)) if all(a.blocked for a in after[i : i + 3]))
    assert timing.seconds == pytest.approx(after[first].start - acknowledged)
    assert 0 <= timing.seconds < 0.1
    assert timing.old_state > 0  # the probe saw the pod get through before
    assert not timing.upper_bound
    assert timing.held_before_request == 0
    assert timing.leaks == 0
    assert timing.relapses == 0
    assert timing.interval_median is not None
    assert timing.interval_median <= 0.020
    assert timing.attempts == len(log.attempts)
    assert log.ended == "effect"


def test_the_effect_is_the_first_of_k_in_a_row_and_what_got_through_before_are_leaks() -> None:
    # ack at 100.0; a blocked attempt alone does not make it, the run of three at 100.04 does.
    probe = attempts("v1", "timeout", "v1", "refused", "v1", "timeout", "refused", "timeout", "v1")
    timing = time_to_effect(probe, since=100.0, effect=Effect.blocking(), consecutive=3)
    assert timing.seconds == pytest.approx(0.05)
    assert timing.leaks == 3  # answered while the policy denies: 100.00, 100.02, 100.04
    assert timing.pending == 2  # blocked, but not yet three in a row
    assert timing.relapses == 1  # the answer at 100.08
    assert timing.upper_bound  # nothing started before the acknowledgment


def test_k_in_a_row_cut_off_by_the_end_of_the_log_is_no_effect() -> None:
    timing = time_to_effect(
        attempts("v1", "timeout", "timeout"), since=100.0, effect=Effect.blocking(), consecutive=3
    )
    assert timing.seconds is None
    assert timing.leaks == 1
    assert timing.pending == 2
    assert timing.relapses == 0


def test_attempts_before_the_acknowledgment_do_not_count_towards_the_effect() -> None:
    # Blocked from 100.02, while the request ran (100.01-100.035): in force before the ack.
    probe = attempts("v1", "v1", "timeout", "timeout", "timeout", "timeout", "timeout")
    timing = time_to_effect(
        probe, since=100.035, effect=Effect.blocking(), consecutive=3, requested=100.01
    )
    assert timing.seconds == pytest.approx(0.005)  # 100.04, the first after the ack
    assert timing.before == 4
    assert timing.old_state == 2
    assert timing.held_during_request == 2
    assert timing.held_before_request == 0
    assert not timing.upper_bound


def test_a_change_in_force_before_it_was_requested_is_counted() -> None:
    timing = time_to_effect(
        attempts("timeout", "timeout", "timeout", "timeout"),
        since=100.025,
        effect=Effect.blocking(),
        requested=100.015,
    )
    assert timing.held_before_request == 2
    assert timing.upper_bound  # it never showed the state the change replaces


def test_a_service_answering_by_its_pod_is_the_effect() -> None:
    probe = attempts("timeout", "refused", "v2", "v1", "v1", "v1", "v1")
    timing = time_to_effect(probe, since=99.995, effect=Effect.answering("v1"))
    assert timing.seconds == pytest.approx(0.035)
    assert timing.leaks == 1  # answered by another backend
    assert timing.pending == 2


def test_consecutive_must_be_positive() -> None:
    with pytest.raises(ValueError, match="consecutive"):
        time_to_effect(attempts("v1"), since=0.0, effect=Effect.blocking(), consecutive=0)


def test_the_spacing_is_read_from_the_starts() -> None:
    timing = time_to_effect(
        attempts("v1", "v1", "v1", "v1", step=0.012), since=0.0, effect=Effect.answering("v1")
    )
    assert timing.interval_median == pytest.approx(0.012)
    assert timing.interval_max == pytest.approx(0.012)


@pytest.mark.parametrize(
    "output",
    ["", "a 0 1 2 answered 200 v1\n", "perl: not found\n"],
    ids=["empty", "no-start-line", "no-perl"],
)
def test_output_without_a_start_line_is_a_parse_error(output: str) -> None:
    with pytest.raises(ParseError, match="no start line"):
        parse_effect_probe(output)


@pytest.mark.parametrize(
    "line",
    ["a 0 1 2 exploded", "a 0 1 2 answered", "a x 1 2 timeout"],
    ids=["unknown-outcome", "answer-without-status", "bad-number"],
)
def test_an_attempt_line_that_does_not_parse_is_a_parse_error(line: str) -> None:
    with pytest.raises(ParseError):
        parse_effect_probe(f"start 1 0 syscall\n{line}\n")


def test_a_stopped_probe_has_no_end_and_keeps_its_attempts() -> None:
    log = parse_effect_probe("start 7 1000000000 syscall\na 0 1000000100 1000000200 refused\n")
    assert log.ended == ""
    assert log.start == parse_probe_start("start 7 1000000000 syscall")
    assert log.start.pid == 7
    assert [a.outcome for a in log.attempts] == [ProbeOutcome.REFUSED]


def test_attempts_that_end_out_of_order_are_read_in_the_order_started() -> None:
    log = parse_effect_probe(
        "start 1 0 syscall\na 1 10 20 refused\na 0 5 505 timeout\nend effect 2\n"
    )
    assert [a.seq for a in log.attempts] == [0, 1]
    assert log.attempts[0].outcome is ProbeOutcome.TIMEOUT


def test_a_gateway_takes_over_at_the_first_of_k_answers_from_another_source() -> None:
    """An egress gateway: the source echo named the client node (``v1``) before, the gateway
    (``v2``) after; the answers for the node after the acknowledgment left un-masqueraded by
    the gateway, so they are leaks, and a refused attempt neither holds nor leaks."""
    made = attempts("v1", "v1", "v1", "v1", "v2", "refused", "v2", "v2", "v2", "v2")
    effect = Effect.answering_other_than("v1")
    assert effect.stop_on == "answered!=v1"
    timing = time_to_effect(made, since=made[1].start, effect=effect, consecutive=3)
    assert timing.seconds == pytest.approx(made[6].start - made[1].start)
    assert timing.leaks == 3  # v1 answers from the acknowledgment on
    assert not effect.holds(made[5])
    assert not effect.leaks(made[5])
