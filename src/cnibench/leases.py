"""Who holds what: a live process's claim on a thing other processes could remove.

A kind cluster or a private engine outlives the ``cnibench run`` that made it, and another
shell's ``cnibench clean`` (or the reliability tier's) must not take it from a run still
using it. While a process uses one, it holds a *lease*: a file
``<root>/<kind>/<name>/<pid>.json`` naming the process by PID and start time (a later process
that reuses the PID is not the holder). :func:`live_holders` lists the holders still alive and
removes the files of the dead ones, so a killed session's lease expires with it; whoever
removes a thing asks it first and keeps what a live process holds.

The root is ``$CNIBENCH_LEASES`` when set, else ``/run/cnibench/leases`` (tmpfs: PIDs and
leases end with the boot) where it can be written, else one under the user's runtime or
temporary directory.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import tempfile
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from pathlib import Path

__all__ = [
    "CLEAN_FOR_VARIABLE",
    "LEASES_VARIABLE",
    "Lease",
    "clean_for",
    "hold",
    "lease_name",
    "leases_root",
    "live_holders",
    "live_kind_holders",
    "process_start_time",
]

LEASES_VARIABLE = "CNIBENCH_LEASES"
"""Environment variable naming the leases' root directory (tests give each their own)."""

CLEAN_FOR_VARIABLE = "CNIBENCH_CLEAN_FOR"
"""Environment variable of ``cnibench clean``: the PIDs (comma-separated) it cleans for. Their
own leases keep nothing from that clean, while every other clean still keeps what they hold: a
test tier or a study removes its own clusters and engine without first giving up the claim
that keeps them from the cleans of other shells running beside it."""

SYSTEM_ROOT = Path("/run/cnibench/leases")
"""The root shared by every process of the machine, where it can be written (root)."""

_SAFE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,99}$")


def leases_root() -> Path:
    """Where leases are kept (module docstring)."""
    chosen = os.environ.get(LEASES_VARIABLE)
    if chosen:
        return Path(chosen)
    if os.access(SYSTEM_ROOT, os.W_OK) or (
        not SYSTEM_ROOT.exists() and os.access(SYSTEM_ROOT.parent.parent, os.W_OK)
    ):
        return SYSTEM_ROOT
    base = os.environ.get("XDG_RUNTIME_DIR") or tempfile.gettempdir()
    return Path(base) / f"cnibench-leases-{os.getuid()}"


def lease_name(text: str) -> str:
    """A file-name-safe name for ``text``: itself when already safe (a cluster name), else a
    digest (an engine's ``unix:///run/...`` address)."""
    if _SAFE.match(text):
        return text
    return "h-" + hashlib.sha256(text.encode()).hexdigest()[:16]


def process_start_time(pid: int) -> int | None:
    """Start time of ``pid`` in clock ticks since boot (``/proc/<pid>/stat`` field 22), which
    tells a live process apart from a later one that reused its PID; ``None`` if it is gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat.rsplit(")", 1)[-1].split()
    # fields[0] is field 3 (state), so field 22 is fields[19].
    return int(fields[19]) if len(fields) > 19 else None


def _directory(kind: str, name: str, root: Path | None) -> Path:
    return (root or leases_root()) / lease_name(kind) / lease_name(name)


@dataclass
class Lease:
    """One process's claim; :meth:`release` (or the process's end) gives it up."""

    path: Path

    def release(self) -> None:
        """Remove the claim. Safe to repeat."""
        with contextlib.suppress(FileNotFoundError):
            self.path.unlink()

    def __enter__(self) -> Lease:
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


def hold(kind: str, name: str, *, root: Path | None = None, pid: int | None = None) -> Lease:
    """Claim ``name`` of ``kind`` (``"kind-cluster"``, ``"engine"``) for process ``pid``
    (default: this one) until it is released or the process ends."""
    holder = os.getpid() if pid is None else pid
    directory = _directory(kind, name, root)
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"{holder}.json"
    record = {"pid": holder, "start_time": process_start_time(holder), "kind": kind, "name": name}
    staged = path.with_suffix(".tmp")
    staged.write_text(json.dumps(record))
    staged.replace(path)
    return Lease(path)


def clean_for(environ: Mapping[str, str] | None = None) -> frozenset[int]:
    """The PIDs :data:`CLEAN_FOR_VARIABLE` names (an entry that is no PID is ignored).

    >>> sorted(clean_for({"CNIBENCH_CLEAN_FOR": "12, 7,x"}))
    [7, 12]
    """
    text = (os.environ if environ is None else environ).get(CLEAN_FOR_VARIABLE, "")
    return frozenset(int(part) for part in text.split(",") if part.strip().isdigit())


def live_holders(
    kind: str,
    name: str,
    *,
    root: Path | None = None,
    exclude_self: bool = True,
    exclude: Collection[int] = (),
) -> tuple[int, ...]:
    """The PIDs of the live processes that hold ``name`` of ``kind`` (this process left out
    unless ``exclude_self`` is false, and those of ``exclude``); the lease files of ended
    processes are removed."""
    directory = _directory(kind, name, root)
    try:
        entries = sorted(directory.glob("*.json"))
    except OSError:
        return ()
    alive: list[int] = []
    for entry in entries:
        try:
            record = json.loads(entry.read_text())
            pid, started = int(record["pid"]), record.get("start_time")
        except (OSError, ValueError, KeyError, TypeError):
            continue
        now = process_start_time(pid)
        if now is None or (started is not None and now != started):
            with contextlib.suppress(OSError):
                entry.unlink()
            continue
        if (exclude_self and pid == os.getpid()) or pid in exclude:
            continue
        alive.append(pid)
    return tuple(alive)


def live_kind_holders(
    kind: str,
    *,
    root: Path | None = None,
    exclude_self: bool = True,
    exclude: Collection[int] = (),
) -> tuple[int, ...]:
    """The PIDs of the live processes that hold any name of ``kind`` (this process left out
    unless ``exclude_self`` is false, and those of ``exclude``): "is any kind cluster in
    use?"."""
    try:
        names = sorted(d.name for d in (root or leases_root()).joinpath(lease_name(kind)).iterdir())
    except OSError:
        return ()
    pids: set[int] = set()
    for name in names:
        pids.update(live_holders(kind, name, root=root, exclude_self=exclude_self, exclude=exclude))
    return tuple(sorted(pids))
