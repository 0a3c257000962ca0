"""Before the first measured run on a new cluster: wait for its CPU to settle, within a bound.

A cluster just made is still busy starting: its CNI's agents compile and load their datapath,
its control plane reconciles what was just created. Runs measured meanwhile read low (kind,
2026-12-05: the first three iperf3 runs 9.09-9.20 Gbit/s, the next two 10.07-10.87, and raw
``iperf3 -c`` between the same nodes minutes later 10.3-11.0). What the cluster asks for is
its own fact (:attr:`cnibench.backends.base.Monitoring.warm_up`); the runner then calls
:func:`settle` and runs the warm-up runs the fact names (recorded with status ``warmup``,
never counted).

The signal is what the runner already reads around every run: each machine's and agent's own
CPU seconds (:meth:`~cnibench.backends.base.Monitoring.resource_usage`: on kind the CNI
agent's pods, and with ``napi=threaded`` each role's node). The cluster has settled when every
one of them used at most :data:`IDLE_CORES` over the last :data:`QUIET_SECONDS`. The host's
own CPU (``/proc/stat``) is not the signal: on a shared machine (CI runs other test tiers
beside the kind tier) it may never go idle, and a run it starves is flagged by its own
``host_idle`` already.

The wait goes through :func:`cnibench.waiting.poll`, bounded by the cluster's
:attr:`~cnibench.backends.base.WarmUp.settle_seconds`; a cluster that does not settle in time
is measured anyway, and the outcome (how long it waited, whether it settled, who was busy)
goes into the warm-up run's records.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from cnibench.backends.base import ResourceUsage
from cnibench.errors import CnibenchError
from cnibench.records import Measurement
from cnibench.waiting import poll

__all__ = [
    "IDLE_CORES",
    "QUIET_SECONDS",
    "SETTLED",
    "SETTLE_WAIT",
    "Settled",
    "busy_machines",
    "settle",
]

IDLE_CORES = 0.2
"""The most CPU (cores: CPU seconds per second) a machine or agent of a settled cluster may
use. Three times the busiest agent's median during measured runs on kind (cilium-agent over
its four pods, 0.07 cores; flanneld 0.04, kube-router 0.01: docs/results/kind-2026-11-27),
and a fifth of what one agent starting up keeps busy (a core or more)."""
QUIET_SECONDS = 5.0
"""How long every machine and agent must stay below :data:`IDLE_CORES` (s)."""
READ_INTERVAL = 1.0
"""Seconds between two readings of the cluster's CPU."""
SETTLE_WAIT = "settle_wait"
"""Record of a warm-up run: how long the runner waited for the cluster to settle (unit ``s``)."""
SETTLED = "settled"
"""Record of a warm-up run: whether the cluster settled within its bound (unit ``bool``)."""


@dataclass(frozen=True)
class Settled:
    """How a wait for a cluster's CPU to settle ended.

    Attributes
    ----------
    seconds:
        How long it waited (s).
    settled:
        Whether every machine and agent stayed below :data:`IDLE_CORES` for
        :data:`QUIET_SECONDS` within the bound; ``False`` too when there was nothing to read.
    detail:
        One line: what was seen last (``"cilium-agent 0.81 cores"``), or why nothing could be.
    bound:
        The longest it could have waited (s).
    """

    seconds: float
    settled: bool
    detail: str
    bound: float

    def measurements(self) -> list[Measurement]:
        """The warm-up run's records of the wait: :data:`SETTLE_WAIT` and :data:`SETTLED`."""
        return [
            Measurement(SETTLE_WAIT, self.seconds, "s"),
            Measurement(SETTLED, 1.0 if self.settled else 0.0, "bool"),
        ]

    def as_json(self) -> dict[str, float | bool | str]:
        """What the session's files keep of it."""
        return {
            "seconds": self.seconds,
            "settled": self.settled,
            "detail": self.detail,
            "bound": self.bound,
        }

    def line(self) -> str:
        """One line for the session's output, e.g. ``"settled after 7 s (every agent below
        0.2 cores for 5 s)"``."""
        if self.settled:
            return f"settled after {self.seconds:.0f} s ({self.detail})"
        return f"not settled after {self.seconds:.0f} s (bound {self.bound:g} s): {self.detail}"


def busy_machines(
    before: Mapping[str, ResourceUsage],
    after: Mapping[str, ResourceUsage],
    seconds: float,
    *,
    idle_cores: float = IDLE_CORES,
) -> dict[str, float]:
    """The machines and agents that used more than ``idle_cores`` between two readings taken
    ``seconds`` apart, with the cores each used; one whose CPU counter went back (a pod
    replaced) counts as busy (``inf``). Those without CPU in both readings are left out.

    >>> busy_machines({"a": ResourceUsage(1.0), "b": ResourceUsage(3.0)},
    ...               {"a": ResourceUsage(1.5), "b": ResourceUsage(7.0)}, 5.0)
    {'b': 0.8}
    """
    busy: dict[str, float] = {}
    for name, end in after.items():
        start = before.get(name)
        if start is None or start.cpu_seconds is None or end.cpu_seconds is None:
            continue
        used = end.cpu_seconds - start.cpu_seconds
        cores = float("inf") if used < 0 else used / seconds
        if cores > idle_cores:
            busy[name] = cores
    return busy


def _with_cpu(usage: Mapping[str, ResourceUsage]) -> list[str]:
    return sorted(name for name, u in usage.items() if u.cpu_seconds is not None)


def _cores(busy: Mapping[str, float]) -> str:
    return ", ".join(f"{name} {cores:.2f} cores" for name, cores in sorted(busy.items()))


def settle(
    read: Callable[[], Mapping[str, ResourceUsage]],
    *,
    bound: float,
    quiet: float = QUIET_SECONDS,
    idle_cores: float = IDLE_CORES,
    interval: float = READ_INTERVAL,
    clock: Callable[[], float] | None = None,
) -> Settled:
    """Wait until every machine and agent ``read`` gives CPU for has used at most
    ``idle_cores`` over the last ``quiet`` seconds, or ``bound`` seconds have passed.

    Parameters
    ----------
    read:
        The cluster's usage now (:meth:`~cnibench.backends.base.Monitoring.resource_usage`);
        an error of cnibench's starts the quiet time again and is what was seen.
    bound:
        The longest wait (s); the quiet time cannot be shorter, so a bound below ``quiet``
        never settles.
    quiet:
        How long the CPU must stay low (s).
    idle_cores:
        The most each may use (cores).
    interval:
        Seconds between readings.
    clock:
        Monotonic seconds, the readings' times; default :func:`time.monotonic`.

    Returns
    -------
    Settled
        How long it waited and what it saw. At once, not settled, when the cluster
        separates no machine's or agent's CPU: there is nothing to wait for.
    """
    now_of = clock or time.monotonic
    started = now_of()
    readings: list[tuple[float, Mapping[str, ResourceUsage]]] = []
    seen = ["no reading yet"]

    def quiet_now() -> Settled | None:
        now = now_of()
        try:
            usage = read()
        except CnibenchError as exc:
            readings.clear()
            seen[0] = f"{type(exc).__name__}: {exc}"
            return None
        if not _with_cpu(usage):
            return Settled(now - started, False, "no machine's or agent's own CPU to read", bound)
        readings.append((now, usage))
        # The newest reading at least the quiet time old opens the window.
        opening = [r for r in readings if now - r[0] >= quiet]
        if not opening:
            return None
        since, before = opening[-1]
        del readings[: len(opening) - 1]
        busy = busy_machines(before, usage, now - since, idle_cores=idle_cores)
        if busy:
            seen[0] = _cores(busy)
            return None
        names = ", ".join(_with_cpu(usage))
        return Settled(
            now - started, True, f"{names} below {idle_cores:g} cores for {quiet:g} s", bound
        )

    outcome = poll(quiet_now, timeout=bound, interval=interval)
    if outcome is not None:
        return outcome
    return Settled(now_of() - started, False, seen[0], bound)
