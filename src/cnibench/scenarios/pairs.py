"""Several client/server pairs measured at once (``--pairs N``), and the proof that they were.

k8s-netperf runs N client/server pairs side by side and reports their sum; it also asks for a
latency probe during the streams (its issue #234). Here a run of N pairs starts every client
(and the probe) in its own thread behind one barrier, so none starts before all are ready,
and records when each began and ended as the caller saw it (wall clock, seconds since the
epoch). :func:`overlap_problem` then checks that the streams really ran together: every one
must share at least :data:`MIN_OVERLAP_SHARE` of its length with the window all the others
shared. A run that fails the check is failed with that reason, never recorded as a sum of
streams that took turns.

Servers are placed (and so listening) before any client starts: the pairs' server pods are
placed by the scenario's ``prepare``, long before a run.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass

from cnibench.backends.base import CommandResult, Endpoint
from cnibench.errors import CnibenchError, ToolError

__all__ = [
    "BARRIER_TIMEOUT",
    "MIN_OVERLAP_SHARE",
    "StreamJob",
    "StreamRun",
    "overlap_problem",
    "run_together",
]

MIN_OVERLAP_SHARE = 0.5
"""Share of each stream's length it must run while every other stream runs too. Half: a
client's start through ``kubectl exec``-like paths lags by up to a few hundred ms, which a
stream of the ``smoke`` profile's 2 s still clears; a stream that ran after another (shares 0)
or mostly beside none does not."""
BARRIER_TIMEOUT = 60.0
"""Seconds the threads of one run may take to be ready to start together."""


@dataclass(frozen=True)
class StreamJob:
    """One client command of a run of pairs.

    Attributes
    ----------
    name:
        How a reason names it, e.g. ``"pair 3"`` or ``"latency probe"``.
    client:
        The endpoint it runs in.
    argv:
        The command.
    timeout:
        Seconds it may take (then the backend kills it: :meth:`Endpoint.run`).
    inside:
        Whether it must end before every other job does (a probe of the others' load).
    """

    name: str
    client: Endpoint
    argv: Sequence[str]
    timeout: float
    inside: bool = False


@dataclass(frozen=True)
class StreamRun:
    """What one :class:`StreamJob` did.

    Attributes
    ----------
    name:
        The job's name.
    started, ended:
        When its command was started and when it returned, as this process saw it (seconds
        since the epoch).
    result:
        Its output, or ``None`` when it failed.
    error:
        Why it failed (``None`` when it ran).
    inside:
        :attr:`StreamJob.inside`.
    """

    name: str
    started: float
    ended: float
    result: CommandResult | None
    error: CnibenchError | None = None
    inside: bool = False

    @property
    def seconds(self) -> float:
        """How long it ran (s)."""
        return self.ended - self.started


def run_together(jobs: Sequence[StreamJob]) -> list[StreamRun]:
    """Run every job at once: one thread each, released together by a barrier.

    Parameters
    ----------
    jobs:
        The clients (and any probe) of one run.

    Returns
    -------
    list of StreamRun
        In the order of ``jobs``; a job that failed carries its error (the others still ran).

    Raises
    ------
    cnibench.errors.ToolError
        A thread did not end within its job's timeout and :data:`BARRIER_TIMEOUT` (its
        backend did not kill the command).
    """
    barrier = threading.Barrier(len(jobs))
    runs: list[StreamRun | None] = [None] * len(jobs)

    def work(index: int, job: StreamJob) -> None:
        try:
            barrier.wait(BARRIER_TIMEOUT)
        except threading.BrokenBarrierError:
            now = time.time()
            runs[index] = StreamRun(
                job.name,
                now,
                now,
                None,
                ToolError(f"{job.name} never started: a thread lagged"),
                job.inside,
            )
            return
        started = time.time()
        try:
            result = job.client.run(job.argv, timeout=job.timeout)
        except CnibenchError as exc:
            runs[index] = StreamRun(job.name, started, time.time(), None, exc, job.inside)
            return
        runs[index] = StreamRun(job.name, started, time.time(), result, None, job.inside)

    threads = [
        threading.Thread(target=work, args=(i, job), name=f"cnibench-{job.name}", daemon=True)
        for i, job in enumerate(jobs)
    ]
    for thread in threads:
        thread.start()
    for thread, job in zip(threads, jobs, strict=True):
        thread.join(job.timeout + BARRIER_TIMEOUT)
    missing = [job.name for job, run in zip(jobs, runs, strict=True) if run is None]
    if missing:
        raise ToolError(f"{', '.join(missing)} did not end within its timeout")
    return [run for run in runs if run is not None]


def overlap_problem(
    runs: Sequence[StreamRun], *, min_share: float = MIN_OVERLAP_SHARE
) -> tuple[str, float]:
    """Whether ``runs`` ran at the same time, and the window they all shared.

    Parameters
    ----------
    runs:
        The streams of one run (their ``started``/``ended``).
    min_share:
        Share of its own length each stream must overlap the window all the others shared;
        a stream marked ``inside`` (a probe) must moreover end before all the others do.

    Returns
    -------
    tuple of (str, float)
        ``""`` when every stream overlapped the others enough, else one line naming the first
        stream that did not and when it ran (seconds from the earliest start); and the length
        of the window all streams shared (s; 0 when there is none). A single stream has
        nothing to overlap: ``("", its length)``.

    Examples
    --------
    >>> a, b = StreamRun("pair 0", 0.0, 2.0, None), StreamRun("pair 1", 2.5, 4.5, None)
    >>> overlap_problem([a, b])[0].split(":")[0]
    'pair 0 ran from 0.00 s to 2.00 s, the others together from 2.50 s to 4.50 s'
    """
    if not runs:
        return "", 0.0
    shared = max(0.0, min(r.ended for r in runs) - max(r.started for r in runs))
    if len(runs) == 1:
        return "", shared
    origin = min(r.started for r in runs)
    for index, run in enumerate(runs):
        others = [r for i, r in enumerate(runs) if i != index]
        low = max(r.started for r in others)
        high = min(r.ended for r in others)
        common = max(0.0, min(high, run.ended) - max(low, run.started))
        if run.inside and run.ended > high:
            return (
                f"{run.name} ended at {run.ended - origin:.2f} s, after the others' common end"
                f" at {high - origin:.2f} s: part of it ran without their load",
                shared,
            )
        if run.seconds <= 0 or common < min_share * run.seconds:
            share = 0.0 if run.seconds <= 0 else common / run.seconds
            return (
                f"{run.name} ran from {run.started - origin:.2f} s to {run.ended - origin:.2f} s,"
                f" the others together from {low - origin:.2f} s to {high - origin:.2f} s: it"
                f" shared {100 * share:.0f} % of its {run.seconds:.2f} s with them (at least"
                f" {100 * min_share:.0f} % needed)",
                shared,
            )
    return "", shared
