"""Underlay capture on a Kubernetes node: the shell steps a host-network pod runs.

The WireGuard proof (SPEC section 5) sends a marker between pods on two nodes and looks for it
in packets on the node's uplink: visible without encryption, absent with it. A pod with host
networking sees the node's own interfaces, so tcpdump there captures what travels between
nodes, before decryption. Only the uplink is captured: the pods' veths carry the decrypted
traffic and would always show the marker.

The steps are plain ``sh`` scripts built here and run through exec, so they are tested on real
tcpdump inside network namespaces, without a cluster; :class:`KubeUnderlayCapture` runs them in a
capture pod per node.
"""

from __future__ import annotations

import functools
import re
import shlex
from collections.abc import Sequence

from cnibench.backends.base import Endpoint, NodeRole
from cnibench.backends.kube import render
from cnibench.backends.kube.pods import KubePod, KubePods
from cnibench.backends.kube.runtime import KubeRuntime
from cnibench.errors import ConfigError, ToolError
from cnibench.waiting import poll, wait_for

__all__ = [
    "CAPTURE_LIMIT",
    "KubeUnderlayCapture",
    "capture_files",
    "capture_started",
    "find_marker_script",
    "marker_written_script",
    "start_capture_script",
    "started_pid",
    "stop_capture_script",
    "uplink_interface",
]

CAPTURE_LIMIT = 120
"""Seconds after which a capture ends by itself (``timeout``), should nothing stop it."""

_CAPTURE_SETTLE = 0.3
"""Seconds for the last frames to reach tcpdump's file after the sender finished (less when the
marker is seen there sooner)."""

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


def _grep_marker(marker: bytes, pcap: str) -> str:
    """``grep`` command succeeding when ``marker`` is in ``pcap``."""
    text = marker.decode("ascii")
    if not text or not re.fullmatch(r"[A-Za-z0-9._-]+", text):
        raise ValueError(f"marker must be non-empty letters, digits, '.', '_' or '-': {text!r}")
    return f"grep -q -a -F -e {shlex.quote(text)} {shlex.quote(pcap)}"


def marker_written_script(marker: bytes, pcap: str) -> str:
    """Print ``seen`` when ``marker`` is in ``pcap`` already, else ``unseen`` (also while the
    file does not exist yet); the capture goes on and the file stays."""
    return f"if {_grep_marker(marker, pcap)} 2>/dev/null; then echo seen; else echo unseen; fi"


def find_marker_script(marker: bytes, pcap: str, log: str) -> str:
    """Print ``seen`` or ``unseen`` for ``marker`` in ``pcap``, then remove both files; exit 3
    when the capture file is missing (then nothing can be concluded)."""
    grep = _grep_marker(marker, pcap)
    quoted_pcap, quoted_log = shlex.quote(pcap), shlex.quote(log)
    return (
        f"if [ ! -f {quoted_pcap} ]; then cat {quoted_log} 2>/dev/null; exit 3; fi; "
        f"if {grep}; then echo seen;"
        f" else echo unseen; fi; rm -f {quoted_pcap} {quoted_log}"
    )


class KubeUnderlayCapture:
    """Underlay captures of one session, each in a host-network pod on the sender's node.

    Parameters
    ----------
    runtime:
        The cluster's shared state (namespace, images, session).
    pods:
        Starts the capture pods.
    """

    def __init__(self, runtime: KubeRuntime, pods: KubePods) -> None:
        self._runtime = runtime
        self._pods = pods
        self._capture_pods: dict[NodeRole, KubePod] = {}
        self._seq = 0

    def capture_underlay(self, marker: bytes, send: Sequence[str], *, source: Endpoint) -> bool:
        """Capture on the uplink of ``source``'s node while ``send`` runs in ``source``; look
        for ``marker``.

        A host-network capture pod is placed on that node on first use; the capture runs in
        the background there, bounded by :data:`CAPTURE_LIMIT` seconds, and is stopped by its
        PID.

        Raises
        ------
        cnibench.errors.ConfigError
            ``source`` is not a pod of this cluster.
        cnibench.errors.ToolError
            The capture cannot start or leaves no file, or ``send`` fails (then nothing can be
            concluded).
        cnibench.errors.ProvisioningError
            The capture pod cannot be placed.
        """
        if not isinstance(source, KubePod):
            raise ConfigError(f"{source.name} is not a pod of this cluster")
        capturer = self._capture_pod(source.node.role)
        listed = capturer.run(["ip", "-o", "-4", "addr", "show"], timeout=20)
        interface = uplink_interface(listed.stdout, source.node.ip)
        self._seq += 1
        pcap, log = capture_files(self._runtime.session, self._seq)
        started = capturer.run(["sh", "-c", start_capture_script(interface, pcap, log)], timeout=20)
        pid = started_pid(started.stdout)
        try:
            wait_for(
                lambda: capture_started(capturer.run(["cat", log], timeout=10).stdout),
                timeout=15,
                what=f"the underlay capture on {interface} to start",
                interval=0.2,
                error=functools.partial(ToolError, tool="tcpdump"),
            )
            result = source.run(send, timeout=60)
            # Until the marker is in the file or the settle time is up: absent (encrypted) the
            # whole time passes as before; once written it stays, so the answer is the same.
            seen = marker_written_script(marker, pcap)
            poll(
                lambda: capturer.run(["sh", "-c", seen], timeout=10).stdout.strip() == "seen",
                timeout=_CAPTURE_SETTLE,
                interval=0.05,
            )
        finally:
            capturer.run(["sh", "-c", stop_capture_script(pid)], timeout=20)
        found = capturer.run(["sh", "-c", find_marker_script(marker, pcap, log)], timeout=30)
        answer = found.stdout.strip()
        if found.returncode != 0 or answer not in ("seen", "unseen"):
            raise ToolError(
                f"underlay capture on {source.node.name} left no result: {answer[:300]}",
                tool="tcpdump",
            )
        if result.returncode != 0:
            raise ToolError(
                f"capture_underlay: {send[0]} in pod {source.name} exited {result.returncode}:"
                f" {result.stderr.strip()[:300]}",
                tool=send[0],
                output=result.stdout + result.stderr,
            )
        return answer == "seen"

    def _capture_pod(self, role: NodeRole) -> KubePod:
        """The capture pod on the ``role`` node, placed and waited for on first use."""
        known = self._capture_pods.get(role)
        if known is not None:
            return known
        rt = self._runtime
        manifest = render.capture_pod(
            f"capture-{role.value}",
            namespace=rt.namespace,
            session=rt.session,
            role=role,
            images=rt.images,
            tolerations=rt.tolerations,
            node=rt.target(role),
        )
        pod = self._pods.start(manifest, role)
        self._capture_pods[role] = pod
        return pod
