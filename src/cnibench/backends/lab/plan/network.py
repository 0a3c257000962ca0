"""The steps that build a lab's network: namespaces, kernel settings, the underlay bridge,
the tunnels (WireGuard, VXLAN), the routes between nodes' pod subnets, and NAPI threading.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

from cnibench.backends.lab.plan.addresses import (
    _UNDERLAY_MTU,
    NODE_UPLINK,
    UNDERLAY,
    VXLAN_INTERFACE,
    VXLAN_PORT,
    VXLAN_VNI,
    WIREGUARD_PORT,
    LabDatapath,
)
from cnibench.backends.lab.plan.topology import LabPlan, NodePlan, Route, Step, _ip_batch

__all__ = [
    "namespace_removal_step",
    "namespace_steps",
    "napi_steps",
    "node_routes",
    "route_steps",
    "sysctl_steps",
    "underlay_steps",
    "vxlan_steps",
    "wg_allowed_ips",
    "wg_set_argv",
    "wireguard_address_steps",
]


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
