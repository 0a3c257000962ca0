"""Helpers shared by the reliability tests (a plain module the test files import).

They look at the machine the way an operator would after a run: the labs a process owns (from
``/run/cnibench/*/lab.json``), ``ip netns list``, live PIDs and command lines, and the files in a
results directory.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import pytest

STATE_ROOT = Path("/run/cnibench")
NETNS_DIR = Path("/run/netns")

EGRESS_RUN = (
    "run",
    "--cluster",
    "lab",
    "--scenario",
    "egress",
    "--cni",
    "routed",
    "--profile",
    "smoke",
)
"""The run every interrupt and secret test starts (2 conditions x 2 runs, about 25-30 s)."""

SUMMARY_ENV = "CNIBENCH_RELIABILITY_SUMMARY"


def require_root_lab() -> None:
    """Skip (with the reason) unless this host can run labs; CNIBENCH_REQUIRE=lab turns the
    skip into a failure through tests/conftest.py."""
    if os.geteuid() != 0:
        pytest.skip("reliability tests need root (network namespaces)")
    from cnibench.backends.lab import LabBackend

    ok, reason = LabBackend().available()
    if not ok:
        pytest.skip(f"lab backend unavailable: {reason}")


def cnibench_argv(*args: str) -> list[str]:
    """``python -m cnibench.cli ARGS`` with this interpreter."""
    return [sys.executable, "-m", "cnibench.cli", *args]


def labs_owned_by(pid: int) -> dict[str, dict[str, Any]]:
    """``lab.json`` of every lab whose recorded owner is ``pid``, by lab id."""
    owned: dict[str, dict[str, Any]] = {}
    for lab_json in STATE_ROOT.glob("cb*/lab.json"):
        try:
            info = json.loads(lab_json.read_text())
        except (OSError, ValueError):
            continue  # being replaced or removed right now
        if isinstance(info, dict) and info.get("owner_pid") == pid:
            owned[lab_json.parent.name] = info
    return owned


def cb_namespaces() -> set[str]:
    """Names from ``ip netns list`` that look like cnibench labs (``cb`` prefix)."""
    out = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True, check=True)
    names = {line.split()[0] for line in out.stdout.splitlines() if line.strip()}
    return {name for name in names if name.startswith("cb")}


def pid_alive(pid: int) -> bool:
    """Whether ``pid`` exists and is not a zombie."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[-1].split()[0] not in ("Z", "X")


def cmdline(pid: int) -> tuple[str, ...]:
    """argv of ``pid`` (empty when gone)."""
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return ()
    return tuple(p.decode(errors="replace") for p in raw.split(b"\0") if p)


def processes_mentioning(text: str) -> list[tuple[int, str]]:
    """Live processes whose command line contains ``text`` (e.g. a lab's state directory:
    Prometheus, nginx and node-exporter configs live there)."""
    found = []
    own = os.getpid()
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit() or int(entry.name) == own:
            continue
        argv = cmdline(int(entry.name))
        joined = " ".join(argv)
        if text in joined and pid_alive(int(entry.name)):
            found.append((int(entry.name), joined[:200]))
    return found


def foreign_lab(lab_id: str, ours: Iterable[int]) -> bool:
    """Whether ``lab_id`` belongs to a live process other than ``ours`` (someone else's lab)."""
    try:
        info = json.loads((STATE_ROOT / lab_id / "lab.json").read_text())
    except (OSError, ValueError):
        return False
    owner = info.get("owner_pid")
    return isinstance(owner, int) and owner not in set(ours) and pid_alive(owner)


def new_leaked_namespaces(before: set[str], ours: Iterable[int]) -> set[str]:
    """``cb`` namespaces that did not exist in ``before`` and whose lab no other live process
    owns: what our runs left behind."""
    owners = list(ours)
    return {ns for ns in cb_namespaces() - before if not foreign_lab(ns.split("-", 1)[0], owners)}


def leftovers_of(labs: Mapping[str, Mapping[str, Any]]) -> list[str]:
    """Everything of ``labs`` still present: namespaces, state dirs, recorded processes still
    alive with their recorded command line, processes mentioning the state dir."""
    problems: list[str] = []
    present = cb_namespaces()
    for lab_id, info in labs.items():
        problems += [f"namespace {ns}" for ns in present if ns.startswith(f"{lab_id}-")]
        if (STATE_ROOT / lab_id).exists():
            problems.append(f"state dir {STATE_ROOT / lab_id}")
        for entry in info.get("processes", []):
            pid, argv = entry.get("pid"), tuple(entry.get("argv", ()))
            if isinstance(pid, int) and pid_alive(pid) and cmdline(pid) == argv:
                problems.append(f"process {entry.get('name')} pid {pid}")
        problems += [
            f"process pid {pid}: {line}" for pid, line in processes_mentioning(f"/{lab_id}/")
        ]
    return problems


def run_files(results: Path) -> list[Path]:
    """Final (non-temporary) run files under a results directory."""
    return sorted(p for p in results.glob("*/runs/*.json") if not p.name.startswith("."))


def unparsable_files(results: Path) -> list[str]:
    """JSON files under ``results`` (temporaries excluded) that do not parse."""
    bad = []
    for path in results.rglob("*.json"):
        if path.name.startswith("."):
            continue
        try:
            json.loads(path.read_text())
        except (OSError, ValueError) as exc:
            bad.append(f"{path}: {exc}")
    return bad


def merge_summary(section: str, data: Mapping[str, Any]) -> None:
    """Merge ``data`` under ``section`` into the JSON file named by $CNIBENCH_RELIABILITY_SUMMARY
    (no-op when unset), so docs/RELIABILITY.md can be regenerated from the last run."""
    target = os.environ.get(SUMMARY_ENV)
    if not target:
        return
    path = Path(target)
    try:
        current = json.loads(path.read_text())
    except (OSError, ValueError):
        current = {}
    current[section] = data
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(json.dumps(current, indent=2, sort_keys=True))
    os.replace(tmp, path)
