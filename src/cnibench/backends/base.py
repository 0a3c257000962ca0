"""The Protocols scenarios speak to. Every backend (lab, kube) implements them.

A scenario never knows whether its "pods" are network namespaces on this host or Kubernetes
pods on kind or AKS. It asks a :class:`Backend` for a :class:`Cluster` matching a
:class:`ClusterSpec`, places workloads (:class:`WorkloadSpec`) on nodes by role, runs client
commands in an :class:`Endpoint`, switches features on (egress gateway) and asks the cluster to
prove what it claims (:meth:`Cluster.encryption_status`, :meth:`Cluster.capture_underlay`).

:class:`Cluster` is the sum of small capability Protocols, one per feature: :class:`ClusterIdentity`
(what the cluster is, its environment and teardown), :class:`Placement` (nodes, pods, the
external host), :class:`EgressGateway`, :class:`Encryption`, :class:`Policies`,
:class:`TrafficSplit`, :class:`ServiceExposure` and :class:`Monitoring`. A helper that needs
one feature names that Protocol; a backend's cluster offers them all. Facts that differ between
backends (e.g. :attr:`Policies.policy_settle_seconds`, :attr:`Backend.policy_choices`) are the
backend's to state, so a scenario never tests which backend it runs on.

Workloads are described by *intent* (an iperf3 server, an HTTP echo that answers with its own
name), not by command lines: the lab starts a process in a namespace, the Kubernetes backend
renders a pod from a pinned image. Client tools run through :meth:`Endpoint.run` with argv
built by :mod:`cnibench.tools`, which both backends can execute as is; a probe that must run
while the scenario changes something (the effect probe) is started with :meth:`Endpoint.start`
and read as it prints.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

from cnibench.errors import ConfigError
from cnibench.policy import PolicyEngine, PolicyRuleLimit, PolicySpec, PriorityCase, RulesSee
from cnibench.records import Environment

__all__ = [
    "DEFAULT_PORTS",
    "MAX_OTHER_SERVICES",
    "NODE_EXPORTER_PORT",
    "Backend",
    "Capability",
    "Cluster",
    "ClusterIdentity",
    "ClusterSpec",
    "CommandResult",
    "EgressGateway",
    "EgressServerResult",
    "Encryption",
    "EncryptionStatus",
    "Endpoint",
    "ExternalHost",
    "Monitoring",
    "Node",
    "NodePins",
    "NodeRole",
    "Placement",
    "Policies",
    "PolicyChoices",
    "ResourceUsage",
    "RunningServer",
    "Service",
    "ServiceExposure",
    "ServiceProxy",
    "StartedCommand",
    "TrafficSplit",
    "WarmUp",
    "WorkloadKind",
    "WorkloadSpec",
]


class NodeRole(enum.StrEnum):
    """What a node is for in a scenario; kube nodes carry it as a label."""

    CLIENT = "client"
    SERVER = "server"
    EGRESS_GW = "egress-gw"


class Capability(enum.StrEnum):
    """Features a cluster can offer; a scenario needing a missing one is skipped with a reason."""

    EGRESS_GATEWAY = "egress-gateway"
    WIREGUARD = "wireguard"
    NETWORK_POLICY = "network-policy"
    L7_POLICY = "l7-policy"
    TRAFFIC_SPLIT = "traffic-split"
    POLICY_TIERS = "policy-tiers"
    LATENCY_EMULATION = "latency-emulation"
    UNDERLAY_CAPTURE = "underlay-capture"
    EXTERNAL_HOST = "external-host"
    SERVICE_PROXY = "service-proxy"
    """Services (a virtual IP, a NodePort) in front of pods (:meth:`Cluster.expose`)."""
    SERVICE_IPTABLES = "service-iptables"
    """Services programmed by kube-proxy's iptables chains (or the lab's copy of them)."""
    SERVICE_NFTABLES = "service-nftables"
    """Services programmed as an nftables verdict map (kube-proxy's nftables mode, the lab)."""
    SERVICE_EBPF = "service-ebpf"
    """Services programmed by a CNI's eBPF kube-proxy replacement (Cilium's)."""

    @classmethod
    def service_proxy(cls, proxy: str) -> Capability:
        """The capability of Services programmed by ``proxy`` (a :class:`ServiceProxy` value)."""
        return cls(f"service-{proxy}")


class WorkloadKind(enum.StrEnum):
    """Servers a pod can run. Every pod can also run client tools through :meth:`Endpoint.run`."""

    IPERF3_SERVER = "iperf3-server"
    SOCKPERF_SERVER = "sockperf-server"
    HTTP_ECHO = "http-echo"
    """An HTTP server answering every path with 200 and a body naming the pod."""
    LOAD_GENERATOR = "load-generator"
    """locust in a container of its own, idle until a command runs; the pod's commands
    (:meth:`Endpoint.run`) run in it. Only on a backend with :attr:`Backend.load_in_pods`;
    the port is where a locust master listens for its workers."""


@dataclass(frozen=True)
class WorkloadSpec:
    """A server to run in a pod.

    Attributes
    ----------
    kind:
        What to run.
    port:
        TCP port it listens on (sockperf also uses it for UDP).
    """

    kind: WorkloadKind
    port: int


NODE_EXPORTER_PORT = 9100
"""Port of node-exporter on every node. Backends relabel each target so that its Prometheus
``instance`` label is the node's name (:attr:`Node.name`)."""

DEFAULT_PORTS: Mapping[WorkloadKind, int] = {
    WorkloadKind.IPERF3_SERVER: 5201,
    WorkloadKind.SOCKPERF_SERVER: 11111,
    WorkloadKind.HTTP_ECHO: 80,
}


@dataclass(frozen=True)
class ClusterSpec:
    """What cluster a scenario needs. Equal specs may share one cluster.

    Attributes
    ----------
    cni:
        CNI name (kube) or datapath (lab: ``routed`` or ``vxlan``).
    encryption:
        ``""`` for none or ``"wireguard"``.
    roles:
        One node per entry, in order; a role may repeat.
    options:
        Backend/CNI specific options (e.g. cilium ``mode=kpr``), part of the cluster's identity.
    """

    cni: str
    encryption: str = ""
    roles: tuple[NodeRole, ...] = (NodeRole.CLIENT, NodeRole.SERVER, NodeRole.EGRESS_GW)
    options: Mapping[str, str] = field(default_factory=dict)

    @classmethod
    def from_label(cls, label: str, *, encryption: str = "") -> ClusterSpec:
        """The spec a ``--cni`` value names: ``NAME`` or ``NAME:ITEM,ITEM,...`` where an item
        is ``key=value`` (an option, e.g. ``mode=kube-proxy``) or a bare feature name
        (collected, in order, into the ``features`` option), e.g.
        ``cilium:mode=kpr,gateway-api``. The driver of ``NAME`` decides which options and
        features it takes.

        Raises
        ------
        cnibench.errors.ConfigError
            An empty name or item, a key given twice, or both ``features=`` and bare features.
        """
        name, colon, rest = label.partition(":")
        if not name or (colon and not rest):
            raise ConfigError(f"--cni {label!r}: use NAME or NAME:OPTION,... (e.g. cilium:l7)")
        options: dict[str, str] = {}
        features: list[str] = []
        for item in rest.split(",") if rest else ():
            key, equals, value = (part.strip() for part in item.partition("="))
            if not key or (equals and not value):
                raise ConfigError(f"--cni {label!r}: empty option in {rest!r}")
            if not equals:
                features.append(key)
            elif key in options:
                raise ConfigError(f"--cni {label!r}: option {key} given twice")
            else:
                options[key] = value
        if features:
            if "features" in options:
                raise ConfigError(f"--cni {label!r}: give features either bare or as features=")
            options["features"] = ",".join(features)
        return cls(cni=name, encryption=encryption, options=options)

    @property
    def label(self) -> str:
        """The ``--cni`` value naming this spec's CNI and options (the inverse of
        :meth:`from_label`, options sorted): results record it as the run's CNI, so two
        configurations of one CNI stay apart."""
        items = [f"{k}={v}" for k, v in sorted(self.options.items()) if k != "features"]
        features = self.options.get("features")
        if features:
            items = [f for f in features.split(",") if f] + items
        return f"{self.cni}:{','.join(items)}" if items else self.cni

    @property
    def slug(self) -> str:
        """:attr:`label` as a file-name part (``:`` and ``,`` become ``_``)."""
        return self.label.replace(":", "_").replace(",", "_").replace("=", "-")

    @property
    def key(self) -> str:
        """Readable identity used to cache clusters and in test ids, e.g. ``vxlan+wireguard``."""
        parts = [self.cni]
        if self.encryption:
            parts.append(self.encryption)
        parts.extend(f"{k}={v}" for k, v in sorted(self.options.items()))
        return "+".join(parts)


@dataclass(frozen=True)
class Node:
    """A node of a cluster.

    Attributes
    ----------
    name:
        Backend name of the node (namespace or Kubernetes node name).
    role:
        The node's role.
    ip:
        The node's address on the underlay (what an external host sees without a gateway).
    """

    name: str
    role: NodeRole
    ip: str


@dataclass(frozen=True)
class NodePins:
    """Nodes a user named for roles (``--nodes client=NAME,server=NAME,egress-gw=NAME``).

    A Kubernetes backend places each pinned role's pods on that node; a role not named is
    chosen by the backend. Whether a named node exists is the backend's to check.

    Attributes
    ----------
    nodes:
        Role to node name; empty when nothing is pinned.
    """

    nodes: Mapping[NodeRole, str] = field(default_factory=dict)

    @classmethod
    def parse(cls, text: str | None) -> NodePins:
        """``ROLE=NAME,...`` (e.g. ``client=w1,server=w2``) as pins; ``None`` or ``""``:
        none.

        Raises
        ------
        cnibench.errors.ConfigError
            One line: an item that is not ``ROLE=NAME``, an unknown role, or a role twice.
        """
        pins: dict[NodeRole, str] = {}
        if not text:
            return cls()
        roles = ", ".join(r.value for r in NodeRole)
        for item in text.split(","):
            role_text, equals, name = (part.strip() for part in item.partition("="))
            if not equals or not role_text or not name:
                raise ConfigError(
                    f"--nodes {text!r}: {item.strip()!r} is not ROLE=NODE (e.g. client=worker-1)"
                )
            try:
                role = NodeRole(role_text)
            except ValueError:
                raise ConfigError(
                    f"--nodes {text!r}: unknown role {role_text!r} (roles: {roles})"
                ) from None
            if role in pins:
                raise ConfigError(f"--nodes {text!r}: role {role.value} given twice")
            pins[role] = name
        return cls(pins)

    def __bool__(self) -> bool:
        return bool(self.nodes)

    @property
    def text(self) -> str:
        """The ``--nodes`` value naming these pins (roles in :class:`NodeRole` order)."""
        return ",".join(f"{r.value}={self.nodes[r]}" for r in NodeRole if r in self.nodes)


@dataclass(frozen=True)
class CommandResult:
    """Outcome of a command run in an endpoint.

    Attributes
    ----------
    argv:
        The command as run (without any backend wrapper such as ``ip netns exec``).
    returncode:
        Exit status.
    stdout, stderr:
        Decoded output.
    duration:
        Wall time in seconds.
    """

    argv: tuple[str, ...]
    returncode: int
    stdout: str
    stderr: str
    duration: float


@dataclass(frozen=True)
class EncryptionStatus:
    """What the datapath reports about its encryption.

    Attributes
    ----------
    enabled:
        Whether node-to-node traffic is encrypted.
    kind:
        ``"wireguard"`` or ``""``.
    interfaces:
        Node name to tunnel interface name.
    peers:
        Node name to the number of peers with a completed handshake or configured endpoint.
    detail:
        The raw status text the check was based on (``wg show``, ``cilium-dbg status``).
    """

    enabled: bool
    kind: str
    interfaces: Mapping[str, str]
    peers: Mapping[str, int]
    detail: str = ""


@dataclass(frozen=True)
class EgressServerResult:
    """What the external iperf3 server saw of one client test.

    Attributes
    ----------
    remote_host:
        Source address of the client as seen by the server (NAT applied).
    received_bits_per_second:
        Receiver-side throughput in bits/s.
    raw:
        The server's JSON report.
    """

    remote_host: str
    received_bits_per_second: float
    raw: str


class ServiceProxy(enum.StrEnum):
    """The engine that programs Services into a node: the lab offers ``iptables`` and
    ``nftables`` (``--proxy`` chooses); on Kubernetes the cluster has one, which kube-proxy's
    mode or a CNI's kube-proxy replacement (``ebpf``) decides, and conditions asking for
    another are skipped with the one it has."""

    IPTABLES = "iptables"
    NFTABLES = "nftables"
    EBPF = "ebpf"


@dataclass(frozen=True)
class PolicyChoices:
    """What a policy condition may choose on a backend (:attr:`Backend.policy_choices`): a
    parameter belongs in a condition only where the backend enforces what it names, so that no
    measurement is labelled with a choice that did not run.

    Attributes
    ----------
    engines:
        The engines :meth:`Policies.apply_policy` enforces a policy with, as asked (the lab:
        ``iptables``, ``nftables``, ``nftables-set``); ``()`` where each CNI enforces it with its
        own datapath whatever it is asked (every Kubernetes CNI: kube-router's iptables and
        ipset, Cilium's eBPF policy maps, ...).
    rules_see:
        Which packets the policy's rules can be made to evaluate (:class:`RulesSee`); ``()``
        where the CNI decides that itself (a NetworkPolicy has no such field).
    """

    engines: tuple[PolicyEngine, ...] = ()
    rules_see: tuple[RulesSee, ...] = ()


MAX_OTHER_SERVICES = 16000
"""Most further Services :meth:`Cluster.expose` loads beside the one under test."""


@dataclass(frozen=True)
class Service:
    """A Service in front of one server pod (:meth:`Cluster.expose`).

    Attributes
    ----------
    cluster_ip:
        The virtual IP clients connect to (``target=service``).
    node_ip:
        Address of the server's node, where the NodePorts listen (``target=nodeport``).
    ports:
        The pod's port to the Service's port on ``cluster_ip`` (TCP and UDP alike).
    node_ports:
        The pod's port to its NodePort on ``node_ip``.
    """

    cluster_ip: str
    node_ip: str
    ports: Mapping[int, int]
    node_ports: Mapping[int, int]


@dataclass(frozen=True)
class ResourceUsage:
    """What one machine of a cluster has used so far (:meth:`Cluster.resource_usage`).

    Attributes
    ----------
    cpu_seconds:
        CPU time of its processes, its pods' and its receive threads since it was created
        (cumulative; a run's share is the difference of two readings), or ``None`` where the
        work its packets cause is not counted as its own (the lab with ``napi=inline``).
    memory_bytes:
        Memory charged to it now, or ``None`` if not measurable.
    memory_peak_bytes:
        Highest memory charged since the last reading that reset the peak, or ``None``.
    """

    cpu_seconds: float | None
    memory_bytes: int | None = None
    memory_peak_bytes: int | None = None


@dataclass(frozen=True)
class WarmUp:
    """What the runner does on a cluster before its first measured run
    (:attr:`Monitoring.warm_up`): a cluster just made is still busy starting (its CNI's
    agents, its control plane), and its first runs read low (kind, 2026-12-05: the first three
    iperf3 runs 9.09-9.20 Gbit/s, the next two 10.07-10.87).

    Attributes
    ----------
    settle_seconds:
        The longest wait (s) for the cluster's CPU to settle: every machine and agent whose
        CPU :meth:`Monitoring.resource_usage` separates below a fifth of a core for 5 s
        (:func:`cnibench.scenarios.warmup.settle`); 0: no wait.
    runs:
        Then this many runs of the first condition, recorded with status ``warmup``, shown
        as warm-up and never counted in a statistic, the verdict or the gate; 0: none.
    reason:
        Why, in a few words, for the records (``"a cluster made for this session"``).
    """

    settle_seconds: float = 0.0
    runs: int = 0
    reason: str = ""

    @property
    def needed(self) -> bool:
        """Whether there is anything to do (a wait or a run)."""
        return self.settle_seconds > 0 or self.runs > 0


@runtime_checkable
class Endpoint(Protocol):
    """A pod: a place where client commands run and servers listen."""

    @property
    def name(self) -> str:
        """Unique name within the cluster."""

    @property
    def node(self) -> Node:
        """The node this endpoint actually runs on (verified, not assumed)."""

    @property
    def ip(self) -> str:
        """The pod's address."""

    def run(self, argv: Sequence[str], *, timeout: float) -> CommandResult:
        """Run ``argv`` in the pod and wait at most ``timeout`` seconds.

        Raises
        ------
        cnibench.errors.ToolError
            When the command does not finish in time (it is then killed).
        """

    def start(self, argv: Sequence[str]) -> StartedCommand:
        """Start ``argv`` in the pod (one exec) and return at once; its output is read as it
        comes. The command must bound its own run time; the caller stops it when done with
        it (:meth:`StartedCommand.stop`), also when interrupted.

        Raises
        ------
        cnibench.errors.ToolError
            When the command cannot be started.
        """


class StartedCommand(Protocol):
    """A command running in an endpoint, started by :meth:`Endpoint.start`."""

    def first_line(self, *, timeout: float) -> str:
        """The first line the command printed on stdout (without its newline), waiting up
        to ``timeout`` seconds for it.

        Raises
        ------
        cnibench.errors.ToolError
            When the command ended, or the time passed, without a line.
        """

    def wait(self, *, timeout: float) -> CommandResult:
        """Wait up to ``timeout`` seconds for the command to end; its whole output.

        Raises
        ------
        cnibench.errors.ToolError
            When it does not end in time (it is then stopped).
        """

    def stop(self) -> None:
        """End the command now, by its PID, if it still runs (safe to call again)."""


class ExternalHost(Protocol):
    """A host outside the cluster: the egress target and the split load origin."""

    @property
    def ip(self) -> str:
        """Address of the external host as clients see it."""

    def run(self, argv: Sequence[str], *, timeout: float) -> CommandResult:
        """Run a command on the external host (see :meth:`Endpoint.run`)."""

    def iperf3_server_once(self, *, port: int, timeout: float) -> EgressServerFuture:
        """Start an iperf3 server for one test; the future resolves when the test ends."""

    def start_source_echo(self, *, port: int, seconds: float) -> RunningServer:
        """Serve :mod:`cnibench.tools.source_echo` (each request answered with the address it
        came from) on ``ip:port`` for ``seconds`` at most; returns once it listens.

        Raises
        ------
        cnibench.errors.ToolError
            It did not start.
        """


class RunningServer(Protocol):
    """A server started on the external host, until it is stopped or its time is up."""

    def stop(self) -> None:
        """Stop it now (safe to call again)."""


class EgressServerFuture(Protocol):
    """The pending result of :meth:`ExternalHost.iperf3_server_once`."""

    def result(self) -> EgressServerResult:
        """Wait for the test to finish and return what the server saw."""

    def cancel(self) -> None:
        """Stop the server without waiting for its test (the client failed), so its port is
        free for the next attempt at once. Safe to call more than once."""


class ClusterIdentity(Protocol):
    """What a cluster is (backend, provider, spec, CNI and what it offers), its fingerprint and
    its end: the part of a :class:`Cluster` every scenario and the runner use."""

    @property
    def backend(self) -> str:
        """``"lab"`` or ``"kube"``."""

    @property
    def provider(self) -> str:
        """``"lab"``, ``"kind"``, ``"aks"`` or ``"existing"``."""

    @property
    def spec(self) -> ClusterSpec:
        """The spec this cluster was provisioned for."""

    @property
    def cni_version(self) -> str:
        """Version of the CNI (the kernel release for the lab)."""

    @property
    def capabilities(self) -> frozenset[Capability]:
        """Features this cluster offers."""

    def capability_hint(self, capability: Capability) -> str:
        """How one would get ``capability`` on this cluster, or ``""``: appended to the reason
        a condition needing it is skipped."""

    def environment(self) -> Environment:
        """Fingerprint of the cluster and host (no secrets)."""

    @property
    def notes(self) -> Sequence[str]:
        """What a reader of the run must be told about this cluster, one line each (on an
        existing cluster: the CNI found running, which node holds which role and whether
        roles share a node); empty when there is nothing to say."""

    def listen(self, listener: Callable[[str], None]) -> None:
        """Have ``listener`` told, one line each, what a reader must know before it happens
        while the cluster is used: on a cluster cnibench did not create, each cluster-wide
        object right before it is created there (the pool calls it once per cluster)."""

    def teardown(self) -> None:
        """Remove everything this cluster created. Safe to call twice."""


class Placement(Protocol):
    """Nodes by role, pods placed on them, and the host outside the cluster."""

    @property
    def nodes(self) -> Sequence[Node]:
        """All nodes, in the order of ``spec.roles``."""

    def node(self, role: NodeRole) -> Node:
        """The first node with ``role``."""

    def place(
        self, name: str, *, role: NodeRole, workloads: Sequence[WorkloadSpec] = ()
    ) -> Endpoint:
        """Create a pod named ``name`` on the node with ``role`` running ``workloads``.

        Returns once every workload accepts connections.
        """

    def remove(self, endpoint: Endpoint) -> None:
        """Delete a pod created by :meth:`place`."""

    @property
    def external(self) -> ExternalHost:
        """The external host."""


class EgressGateway(Protocol):
    """An egress gateway (needs :attr:`Capability.EGRESS_GATEWAY`)."""

    def enable_egress_gateway(self, clients: Sequence[Endpoint], *, destination: str) -> str:
        """Send ``clients``' traffic to ``destination`` (a CIDR) out through the egress-gw node.

        Returns the address external hosts will see as source.
        """

    def disable_egress_gateway(self) -> None:
        """Undo :meth:`enable_egress_gateway` (each node masquerades its own pods again)."""


class Encryption(Protocol):
    """The datapath's account of its encryption, and the proof on the wire."""

    def encryption_status(self) -> EncryptionStatus:
        """The datapath's own account of its encryption."""

    def capture_underlay(self, marker: bytes, send: Sequence[str], *, source: Endpoint) -> bool:
        """Run ``send`` in ``source`` while capturing node-to-node traffic.

        Returns whether ``marker`` appeared in any captured packet (needs
        :attr:`Capability.UNDERLAY_CAPTURE`).
        """


class Policies(Protocol):
    """Network policy, priority cases and L7 policy (needs
    :attr:`Capability.NETWORK_POLICY`, :attr:`Capability.POLICY_TIERS`,
    :attr:`Capability.L7_POLICY`), and how long the backend takes to enforce them."""

    @property
    def policy_settle_seconds(self) -> float:
        """Longest a policy may take, after :meth:`apply_policy` returned, to be enforced:
        until then a probe that sees the old verdict is repeated (0: enforced on return, as
        in the lab's synchronous nftables load; a Kubernetes CNI programs what the API server
        stored some time later)."""

    @property
    def priority_settle_seconds(self) -> float:
        """Seconds to wait after :meth:`apply_priority_case` or :meth:`remove_priority_case`
        before probing (0: in force on return)."""

    @property
    def policy_rule_limit(self) -> PolicyRuleLimit | None:
        """The most rules one policy may carry as this cluster's CNI is configured (e.g.
        Cilium's per-endpoint policy map, ``bpf-policy-map-max``), or ``None`` where nothing
        short of :data:`~cnibench.policy.MAX_EXTRA_RULES` bounds it or the bound cannot be
        read. A condition whose policy carries more rules (:meth:`Scenario.policy_rules
        <cnibench.scenarios.base.Scenario.policy_rules>`) is skipped before it is set up,
        with :attr:`PolicyRuleLimit.reason`: cnibench does not change the CNI's settings to
        make room."""

    def apply_policy(self, spec: PolicySpec, *, engine: PolicyEngine | None = None) -> None:
        """Enforce ``spec`` (ingress of ``spec.target``) with ``engine``; replaces any earlier
        policy. Needs :attr:`Capability.NETWORK_POLICY`.

        The lab enforces it in the target node's forward path with the named engine (one of
        its :attr:`PolicyChoices.engines`; it needs one). A Kubernetes backend renders a
        NetworkPolicy from the same spec and its CNI enforces it with its own datapath: it
        offers no engine, and a scenario passes ``None`` there
        (:attr:`Backend.policy_choices`).

        Raises
        ------
        cnibench.errors.UnsupportedError
            If this cluster cannot enforce policies with ``engine``.
        """

    def remove_policy(self) -> None:
        """Undo :meth:`apply_policy` (everything may reach everything again). Safe to repeat."""

    def apply_priority_case(self, case: PriorityCase, spec: PolicySpec) -> None:
        """Apply every policy of ``case`` at once; replaces an earlier case.

        Each CNI layer of ``case`` applies its action to ``spec.allowed`` reaching
        ``spec.target`` on ``spec.ports`` (``spec.extra_rules`` is ignored); with
        ``case.kubernetes_deny`` a Kubernetes deny-all of ``spec.target`` is applied too. The
        backend's own precedence then decides, and what a probe sees afterwards is the result:
        the lab renders the case as nftables chains in the reference order
        (:func:`cnibench.policy.reference_outcome`) so that the kernel decides; a Kubernetes
        backend applies the CNI's own policy objects. Needs :attr:`Capability.NETWORK_POLICY`,
        plus :attr:`Capability.POLICY_TIERS` when ``case.needs_tiers``.

        Raises
        ------
        cnibench.errors.UnsupportedError
            If the cluster cannot express ``case`` (e.g. a CNI without a policy API of its own,
            or without tiers for a tiered case).
        """

    def remove_priority_case(self) -> None:
        """Undo :meth:`apply_priority_case` (no policy of the case remains). Safe to repeat."""

    def apply_l7_policy(self, server: Endpoint, *, port: int, method: str, path: str) -> None:
        """Let only ``method`` requests for exactly ``path`` reach ``server:port``; anything
        else is answered 403 by a proxy in the path (lab: nginx on the server's node with an
        nftables redirect; Kubernetes: a CiliumNetworkPolicy ``http`` rule). Needs
        :attr:`Capability.L7_POLICY`."""

    def remove_l7_policy(self) -> None:
        """Undo :meth:`apply_l7_policy`. Safe to repeat."""


class TrafficSplit(Protocol):
    """A weighted HTTP split (needs :attr:`Capability.TRAFFIC_SPLIT`)."""

    def create_split(self, backends: Mapping[str, tuple[Endpoint, int]], *, port: int) -> str:
        """Put a weighted HTTP gateway in front of ``backends`` (name to ``(pod, weight)``,
        weight 0 = the backend gets nothing), each serving HTTP on ``port``.

        Returns the URL the external host loads (lab: a gateway pod published on its node's
        underlay address; Kubernetes: a Gateway API HTTPRoute with ``backendRefs`` weights
        behind the Gateway's address). Responses keep each backend's ``X-Backend`` header.
        Needs :attr:`Capability.TRAFFIC_SPLIT`.
        """

    def remove_split(self) -> None:
        """Undo :meth:`create_split`. Safe to repeat."""


class ServiceExposure(Protocol):
    """Services in front of a pod (needs :attr:`Capability.SERVICE_PROXY`)."""

    def expose(self, server: Endpoint, ports: Sequence[int], *, proxy: str, others: int) -> Service:
        """Put a Service (a virtual IP and NodePorts, TCP and UDP on each of ``ports``) in front
        of ``server``, with ``others`` further Services in the same tables, programmed by the
        ``proxy`` engine (lab: ``iptables``, kube-proxy's chain layout, or ``nftables``, a
        verdict map; Kubernetes: the one the cluster runs). Replaces a previous one. Needs
        :attr:`Capability.SERVICE_PROXY` and ``Capability.service_proxy(proxy)``."""

    def remove_service(self) -> None:
        """Undo :meth:`expose` and :meth:`add_service`. Safe to repeat."""

    def free_service_address(self) -> str:
        """A virtual IP no Service holds, for :meth:`add_service`: known before the Service
        exists, so a probe can connect to it from before the change until it answers."""

    def add_service(self, server: Endpoint, port: int, *, address: str) -> None:
        """One more Service, TCP ``port`` on virtual IP ``address``, in front of ``server``,
        beside :meth:`expose`'s (which must exist) and in the same proxy's tables; returns
        once the change is acknowledged (the API server stored it, its endpoint and the proxy's
        rules still to come; on the lab, the tables loaded). Removed with
        :meth:`remove_service`."""


class Monitoring(Protocol):
    """The cluster's Prometheus and each machine's own resource usage."""

    def prometheus_url(self) -> str:
        """Base URL of the cluster's Prometheus, reachable from this process."""

    @property
    def metrics_device_regex(self) -> str:
        """RE2 regex of the node interfaces whose received bytes count as node traffic."""

    def resource_usage(self, *, reset_peak: bool = False) -> Mapping[str, ResourceUsage]:
        """Each machine's own CPU time and memory so far, by the name metrics give it: a
        node's role (``client``, ``server``, ``egress-gw``; nodes sharing a role are summed),
        ``external`` and ``monitoring``. Empty when the backend cannot separate machines (their
        CPU is then only known host-wide, from Prometheus). ``reset_peak`` restarts the memory
        peaks after reading them."""

    @property
    def warm_up(self) -> WarmUp:
        """What the runner does before the first measured run on this cluster (:class:`WarmUp`):
        on a cluster made for the session a bounded wait for its CPU to settle and one
        warm-up run; nothing where the backend measured no first-run effect."""


class Cluster(
    ClusterIdentity,
    Placement,
    EgressGateway,
    Encryption,
    Policies,
    TrafficSplit,
    ServiceExposure,
    Monitoring,
    Protocol,
):
    """A provisioned cluster (lab or Kubernetes) with its nodes and features: every capability
    Protocol at once. A scenario helper that needs one feature takes the small Protocol
    (e.g. :class:`Placement`); a backend's cluster implements them all."""


class Backend(Protocol):
    """A way of getting clusters: ``lab`` or ``kube`` (kind, aks, existing)."""

    @property
    def name(self) -> str:
        """Backend name."""

    def available(self) -> tuple[bool, str]:
        """Whether clusters can be provisioned here, and why not."""

    @property
    def policy_choices(self) -> PolicyChoices:
        """What a policy condition may choose on this backend's clusters: the lab offers its
        engines and which packets the rules see; a Kubernetes CNI chooses both itself."""

    @property
    def load_in_pods(self) -> bool:
        """Whether the split scenario's locust load runs as locust's own master/worker
        distribution in client pods (:data:`WorkloadKind.LOAD_GENERATOR`, ``--load-workers``)
        instead of from this host: true where pods can be placed as many as the load needs
        (Kubernetes); the lab keeps locust on this host."""

    @property
    def clusters_coexist(self) -> bool:
        """Whether the session's clusters stand side by side at little cost, so that the
        conditions of a scenario on several CNIs can take turns in the same rounds
        (:func:`cnibench.session.run_design`): the lab's namespaces do; a Kubernetes cluster
        per CNI costs minutes and a share of the machine, so each CNI keeps its own rounds."""

    def validate(self, specs: Sequence[ClusterSpec]) -> tuple[ClusterSpec, ...]:
        """``specs`` (the session's ``--cni`` values, parsed once) checked against what this
        backend runs, each name's options and features by its own rules; this backend's
        default CNIs when ``specs`` is empty. The specs are returned as given, not parsed
        again.

        Raises
        ------
        cnibench.errors.ConfigError
            One line naming the value and what to choose instead.
        """

    def preflight(self, specs: Sequence[ClusterSpec]) -> None:
        """Refuse, before anything is started, what cannot work here at all for ``specs``
        (e.g. kind with no container engine answering, or its offline images not built).

        Raises
        ------
        cnibench.errors.ConfigError
            One line naming what is missing and what to do.
        """

    def unsupported(self, spec: ClusterSpec) -> str:
        """Why this backend makes no cluster of ``spec`` at all, in one line naming the
        setting (e.g. ``napi=threaded: --cluster existing never changes the cluster's CNI or
        kube-proxy settings``), or ``""`` when it makes one. The session asks it for each
        planned condition's cluster (:meth:`Scenario.cluster_spec`) before any cluster is
        made, and skips a condition with a reason up front. Pure: asks no cluster."""

    def provision(self, spec: ClusterSpec) -> Cluster:
        """Create (or reuse) a cluster for ``spec``.

        Raises
        ------
        cnibench.errors.ProvisioningError
            With the failing step; anything half-created is removed first.
        """
