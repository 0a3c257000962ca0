"""The plan of a lab: its value types and :func:`plan_lab`, which fills them.

:class:`LabPlan` holds every name and address of a lab (:class:`NodePlan` per node, a
:class:`HostPlan` each for the external and the monitoring host); :class:`PodPlan` and
:class:`EgressPlan` are planned later, per pod and per egress gateway; :class:`Step` is one
command of a procedure, what every ``*_steps`` function of this package returns.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from cnibench.backends.base import ClusterSpec, NodeRole
from cnibench.backends.lab.plan.addresses import (
    _UNDERLAY_MTU,
    _VXLAN_OVERHEAD,
    _WIREGUARD_OVERHEAD,
    EXTERNAL_IP,
    MAX_NODES,
    MONITOR_IP,
    LabDatapath,
    _check_ifname,
    lab_state_dir,
    validate_lab_id,
)
from cnibench.errors import ConfigError

__all__ = [
    "NAPI_MODES",
    "EgressPlan",
    "HostPlan",
    "LabPlan",
    "NodePlan",
    "PodPlan",
    "Route",
    "Step",
    "napi_option",
    "plan_lab",
]


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


def _ip_batch(namespace: str | None, description: str, lines: Sequence[str]) -> Step:
    prefix: tuple[str, ...] = ("ip",) if namespace is None else ("ip", "-n", namespace)
    return Step(description, (*prefix, "-batch", "-"), "".join(f"{line}\n" for line in lines))
