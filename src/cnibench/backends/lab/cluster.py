"""A provisioned lab: nodes, pods, external host, egress gateway, WireGuard, Prometheus.

:class:`LabCluster` implements :class:`~cnibench.backends.base.Cluster`; pods (:class:`LabPod`)
implement :class:`~cnibench.backends.base.Endpoint` and the external host
(:class:`LabExternalHost`) :class:`~cnibench.backends.base.ExternalHost`. The plan comes from
:mod:`cnibench.backends.lab.plan`; commands and processes go through
:mod:`cnibench.backends.lab.runner`. Everything created is recorded in ``lab.json`` in the state
directory, so ``cnibench clean`` can remove what a killed process left behind.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from cnibench.backends.base import (
    Capability,
    ClusterSpec,
    CommandResult,
    EgressServerResult,
    EncryptionStatus,
    Endpoint,
    Node,
    NodeRole,
    WorkloadSpec,
)
from cnibench.backends.lab.features import LabFeatures, probe_features, tool_versions
from cnibench.backends.lab.plan import (
    MONITOR_IP,
    NODE_EXPORTER_PORT,
    NODE_UPLINK,
    PROMETHEUS_PORT,
    UNDERLAY_DEVICE_REGEX,
    VXLAN_INTERFACE,
    VXLAN_PORT,
    VXLAN_VNI,
    EgressPlan,
    LabPlan,
    LabProfile,
    NodePlan,
    PodPlan,
    Step,
    egress_removal_steps,
    egress_steps,
    namespace_removal_step,
    namespace_steps,
    nat_steps,
    plan_egress,
    plan_pod,
    pod_removal_steps,
    pod_steps,
    prometheus_yaml,
    route_steps,
    sysctl_steps,
    underlay_steps,
    vxlan_steps,
    wg_set_argv,
    wireguard_address_steps,
    workload_processes,
)
from cnibench.backends.lab.policy import (
    L7_PROXY_PORT,
    iptables_policy_removal,
    iptables_policy_restore,
    l7_proxy_config,
    l7_redirect_ruleset,
    nft_policy_ruleset,
    nft_priority_ruleset,
    nft_table_removal,
    policy_table,
    split_dnat_ruleset,
    split_proxy_config,
)
from cnibench.backends.lab.portforward import NamespacePortForward
from cnibench.backends.lab.runner import (
    NETNS_DIR,
    ManagedProcess,
    pids_in_namespaces,
    process_start_time,
    run_in_namespace,
    run_step,
    run_steps,
    start_process,
    stop_pids,
    stop_processes,
    wait_for_output,
    wait_listening,
)
from cnibench.errors import (
    CnibenchError,
    ConfigError,
    MetricsError,
    ParseError,
    ProvisioningError,
    ToolError,
)
from cnibench.policy import PolicyEngine, PolicySpec, PriorityCase
from cnibench.records import Environment
from cnibench.results import environment_fingerprint
from cnibench.tools.iperf3_server import (
    READY_PREFIX,
    iperf3_server_process_argv,
    parse_iperf3_server_record,
)

__all__ = [
    "WG_SOCKET_DIR",
    "LabCluster",
    "LabEgressServerFuture",
    "LabExternalHost",
    "LabPod",
    "parse_wg_dump",
    "redact_wg_dump",
]

WG_SOCKET_DIR = Path("/var/run/wireguard")
"""Where wireguard-go puts its control sockets (shared by every network namespace)."""
_POD_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,62}$")
_READY_TIMEOUT = 15.0
_PROMETHEUS_READY_TIMEOUT = 45.0
_CAPTURE_SETTLE = 0.3
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


@contextlib.contextmanager
def _signals_deferred() -> Iterator[None]:
    """Hold SIGINT and SIGTERM back until the block ends (main thread only).

    A Ctrl-C that lands inside :meth:`LabCluster.teardown` would otherwise abort it half way,
    after it has already unregistered its atexit hook: the whole lab (namespaces, Prometheus,
    exporters) would be left behind. A signal that arrives meanwhile is only noted; when the
    block ends the handler that was in place before runs for it (raising KeyboardInterrupt as
    usual). Handlers, not the signal mask: the kernel hands a process-directed signal to any
    thread that does not block it (the port-forward threads), so masking the main thread alone
    does not hold it back.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    caught: list[signal.Signals] = []

    def note(signum: int, frame: object) -> None:
        caught.append(signal.Signals(signum))

    previous = {signum: signal.signal(signum, note) for signum in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
        if caught:
            handler = previous[caught[0]]
            if callable(handler):
                handler(caught[0], None)
            elif handler == signal.SIG_DFL:
                signal.raise_signal(caught[0])


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


def _iptables_restore() -> str:
    # The legacy binary is the kernel's linear xtables datapath, not nftables underneath.
    return (
        "iptables-legacy-restore" if shutil.which("iptables-legacy-restore") else "iptables-restore"
    )


def _nginx_argv(run_dir: Path) -> list[str]:
    conf = run_dir / "nginx.conf"
    return [
        "nginx",
        "-c",
        str(conf),
        "-p",
        str(run_dir),
        "-e",
        str(run_dir / "nginx-error.log"),
        "-g",
        "daemon off;",
    ]


def _node(plan: NodePlan) -> Node:
    return Node(name=plan.name, role=plan.role, ip=plan.underlay_ip)


class LabPod:
    """A pod of the lab: a namespace attached by veth to a node (an :class:`Endpoint`).

    Created by :meth:`LabCluster.place`; ``node`` is read back from the kernel (the node
    namespace the pod's veth peer lives in), not taken from the request.
    """

    def __init__(self, plan: PodPlan, node: Node, processes: Sequence[ManagedProcess]) -> None:
        self._plan = plan
        self._node = node
        self.processes: tuple[ManagedProcess, ...] = tuple(processes)

    @property
    def name(self) -> str:
        """Pod name, unique in the cluster."""
        return self._plan.name

    @property
    def node(self) -> Node:
        """The node the pod's veth is attached to."""
        return self._node

    @property
    def ip(self) -> str:
        """The pod's address."""
        return self._plan.ip

    @property
    def namespace(self) -> str:
        """The pod's network namespace."""
        return self._plan.namespace

    @property
    def plan(self) -> PodPlan:
        """Names and addresses of the pod."""
        return self._plan

    def run(self, argv: Sequence[str], *, timeout: float) -> CommandResult:
        """Run ``argv`` in the pod; kill it after ``timeout`` seconds (then ToolError)."""
        return run_in_namespace(
            self.namespace, argv, timeout=timeout, tool_label=f"pod {self.name}"
        )

    def __repr__(self) -> str:
        return f"LabPod({self.name!r}, ip={self.ip!r}, node={self._node.name!r})"


class LabEgressServerFuture:
    """Pending result of :meth:`LabExternalHost.iperf3_server_once`."""

    def __init__(
        self, cluster: LabCluster, process: ManagedProcess, timeout: float, stderr: str
    ) -> None:
        self._cluster = cluster
        self._process = process
        self._timeout = timeout
        self._stderr = stderr
        self._result: EgressServerResult | None = None

    def result(self) -> EgressServerResult:
        """Wait (at most the server's timeout plus a grace period) for the test's report.

        Raises
        ------
        cnibench.errors.ToolError
            If no test arrived, the server failed, or it had to be killed.
        """
        if self._result is not None:
            return self._result
        popen = self._process.popen
        try:
            out, err = popen.communicate(timeout=self._timeout + 15.0)
        except subprocess.TimeoutExpired:
            self._cluster._stop([self._process])
            raise ToolError(
                f"external iperf3 server did not report within {self._timeout + 15.0:g} s",
                tool="iperf3-server",
            ) from None
        finally:
            self._cluster._forget(self._process)
        stderr = self._stderr + err.decode(errors="replace")
        record = parse_iperf3_server_record(out.decode(errors="replace"), stderr=stderr)
        self._result = EgressServerResult(
            remote_host=record.remote_host,
            received_bits_per_second=record.received_bits_per_second,
            raw=record.raw_json,
        )
        return self._result

    def cancel(self) -> None:
        """Stop the server process without waiting for a test. Safe to repeat."""
        if self._result is None and self._process.popen.poll() is None:
            self._cluster._stop([self._process])
        self._cluster._forget(self._process)


class LabExternalHost:
    """The external host namespace on the underlay: the egress target."""

    def __init__(self, cluster: LabCluster) -> None:
        self._cluster = cluster

    @property
    def ip(self) -> str:
        """Underlay address of the external host."""
        return self._cluster.plan.external.ip

    @property
    def namespace(self) -> str:
        """Network namespace of the external host."""
        return self._cluster.plan.external.name

    def run(self, argv: Sequence[str], *, timeout: float) -> CommandResult:
        """Run ``argv`` on the external host; kill it after ``timeout`` seconds (ToolError)."""
        return run_in_namespace(self.namespace, argv, timeout=timeout, tool_label="external host")

    def iperf3_server_once(self, *, port: int, timeout: float) -> LabEgressServerFuture:
        """Start a libiperf server for one test; returns once it listens.

        Parameters
        ----------
        port:
            TCP port on the external host's address.
        timeout:
            Seconds the server waits for the test to arrive and finish.

        Raises
        ------
        cnibench.errors.ToolError
            If the server does not come up.
        """
        name = f"ext/iperf3-server-{port}"
        # A server whose result was never collected (its client failed) would hold the port
        # until its own timeout; the new test replaces it.
        self._cluster._stop(self._cluster._processes_named(name))
        argv = iperf3_server_process_argv(port=port, bind=self.ip, timeout=timeout)
        proc = self._cluster._start(name, self.namespace, argv, log_path=None, capture=True)
        try:
            stderr = wait_for_output(proc, READY_PREFIX, timeout=_READY_TIMEOUT)
        except ProvisioningError as exc:
            self._cluster._stop([proc])
            raise ToolError(
                f"external iperf3 server did not start: {exc}", tool="iperf3-server"
            ) from exc
        return LabEgressServerFuture(self._cluster, proc, timeout, stderr)


_LAB_HINTS = {
    Capability.UNDERLAY_CAPTURE: "install tcpdump",
    Capability.WIREGUARD: "neither kernel WireGuard nor wireguard-go works here",
    Capability.LATENCY_EMULATION: "this kernel has no netem qdisc",
}
"""What the host lacks for each capability the lab may not offer (``capability_hint``)."""


class LabCluster:
    """A lab made of network namespaces on this host (a :class:`Cluster`).

    Use :meth:`cnibench.backends.lab.LabBackend.provision` to get one. Usable as a context
    manager; :meth:`teardown` removes everything (also at interpreter exit if forgotten).
    """

    def __init__(self, plan: LabPlan, spec: ClusterSpec) -> None:
        self._plan = plan
        self._spec = spec
        self._lock = threading.RLock()
        self._processes: dict[int, ManagedProcess] = {}
        self._pods: dict[str, LabPod] = {}
        self._used_hosts: dict[int, set[int]] = {node.index: set() for node in plan.nodes}
        self._pod_seq = 0
        self._capture_seq = 0
        self._egress: EgressPlan | None = None
        self._public_keys: dict[str, str] = {}
        self._features = LabFeatures(kernel_wireguard=False, wireguard_go=False, netem=False)
        self._wg_implementation = ""
        self._forward: NamespacePortForward | None = None
        self._prometheus_url = ""
        self._prometheus: ManagedProcess | None = None
        self._environment: Environment | None = None
        self._external = LabExternalHost(self)
        self._policy: tuple[str, PolicyEngine] | None = None
        self._priority_node: str | None = None
        self._l7: tuple[str, ManagedProcess] | None = None
        self._split: tuple[str, LabPod, ManagedProcess] | None = None
        self._torn_down = False
        self._provisioned = False
        self._created = datetime.now(UTC).isoformat()
        self.recorded_pids: set[int] = set()
        """Every PID this lab ever started (kept after teardown, for checks)."""

    # -- Cluster protocol: identity -------------------------------------------------------

    @property
    def backend(self) -> str:
        """``"lab"``."""
        return "lab"

    @property
    def provider(self) -> str:
        """``"lab"``."""
        return "lab"

    @property
    def spec(self) -> ClusterSpec:
        """The spec this lab was provisioned for."""
        return self._spec

    @property
    def cni_version(self) -> str:
        """Kernel release: the lab's datapath is the kernel's."""
        return os.uname().release

    @property
    def capabilities(self) -> frozenset[Capability]:
        """Egress gateway, network policy (with tiers), L7 policy, traffic split and underlay
        capture always (tcpdump permitting); WireGuard and latency emulation when the
        host supports them."""
        caps = {
            Capability.EXTERNAL_HOST,
            Capability.EGRESS_GATEWAY,
            Capability.NETWORK_POLICY,
            Capability.POLICY_TIERS,
            Capability.L7_POLICY,
            Capability.TRAFFIC_SPLIT,
        }
        if shutil.which("tcpdump") is not None:
            caps.add(Capability.UNDERLAY_CAPTURE)
        if self._features.wireguard:
            caps.add(Capability.WIREGUARD)
        if self._features.netem:
            caps.add(Capability.LATENCY_EMULATION)
        return frozenset(caps)

    def capability_hint(self, capability: Capability) -> str:
        """What is missing on this host for ``capability`` (see ``cnibench doctor``)."""
        return _LAB_HINTS.get(capability, "")

    @property
    def nodes(self) -> tuple[Node, ...]:
        """All nodes in the order of ``spec.roles``."""
        return tuple(_node(node) for node in self._plan.nodes)

    def node(self, role: NodeRole) -> Node:
        """The first node with ``role``.

        Raises
        ------
        ConfigError
            If no node has it.
        """
        return _node(self._node_plan(role))

    @property
    def external(self) -> LabExternalHost:
        """The external host."""
        return self._external

    # -- lab specifics ----------------------------------------------------------------------

    @property
    def lab_id(self) -> str:
        """``cb`` + six hex digits, prefix of every namespace of this lab."""
        return self._plan.lab_id

    @property
    def plan(self) -> LabPlan:
        """Names and addresses of the lab."""
        return self._plan

    @property
    def state_dir(self) -> Path:
        """Directory with ``lab.json``, keys, configs and logs."""
        return self._plan.state_dir

    @property
    def features(self) -> LabFeatures:
        """Kernel features found when the lab was provisioned."""
        return self._features

    @property
    def wireguard_implementation(self) -> str:
        """``"kernel"``, ``"wireguard-go"``, or ``""`` without encryption."""
        return self._wg_implementation

    @property
    def metrics_device_regex(self) -> str:
        """RE2 regex of a node's underlay interface in node-exporter's ``device`` label
        (``^eth0$``: every lab node's underlay veth is named ``eth0``, as on kind nodes)."""
        return UNDERLAY_DEVICE_REGEX

    @property
    def pods(self) -> tuple[LabPod, ...]:
        """Pods currently placed."""
        with self._lock:
            return tuple(self._pods.values())

    def __enter__(self) -> LabCluster:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.teardown()

    def __repr__(self) -> str:
        return f"LabCluster({self.lab_id!r}, {self._spec.key!r})"

    # -- provisioning -----------------------------------------------------------------------

    def provision(self) -> None:
        """Build the lab from its plan (called once by the backend).

        Raises
        ------
        ProvisioningError
            Naming the failed step; everything created so far is removed first.
        """
        if self._provisioned:
            return
        # If the state directory exists, another lab owns this id: touch nothing of it.
        self._create_state_dir()
        atexit.register(self.teardown)
        try:
            run_steps(namespace_steps(self._plan))
            run_steps(sysctl_steps(self._plan))
            run_steps(underlay_steps(self._plan))
            self._features = probe_features(self._plan.underlay_namespace)
            if self._plan.encryption:
                self._create_wireguard()
            run_steps(vxlan_steps(self._plan))
            run_steps(route_steps(self._plan))
            run_steps(nat_steps(self._plan))
            self._start_monitoring()
        except BaseException as exc:
            try:
                self.teardown()
            except CnibenchError as cleanup_exc:
                exc.add_note(f"cleanup after the failure also failed: {cleanup_exc}")
            if isinstance(exc, CnibenchError):
                raise
            if isinstance(exc, OSError):
                raise ProvisioningError(f"lab {self.lab_id}: {exc}") from exc
            raise
        self._provisioned = True
        self._record()

    def _create_state_dir(self) -> None:
        state = self._plan.state_dir
        try:
            state.parent.mkdir(mode=0o755, parents=True, exist_ok=True)
            state.mkdir(mode=0o700)
            for sub in ("logs", "keys", "pods", "prometheus"):
                (state / sub).mkdir(mode=0o700)
        except OSError as exc:
            raise ProvisioningError(f"create the state directory {state}: {exc}") from exc
        self._record()

    def _record(self) -> None:
        """Write ``lab.json`` atomically (what ``cnibench clean`` and people debugging read)."""
        state = self._plan.state_dir
        if not state.is_dir():
            return
        with self._lock:
            data: dict[str, Any] = {
                "lab_id": self.lab_id,
                "created": self._created,
                "owner_pid": os.getpid(),
                "owner_start_time": process_start_time(os.getpid()),
                "spec": {
                    "cni": self._spec.cni,
                    "encryption": self._spec.encryption,
                    "roles": [role.value for role in self._spec.roles],
                },
                "namespaces": [*self._plan.namespaces, *(p.namespace for p in self._pods.values())],
                "nodes": [
                    {"name": n.name, "role": n.role.value, "ip": n.underlay_ip}
                    for n in self._plan.nodes
                ],
                "pods": {
                    p.name: {"namespace": p.namespace, "ip": p.ip, "node": p.node.name}
                    for p in self._pods.values()
                },
                "wg_interfaces": list(self._plan.wg_interfaces),
                "wireguard_implementation": self._wg_implementation,
                "processes": [proc.to_json_dict() for proc in self._processes.values()],
            }
        tmp = state / "lab.json.tmp"
        with contextlib.suppress(OSError):
            tmp.write_text(json.dumps(data, indent=2))
            os.replace(tmp, state / "lab.json")

    def _start(
        self,
        name: str,
        namespace: str,
        argv: Sequence[str],
        *,
        log_path: Path | None,
        env: dict[str, str] | None = None,
        capture: bool = False,
    ) -> ManagedProcess:
        binary = argv[0]
        if shutil.which(binary) is None:
            raise ProvisioningError(f"start {name}: {binary} not found on PATH")
        proc = start_process(name, namespace, argv, log_path=log_path, env=env, capture=capture)
        with self._lock:
            self._processes[proc.pid] = proc
            self.recorded_pids.add(proc.pid)
        self._record()
        return proc

    def _processes_named(self, name: str) -> list[ManagedProcess]:
        with self._lock:
            return [proc for proc in self._processes.values() if proc.name == name]

    def _forget(self, proc: ManagedProcess) -> None:
        with self._lock:
            self._processes.pop(proc.pid, None)

    def _stop(self, processes: Sequence[ManagedProcess]) -> list[str]:
        stuck = stop_processes(processes)
        for proc in processes:
            self._forget(proc)
        self._record()
        return stuck

    def _log(self, name: str) -> Path:
        return self._plan.state_dir / "logs" / f"{name}.log"

    def _create_wireguard(self) -> None:
        if not self._features.wireguard:
            raise ProvisioningError(
                "encryption=wireguard: neither kernel WireGuard nor wireguard-go (with wg and"
                " /dev/net/tun) is usable here"
            )
        kernel = self._features.kernel_wireguard
        self._wg_implementation = "kernel" if kernel else "wireguard-go"
        for node in self._plan.nodes:
            self._public_keys[node.name] = self._generate_key(node)
        for node in self._plan.nodes:
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
        for node in self._plan.nodes:
            self._wg_set(node, {})
        run_steps(wireguard_address_steps(self._plan))

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
        return self._plan.state_dir / "keys" / f"{node.name}.key"

    def _start_wireguard_go(self, node: NodePlan) -> None:
        socket_path = WG_SOCKET_DIR / f"{node.wg_interface}.sock"
        if socket_path.exists():
            raise ProvisioningError(
                f"wireguard-go control socket {socket_path} already exists (another lab?)"
            )
        proc = self._start(
            f"{node.name}/wireguard-go",
            node.name,
            ["wireguard-go", node.wg_interface],
            log_path=self._log(f"{node.name}-wireguard-go"),
            env={"WG_PROCESS_FOREGROUND": "1", "LOG_LEVEL": "error"},
        )
        deadline = time.monotonic() + _READY_TIMEOUT
        while not socket_path.exists():
            if proc.popen.poll() is not None or time.monotonic() > deadline:
                raise ProvisioningError(
                    f"start wireguard-go for {node.name}: no control socket {socket_path}:"
                    f" {proc.log_tail()}"
                )
            time.sleep(0.02)

    def _wg_set(self, node: NodePlan, extra_allowed: dict[str, list[str]]) -> None:
        argv = wg_set_argv(
            self._plan,
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

    def _start_monitoring(self) -> None:
        exporters = [
            self._start(
                f"{node.name}/node-exporter",
                node.name,
                [
                    "prometheus-node-exporter",
                    f"--web.listen-address={node.underlay_ip}:{NODE_EXPORTER_PORT}",
                    "--collector.disable-defaults",
                    "--collector.cpu",
                    "--collector.meminfo",
                    "--collector.netdev",
                    "--collector.stat",
                    "--collector.loadavg",
                    "--collector.netdev.device-exclude=",
                    f"--collector.netdev.device-include={self._netdev_regex(node)}",
                ],
                log_path=self._log(f"{node.name}-node-exporter"),
            )
            for node in self._plan.nodes
        ]
        prom_dir = self._plan.state_dir / "prometheus"
        config = prom_dir / "prometheus.yml"
        config.write_text(prometheus_yaml(self._plan))
        self._prometheus = self._start(
            "mon/prometheus",
            self._plan.monitor.name,
            [
                "prometheus",
                f"--config.file={config}",
                f"--storage.tsdb.path={prom_dir / 'data'}",
                f"--web.listen-address={MONITOR_IP}:{PROMETHEUS_PORT}",
                "--storage.tsdb.retention.time=1d",
                "--log.level=warn",
            ],
            log_path=self._log("prometheus"),
        )
        for proc, node in zip(exporters, self._plan.nodes, strict=True):
            wait_listening(proc, node.underlay_ip, NODE_EXPORTER_PORT, timeout=_READY_TIMEOUT)

    def _netdev_regex(self, node: NodePlan) -> str:
        # Only the uplink and tunnels: hundreds of pod veths would only add series.
        devices = [NODE_UPLINK]
        if node.wg_interface:
            devices.append(node.wg_interface)
        if self._plan.profile is LabProfile.VXLAN:
            devices.append(VXLAN_INTERFACE)
        return f"^({'|'.join(devices)})$"

    # -- pods -------------------------------------------------------------------------------

    def _node_plan(self, role: NodeRole) -> NodePlan:
        for node in self._plan.nodes:
            if node.role == role:
                return node
        raise ConfigError(
            f"lab {self.lab_id} has no node with role {NodeRole(role).value!r}"
            f" (roles: {', '.join(n.role.value for n in self._plan.nodes)})"
        )

    def place(self, name: str, *, role: NodeRole, workloads: Sequence[WorkloadSpec] = ()) -> LabPod:
        """Create pod ``name`` on the first node with ``role`` and start ``workloads``.

        Returns once every workload listens on its TCP port (bounded wait).

        Raises
        ------
        ConfigError
            Bad or duplicate name, unknown role, node full, bad workload.
        ProvisioningError
            A command or server failed; the half-made pod is removed.
        """
        if not _POD_NAME_RE.match(name):
            raise ConfigError(
                f"invalid pod name {name!r}: use up to 63 letters, digits, '_', '.', '-'"
            )
        self._check_alive()
        node = self._node_plan(role)
        with self._lock:
            if name in self._pods:
                raise ConfigError(f"a pod named {name!r} already exists in lab {self.lab_id}")
            used = self._used_hosts[node.index]
            host = next((h for h in range(2, 255) if h not in used), 255)
            self._pod_seq += 1
            pod_plan = plan_pod(self._plan, name, node, host=host, seq=self._pod_seq)
            used.add(host)
        run_dir = self._plan.state_dir / "pods" / name
        processes: list[ManagedProcess] = []
        try:
            specs = [p for w in workloads for p in workload_processes(pod_plan, w, run_dir)]
            run_steps(pod_steps(pod_plan))
            attached = self._attached_node(pod_plan)
            run_dir.mkdir(mode=0o755, exist_ok=True)
            for spec in specs:
                if spec.config is not None:
                    path, text = spec.config
                    path.parent.mkdir(parents=True, exist_ok=True)
                    path.write_text(text)
                processes.append(
                    self._start(
                        f"{name}/{spec.name}",
                        pod_plan.namespace,
                        spec.argv,
                        log_path=run_dir / f"{spec.name}.log",
                    )
                )
            for proc, spec in zip(processes, specs, strict=True):
                wait_listening(proc, pod_plan.ip, spec.port, timeout=_READY_TIMEOUT)
        except BaseException:
            self._stop(processes)
            self._delete_pod(pod_plan)
            raise
        pod = LabPod(pod_plan, attached, processes)
        with self._lock:
            self._pods[name] = pod
        self._record()
        return pod

    def _attached_node(self, pod: PodPlan) -> Node:
        links = json.loads(
            run_step(
                Step(
                    f"inspect the link of pod {pod.name}",
                    ("ip", "-n", pod.namespace, "-j", "link", "show", NODE_UPLINK),
                )
            )
        )
        nsid = links[0].get("link_netnsid") if links else None
        ids = json.loads(
            run_step(
                Step(
                    f"list the peer namespaces of pod {pod.name}",
                    ("ip", "-n", pod.namespace, "-j", "netns", "list-id"),
                )
            )
            or "[]"
        )
        peer = next((entry.get("name") for entry in ids if entry.get("nsid") == nsid), None)
        if nsid is None or peer is None:
            raise ProvisioningError(
                f"pod {pod.name}: cannot tell which namespace its {NODE_UPLINK} is attached to"
            )
        try:
            return _node(self._plan.node_named(str(peer)))
        except ConfigError as exc:
            raise ProvisioningError(
                f"pod {pod.name} is attached to {peer}, which is not a node of {self.lab_id}"
            ) from exc

    def _own_pod(self, endpoint: Endpoint) -> LabPod:
        with self._lock:
            pod = self._pods.get(endpoint.name)
        if pod is None or pod is not endpoint:
            raise ConfigError(f"{endpoint.name!r} is not a pod of lab {self.lab_id}")
        return pod

    def remove(self, endpoint: Endpoint) -> None:
        """Stop the pod's workloads and delete it (its namespace and veth)."""
        pod = self._own_pod(endpoint)
        self._stop(pod.processes)
        with self._lock:
            self._pods.pop(pod.name, None)
        self._delete_pod(pod.plan)
        self._record()

    def _delete_pod(self, pod: PodPlan) -> None:
        leftovers = pids_in_namespaces([pod.namespace]).get(pod.namespace, [])
        if leftovers:
            stop_pids(leftovers)
        for step in pod_removal_steps(pod):
            with contextlib.suppress(ProvisioningError):
                run_step(step)
        with self._lock:
            self._used_hosts[pod.node.index].discard(int(pod.ip.rsplit(".", 1)[1]))
        shutil.rmtree(self._plan.state_dir / "pods" / pod.name, ignore_errors=True)

    # -- egress gateway ---------------------------------------------------------------------

    def enable_egress_gateway(self, clients: Sequence[Endpoint], *, destination: str) -> str:
        """Route ``clients``' traffic to ``destination`` through the egress-gw node.

        Client nodes send it (in the tunnel, if any) to the gateway instead of masquerading it;
        the gateway masquerades it to its own underlay address. Replaces an earlier gateway.

        Returns
        -------
        str
            The gateway node's underlay address: the source the destination will see.

        Raises
        ------
        ConfigError
            No egress-gw node, a client that is not a pod of this lab, or a bad destination.
        """
        self._check_alive()
        gateway = self._node_plan(NodeRole.EGRESS_GW)
        pods = [self._own_pod(client) for client in clients]
        egress = plan_egress(self._plan, gateway, [(p.node.name, p.ip) for p in pods], destination)
        with self._lock:
            self.disable_egress_gateway()
            self._egress = egress
            try:
                if self._plan.encryption and self._plan.profile is LabProfile.ROUTED:
                    self._set_egress_wireguard(egress, enabled=True)
                run_steps(egress_steps(self._plan, egress))
                run_steps(nat_steps(self._plan, egress))
            except BaseException:
                with contextlib.suppress(CnibenchError):
                    self.disable_egress_gateway()
                raise
        return gateway.underlay_ip

    def _set_egress_wireguard(self, egress: EgressPlan, *, enabled: bool) -> None:
        # Cryptokey routing drops packets to addresses no peer owns: on client nodes the
        # gateway peer must also own the destination while the gateway is on.
        client_nodes = sorted({node for node, _ in egress.clients})
        extra = {egress.gateway.name: [egress.destination]} if enabled else {}
        for node_name in client_nodes:
            self._wg_set(self._plan.node_named(node_name), extra)

    def disable_egress_gateway(self) -> None:
        """Remove the egress gateway's rules and routes (each node masquerades its own pods)."""
        with self._lock:
            egress = self._egress
            if egress is None:
                return
            errors: list[str] = []
            steps = [*egress_removal_steps(self._plan, egress), *nat_steps(self._plan)]
            for step in steps:
                try:
                    run_step(step)
                except ProvisioningError as exc:
                    errors.append(str(exc))
            if self._plan.encryption and self._plan.profile is LabProfile.ROUTED:
                try:
                    self._set_egress_wireguard(egress, enabled=False)
                except ProvisioningError as exc:
                    errors.append(str(exc))
            self._egress = None
        if errors:
            raise ProvisioningError("disable the egress gateway: " + "; ".join(errors))

    # -- network policy, L7 policy, traffic split -------------------------------------------

    def _pod_at(self, ip: str) -> LabPod:
        with self._lock:
            for pod in self._pods.values():
                if pod.ip == ip:
                    return pod
        raise ConfigError(f"no pod of lab {self.lab_id} has address {ip}")

    def _nft(self, namespace: str, description: str, ruleset: str) -> None:
        run_step(Step(description, ("ip", "netns", "exec", namespace, "nft", "-f", "-"), ruleset))

    def _target_node(self, spec: PolicySpec) -> str:
        """Name of the node whose forward path a policy on ``spec.target`` goes into."""
        self._check_alive()
        return self._pod_at(spec.target.ip).node.name

    def apply_policy(self, spec: PolicySpec, *, engine: PolicyEngine) -> None:
        """Enforce ``spec`` in the forward path of the target pod's node with ``engine``.

        ``iptables`` uses ``iptables-legacy-restore`` when present (the classic linear
        xtables datapath), else ``iptables-restore``. Replaces an earlier policy.

        Raises
        ------
        ConfigError
            The target is not a pod of this lab.
        ProvisioningError
            The ruleset could not be loaded.
        """
        node = self._target_node(spec)
        engine = PolicyEngine(engine)
        with self._lock:
            self.remove_policy()
            if engine is PolicyEngine.IPTABLES:
                run_step(
                    Step(
                        f"load the iptables policy of {spec.target.name} on {node}",
                        ("ip", "netns", "exec", node, _iptables_restore()),
                        iptables_policy_restore(spec),
                    ),
                    timeout=120,
                )
            else:
                self._nft(
                    node,
                    f"load the {engine.value} policy of {spec.target.name} on {node}",
                    nft_policy_ruleset(spec, table=policy_table(self.lab_id, "pol"), engine=engine),
                )
            self._policy = (node, engine)

    def remove_policy(self) -> None:
        """Remove the policy loaded by :meth:`apply_policy` (no-op without one)."""
        with self._lock:
            if self._policy is None:
                return
            node, engine = self._policy
            self._policy = None
            if engine is PolicyEngine.IPTABLES:
                run_step(
                    Step(
                        f"remove the iptables policy on {node}",
                        ("ip", "netns", "exec", node, _iptables_restore()),
                        iptables_policy_removal(),
                    )
                )
            else:
                self._nft(
                    node,
                    f"remove the policy table on {node}",
                    nft_table_removal(policy_table(self.lab_id, "pol")),
                )

    def apply_priority_case(self, case: PriorityCase, spec: PolicySpec) -> None:
        """Load ``case`` as nftables chains in the reference order into the forward path of
        the target pod's node (:func:`~cnibench.backends.lab.policy.nft_priority_ruleset`);
        replaces an earlier case. The verdict of each probe is the kernel's.

        Raises
        ------
        ConfigError
            The target is not a pod of this lab.
        ProvisioningError
            The ruleset could not be loaded.
        """
        node = self._target_node(spec)
        ruleset = nft_priority_ruleset(case, spec, table=policy_table(self.lab_id, "prio"))
        with self._lock:
            self.remove_priority_case()
            self._nft(node, f"load priority case {case.name} on {node}", ruleset)
            self._priority_node = node

    def remove_priority_case(self) -> None:
        """Remove the table loaded by :meth:`apply_priority_case` (no-op without one)."""
        with self._lock:
            node, self._priority_node = self._priority_node, None
            if node is None:
                return
            self._nft(
                node,
                f"remove the priority case table on {node}",
                nft_table_removal(policy_table(self.lab_id, "prio")),
            )

    def apply_l7_policy(self, server: Endpoint, *, port: int, method: str, path: str) -> None:
        """Start nginx in ``server``'s node namespace and redirect ``server:port`` to it.

        Raises
        ------
        ConfigError
            Bad method or path, or ``server`` is not a pod of this lab.
        ProvisioningError
            nginx did not start or the redirect could not be loaded (nothing is left behind).
        """
        self._check_alive()
        pod = self._own_pod(server)
        node = pod.node.name
        run_dir = self._plan.state_dir / "l7"
        config = l7_proxy_config(
            server_ip=pod.ip, server_port=port, method=method, path=path, run_dir=run_dir
        )
        self.remove_l7_policy()
        run_dir.mkdir(mode=0o755, exist_ok=True)
        (run_dir / "nginx.conf").write_text(config)
        proc = self._start(
            f"{node}/l7-proxy", node, _nginx_argv(run_dir), log_path=self._log("l7-proxy")
        )
        try:
            wait_listening(proc, "0.0.0.0", L7_PROXY_PORT, timeout=_READY_TIMEOUT)
            self._nft(
                node,
                f"redirect {pod.name}:{port} to the L7 proxy on {node}",
                l7_redirect_ruleset(
                    table=policy_table(self.lab_id, "l7"), server_ip=pod.ip, server_port=port
                ),
            )
        except BaseException:
            self._stop([proc])
            raise
        with self._lock:
            self._l7 = (node, proc)

    def remove_l7_policy(self) -> None:
        """Remove the redirect and stop the L7 proxy (no-op without one)."""
        with self._lock:
            current, self._l7 = self._l7, None
        if current is None:
            return
        node, proc = current
        try:
            self._nft(
                node,
                f"remove the L7 redirect on {node}",
                nft_table_removal(policy_table(self.lab_id, "l7")),
            )
        finally:
            self._stop([proc])

    def create_split(self, backends: Mapping[str, tuple[Endpoint, int]], *, port: int) -> str:
        """Place a gateway pod on the server node running a weighted nginx upstream over
        ``backends``, published on the node's underlay address at ``port`` (DNAT).

        Returns
        -------
        str
            ``http://<server node underlay ip>:<port>/``, reachable from the external host.

        Raises
        ------
        ConfigError
            A backend that is not a pod of this lab, a negative or all-zero weight.
        ProvisioningError
            The gateway could not be started (nothing is left behind).
        """
        self._check_alive()
        pods = {name: (self._own_pod(ep), weight) for name, (ep, weight) in backends.items()}
        self.remove_split()
        with self._lock:
            self._capture_seq += 1
            gw_name = f"split-gw{self._capture_seq}"
        gateway = self.place(gw_name, role=NodeRole.SERVER)
        node = self._plan.node_named(gateway.node.name)
        run_dir = self._plan.state_dir / "pods" / gw_name / "split"
        proc: ManagedProcess | None = None
        try:
            config = split_proxy_config(
                listen_ip=gateway.ip,
                port=port,
                backends={name: (f"{p.ip}:{port}", w) for name, (p, w) in pods.items()},
                run_dir=run_dir,
            )
            run_dir.mkdir(mode=0o755, parents=True, exist_ok=True)
            (run_dir / "nginx.conf").write_text(config)
            proc = self._start(
                f"{gw_name}/split-proxy",
                gateway.namespace,
                _nginx_argv(run_dir),
                log_path=self._log(f"{gw_name}-split-proxy"),
            )
            wait_listening(proc, gateway.ip, port, timeout=_READY_TIMEOUT)
            self._nft(
                node.name,
                f"publish the split gateway on {node.name}:{port}",
                split_dnat_ruleset(
                    table=policy_table(self.lab_id, "split"),
                    node_ip=node.underlay_ip,
                    gateway_ip=gateway.ip,
                    port=port,
                ),
            )
        except BaseException:
            if proc is not None:
                self._stop([proc])
            self.remove(gateway)
            raise
        with self._lock:
            self._split = (node.name, gateway, proc)
        return f"http://{node.underlay_ip}:{port}/"

    def remove_split(self) -> None:
        """Remove the split gateway, its DNAT and its pod (no-op without one)."""
        with self._lock:
            current, self._split = self._split, None
        if current is None:
            return
        node, gateway, proc = current
        try:
            self._nft(
                node,
                f"remove the split DNAT on {node}",
                nft_table_removal(policy_table(self.lab_id, "split")),
            )
        finally:
            self._stop([proc])
            self.remove(gateway)

    # -- verification -----------------------------------------------------------------------

    def encryption_status(self) -> EncryptionStatus:
        """WireGuard status of every node from ``wg show <if> dump``.

        Each node first opens a TCP connection to every peer's tunnel address (refused, but
        only after a round trip through the tunnel, like a ping) so that handshakes exist;
        ``peers`` counts configured peers with an endpoint, and ``detail`` has the raw dumps
        and how many handshakes completed.
        """
        if not self._plan.encryption:
            return EncryptionStatus(
                enabled=False,
                kind="",
                interfaces={},
                peers={},
                detail="lab without encryption: node-to-node traffic is plain",
            )
        self._check_alive()
        for node in self._plan.nodes:
            peer_ips = [peer.wg_ip for peer in self._plan.nodes if peer.index != node.index]
            run_in_namespace(node.name, [sys.executable, "-c", _TOUCH_PEERS, *peer_ips], timeout=30)
        peers: dict[str, int] = {}
        interfaces: dict[str, str] = {}
        details: list[str] = []
        for node in self._plan.nodes:
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
                f"# {node.name} {node.wg_interface} ({self._wg_implementation}):"
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

    def capture_underlay(self, marker: bytes, send: Sequence[str], *, source: Endpoint) -> bool:
        """Capture on the underlay bridge while ``send`` runs in ``source``; look for ``marker``.

        Raises
        ------
        cnibench.errors.ToolError
            If the capture cannot start or ``send`` fails (then nothing can be concluded).
        """
        self._check_alive()
        pod = self._own_pod(source)
        if not marker:
            raise ConfigError("capture_underlay needs a non-empty marker")
        with self._lock:
            self._capture_seq += 1
            pcap = self._plan.state_dir / f"capture-{self._capture_seq}.pcap"
        # --immediate-mode: without it frames wait in the capture ring for up to a second and
        # are lost when tcpdump is stopped right after the sender finished.
        argv = [
            "tcpdump",
            "--immediate-mode",
            "-i",
            self._plan.bridge,
            "-n",
            "-U",
            "-Z",
            "root",
            "-w",
            str(pcap),
        ]
        proc = self._start(
            "ul/tcpdump", self._plan.underlay_namespace, argv, log_path=None, capture=True
        )
        try:
            try:
                wait_for_output(proc, "listening on", timeout=_READY_TIMEOUT)
            except ProvisioningError as exc:
                raise ToolError(f"underlay capture did not start: {exc}", tool="tcpdump") from exc
            result = pod.run(send, timeout=60)
            # Let the last frames travel from the kernel ring to tcpdump's file.
            time.sleep(_CAPTURE_SETTLE)
        finally:
            self._stop([proc])
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

    # -- monitoring -------------------------------------------------------------------------

    def prometheus_url(self) -> str:
        """``http://127.0.0.1:<port>`` forwarding to the lab's Prometheus, once it is ready.

        Raises
        ------
        MetricsError
            If Prometheus does not become ready within 45 s.
        """
        self._check_alive()
        with self._lock:
            if self._prometheus_url and self._forward is not None and self._forward.running:
                return self._prometheus_url
            forward = NamespacePortForward(
                NETNS_DIR / self._plan.monitor.name, (MONITOR_IP, PROMETHEUS_PORT)
            )
            port = forward.start()
            self._forward = forward
            url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + _PROMETHEUS_READY_TIMEOUT
        last = ""
        while True:
            prometheus = self._prometheus
            if prometheus is not None and prometheus.popen.poll() is not None:
                raise MetricsError(f"the lab's Prometheus exited: {prometheus.log_tail()}")
            try:
                with urllib.request.urlopen(f"{url}/-/ready", timeout=2) as response:
                    if response.status == 200:
                        break
            except (urllib.error.URLError, OSError) as exc:
                last = str(exc)
            if time.monotonic() > deadline:
                raise MetricsError(
                    f"the lab's Prometheus is not ready after {_PROMETHEUS_READY_TIMEOUT:g} s:"
                    f" {last}"
                )
            time.sleep(0.2)
        with self._lock:
            self._prometheus_url = url
        return url

    def environment(self) -> Environment:
        """Fingerprint of the host and the lab (computed once)."""
        with self._lock:
            if self._environment is None:
                self._environment = environment_fingerprint(
                    backend=self.backend,
                    provider=self.provider,
                    cni=self._spec.cni,
                    cni_version=self.cni_version,
                    nodes={
                        node.name.removeprefix(f"{self.lab_id}-"): {
                            "role": node.role.value,
                            "ip": node.underlay_ip,
                            "cpus": os.cpu_count() or 0,
                            "shared_host": True,
                        }
                        for node in self._plan.nodes
                    },
                    cni_values=self._cni_values(),
                    tool_versions=tool_versions(),
                )
            return self._environment

    def _cni_values(self) -> dict[str, Any]:
        values: dict[str, Any] = {
            "profile": self._plan.profile.value,
            "encryption": self._spec.encryption,
            "pod_mtu": self._plan.pod_mtu,
        }
        if self._plan.profile is LabProfile.VXLAN:
            values.update(
                vxlan_vni=VXLAN_VNI, vxlan_port=VXLAN_PORT, vxlan_mtu=self._plan.vxlan_mtu
            )
        if self._plan.encryption:
            values.update(
                wireguard_implementation=self._wg_implementation, wireguard_mtu=self._plan.wg_mtu
            )
        return values

    # -- teardown ---------------------------------------------------------------------------

    def _check_alive(self) -> None:
        if self._torn_down:
            raise ProvisioningError(f"lab {self.lab_id} has been torn down")

    def teardown(self) -> None:
        """Remove everything the lab created; safe to call twice.

        Stops the port-forward, every process by PID (SIGTERM, bounded wait, SIGKILL), any
        other process left in a lab namespace, deletes the namespaces (and so their links),
        wireguard-go control sockets and the state directory.

        Raises
        ------
        ProvisioningError
            If something could not be removed (everything else is still removed).
        """
        with self._lock, _signals_deferred():
            if self._torn_down:
                return
            self._torn_down = True
            atexit.unregister(self.teardown)
            problems: list[str] = []
            if self._forward is not None:
                self._forward.stop()
                self._forward = None
            stuck = stop_processes(list(self._processes.values()))
            problems += [f"process {name} did not stop" for name in stuck]
            self._processes.clear()
            # The node namespaces take the policy and priority tables with them.
            self._policy = None
            self._priority_node = None
            namespaces = self._lab_namespaces()
            leftovers = [pid for pids in pids_in_namespaces(namespaces).values() for pid in pids]
            if leftovers:
                problems += [f"pid {pid} survived SIGKILL" for pid in stop_pids(leftovers)]
            if namespaces:
                try:
                    run_step(namespace_removal_step(namespaces))
                except ProvisioningError as exc:
                    problems.append(str(exc))
            for interface in self._plan.wg_interfaces:
                with contextlib.suppress(FileNotFoundError):
                    (WG_SOCKET_DIR / f"{interface}.sock").unlink()
            self._pods.clear()
            shutil.rmtree(self._plan.state_dir, ignore_errors=True)
            if self._plan.state_dir.exists():
                problems.append(f"state directory {self._plan.state_dir} remains")
            remaining = self._lab_namespaces()
            if remaining:
                problems.append(f"namespaces remain: {', '.join(remaining)}")
        if problems:
            raise ProvisioningError(f"teardown of lab {self.lab_id}: " + "; ".join(problems))

    def _lab_namespaces(self) -> list[str]:
        prefix = f"{self.lab_id}-"
        try:
            names = sorted(name for name in os.listdir(NETNS_DIR) if name.startswith(prefix))
        except FileNotFoundError:
            return []
        # Pods first, the underlay last: cosmetic, the kernel handles any order.
        return sorted(names, key=lambda n: (n == self._plan.underlay_namespace, n))
