"""Where a private engine keeps its files and how its dockerd is started.

Pure functions of the environment and the engine's name (:func:`engine_paths`), and of those
paths (:func:`dockerd_argv`, :func:`daemon_config`, :func:`runc_shim_script`): nothing is
started here, and the only file read is the engine's own record of its data root.
"""

from __future__ import annotations

import json
import os
import re
import shlex
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path

from cnibench.engine.host import ENGINE_RUN_ROOT, ENGINE_RUN_VARIABLE
from cnibench.errors import ConfigError

__all__ = [
    "DEFAULT_ENGINE_NAME",
    "ENGINE_DATA_VARIABLE",
    "INSTALL_HINT",
    "SHIM_RUNTIME",
    "TRUST_KEY_LAST_MAJOR",
    "EnginePaths",
    "daemon_config",
    "dockerd_argv",
    "dockerd_major_version",
    "engine_paths",
    "runc_shim_script",
]

DEFAULT_ENGINE_NAME = "cnibench"
"""Name of the engine ``cnibench engine up`` starts when no ``--name`` is given."""
ENGINE_DATA_VARIABLE = "CNIBENCH_ENGINE_DATA"
"""Environment variable naming the data root (image cache) instead of the default one."""
SHIM_RUNTIME = "cnibench-runc"
"""Runtime name under which the runc shim is registered with dockerd."""
INSTALL_HINT = "apt-get install docker.io containerd runc"
"""How to install what the engine runs (Debian)."""
TRUST_KEY_LAST_MAJOR = 22
"""Last dockerd major version that writes a trust key (``/etc/docker/key.json`` unless the
config's ``deprecated-key-path`` moves it); 23.0 removed the key."""

_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,39}$")
_SYSTEM_PATH = ("/usr/local/sbin", "/usr/local/bin", "/usr/sbin", "/usr/bin", "/sbin", "/bin")
_SOCKET_PATH_MAX = 107


@dataclass(frozen=True)
class EnginePaths:
    """Where one private engine keeps its files.

    Attributes
    ----------
    name:
        Engine name (a path component: letters, digits, ``_.-``).
    run_dir:
        Run directory, removed by :func:`engine_down`.
    socket:
        The Docker API socket (``DOCKER_HOST`` is ``unix://`` + this path).
    exec_root:
        dockerd's ``--exec-root`` (containerd state, network namespaces).
    pidfile:
        dockerd's ``--pidfile``: the only source of the PID :func:`engine_down` signals.
    log:
        dockerd's stdout and stderr.
    config_file:
        The daemon config (:func:`daemon_config`), so the host's ``/etc/docker/daemon.json``
        does not apply.
    shim:
        The runc shim script (written only where ``CAP_SYS_RESOURCE`` is missing).
    record:
        ``engine.json``: the data root this engine was started with, for a later ``down``.
    data_root:
        dockerd's ``--data-root``: images and containers, kept between runs as a cache.
    """

    name: str
    run_dir: Path
    socket: Path
    exec_root: Path
    pidfile: Path
    log: Path
    config_file: Path
    shim: Path
    record: Path
    data_root: Path

    @property
    def docker_host(self) -> str:
        """The ``DOCKER_HOST`` URL of this engine, e.g. ``unix:///run/cnibench-engine/x/docker.sock``."""
        return f"unix://{self.socket}"

    @property
    def lock(self) -> Path:
        """Lock file serialising ``up`` and ``down`` of this engine (beside the run dir, so it
        survives the run dir's removal)."""
        return self.run_dir.with_name(f".{self.name}.lock")


def engine_paths(
    name: str = DEFAULT_ENGINE_NAME, environ: Mapping[str, str] | None = None
) -> EnginePaths:
    """All paths of the engine ``name``, from the environment only (no file is looked at).

    Parameters
    ----------
    name:
        Engine name: 1 to 40 of letters, digits, ``_``, ``.``, ``-``, starting with a letter
        or digit.
    environ:
        Environment to read :data:`ENGINE_RUN_VARIABLE`, :data:`ENGINE_DATA_VARIABLE`,
        ``XDG_CACHE_HOME`` and ``HOME`` from (default: ``os.environ``).

    Raises
    ------
    ConfigError
        For a name that cannot be a directory name, or relative override paths.
    """
    env = os.environ if environ is None else environ
    if not _NAME_RE.match(name):
        raise ConfigError(
            f"engine name {name!r} is not 1-40 letters, digits, '_', '.' or '-'"
            " starting with a letter or digit"
        )
    run_root = Path(env.get(ENGINE_RUN_VARIABLE) or ENGINE_RUN_ROOT)
    data_override = env.get(ENGINE_DATA_VARIABLE)
    if data_override:
        data_root = Path(data_override)
    else:
        cache = env.get("XDG_CACHE_HOME") or str(Path(env.get("HOME") or Path.home()) / ".cache")
        data_root = Path(cache) / "cnibench" / "engine" / name / "data"
    for variable, path in ((ENGINE_RUN_VARIABLE, run_root), (ENGINE_DATA_VARIABLE, data_root)):
        if not path.is_absolute():
            raise ConfigError(f"{variable} must be an absolute path, got {str(path)!r}")
    run_dir = run_root / name
    longest = run_dir / "exec" / "containerd" / "containerd.sock.ttrpc"
    if len(os.fsencode(longest)) > _SOCKET_PATH_MAX:
        raise ConfigError(
            f"{ENGINE_RUN_VARIABLE} {run_root} is too long: containerd's socket {longest}"
            f" would exceed the {_SOCKET_PATH_MAX}-byte limit of unix socket paths"
        )
    return EnginePaths(
        name=name,
        run_dir=run_dir,
        socket=run_dir / "docker.sock",
        exec_root=run_dir / "exec",
        pidfile=run_dir / "dockerd.pid",
        log=run_dir / "dockerd.log",
        config_file=run_dir / "daemon.json",
        shim=run_dir / "runc-shim",
        record=run_dir / "engine.json",
        data_root=data_root,
    )


def dockerd_argv(paths: EnginePaths, *, dockerd: str = "dockerd", runc_shim: bool) -> list[str]:
    """The command line of this engine's dockerd.

    Parameters
    ----------
    paths:
        The engine's paths.
    dockerd:
        The dockerd binary.
    runc_shim:
        Register ``paths.shim`` as runtime :data:`SHIM_RUNTIME` and make it the default (where
        ``CAP_SYS_RESOURCE`` is missing, see :func:`needs_runc_shim`).
    """
    argv = [
        dockerd,
        "-H",
        paths.docker_host,
        "--data-root",
        str(paths.data_root),
        "--exec-root",
        str(paths.exec_root),
        "--pidfile",
        str(paths.pidfile),
        "--config-file",
        str(paths.config_file),
        "--iptables=false",
        "--ip-forward=false",
        "--ip-masq=false",
        "--bridge=none",
        "--dns",
        "127.0.0.1",
    ]
    if runc_shim:
        argv += [
            "--add-runtime",
            f"{SHIM_RUNTIME}={paths.shim}",
            "--default-runtime",
            SHIM_RUNTIME,
        ]
    return argv


def daemon_config(paths: EnginePaths, *, trust_key: bool) -> dict[str, str]:
    """The daemon config file's content (``--config-file``, so ``/etc/docker/daemon.json`` of
    the host never applies).

    Parameters
    ----------
    paths:
        The engine's paths.
    trust_key:
        Whether dockerd still writes a trust key (before 23.0): it then goes into the data
        root instead of ``/etc/docker/key.json`` (a config key only, 20.10 has no such flag).
    """
    return {"deprecated-key-path": str(paths.data_root / "key.json")} if trust_key else {}


def dockerd_major_version(version_output: str) -> int | None:
    """Major version from ``dockerd --version`` (``Docker version 20.10.24+dfsg1, build ...``
    gives 20), or ``None`` when the text holds none."""
    match = re.search(r"version v?(\d+)\.", version_output)
    return int(match.group(1)) if match else None


def runc_shim_script(python: str, shim_module: Path) -> str:
    """The shell script dockerd runs instead of runc: ``python -I <runc_shim.py> "$@"``.

    The module runs as a file in isolated mode so no cnibench package ``__init__`` (pandas,
    the Kubernetes client) is imported on each runc call.
    """
    return (
        "#!/bin/sh\n"
        "# cnibench private engine: runc without CAP_SYS_RESOURCE, missing from this machine's\n"
        "# capability bounding set (see cnibench.engine.runc_shim)\n"
        f'exec {shlex.quote(python)} -I {shlex.quote(str(shim_module))} "$@"\n'
    )


def _search_path(environ: Mapping[str, str]) -> str:
    parts = [p for p in environ.get("PATH", "").split(os.pathsep) if p]
    return os.pathsep.join(dict.fromkeys([*parts, *_SYSTEM_PATH]))


def _recorded(paths: EnginePaths) -> EnginePaths:
    """``paths`` with the data root this engine was started with (it may have been given by
    :data:`ENGINE_DATA_VARIABLE` in another environment)."""
    try:
        data_root = json.loads(paths.record.read_text())["data_root"]
    except (OSError, ValueError, KeyError, TypeError):
        return paths
    return replace(paths, data_root=Path(str(data_root)))
