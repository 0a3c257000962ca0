"""The Kubernetes backend's underlay-capture scripts, run for real on this host.

On a cluster they run through exec in a host-network pod; here they run with ``sh`` inside
two network namespaces this test creates (``cbt`` prefix, benchmarking addresses), joined by a
veth pair, with the real tcpdump. A UDP datagram carrying the marker crosses the pair.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass

import pytest

from cnibench.backends.kube.capture import (
    capture_files,
    capture_started,
    find_marker_script,
    start_capture_script,
    started_pid,
    stop_capture_script,
    uplink_interface,
)
from cnibench.backends.lab import LabBackend
from cnibench.errors import ToolError

ADDRESS_A, ADDRESS_B = "198.18.251.1", "198.18.251.2"
DISCARD_PORT = 9


@dataclass(frozen=True)
class Pair:
    a: str
    b: str
    veth_a: str


def _ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True, capture_output=True)


@pytest.fixture
def pair(lab_backend: LabBackend) -> Iterator[Pair]:
    suffix = os.urandom(3).hex()
    a, b, veth_a, veth_b = (
        f"cbtcapa{suffix}",
        f"cbtcapb{suffix}",
        f"cbtca{suffix}",
        f"cbtcb{suffix}",
    )
    _ip("netns", "add", a)
    try:
        _ip("netns", "add", b)
        try:
            _ip("link", "add", veth_a, "netns", a, "type", "veth", "peer", "name", veth_b,
                "netns", b)  # fmt: skip
            _ip("-n", a, "addr", "add", f"{ADDRESS_A}/30", "dev", veth_a)
            _ip("-n", b, "addr", "add", f"{ADDRESS_B}/30", "dev", veth_b)
            for ns, dev in ((a, veth_a), (b, veth_b), (a, "lo"), (b, "lo")):
                _ip("-n", ns, "link", "set", dev, "up")
            yield Pair(a, b, veth_a)
        finally:
            _ip("netns", "del", b)
    finally:
        _ip("netns", "del", a)


def _sh(namespace: str, script: str, timeout: float = 20) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["ip", "netns", "exec", namespace, "sh", "-c", script],
        capture_output=True, text=True, timeout=timeout, check=False,
    )  # fmt: skip


def _send(pair: Pair, payload: bytes) -> None:
    """One UDP datagram from b to a's discard port (nobody listens; it still crosses)."""
    code = (
        "import socket,sys; s=socket.socket(socket.AF_INET, socket.SOCK_DGRAM);"
        f"s.sendto(sys.argv[1].encode(), ({ADDRESS_A!r}, {DISCARD_PORT}))"
    )
    subprocess.run(
        ["ip", "netns", "exec", pair.b, sys.executable, "-c", code, payload.decode()],
        check=True, capture_output=True, timeout=20,
    )  # fmt: skip


def _capture(pair: Pair, payload: bytes, marker: bytes, seq: int) -> str:
    listed = _sh(pair.a, "ip -o -4 addr show").stdout
    interface = uplink_interface(listed, ADDRESS_A)
    pcap, log = capture_files("t" + os.urandom(3).hex(), seq)
    pid = started_pid(_sh(pair.a, start_capture_script(interface, pcap, log, limit=30)).stdout)
    try:
        deadline = time.monotonic() + 10
        while not capture_started(_sh(pair.a, f"cat {log}").stdout):
            assert time.monotonic() < deadline, "tcpdump did not start"
            time.sleep(0.1)
        _send(pair, payload)
        time.sleep(0.3)
    finally:
        _sh(pair.a, stop_capture_script(pid))
    found = _sh(pair.a, find_marker_script(marker, pcap, log))
    assert found.returncode == 0, found.stdout + found.stderr
    assert not os.path.exists(pcap)
    assert not os.path.exists(log)
    return found.stdout.strip()


def test_uplink_is_the_interface_holding_the_node_address(pair: Pair) -> None:
    listed = _sh(pair.a, "ip -o -4 addr show").stdout
    assert uplink_interface(listed, ADDRESS_A) == pair.veth_a
    assert uplink_interface(listed, "127.0.0.1") == "lo"
    with pytest.raises(ToolError, match=r"no interface holds the node address 198\.18\.251\.3"):
        uplink_interface(listed, "198.18.251.3")


def test_marker_in_plain_traffic_is_seen(pair: Pair) -> None:
    marker = b"cnibench-marker-" + os.urandom(4).hex().encode()
    assert _capture(pair, b"GET /" + marker + b" HTTP/1.1", marker, 1) == "seen"


def test_other_traffic_does_not_show_the_marker(pair: Pair) -> None:
    marker = b"cnibench-marker-" + os.urandom(4).hex().encode()
    assert _capture(pair, b"GET /something-else HTTP/1.1", marker, 2) == "unseen"


def test_capture_ends_by_itself_and_a_missing_file_concludes_nothing(pair: Pair) -> None:
    pcap, log = capture_files("t" + os.urandom(3).hex(), 3)
    pid = started_pid(_sh(pair.a, start_capture_script(pair.veth_a, pcap, log, limit=1)).stdout)
    deadline = time.monotonic() + 10
    while os.path.exists(f"/proc/{pid}"):
        assert time.monotonic() < deadline, "the capture outlived its limit"
        time.sleep(0.1)
    os.unlink(pcap)
    missing = _sh(pair.a, find_marker_script(b"cnibench-marker-x", pcap, log))
    assert missing.returncode == 3
    assert "listening on" in missing.stdout  # tcpdump's log, for the error message
    os.unlink(log)
