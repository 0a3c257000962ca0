"""Per-node cgroups of a lab, so that a run's CPU and memory are each node's own.

Every lab namespace that stands for a machine (node ``n<i>`` with its pods, the external host
``ext``, the monitoring host ``mon``) is a *member* with one cgroup per hierarchy, below this
process's own cgroup: ``<own cgroup>/cnibench-<lab>/<member>``. Every process the lab starts
enters its member's cgroups before it executes (:func:`enter_argv`), so its children are counted
too, and so are kernel threads moved in with :meth:`LabCgroups.adopt` (the threaded NAPI
pollers that do a node's receive processing, see :mod:`cnibench.backends.napi`).

Two layouts are read, whichever the host has:

- cgroup v1: ``cpuacct`` (``cpuacct.usage``, nanoseconds) and ``memory``
  (``memory.usage_in_bytes``, ``memory.max_usage_in_bytes``, whose peak can be reset);
- cgroup v2: ``cpu.stat`` (``usage_usec``, present without any controller enabled) and, when
  the memory controller is enabled for our children, ``memory.current`` / ``memory.peak``.

A hierarchy that is missing or not writable leaves its numbers out (``None``), it never fails
a run; :attr:`LabCgroups.available` says whether CPU can be separated at all.
"""

from __future__ import annotations

import contextlib
import errno
import re
from collections.abc import Iterable, Mapping, Sequence
from functools import cache
from pathlib import Path

from cnibench.backends.base import ResourceUsage
from cnibench.backends.cgroupfs import (
    CgroupLayout,
    cpu_stat_usec,
    layout_from,
    read_int,
)
from cnibench.errors import ProvisioningError
from cnibench.waiting import Deadline, poll

__all__ = [
    "CGROUP_PREFIX",
    "CgroupLayout",
    "LabCgroups",
    "detect_layout",
    "enter_argv",
    "leftover_lab_cgroups",
    "member_of_namespace",
    "remove_cgroup_dirs",
]

CGROUP_PREFIX = "cnibench-"
"""Name prefix of a lab's cgroup directory (``cnibench-<lab id>``) in every hierarchy."""

_MEMBER_RE = re.compile(r"^(cb[0-9a-f]{6})-(n\d+|ext|mon)(?:p\d+)?$")
_LAB_DIR_RE = re.compile(rf"^{CGROUP_PREFIX}(cb[0-9a-f]{{6}})$")
_RMDIR_WAIT = 5.0
"""Seconds to wait for a cgroup to empty: exiting kernel threads leave it asynchronously."""

# Enter every cgroup.procs file named before "--", then become the command after it. The
# shell writes its own PID ($$), which exec keeps, so the command and all its children start
# inside the cgroups; 125 (as env(1) uses) when a cgroup cannot be entered.
_ENTER_SCRIPT = (
    'for f; do shift; [ "$f" = -- ] && break; '
    'echo $$ > "$f" || { echo "cnibench: cannot enter cgroup $f" >&2; exit 125; }; done; '
    'exec "$@"'
)


@cache
def detect_layout() -> CgroupLayout:
    """This process's cgroup layout (read once)."""
    try:
        cgroup_text = Path("/proc/self/cgroup").read_text()
        mountinfo_text = Path("/proc/self/mountinfo").read_text()
    except OSError:
        return CgroupLayout(cpu=None, cpu_v2=False, memory=None)
    return layout_from(cgroup_text, mountinfo_text)


def member_of_namespace(namespace: str) -> tuple[str, str] | None:
    """``(lab id, member)`` of a lab namespace that belongs to a machine, else ``None``.

    >>> member_of_namespace("cb12ab34-n2p7")
    ('cb12ab34', 'n2')
    >>> member_of_namespace("cb12ab34-ul") is None
    True
    """
    match = _MEMBER_RE.match(namespace)
    return (match.group(1), match.group(2)) if match else None


def _procs_files(lab_id: str, member: str, layout: CgroupLayout) -> list[Path]:
    return [root / f"{CGROUP_PREFIX}{lab_id}" / member / "cgroup.procs" for root in layout.roots]


def enter_argv(
    namespace: str, argv: Sequence[str], *, layout: CgroupLayout | None = None
) -> list[str]:
    """``argv`` prefixed so that it runs inside the cgroups of ``namespace``'s member.

    Unchanged when the namespace belongs to no member or its lab has no cgroups (a lab that
    could not create them, or a command run before they exist).
    """
    found = member_of_namespace(namespace)
    if found is None:
        return list(argv)
    files = [f for f in _procs_files(*found, layout or detect_layout()) if f.exists()]
    if not files:
        return list(argv)
    return ["sh", "-c", _ENTER_SCRIPT, "cnibench-cgroup", *map(str, files), "--", *argv]


def _rmdir_tree(directory: Path, deadline: Deadline) -> bool:
    """Remove a cgroup directory and its children (leaves first); True when gone."""
    if not directory.is_dir():
        return True
    for child in sorted(p for p in directory.iterdir() if p.is_dir()):
        _rmdir_tree(child, deadline)

    def settled() -> tuple[bool] | None:
        """``(True,)`` when gone, ``(False,)`` on an error that will not pass, else ``None``."""
        try:
            directory.rmdir()
        except FileNotFoundError:
            return (True,)
        except OSError as exc:
            # EBUSY: a task is still leaving (a kernel thread exits after its device is gone).
            return None if exc.errno == errno.EBUSY else (False,)
        return (True,)

    outcome = poll(settled, timeout=deadline, interval=0.05)
    return outcome is not None and outcome[0]


class LabCgroups:
    """The cgroups of one lab's members.

    Parameters
    ----------
    lab_id:
        The lab.
    layout:
        Where our own cgroups are (default: :func:`detect_layout`).
    """

    def __init__(self, lab_id: str, *, layout: CgroupLayout | None = None) -> None:
        self.lab_id = lab_id
        self.layout = layout or detect_layout()
        self._members: tuple[str, ...] = ()

    @property
    def available(self) -> bool:
        """Whether the members' CPU time is counted (created and a CPU hierarchy exists)."""
        return bool(self._members) and self.layout.cpu is not None

    @property
    def members(self) -> tuple[str, ...]:
        """The members created."""
        return self._members

    def directories(self) -> list[Path]:
        """The lab's cgroup directory in every hierarchy used."""
        return [root / f"{CGROUP_PREFIX}{self.lab_id}" for root in self.layout.roots]

    def create(self, members: Iterable[str]) -> None:
        """Create one cgroup per member in every hierarchy (nothing when there is none).

        Raises
        ------
        ProvisioningError
            If a directory cannot be created (e.g. a read-only cgroup filesystem).
        """
        wanted = tuple(members)
        for lab_dir in self.directories():
            for member in wanted:
                try:
                    (lab_dir / member).mkdir(parents=True, exist_ok=True)
                except OSError as exc:
                    raise ProvisioningError(f"create cgroup {lab_dir / member}: {exc}") from exc
        if self.layout.roots:
            self._members = wanted

    def adopt(self, member: str, pids: Iterable[int]) -> None:
        """Move ``pids`` (e.g. kernel threads) into ``member``'s cgroups.

        Raises
        ------
        ProvisioningError
            If a PID cannot be moved.
        """
        for procs in _procs_files(self.lab_id, member, self.layout):
            for pid in pids:
                try:
                    procs.write_text(f"{pid}\n")
                except OSError as exc:
                    raise ProvisioningError(
                        f"move pid {pid} into cgroup {procs.parent}: {exc}"
                    ) from exc

    def usage(self, *, reset_peak: bool = False) -> dict[str, ResourceUsage]:
        """Cumulative CPU seconds and memory of every member (empty when not available).

        Parameters
        ----------
        reset_peak:
            After reading, restart each member's memory peak (cgroup v1), so that the next
            reading's peak covers only what happened in between.
        """
        if not self.available or self.layout.cpu is None:
            return {}
        out: dict[str, ResourceUsage] = {}
        for member in self._members:
            cpu_dir = self.layout.cpu / f"{CGROUP_PREFIX}{self.lab_id}" / member
            if self.layout.cpu_v2:
                usec = cpu_stat_usec(cpu_dir / "cpu.stat")
                seconds = None if usec is None else usec / 1e6
            else:
                nanos = read_int(cpu_dir / "cpuacct.usage")
                seconds = None if nanos is None else nanos / 1e9
            if seconds is None:
                continue
            memory, peak = self._memory(member, cpu_dir, reset_peak=reset_peak)
            out[member] = ResourceUsage(seconds, memory, peak)
        return out

    def _memory(
        self, member: str, cpu_dir: Path, *, reset_peak: bool
    ) -> tuple[int | None, int | None]:
        if self.layout.memory is not None:
            directory = self.layout.memory / f"{CGROUP_PREFIX}{self.lab_id}" / member
            current = read_int(directory / "memory.usage_in_bytes")
            peak = read_int(directory / "memory.max_usage_in_bytes")
            if reset_peak:
                with contextlib.suppress(OSError):
                    (directory / "memory.max_usage_in_bytes").write_text("0\n")
            return current, peak
        if self.layout.cpu_v2:
            return read_int(cpu_dir / "memory.current"), read_int(cpu_dir / "memory.peak")
        return None, None

    def remove(self) -> list[str]:
        """Remove the lab's cgroups (after its processes and namespaces are gone).

        Returns
        -------
        list of str
            Directories that could not be removed.
        """
        return remove_cgroup_dirs(self.directories())


def leftover_lab_cgroups(layout: CgroupLayout | None = None) -> Mapping[str, list[Path]]:
    """Lab cgroup directories that exist, by lab id (for ``cnibench clean``)."""
    found: dict[str, list[Path]] = {}
    for root in (layout or detect_layout()).roots:
        with contextlib.suppress(OSError):
            for entry in sorted(root.iterdir()):
                match = _LAB_DIR_RE.match(entry.name)
                if match and entry.is_dir():
                    found.setdefault(match.group(1), []).append(entry)
    return found


def remove_cgroup_dirs(directories: Iterable[Path]) -> list[str]:
    """Remove lab cgroup directories (``cnibench-<lab>``) and their members; return those
    that remain."""
    deadline = Deadline(_RMDIR_WAIT)
    return [str(d) for d in directories if not _rmdir_tree(d, deadline)]
