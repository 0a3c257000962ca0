"""Measurement profiles: how many repetitions and how long each tool runs.

``smoke`` proves a path works end to end (two short runs: the test suite and CI use it; its
intervals say little), ``quick`` is the first try and the demo (five one-second runs: intervals
narrow enough to read, in minutes), ``standard`` for day-to-day comparisons, ``paper``
reproduces the seeds' own settings (seed 000: egress 8 runs x 12 min, split 16 runs x 2 min;
seed 001: 5 runs x 5 min; seed 002: 10000 sequential requests; seed 004: ab 50000 requests at
concurrency 10, iperf3 30 s, wrk 8 threads x 1000 connections x 30 s).
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass

from cnibench.errors import ConfigError

__all__ = ["DEFAULT_MAX_RUNS", "PROFILES", "Profile", "parse_duration", "profile_named"]


@dataclass(frozen=True)
class Profile:
    """Repetitions and durations of a benchmark session.

    Attributes
    ----------
    name:
        ``smoke``, ``quick``, ``standard`` or ``paper``.
    runs:
        Repetitions per condition.
    retries:
        Extra attempts for a run that failed (a failed attempt is recorded, never averaged).
    duration:
        Seconds of each time-bound measurement (iperf3, wrk, sockperf, background load).
    egress_duration:
        Seconds of each egress iperf3 run.
    ab_requests:
        Requests per ab run (concurrency 10, as seed 004).
    wrk_threads, wrk_connections:
        wrk load shape (seed 004: 8 threads, 1000 connections).
    sequential_requests:
        Requests per request-response timing run (seed 002: 10000).
    """

    name: str
    runs: int
    retries: int
    duration: float
    egress_duration: float
    ab_requests: int
    wrk_threads: int
    wrk_connections: int
    sequential_requests: int

    def with_overrides(self, *, runs: int | None = None, duration: float | None = None) -> Profile:
        """A copy with ``--runs``/``--duration`` applied (duration sets every time-bound tool)."""
        changes: dict[str, float | int] = {}
        if runs is not None:
            if runs < 1:
                raise ConfigError(f"--runs must be a positive integer, got {runs}")
            changes["runs"] = runs
        if duration is not None:
            if duration < 1 or duration != int(duration):
                # iperf3, sockperf, wrk and ab only take whole seconds.
                raise ConfigError(
                    f"--duration must be a whole number of seconds >= 1, got {duration:g}s"
                )
            if duration > MAX_DURATION:
                # A load loop is bounded in time: one measurement longer than a day is a typo.
                raise ConfigError(f"--duration must be at most 24h, got {duration:.0f}s")
            changes["duration"] = duration
            changes["egress_duration"] = duration
        return dataclasses.replace(self, **changes)  # type: ignore[arg-type]


PROFILES: dict[str, Profile] = {
    "smoke": Profile(
        name="smoke",
        runs=2,
        retries=1,
        duration=2.0,
        egress_duration=2.0,
        ab_requests=5000,
        wrk_threads=8,
        wrk_connections=1000,
        sequential_requests=1000,
    ),
    "quick": Profile(
        name="quick",
        runs=5,
        retries=1,
        duration=1.0,
        egress_duration=1.0,
        ab_requests=2000,
        wrk_threads=8,
        wrk_connections=1000,
        sequential_requests=500,
    ),
    "standard": Profile(
        name="standard",
        runs=5,
        retries=2,
        duration=10.0,
        egress_duration=30.0,
        ab_requests=50000,
        wrk_threads=8,
        wrk_connections=1000,
        sequential_requests=10000,
    ),
    "paper": Profile(
        name="paper",
        runs=8,
        retries=2,
        duration=30.0,
        egress_duration=720.0,
        ab_requests=50000,
        wrk_threads=8,
        wrk_connections=1000,
        sequential_requests=10000,
    ),
}

MAX_DURATION = 24 * 3600.0
"""The longest ``--duration`` a run's measurement may take, in seconds."""

DEFAULT_MAX_RUNS = 30
"""Most repetitions ``--precision`` adds up to (``--max-runs``)."""


def profile_named(name: str) -> Profile:
    """The profile called ``name``; a one-line :class:`ConfigError` names the choices."""
    try:
        return PROFILES[name]
    except KeyError:
        choices = ", ".join(PROFILES)
        raise ConfigError(f"unknown profile {name!r}: choose one of {choices}") from None


_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h)?\s*$")
_UNIT_SECONDS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}


def parse_duration(text: str) -> float:
    """Seconds from ``"720s"``, ``"12m"``, ``"1.5h"``, ``"250ms"`` or a bare number of seconds."""
    match = _DURATION.match(text)
    if match is None:
        raise ConfigError(f"invalid duration {text!r}: use e.g. 30s, 12m, 1h or 250ms")
    seconds = float(match.group(1)) * _UNIT_SECONDS[match.group(2) or "s"]
    if seconds <= 0:
        raise ConfigError(f"duration must be positive, got {text!r}")
    return seconds
