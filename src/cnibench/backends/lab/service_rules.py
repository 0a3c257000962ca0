"""A kube-proxy-style Service datapath for the lab, rendered as text (pure, no root needed).

Two engines, as kube-proxy has them:

* ``iptables``: kube-proxy's chain layout in the ``nat`` table. ``PREROUTING`` and ``OUTPUT``
  jump to ``KUBE-SERVICES``, which holds one rule per Service port (matched one after the other:
  the cost grows with the number of Services), each jumping to the Service's ``KUBE-SVC-*``
  chain; that picks an endpoint's ``KUBE-SEP-*`` chain with ``statistic --mode random
  --probability`` rules, and the ``KUBE-SEP-*`` chain DNATs to the pod. Packets to a local
  address go on to ``KUBE-NODEPORTS`` (the NodePorts). Loaded with ``iptables-restore``
  (the legacy binary where there is one: the kernel's linear xtables, not nftables underneath).
* ``nftables``: one table with a verdict map keyed by address, protocol and port (a hash
  lookup, however many Services), as kube-proxy's nftables mode does, and a second for the
  NodePorts; each Service's chain picks an endpoint with ``numgen random``.

The Service under test comes after the ``others`` further Services in ``KUBE-SERVICES`` (the
worst case of a linear walk). Virtual IPs come from :data:`SERVICE_RANGE`, inside the lab's
benchmarking range; the other Services' endpoints are addresses no pod has.
"""

from __future__ import annotations

import base64
import hashlib
import ipaddress
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from cnibench.backends.base import MAX_OTHER_SERVICES, ServiceProxy
from cnibench.errors import ConfigError

__all__ = [
    "MAX_OTHER_SERVICES",
    "NODE_PORT_BASE",
    "SERVICE_RANGE",
    "LabService",
    "ServiceProxy",
    "iptables_services_removal",
    "iptables_services_restore",
    "nft_services_ruleset",
    "plan_service",
]

SERVICE_RANGE = ipaddress.ip_network("198.18.192.0/18")
"""Virtual IPs of the lab's Services (the Service under test takes the first)."""
NODE_PORT_BASE = 30000
"""NodePorts are ``NODE_PORT_BASE + 1``, ``+ 2``, ... in the order of the ports."""
_UNUSED_ENDPOINTS = ipaddress.ip_network("198.19.255.0/24")
"""Where the other Services point: pod addresses no lab node hands out."""
PROTOCOLS = ("tcp", "udp")


@dataclass(frozen=True)
class LabService:
    """One Service: a virtual IP, ports (the same port number for TCP and UDP) and endpoints.

    Attributes
    ----------
    name:
        Names the chains (kube-proxy hashes the namespace, name and port the same way).
    cluster_ip:
        The virtual IP.
    ports:
        ``(service port, target port, node port)``; node port 0: none.
    endpoints:
        Pod addresses.
    """

    name: str
    cluster_ip: str
    ports: tuple[tuple[int, int, int], ...]
    endpoints: tuple[str, ...]


def plan_service(
    name: str, endpoints: Sequence[str], ports: Sequence[int], *, others: int
) -> tuple[LabService, tuple[LabService, ...]]:
    """The Service under test (its ports on the same numbers, NodePorts from
    :data:`NODE_PORT_BASE`) and ``others`` further Services, one TCP port each.

    Raises
    ------
    ConfigError
        No endpoint or port, or ``others`` out of ``0..MAX_OTHER_SERVICES``.
    """
    if not endpoints or not ports:
        raise ConfigError("a Service needs at least one endpoint and one port")
    if not 0 <= others <= MAX_OTHER_SERVICES:
        raise ConfigError(
            f"other Services must be between 0 and {MAX_OTHER_SERVICES}, got {others}"
        )
    first = SERVICE_RANGE.network_address + 1
    service = LabService(
        name,
        str(first),
        tuple((port, port, NODE_PORT_BASE + 1 + i) for i, port in enumerate(ports)),
        tuple(endpoints),
    )
    unused = list(_UNUSED_ENDPOINTS.hosts())
    fillers = tuple(
        LabService(
            f"other-{index}",
            str(first + 1 + index),
            ((80, 8080, 0),),
            (str(unused[index % len(unused)]),),
        )
        for index in range(others)
    )
    return service, fillers


def _hash(*parts: object) -> str:
    """16 characters of base32 of a SHA-256, as kube-proxy names its chains."""
    digest = hashlib.sha256("/".join(map(str, parts)).encode()).digest()
    return base64.b32encode(digest).decode()[:16]


@dataclass(frozen=True)
class _Entry:
    """One Service port of one protocol: a row of ``KUBE-SERVICES`` or of the map."""

    service: LabService
    protocol: str
    port: int
    target: int
    node_port: int

    @property
    def key(self) -> str:
        """16 characters naming the Service chain (kube-proxy's ``KUBE-SVC-<key>``)."""
        return _hash(self.service.name, self.protocol, self.port)

    def endpoint_key(self, endpoint: str) -> str:
        """16 characters naming an endpoint's chain (``KUBE-SEP-<key>``)."""
        return _hash(self.service.name, self.protocol, self.port, endpoint)


def _entries(service: LabService, others: Sequence[LabService]) -> Iterator[_Entry]:
    """Every port of every Service, the others first and the Service under test last (a linear
    walk passes every other); the Service under test for TCP and UDP, the others TCP only."""
    for svc in [*others, service]:
        for port, target, node_port in svc.ports:
            for protocol in PROTOCOLS if svc is service else ("tcp",):
                yield _Entry(svc, protocol, port, target, node_port)


def iptables_services_restore(service: LabService, others: Sequence[LabService]) -> str:
    """``iptables-restore`` input for the ``nat`` table (replaces the whole table)."""
    chains = ["KUBE-SERVICES", "KUBE-NODEPORTS"]
    rules: list[str] = [
        "-A PREROUTING -m comment --comment cnibench-services -j KUBE-SERVICES",
        "-A OUTPUT -m comment --comment cnibench-services -j KUBE-SERVICES",
    ]
    nodeports: list[str] = []
    bodies: list[str] = []
    for entry in _entries(service, others):
        proto = f"-p {entry.protocol} -m {entry.protocol}"
        svc_chain = f"KUBE-SVC-{entry.key}"
        chains.append(svc_chain)
        rules.append(
            f"-A KUBE-SERVICES -d {entry.service.cluster_ip}/32 {proto} --dport {entry.port}"
            f" -j {svc_chain}"
        )
        if entry.node_port:
            nodeports.append(f"-A KUBE-NODEPORTS {proto} --dport {entry.node_port} -j {svc_chain}")
        endpoints = entry.service.endpoints
        for index, endpoint in enumerate(endpoints):
            sep_chain = f"KUBE-SEP-{entry.endpoint_key(endpoint)}"
            chains.append(sep_chain)
            left = len(endpoints) - index
            # kube-proxy's rule: endpoint i of n is taken with probability 1/(n-i), the last
            # one always: every endpoint equally likely.
            pick = f"-m statistic --mode random --probability {1 / left:.11f} " if left > 1 else ""
            bodies.append(f"-A {svc_chain} {pick}-j {sep_chain}")
            bodies.append(
                f"-A {sep_chain} {proto} -j DNAT --to-destination {endpoint}:{entry.target}"
            )
    rules.append("-A KUBE-SERVICES -m addrtype --dst-type LOCAL -j KUBE-NODEPORTS")
    lines = [
        "*nat",
        ":PREROUTING ACCEPT [0:0]",
        ":INPUT ACCEPT [0:0]",
        ":OUTPUT ACCEPT [0:0]",
        ":POSTROUTING ACCEPT [0:0]",
        *(f":{chain} - [0:0]" for chain in chains),
        *rules,
        *nodeports,
        *bodies,
        "COMMIT",
    ]
    return "\n".join(lines) + "\n"


def iptables_services_removal() -> str:
    """``iptables-restore`` input emptying the ``nat`` table (the lab uses it only for these)."""
    return (
        "*nat\n:PREROUTING ACCEPT [0:0]\n:INPUT ACCEPT [0:0]\n:OUTPUT ACCEPT [0:0]\n"
        ":POSTROUTING ACCEPT [0:0]\nCOMMIT\n"
    )


def nft_services_ruleset(table: str, service: LabService, others: Sequence[LabService]) -> str:
    """``nft -f`` input creating ``table`` (replacing it) with the Services' verdict maps."""
    services: list[str] = []
    nodeports: list[str] = []
    chains: list[str] = []
    for entry in _entries(service, others):
        svc_chain = f"svc-{entry.key.lower()}"
        services.append(
            f"{entry.service.cluster_ip} . {entry.protocol} . {entry.port} : goto {svc_chain}"
        )
        if entry.node_port:
            nodeports.append(f"{entry.protocol} . {entry.node_port} : goto {svc_chain}")
        seps = [f"sep-{entry.endpoint_key(e).lower()}" for e in entry.service.endpoints]
        for sep_chain, endpoint in zip(seps, entry.service.endpoints, strict=True):
            chains.append(
                f"  chain {sep_chain} {{\n"
                f"    meta l4proto {entry.protocol} dnat to {endpoint}:{entry.target}\n  }}"
            )
        if len(seps) == 1:
            pick = f"goto {seps[0]}"
        else:
            choices = ", ".join(f"{i} : goto {sep}" for i, sep in enumerate(seps))
            pick = f"numgen random mod {len(seps)} vmap {{ {choices} }}"
        chains.append(f"  chain {svc_chain} {{\n    {pick}\n  }}")
    lines = [
        f"table ip {table}",
        f"delete table ip {table}",
        f"table ip {table} {{",
        "  map service-ips {",
        "    type ipv4_addr . inet_proto . inet_service : verdict",
        f"    elements = {{ {', '.join(services)} }}",
        "  }",
        "  map service-nodeports {",
        "    type inet_proto . inet_service : verdict",
        f"    elements = {{ {', '.join(nodeports)} }}" if nodeports else "",
        "  }",
        *chains,
        "  chain services {",
        "    ip daddr . meta l4proto . th dport vmap @service-ips",
        "    fib daddr type local meta l4proto . th dport vmap @service-nodeports",
        "  }",
        "  chain prerouting {",
        "    type nat hook prerouting priority -100; policy accept;",
        "    jump services",
        "  }",
        "  chain output {",
        "    type nat hook output priority -100; policy accept;",
        "    jump services",
        "  }",
        "}",
    ]
    return "\n".join(line for line in lines if line) + "\n"
