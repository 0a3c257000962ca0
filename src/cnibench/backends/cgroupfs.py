"""Reading cgroups from the host: where a process's cgroups are, and what they have used.

Both backends measure a machine as a cgroup: the lab its own per-node cgroups
(:mod:`cnibench.backends.lab.cgroups`), kind the cgroup of each node's container and of the
pods inside it (:mod:`cnibench.backends.kube.node_usage`). Two layouts are read, whichever the
host has:

- cgroup v1: ``cpuacct`` (``cpuacct.usage``, nanoseconds) and ``memory``
  (``memory.usage_in_bytes``, ``memory.max_usage_in_bytes``, whose peak can be reset;
  ``memory.stat``'s ``total_inactive_file`` for the working set);
- cgroup v2: ``cpu.stat`` (``usage_usec``) and ``memory.current`` / ``memory.peak`` /
  ``memory.stat``'s ``inactive_file``.

Nothing here raises for a missing or unreadable file: a number that cannot be read is
``None``.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from pathlib import Path

from cnibench.backends.base import ResourceUsage

__all__ = [
    "CgroupLayout",
    "cpu_stat_usec",
    "layout_from",
    "own_cgroups",
    "process_layout",
    "read_int",
    "read_usage",
]


@dataclass(frozen=True)
class CgroupLayout:
    """Where this process's cgroups are, per kind of number.

    Attributes
    ----------
    cpu:
        Directory of our own cgroup in the hierarchy counting CPU time (v1 ``cpuacct`` or v2),
        or ``None``.
    cpu_v2:
        Whether :attr:`cpu` is a cgroup v2 directory (``cpu.stat``) rather than v1 ``cpuacct``.
    memory:
        Directory of our own cgroup in the v1 ``memory`` hierarchy, or ``None`` (on v2 memory
        is read from the :attr:`cpu` directory when its controller is enabled).
    """

    cpu: Path | None
    cpu_v2: bool
    memory: Path | None

    @property
    def roots(self) -> tuple[Path, ...]:
        """Our own cgroup directory in every hierarchy used (without duplicates)."""
        return tuple(dict.fromkeys(p for p in (self.cpu, self.memory) if p is not None))


def own_cgroups(text: str) -> dict[str, str]:
    """``/proc/self/cgroup`` as controller -> path; the v2 entry under ``""``."""
    own: dict[str, str] = {}
    for line in text.splitlines():
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        for controller in parts[1].split(",") if parts[1] else [""]:
            own[controller] = parts[2]
    return own


def _cgroup_mounts(text: str) -> list[tuple[str, str, str, set[str]]]:
    """``/proc/self/mountinfo`` cgroup mounts as (fs root, mount point, type, options)."""
    mounts = []
    for line in text.splitlines():
        before, sep, after = line.partition(" - ")
        if not sep:
            continue
        fields, tail = before.split(), after.split()
        if len(fields) < 5 or len(tail) < 3 or tail[0] not in ("cgroup", "cgroup2"):
            continue
        mounts.append((fields[3], fields[4], tail[0], set(tail[2].split(","))))
    return mounts


def _inside(fs_root: str, mount_point: str, own: str) -> Path | None:
    """Directory of cgroup ``own`` under a mount of the hierarchy at ``fs_root``."""
    if own != fs_root and not own.startswith(fs_root.rstrip("/") + "/"):
        return None
    relative = own[len(fs_root) :].lstrip("/")
    path = Path(mount_point) / relative
    return path if path.is_dir() else None


def layout_from(cgroup_text: str, mountinfo_text: str) -> CgroupLayout:
    """The layout described by ``/proc/self/cgroup`` and ``/proc/self/mountinfo`` texts."""
    own = own_cgroups(cgroup_text)
    cpu: Path | None = None
    memory: Path | None = None
    v2: Path | None = None
    for fs_root, point, fs_type, options in _cgroup_mounts(mountinfo_text):
        if fs_type == "cgroup2":
            if v2 is None and "" in own:
                v2 = _inside(fs_root, point, own[""])
        elif "cpuacct" in options and cpu is None and "cpuacct" in own:
            cpu = _inside(fs_root, point, own["cpuacct"])
        elif "memory" in options and memory is None and "memory" in own:
            memory = _inside(fs_root, point, own["memory"])
    if cpu is not None:
        return CgroupLayout(cpu=cpu, cpu_v2=False, memory=memory)
    return CgroupLayout(cpu=v2, cpu_v2=v2 is not None, memory=memory)


def read_int(path: Path) -> int | None:
    try:
        return int(path.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None


def cpu_stat_usec(path: Path) -> int | None:
    try:
        for line in path.read_text().splitlines():
            key, _, value = line.partition(" ")
            if key == "usage_usec":
                return int(value)
    except (OSError, ValueError):
        return None
    return None


def process_layout(pid: int, *, proc: Path = Path("/proc")) -> CgroupLayout:
    """The cgroup directories of process ``pid`` as this process sees them (its
    ``/proc/<pid>/cgroup`` placed under this process's cgroup mounts); every field ``None``
    when the process is gone or its cgroups are not mounted here."""
    try:
        cgroup_text = (proc / str(pid) / "cgroup").read_text()
        mountinfo_text = (proc / "self" / "mountinfo").read_text()
    except OSError:
        return CgroupLayout(cpu=None, cpu_v2=False, memory=None)
    return layout_from(cgroup_text, mountinfo_text)


def _stat_value(path: Path, key: str) -> int | None:
    try:
        for line in path.read_text().splitlines():
            name, _, value = line.partition(" ")
            if name == key:
                return int(value)
    except (OSError, ValueError):
        return None
    return None


def read_usage(
    cpu_dir: Path, *, cpu_v2: bool, memory_dir: Path | None, reset_peak: bool = False
) -> ResourceUsage | None:
    """What the cgroup at ``cpu_dir`` (and ``memory_dir`` on v1) has used: cumulative CPU
    seconds, its working set (memory charged minus inactive page cache, as the kubelet counts
    it) and its peak; ``None`` when its CPU cannot be read.

    Parameters
    ----------
    reset_peak:
        After reading, restart the peak (v1 only), so the next reading's peak covers what
        happened in between.
    """
    if cpu_v2:
        usec = cpu_stat_usec(cpu_dir / "cpu.stat")
        if usec is None:
            return None
        current = read_int(cpu_dir / "memory.current")
        inactive = _stat_value(cpu_dir / "memory.stat", "inactive_file")
        working = None if current is None else max(0, current - (inactive or 0))
        return ResourceUsage(usec / 1e6, working, read_int(cpu_dir / "memory.peak"))
    nanos = read_int(cpu_dir / "cpuacct.usage")
    if nanos is None:
        return None
    if memory_dir is None:
        return ResourceUsage(nanos / 1e9)
    current = read_int(memory_dir / "memory.usage_in_bytes")
    inactive = _stat_value(memory_dir / "memory.stat", "total_inactive_file")
    working = None if current is None else max(0, current - (inactive or 0))
    peak = read_int(memory_dir / "memory.max_usage_in_bytes")
    if reset_peak:
        with contextlib.suppress(OSError):
            (memory_dir / "memory.max_usage_in_bytes").write_text("0\n")
    return ResourceUsage(nanos / 1e9, working, peak)
