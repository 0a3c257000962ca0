"""A pod of the lab: its plan (namespace, address, node-side veth) and the steps that create
and delete it.
"""

from __future__ import annotations

from cnibench.backends.lab.plan.addresses import NODE_UPLINK, _check_ifname
from cnibench.backends.lab.plan.topology import LabPlan, NodePlan, PodPlan, Step, _ip_batch
from cnibench.errors import ConfigError

__all__ = [
    "plan_pod",
    "pod_removal_steps",
    "pod_steps",
]


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
