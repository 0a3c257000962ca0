"""The host's idle CPU share over a run, from two readings of ``/proc/stat``.

A run whose machine had no CPU to spare measures the machine, not the datapath: its tools,
the CNI's agents and the kernel all wait for a CPU, and the numbers say so nowhere. Both local
backends run on this host (the lab's namespaces; kind's nodes, which are containers on it), so
the aggregate ``cpu`` line of this host's ``/proc/stat`` is the machine the run had. Reading
it is one small file read at each end of the run window: nothing the run measures moves.

Parsing is a pure function (:func:`parse_cpu_times`) tested on captured lines; only
:func:`read_cpu_times` reads the file.

>>> before = parse_cpu_times("cpu  100 0 50 800 50 0 0 0 0 0\\n")
>>> after = parse_cpu_times("cpu  280 0 60 810 50 0 0 0 0 0\\n")
>>> round(idle_share(before, after), 3)
0.05
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

from cnibench.errors import CnibenchError

__all__ = ["HOST_IDLE", "PROC_STAT", "CpuTimes", "idle_share", "parse_cpu_times", "read_cpu_times"]

PROC_STAT = Path("/proc/stat")
"""The kernel's CPU time counters (USER_HZ ticks since boot)."""

HOST_IDLE = "host_idle"
"""Name of the per-run record: the host's idle CPU share over the run window (unit ``ratio``,
0-1), a diagnostic that flags saturated runs (:func:`cnibench.report.data.saturated_runs`),
never a compared metric."""


@dataclass(frozen=True)
class CpuTimes:
    """The host's CPU time since boot, summed over its CPUs, in USER_HZ ticks.

    Attributes
    ----------
    idle:
        Ticks idle, waiting for I/O, or spent by niced tasks (``idle + iowait + nice``): time a
        runnable task of normal priority could have had. A task at nice 19 (a background
        build, as this project's CI runs beside its measured tests) gets about 1.5 % of a CPU
        that a normal task wants, so it leaves the run its CPU; counting it busy would call
        every run beside one saturated.
    total:
        Ticks of every kind a CPU spends (``user nice system idle iowait irq softirq
        steal``; ``guest`` and ``guest_nice`` are already counted in ``user`` and ``nice``).
        Steal (a hypervisor giving the CPU to another guest) is time this host did not get,
        so it is busy, not idle.
    """

    idle: int
    total: int


def parse_cpu_times(text: str) -> CpuTimes:
    """The aggregate ``cpu`` line of ``/proc/stat`` text (``text``) as :class:`CpuTimes`.

    Raises
    ------
    CnibenchError
        No aggregate ``cpu`` line, or one with fewer than four counters.
    """
    for line in text.splitlines():
        fields = line.split()
        if not fields or fields[0] != "cpu":
            continue
        try:
            ticks = [int(value) for value in fields[1:9]]
        except ValueError as exc:
            raise CnibenchError(f"unreadable /proc/stat cpu line: {line!r}") from exc
        if len(ticks) < 4:
            break
        iowait = ticks[4] if len(ticks) > 4 else 0
        return CpuTimes(idle=ticks[1] + ticks[3] + iowait, total=sum(ticks))
    raise CnibenchError("no aggregate 'cpu' line with at least 4 counters in /proc/stat")


def read_cpu_times(path: Path = PROC_STAT) -> CpuTimes:
    """This host's CPU times now (:func:`parse_cpu_times` of ``path``).

    Raises
    ------
    CnibenchError
        ``path`` unreadable or without an aggregate ``cpu`` line.
    """
    try:
        text = path.read_text(encoding="ascii")
    except OSError as exc:
        raise CnibenchError(f"cannot read {path}: {exc}") from exc
    return parse_cpu_times(text)


def idle_share(before: CpuTimes, after: CpuTimes) -> float:
    """The share of the host's CPU time that was idle between two readings (ratio, 0-1):
    0.02 means 2 % of every CPU's time idle. NaN when no tick passed (readings too close
    together to say anything)."""
    total = after.total - before.total
    if total <= 0:
        return math.nan
    return min(1.0, max(0.0, (after.idle - before.idle) / total))
