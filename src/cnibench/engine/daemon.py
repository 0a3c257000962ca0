"""The private engine's dockerd process: prepared, started detached, found by its pidfile,
stopped, and what it mounted unmounted.

The parsers it relies on are pure (:func:`is_engine_cmdline` on ``/proc/<pid>/cmdline``,
:func:`mount_points_under` on ``/proc/<pid>/mountinfo``, :func:`last_log_problem` on dockerd's
log); the rest reads ``/proc``, spawns dockerd and sends signals. dockerd is only ever
signalled by the PID in its own pidfile, after ``/proc/<pid>/cmdline`` shows it serves this
engine's socket.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import json
import os
import re
import signal
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

from cnibench.engine.client import _ping
from cnibench.engine.config import (
    TRUST_KEY_LAST_MAJOR,
    EnginePaths,
    daemon_config,
    dockerd_argv,
    dockerd_major_version,
    runc_shim_script,
)
from cnibench.engine.host import lacks_capability
from cnibench.errors import CnibenchError, ProvisioningError
from cnibench.waiting import poll

__all__ = [
    "is_engine_cmdline",
    "last_log_problem",
    "mount_points_under",
]

_MNT_DETACH = 2


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
