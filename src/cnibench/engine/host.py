"""What this host gives cnibench's private container engine: where engines keep their run
directories, and whether the engine's containers may have ``CAP_SYS_RESOURCE``.

Low in the engine package (it imports none of it): :mod:`cnibench.engine` starts engines
with both, the kube backend's images module picks the image set by the engine's socket, and
its Cilium driver drops the capability its chart asks for.
"""

from __future__ import annotations

import re
from pathlib import Path

__all__ = [
    "CAP_SYS_RESOURCE",
    "ENGINE_RUN_ROOT",
    "ENGINE_RUN_VARIABLE",
    "capability_bounding_set",
    "lacks_capability",
    "needs_runc_shim",
]

ENGINE_RUN_ROOT = Path("/run/cnibench-engine")
"""Parent of every engine's run directory (socket, pidfile, exec root, log)."""
ENGINE_RUN_VARIABLE = "CNIBENCH_ENGINE_RUN"
"""Environment variable replacing :data:`ENGINE_RUN_ROOT`."""
CAP_SYS_RESOURCE = 24
"""Bit of ``CAP_SYS_RESOURCE`` in the capability masks of ``/proc/<pid>/status``."""


def capability_bounding_set(status: str) -> int | None:
    """The ``CapBnd`` mask of a ``/proc/<pid>/status`` text, ``None`` if it has none."""
    match = re.search(r"^CapBnd:\s*([0-9a-fA-F]+)\s*$", status, re.MULTILINE)
    return int(match.group(1), 16) if match else None


def needs_runc_shim(bounding_set: int | None) -> bool:
    """Whether runc must be wrapped: the bounding set is known and lacks ``CAP_SYS_RESOURCE``."""
    return bounding_set is not None and not bounding_set & (1 << CAP_SYS_RESOURCE)


def lacks_capability(status_file: Path = Path("/proc/self/status")) -> bool:
    """Whether this process's bounding set (inherited by dockerd) lacks ``CAP_SYS_RESOURCE``."""
    try:
        return needs_runc_shim(capability_bounding_set(status_file.read_text()))
    except OSError:
        return False
