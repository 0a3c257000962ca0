"""Each registered client tool's declaration for real over loopback: the argv it builds from a
target and a profile runs the real tool against a real server of the workload kind it names,
and its measurements come out of that output (what the baseline does in a pod, without root).
Its version probe reads the installed tool's own version output."""

from __future__ import annotations

import re
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from threading import Thread

import pytest

from cnibench.tools import TOOLS, ToolTarget, client_tools, iperf3_server_argv, sockperf_server_argv

LOOPBACK = "127.0.0.1"

HEADLINE = {
    "iperf3": "throughput",
    "sockperf": "latency_avg",
    "wrk": "requests_per_second",
    "ab": "requests_per_second",
}
"""Each built-in client tool and the number it is run for (positive in every run)."""


@dataclass(frozen=True)
class LoopbackProfile:
    """A profile small enough for loopback on a busy machine (one second, a few requests)."""

    duration: float = 1.0
    ab_requests: int = 200
    wrk_threads: int = 1
    wrk_connections: int = 4


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind((LOOPBACK, 0))
        return int(probe.getsockname()[1])


class _Echo(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        body = b"loopback\n"
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        """Quiet: wrk's requests would fill the test's output."""


class _QuietServer(ThreadingHTTPServer):
    def handle_error(self, request: object, client_address: object) -> None:
        """wrk and ab drop their connections when they stop; that is no error here."""


def _wait_listening(port: int) -> None:
    # Asked of the kernel (ss), not by connecting: iperf3 would take a probe connection for a
    # client and fail the next test ("unable to receive control message").
    for _ in range(100):
        done = subprocess.run(
            ["ss", "-Hltn", f"sport = :{port}"], capture_output=True, text=True, check=False
        )
        if done.stdout.strip():
            return
        time.sleep(0.05)
    raise AssertionError(f"nothing listens on {LOOPBACK}:{port}")


@pytest.fixture
def server(request: pytest.FixtureRequest) -> Iterator[int]:
    """A real server of the tool's workload kind on loopback; yields its port."""
    kind = request.param
    port = free_port()
    if kind == "http-echo":
        http = _QuietServer((LOOPBACK, port), _Echo)
        thread = Thread(target=http.serve_forever, daemon=True)
        thread.start()
        try:
            yield port
        finally:
            http.shutdown()
            http.server_close()
        return
    if kind == "iperf3-server":
        argv = iperf3_server_argv(port=port, one_off=False, bind=LOOPBACK)
    else:
        argv = sockperf_server_argv(port=port, bind=LOOPBACK, tcp=True)
    process = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        _wait_listening(port)
        yield port
    finally:
        process.terminate()
        process.wait(timeout=10)


def _cases() -> list[object]:
    cases = []
    for tool in client_tools():
        assert tool.client is not None
        missing = shutil.which(tool.binary) is None
        cases.append(
            pytest.param(
                tool.name,
                tool.client.server,
                id=tool.name,
                marks=pytest.mark.skipif(missing, reason=f"{tool.binary} is not installed"),
            )
        )
    return cases


@pytest.mark.parametrize(("tool", "server"), _cases(), indirect=["server"])
def test_a_client_tool_measures_a_real_server_over_loopback(tool: str, server: int) -> None:
    run = TOOLS[tool].client
    assert run is not None
    profile = LoopbackProfile()
    argv = list(run.argv(ToolTarget(LOOPBACK, server), profile))
    if tool == "sockperf":
        argv.append("--tcp")  # the loopback server here is sockperf's TCP one
    done = subprocess.run(
        argv, capture_output=True, text=True, timeout=run.timeout(profile), check=False
    )
    measured = {m.metric: m for m in run.measurements(done.stdout, done.stderr)}
    assert measured[HEADLINE[tool]].value > 0, done.stdout[-2000:]
    if "failed_requests" in measured:
        assert measured["failed_requests"].value == 0
    if "errors" in measured:
        assert measured["errors"].value == 0


@pytest.mark.parametrize("tool", list(TOOLS))
def test_a_registered_tools_version_probe_reads_the_installed_tool(tool: str) -> None:
    probe = TOOLS[tool].version
    if shutil.which(probe.binary) is None:
        pytest.skip(f"{probe.binary} is not installed")
    done = subprocess.run(
        [probe.binary, *probe.argv], capture_output=True, text=True, timeout=30, check=False
    )
    match = re.search(probe.pattern, done.stdout + done.stderr)
    assert match is not None, done.stdout + done.stderr
    assert re.fullmatch(r"\d+(\.\d+)+", match.group(1))
