"""Underlay capture on a Kubernetes node: the shell steps a host-network pod runs.

The WireGuard proof (SPEC section 5) sends a marker between pods on two nodes and looks for it
in packets on the node's uplink: visible without encryption, absent with it. A pod with host
networking sees the node's own interfaces, so tcpdump there captures what travels between
nodes, before decryption. Only the uplink is captured: the pods' veths carry the decrypted
traffic and would always show the marker.

The steps are plain ``sh`` scripts built here and run through exec, so they are tested on real
tcpdump inside network namespaces, without a cluster.
"""

from __future__ import annotations

import re
import shlex

from cnibench.errors import ToolError

__all__ = [
    "CAPTURE_LIMIT",
    "capture_files",
    "capture_started",
    "find_marker_script",
    "start_capture_script",
    "started_pid",
    "stop_capture_script",
    "uplink_interface",
]

CAPTURE_LIMIT = 120
"""Seconds after which a capture ends by itself (``timeout``), should nothing stop it."""

_ADDR_LINE = re.compile(r"^\d+:\s+(?P<name>[^\s@:]+)(?:@\S+)?\s+inet\s+(?P<address>[\d.]+)/\d+")


def uplink_interface(ip_addr_output: str, node_ip: str) -> str:
    """The interface holding ``node_ip`` in ``ip -o -4 addr show`` output.

    Raises
    ------
    cnibench.errors.ToolError
        No interface has that address (the pod is not on the node's network).
    """
    for line in ip_addr_output.splitlines():
        found = _ADDR_LINE.match(line.strip())
        if found and found["address"] == node_ip:
            return found["name"]
    raise ToolError(f"no interface holds the node address {node_ip}", tool="ip")


def capture_files(session: str, seq: int) -> tuple[str, str]:
    """Paths of the capture's pcap and tcpdump log in the capture pod."""
    base = f"/tmp/cnibench-capture-{session}-{seq}"
    return f"{base}.pcap", f"{base}.log"


def start_capture_script(interface: str, pcap: str, log: str, *, limit: int = CAPTURE_LIMIT) -> str:
    """Start tcpdump on ``interface`` in the background, writing every packet to ``pcap`` as it
    arrives; print its PID. It ends by itself after ``limit`` seconds."""
    # --immediate-mode and -U: no packet waits in a buffer when the capture is stopped.
    # -Z root: keep the right to write the file after tcpdump drops privileges.
    command = (
        f"timeout {int(limit)} tcpdump --immediate-mode -i {shlex.quote(interface)} -n -U"
        f" -Z root -w {shlex.quote(pcap)}"
    )
    return f"{command} >{shlex.quote(log)} 2>&1 </dev/null & echo $!"


def started_pid(output: str) -> int:
    """The PID :func:`start_capture_script` printed.

    Raises
    ------
    cnibench.errors.ToolError
        It printed something else.
    """
    text = output.strip()
    if not text.isdigit():
        raise ToolError(f"underlay capture did not start: {text[:200]!r}", tool="tcpdump")
    return int(text)


def capture_started(log_text: str) -> bool:
    """Whether tcpdump's log says it is capturing."""
    return "listening on" in log_text


def stop_capture_script(pid: int) -> str:
    """Stop the capture started as ``pid`` (tcpdump's ``timeout`` parent, so both end)."""
    return f"kill {int(pid)} 2>/dev/null; sleep 0.2; true"


def find_marker_script(marker: bytes, pcap: str, log: str) -> str:
    """Print ``seen`` or ``unseen`` for ``marker`` in ``pcap``, then remove both files; exit 3
    when the capture file is missing (then nothing can be concluded)."""
    text = marker.decode("ascii")
    if not text or not re.fullmatch(r"[A-Za-z0-9._-]+", text):
        raise ValueError(f"marker must be non-empty letters, digits, '.', '_' or '-': {text!r}")
    quoted_pcap, quoted_log = shlex.quote(pcap), shlex.quote(log)
    return (
        f"if [ ! -f {quoted_pcap} ]; then cat {quoted_log} 2>/dev/null; exit 3; fi; "
        f"if grep -q -a -F -e {shlex.quote(text)} {quoted_pcap}; then echo seen;"
        f" else echo unseen; fi; rm -f {quoted_pcap} {quoted_log}"
    )
