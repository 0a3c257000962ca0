"""The libiperf server for real: a real ``iperf3`` client talks to it over loopback."""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator

import pytest

from cnibench.errors import ToolError
from cnibench.tools.iperf3 import iperf3_client_argv, parse_iperf3
from cnibench.tools.iperf3_server import (
    READY_PREFIX,
    InProcessIperf3Server,
    iperf3_server_process_argv,
    parse_iperf3_server_record,
)

LOOPBACK = "127.0.0.1"

pytestmark = pytest.mark.skipif(shutil.which("iperf3") is None, reason="iperf3 client missing")


@pytest.fixture
def port() -> int:
    with socket.socket() as probe:
        probe.bind((LOOPBACK, 0))
        return int(probe.getsockname()[1])


@pytest.fixture
def server(port: int) -> Iterator[InProcessIperf3Server]:
    running = InProcessIperf3Server(port=port, bind=LOOPBACK)
    try:
        yield running
    finally:
        running.stop()


def run_client(port: int, *, seconds: int = 1, reverse: bool = False) -> str:
    argv = iperf3_client_argv(LOOPBACK, port=port, duration=seconds, reverse=reverse)
    done = subprocess.run(argv, capture_output=True, text=True, timeout=seconds + 30, check=False)
    return done.stdout


def test_server_sees_client_address_and_throughput(
    server: InProcessIperf3Server, port: int
) -> None:
    server.start(timeout=30)
    client = parse_iperf3(run_client(port))
    record = server.result()
    assert record.remote_host == LOOPBACK
    # Both ends describe the same data connection.
    client_port = client.raw["start"]["connected"][0]["local_port"]
    assert (record.remote_host, record.remote_port) == (client.local_host, client_port)
    assert record.local_port == port
    assert record.received_bits_per_second > 0
    assert record.protocol == "TCP"


def test_reverse_test_is_reported_as_sent(server: InProcessIperf3Server, port: int) -> None:
    server.start(timeout=30)
    run_client(port, reverse=True)
    record = server.result()
    assert record.reverse is True
    assert record.sent_bits_per_second > 0


def test_no_client_ends_cleanly_with_error(server: InProcessIperf3Server) -> None:
    started = time.monotonic()
    with pytest.raises(ToolError, match="no iperf3 client connected within 1 s"):
        server.serve_once(timeout=1)
    assert time.monotonic() - started < 10


def test_taken_port_is_reported(port: int) -> None:
    with socket.socket() as squatter:
        squatter.bind((LOOPBACK, port))
        squatter.listen()
        server = InProcessIperf3Server(port=port, bind=LOOPBACK)
        try:
            with pytest.raises(ToolError, match="Address already in use"):
                server.start(timeout=5)
        finally:
            server.stop()


def test_result_before_start_is_an_error(server: InProcessIperf3Server) -> None:
    with pytest.raises(ToolError, match="not started"):
        server.result()


@pytest.fixture
def server_process(port: int) -> Iterator[subprocess.Popen[str]]:
    argv = iperf3_server_process_argv(port=port, bind=LOOPBACK, timeout=30)
    process = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        yield process
    finally:
        if process.poll() is None:
            process.kill()
        process.communicate(timeout=10)


def test_main_mode_prints_one_json_line(server_process: subprocess.Popen[str], port: int) -> None:
    assert server_process.stderr is not None
    ready = server_process.stderr.readline()
    assert ready.startswith(READY_PREFIX)
    run_client(port)
    stdout, stderr = server_process.communicate(timeout=30)
    assert server_process.returncode == 0
    lines = stdout.splitlines()
    assert len(lines) == 1
    line = json.loads(lines[0])
    assert line["remote_host"] == LOOPBACK
    assert line["received_bits_per_second"] > 0
    assert parse_iperf3_server_record(stdout, stderr=stderr).remote_host == LOOPBACK


def test_main_mode_timeout_exits_1_with_error_line(port: int) -> None:
    argv = iperf3_server_process_argv(port=port, bind=LOOPBACK, timeout=1)
    done = subprocess.run(argv, capture_output=True, text=True, timeout=30, check=False)
    assert done.returncode == 1
    assert json.loads(done.stdout) == {"error": "no iperf3 client connected within 1 s"}


def test_main_mode_usage_error_exits_2() -> None:
    argv = iperf3_server_process_argv(port=5201, timeout=1)
    argv[argv.index("--port") + 1] = "not-a-port"
    done = subprocess.run(argv, capture_output=True, text=True, timeout=30, check=False)
    assert done.returncode == 2
    assert "--port" in done.stderr


def test_main_mode_stops_a_test_that_outlasts_the_timeout(port: int) -> None:
    """The server gives up on a test still running at its deadline, with that error, instead
    of serving the client's 60 s test (the bound is far from both ends: a loaded machine may be
    slow to start or end either process, and a tight one failed under CI's builds)."""
    argv = iperf3_server_process_argv(port=port, bind=LOOPBACK, timeout=3)
    server = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    client = None
    try:
        assert server.stderr is not None
        assert server.stderr.readline().startswith(READY_PREFIX)
        client_argv = iperf3_client_argv(LOOPBACK, port=port, duration=60)
        client = subprocess.Popen(client_argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        started = time.monotonic()
        stdout, _ = server.communicate(timeout=45)
        assert time.monotonic() - started < 30  # the client's 60 s test was cut short
        assert server.returncode == 1
        assert json.loads(stdout) == {"error": "test did not finish within 3 s"}
    finally:
        for process in (server, client):
            if process is not None and process.poll() is None:
                process.kill()
            if process is not None:
                process.communicate(timeout=10)


_ABANDON_SCRIPT = """
import os, subprocess, sys, threading, time
import iperf3
from cnibench.tools import iperf3_server
from cnibench.tools.iperf3 import iperf3_client_argv

finalize = iperf3.IPerf3.__del__
def traced(self):
    print("finalized", flush=True)
    finalize(self)
iperf3.IPerf3.__del__ = traced

port = int(sys.argv[1])
clients = []
def start_client():
    time.sleep(0.3)  # the server listens within this
    clients.append(subprocess.Popen(
        iperf3_client_argv("127.0.0.1", port=port, duration=30),
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    ))
threading.Thread(target=start_client).start()
line = iperf3_server._serve_one(port, "127.0.0.1", 1)
print(line["error"], flush=True)
for client in clients:
    client.kill()
    client.wait()
os._exit(0)  # as the server process does: the abandoned thread ends with the process
"""


def test_an_abandoned_libiperf_test_is_not_freed_under_its_running_thread(port: int) -> None:
    """When a test outlasts the deadline, its libiperf thread is still running in C; freeing the
    test under it (the bindings' finalizer) crashed the server with SIGSEGV under CI's load.
    The finalizer is traced in a process of its own, which leaves the abandoned thread behind."""
    done = subprocess.run(
        [sys.executable, "-P", "-c", _ABANDON_SCRIPT, str(port)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    lines = done.stdout.splitlines()
    assert "test did not finish within 1 s" in lines, done.stdout + done.stderr
    assert "finalized" not in lines[: lines.index("test did not finish within 1 s") + 1]
