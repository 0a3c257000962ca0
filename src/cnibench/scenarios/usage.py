"""What a run's window cost the machines: each machine's own CPU and memory from two readings
of :meth:`~cnibench.backends.base.Cluster.resource_usage`, and this host's idle CPU share for
a cluster that runs on it (a run that left less than 5 % idle measured a saturated host)."""

from __future__ import annotations

import math
from collections.abc import Mapping

from cnibench.backends.base import ClusterIdentity, ResourceUsage
from cnibench.errors import CnibenchError
from cnibench.metrics.host_cpu import HOST_IDLE, CpuTimes, idle_share, read_cpu_times
from cnibench.records import Measurement

__all__ = ["LOCAL_PROVIDERS", "host_cpu", "host_idle", "machine_usage"]

LOCAL_PROVIDERS = frozenset({"lab", "kind"})
"""Providers whose clusters run on this host (the lab's namespaces, kind's node containers):
only their runs record this host's idle CPU (:data:`~cnibench.metrics.host_cpu.HOST_IDLE`)."""


def machine_usage(
    before: Mapping[str, ResourceUsage], after: Mapping[str, ResourceUsage], seconds: float
) -> list[Measurement]:
    """Each machine's own CPU and memory over a run, from two readings of
    :meth:`Cluster.resource_usage` taken ``seconds`` apart.

    ``cpu@<machine>`` is in cores (CPU seconds per second of run: 0.5 is half a core, and a
    machine may use more than one); ``ram@<machine>`` is the peak over the run in MB (2**20
    bytes) where the peak can be reset, otherwise what is charged at the end. A machine whose
    CPU is not its own (``cpu_seconds`` ``None``) has only ``ram@``.

    >>> machine_usage({"egress-gw": ResourceUsage(10.0)}, {"egress-gw": ResourceUsage(11.5)}, 3.0)
    [Measurement(metric='cpu@egress-gw', value=0.5, unit='cores', pair=None)]
    """
    out: list[Measurement] = []
    if seconds <= 0:
        return out
    for name, end in after.items():
        start = before.get(name)
        if start is None:
            continue
        if start.cpu_seconds is not None and end.cpu_seconds is not None:
            cpu = max(0.0, end.cpu_seconds - start.cpu_seconds) / seconds
            out.append(Measurement(f"cpu@{name}", cpu, "cores"))
        memory = end.memory_peak_bytes if end.memory_peak_bytes is not None else end.memory_bytes
        if memory is not None:
            out.append(Measurement(f"ram@{name}", memory / 2**20, "MB"))
    return out


def host_cpu(cluster: ClusterIdentity) -> CpuTimes | None:
    """This host's CPU times now, for a cluster that runs on it (:data:`LOCAL_PROVIDERS`);
    ``None`` for a remote one or when ``/proc/stat`` cannot be read (the run then has no
    ``host_idle``, never a guess)."""
    if cluster.provider not in LOCAL_PROVIDERS:
        return None
    try:
        return read_cpu_times()
    except CnibenchError:
        return None


def host_idle(before: CpuTimes | None, after: CpuTimes | None) -> list[Measurement]:
    """The ``host_idle`` record of a run (ratio, 0-1: the host's idle CPU share over its
    window, :func:`cnibench.metrics.host_cpu.idle_share`), or nothing without both readings.

    >>> [(m.metric, m.value, m.unit) for m in host_idle(CpuTimes(800, 1000), CpuTimes(805, 1100))]
    [('host_idle', 0.05, 'ratio')]
    """
    if before is None or after is None:
        return []
    share = idle_share(before, after)
    return [] if math.isnan(share) else [Measurement(HOST_IDLE, share, "ratio")]
