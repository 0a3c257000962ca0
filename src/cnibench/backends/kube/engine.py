"""A private container engine: Debian's dockerd, started for cnibench where none runs.

kind needs a Docker API. On a machine without a running engine, :func:`engine_up` starts
``dockerd`` (``apt-get install docker.io containerd runc``) privately, and ``cnibench engine
up`` prints the ``DOCKER_HOST`` that reaches it:

- its socket, exec root, pidfile, log and daemon config live in a run directory
  (``/run/cnibench-engine/<name>/``; ``CNIBENCH_ENGINE_RUN`` moves the parent), never at the
  default ``/run/docker.sock``, so a system engine and other private engines are untouched;
- its data root is an image cache kept between runs
  (``${XDG_CACHE_HOME:-~/.cache}/cnibench/engine/<name>/data``; ``CNIBENCH_ENGINE_DATA``
  overrides), so images built once are there the next time;
- it writes no host firewall rules, does no NAT or forwarding, has no default bridge and gives
  containers ``127.0.0.1`` as DNS server: nothing it runs reaches out of the machine unless a
  network is created on purpose (kind creates its own bridge through the API).

Where the capability bounding set lacks ``CAP_SYS_RESOURCE``, ``--privileged`` containers
cannot be created; the engine then registers :mod:`cnibench.backends.kube.runc_shim` as its
default runtime, which removes that one capability from each spec before runc sees it. A
machine that has the capability runs runc unmodified.

Paths and the dockerd command line are built by pure functions (:func:`engine_paths`,
:func:`dockerd_argv`), as are the parsers of ``/proc`` files; only :func:`engine_up`,
:func:`engine_down` and the status functions touch processes. dockerd is only ever stopped
by the PID in its own pidfile, after ``/proc/<pid>/cmdline`` shows it serves this engine's
socket.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import fcntl
import json
import math
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
from collections.abc import Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cnibench.backends.kube.engine_api import engine_failures
from cnibench.backends.kube.host import (
    CAP_SYS_RESOURCE,
    ENGINE_RUN_ROOT,
    ENGINE_RUN_VARIABLE,
    capability_bounding_set,
    lacks_capability,
    needs_runc_shim,
)
from cnibench.backends.kube.providers import ENGINE_LEASE, release_lib_modules
from cnibench.errors import CnibenchError, ConfigError, ProvisioningError
from cnibench.leases import live_holders
from cnibench.waiting import poll

if TYPE_CHECKING:
    from docker import DockerClient

__all__ = [
    "CAP_SYS_RESOURCE",
    "DEFAULT_ENGINE_NAME",
    "ENGINE_DATA_VARIABLE",
    "ENGINE_RUN_ROOT",
    "ENGINE_RUN_VARIABLE",
    "INSTALL_HINT",
    "SHIM_RUNTIME",
    "EngineCleanReport",
    "EnginePaths",
    "EngineStatus",
    "answering_engine",
    "bridge_names",
    "capability_bounding_set",
    "clean_engines",
    "daemon_config",
    "disk_usage",
    "dockerd_argv",
    "dockerd_major_version",
    "engine_doctor_row",
    "engine_down",
    "engine_paths",
    "engine_status",
    "engine_up",
    "format_size",
    "is_engine_cmdline",
    "lacks_capability",
    "last_log_problem",
    "mount_points_under",
    "needs_runc_shim",
    "runc_shim_script",
    "running_engines",
]

DEFAULT_ENGINE_NAME = "cnibench"
"""Name of the engine ``cnibench engine up`` starts when no ``--name`` is given."""
ENGINE_DATA_VARIABLE = "CNIBENCH_ENGINE_DATA"
"""Environment variable naming the data root (image cache) instead of the default one."""
SHIM_RUNTIME = "cnibench-runc"
"""Runtime name under which the runc shim is registered with dockerd."""
INSTALL_HINT = "apt-get install docker.io containerd runc"
"""How to install what the engine runs (Debian)."""
START_TIMEOUT = 60.0
"""Seconds :func:`engine_up` waits for a new dockerd to answer ``/_ping``."""
STOP_TIMEOUT = 30.0
"""Seconds :func:`engine_down` waits after SIGTERM before SIGKILL."""
TRUST_KEY_LAST_MAJOR = 22
"""Last dockerd major version that writes a trust key (``/etc/docker/key.json`` unless the
config's ``deprecated-key-path`` moves it); 23.0 removed the key."""

_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,39}$")
_SYSTEM_PATH = ("/usr/local/sbin", "/usr/local/bin", "/usr/sbin", "/usr/bin", "/sbin", "/bin")
_MNT_DETACH = 2
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


@dataclass(frozen=True)
class EngineStatus:
    """What is known about one private engine.

    Attributes
    ----------
    paths:
        Its paths (data root as recorded at start when the record exists).
    pid:
        PID of its live dockerd, ``None`` when none runs.
    answering:
        Whether its socket answers ``GET /_ping``.
    """

    paths: EnginePaths
    pid: int | None
    answering: bool

    @property
    def name(self) -> str:
        """Engine name."""
        return self.paths.name

    @property
    def running(self) -> bool:
        """Whether its dockerd process is alive."""
        return self.pid is not None

    def summary(self) -> str:
        """One line for ``cnibench engine status``."""
        if self.answering:
            state = f"running (pid {self.pid}), answers at {self.paths.docker_host}"
        elif self.running:
            state = f"running (pid {self.pid}) but not answering at {self.paths.docker_host}"
        else:
            state = "not running, run directory left over"
        return f"{self.name}: {state}; data root {self.paths.data_root}"

    def data_size(self) -> int:
        """Bytes the engine's data root takes on disk (images, containers, volumes), each
        file counted once however many hard links it has; 0 when it does not exist."""
        return disk_usage(self.paths.data_root)


@dataclass(frozen=True)
class EngineCleanReport:
    """What :func:`clean_engines` stopped (or, with ``dry_run``, would stop).

    Attributes
    ----------
    items:
        ``(engine name, outcome)`` per engine found: ``"stopped"``, ``"would stop"`` or
        ``"failed: <reason>"``.
    dry_run:
        Whether nothing was actually stopped.
    """

    items: tuple[tuple[str, str], ...]
    dry_run: bool = False

    @property
    def failed(self) -> tuple[str, ...]:
        """Names of the engines that could not be stopped."""
        return tuple(name for name, outcome in self.items if outcome.startswith("failed"))

    def summary(self) -> str:
        """One line per engine, for ``cnibench clean``."""
        if not self.items:
            return "engine: nothing to clean"
        return "\n".join(f"engine: {name}: {outcome}" for name, outcome in self.items)


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
        "# capability bounding set (see cnibench.backends.kube.runc_shim)\n"
        f'exec {shlex.quote(python)} -I {shlex.quote(str(shim_module))} "$@"\n'
    )


def is_engine_cmdline(cmdline: Sequence[str], docker_host: str) -> bool:
    """Whether ``cmdline`` (``/proc/<pid>/cmdline`` split) is a dockerd listening on exactly
    ``docker_host``: the check before any signal is sent to a PID read from a pidfile."""
    if not cmdline or os.path.basename(cmdline[0]) != "dockerd":
        return False
    for index, arg in enumerate(cmdline):
        if arg in ("-H", "--host") and index + 1 < len(cmdline):
            if cmdline[index + 1] == docker_host:
                return True
        elif arg in (f"-H={docker_host}", f"--host={docker_host}"):
            return True
    return False


def mount_points_under(mountinfo: str, roots: Sequence[Path]) -> list[str]:
    """Mount points of a ``/proc/<pid>/mountinfo`` text at or below any of ``roots``, deepest
    first (the order to unmount them in). Octal escapes (``\\040`` for a space) are decoded."""
    prefixes = [str(root).rstrip("/") for root in roots]
    found: list[str] = []
    for line in mountinfo.splitlines():
        fields = line.split()
        if len(fields) < 5:
            continue
        point = re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), fields[4])
        if any(point == p or point.startswith(p + "/") for p in prefixes):
            found.append(point)
    # Later mounts may stack on earlier ones: unmount in reverse order, deepest paths first.
    ordered = list(reversed(found))
    return sorted(dict.fromkeys(ordered), key=lambda p: p.count("/"), reverse=True)


def last_log_problem(log: str) -> str:
    """The last line of a dockerd log that says what went wrong, made readable.

    Lines of level ``fatal``, ``error`` or ``panic`` and lines without a level (``failed to
    start daemon: ...``, a usage error's ``Status: ...``) count; ``info``/``warning``/``debug``
    lines are passed over unless nothing else is there. For a logrus line the ``msg`` and
    ``error`` fields are returned (``msg: error``).
    """
    lines = [line.strip() for line in log.splitlines() if line.strip()]
    # A usage error ends with "Status: <problem>" and "See 'dockerd --help'., Code: 125".
    lines = [line.removeprefix("Status: ") for line in lines if not line.startswith("See '")]
    for line in reversed(lines):
        level = re.search(r"\blevel=(\w+)", line)
        if level is None or level.group(1) in ("fatal", "error", "panic"):
            return _readable(line)
    return _readable(lines[-1]) if lines else "dockerd printed nothing"


def _readable(line: str) -> str:
    """``msg: error`` of a logrus line (``time=... level=... msg="..." error="..."``), else
    the line."""
    fields: dict[str, str] = dict(re.findall(r'\b(msg|error)="((?:[^"\\]|\\.)*)"', line))
    if not fields:
        return line
    text = ": ".join(fields[key] for key in ("msg", "error") if fields.get(key))
    return text.replace('\\"', '"')


def answering_engine(
    candidates: Sequence[str] = ("docker", "podman"), *, timeout: float = 5.0
) -> str:
    """The first of ``candidates`` whose ``<engine> info`` succeeds (the docker client follows
    ``DOCKER_HOST``), or ``""`` when none answers within ``timeout`` seconds each."""
    for engine in candidates:
        if shutil.which(engine) is None:
            continue
        try:
            done = subprocess.run(
                [engine, "info"], capture_output=True, timeout=timeout, check=False
            )
        except (OSError, subprocess.TimeoutExpired):
            continue
        if done.returncode == 0:
            return engine
    return ""


def engine_up(
    name: str = DEFAULT_ENGINE_NAME,
    *,
    environ: Mapping[str, str] | None = None,
    timeout: float = START_TIMEOUT,
) -> str:
    """Start the private engine ``name`` unless it already answers; return its ``DOCKER_HOST``.

    dockerd runs detached in its own session, so it outlives the caller; stop it with
    :func:`engine_down`.

    Parameters
    ----------
    name:
        Engine name (see :func:`engine_paths`).
    environ:
        Environment for the paths and for dockerd's ``PATH`` (default: ``os.environ``).
    timeout:
        Seconds to wait for a new dockerd to answer.

    Returns
    -------
    str
        ``unix://<run dir>/docker.sock``.

    Raises
    ------
    ConfigError
        When not run as root.
    ProvisioningError
        When dockerd is not installed or does not come up (with the last problem it logged).
    """
    env = os.environ if environ is None else environ
    paths = engine_paths(name, env)
    if _ping(paths.socket):
        return paths.docker_host
    _require_root(f"cnibench engine up --name {name}")
    search_path = _search_path(env)
    dockerd = shutil.which("dockerd", path=search_path)
    if dockerd is None:
        raise ProvisioningError(f"dockerd is not installed: {INSTALL_HINT}")
    with _engine_lock(paths):
        if _ping(paths.socket):  # another `engine up` started it while we waited for the lock
            return paths.docker_host
        live = _engine_pid(paths)
        if live is not None:
            if _wait_answering(paths, live, timeout):
                return paths.docker_host
            raise ProvisioningError(
                f"engine {name} (dockerd pid {live}) runs but does not answer at"
                f" {paths.docker_host}; stop it with: cnibench engine down --name {name}"
            )
        _start(paths, dockerd, search_path, timeout)
    return paths.docker_host


def engine_down(
    name: str = DEFAULT_ENGINE_NAME,
    *,
    purge: bool = False,
    environ: Mapping[str, str] | None = None,
    timeout: float = STOP_TIMEOUT,
) -> bool:
    """Stop the private engine ``name`` and remove its run directory; nothing to do is fine.

    dockerd is signalled only by the PID in its pidfile, and only when
    ``/proc/<pid>/cmdline`` shows a dockerd serving this engine's socket: SIGTERM, up to
    ``timeout`` seconds (dockerd stops its containers meanwhile), then SIGKILL. Whatever is
    still mounted under the exec root or data root is unmounted before anything is removed.

    Parameters
    ----------
    name:
        Engine name.
    purge:
        Also delete the data root (the image cache).
    environ:
        Environment for the paths (default: ``os.environ``).
    timeout:
        Seconds to wait after SIGTERM.

    Returns
    -------
    bool
        Whether there was anything to stop or remove.

    Raises
    ------
    ConfigError
        When something must be stopped or removed and this is not root.
    ProvisioningError
        When dockerd survives SIGKILL, the socket answers without a pidfile naming its
        dockerd, or a mount cannot be removed.
    """
    paths = engine_paths(name, environ)
    if not paths.run_dir.exists() and not (purge and paths.data_root.exists()):
        return False
    _require_root(f"cnibench engine down --name {name}")
    with _engine_lock(paths):
        paths = _recorded(paths)
        pid = _engine_pid(paths)
        if pid is None and _ping(paths.socket):
            raise ProvisioningError(
                f"engine {name} answers at {paths.docker_host} but {paths.pidfile} names no"
                " dockerd of it; not stopping an unknown process"
            )
        bridges: list[str] = []
        if pid is not None and _ping(paths.socket):
            # Networks kind made (e.g. `kind`) live on as host bridges after dockerd stops:
            # prune the unused ones and remember every bridge of this engine to remove.
            bridges = _bridges_after_prune(paths.socket)
        if pid is not None:
            _stop_pid(pid, timeout, what=f"dockerd of engine {name}")
        for bridge in bridges:
            if Path("/sys/class/net", bridge).exists():
                subprocess.run(["ip", "link", "delete", bridge], check=False, capture_output=True)
        # dockerd stops its containerd; one left by a killed dockerd has its own pidfile.
        containerd = _pid_from(paths.exec_root / "containerd" / "containerd.pid")
        if containerd is not None and _is_child_daemon(containerd, "containerd", paths.exec_root):
            _stop_pid(containerd, 10.0, what=f"containerd of engine {name}")
        _unmount_under(paths.exec_root, paths.data_root)
        if paths.run_dir.exists():
            shutil.rmtree(paths.run_dir)
        if purge and paths.data_root.exists():
            shutil.rmtree(paths.data_root)
        # Held, so no one holds it now; one waiting on it goes on with an engine that is gone.
        with contextlib.suppress(OSError):
            paths.lock.unlink()
    if not running_engines(environ=environ):
        # No engine left, so no kind cluster of cnibench's can use the /lib/modules it made
        # for kind: however the engine was stopped (`engine down`, `clean`, a test), it goes.
        release_lib_modules(environ=environ)
    return True


def disk_usage(root: Path) -> int:
    """Bytes the files under ``root`` take on disk (allocated blocks, as ``du`` counts them),
    not following symlinks and counting each inode once; unreadable entries are skipped."""
    seen: set[tuple[int, int]] = set()
    total = 0
    for directory, dirnames, filenames in os.walk(root, onerror=lambda _: None):
        for entry in (directory, *(os.path.join(directory, n) for n in filenames)):
            try:
                info = os.lstat(entry)
            except OSError:
                continue
            key = (info.st_dev, info.st_ino)
            if key not in seen:
                seen.add(key)
                total += info.st_blocks * 512
        del dirnames  # os.walk does not follow symlinked directories
    return total


def format_size(size: int) -> str:
    """``size`` bytes for a person: ``0 B``, ``2 KiB``, ``150 MiB``, ``11.8 GiB``."""
    value, unit = float(size), "B"
    for unit in ("B", "KiB", "MiB", "GiB"):
        if value < 1024 or unit == "GiB":
            break
        value /= 1024
    precise = unit in ("MiB", "GiB") and value < 100
    return f"{value:.1f} {unit}" if precise else f"{value:.0f} {unit}"


def engine_status(
    name: str = DEFAULT_ENGINE_NAME, *, environ: Mapping[str, str] | None = None
) -> EngineStatus:
    """Whether the engine ``name`` runs and answers (reads files, needs no root)."""
    paths = _recorded(engine_paths(name, environ))
    return EngineStatus(paths=paths, pid=_engine_pid(paths), answering=_ping(paths.socket))


def running_engines(*, environ: Mapping[str, str] | None = None) -> tuple[EngineStatus, ...]:
    """Every engine that has a run directory, by name: running ones and ones whose dockerd
    died without :func:`engine_down` (``status.running`` tells them apart)."""
    run_root = engine_paths(DEFAULT_ENGINE_NAME, environ).run_dir.parent
    try:
        names = sorted(
            entry.name
            for entry in run_root.iterdir()
            if entry.is_dir() and _NAME_RE.match(entry.name)
        )
    except OSError:
        return ()
    return tuple(engine_status(name, environ=environ) for name in names)


def clean_engines(
    *,
    dry_run: bool = False,
    environ: Mapping[str, str] | None = None,
    clean_for: Collection[int] = (),
    clusters_left: Mapping[str, Sequence[str]] | None = None,
) -> EngineCleanReport:
    """Stop every private engine found (``cnibench clean``), keeping their image caches,
    except one a live cnibench process holds (a session using a kind cluster in it,
    :mod:`cnibench.leases`; the leases of ``clean_for`` do not count) and one a kind cluster
    is left in (``clusters_left``: ``DOCKER_HOST`` -> the clusters the same clean kept or
    failed to remove there, which would otherwise stop under whoever keeps them): those are
    kept and said so."""
    items = []
    left = clusters_left or {}
    for status in running_engines(environ=environ):
        holders = live_holders(ENGINE_LEASE, status.paths.docker_host, exclude=clean_for)
        if holders:
            items.append((status.name, f"kept: in use by pid {', '.join(map(str, holders))}"))
            continue
        clusters = left.get(status.paths.docker_host)
        if clusters:
            items.append((status.name, f"kept: kind cluster(s) {', '.join(clusters)} left in it"))
            continue
        if dry_run:
            items.append((status.name, "would stop"))
            continue
        try:
            engine_down(status.name, environ=environ)
        except CnibenchError as exc:
            items.append((status.name, f"failed: {exc}"))
        else:
            items.append((status.name, "stopped"))
    return EngineCleanReport(tuple(items), dry_run=dry_run)


def engine_doctor_row(environ: Mapping[str, str] | None = None) -> tuple[bool, str]:
    """Whether a private engine can run here, and what runs (``cnibench doctor``)."""
    env = os.environ if environ is None else environ
    if shutil.which("dockerd", path=_search_path(env)) is None:
        return False, f"dockerd is not installed: {INSTALL_HINT}"
    answering = [s for s in running_engines(environ=env) if s.answering]
    shim = "; runc shim for the missing CAP_SYS_RESOURCE" if lacks_capability() else ""
    if answering:
        which = ", ".join(f"{s.name} at {s.paths.docker_host}" for s in answering)
        return True, f"running: {which}{shim}"
    return True, f'dockerd installed, not running; start: eval "$(cnibench engine up)"{shim}'


def _require_root(what: str) -> None:
    if os.geteuid() != 0:
        raise ConfigError(f"{what} needs root (dockerd mounts filesystems and manages cgroups)")


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


@contextlib.contextmanager
def _engine_lock(paths: EnginePaths) -> Iterator[None]:
    paths.lock.parent.mkdir(parents=True, exist_ok=True)
    with open(paths.lock, "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def bridge_names(networks: Sequence[Mapping[str, Any]]) -> list[str]:
    """Host bridge interfaces of an engine's user-defined bridge networks (``GET /networks``):
    the ``com.docker.network.bridge.name`` option, else ``br-`` and the id's first 12 hex
    digits, as dockerd names them. The default ``bridge`` network is left out (this engine
    runs with ``--bridge=none``)."""
    names = []
    for network in networks:
        if network.get("Driver") != "bridge" or network.get("Name") == "bridge":
            continue
        options = network.get("Options") or {}
        names.append(
            str(options.get("com.docker.network.bridge.name") or f"br-{network['Id'][:12]}")
        )
    return names


def _client(sock: Path, timeout: float) -> DockerClient:
    """A Docker SDK client of the engine at ``sock``; its API version is the one the engine
    names (``GET /version``), so no request is refused as too old or too new.

    Raises
    ------
    docker.errors.DockerException
        The engine does not answer.
    """
    import docker

    return docker.DockerClient(
        base_url=f"unix://{sock}", version="auto", timeout=max(1, math.ceil(timeout))
    )


def _ping(sock: Path, timeout: float = 2.0) -> bool:
    """Whether a Docker API answers ``GET /_ping`` on ``sock``."""
    if not sock.exists():
        return False
    try:
        with contextlib.closing(_client(sock, timeout)) as client:
            return bool(client.ping())
    except engine_failures():
        return False


def _bridges_after_prune(sock: Path, timeout: float = 30.0) -> list[str]:
    """Prune the engine's unused networks and return the host bridges of the networks it has
    (:func:`bridge_names`); best effort: what cannot be asked is left out."""
    failures = engine_failures()
    try:
        client = _client(sock, timeout)
    except failures:
        return []
    with contextlib.closing(client):
        with contextlib.suppress(*failures):
            client.networks.prune()
        try:
            return bridge_names(client.api.networks())
        except failures:
            return []


def _pid_from(pidfile: Path) -> int | None:
    try:
        text = pidfile.read_text().strip()
    except OSError:
        return None
    return int(text) if text.isdigit() and int(text) > 0 else None


def _alive(pid: int) -> bool:
    """Whether ``pid`` exists and is not a zombie (a zombie has already stopped)."""
    with contextlib.suppress(ChildProcessError):
        os.waitpid(pid, os.WNOHANG)  # reap it if it is our own child
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[-1].split()[0] not in ("Z", "X")


def _cmdline(pid: int) -> list[str]:
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return []
    return [part.decode(errors="replace") for part in raw.split(b"\0") if part]


def _engine_pid(paths: EnginePaths) -> int | None:
    """PID of this engine's live dockerd: from its pidfile, checked against its command line."""
    pid = _pid_from(paths.pidfile)
    if pid is None or not _alive(pid):
        return None
    return pid if is_engine_cmdline(_cmdline(pid), paths.docker_host) else None


def _is_child_daemon(pid: int, binary: str, exec_root: Path) -> bool:
    cmdline = _cmdline(pid)
    return (
        _alive(pid)
        and bool(cmdline)
        and os.path.basename(cmdline[0]) == binary
        and any(str(exec_root) in arg for arg in cmdline[1:])
    )


def _stop_pid(pid: int, timeout: float, *, what: str) -> None:
    for sig, wait in ((signal.SIGTERM, timeout), (signal.SIGKILL, 5.0)):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, sig)
        if poll(lambda: not _alive(pid), timeout=wait, interval=0.1):
            return
    raise ProvisioningError(f"{what} (pid {pid}) is still alive after SIGKILL")


def _unmount_under(*roots: Path) -> None:
    """Unmount (detached) everything mounted at or below ``roots``; fail if any remains, so
    that removing a directory never reaches into a mounted filesystem."""
    libc = ctypes.CDLL(None, use_errno=True)
    for point in mount_points_under(_mountinfo(), roots):
        if libc.umount2(point.encode(), _MNT_DETACH) != 0:
            code = ctypes.get_errno()
            if code not in (errno.EINVAL, errno.ENOENT):  # no longer a mount point
                raise ProvisioningError(f"cannot unmount {point}: {os.strerror(code)}")
    left = mount_points_under(_mountinfo(), roots)
    if left:
        raise ProvisioningError(f"still mounted, not removing: {', '.join(left)}")


def _mountinfo() -> str:
    try:
        return Path("/proc/self/mountinfo").read_text()
    except OSError:
        return ""


def _wait_answering(paths: EnginePaths, pid: int, timeout: float) -> bool:
    """Whether dockerd ``pid`` answers on its socket within ``timeout`` seconds (``False`` at
    once when it exits)."""

    def settled() -> tuple[bool] | None:
        if _ping(paths.socket):
            return (True,)
        return None if _alive(pid) else (False,)

    outcome = poll(settled, timeout=timeout, interval=0.2)
    return outcome is not None and outcome[0]


def _prepare(paths: EnginePaths, dockerd: str) -> list[str]:
    """Create the run dir and data root and write the files dockerd reads; return its argv."""
    shim = lacks_capability()
    try:
        for directory in (paths.run_dir, paths.exec_root, paths.data_root):
            directory.mkdir(parents=True, exist_ok=True)
        paths.run_dir.chmod(0o711)
        record = {"name": paths.name, "data_root": str(paths.data_root)}
        paths.record.write_text(json.dumps(record))
        if shim:
            module = Path(__file__).with_name("runc_shim.py")
            temporary = paths.shim.with_name(paths.shim.name + ".tmp")
            temporary.write_text(runc_shim_script(sys.executable, module))
            temporary.chmod(0o755)
            temporary.replace(paths.shim)
    except OSError as exc:
        raise ProvisioningError(f"cannot prepare engine {paths.name}: {exc}") from exc
    try:
        done = subprocess.run(
            [dockerd, "--version"], capture_output=True, text=True, timeout=30, check=False
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise ProvisioningError(f"{dockerd} --version failed: {exc}") from exc
    major = dockerd_major_version(done.stdout)
    trust_key = major is not None and major <= TRUST_KEY_LAST_MAJOR
    try:
        paths.config_file.write_text(json.dumps(daemon_config(paths, trust_key=trust_key)))
    except OSError as exc:
        raise ProvisioningError(f"cannot write {paths.config_file}: {exc}") from exc
    return dockerd_argv(paths, dockerd=dockerd, runc_shim=shim)


def _start(paths: EnginePaths, dockerd: str, search_path: str, timeout: float) -> None:
    argv = _prepare(paths, dockerd)
    # Not subprocess.Popen: dockerd must outlive this process, and a Popen object dropped
    # while its child runs warns (ResourceWarning). posix_spawn with setsid=True is what
    # Popen(start_new_session=True) does, without the object.
    try:
        pid = os.posix_spawn(
            dockerd,
            argv,
            {"PATH": search_path},
            file_actions=[
                (os.POSIX_SPAWN_OPEN, 0, os.devnull, os.O_RDONLY, 0),
                (
                    os.POSIX_SPAWN_OPEN,
                    1,
                    str(paths.log),
                    os.O_WRONLY | os.O_CREAT | os.O_TRUNC,
                    0o600,
                ),
                (os.POSIX_SPAWN_DUP2, 1, 2),
            ],
            setsid=True,
            setsigdef=(signal.SIGPIPE, signal.SIGXFSZ),
        )
    except OSError as exc:
        raise ProvisioningError(f"cannot start {dockerd}: {exc}") from exc
    try:
        if _wait_answering(paths, pid, timeout):
            return
        problem = last_log_problem(_read_log(paths.log))
        reason = "exited" if not _alive(pid) else f"did not answer within {timeout:g} s"
    except BaseException:
        _abort(paths, pid)
        raise
    _abort(paths, pid)
    message = f"dockerd of engine {paths.name} {reason}: {problem} (log: {paths.log})"
    raise ProvisioningError(" ".join(message.split()))


def _read_log(log: Path) -> str:
    try:
        return log.read_text(errors="replace")
    except OSError:
        return ""


def _abort(paths: EnginePaths, pid: int) -> None:
    """Stop a dockerd that did not come up and what it mounted; keep the log to read."""
    with contextlib.suppress(CnibenchError):
        _stop_pid(pid, 10.0, what=f"dockerd of engine {paths.name}")
        _unmount_under(paths.exec_root, paths.data_root)
    for path in (paths.socket, paths.pidfile):
        with contextlib.suppress(OSError):
            path.unlink()
