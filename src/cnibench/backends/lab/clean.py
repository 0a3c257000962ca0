"""``cnibench clean`` for the lab: remove what crashed or killed runs left behind.

A lab's objects are recognisable by name: network namespaces ``cb<6 hex>-*``, state
directories ``/run/cnibench/cb<6 hex>``, wireguard-go control sockets
``/var/run/wireguard/cb<6 hex>-*.sock`` and per-machine cgroups ``cnibench-cb<6 hex>`` (below
the cgroup of the process that made the lab, as recorded in ``lab.json``, or below ours).
Processes a lab started live inside its namespaces, so they are found through the namespaces
(like ``ip netns pids``) and stopped by PID. Nothing else is touched.

A lab whose owning process (recorded in ``lab.json``) is still alive is in use, not left over,
and is skipped unless ``include_active`` is set.
"""

from __future__ import annotations

import json
import os
import re
import shutil
from dataclasses import dataclass
from pathlib import Path

from cnibench.backends.lab.cgroups import CGROUP_PREFIX, leftover_lab_cgroups, remove_cgroup_dirs
from cnibench.backends.lab.plan import (
    LAB_ID_RE,
    LAB_NAMESPACE_RE,
    namespace_removal_step,
    validate_lab_id,
)
from cnibench.backends.lab.runner import (
    NETNS_DIR,
    pids_in_namespaces,
    process_alive,
    process_cmdline,
    process_start_time,
    run_step,
    stop_pids,
)
from cnibench.backends.lab.wireguard import WG_SOCKET_DIR
from cnibench.errors import ProvisioningError

__all__ = ["CleanReport", "clean_leftovers"]

_SOCKET_RE = re.compile(r"^(cb[0-9a-f]{6})-.*\.sock$")


@dataclass(frozen=True)
class CleanReport:
    """What :func:`clean_leftovers` removed (or, with ``dry_run``, would remove).

    Attributes
    ----------
    lab_ids:
        Labs cleaned.
    namespaces:
        Network namespaces deleted.
    pids:
        Processes stopped (by PID).
    state_dirs:
        State directories removed.
    sockets:
        wireguard-go control sockets removed.
    cgroups:
        Per-machine cgroup directories removed (one per lab and hierarchy).
    skipped:
        Labs left alone because their owning process is alive.
    errors:
        What could not be removed, one line each.
    dry_run:
        Whether nothing was actually removed.
    """

    lab_ids: tuple[str, ...]
    namespaces: tuple[str, ...]
    pids: tuple[int, ...]
    state_dirs: tuple[Path, ...]
    sockets: tuple[Path, ...]
    cgroups: tuple[Path, ...] = ()
    skipped: tuple[str, ...] = ()
    errors: tuple[str, ...] = ()
    dry_run: bool = False

    @property
    def empty(self) -> bool:
        """Whether there was nothing to clean."""
        return not (self.lab_ids or self.skipped or self.errors)

    def summary(self) -> str:
        """A few lines for ``cnibench clean``."""
        if self.empty:
            return "lab: nothing to clean"
        verb = "would remove" if self.dry_run else "removed"
        lines = [
            f"lab: {verb} {len(self.lab_ids)} lab(s) {' '.join(self.lab_ids)}".rstrip(),
            f"  {len(self.namespaces)} namespace(s), {len(self.pids)} process(es),"
            f" {len(self.sockets)} wireguard socket(s), {len(self.state_dirs)} state dir(s),"
            f" {len(self.cgroups)} cgroup dir(s)",
        ]
        if self.skipped:
            lines.append(f"  skipped (owner still running): {' '.join(self.skipped)}")
        lines += [f"  error: {error}" for error in self.errors]
        return "\n".join(lines)


def _read_lab_json(state_dir: Path) -> dict[str, object]:
    try:
        data = json.loads((state_dir / "lab.json").read_text())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _owner_alive(info: dict[str, object]) -> bool:
    pid, started = info.get("owner_pid"), info.get("owner_start_time")
    if not isinstance(pid, int) or not process_alive(pid):
        return False
    return started is None or process_start_time(pid) == started


def _recorded_pids(info: dict[str, object]) -> list[int]:
    # A recorded process whose namespace was already deleted is only found this way; it is
    # stopped only if its command line still is the one the lab started (PIDs get reused).
    found: list[int] = []
    processes = info.get("processes")
    if not isinstance(processes, list):
        return found
    for entry in processes:
        if not isinstance(entry, dict):
            continue
        pid, argv = entry.get("pid"), entry.get("argv")
        if (
            isinstance(pid, int)
            and isinstance(argv, list)
            and process_alive(pid)
            and process_cmdline(pid) == tuple(str(a) for a in argv)
        ):
            found.append(pid)
    return found


def _recorded_cgroups(lab: str, info: dict[str, object]) -> list[Path]:
    # Only a directory named for this very lab is taken from the file, whatever it says.
    recorded = info.get("cgroups")
    if not isinstance(recorded, list):
        return []
    paths = [Path(str(entry)) for entry in recorded]
    return [p for p in paths if p.is_absolute() and p.name == f"{CGROUP_PREFIX}{lab}"]


def clean_leftovers(
    *,
    dry_run: bool = False,
    lab_id: str | None = None,
    include_active: bool = False,
    state_root: Path = Path("/run/cnibench"),
) -> CleanReport:
    """Remove leftovers of labs: processes, namespaces, wireguard-go sockets, cgroups, state
    dirs.

    Parameters
    ----------
    dry_run:
        Only report what would be removed.
    lab_id:
        Restrict to this lab (``cb`` + 6 hex digits).
    include_active:
        Also remove labs whose owning process is still running.
    state_root:
        Parent of the labs' state directories.

    Returns
    -------
    CleanReport
        What was (or would be) removed, and what could not be.

    Raises
    ------
    cnibench.errors.ConfigError
        If ``lab_id`` is malformed.
    """
    if lab_id is not None:
        validate_lab_id(lab_id)
    try:
        netns = sorted(os.listdir(NETNS_DIR))
    except FileNotFoundError:
        netns = []
    try:
        sockets = sorted(os.listdir(WG_SOCKET_DIR))
    except FileNotFoundError:
        sockets = []
    try:
        dirs = sorted(d for d in os.listdir(state_root) if LAB_ID_RE.match(d))
    except FileNotFoundError:
        dirs = []
    namespaces_of: dict[str, list[str]] = {}
    for name in netns:
        match = LAB_NAMESPACE_RE.match(name)
        if match:
            namespaces_of.setdefault(match.group(1), []).append(name)
    sockets_of: dict[str, list[Path]] = {}
    for name in sockets:
        match = _SOCKET_RE.match(name)
        if match:
            sockets_of.setdefault(match.group(1), []).append(WG_SOCKET_DIR / name)
    cgroups_of = leftover_lab_cgroups()
    labs = sorted(set(namespaces_of) | set(sockets_of) | set(dirs) | set(cgroups_of))
    if lab_id is not None:
        labs = [lab for lab in labs if lab == lab_id]

    cleaned: list[str] = []
    skipped: list[str] = []
    namespaces: list[str] = []
    pids: list[int] = []
    state_dirs: list[Path] = []
    socket_paths: list[Path] = []
    cgroup_dirs: list[Path] = []
    for lab in labs:
        info = _read_lab_json(state_root / lab)
        if not include_active and _owner_alive(info):
            skipped.append(lab)
            continue
        cleaned.append(lab)
        lab_namespaces = namespaces_of.get(lab, [])
        namespaces += lab_namespaces
        found = [pid for group in pids_in_namespaces(lab_namespaces).values() for pid in group]
        pids += sorted(set(found) | set(_recorded_pids(info)))
        socket_paths += sockets_of.get(lab, [])
        found_dirs = [*cgroups_of.get(lab, []), *_recorded_cgroups(lab, info)]
        cgroup_dirs += [d for d in dict.fromkeys(found_dirs) if d.is_dir()]
        if lab in dirs:
            state_dirs.append(state_root / lab)

    errors: list[str] = []
    if not dry_run:
        errors += [f"pid {pid} survived SIGKILL" for pid in stop_pids(pids)]
        if namespaces:
            try:
                run_step(namespace_removal_step(namespaces))
            except ProvisioningError as exc:
                errors.append(str(exc))
            errors += [f"namespace {ns} remains" for ns in namespaces if (NETNS_DIR / ns).exists()]
        for path in socket_paths:
            try:
                path.unlink(missing_ok=True)
            except OSError as exc:
                errors.append(f"cannot remove {path}: {exc}")
        errors += [f"cgroup {d} remains" for d in remove_cgroup_dirs(cgroup_dirs)]
        for path in state_dirs:
            shutil.rmtree(path, ignore_errors=True)
            if path.exists():
                errors.append(f"cannot remove {path}")
    return CleanReport(
        lab_ids=tuple(cleaned),
        namespaces=tuple(namespaces),
        pids=tuple(pids),
        state_dirs=tuple(state_dirs),
        sockets=tuple(socket_paths),
        cgroups=tuple(cgroup_dirs),
        skipped=tuple(skipped),
        errors=tuple(errors),
        dry_run=dry_run,
    )
