"""Bounded waits: the one place cnibench polls until something is true or time is up.

Every layer may import this module (it sits beside :mod:`cnibench.errors` at the bottom of the
layer contract), so a backend waiting for a pod, a tool waiting for its server to listen and a
scenario waiting for a CNI to program a rule all wait the same way:

* :func:`wait_for` calls a condition until it returns a value (anything but ``None`` or
  ``False``) and returns that value; when time is up it raises the caller's exception with one
  line saying what it waited for, for how long, and what it saw last, e.g. ``waited 120 s for
  the Gateway cnibench-gw to get an address: last seen: no address``.
* :func:`poll` is the same wait for callers that go on without the condition (stopping
  processes, best-effort clean-up): it returns ``None`` when time is up.
* :func:`poll_until` repeats an attempt until its result is accepted, and returns the last
  result and the number of attempts either way (how verification reads a CNI catching up).
* :class:`Deadline` is a point in time several waits share (one timeout for a list of
  objects), or that a blocking call is given the rest of (``popen.wait(timeout=...)``).
* :func:`settle` is the one fixed pause, for a change whose coming into force nothing
  observable announces (a CNI programming a policy whose expected outcome may be "no
  change"); it says why it waits.

Nothing else in ``src/`` sleeps or loops on a clock, except load pacing (a load generator
keeping its users busy for the run's duration): ``tests/unit/test_waiting.py`` reads every
module's syntax tree and fails on any other call of a ``sleep`` or loop that reads a clock.

The condition is always tried once more at the deadline itself, so a wait of 0 s tries once.
Exceptions from the condition propagate at once unless their type is in ``retry``: those are
tried again within the time, and the last one is the "last seen" of the error (and its
``__cause__``).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Generic, Literal, TypeVar

__all__ = ["Deadline", "poll", "poll_until", "settle", "wait_for", "waited_message"]

_T = TypeVar("_T")


class Deadline:
    """A moment ``seconds`` from now on the monotonic clock.

    Attributes
    ----------
    seconds:
        The length of the wait it ends, in seconds (for messages).
    """

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self._end = time.monotonic() + seconds

    def remaining(self) -> float:
        """Seconds left, never below 0."""
        return max(0.0, self._end - time.monotonic())

    def expired(self) -> bool:
        """Whether the moment has passed."""
        return time.monotonic() >= self._end


@dataclass
class _Outcome(Generic[_T]):
    value: _T | None = None
    error: Exception | None = None
    attempts: int = 0


def _seconds(value: float) -> str:
    return f"{value:g}" if value < 10 else f"{value:.0f}"


def waited_message(what: str, seconds: float, last_seen: str = "") -> str:
    """The one line a timed-out wait reports: ``waited <seconds> s for <what>[: last seen:
    <detail>]``, with the detail on one line."""
    detail = " ".join(str(last_seen).split())
    message = f"waited {_seconds(seconds)} s for {what}"
    return f"{message}: last seen: {detail}" if detail else message


def _run(
    condition: Callable[[], _T | Literal[False] | None],
    deadline: Deadline,
    interval: float,
    growth: float,
    max_interval: float | None,
    retry: tuple[type[Exception], ...],
) -> _Outcome[_T]:
    outcome: _Outcome[_T] = _Outcome()
    pause = interval
    while True:
        outcome.attempts += 1
        try:
            value = condition()
        except retry as exc:
            outcome.error = exc
        else:
            outcome.error = None
            if value is not None and value is not False:
                outcome.value = value
                return outcome
        if deadline.expired():
            return outcome
        time.sleep(min(pause, deadline.remaining()))
        pause *= growth
        if max_interval is not None:
            pause = min(pause, max_interval)


def _deadline(timeout: float | Deadline) -> Deadline:
    return timeout if isinstance(timeout, Deadline) else Deadline(timeout)


def wait_for(
    condition: Callable[[], _T | Literal[False] | None],
    *,
    timeout: float | Deadline,
    what: str,
    interval: float = 1.0,
    growth: float = 1.0,
    max_interval: float | None = None,
    last_seen: Callable[[], object] | None = None,
    error: Callable[[str], Exception] = TimeoutError,
    retry: tuple[type[Exception], ...] = (),
) -> _T:
    """Call ``condition`` until it returns a value, and return that value.

    Parameters
    ----------
    condition:
        Returns the awaited value, or ``None``/``False`` for "not yet".
    timeout:
        Seconds to wait, or a :class:`Deadline` shared with other waits.
    what:
        What is awaited, completing "waited 30 s for ...", e.g. ``"pod client to be Ready"``.
    interval:
        Seconds between attempts (never past the deadline).
    growth:
        Factor the interval grows by after each attempt (1: fixed).
    max_interval:
        Upper bound of a growing interval, in seconds.
    last_seen:
        Called once the time is up: what the condition saw last (a state, a log tail), added
        to the message; by default the last retried error, if any.
    error:
        The exception class (or factory) raised with the message, so a caller's ``except``
        clauses keep working: ``ProvisioningError``, ``functools.partial(ToolError, tool=...)``.
    retry:
        Exception types of ``condition`` that mean "not yet"; any other propagates at once.

    Raises
    ------
    Exception
        ``error(message)`` when time is up, chained to the last retried error.
    """
    deadline = _deadline(timeout)
    outcome = _run(condition, deadline, interval, growth, max_interval, retry)
    if outcome.value is not None:
        return outcome.value
    seen = last_seen() if last_seen is not None else (outcome.error or "")
    raise error(waited_message(what, deadline.seconds, str(seen))) from outcome.error


def poll(
    condition: Callable[[], _T | Literal[False] | None],
    *,
    timeout: float | Deadline,
    interval: float = 1.0,
    growth: float = 1.0,
    max_interval: float | None = None,
    retry: tuple[type[Exception], ...] = (),
) -> _T | None:
    """Like :func:`wait_for`, but return ``None`` when time is up, for a caller that goes on
    either way (it reports or handles what is left itself).

    Raises
    ------
    Exception
        An error of a ``retry`` type raised by the last attempt; any other at once.
    """
    outcome = _run(condition, _deadline(timeout), interval, growth, max_interval, retry)
    if outcome.value is None and outcome.error is not None:
        raise outcome.error
    return outcome.value


def poll_until(
    attempt: Callable[[], _T],
    done: Callable[[_T], bool],
    *,
    seconds: float,
    interval: float = 1.0,
    retry: tuple[type[Exception], ...] = (),
) -> tuple[_T, int]:
    """Call ``attempt`` every ``interval`` seconds until ``done`` accepts its result or
    ``seconds`` have passed: how a check waits for a Kubernetes CNI to bring a set-up into
    effect after the API server stored it.

    Returns
    -------
    tuple
        The last result (accepted or not) and the number of attempts.

    Raises
    ------
    Exception
        An error of a ``retry`` type is tried again within the time, then raised; any other
        at once.
    """
    results: list[_T] = []

    def accepted() -> tuple[_T] | None:
        result = attempt()
        results.append(result)
        return (result,) if done(result) else None

    outcome = _run(accepted, _deadline(seconds), interval, 1.0, None, retry)
    if outcome.error is not None:
        raise outcome.error
    return results[-1], outcome.attempts


def settle(seconds: float, *, why: str) -> None:
    """Pause ``seconds`` because a change takes effect some time after it was made and nothing
    observable says when.

    Prefer :func:`wait_for` on a condition whenever one exists; this is for the rest, e.g. a
    priority case a Kubernetes CNI programs after the API server stored it, where the probe
    that would show it in force is the measurement itself and "reachable" may be the right
    answer as well as the stale one.

    Parameters
    ----------
    seconds:
        Length of the pause in seconds; 0 returns at once (a backend whose changes are in
        force on return, like the lab's synchronous nftables load).
    why:
        What the time is for, e.g. ``"the CNI to program the priority case"``: documents the
        call site, which a reader finds by this name.

    Raises
    ------
    ValueError
        ``seconds`` is negative or not finite, or ``why`` is empty.
    """
    if not 0 <= seconds < float("inf"):
        raise ValueError(f"settle time must be seconds >= 0, not {seconds!r} (for {why})")
    if not why.strip():
        raise ValueError("settle needs a reason: what the pause lets take effect")
    if seconds > 0:
        time.sleep(seconds)
