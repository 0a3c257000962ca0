"""A runc wrapper that drops ``CAP_SYS_RESOURCE`` before runc sees a container or process spec.

``docker run --privileged`` (and so every kind node) asks runc for every capability. Where the
capability bounding set lacks ``CAP_SYS_RESOURCE`` (some sandboxes and nested containers), runc
then fails to create the container. The private engine (:mod:`cnibench.engine`)
registers this wrapper as dockerd's default runtime *only* on such machines: for ``create`` and
``run`` it removes the capability from every set of ``process.capabilities`` in the bundle's
``config.json``, for ``exec`` from the ``capabilities`` of the ``--process`` spec, then it execs
the real runc with the unchanged arguments.

runc is called for every container operation, so this module imports only the standard library
and is run as a file (``python -I .../runc_shim.py``), not through the cnibench package, whose
``__init__`` modules import far more than a runc call may wait for.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Mapping, Sequence
from typing import Any, NoReturn

__all__ = [
    "CAPABILITY",
    "CAPABILITY_SETS",
    "REAL_RUNC",
    "SpecTarget",
    "main",
    "real_runc",
    "rewrite_spec_file",
    "spec_target",
    "strip_config",
    "strip_process",
]

CAPABILITY = "CAP_SYS_RESOURCE"
"""The capability removed from every spec."""
CAPABILITY_SETS = ("bounding", "effective", "inheritable", "permitted", "ambient")
"""The OCI capability sets (keys of ``process.capabilities``)."""
REAL_RUNC = "/usr/sbin/runc"
"""Where Debian installs runc; otherwise ``runc`` is looked up on ``PATH``."""

SpecTarget = tuple[str, str]
"""``("config", path of config.json)`` or ``("process", path of a process spec)``."""

_GLOBAL_VALUE_OPTIONS = frozenset({"--root", "--log", "--log-format", "--criu", "--rootless"})
"""runc's global options that take a value (the subcommand comes after them)."""
_VALUE_OPTIONS = frozenset(
    {
        "--bundle",
        "-b",
        "--process",
        "-p",
        "--pid-file",
        "--console-socket",
        "--preserve-fds",
        "--cwd",
        "--env",
        "-e",
        "--user",
        "-u",
        "--additional-gids",
        "-g",
        "--process-label",
        "--apparmor",
        "--cap",
        "-c",
        "--cgroup",
    }
)
"""Options of ``create``/``run``/``exec`` that take a value."""
_SUBCOMMANDS = frozenset({"create", "run", "exec"})


def spec_target(argv: Sequence[str], cwd: str) -> SpecTarget | None:
    """Which spec file a runc command line will read, if it is one this wrapper rewrites.

    Parameters
    ----------
    argv:
        runc's arguments without the program name, e.g. ``["--root", "/run/runc", "create",
        "--bundle", "/b", "id"]``.
    cwd:
        Working directory, the bundle when ``create``/``run`` name none.

    Returns
    -------
    SpecTarget or None
        ``("config", <bundle>/config.json)`` for ``create`` and ``run``,
        ``("process", <path>)`` for ``exec --process <path>``, ``None`` otherwise (other
        subcommands, or ``exec`` whose process comes from the container's own config).
    """
    index = 0
    while index < len(argv):
        arg = argv[index]
        if arg in _GLOBAL_VALUE_OPTIONS:
            index += 2
            continue
        if arg.startswith("-"):
            index += 1
            continue
        break
    if index >= len(argv) or argv[index] not in _SUBCOMMANDS:
        return None
    subcommand = argv[index]
    bundle, process = cwd, None
    rest = argv[index + 1 :]
    position = 0
    while position < len(rest):
        arg = rest[position]
        if arg == "--" or not arg.startswith("-"):
            break  # the container id: what follows belongs to the container's command
        name, has_value, value = arg.partition("=")
        if not has_value and name in _VALUE_OPTIONS:
            value = rest[position + 1] if position + 1 < len(rest) else ""
            position += 1
        if name in ("--bundle", "-b"):
            bundle = value
        elif name in ("--process", "-p"):
            process = value
        position += 1
    if subcommand == "exec":
        return None if process is None else ("process", os.path.join(cwd, process))
    return ("config", os.path.join(cwd, bundle, "config.json"))


def _without_capability(capabilities: Mapping[str, Any], capability: str) -> dict[str, Any]:
    return {
        key: [c for c in value if c != capability]
        if key in CAPABILITY_SETS and isinstance(value, list)
        else value
        for key, value in capabilities.items()
    }


def strip_process(process: Mapping[str, Any], capability: str = CAPABILITY) -> dict[str, Any]:
    """An OCI process spec (``runc exec --process``) without ``capability`` in any set.

    Returns a new dict; ``process`` is not modified. A spec without ``capabilities`` comes back
    equal to the input.
    """
    result = dict(process)
    capabilities = process.get("capabilities")
    if isinstance(capabilities, Mapping):
        result["capabilities"] = _without_capability(capabilities, capability)
    return result


def strip_config(config: Mapping[str, Any], capability: str = CAPABILITY) -> dict[str, Any]:
    """An OCI bundle ``config.json`` without ``capability`` in any set of ``process``.

    Returns a new dict; ``config`` is not modified.
    """
    result = dict(config)
    process = config.get("process")
    if isinstance(process, Mapping):
        result["process"] = strip_process(process, capability)
    return result


def rewrite_spec_file(target: SpecTarget) -> bool:
    """Strip the capability from the spec file ``target`` names, in place and atomically.

    Returns whether the file changed (an unchanged file is not rewritten).
    """
    kind, path = target
    with open(path, encoding="utf-8") as handle:
        spec = json.load(handle)
    stripped = strip_config(spec) if kind == "config" else strip_process(spec)
    if stripped == spec:
        return False
    temporary = f"{path}.cnibench-tmp"
    mode = os.stat(path).st_mode & 0o7777
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        json.dump(stripped, handle)
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(temporary, path)
    return True


def real_runc() -> str:
    """Path of the real runc: :data:`REAL_RUNC`, else ``runc`` on ``PATH``, else ``""``."""
    if os.access(REAL_RUNC, os.X_OK):
        return REAL_RUNC
    import shutil  # only here: a machine with /usr/sbin/runc never pays for it

    return shutil.which("runc") or ""


def main(argv: Sequence[str] | None = None) -> NoReturn:
    """Rewrite the spec the runc command line names, then exec the real runc with it."""
    args = list(sys.argv[1:] if argv is None else argv)
    target = spec_target(args, os.getcwd())
    if target is not None:
        try:
            rewrite_spec_file(target)
        except (OSError, ValueError) as exc:
            # runc itself then reports the capability it cannot grant; say why it was kept.
            print(f"cnibench runc shim: {target[1]} left unchanged: {exc}", file=sys.stderr)
    runc = real_runc()
    if not runc:
        print("cnibench runc shim: runc not found (apt-get install runc)", file=sys.stderr)
        sys.exit(127)
    os.execv(runc, [runc, *args])


if __name__ == "__main__":
    main()
