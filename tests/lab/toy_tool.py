"""A toy measurement tool, declared the way the built-in ones are and registered by the test with
one line (``register(TOY)``): nothing else in cnibench names it.

It times TCP connects to the server pod's HTTP echo with the ``python3`` every machine has: each
of :data:`CONNECTS` connections is opened (timed), sends one HTTP/1.0 request and prints the
connect time in µs and the body's first line, which names the pod that answered.
"""

from __future__ import annotations

from cnibench.errors import ParseError, ToolError
from cnibench.records import Measurement
from cnibench.tools.registry import (
    VERSION_NUMBER,
    ClientMeasurement,
    MeasurementProfile,
    MeasurementTool,
    ToolTarget,
    VersionProbe,
)

CONNECTS = 20
"""Connections per run."""

_SCRIPT = """
import socket, sys, time
address, port, count = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
for _ in range(count):
    started = time.perf_counter()
    with socket.create_connection((address, port), timeout=5) as conn:
        connected = time.perf_counter()
        conn.sendall(b"GET / HTTP/1.0\\r\\n\\r\\n")
        reply = b""
        while True:
            chunk = conn.recv(4096)
            if not chunk:
                break
            reply += chunk
    body = (reply.partition(b"\\r\\n\\r\\n")[2].decode().strip().splitlines() or [""])[0]
    print("%.1f %s" % ((connected - started) * 1e6, body), flush=True)
"""


def toy_argv(target: ToolTarget, profile: MeasurementProfile) -> list[str]:
    """``python3 -c SCRIPT ADDRESS PORT CONNECTS``."""
    return ["python3", "-c", _SCRIPT, target.address, str(target.port), str(CONNECTS)]


def toy_measurements(stdout: str, stderr: str) -> list[Measurement]:
    """Mean and largest connect time (µs) and the number of connections that were answered."""
    lines = [line.split(" ", 1) for line in stdout.splitlines() if line.strip()]
    if not lines:
        raise ToolError(f"toy connected nowhere: {stderr.strip()[-200:]}", tool="toy")
    try:
        times = [float(fields[0]) for fields in lines]
    except ValueError as exc:
        raise ParseError(f"toy line is not a time: {exc}", tool="toy", output=stdout) from exc
    answered = sum(1 for fields in lines if len(fields) == 2 and fields[1])
    return [
        Measurement("connect_time_avg", sum(times) / len(times), "us"),
        Measurement("connect_time_max", max(times), "us"),
        Measurement("connections", float(answered), "count"),
    ]


TOY = MeasurementTool(
    name="toy",
    package="python3",
    purpose="tests: TCP connect time to the HTTP echo",
    version=VersionProbe("python3", ("--version",), rf"Python {VERSION_NUMBER}"),
    client=ClientMeasurement(
        server="http-echo",
        argv=toy_argv,
        timeout=lambda profile: profile.duration + 30,
        measurements=toy_measurements,
        raw_file="toy-connect.txt",
    ),
)
