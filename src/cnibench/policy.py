"""An abstract network policy: who may reach whom, on which protocol and ports.

The model is what both backends render: the lab turns it into an ``iptables`` chain, linear
``nftables`` rules or one ``nftables`` set lookup (:mod:`cnibench.backends.lab.policy`); the
Kubernetes backend into NetworkPolicy / CiliumNetworkPolicy objects. It only holds values and
validates them; nothing here touches a system.

Policy complexity grows the way seed 003 grew it: ``extra_rules`` rules that never match the
measured traffic (same sources, port ranges that exclude the allowed ports) sit *before* the
matching rule, so a linear datapath walks all of them for every packet it evaluates.
"""

from __future__ import annotations

import enum
import ipaddress
import re
from collections.abc import Sequence
from dataclasses import dataclass

from cnibench.errors import ConfigError

__all__ = [
    "FILLER_PORT_BASE",
    "MAX_EXTRA_RULES",
    "PolicyEngine",
    "PolicyPeer",
    "PolicySpec",
    "PortRange",
    "RulesSee",
    "TransportProtocol",
    "filler_rules",
]

MAX_EXTRA_RULES = 5000
"""Most non-matching rules a policy may carry."""
FILLER_PORT_BASE = 20000
"""First port of the non-matching rules' port ranges."""
_FILLER_WIDTH = 8
"""Ports per non-matching rule (``FILLER_PORT_BASE + 8 * i`` .. ``+ 7``)."""
_NAME_RE = re.compile(r"^[a-z0-9]([a-z0-9.-]{0,61}[a-z0-9])?$")


class PolicyEngine(enum.StrEnum):
    """How the lab enforces a policy (a Kubernetes backend maps these to its CNI's datapath)."""

    IPTABLES = "iptables"
    """One iptables chain, one rule per (source, port range): linear evaluation."""
    NFTABLES = "nftables"
    """One nftables chain, one rule per port range: linear evaluation."""
    NFTABLES_SET = "nftables-set"
    """One lookup in an nftables set of (source, port range): the hash-table analogue of an
    eBPF policy map; cost does not grow with the rule count."""


class TransportProtocol(enum.StrEnum):
    """Layer-4 protocol a rule allows."""

    TCP = "tcp"
    UDP = "udp"


class RulesSee(enum.StrEnum):
    """Which packets the policy's rules evaluate."""

    NEW_CONNECTIONS = "new-connections"
    """Established flows are accepted by conntrack before the rules (what real CNIs do)."""
    EVERY_PACKET = "every-packet"
    """Every packet to the target walks the rules (the worst case)."""


@dataclass(frozen=True)
class PortRange:
    """Ports ``first`` .. ``last`` inclusive.

    Raises
    ------
    ConfigError
        If a bound is outside 1..65535 or ``first > last``.
    """

    first: int
    last: int

    def __post_init__(self) -> None:
        if not (1 <= self.first <= 65535 and 1 <= self.last <= 65535):
            raise ConfigError(f"port range {self.first}-{self.last} is outside 1..65535")
        if self.first > self.last:
            raise ConfigError(f"port range {self.first}-{self.last} is empty (first > last)")

    @classmethod
    def single(cls, port: int) -> PortRange:
        """The range holding only ``port``."""
        return cls(port, port)

    def overlaps(self, other: PortRange) -> bool:
        """Whether the two ranges share a port."""
        return self.first <= other.last and other.first <= self.last

    def __str__(self) -> str:
        return str(self.first) if self.first == self.last else f"{self.first}-{self.last}"


@dataclass(frozen=True)
class PolicyPeer:
    """A pod a policy names: its name (a label selector for Kubernetes) and its address.

    Raises
    ------
    ConfigError
        If the name is not a DNS label or the address is not IPv4.
    """

    name: str
    ip: str

    def __post_init__(self) -> None:
        if not _NAME_RE.match(self.name):
            raise ConfigError(
                f"policy peer name {self.name!r} must be a lowercase DNS label (a-z, 0-9, '-', '.')"
            )
        try:
            ipaddress.IPv4Address(self.ip)
        except ValueError:
            raise ConfigError(f"policy peer {self.name!r}: {self.ip!r} is not IPv4") from None


@dataclass(frozen=True)
class PolicySpec:
    """Ingress policy of one target pod: only ``allowed`` may connect, on ``ports``.

    Attributes
    ----------
    target:
        The protected pod; every other source is blocked.
    allowed:
        Pods that may connect.
    ports:
        Ports they may connect to.
    protocol:
        Layer-4 protocol of the allowed ports.
    extra_rules:
        Non-matching rules placed before the matching one (0..5000), see :func:`filler_rules`.
    rules_see:
        Whether the rules see only new connections or every packet.

    Raises
    ------
    ConfigError
        No allowed peer or port, a duplicate peer, the target allowing itself, too many extra
        rules, or allowed ports overlapping the non-matching rules' ranges.
    """

    target: PolicyPeer
    allowed: tuple[PolicyPeer, ...]
    ports: tuple[PortRange, ...]
    protocol: TransportProtocol = TransportProtocol.TCP
    extra_rules: int = 0
    rules_see: RulesSee = RulesSee.NEW_CONNECTIONS

    def __post_init__(self) -> None:
        if not self.allowed:
            raise ConfigError("a policy needs at least one allowed peer")
        if not self.ports:
            raise ConfigError("a policy needs at least one allowed port")
        names = [peer.name for peer in self.allowed]
        duplicates = sorted({n for n in names if names.count(n) > 1})
        if duplicates:
            raise ConfigError(f"policy lists peers more than once: {', '.join(duplicates)}")
        if self.target.ip in {peer.ip for peer in self.allowed}:
            raise ConfigError(f"policy target {self.target.name!r} is also an allowed peer")
        if not 0 <= self.extra_rules <= MAX_EXTRA_RULES:
            raise ConfigError(
                f"extra policy rules must be within 0..{MAX_EXTRA_RULES}, got {self.extra_rules}"
            )
        if self.extra_rules:
            filler = PortRange(FILLER_PORT_BASE, _filler_range(self.extra_rules - 1).last)
            clash = [str(p) for p in self.ports if p.overlaps(filler)]
            if clash:
                raise ConfigError(
                    f"allowed ports {', '.join(clash)} overlap the non-matching rules' ports"
                    f" {filler}: use ports below {FILLER_PORT_BASE}"
                )

    @property
    def rule_count(self) -> int:
        """Rules a linear engine evaluates before a packet is accepted (fillers + 1)."""
        return self.extra_rules + 1


def _filler_range(index: int) -> PortRange:
    first = FILLER_PORT_BASE + _FILLER_WIDTH * index
    return PortRange(first, first + _FILLER_WIDTH - 1)


def filler_rules(spec: PolicySpec) -> Sequence[tuple[PolicyPeer, PortRange]]:
    """The non-matching rules of ``spec``: ``(source, port range)`` per rule, in order.

    Rule ``i`` names allowed peer ``i mod len(allowed)`` and ports ``20000 + 8i`` to
    ``20000 + 8i + 7``, so a packet from an allowed peer to an allowed port is compared with each
    and matches none.
    """
    peers = spec.allowed
    return [(peers[i % len(peers)], _filler_range(i)) for i in range(spec.extra_rules)]
