"""The address plan of a lab and its fixed names and numbers: interfaces, ports, routing
tables, MTUs, lab ids. It imports only the standard library and :mod:`cnibench.errors`, so
that naming a datapath (:class:`LabDatapath`, as :mod:`cnibench.backends.choose` does) costs
nothing.

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
from pathlib import Path

from cnibench.errors import ConfigError

__all__ = [
    "BENCHMARK_RANGE",
    "EGRESS_RULE_PRIORITY",
    "EGRESS_TABLE",
    "EXTERNAL_IP",
    "IFNAME_MAX",
    "LAB_ID_RE",
    "LAB_NAMESPACE_RE",
    "MAX_NODES",
    "MONITOR_IP",
    "NODE_EXPORTER_PORT",
    "NODE_UPLINK",
    "POD_SUPERNET",
    "PROMETHEUS_PORT",
    "UNDERLAY",
    "UNDERLAY_DEVICE_REGEX",
    "VXLAN_INTERFACE",
    "VXLAN_PORT",
    "VXLAN_VNI",
    "WIREGUARD_PORT",
    "LabDatapath",
    "lab_state_dir",
    "new_lab_id",
    "validate_lab_id",
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
