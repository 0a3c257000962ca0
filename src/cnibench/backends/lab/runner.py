"""The only part of the lab that runs things: commands, namespaced processes, PID bookkeeping.

Commands are argv lists (never shell strings). A failing provisioning command raises
:class:`~cnibench.errors.ProvisioningError` naming the step and quoting the command's stderr. Long
running processes (servers, wireguard-go, Prometheus) are started in their own process group
with ``ip netns exec`` (which execs the command, so the PID we hold is the server's) and are
stopped by that PID: SIGTERM, a bounded wait, then SIGKILL to the group. Whatever runs in a
machine's namespace (a node, its pods, the external or monitoring host) first enters that
machine's cgroups (:func:`~cnibench.backends.lab.cgroups.enter_argv`), so its CPU and memory are
the machine's own.
"""

from __future__ import annotations

import contextlib
import os
import selectors
import shlex
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from cnibench.backends.base import CommandResult
from cnibench.backends.lab.cgroups import enter_argv
from cnibench.backends.lab.plan import Step
from cnibench.errors import ProvisioningError, ToolError
from cnibench.leases import process_start_time
from cnibench.waiting import Deadline, poll, wait_for

__all__ = [
    "NETNS_DIR",
    "ManagedProcess",
    "StartedInNamespace",
    "listening_ports",
    "namespace_inode",
    "pids_in_namespaces",
    "process_alive",
    "process_cmdline",
    "process_start_time",
    "run_in_namespace",
    "run_step",
    "run_steps",
    "start_process",
    "stop_pids",
    "stop_processes",
    "wait_for_output",
    "wait_listening",
]

NETNS_DIR = Path("/run/netns")
_STDERR_LIMIT = 600
_TCP_LISTEN = "0A"


def _tail(text: str, limit: int = _STDERR_LIMIT) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else "..." + text[-limit:]


def run_step(step: Step, *, timeout: float = 30.0) -> str:
    """Run one provisioning step and return its stdout.

    Raises
    ------
    ProvisioningError
        If the command is missing, fails or exceeds ``timeout`` seconds; the message names the
        step, the command and its stderr.
    """
    command = shlex.join(step.argv)
    try:
        completed = subprocess.run(
            step.argv,
            input=step.stdin,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
    except FileNotFoundError as exc:
        raise ProvisioningError(f"{step.description}: {step.argv[0]} not found") from exc
    except subprocess.TimeoutExpired as exc:
        raise ProvisioningError(
            f"{step.description}: `{command}` did not finish within {timeout:g} s"
        ) from exc
    if completed.returncode != 0:
        detail = _tail(completed.stderr or completed.stdout) or f"exit {completed.returncode}"
        raise ProvisioningError(f"{step.description} failed: `{command}`: {detail}")
    return completed.stdout


def run_steps(steps: Iterable[Step], *, timeout: float = 30.0) -> None:
    """Run ``steps`` in order, stopping at the first failure (see :func:`run_step`)."""
    for step in steps:
        run_step(step, timeout=timeout)


def run_in_namespace(
    namespace: str, argv: Sequence[str], *, timeout: float, tool_label: str = ""
) -> CommandResult:
    """Run ``argv`` inside network namespace ``namespace`` with a hard timeout.

    Parameters
    ----------
    namespace:
        Network namespace name.
    argv:
        The command.
    timeout:
        Seconds before the command's whole process group is killed.
    tool_label:
        Where the command ran, for error messages (e.g. the pod name).

    Returns
    -------
    CommandResult
        Exit status, decoded output and wall time (seconds); ``argv`` without the wrapper.

    Raises
    ------
    ToolError
        If the command cannot be started or does not finish within ``timeout`` seconds.
    """
    if not argv:
        raise ToolError("empty command", tool="")
    tool = Path(argv[0]).name
    where = tool_label or namespace
    start = time.monotonic()
    try:
        proc = subprocess.Popen(
            enter_argv(namespace, ["ip", "netns", "exec", namespace, *argv]),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,
        )
    except OSError as exc:
        raise ToolError(f"cannot start {tool} in {where}: {exc}", tool=tool) from exc
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        _kill_group(proc.pid)
        out, err = proc.communicate()
        output = out.decode(errors="replace") + err.decode(errors="replace")
        raise ToolError(
            f"{tool} in {where} did not finish within {timeout:g} s and was killed",
            tool=tool,
            output=output,
        ) from None
    return CommandResult(
        argv=tuple(argv),
        returncode=proc.returncode,
        stdout=out.decode(errors="replace"),
        stderr=err.decode(errors="replace"),
        duration=time.monotonic() - start,
    )


class StartedInNamespace:
    """A command started in a network namespace without waiting for it (a
    :class:`~cnibench.backends.base.StartedCommand`): its stdout is read line by line as it
    comes, by a thread of its own, and it is stopped by the PID of the process group it leads.

    Parameters
    ----------
    namespace:
        Network namespace.
    argv:
        The command.
    tool_label:
        Where it runs, for error messages (e.g. the pod name).

    Raises
    ------
    ToolError
        If the command cannot be started.
    """

    def __init__(self, namespace: str, argv: Sequence[str], *, tool_label: str = "") -> None:
        if not argv:
            raise ToolError("empty command", tool="")
        self._argv = tuple(argv)
        self._tool = Path(argv[0]).name
        self._where = tool_label or namespace
        self._begun = time.monotonic()
        try:
            self._popen = subprocess.Popen(
                enter_argv(namespace, ["ip", "netns", "exec", namespace, *argv]),
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                start_new_session=True,
            )
        except OSError as exc:
            raise ToolError(
                f"cannot start {self._tool} in {self._where}: {exc}", tool=self._tool
            ) from exc
        self._lines: list[str] = []
        self._stderr: list[bytes] = []
        self._first = threading.Event()
        """Set at the first line, or when stdout closes without one."""
        self._readers = (
            threading.Thread(target=self._read_stdout, name="cnibench-started-out", daemon=True),
            threading.Thread(target=self._read_stderr, name="cnibench-started-err", daemon=True),
        )
        for reader in self._readers:
            reader.start()

    @property
    def pid(self) -> int:
        """The PID of the process started (the cgroup wrapper and ``ip netns exec`` exec the
        command in it), which leads the command's process group."""
        return self._popen.pid

    def _read_stdout(self) -> None:
        stdout = self._popen.stdout
        if stdout is not None:
            for line in stdout:
                self._lines.append(line.decode(errors="replace"))
                self._first.set()
        self._first.set()

    def _read_stderr(self) -> None:
        if self._popen.stderr is not None:
            self._stderr.append(self._popen.stderr.read())

    def first_line(self, *, timeout: float) -> str:
        """See :meth:`cnibench.backends.base.StartedCommand.first_line`."""
        self._first.wait(timeout)
        if self._lines:
            return self._lines[0].rstrip("\n")
        ended = self._popen.poll() is not None and self._first.is_set()
        why = "ended" if ended else f"did not print within {timeout:g} s"
        raise ToolError(
            f"{self._tool} in {self._where} {why} without a line of output:"
            f" {_tail(b''.join(self._stderr).decode(errors='replace'))}",
            tool=self._tool,
        )

    def wait(self, *, timeout: float) -> CommandResult:
        """See :meth:`cnibench.backends.base.StartedCommand.wait`."""
        try:
            self._popen.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.stop()
            raise ToolError(
                f"{self._tool} in {self._where} did not finish within {timeout:g} s and was"
                " stopped",
                tool=self._tool,
                output="".join(self._lines),
            ) from None
        # The command has ended: its pipes are at their end, or will be once its children
        # (none of a probe's) let go of them.
        for reader in self._readers:
            reader.join(timeout=5.0)
        return CommandResult(
            argv=self._argv,
            returncode=self._popen.returncode,
            stdout="".join(self._lines),
            stderr=b"".join(self._stderr).decode(errors="replace"),
            duration=time.monotonic() - self._begun,
        )

    def stop(self) -> None:
        """See :meth:`cnibench.backends.base.StartedCommand.stop`: SIGKILL to the process
        group this command leads (a probe has nothing to tidy up), then reap it."""
        if self._popen.poll() is None:
            _kill_group(self._popen.pid)
            with contextlib.suppress(subprocess.TimeoutExpired):
                self._popen.wait(timeout=5.0)
        for reader in self._readers:
            reader.join(timeout=1.0)


def _kill_group(pgid: int) -> None:
    # The group was created by us (start_new_session), so its id is our child's PID.
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGKILL)


@dataclass
class ManagedProcess:
    """A long-running process the lab started (mutable: it owns the live ``Popen``).

    Attributes
    ----------
    name:
        Lab-unique label, e.g. ``"n1/node-exporter"``.
    namespace:
        Network namespace it runs in.
    argv:
        Command without the ``ip netns exec`` wrapper.
    popen:
        The child process; ``popen.pid`` is the server's own PID.
    log_path:
        File receiving stdout and stderr (``None``: kept in a pipe, see ``start_process``).
    """

    name: str
    namespace: str
    argv: tuple[str, ...]
    popen: subprocess.Popen[bytes]
    log_path: Path | None

    @property
    def pid(self) -> int:
        """PID of the process."""
        return self.popen.pid

    def log_tail(self, limit: int = _STDERR_LIMIT) -> str:
        """The end of the process's log, for error messages."""
        if self.log_path is None:
            return ""
        try:
            return _tail(self.log_path.read_text(errors="replace"), limit)
        except OSError:
            return ""

    def to_json_dict(self) -> dict[str, object]:
        """What ``lab.json`` records about the process."""
        return {
            "name": self.name,
            "pid": self.pid,
            "namespace": self.namespace,
            "argv": list(self.argv),
        }


def start_process(
    name: str,
    namespace: str,
    argv: Sequence[str],
    *,
    log_path: Path | None,
    env: Mapping[str, str] | None = None,
    capture: bool = False,
) -> ManagedProcess:
    """Start ``argv`` in ``namespace`` in its own process group.

    Parameters
    ----------
    name:
        Label of the process.
    namespace:
        Network namespace.
    argv:
        The command.
    log_path:
        File for stdout and stderr (appended), unless ``capture``.
    env:
        Extra environment variables.
    capture:
        Keep stdout and stderr in pipes for the caller to read.

    Raises
    ------
    ProvisioningError
        If the process cannot be started.
    """
    environment = dict(os.environ, **(env or {}))
    log: IO[bytes] | None = None
    try:
        if capture:
            stdout: int | IO[bytes] = subprocess.PIPE
            stderr: int | IO[bytes] = subprocess.PIPE
        else:
            if log_path is None:
                raise ProvisioningError(f"start {name}: no log file given")
            log = log_path.open("ab")
            stdout, stderr = log, subprocess.STDOUT
        popen = subprocess.Popen(
            enter_argv(namespace, ["ip", "netns", "exec", namespace, *argv]),
            stdin=subprocess.DEVNULL,
            stdout=stdout,
            stderr=stderr,
            env=environment,
            start_new_session=True,
        )
    except OSError as exc:
        raise ProvisioningError(f"start {name} in {namespace}: {exc}") from exc
    finally:
        if log is not None:
            log.close()
    return ManagedProcess(name, namespace, tuple(argv), popen, None if capture else log_path)


def stop_processes(processes: Sequence[ManagedProcess], *, grace: float = 3.0) -> list[str]:
    """Stop ``processes`` by PID: SIGTERM to each, wait up to ``grace`` seconds in total, then
    SIGKILL to the group of any survivor. Returns the names of processes that still could not
    be reaped (empty on success)."""
    for proc in processes:
        if proc.popen.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                proc.popen.send_signal(signal.SIGTERM)
    # One grace for all of them, checked often at first (most exit at once), then every 0.2 s.
    poll(
        lambda: all(proc.popen.poll() is not None for proc in processes),
        timeout=grace,
        interval=0.01,
        growth=2.0,
        max_interval=0.2,
    )
    stuck: list[str] = []
    for proc in processes:
        # nginx workers and other children share the group; kill it even if the leader exited.
        _kill_group(proc.pid)
        try:
            proc.popen.wait(timeout=2.0)
        except subprocess.TimeoutExpired:
            stuck.append(f"{proc.name} (pid {proc.pid})")
        for pipe in (proc.popen.stdout, proc.popen.stderr):
            if pipe is not None:
                pipe.close()
    return stuck


def process_alive(pid: int) -> bool:
    """Whether ``pid`` exists and is not a zombie."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    # The state letter follows the parenthesised command name, which may contain spaces.
    state = stat.rsplit(")", 1)[-1].split()[0]
    return state not in ("Z", "X")


def process_cmdline(pid: int) -> tuple[str, ...]:
    """argv of ``pid`` from ``/proc/<pid>/cmdline`` (empty if it is gone)."""
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return ()
    return tuple(part.decode(errors="replace") for part in raw.split(b"\0") if part)


def stop_pids(pids: Iterable[int], *, grace: float = 3.0) -> list[int]:
    """Stop processes that are not our children (leftovers) by PID: SIGTERM, wait up to
    ``grace`` seconds, SIGKILL. Returns the PIDs still alive afterwards."""
    targets = sorted(set(pids))
    for pid in targets:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)

    def all_gone() -> bool:
        return not any(process_alive(pid) for pid in targets)

    poll(all_gone, timeout=grace, interval=0.05)
    for pid in targets:
        if process_alive(pid):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
    poll(all_gone, timeout=2.0, interval=0.05)
    return [pid for pid in targets if process_alive(pid)]


def namespace_inode(namespace: str) -> tuple[int, int] | None:
    """``(device, inode)`` identifying named network namespace ``namespace``, or ``None``."""
    try:
        st = os.stat(NETNS_DIR / namespace)
    except OSError:
        return None
    return (st.st_dev, st.st_ino)


def pids_in_namespaces(namespaces: Iterable[str]) -> dict[str, list[int]]:
    """PIDs of every process inside each of ``namespaces`` (one pass over ``/proc``).

    Equivalent to ``ip netns pids`` for several namespaces at once. Our own process is never
    listed.
    """
    wanted: dict[tuple[int, int], str] = {}
    for namespace in namespaces:
        ident = namespace_inode(namespace)
        if ident is not None:
            # /proc/<pid>/ns/net and the bind mount in /run/netns stat to the same nsfs inode.
            wanted[ident] = namespace
    found: dict[str, list[int]] = {name: [] for name in wanted.values()}
    if not wanted:
        return found
    own = os.getpid()
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit() or int(entry.name) == own:
            continue
        try:
            st = os.stat(f"/proc/{entry.name}/ns/net")
        except OSError:
            continue
        name = wanted.get((st.st_dev, st.st_ino))
        if name is not None and process_alive(int(entry.name)):
            found[name].append(int(entry.name))
    return found


def listening_ports(tcp_table: str) -> set[tuple[str, int]]:
    """``(address, port)`` of listening sockets in a ``/proc/net/tcp`` table.

    Addresses are dotted quads (``0.0.0.0`` for a wildcard bind).
    """
    result: set[tuple[str, int]] = set()
    for line in tcp_table.splitlines()[1:]:
        fields = line.split()
        if len(fields) < 4 or fields[3] != _TCP_LISTEN:
            continue
        hex_addr, _, hex_port = fields[1].partition(":")
        # /proc prints the network-order address as a host-order 32-bit number.
        raw = int(hex_addr, 16).to_bytes(4, sys.byteorder)
        result.add((".".join(str(b) for b in raw), int(hex_port, 16)))
    return result


def wait_listening(proc: ManagedProcess, ip: str, port: int, *, timeout: float = 10.0) -> None:
    """Wait until a TCP socket listens on ``ip:port`` in ``proc``'s namespace.

    The namespace's table is read through ``/proc/<pid>/net/tcp`` of the process itself, which
    shows the sockets of the namespace the process lives in, without connecting to the server
    (a bare connect would count as a failed test for iperf3).

    Raises
    ------
    ProvisioningError
        If the process exits first or nothing listens within ``timeout`` seconds.
    """
    table = Path(f"/proc/{proc.pid}/net/tcp")

    def listening() -> bool:
        if proc.popen.poll() is not None:
            raise ProvisioningError(
                f"{proc.name} exited with status {proc.popen.returncode} before listening on"
                f" {ip}:{port}: {proc.log_tail()}"
            )
        try:
            ports = listening_ports(table.read_text())
        except OSError:
            return False
        return (ip, port) in ports or ("0.0.0.0", port) in ports

    wait_for(
        listening,
        timeout=timeout,
        what=f"{proc.name} to listen on {ip}:{port}",
        interval=0.05,
        last_seen=proc.log_tail,
        error=ProvisioningError,
    )


def wait_for_output(proc: ManagedProcess, needle: str, *, timeout: float) -> str:
    """Read ``proc``'s captured stderr until a line contains ``needle``; return what was read.

    Raises
    ------
    ProvisioningError
        If the process exits or ``needle`` does not appear within ``timeout`` seconds.
    """
    stream = proc.popen.stderr
    if stream is None:
        raise ProvisioningError(f"{proc.name}: stderr is not captured")
    seen = b""
    deadline = Deadline(timeout)

    def printed() -> bool:
        nonlocal seen
        if not selector.select(timeout=deadline.remaining()):
            return False
        chunk = os.read(stream.fileno(), 4096)
        if not chunk:
            raise ProvisioningError(
                f"{proc.name} exited before printing {needle!r}:"
                f" {_tail(seen.decode(errors='replace'))}"
            )
        seen += chunk
        return needle.encode() in seen

    with selectors.DefaultSelector() as selector:
        selector.register(stream, selectors.EVENT_READ)
        wait_for(
            printed,
            timeout=deadline,
            what=f"{proc.name} to print {needle!r}",
            interval=0.0,
            last_seen=lambda: _tail(seen.decode(errors="replace")),
            error=ProvisioningError,
        )
    return seen.decode(errors="replace")
