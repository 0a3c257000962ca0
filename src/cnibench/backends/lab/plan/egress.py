"""Traffic leaving the cluster: each node's NAT table (pods masqueraded to the node's address)
and the egress gateway (which pods leave through which node, the policy routing on the client
nodes and the gateway's source NAT).
"""

from __future__ import annotations

import ipaddress
from collections.abc import Sequence

from cnibench.backends.lab.plan.addresses import (
    EGRESS_RULE_PRIORITY,
    EGRESS_TABLE,
    NODE_UPLINK,
    POD_SUPERNET,
    VXLAN_INTERFACE,
    LabDatapath,
)
from cnibench.backends.lab.plan.topology import (
    EgressPlan,
    LabPlan,
    NodePlan,
    Route,
    Step,
    _ip_batch,
)
from cnibench.errors import ConfigError

__all__ = [
    "egress_removal_steps",
    "egress_route",
    "egress_steps",
    "nat_steps",
    "node_nat_ruleset",
    "plan_egress",
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
