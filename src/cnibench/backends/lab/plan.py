"""Pure planning of a lab: names, addresses, routes, rulesets and the commands that build them.

Nothing here touches the system. :func:`plan_lab` turns a
:class:`~cnibench.backends.base.ClusterSpec` and a lab id into a :class:`LabPlan`; the ``*_steps``
functions turn a plan into :class:`Step` values (an argv list and optional stdin) that
:mod:`cnibench.backends.lab.runner` executes. Keeping this layer pure lets the address plan, the
routing per datapath and the nftables rulesets be tested without root.

Address plan (all inside the benchmarking range 198.18.0.0/15)
--------------------------------------------------------------

=====================  ==============================  ==========================
what                   address                         where
=====================  ==============================  ==========================
node *i* (1-based)     ``198.18.0.<10+i>/24``          ``eth0`` of the node
external host          ``198.18.0.200/24``             ``eth0`` of ``<lab>-ext``
Prometheus             ``198.18.0.250/24``             ``eth0`` of ``<lab>-mon``
WireGuard of node *i*  ``198.18.64.<i>/24``            ``<lab>-wg<i>``
VXLAN of node *i*      ``198.18.128.<i>/24``           ``vxlan42``
pods of node *i*       ``198.19.<i>.2`` .. ``.254``    ``eth0`` of the pod
=====================  ==============================  ==========================

Pods are attached point-to-point (like kindnet's ``ptp`` plugin or Calico): the pod has a /32
and a default route via ``198.19.<i>.1``, which every pod-facing veth of the node carries.
"""

from __future__ import annotations

import enum
import ipaddress
import re
import secrets
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from cnibench.backends.base import ClusterSpec, NodeRole, WorkloadKind, WorkloadSpec
from cnibench.errors import ConfigError
from cnibench.tools.iperf3 import iperf3_server_argv
from cnibench.tools.sockperf import sockperf_server_argv

__all__ = [
    "BENCHMARK_RANGE",
    "EGRESS_TABLE",
    "EXTERNAL_IP",
    "LAB_ID_RE",
    "LAB_NAMESPACE_RE",
    "MONITOR_IP",
    "NAPI_MODES",
    "NODE_EXPORTER_PORT",
    "NODE_UPLINK",
    "POD_SUPERNET",
    "PROMETHEUS_PORT",
    "UNDERLAY_DEVICE_REGEX",
    "VXLAN_INTERFACE",
    "VXLAN_PORT",
    "VXLAN_VNI",
    "WIREGUARD_PORT",
    "EgressPlan",
    "HostPlan",
    "LabDatapath",
    "LabPlan",
    "NodePlan",
    "PodPlan",
    "Route",
    "Step",
    "WorkloadProcess",
    "egress_removal_steps",
    "egress_steps",
    "lab_state_dir",
    "namespace_removal_step",
    "namespace_steps",
    "napi_option",
    "napi_steps",
    "new_lab_id",
    "nginx_echo_config",
    "node_nat_ruleset",
    "node_routes",
    "plan_egress",
    "plan_lab",
    "plan_pod",
    "pod_removal_steps",
    "pod_steps",
    "prometheus_yaml",
    "route_steps",
    "sysctl_steps",
    "underlay_steps",
    "validate_lab_id",
    "vxlan_steps",
    "wg_allowed_ips",
    "wg_set_argv",
    "wireguard_address_steps",
    "workload_processes",
]

BENCHMARK_RANGE = ipaddress.ip_network("198.18.0.0/15")
"""RFC 2544 benchmarking range: the only addresses a lab uses."""
UNDERLAY = ipaddress.ip_network("198.18.0.0/24")
POD_SUPERNET = "198.19.0.0/16"
"""Every pod address of every node lies in this network."""
EXTERNAL_IP = "198.18.0.200"
MONITOR_IP = "198.18.0.250"
NODE_UPLINK = "eth0"
"""Name of every node's underlay interface (as on a kind node), also used inside pods."""
UNDERLAY_DEVICE_REGEX = "^eth0$"
"""Device regex selecting a lab node's underlay interface in node-exporter metrics."""
VXLAN_INTERFACE = "vxlan42"
VXLAN_VNI = 42
VXLAN_PORT = 4789
WIREGUARD_PORT = 51820
NODE_EXPORTER_PORT = 9100
PROMETHEUS_PORT = 9090
EGRESS_TABLE = 200
"""Routing table holding the egress gateway's default route on client nodes."""
EGRESS_RULE_PRIORITY = 100
MAX_NODES = 100
"""Upper bound on nodes: node addresses ``198.18.0.<10+i>`` must stay below the external host."""
IFNAME_MAX = 15
"""Linux limit on interface name length (IFNAMSIZ - 1)."""

_UNDERLAY_MTU = 1500
_VXLAN_OVERHEAD = 50
_WIREGUARD_OVERHEAD = 80

LAB_ID_RE = re.compile(r"^cb[0-9a-f]{6}$")
"""A lab id: ``cb`` and six lowercase hex digits."""
LAB_NAMESPACE_RE = re.compile(r"^(cb[0-9a-f]{6})-")
"""Network namespaces (and wg interfaces) belonging to some lab; group 1 is the lab id."""


class LabDatapath(enum.StrEnum):
    """Datapath of a lab (the lab's "CNI"): the one list of the lab's datapath names
    (``session.LAB_DATAPATHS``, the ``--cni`` choices, is made from it)."""

    ROUTED = "routed"
    """Per-node routes to other nodes' pod subnets over the underlay, like kindnet."""
    VXLAN = "vxlan"
    """Pod subnets routed through a VXLAN overlay, like flannel."""


@dataclass(frozen=True)
class Step:
    """One command of a provisioning procedure.

    Attributes
    ----------
    description:
        What the step does, used in error messages (``"create the underlay bridge"``).
    argv:
        The command; never a shell string.
    stdin:
        Text fed to the command (``ip -batch -``, ``nft -f -``), or ``None``.
    """

    description: str
    argv: tuple[str, ...]
    stdin: str | None = None


@dataclass(frozen=True)
class Route:
    """A route in a node namespace.

    Attributes
    ----------
    destination:
        CIDR or ``default``.
    device:
        Outgoing interface.
    via:
        Next hop, empty for a device route.
    onlink:
        Whether the next hop is declared reachable on ``device`` without a connected route.
    table:
        Routing table number; ``None`` for the main table.
    """

    destination: str
    device: str
    via: str = ""
    onlink: bool = False
    table: int | None = None

    def batch_line(self, verb: str = "replace") -> str:
        """The route as an ``ip -batch`` line, e.g. ``route replace 198.19.2.0/24 via ...``."""
        words = ["route", verb, self.destination]
        if self.via:
            words += ["via", self.via]
        words += ["dev", self.device]
        if self.onlink:
            words.append("onlink")
        if self.table is not None:
            words += ["table", str(self.table)]
        return " ".join(words)


@dataclass(frozen=True)
class NodePlan:
    """A node of the lab.

    Attributes
    ----------
    index:
        1-based position in ``ClusterSpec.roles``; it numbers every address of the node.
    name:
        Network namespace name, ``<lab>-n<index>`` (also the node's name in the cluster).
    role:
        The node's role.
    underlay_ip:
        Address on the underlay bridge.
    bridge_port:
        Name of the node's veth end on the underlay bridge (in the underlay namespace).
    pod_cidr:
        The node's pod subnet.
    pod_gateway:
        Address the node's pod-facing veths carry; the pods' default gateway.
    overlay_ip:
        VXLAN address (``vxlan`` datapath), else empty.
    wg_ip:
        WireGuard address (encryption on), else empty.
    wg_interface:
        WireGuard interface name, lab-unique because wireguard-go's control socket path is
        shared by all namespaces; empty without encryption.
    """

    index: int
    name: str
    role: NodeRole
    underlay_ip: str
    bridge_port: str
    pod_cidr: str
    pod_gateway: str
    overlay_ip: str = ""
    wg_ip: str = ""
    wg_interface: str = ""


@dataclass(frozen=True)
class HostPlan:
    """A non-node namespace on the underlay (external host, monitoring).

    Attributes
    ----------
    name:
        Network namespace name.
    ip:
        Underlay address.
    bridge_port:
        Its veth end on the underlay bridge.
    """

    name: str
    ip: str
    bridge_port: str


@dataclass(frozen=True)
class LabPlan:
    """Everything about a lab that follows from its spec and id.

    Attributes
    ----------
    lab_id:
        ``cb`` + six hex digits; prefix of every namespace.
    datapath:
        The datapath, the lab's "CNI" (``routed`` or ``vxlan``).
    encryption:
        Whether node-to-node traffic goes through WireGuard.
    state_dir:
        Directory for keys, configs, logs and ``lab.json``.
    underlay_namespace:
        Namespace holding the underlay bridge.
    bridge:
        Name of the underlay bridge.
    nodes:
        The nodes, in the order of ``ClusterSpec.roles``.
    external:
        The external host.
    monitor:
        The monitoring host running Prometheus.
    pod_mtu:
        MTU of pod interfaces: the underlay MTU minus every tunnel header on the path, so that
        pods never send packets the overlay must fragment (bytes).
    napi_threaded:
        Whether every machine receives on its underlay interface in threaded NAPI pollers of
        its own (option ``napi=threaded``) rather than in the sender's softirq.
    """

    lab_id: str
    datapath: LabDatapath
    encryption: bool
    state_dir: Path
    underlay_namespace: str
    bridge: str
    nodes: tuple[NodePlan, ...]
    external: HostPlan
    monitor: HostPlan
    pod_mtu: int
    napi_threaded: bool = False

    @property
    def machines(self) -> dict[str, str]:
        """Every namespace that stands for a machine, by its cgroup member name: ``n<i>``
        for node *i* (its pods belong to it), ``ext`` and ``mon``."""
        prefix = f"{self.lab_id}-"
        names = [*(node.name for node in self.nodes), self.external.name, self.monitor.name]
        return {name.removeprefix(prefix): name for name in names}

    @property
    def namespaces(self) -> tuple[str, ...]:
        """The lab's fixed namespaces (pods come and go), underlay first."""
        return (
            self.underlay_namespace,
            *(node.name for node in self.nodes),
            self.external.name,
            self.monitor.name,
        )

    @property
    def wg_interfaces(self) -> tuple[str, ...]:
        """WireGuard interface names of the lab (empty without encryption)."""
        return tuple(node.wg_interface for node in self.nodes if node.wg_interface)

    @property
    def wg_mtu(self) -> int:
        """MTU of the WireGuard interfaces (bytes)."""
        return _UNDERLAY_MTU - _WIREGUARD_OVERHEAD

    @property
    def vxlan_mtu(self) -> int:
        """MTU of the VXLAN interfaces, below the WireGuard MTU when VXLAN runs over it (bytes)."""
        lower = self.wg_mtu if self.encryption else _UNDERLAY_MTU
        return lower - _VXLAN_OVERHEAD

    def node_named(self, name: str) -> NodePlan:
        """The node whose namespace is ``name``.

        Raises
        ------
        ConfigError
            If no node has that name.
        """
        for node in self.nodes:
            if node.name == name:
                return node
        raise ConfigError(f"lab {self.lab_id} has no node named {name!r}")


@dataclass(frozen=True)
class PodPlan:
    """A pod: a namespace attached to its node by a veth pair.

    Attributes
    ----------
    name:
        The pod's name in the cluster.
    namespace:
        Network namespace, ``<lab>-n<node>p<seq>``.
    node:
        The node it is attached to.
    ip:
        Pod address (a /32 on the pod's ``eth0``).
    host_veth:
        Name of the veth end in the node namespace.
    mtu:
        MTU of both veth ends (bytes).
    """

    name: str
    namespace: str
    node: NodePlan
    ip: str
    host_veth: str
    mtu: int


@dataclass(frozen=True)
class EgressPlan:
    """An egress gateway: which pods leave through which node towards which destination.

    Attributes
    ----------
    gateway:
        The node that masquerades the selected traffic with its underlay address.
    destination:
        CIDR of the external destination.
    clients:
        ``(node name, pod ip)`` of every selected pod not already on the gateway node.
    """

    gateway: NodePlan
    destination: str
    clients: tuple[tuple[str, str], ...]


@dataclass(frozen=True)
class WorkloadProcess:
    """A server process a workload needs.

    Attributes
    ----------
    name:
        Process name in the lab (pid files, logs), unique within the pod.
    argv:
        Command run inside the pod namespace.
    port:
        TCP port that is listening once the process is ready.
    config:
        ``(path, text)`` of a configuration file to write first, or ``None``.
    """

    name: str
    argv: tuple[str, ...]
    port: int
    config: tuple[Path, str] | None = None


def new_lab_id() -> str:
    """A fresh random lab id, ``cb`` + six hex digits."""
    return "cb" + secrets.token_hex(3)


def validate_lab_id(lab_id: str) -> str:
    """Return ``lab_id`` if it is a lab id (``cb`` + 6 hex digits).

    Raises
    ------
    ConfigError
        Otherwise.
    """
    if not LAB_ID_RE.match(lab_id):
        raise ConfigError(f"invalid lab id {lab_id!r}: expected 'cb' followed by 6 hex digits")
    return lab_id


def lab_state_dir(state_root: Path, lab_id: str) -> Path:
    """State directory of a lab: ``<state_root>/<lab_id>``."""
    return state_root / validate_lab_id(lab_id)


def _check_ifname(name: str) -> str:
    if not 0 < len(name) <= IFNAME_MAX:
        raise ConfigError(f"interface name {name!r} is longer than {IFNAME_MAX} characters")
    return name


def plan_lab(
    spec: ClusterSpec, lab_id: str, *, state_root: Path = Path("/run/cnibench")
) -> LabPlan:
    """Plan the lab for ``spec``.

    Parameters
    ----------
    spec:
        ``cni`` is the datapath (``routed`` or ``vxlan``), ``encryption`` ``""`` or
        ``"wireguard"``, one node per entry of ``roles``. One option: ``napi`` (``inline``,
        the default, or ``threaded``, see :func:`napi_steps`).
    lab_id:
        ``cb`` + six hex digits (see :func:`new_lab_id`).
    state_root:
        Parent of the lab's state directory.

    Returns
    -------
    LabPlan
        Names and addresses of every object of the lab.

    Raises
    ------
    ConfigError
        Unknown datapath, encryption or option, no node or more than 100 nodes, or a
        malformed lab id.
    """
    validate_lab_id(lab_id)
    try:
        datapath = LabDatapath(spec.cni)
    except ValueError:
        raise ConfigError(
            f"unknown lab datapath {spec.cni!r}: choose {' or '.join(LabDatapath)}"
        ) from None
    if spec.encryption not in ("", "wireguard"):
        raise ConfigError(
            f"unknown lab encryption {spec.encryption!r}: choose '' (none) or wireguard"
        )
    napi = napi_option(spec.options)
    if not spec.roles or len(spec.roles) > MAX_NODES:
        raise ConfigError(f"a lab needs 1 to {MAX_NODES} nodes, got {len(spec.roles)}")
    encryption = spec.encryption == "wireguard"
    nodes = tuple(
        NodePlan(
            index=index,
            name=f"{lab_id}-n{index}",
            role=NodeRole(role),
            underlay_ip=f"198.18.0.{10 + index}",
            bridge_port=_check_ifname(f"n{index}"),
            pod_cidr=f"198.19.{index}.0/24",
            pod_gateway=f"198.19.{index}.1",
            overlay_ip=f"198.18.128.{index}" if datapath is LabDatapath.VXLAN else "",
            wg_ip=f"198.18.64.{index}" if encryption else "",
            wg_interface=_check_ifname(f"{lab_id}-wg{index}") if encryption else "",
        )
        for index, role in enumerate(spec.roles, start=1)
    )
    mtu = _UNDERLAY_MTU
    if encryption:
        mtu -= _WIREGUARD_OVERHEAD
    if datapath is LabDatapath.VXLAN:
        mtu -= _VXLAN_OVERHEAD
    return LabPlan(
        lab_id=lab_id,
        datapath=datapath,
        encryption=encryption,
        state_dir=lab_state_dir(state_root, lab_id),
        underlay_namespace=f"{lab_id}-ul",
        bridge=_check_ifname(f"{lab_id}-br"),
        nodes=nodes,
        external=HostPlan(f"{lab_id}-ext", EXTERNAL_IP, "ext"),
        monitor=HostPlan(f"{lab_id}-mon", MONITOR_IP, "mon"),
        pod_mtu=mtu,
        napi_threaded=napi == "threaded",
    )


NAPI_MODES = ("inline", "threaded")
"""Values of the lab's one option, ``napi``: where a machine's receive processing runs."""


def napi_option(options: Mapping[str, str]) -> str:
    """The ``napi`` mode ``options`` ask for (``inline`` by default).

    Raises
    ------
    ConfigError
        An option other than ``napi``, or an unknown mode.
    """
    unknown = sorted(set(options) - {"napi"})
    if unknown:
        raise ConfigError(
            f"the lab takes only the option napi=inline|threaded, got {', '.join(unknown)}"
        )
    napi = options.get("napi", "inline")
    if napi not in NAPI_MODES:
        raise ConfigError(f"unknown lab option napi={napi}: choose napi=inline or napi=threaded")
    return napi


def napi_steps(plan: LabPlan) -> list[Step]:
    """With ``napi=threaded``: each machine's underlay interface receives in NAPI threads.

    A veth hands a packet to its peer's NAPI poller only when GRO is on at the receiver and
    the packet is not a GSO super-packet, so the bridge ports that transmit to the machines
    segment in software (TSO off) and every machine's ``eth0`` turns GRO and threading on.
    Without the option, nothing: the receiving side's work runs in the sender's softirq and
    is counted as the sender's CPU.
    """
    if not plan.napi_threaded:
        return []
    ports = [node.bridge_port for node in plan.nodes]
    ports += [plan.external.bridge_port, plan.monitor.bridge_port]
    ul = plan.underlay_namespace
    steps = [
        Step(
            f"turn TSO off on bridge port {port}",
            ("ip", "netns", "exec", ul, "ethtool", "-K", port, "tso", "off"),
        )
        for port in ports
    ]
    for namespace in plan.machines.values():
        steps.append(
            Step(
                f"turn GRO on at {NODE_UPLINK} of {namespace}",
                ("ip", "netns", "exec", namespace, "ethtool", "-K", NODE_UPLINK, "gro", "on"),
            )
        )
        steps.append(
            Step(
                f"thread the NAPI poller of {NODE_UPLINK} in {namespace}",
                (
                    "ip",
                    "netns",
                    "exec",
                    namespace,
                    "sh",
                    "-c",
                    f"echo 1 > /sys/class/net/{NODE_UPLINK}/threaded",
                ),
            )
        )
    return steps


def plan_pod(plan: LabPlan, name: str, node: NodePlan, *, host: int, seq: int) -> PodPlan:
    """Plan pod ``name`` on ``node`` with address ``198.19.<node>.<host>``.

    Parameters
    ----------
    plan:
        The lab.
    name:
        Pod name in the cluster.
    node:
        Node the pod is attached to.
    host:
        Last octet of the pod address, 2 to 254.
    seq:
        Lab-wide pod sequence number; it names the namespace and the node-side veth, so a
        name is never reused while the kernel may still be destroying an earlier pod's devices.

    Raises
    ------
    ConfigError
        If ``host`` is outside 2..254.
    """
    if not 2 <= host <= 254:
        raise ConfigError(f"pod host number {host} is outside 2..254 (node {node.name} is full)")
    return PodPlan(
        name=name,
        namespace=f"{plan.lab_id}-n{node.index}p{seq}",
        node=node,
        ip=f"198.19.{node.index}.{host}",
        host_veth=_check_ifname(f"veth{seq}"),
        mtu=plan.pod_mtu,
    )


def node_routes(plan: LabPlan, node: NodePlan) -> tuple[Route, ...]:
    """Routes of ``node`` towards every other node's pod subnet.

    ``routed`` sends them to the peer's underlay address (or into the WireGuard interface with
    encryption); ``vxlan`` sends them to the peer's overlay address on the VXLAN device.
    """
    routes: list[Route] = []
    for peer in plan.nodes:
        if peer.index == node.index:
            continue
        if plan.datapath is LabDatapath.VXLAN:
            routes.append(Route(peer.pod_cidr, VXLAN_INTERFACE, via=peer.overlay_ip, onlink=True))
        elif plan.encryption:
            routes.append(Route(peer.pod_cidr, node.wg_interface))
        else:
            routes.append(Route(peer.pod_cidr, NODE_UPLINK, via=peer.underlay_ip))
    return tuple(routes)


def egress_route(plan: LabPlan, node: NodePlan, gateway: NodePlan) -> Route:
    """Default route of the egress table on ``node``: to the gateway the way pod traffic goes.

    Like a CNI's egress gateway, the selected traffic travels in the tunnel when there is one
    (VXLAN overlay, WireGuard), else over the underlay.
    """
    if plan.datapath is LabDatapath.VXLAN:
        return Route(
            "default", VXLAN_INTERFACE, via=gateway.overlay_ip, onlink=True, table=EGRESS_TABLE
        )
    if plan.encryption:
        return Route("default", node.wg_interface, via=gateway.wg_ip, table=EGRESS_TABLE)
    return Route("default", NODE_UPLINK, via=gateway.underlay_ip, table=EGRESS_TABLE)


def wg_allowed_ips(node: NodePlan, *, extra: Sequence[str] = ()) -> tuple[str, ...]:
    """What a peer may send from / be sent to through ``node``'s tunnel: its WireGuard address,
    its pod subnet and ``extra`` (the egress destination when ``node`` is the gateway)."""
    return (f"{node.wg_ip}/32", node.pod_cidr, *extra)


def wg_set_argv(
    plan: LabPlan,
    node: NodePlan,
    *,
    private_key: Path,
    public_keys: Mapping[str, str],
    extra_allowed: Mapping[str, Sequence[str]] | None = None,
) -> tuple[str, ...]:
    """``wg set`` command configuring ``node``'s interface with every other node as a peer.

    Parameters
    ----------
    plan:
        The lab.
    node:
        The node whose interface is configured.
    private_key:
        File holding the node's private key.
    public_keys:
        Node name to public key (base64) of every node.
    extra_allowed:
        Node name to additional allowed CIDRs for that peer (egress destinations).
    """
    extra_allowed = extra_allowed or {}
    argv = [
        "wg",
        "set",
        node.wg_interface,
        "listen-port",
        str(WIREGUARD_PORT),
        "private-key",
        str(private_key),
    ]
    for peer in plan.nodes:
        if peer.index == node.index:
            continue
        allowed = wg_allowed_ips(peer, extra=extra_allowed.get(peer.name, ()))
        argv += [
            "peer",
            public_keys[peer.name],
            "endpoint",
            f"{peer.underlay_ip}:{WIREGUARD_PORT}",
            "allowed-ips",
            ",".join(allowed),
        ]
    return tuple(argv)


def _ip_batch(namespace: str | None, description: str, lines: Sequence[str]) -> Step:
    prefix: tuple[str, ...] = ("ip",) if namespace is None else ("ip", "-n", namespace)
    return Step(description, (*prefix, "-batch", "-"), "".join(f"{line}\n" for line in lines))


def namespace_steps(plan: LabPlan) -> list[Step]:
    """Create the lab's fixed namespaces."""
    return [
        _ip_batch(None, "create the lab namespaces", [f"netns add {ns}" for ns in plan.namespaces])
    ]


def namespace_removal_step(namespaces: Sequence[str]) -> Step:
    """Delete ``namespaces`` in one ``ip -force -batch`` (continues past ones already gone)."""
    lines = "".join(f"netns del {ns}\n" for ns in namespaces)
    return Step("delete the lab namespaces", ("ip", "-force", "-batch", "-"), lines)


def sysctl_steps(plan: LabPlan) -> list[Step]:
    """Kernel settings of the lab's namespaces, applied before any interface exists.

    IPv6 is off everywhere on the underlay: the lab is IPv4 only, and router solicitations would
    only add noise to underlay captures. Nodes forward pod traffic. Reverse-path filtering and
    ICMP redirects are off because pod traffic legitimately arrives on one interface and leaves
    on another (tunnels, the egress gateway), as on real CNI nodes.
    """
    quiet_ipv6 = ("net.ipv6.conf.all.disable_ipv6=1", "net.ipv6.conf.default.disable_ipv6=1")
    settings = (
        *quiet_ipv6,
        "net.ipv4.ip_forward=1",
        "net.ipv4.conf.all.rp_filter=0",
        "net.ipv4.conf.default.rp_filter=0",
        "net.ipv4.conf.all.send_redirects=0",
        "net.ipv4.conf.default.send_redirects=0",
        "net.ipv4.conf.all.accept_redirects=0",
        "net.ipv4.conf.default.accept_redirects=0",
    )
    steps = [
        Step(
            f"configure kernel settings of node {node.name}",
            ("ip", "netns", "exec", node.name, "sysctl", "-q", "-e", "-w", *settings),
        )
        for node in plan.nodes
    ]
    steps += [
        Step(
            f"configure kernel settings of {namespace}",
            ("ip", "netns", "exec", namespace, "sysctl", "-q", "-e", "-w", *quiet_ipv6),
        )
        for namespace in (plan.underlay_namespace, plan.external.name, plan.monitor.name)
    ]
    return steps


def underlay_steps(plan: LabPlan) -> list[Step]:
    """Underlay bridge and one veth per node/host into it, with addresses, all links up."""
    ul = plan.underlay_namespace
    hosts: list[tuple[str, str, str]] = [
        (node.name, node.underlay_ip, node.bridge_port) for node in plan.nodes
    ]
    hosts += [(host.name, host.ip, host.bridge_port) for host in (plan.external, plan.monitor)]
    bridge_lines = [
        "link set lo up",
        f"link add {plan.bridge} type bridge",
        f"link set {plan.bridge} up",
    ]
    for namespace, _, port in hosts:
        bridge_lines.append(
            f"link add {port} mtu {_UNDERLAY_MTU} type veth"
            f" peer name {NODE_UPLINK} netns {namespace}"
        )
        bridge_lines.append(f"link set {port} master {plan.bridge} up")
    steps = [_ip_batch(ul, "create the underlay bridge and its veths", bridge_lines)]
    prefix = UNDERLAY.prefixlen
    steps.extend(
        _ip_batch(
            namespace,
            f"address the underlay interface of {namespace}",
            [
                "link set lo up",
                f"addr add {ip}/{prefix} dev {NODE_UPLINK}",
                f"link set {NODE_UPLINK} up",
            ],
        )
        for namespace, ip, _ in hosts
    )
    return steps


def wireguard_address_steps(plan: LabPlan) -> list[Step]:
    """Address the WireGuard interfaces (created and keyed by the runner) and bring them up."""
    return [
        _ip_batch(
            node.name,
            f"address the WireGuard interface of {node.name}",
            [
                f"addr add {node.wg_ip}/24 dev {node.wg_interface}",
                f"link set {node.wg_interface} mtu {plan.wg_mtu} up",
            ],
        )
        for node in plan.nodes
        if plan.encryption
    ]


def vxlan_steps(plan: LabPlan) -> list[Step]:
    """A unicast VXLAN device per node with a flood entry per peer (head-end replication).

    With encryption the tunnel endpoints are the WireGuard addresses, so VXLAN runs inside it.
    """
    if plan.datapath is not LabDatapath.VXLAN:
        return []
    steps: list[Step] = []
    for node in plan.nodes:
        local = node.wg_ip if plan.encryption else node.underlay_ip
        steps.append(
            _ip_batch(
                node.name,
                f"create the VXLAN device of {node.name}",
                [
                    f"link add {VXLAN_INTERFACE} mtu {plan.vxlan_mtu} type vxlan id {VXLAN_VNI}"
                    f" local {local} dstport {VXLAN_PORT}",
                    f"addr add {node.overlay_ip}/24 dev {VXLAN_INTERFACE}",
                    f"link set {VXLAN_INTERFACE} up",
                ],
            )
        )
        for peer in plan.nodes:
            if peer.index == node.index:
                continue
            remote = peer.wg_ip if plan.encryption else peer.underlay_ip
            steps.append(
                Step(
                    f"add VXLAN peer {peer.name} on {node.name}",
                    (
                        "bridge",
                        "-n",
                        node.name,
                        "fdb",
                        "append",
                        "00:00:00:00:00:00",
                        "dev",
                        VXLAN_INTERFACE,
                        "dst",
                        remote,
                    ),
                )
            )
    return steps


def route_steps(plan: LabPlan) -> list[Step]:
    """Routes from every node to the other nodes' pod subnets."""
    return [
        _ip_batch(
            node.name,
            f"route pod subnets on {node.name}",
            [route.batch_line() for route in node_routes(plan, node)],
        )
        for node in plan.nodes
        if len(plan.nodes) > 1
    ]


def node_nat_ruleset(plan: LabPlan, node: NodePlan, egress: EgressPlan | None = None) -> str:
    """nftables ruleset (for ``nft -f -``) of ``node``'s own table ``ip <lab id>``.

    Pods' traffic leaving through the underlay to anything but another pod is masqueraded to
    the node's address. With an egress gateway, a client node leaves the selected flows alone
    (the gateway translates them) and the gateway node translates pod traffic to the
    destination to its own address. The table is replaced atomically.
    """
    lines = [
        f"table ip {plan.lab_id}",
        f"delete table ip {plan.lab_id}",
        f"table ip {plan.lab_id} {{",
        "  chain postrouting {",
        "    type nat hook postrouting priority srcnat; policy accept;",
    ]
    if egress is not None:
        for client_node, pod_ip in egress.clients:
            if client_node == node.name:
                lines.append(
                    f"    ip saddr {pod_ip} ip daddr {egress.destination} return"
                    ' comment "egress gateway translates this flow"'
                )
        if node.index == egress.gateway.index:
            lines.append(
                f"    ip saddr {POD_SUPERNET} ip daddr {egress.destination}"
                f' oifname "{NODE_UPLINK}" snat to {node.underlay_ip} comment "egress gateway"'
            )
    lines += [
        f"    ip saddr {POD_SUPERNET} ip daddr != {POD_SUPERNET}"
        f' oifname "{NODE_UPLINK}" masquerade comment "pods leaving the cluster"',
        "  }",
        "}",
    ]
    return "\n".join(lines) + "\n"


def nat_steps(plan: LabPlan, egress: EgressPlan | None = None) -> list[Step]:
    """Load every node's NAT table (see :func:`node_nat_ruleset`)."""
    return [
        Step(
            f"load the NAT table of {node.name}",
            ("ip", "netns", "exec", node.name, "nft", "-f", "-"),
            node_nat_ruleset(plan, node, egress),
        )
        for node in plan.nodes
    ]


def plan_egress(
    plan: LabPlan, gateway: NodePlan, clients: Sequence[tuple[str, str]], destination: str
) -> EgressPlan:
    """Validate and normalise an egress gateway request.

    Parameters
    ----------
    plan:
        The lab.
    gateway:
        The egress-gw node.
    clients:
        ``(node name, pod ip)`` of the selected pods.
    destination:
        IPv4 CIDR (or address) of the external destination.

    Raises
    ------
    ConfigError
        If ``destination`` is not an IPv4 network or a client node is unknown.
    """
    try:
        network = ipaddress.ip_network(destination, strict=False)
    except ValueError:
        raise ConfigError(f"egress destination {destination!r} is not a CIDR") from None
    if not isinstance(network, ipaddress.IPv4Network):
        raise ConfigError(f"egress destination {destination!r} is not IPv4")
    for node_name, _ in clients:
        plan.node_named(node_name)
    selected = tuple(
        sorted({(n, ip) for n, ip in clients if n != gateway.name}, key=lambda c: (c[0], c[1]))
    )
    return EgressPlan(gateway=gateway, destination=str(network), clients=selected)


def egress_steps(plan: LabPlan, egress: EgressPlan) -> list[Step]:
    """Policy routing on client nodes: selected pods' traffic to the destination goes to the
    gateway (the NAT tables and WireGuard peers are updated separately)."""
    steps: list[Step] = []
    by_node: dict[str, list[str]] = {}
    for node_name, pod_ip in egress.clients:
        by_node.setdefault(node_name, []).append(pod_ip)
    for node_name, pod_ips in sorted(by_node.items()):
        node = plan.node_named(node_name)
        lines = [egress_route(plan, node, egress.gateway).batch_line()]
        lines += [
            f"rule add from {ip} to {egress.destination} lookup {EGRESS_TABLE}"
            f" priority {EGRESS_RULE_PRIORITY}"
            for ip in pod_ips
        ]
        steps.append(_ip_batch(node.name, f"route egress traffic of {node.name}", lines))
    return steps


def egress_removal_steps(plan: LabPlan, egress: EgressPlan) -> list[Step]:
    """Undo :func:`egress_steps`."""
    steps: list[Step] = []
    by_node: dict[str, list[str]] = {}
    for node_name, pod_ip in egress.clients:
        by_node.setdefault(node_name, []).append(pod_ip)
    for node_name, pod_ips in sorted(by_node.items()):
        lines = [
            f"rule del from {ip} to {egress.destination} lookup {EGRESS_TABLE}"
            f" priority {EGRESS_RULE_PRIORITY}"
            for ip in pod_ips
        ]
        lines.append(f"route flush table {EGRESS_TABLE}")
        steps.append(_ip_batch(node_name, f"remove egress routing of {node_name}", lines))
    return steps


def pod_steps(pod: PodPlan) -> list[Step]:
    """Create ``pod``: namespace, veth pair into the node, addresses and routes both ways."""
    node = pod.node
    return [
        Step(f"create the namespace of pod {pod.name}", ("ip", "netns", "add", pod.namespace)),
        Step(
            f"create the veth of pod {pod.name}",
            (
                "ip",
                "-n",
                node.name,
                "link",
                "add",
                pod.host_veth,
                "mtu",
                str(pod.mtu),
                "type",
                "veth",
                "peer",
                "name",
                NODE_UPLINK,
                "mtu",
                str(pod.mtu),
                "netns",
                pod.namespace,
            ),
        ),
        _ip_batch(
            pod.namespace,
            f"address pod {pod.name}",
            [
                "link set lo up",
                f"addr add {pod.ip}/32 dev {NODE_UPLINK}",
                f"link set {NODE_UPLINK} up",
                f"route add {node.pod_gateway} dev {NODE_UPLINK} scope link",
                f"route add default via {node.pod_gateway} dev {NODE_UPLINK}",
            ],
        ),
        _ip_batch(
            node.name,
            f"route pod {pod.name} on {node.name}",
            [
                f"addr add {node.pod_gateway}/32 dev {pod.host_veth}",
                f"link set {pod.host_veth} up",
                f"route replace {pod.ip}/32 dev {pod.host_veth}",
            ],
        ),
    ]


def pod_removal_steps(pod: PodPlan) -> list[Step]:
    """Delete ``pod``; the node-side veth goes first because the kernel destroys the devices of
    a deleted namespace asynchronously, and its route and address must be gone right away."""
    return [
        Step(
            f"delete the veth of pod {pod.name}",
            ("ip", "-n", pod.node.name, "link", "del", pod.host_veth),
        ),
        Step(f"delete the namespace of pod {pod.name}", ("ip", "netns", "del", pod.namespace)),
    ]


def nginx_echo_config(pod_name: str, ip: str, port: int, run_dir: Path) -> str:
    """nginx configuration of an HTTP echo answering every path with 200 and the pod's name.

    The body is ``<pod name>\\n`` and every response carries ``X-Backend: <pod name>``. Sized
    for wrk's 1000 connections: two workers with 8192 connections each; pid, temp and log paths
    live in ``run_dir`` so nothing of the host's nginx is touched.
    """
    if not re.fullmatch(r"[A-Za-z0-9_.-]+", pod_name):
        raise ConfigError(f"pod name {pod_name!r} may only contain letters, digits, '_', '.', '-'")
    # nginx creates only the last component of a temp path, so they sit directly in run_dir.
    temp = run_dir
    return "\n".join(
        [
            "worker_processes 2;",
            "worker_rlimit_nofile 20000;",
            f"pid {run_dir / 'nginx.pid'};",
            f"error_log {run_dir / 'nginx-error.log'} warn;",
            "events {",
            "  worker_connections 8192;",
            "}",
            "http {",
            "  access_log off;",
            f"  client_body_temp_path {temp}/temp-body;",
            f"  proxy_temp_path {temp}/temp-proxy;",
            f"  fastcgi_temp_path {temp}/temp-fastcgi;",
            f"  uwsgi_temp_path {temp}/temp-uwsgi;",
            f"  scgi_temp_path {temp}/temp-scgi;",
            "  keepalive_requests 100000;",
            "  server {",
            f"    listen {ip}:{port} backlog=4096;",
            "    location / {",
            "      default_type text/plain;",
            f'      add_header X-Backend "{pod_name}" always;',
            f'      return 200 "{pod_name}\\n";',
            "    }",
            "  }",
            "}",
            "",
        ]
    )


def workload_processes(
    pod: PodPlan, workload: WorkloadSpec, run_dir: Path
) -> tuple[WorkloadProcess, ...]:
    """Server processes for ``workload`` in ``pod`` (configs live in ``run_dir``).

    sockperf gets two servers on the same port, UDP (its default) and TCP, so that clients can
    use either and readiness can be checked on the TCP one.
    """
    port = workload.port
    if not 0 < port < 65536:
        raise ConfigError(f"workload port {port} is outside 1..65535")
    if workload.kind is WorkloadKind.LOAD_GENERATOR:
        raise ConfigError("the lab runs locust on this host, never in a pod (load_in_pods)")
    if workload.kind is WorkloadKind.IPERF3_SERVER:
        return (
            WorkloadProcess(
                f"iperf3-{port}",
                tuple(iperf3_server_argv(port=port, one_off=False, bind=pod.ip)),
                port,
            ),
        )
    if workload.kind is WorkloadKind.SOCKPERF_SERVER:
        return (
            WorkloadProcess(
                f"sockperf-udp-{port}", tuple(sockperf_server_argv(port=port, bind=pod.ip)), port
            ),
            WorkloadProcess(
                f"sockperf-tcp-{port}",
                tuple(sockperf_server_argv(port=port, bind=pod.ip, tcp=True)),
                port,
            ),
        )
    if workload.kind is WorkloadKind.HTTP_ECHO:
        conf_dir = run_dir / f"nginx-{port}"
        conf = conf_dir / "nginx.conf"
        return (
            WorkloadProcess(
                f"nginx-{port}",
                (
                    "nginx",
                    "-c",
                    str(conf),
                    "-p",
                    str(conf_dir),
                    "-e",
                    str(conf_dir / "nginx-error.log"),
                    "-g",
                    "daemon off;",
                ),
                port,
                (conf, nginx_echo_config(pod.name, pod.ip, port, conf_dir)),
            ),
        )
    raise ConfigError(f"unknown workload kind {workload.kind!r}")


def prometheus_yaml(plan: LabPlan, *, scrape_interval: str = "1s") -> str:
    """Prometheus configuration scraping every node's node-exporter.

    Each target is labelled ``node=<node name>``, ``role=<role>`` and ``instance=<node name>``,
    so query results can be keyed by node without knowing lab addresses.
    """
    config: dict[str, Any] = {
        "global": {
            "scrape_interval": scrape_interval,
            "scrape_timeout": scrape_interval,
            "evaluation_interval": scrape_interval,
        },
        "scrape_configs": [
            {
                "job_name": "node",
                "static_configs": [
                    {
                        "targets": [f"{node.underlay_ip}:{NODE_EXPORTER_PORT}"],
                        "labels": {
                            "node": node.name,
                            "role": node.role.value,
                            "instance": node.name,
                        },
                    }
                    for node in plan.nodes
                ],
            }
        ],
    }
    return yaml.safe_dump(config, sort_keys=False)
