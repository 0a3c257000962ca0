"""Time to effect: how long after a change was acknowledged the data path showed it.

A policy's enforcement and a new Service's programming used to be timed by the verification's
probe, one exec of curl or bash a second, so every value fell on that step (the kind study's
0.07, 1.1-1.2, 2.2-2.3, 4.1 s). Here one command, started once in the client
(:meth:`~cnibench.backends.base.Endpoint.start`), probes every
:data:`~cnibench.tools.effect_probe.PROBE_INTERVAL` seconds (10 ms) and stamps each attempt
on the node's monotonic clock (:mod:`cnibench.tools.effect_probe`); the time to effect is the
first of :data:`EFFECT_CONSECUTIVE` attempts in a row showing the change, after the change
was acknowledged, and the attempts that got through meanwhile in a way the change rules out
are counted apart (``leaks``).

Where the target's address is known before the change (a policy), the probe runs before it, so
it sees the state the change replaces; where it is not (a Service's address comes with the
Service), it starts right after, and a change already in force at its first attempt is stated
as an upper bound (``upper_bound``).

The probe's clock is the node's: on the lab and kind it is this host's, and the probe's first
stamp falls between the start call and its line arriving here (``clock``: ``shared``); on a
remote cluster it is mapped to this host's by that line's arrival, which can only make the
time longer, by at most the exec's latency (``clock``: ``mapped``, with that bound).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from types import TracebackType

from cnibench.backends.base import Endpoint, StartedCommand
from cnibench.errors import ToolError
from cnibench.records import Measurement, ParamValue
from cnibench.scenarios.base import Prepared
from cnibench.tools.effect_probe import (
    ATTEMPT_TIMEOUT,
    Effect,
    EffectTiming,
    ProbeStart,
    effect_probe_argv,
    parse_effect_probe,
    parse_probe_start,
    time_to_effect,
)

__all__ = [
    "EFFECT_CONSECUTIVE",
    "EffectProbe",
    "TimedEffect",
    "change_measurements",
    "effect_evidence",
    "keep_effect",
    "take_effect",
    "time_change",
    "time_effect",
]

EFFECT_CONSECUTIVE = 3
"""Attempts in a row (30 ms at the probe's 10 ms) that put a change in force."""
STOP_AFTER = 50
"""Attempts in a row showing the change after which the probe stops: half a second of it held,
so ``relapses`` can show a change that flickers."""
START_TIMEOUT = 60.0
"""Seconds the probe may take to print its first line (an exec on a busy cluster)."""


@dataclass(frozen=True)
class TimedEffect:
    """A change's time to effect with the probe's log.

    Attributes
    ----------
    timing:
        What :func:`~cnibench.tools.effect_probe.time_to_effect` read from the attempts.
    clock:
        ``shared`` (the probe's stamps are this host's monotonic clock) or ``mapped ±<ms>``.
    started_after:
        Seconds from the acknowledgment to the probe's first attempt (negative: before it).
    request_seconds:
        Seconds the change's request took until acknowledged (``None``: made before the probe
        started).
    raw:
        The probe's output, kept with the run's raw files.
    from_request:
        The same attempts read from the request instead of the acknowledgment (``None``: made
        before the probe started): a change that came into force while its request was still
        being answered (the lab loading node after node) is in force from the first attempt
        that held after the request.
    """

    timing: EffectTiming
    clock: str
    started_after: float
    request_seconds: float | None
    raw: str
    from_request: EffectTiming | None = None

    def evidence(self, prefix: str) -> dict[str, ParamValue]:
        """What a verification records of it, each key led by ``prefix``: the value, how it
        was taken (the probe's median and largest spacing, its attempts, those that saw the
        state before the change, the clock) and what went through meanwhile."""
        timing = self.timing
        evidence: dict[str, ParamValue] = {
            f"{prefix}_seconds": "not in force"
            if timing.seconds is None
            else round(timing.seconds, 4),
            f"{prefix}_probe_interval_ms": _ms(timing.interval_median),
            f"{prefix}_probe_interval_max_ms": _ms(timing.interval_max),
            f"{prefix}_probe_attempts": timing.attempts,
            f"{prefix}_probe_saw_old_state": timing.old_state,
            # The probe's first attempt, in ms after the acknowledgment (negative: before).
            f"{prefix}_probe_first_ms": round(self.started_after * 1000, 2),
            f"{prefix}_probe_clock": self.clock,
            f"{prefix}_consecutive": timing.consecutive,
            f"{prefix}_leaks": timing.leaks,
            f"{prefix}_relapses": timing.relapses,
        }
        if self.request_seconds is not None:
            evidence[f"{prefix}_request_ms"] = round(self.request_seconds * 1000, 2)
        if self.from_request is not None:
            seconds = self.from_request.seconds
            evidence[f"{prefix}_from_request_seconds"] = (
                "not in force" if seconds is None else round(seconds, 4)
            )
        if timing.upper_bound:
            evidence[f"{prefix}_upper_bound"] = True
        if timing.held_during_request:
            evidence[f"{prefix}_in_force_before_ack"] = timing.held_during_request
        if timing.held_before_request:
            # As the change says before it was asked for: the set-up did not show the state
            # the change replaces, whatever the value.
            evidence[f"{prefix}_held_before_request"] = timing.held_before_request
        return evidence


class EffectProbe:
    """The effect probe running in ``source`` against ``host:port``, as a context manager:
    entering starts it (one exec) and waits for its first line; leaving stops it by its PID if
    it still runs (also on Ctrl-C).

    Parameters
    ----------
    source:
        The endpoint it runs in (a client pod).
    host, port:
        What it connects to.
    effect:
        What the change shows once in force.
    max_seconds:
        Seconds after which it starts no more attempts by itself, whatever happens here (it
        stops earlier once the change held for :data:`STOP_AFTER` attempts, or when
        :meth:`finish` gives up).
    """

    def __init__(
        self, source: Endpoint, host: str, port: int, *, effect: Effect, max_seconds: float
    ) -> None:
        self.effect = effect
        self.max_seconds = max_seconds
        self._source = source
        self._argv = effect_probe_argv(
            host, port, effect=effect, max_seconds=max_seconds, stop_after=STOP_AFTER
        )
        self._command: StartedCommand | None = None
        self._start: ProbeStart | None = None
        self._offset = 0.0
        self._clock = "shared"

    def __enter__(self) -> EffectProbe:
        called = time.monotonic()
        command = self._source.start(self._argv)
        self._command = command
        try:
            start = parse_probe_start(command.first_line(timeout=START_TIMEOUT))
        except BaseException:
            command.stop()
            raise
        seen = time.monotonic()
        self._start = start
        if not called <= start.started <= seen:
            # Another machine's clock: its first stamp is taken to be when its line arrived
            # here, which can only lengthen the times read (by the line's transit).
            self._offset = start.started - seen
            self._clock = f"mapped ±{(seen - called) * 1000:.0f} ms"
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.stop()

    def stop(self) -> None:
        """End the probe by its PID if it still runs (safe to call again)."""
        if self._command is not None:
            self._command.stop()

    def finish(self, *, since: float, within: float, requested: float | None = None) -> TimedEffect:
        """Wait up to ``within`` seconds for the probe to end by itself (the change held for
        :data:`STOP_AFTER` attempts), else stop it, and read the time to effect after
        ``since`` from what it printed.

        Parameters
        ----------
        since:
            When the change was acknowledged (:func:`time.monotonic` seconds here).
        within:
            Seconds the change may take to come into force (a cluster's settle time) and
            hold; the probe is stopped then, and a change not in force is stated as such.
        requested:
            When the change was asked for, if the probe ran then.

        Raises
        ------
        cnibench.errors.ToolError
            The probe printed nothing that parses.
        """
        if self._command is None or self._start is None:
            raise RuntimeError("EffectProbe.finish outside its with block")
        try:
            output = self._command.wait(timeout=within + ATTEMPT_TIMEOUT).stdout
        except ToolError as exc:  # still probing at the time limit: stopped, read as far as it got
            output = exc.output
        log = parse_effect_probe(output)
        on_probe_clock = since + self._offset
        timing = time_to_effect(
            log.attempts,
            since=on_probe_clock,
            effect=self.effect,
            consecutive=EFFECT_CONSECUTIVE,
            requested=None if requested is None else requested + self._offset,
        )
        first = log.attempts[0].start if log.attempts else log.start.started
        from_request = (
            None
            if requested is None
            else time_to_effect(
                log.attempts,
                since=requested + self._offset,
                effect=self.effect,
                consecutive=EFFECT_CONSECUTIVE,
            )
        )
        return TimedEffect(
            timing,
            self._clock,
            first - on_probe_clock,
            None if requested is None else since - requested,
            output,
            from_request,
        )


def _ms(seconds: float | None) -> ParamValue:
    return "none" if seconds is None else round(seconds * 1000, 2)


def time_change(
    source: Endpoint,
    host: str,
    port: int,
    *,
    effect: Effect,
    change: Callable[[], object],
    within: float,
    bound: float = 120.0,
) -> TimedEffect | ToolError:
    """Make ``change`` while the effect probe runs in ``source``, from before it until it is
    in force (or ``within`` seconds after it was acknowledged, when ``change`` returned).

    The change is made whatever becomes of the probe: a probe that cannot start or whose
    output does not parse is returned as its error, for the evidence; an error of ``change``
    itself propagates (the probe is stopped).

    Parameters
    ----------
    source, host, port, effect:
        As for :class:`EffectProbe`.
    change:
        Makes the change and returns once it is acknowledged.
    within:
        Seconds the change may take to come into force after that.
    bound:
        Seconds ``change`` itself may take, beyond ``within``, before the probe stops by
        itself (its bound if this process dies).
    """
    probe = EffectProbe(source, host, port, effect=effect, max_seconds=within + bound)
    try:
        probe.__enter__()
    except ToolError as exc:
        change()
        return exc
    try:
        requested = time.monotonic()
        change()
        acknowledged = time.monotonic()
        try:
            return probe.finish(since=acknowledged, within=within, requested=requested)
        except ToolError as exc:
            return exc
    finally:
        probe.stop()


def time_effect(
    source: Endpoint,
    host: str,
    port: int,
    *,
    effect: Effect,
    since: float,
    within: float,
) -> TimedEffect | ToolError:
    """The time to effect of a change acknowledged at ``since`` whose target is known only
    now (a Service's address): the probe starts here, so a change already in force at its
    first attempt gives an upper bound. A probe that fails is returned as its error."""
    try:
        with EffectProbe(source, host, port, effect=effect, max_seconds=within) as probe:
            return probe.finish(since=since, within=within)
    except ToolError as exc:
        return exc


def _entries(key: str) -> tuple[str, str, str]:
    return f"{key}:evidence", f"{key}:timing", f"{key}:raw"


def _probe_error(prefix: str, error: ToolError) -> dict[str, ParamValue]:
    """The evidence of a probe that failed: its error on one line."""
    return {f"{prefix}_probe_error": " ".join(str(error).split())}


def keep_effect(prepared: Prepared, key: str, result: TimedEffect | ToolError) -> None:
    """Keep a time to effect with a set-up (its evidence under ``key``-led names for the
    verification, its value, leaks and raw log for the set-up's first run)."""
    evidence_key, timing_key, raw_key = _entries(key)
    if isinstance(result, ToolError):
        prepared.expected[evidence_key] = json.dumps(_probe_error(key, result))
        if result.output:
            prepared.expected[raw_key] = result.output
        return
    prepared.expected[evidence_key] = json.dumps(result.evidence(key))
    prepared.expected[raw_key] = result.raw
    if result.timing.seconds is not None:
        prepared.expected[timing_key] = json.dumps(
            {"seconds": result.timing.seconds, "leaks": result.timing.leaks}
        )


def effect_evidence(prepared: Prepared, key: str) -> dict[str, ParamValue]:
    """What :func:`keep_effect` kept under ``key`` for the verification (empty if nothing)."""
    evidence_key, _, _ = _entries(key)
    kept = prepared.expected.get(evidence_key)
    return {} if kept is None else dict(json.loads(kept))


def take_effect(
    prepared: Prepared, key: str, metric: str
) -> tuple[list[Measurement], dict[str, str]]:
    """The measurements (``metric`` in s, ``<metric>_leaks``) and the raw probe log
    (``<metric>-probe.txt``) kept under ``key``, once: the first run after a set-up takes
    them (every round of an interleaved session sets the condition up, and times it, again)."""
    _, timing_key, raw_key = _entries(key)
    timing = prepared.expected.pop(timing_key, "")
    raw = prepared.expected.pop(raw_key, "")
    measurements: list[Measurement] = []
    if timing:
        values = json.loads(timing)
        measurements = [
            Measurement(metric, float(values["seconds"]), "s"),
            Measurement(f"{metric}_leaks", float(values["leaks"]), "count"),
        ]
    return measurements, ({f"{metric}-probe.txt": raw} if raw else {})


def change_measurements(
    result: TimedEffect | ToolError, metric: str
) -> tuple[list[Measurement], dict[str, str]]:
    """The measurements of a change timed by :func:`time_change` for one run: ``metric`` in s
    from the request (the API call or the tables' load included, as a user waits for it) until
    in force (:attr:`TimedEffect.from_request`), ``<metric>_leaks`` (after the request); and
    its raw files: the probe's log and its evidence (``<metric>.json``). A change not in force
    in time, or a probe that failed, gives no value, its evidence saying why; so does one in
    force before it was asked for."""
    if isinstance(result, ToolError):
        raw = {f"{metric}.json": json.dumps(_probe_error(metric, result), indent=2)}
        return [], ({**raw, f"{metric}-probe.txt": result.output} if result.output else raw)
    raw = {
        f"{metric}.json": json.dumps(result.evidence(metric), indent=2),
        f"{metric}-probe.txt": result.raw,
    }
    timing = result.from_request
    if timing is None or timing.seconds is None or result.timing.held_before_request:
        # Not in force in time, or in force before it was asked for (the address answered
        # already): no time to read.
        return [], raw
    return [
        Measurement(metric, timing.seconds, "s"),
        Measurement(f"{metric}_leaks", float(timing.leaks), "count"),
    ], raw
