"""An iperf3 server built on libiperf (the ``iperf3`` Python bindings): the egress target.

The egress scenario needs to know which source address the *server* saw (the gateway's when
the egress gateway is on, the client node's otherwise). libiperf's server report carries it,
so this module runs libiperf's server and turns its report into an
:class:`Iperf3ServerRecord`.

Where libiperf runs
-------------------
Always in a Python process of its own, started as::

    python -m cnibench.tools.iperf3_server --bind 198.18.0.200 --port 5201 --once --timeout 60

because ``iperf_run_server()`` blocks in C and cannot be interrupted from Python, and libiperf
calls ``exit()`` on some paths (e.g. an idle timeout in one-off mode), which must not take a
test runner down with it. That process

* writes ``cnibench-iperf3-server: listening on ADDR:PORT`` to standard error before each test,
  once the kernel shows its listening socket (a client started after that line is not refused),
* serves one test (or ``--count`` tests), printing one JSON line per test on standard output:
  ``{"remote_host": ..., "received_bits_per_second": ..., ..., "result": {libiperf JSON}}``,
* or prints ``{"error": "..."}`` and exits 1 when no client came within ``--timeout`` seconds,
  a test outlasted it (by up to a second; the process then exits at once, abandoning the
  blocked libiperf call), or libiperf failed (e.g. the port is taken). Usage errors exit 2.

The lab backend starts it inside a network namespace with ``ip netns exec`` using
:func:`iperf3_server_process_argv` and reads the output with :func:`parse_iperf3_server_output`;
:class:`InProcessIperf3Server` does the same on this host (start, wait for readiness, collect).
"""

from __future__ import annotations

import argparse
import ctypes
import json
import math
import os
import selectors
import subprocess
import sys
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, cast

from cnibench.errors import ConfigError, ParseError, ToolError
from cnibench.tools._common import format_number, join_output, require_positive
from cnibench.waiting import Deadline, poll

__all__ = [
    "READY_PREFIX",
    "InProcessIperf3Server",
    "Iperf3ServerRecord",
    "iperf3_server_process_argv",
    "iperf3_server_record_from_json",
    "main",
    "parse_iperf3_server_output",
    "parse_iperf3_server_record",
]

TOOL = "iperf3-server"
READY_PREFIX = "cnibench-iperf3-server: listening on "
"""Start of the standard-error line announcing that the server accepts connections."""
_MODULE = "cnibench.tools.iperf3_server"
_IDLE_RETURN = 2
"""``iperf_run_server()`` returns this when its idle timeout expired without a client."""
_GRACE_S = 5.0
"""Extra seconds a caller waits beyond ``timeout`` for the process to report and exit."""
_LISTEN_S = 30.0
"""Seconds a new server process has to say it listens: a Python interpreter importing the
libiperf bindings took over 5 s on a 2-core machine at a load average of 20 (kind tier beside
the unit tier, 2026-11-26), and a port that is taken still fails at once (the process exits)."""


@dataclass(frozen=True)
class Iperf3ServerRecord:
    """What the iperf3 server saw of one test.

    Attributes
    ----------
    remote_host:
        Source address of the client's data connection as the server saw it (after any NAT):
        the address the egress verification compares.
    remote_port:
        Source port of that connection.
    local_host, local_port:
        Server address and port the client reached.
    protocol:
        ``"TCP"`` or ``"UDP"``.
    reverse:
        Whether the server was the sender (client ran ``-R``).
    received_bits_per_second:
        Throughput the server received, in bits/s (0 when it was the sender).
    sent_bits_per_second:
        Throughput the server sent, in bits/s (as far as the server's report has it).
    duration_s:
        Test length the client asked for, in seconds.
    raw_json:
        libiperf's complete server report.
    """

    remote_host: str
    remote_port: int
    local_host: str
    local_port: int
    protocol: str
    reverse: bool
    received_bits_per_second: float
    sent_bits_per_second: float
    duration_s: float
    raw_json: str = field(repr=False)

    def summary(self) -> dict[str, object]:
        """The record as the JSON line the server process prints (with ``result``)."""
        return {
            "remote_host": self.remote_host,
            "remote_port": self.remote_port,
            "local_host": self.local_host,
            "local_port": self.local_port,
            "protocol": self.protocol,
            "reverse": self.reverse,
            "received_bits_per_second": self.received_bits_per_second,
            "sent_bits_per_second": self.sent_bits_per_second,
            "duration_s": self.duration_s,
            "result": json.loads(self.raw_json),
        }


def iperf3_server_record_from_json(text: str) -> Iperf3ServerRecord:
    """Read libiperf's server-side JSON report.

    Parameters
    ----------
    text:
        The report (``iperf3 -s -J`` output, or libiperf's JSON output string).

    Returns
    -------
    Iperf3ServerRecord
        Client address as seen by the server and throughput in bits/s.

    Raises
    ------
    cnibench.errors.ToolError
        When the report has an ``error`` key.
    cnibench.errors.ParseError
        When it is not JSON or lacks the connection or summary.
    """
    try:
        document = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ParseError(
            f"iperf3 server report is not JSON: {exc.msg}", tool=TOOL, output=text
        ) from exc
    if not isinstance(document, dict):
        raise ParseError("iperf3 server report is not a JSON object", tool=TOOL, output=text)
    if "error" in document:
        raise ToolError(f"iperf3 server failed: {document['error']}", tool=TOOL, output=text)
    try:
        start = document["start"]
        connected = start.get("connected") or []
        accepted = start.get("accepted_connection", {})
        # The data stream's peer is what the egress check needs; the control connection's peer
        # is the same host and serves when a test died before its streams started.
        first = connected[0] if connected else {}
        end = document["end"]
        test_start = start["test_start"]
        return Iperf3ServerRecord(
            remote_host=str(first.get("remote_host", accepted.get("host", ""))),
            remote_port=int(first.get("remote_port", accepted.get("port", 0))),
            local_host=str(first.get("local_host", "")),
            local_port=int(first.get("local_port", 0)),
            protocol=str(test_start["protocol"]),
            reverse=bool(test_start.get("reverse", 0)),
            received_bits_per_second=float(end["sum_received"]["bits_per_second"]),
            sent_bits_per_second=float(end["sum_sent"]["bits_per_second"]),
            duration_s=float(test_start["duration"]),
            raw_json=text,
        )
    except (KeyError, TypeError, ValueError, IndexError, AttributeError) as exc:
        raise ParseError(
            f"iperf3 server report lacks an expected field: {exc!r}", tool=TOOL, output=text
        ) from exc


def iperf3_server_process_argv(
    *,
    port: int = 5201,
    bind: str | None = None,
    timeout: float = 60.0,
    count: int = 1,
    python: str | None = None,
) -> list[str]:
    """Command line of the libiperf server process (prefix it with ``ip netns exec NS``).

    Parameters
    ----------
    port:
        TCP port to listen on.
    bind:
        Address to listen on; ``None`` listens on all addresses.
    timeout:
        Seconds to wait for each test, client arrival included; afterwards the process
        reports an error and exits.
    count:
        Tests to serve before exiting (one JSON line each).
    python:
        Interpreter; defaults to the one running cnibench.

    Returns
    -------
    list of str
        ``[python, "-P", "-m", "cnibench.tools.iperf3_server", "--port", P, ..., "--once"]``;
        ``-P`` keeps the working directory off ``sys.path`` so a stray ``iperf3.py`` there
        cannot shadow the bindings.
    """
    if not 0 < port < 65536:
        raise ConfigError(f"iperf3 server: port must be in 1..65535, got {port}")
    require_positive(timeout, tool=TOOL, name="timeout")
    if count < 1:
        raise ConfigError(f"iperf3 server: count must be at least 1, got {count}")
    argv = [python or sys.executable, "-P", "-m", _MODULE, "--port", str(port)]
    if bind:
        argv += ["--bind", bind]
    argv += ["--timeout", format_number(timeout)]
    argv += ["--once"] if count == 1 else ["--count", str(count)]
    return argv


def parse_iperf3_server_output(text: str, *, stderr: str = "") -> tuple[Iperf3ServerRecord, ...]:
    """Parse the JSON lines the server process printed, one record per test.

    Parameters
    ----------
    text:
        The process's standard output.
    stderr:
        Its standard error (kept in error outputs).

    Returns
    -------
    tuple of Iperf3ServerRecord
        In the order the tests ran.

    Raises
    ------
    cnibench.errors.ToolError
        When a line reports an error (no client in time, libiperf failure).
    cnibench.errors.ParseError
        When a line is not such JSON, or there is no line at all.
    """
    output = join_output(text, stderr)
    records: list[Iperf3ServerRecord] = []
    for line in text.splitlines():
        if not line.strip():
            continue
        try:
            item = json.loads(line)
        except json.JSONDecodeError as exc:
            raise ParseError(
                f"iperf3 server printed a line that is not JSON: {line[:120]!r}",
                tool=TOOL,
                output=output,
            ) from exc
        if not isinstance(item, dict):
            raise ParseError(
                f"iperf3 server line is not an object: {line[:120]!r}", tool=TOOL, output=output
            )
        if "error" in item:
            raise ToolError(f"iperf3 server failed: {item['error']}", tool=TOOL, output=output)
        records.append(_record_from_line(item, output))
    if not records:
        last = stderr.strip().splitlines()[-1] if stderr.strip() else "no output"
        raise ParseError(f"iperf3 server printed no result: {last}", tool=TOOL, output=output)
    return tuple(records)


def parse_iperf3_server_record(text: str, *, stderr: str = "") -> Iperf3ServerRecord:
    """Parse the output of a ``--once`` server process: exactly one record.

    Raises
    ------
    cnibench.errors.ToolError, cnibench.errors.ParseError
        As :func:`parse_iperf3_server_output`, and when there is more than one record.
    """
    records = parse_iperf3_server_output(text, stderr=stderr)
    if len(records) != 1:
        raise ParseError(
            f"expected one iperf3 server record, got {len(records)}",
            tool=TOOL,
            output=join_output(text, stderr),
        )
    return records[0]


def _record_from_line(item: Mapping[str, Any], output: str) -> Iperf3ServerRecord:
    try:
        return Iperf3ServerRecord(
            remote_host=str(item["remote_host"]),
            remote_port=int(item["remote_port"]),
            local_host=str(item["local_host"]),
            local_port=int(item["local_port"]),
            protocol=str(item["protocol"]),
            reverse=bool(item["reverse"]),
            received_bits_per_second=float(item["received_bits_per_second"]),
            sent_bits_per_second=float(item["sent_bits_per_second"]),
            duration_s=float(item["duration_s"]),
            raw_json=json.dumps(item["result"]),
        )
    except (KeyError, TypeError, ValueError) as exc:
        raise ParseError(f"iperf3 server line lacks {exc!r}", tool=TOOL, output=output) from exc


class InProcessIperf3Server:
    """A libiperf iperf3 server on this host, serving one test at a time.

    libiperf runs in a child Python process (see the module notes for why), so every call is
    bounded in time and a stuck server is killed, never leaked.

    Parameters
    ----------
    port:
        TCP port to listen on.
    bind:
        Address to listen on (``"127.0.0.1"`` keeps the test traffic on loopback).

    Examples
    --------
    >>> server = InProcessIperf3Server(port=5201, bind="127.0.0.1")  # doctest: +SKIP
    >>> server.start(timeout=30)                                      # doctest: +SKIP
    >>> # ... run `iperf3 -c 127.0.0.1 -p 5201 -t 3` ...
    >>> server.result().remote_host                                   # doctest: +SKIP
    '127.0.0.1'
    """

    def __init__(self, port: int = 5201, bind: str | None = "127.0.0.1") -> None:
        self.port = port
        self.bind = bind
        self._process: subprocess.Popen[str] | None = None
        self._timeout = 0.0
        self._finish = Deadline(0.0)
        self._stderr_head: list[str] = []

    def start(self, timeout: float) -> None:
        """Start the server and return once it listens.

        Parameters
        ----------
        timeout:
            Seconds the server waits for one whole test (client arrival included).

        Raises
        ------
        cnibench.errors.ToolError
            When it is already running, or it did not listen within ``_LISTEN_S`` seconds
            (e.g. the port is taken); the process is then stopped.
        """
        if self._process is not None:
            raise ToolError("iperf3 server is already running", tool=TOOL)
        argv = iperf3_server_process_argv(port=self.port, bind=self.bind, timeout=timeout)
        self._timeout = timeout
        # One test, client arrival included, plus the time the process takes to report it.
        self._finish = Deadline(timeout + _GRACE_S)
        self._stderr_head = []
        process = subprocess.Popen(
            argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, bufsize=1
        )
        self._process = process
        assert process.stderr is not None
        with selectors.DefaultSelector() as selector:
            selector.register(process.stderr, selectors.EVENT_READ)
            deadline = Deadline(_LISTEN_S)

            def next_line() -> str | None:
                """``"listening"``, ``"exited"`` (EOF: it died first), or ``None``."""
                assert process.stderr is not None
                if not selector.select(timeout=deadline.remaining()):
                    return None
                line = process.stderr.readline()
                if not line:
                    return "exited"
                self._stderr_head.append(line)
                return "listening" if line.startswith(READY_PREFIX) else None

            if poll(next_line, timeout=deadline, interval=0.0) == "listening":
                return
        stdout, stderr = self._stop()
        output = join_output(stdout, "".join(self._stderr_head) + stderr)
        detail = _error_of(stdout) or (output.strip().splitlines() or ["no output"])[-1]
        raise ToolError(
            f"iperf3 server on {self.bind}:{self.port} did not start listening: {detail}",
            tool=TOOL,
            output=output,
        )

    def result(self) -> Iperf3ServerRecord:
        """Wait for the test started by :meth:`start` to end and return what the server saw.

        Raises
        ------
        cnibench.errors.ToolError
            When no client came or the test did not end within the timeout (the process is
            killed), or libiperf reported an error.
        """
        process = self._process
        if process is None:
            raise ToolError("iperf3 server was not started", tool=TOOL)
        try:
            stdout, stderr = process.communicate(timeout=max(self._finish.remaining(), 0.1))
        except subprocess.TimeoutExpired:
            stdout, stderr = self._stop()
            raise ToolError(
                f"iperf3 server on {self.bind}:{self.port} did not finish within "
                f"{self._timeout} s and was killed",
                tool=TOOL,
                output=join_output(stdout, stderr),
            ) from None
        finally:
            self._process = None
        return parse_iperf3_server_record(stdout, stderr="".join(self._stderr_head) + stderr)

    def serve_once(self, timeout: float) -> Iperf3ServerRecord:
        """Start, wait for one test and return its record (:meth:`start` + :meth:`result`).

        Useful when the client is started by someone else in parallel, e.g. another thread.
        """
        self.start(timeout)
        return self.result()

    def stop(self) -> None:
        """Stop the server process if it is still running. Safe to call twice."""
        if self._process is not None:
            self._stop()

    def _stop(self) -> tuple[str, str]:
        process = self._process
        self._process = None
        if process is None:
            return "", ""
        if process.poll() is None:
            process.terminate()
        try:
            stdout, stderr = process.communicate(timeout=_GRACE_S)
        except subprocess.TimeoutExpired:
            process.kill()
            stdout, stderr = process.communicate()
        return stdout, stderr

    def __enter__(self) -> InProcessIperf3Server:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()


def _error_of(stdout: str) -> str:
    for line in stdout.splitlines():
        try:
            item = json.loads(line)
        except json.JSONDecodeError:
            continue
        if isinstance(item, dict) and "error" in item:
            return str(item["error"])
    return ""


# --- the server process -----------------------------------------------------------------------


def _own_socket_inodes() -> set[str]:
    inodes = set()
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(target[8:-1])
    return inodes


def _listening(port: int) -> bool:
    """Whether *this process* has a TCP socket listening on ``port`` (another one's won't do)."""
    own = _own_socket_inodes()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            with open(table, encoding="ascii") as handle:
                next(handle, None)
                for row in handle:
                    fields = row.split()
                    # local_address is HEXADDR:HEXPORT, state 0A is LISTEN, field 9 the inode.
                    if len(fields) < 10 or fields[3] != "0A" or fields[9] not in own:
                        continue
                    if int(fields[1].rsplit(":", 1)[1], 16) == port:
                        return True
        except OSError:
            continue
    return False


class _IperfTime(ctypes.Structure):
    """libiperf's ``struct iperf_time``; ``iperf_set_test_rcv_timeout()`` takes a pointer to it."""

    _fields_ = (("secs", ctypes.c_uint32), ("usecs", ctypes.c_uint32))


def _serve_one(port: int, bind: str | None, timeout: float) -> dict[str, object]:
    """Run one libiperf server test in a thread; this process's exit bounds it."""
    import iperf3  # the bindings load libiperf when a Server is created

    try:
        server = iperf3.Server()
    except OSError as exc:
        return {"error": f"libiperf is not available: {exc}"}
    lib = server.lib
    test = server._test
    lib.iperf_set_test_idle_timeout.argtypes = (ctypes.c_void_p, ctypes.c_int)
    lib.iperf_set_test_rcv_timeout.argtypes = (ctypes.c_void_p, ctypes.POINTER(_IperfTime))
    lib.iperf_set_test_logfile.argtypes = (ctypes.c_void_p, ctypes.c_char_p)
    lib.iperf_open_logfile.argtypes = (ctypes.c_void_p,)
    if bind:
        server.bind_address = bind
    server.port = port
    server.json_output = True
    server.verbose = False
    # Without one-off mode the idle timeout makes iperf_run_server() *return* 2 when no client
    # came; in one-off mode libiperf would call exit() instead.
    lib.iperf_set_test_idle_timeout(test, max(1, math.ceil(timeout)))
    # libiperf's own receive timeout (default 120 s) is set 30 s past this process's deadline:
    # the deadline alone ends a stalled or overlong test, always with the same report. A
    # shorter one fired on a loaded machine when the stream was merely descheduled.
    rcv_timeout_s = math.ceil(timeout) + 30.0
    lib.iperf_set_test_rcv_timeout(
        test, ctypes.byref(_IperfTime(int(rcv_timeout_s), int(rcv_timeout_s % 1 * 1e6)))
    )
    # libiperf also prints its report; send that copy to /dev/null and take the string.
    lib.iperf_set_test_logfile(test, os.devnull.encode())
    lib.iperf_open_logfile(test)

    outcome: dict[str, int] = {}

    # A second handle on the same library, loaded with use_errno, so that the OS error behind a
    # failure (e.g. "Address already in use") survives until this thread reads it.
    run_server = ctypes.CDLL(lib._name, use_errno=True).iperf_run_server
    run_server.argtypes = (ctypes.c_void_p,)
    run_server.restype = ctypes.c_int

    def run(owner: Any) -> None:
        outcome["rc"] = run_server(owner._test)
        outcome["errno"] = ctypes.get_errno()

    # The thread holds ``server`` for as long as it runs: the bindings' finalizer ends and
    # frees the libiperf test (iperf_client_end, then iperf_free_test), and when this function
    # gave up on a stuck test and dropped its own reference, that freed the test under the
    # still-running thread, a use-after-free that killed the process with SIGSEGV (exit -11).
    worker = threading.Thread(target=run, args=(server,), name="libiperf-server", daemon=True)
    worker.start()
    poll(lambda: _listening(port) or not worker.is_alive(), timeout=_GRACE_S, interval=0.01)
    if worker.is_alive():
        print(f"{READY_PREFIX}{bind or '*'}:{port}", file=sys.stderr, flush=True)
    # One second more than libiperf's own (whole-second) idle timeout, so that a client that
    # never came is reported as such rather than as a stuck test.
    worker.join(math.ceil(timeout) + 1.0)
    if worker.is_alive():
        return {"error": f"test did not finish within {format_number(timeout)} s", "fatal": True}
    rc = outcome.get("rc", -1)
    if rc == _IDLE_RETURN:
        return {"error": f"no iperf3 client connected within {format_number(timeout)} s"}
    # After a failed test libiperf's JSON output may already be freed: only read it on success.
    text = cast(bytes | None, lib.iperf_get_test_json_output_string(test)) if rc >= 0 else None
    if rc < 0 or not text:
        message = str(server._error_to_string(ctypes.c_int.in_dll(lib, "i_errno").value))
        if message.rstrip().endswith(":") and outcome.get("errno"):
            message = f"{message.rstrip()} {os.strerror(outcome['errno'])}"
        return {"error": f"libiperf server failed: {message}"}
    try:
        record = iperf3_server_record_from_json(text.decode())
    except ToolError as exc:
        return {"error": str(exc)}
    return record.summary()


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``python -m cnibench.tools.iperf3_server`` (see the module notes).

    Returns
    -------
    int
        0 when every test was served, 1 on an error line, 2 on a usage error.
    """
    parser = argparse.ArgumentParser(
        prog=f"python -m {_MODULE}",
        description="Serve iperf3 tests with libiperf and print what the server saw as JSON.",
    )
    parser.add_argument("--port", type=int, default=5201, metavar="PORT", help="TCP port")
    parser.add_argument("--bind", metavar="ADDR", help="listen address (default: all)")
    parser.add_argument(
        "--timeout",
        type=float,
        default=60.0,
        metavar="SECONDS",
        help="maximum seconds per test, client arrival included (default 60)",
    )
    group = parser.add_mutually_exclusive_group()
    group.add_argument("--once", action="store_true", help="serve one test (the default)")
    group.add_argument("--count", type=int, default=1, metavar="N", help="serve N tests")
    options = parser.parse_args(argv)
    if not 0 < options.port < 65536 or options.count < 1 or not options.timeout > 0:
        parser.error("--port must be 1..65535, --count at least 1 and --timeout positive")

    for _ in range(1 if options.once else options.count):
        line = _serve_one(options.port, options.bind, options.timeout)
        fatal = bool(line.pop("fatal", False))
        print(json.dumps(line), flush=True)
        if "error" in line:
            if fatal:
                # The libiperf thread is blocked in C; only leaving the process stops it.
                sys.stderr.flush()
                os._exit(1)
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
