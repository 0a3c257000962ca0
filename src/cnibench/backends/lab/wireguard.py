"""WireGuard between the lab's nodes (kernel or wireguard-go) and the proofs that it encrypts.

:class:`LabWireGuard` creates each node's link and keys, configures peers (also for the egress
gateway's cryptokey routing), reads ``wg show`` for
:meth:`~cnibench.backends.lab.cluster.LabCluster.encryption_status` and captures the underlay
for :meth:`~cnibench.backends.lab.cluster.LabCluster.capture_underlay`.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

from cnibench.backends.base import EncryptionStatus
from cnibench.backends.lab.features import LabFeatures
from cnibench.backends.lab.plan import NodePlan, Step, wg_set_argv, wireguard_address_steps
from cnibench.backends.lab.pods import LabPod
from cnibench.backends.lab.runner import run_in_namespace, run_step, run_steps, wait_for_output
from cnibench.backends.lab.runtime import READY_TIMEOUT, LabRuntime
from cnibench.errors import ConfigError, ParseError, ProvisioningError, ToolError
from cnibench.waiting import poll, wait_for

__all__ = ["WG_SOCKET_DIR", "LabWireGuard", "parse_wg_dump", "redact_wg_dump"]

WG_SOCKET_DIR = Path("/var/run/wireguard")
"""Where wireguard-go puts its control sockets (shared by every network namespace)."""
_CAPTURE_SETTLE = 0.3
"""Seconds for the last frames to reach tcpdump's file after the sender finished (less when the
marker is seen there sooner)."""
_TOUCH_PEERS = """
import socket, sys
for ip in sys.argv[1:]:
    with socket.socket() as s:
        s.settimeout(2)
        try:
            s.connect((ip, 9))
        except OSError:
            pass
"""
"""Connect once to each address given (the port is closed: the answer is a reset). The Debian
base system has no ping, and any packet makes WireGuard complete its handshake."""


def parse_wg_dump(text: str) -> list[dict[str, str]]:
    """Peers in the output of ``wg show <interface> dump``.

    The first line describes the interface itself and is skipped; each further line is a peer
    with tab-separated fields.

    Returns
    -------
    list of dict
        Per peer: ``public_key``, ``endpoint`` (``"(none)"`` when unset), ``allowed_ips``,
        ``latest_handshake`` (Unix seconds, ``"0"`` when none), ``rx_bytes``, ``tx_bytes``.

    Raises
    ------
    cnibench.errors.ParseError
        If a peer line does not have the 8 fields of the dump format.
    """
    peers: list[dict[str, str]] = []
    for line in text.strip().splitlines()[1:]:
        fields = line.split("\t")
        if len(fields) != 8:
            raise ParseError(f"unexpected wg dump line {line[:80]!r}", tool="wg", output=text)
        peers.append(
            {
                "public_key": fields[0],
                "endpoint": fields[2],
                "allowed_ips": fields[3],
                "latest_handshake": fields[4],
                "rx_bytes": fields[5],
                "tx_bytes": fields[6],
            }
        )
    return peers


def redact_wg_dump(text: str) -> str:
    """``wg show <if> dump`` output with the interface's private key replaced by ``(hidden)``
    (the first line starts with it), so the text can go into results and logs."""
    lines = text.strip().splitlines()
    if lines:
        fields = lines[0].split("\t")
        lines[0] = "\t".join(["(hidden)", *fields[1:]])
    return "\n".join(lines)


class LabWireGuard:
    """The WireGuard mesh of one lab's nodes, and what shows it at work."""

    def __init__(self, runtime: LabRuntime) -> None:
        self._runtime = runtime
        self._public_keys: dict[str, str] = {}
        self._implementation = ""

    @property
    def implementation(self) -> str:
        """``"kernel"``, ``"wireguard-go"``, or ``""`` without encryption."""
        return self._implementation

    def create(self, features: LabFeatures) -> None:
        """Keys, links (kernel or wireguard-go), peers and addresses of every node.

        Raises
        ------
        ProvisioningError
            If neither implementation is usable, or a step failed.
        """
        plan = self._runtime.plan
        if not features.wireguard:
            raise ProvisioningError(
                "encryption=wireguard: neither kernel WireGuard nor wireguard-go (with wg and"
                " /dev/net/tun) is usable here"
            )
        kernel = features.kernel_wireguard
        self._implementation = "kernel" if kernel else "wireguard-go"
        for node in plan.nodes:
            self._public_keys[node.name] = self._generate_key(node)
        for node in plan.nodes:
            if kernel:
                run_step(
                    Step(
                        f"create the WireGuard link of {node.name}",
                        (
                            "ip",
                            "-n",
                            node.name,
                            "link",
                            "add",
                            node.wg_interface,
                            "type",
                            "wireguard",
                        ),
                    )
                )
            else:
                self._start_wireguard_go(node)
        for node in plan.nodes:
            self.set_peers(node, {})
        run_steps(wireguard_address_steps(plan))

    def _generate_key(self, node: NodePlan) -> str:
        path = self._key_path(node)
        try:
            private = subprocess.run(
                ["wg", "genkey"], capture_output=True, text=True, check=True, umask=0o077
            ).stdout.strip()
            public = subprocess.run(
                ["wg", "pubkey"], input=private, capture_output=True, text=True, check=True
            ).stdout.strip()
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "w") as handle:
                handle.write(private + "\n")
        except (OSError, subprocess.CalledProcessError) as exc:
            raise ProvisioningError(f"generate the WireGuard key of {node.name}: {exc}") from exc
        return public

    def _key_path(self, node: NodePlan) -> Path:
        return self._runtime.plan.state_dir / "keys" / f"{node.name}.key"

    def _start_wireguard_go(self, node: NodePlan) -> None:
        socket_path = WG_SOCKET_DIR / f"{node.wg_interface}.sock"
        if socket_path.exists():
            raise ProvisioningError(
                f"wireguard-go control socket {socket_path} already exists (another lab?)"
            )
        proc = self._runtime.start(
            f"{node.name}/wireguard-go",
            node.name,
            ["wireguard-go", node.wg_interface],
            log_path=self._runtime.log(f"{node.name}-wireguard-go"),
            env={"WG_PROCESS_FOREGROUND": "1", "LOG_LEVEL": "error"},
        )

        def socket_or_exit() -> bool:
            if proc.popen.poll() is not None and not socket_path.exists():
                raise ProvisioningError(
                    f"wireguard-go for {node.name} exited before making its control socket"
                    f" {socket_path}: {proc.log_tail()}"
                )
            return socket_path.exists()

        wait_for(
            socket_or_exit,
            timeout=READY_TIMEOUT,
            what=f"wireguard-go for {node.name} to make its control socket {socket_path}",
            interval=0.02,
            last_seen=proc.log_tail,
            error=ProvisioningError,
        )

    def set_peers(self, node: NodePlan, extra_allowed: dict[str, list[str]]) -> None:
        """Configure ``node``'s peers, each peer also owning ``extra_allowed[peer]``.

        Raises
        ------
        ProvisioningError
            If ``wg set`` fails.
        """
        argv = wg_set_argv(
            self._runtime.plan,
            node,
            private_key=self._key_path(node),
            public_keys=self._public_keys,
            extra_allowed=extra_allowed,
        )
        run_step(
            Step(
                f"configure WireGuard peers of {node.name}",
                ("ip", "netns", "exec", node.name, *argv),
            )
        )

    def remove_sockets(self) -> None:
        """Delete wireguard-go's control sockets (they outlive the namespaces)."""
        for interface in self._runtime.plan.wg_interfaces:
            with contextlib.suppress(FileNotFoundError):
                (WG_SOCKET_DIR / f"{interface}.sock").unlink()

    def status(self) -> EncryptionStatus:
        """See :meth:`LabCluster.encryption_status`."""
        plan = self._runtime.plan
        if not plan.encryption:
            return EncryptionStatus(
                enabled=False,
                kind="",
                interfaces={},
                peers={},
                detail="lab without encryption: node-to-node traffic is plain",
            )
        self._runtime.check_alive()
        for node in plan.nodes:
            peer_ips = [peer.wg_ip for peer in plan.nodes if peer.index != node.index]
            run_in_namespace(node.name, [sys.executable, "-c", _TOUCH_PEERS, *peer_ips], timeout=30)
        peers: dict[str, int] = {}
        interfaces: dict[str, str] = {}
        details: list[str] = []
        for node in plan.nodes:
            result = run_in_namespace(
                node.name, ["wg", "show", node.wg_interface, "dump"], timeout=10
            )
            if result.returncode != 0:
                raise ToolError(
                    f"wg show {node.wg_interface} failed on {node.name}: {result.stderr.strip()}",
                    tool="wg",
                    output=result.stderr,
                )
            dump = parse_wg_dump(result.stdout)
            with_endpoint = [p for p in dump if p["endpoint"] != "(none)"]
            handshakes = [p for p in dump if p["latest_handshake"] not in ("", "0")]
            interfaces[node.name] = node.wg_interface
            peers[node.name] = len(with_endpoint)
            details.append(
                f"# {node.name} {node.wg_interface} ({self._implementation}):"
                f" {len(with_endpoint)} peers with endpoint,"
                f" {len(handshakes)} handshakes completed\n{redact_wg_dump(result.stdout)}"
            )
        return EncryptionStatus(
            enabled=True,
            kind="wireguard",
            interfaces=interfaces,
            peers=peers,
            detail="\n".join(details),
        )

    def capture_underlay(self, pod: LabPod, marker: bytes, send: Sequence[str]) -> bool:
        """See :meth:`LabCluster.capture_underlay` (``pod`` already checked to be ours)."""
        runtime = self._runtime
        plan = runtime.plan
        if not marker:
            raise ConfigError("capture_underlay needs a non-empty marker")
        pcap = plan.state_dir / f"capture-{runtime.next_sequence()}.pcap"
        # --immediate-mode: without it frames wait in the capture ring for up to a second and
        # are lost when tcpdump is stopped right after the sender finished.
        argv = [
            "tcpdump",
            "--immediate-mode",
            "-i",
            plan.bridge,
            "-n",
            "-U",
            "-Z",
            "root",
            "-w",
            str(pcap),
        ]
        proc = runtime.start(
            "ul/tcpdump", plan.underlay_namespace, argv, log_path=None, capture=True
        )
        try:
            try:
                wait_for_output(proc, "listening on", timeout=READY_TIMEOUT)
            except ProvisioningError as exc:
                raise ToolError(f"underlay capture did not start: {exc}", tool="tcpdump") from exc
            result = pod.run(send, timeout=60)
            # Let the last frames travel from the kernel ring to tcpdump's file (-U: written per
            # packet): until the marker is there or the settle time is up. Absent (encrypted)
            # the whole time passes as before; once written it stays, so the answer is the same.
            poll(lambda: marker in _written(pcap), timeout=_CAPTURE_SETTLE, interval=0.05)
        finally:
            runtime.stop([proc])
        try:
            data = pcap.read_bytes()
        except OSError as exc:
            raise ToolError(f"underlay capture wrote no file: {exc}", tool="tcpdump") from exc
        finally:
            pcap.unlink(missing_ok=True)
        if result.returncode != 0:
            raise ToolError(
                f"capture_underlay: {send[0]} in pod {pod.name} exited {result.returncode}:"
                f" {result.stderr.strip()[:300]}",
                tool=Path(send[0]).name,
                output=result.stdout + result.stderr,
            )
        return marker in data


def _written(pcap: Path) -> bytes:
    """What tcpdump wrote to ``pcap`` so far (nothing while the file does not exist)."""
    try:
        return pcap.read_bytes()
    except OSError:
        return b""
