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
cannot be created; the engine then registers :mod:`cnibench.engine.runc_shim` as its
default runtime, which removes that one capability from each spec before runc sees it. A
machine that has the capability runs runc unmodified.

One module per job, every name importable from here: :mod:`~cnibench.engine.config`
builds the paths and dockerd's command line by pure functions (:func:`engine_paths`,
:func:`dockerd_argv`); :mod:`~cnibench.engine.daemon` prepares, starts, finds and
stops the dockerd process (with pure parsers of ``/proc`` files and of its log);
:mod:`~cnibench.engine.client` asks the engine over its socket. This module holds
the commands: only :func:`engine_up`, :func:`engine_down` and the status functions touch
processes. dockerd is only ever stopped by the PID in its own pidfile, after
``/proc/<pid>/cmdline`` shows it serves this engine's socket.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
import subprocess
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from cnibench.engine.client import (
    _bridges_after_prune,
    _ping,
    answering_engine,
    bridge_names,
)
from cnibench.engine.config import (
    _NAME_RE,
    DEFAULT_ENGINE_NAME,
    ENGINE_DATA_VARIABLE,
    INSTALL_HINT,
    SHIM_RUNTIME,
    EnginePaths,
    _recorded,
    _search_path,
    daemon_config,
    dockerd_argv,
    dockerd_major_version,
    engine_paths,
    runc_shim_script,
)
from cnibench.engine.config import TRUST_KEY_LAST_MAJOR as TRUST_KEY_LAST_MAJOR
from cnibench.engine.daemon import (
    _engine_pid,
    _is_child_daemon,
    _pid_from,
    _start,
    _stop_pid,
    _unmount_under,
    _wait_answering,
    is_engine_cmdline,
    last_log_problem,
    mount_points_under,
)
from cnibench.engine.host import (
    CAP_SYS_RESOURCE,
    ENGINE_RUN_ROOT,
    ENGINE_RUN_VARIABLE,
    capability_bounding_set,
    lacks_capability,
    needs_runc_shim,
)
from cnibench.errors import CnibenchError, ConfigError, ProvisioningError
from cnibench.leases import live_holders

__all__ = [
    "CAP_SYS_RESOURCE",
    "DEFAULT_ENGINE_NAME",
    "ENGINE_DATA_VARIABLE",
    "ENGINE_LEASE",
    "ENGINE_RUN_ROOT",
    "ENGINE_RUN_VARIABLE",
    "INSTALL_HINT",
    "SHIM_RUNTIME",
    "EngineCleanReport",
    "EnginePaths",
    "EngineStatus",
    "NoneLeft",
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

ENGINE_LEASE = "engine"
"""The lease kind (:mod:`cnibench.leases`) held on a container engine (its ``DOCKER_HOST``) by
a session whose clusters run in it: :func:`clean_engines` keeps an engine so held."""

NoneLeft = Callable[[Mapping[str, str] | None], object]
"""What :func:`engine_down` calls once no private engine runs any more (with its ``environ``):
the kube backend removes the ``/lib/modules`` it made for kind
(:mod:`cnibench.backends.kube.engines`)."""

START_TIMEOUT = 60.0
"""Seconds :func:`engine_up` waits for a new dockerd to answer ``/_ping``."""
STOP_TIMEOUT = 30.0
"""Seconds :func:`engine_down` waits after SIGTERM before SIGKILL."""


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
    when_none_left: NoneLeft | None = None,
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
    when_none_left:
        Called with ``environ`` once no private engine runs any more, however this one was
        stopped (:data:`NoneLeft`).

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
    if when_none_left is not None and not running_engines(environ=environ):
        when_none_left(environ)
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
    when_none_left: NoneLeft | None = None,
) -> EngineCleanReport:
    """Stop every private engine found (``cnibench clean``), keeping their image caches,
    except one a live cnibench process holds (a session using a kind cluster in it,
    :mod:`cnibench.leases`; the leases of ``clean_for`` do not count) and one a kind cluster
    is left in (``clusters_left``: ``DOCKER_HOST`` -> the clusters the same clean kept or
    failed to remove there, which would otherwise stop under whoever keeps them): those are
    kept and said so. ``when_none_left``: as for :func:`engine_down`."""
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
            engine_down(status.name, environ=environ, when_none_left=when_none_left)
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


@contextlib.contextmanager
def _engine_lock(paths: EnginePaths) -> Iterator[None]:
    paths.lock.parent.mkdir(parents=True, exist_ok=True)
    with open(paths.lock, "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)
