"""An abstract network policy: who may reach whom, on which protocol and ports.

The model is what both backends render: the lab turns it into an ``iptables`` chain, linear
``nftables`` rules or one ``nftables`` set lookup (:mod:`cnibench.backends.lab.policy`); the
Kubernetes backend into NetworkPolicy / CiliumNetworkPolicy objects. It only holds values and
validates them; nothing here touches a system.

Policy complexity grows the way seed 003 grew it: ``extra_rules`` rules that never match the
measured traffic (same sources, port ranges that exclude the allowed ports) sit *before* the
matching rule, so a linear datapath walks all of them for every packet it evaluates.

Policy *precedence* (seed 003's priority analysis) is modelled by :class:`PriorityCase`: a
Kubernetes deny-all and/or CNI policies in tiers at priorities, all matching the same traffic.
:func:`reference_outcome` says what the documented reference order (Antrea's, also Kubernetes
AdminNetworkPolicy's) decides; a backend reports what its datapath actually did.
"""

from __future__ import annotations

import enum
import ipaddress
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType

from cnibench.errors import ConfigError

__all__ = [
    "BASELINE_TIER",
    "DEFAULT_TIER",
    "FILLER_PORT_BASE",
    "MAX_EXTRA_RULES",
    "MAX_PRIORITY_LAYERS",
    "PRIORITY_CASES",
    "TIERS",
    "PolicyAction",
    "PolicyEngine",
    "PolicyPeer",
    "PolicyRuleLimit",
    "PolicySpec",
    "PortRange",
    "PriorityCase",
    "PriorityLayer",
    "ReferenceDecision",
    "RulesSee",
    "TransportProtocol",
    "filler_rules",
    "priority_case_named",
    "reference_decision",
    "reference_outcome",
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


@dataclass(frozen=True)
class PolicyRuleLimit:
    """The most rules one policy may carry on a cluster, as its CNI is configured.

    Attributes
    ----------
    rules:
        The bound: a policy of more rules cannot be enforced as the CNI is set up.
    reason:
        Where the bound comes from, in a few words naming the setting and where it was read
        (e.g. ``bpf-policy-map-max=4096 in kube-system/cilium-config``).
    """

    rules: int
    reason: str


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


# -- policy precedence (seed 003's priority experiments) ----------------------------------------


class PolicyAction(enum.StrEnum):
    """What a policy layer does with the traffic it matches."""

    ALLOW = "allow"
    """Accept: evaluation ends, the connection is admitted."""
    DENY = "deny"
    """Drop: evaluation ends, the connection is blocked."""
    PASS = "pass"
    """Skip every remaining tiered layer and let Kubernetes NetworkPolicy decide (Antrea and
    Calico ``Pass``)."""


TIERS: Mapping[str, int] = MappingProxyType(
    {
        "emergency": 50,
        "securityops": 100,
        "networkops": 150,
        "platform": 200,
        "application": 250,
        "baseline": 253,
    }
)
"""Antrea's built-in tiers and their rank (lower is evaluated first)."""
DEFAULT_TIER = "application"
"""Tier of a layer that names none (Antrea's default for a ClusterNetworkPolicy)."""
BASELINE_TIER = "baseline"
"""The one tier evaluated *after* Kubernetes NetworkPolicy."""
MIN_LAYER_PRIORITY = 1.0
MAX_LAYER_PRIORITY = 10000.0
MAX_PRIORITY_LAYERS = 8
"""Most CNI layers one priority case may stack."""
_CASE_NAME_RE = re.compile(r"^[a-z0-9]([a-z0-9.-]{0,61}[a-z0-9])?$")


@dataclass(frozen=True)
class PriorityLayer:
    """One CNI policy of a priority case: ``action`` for the case's allowed peers and ports,
    placed in ``tier`` at ``priority``.

    Attributes
    ----------
    action:
        Allow, deny or pass (a plain string is converted).
    tier:
        One of :data:`TIERS`.
    priority:
        Order within the tier, 1.0 .. 10000.0, lower first (Antrea ``priority``; a Calico
        backend uses it as ``order``).

    Raises
    ------
    ConfigError
        Unknown action or tier, a priority outside 1.0..10000.0, or ``pass`` in the baseline
        tier (nothing below it to pass to).
    """

    action: PolicyAction
    tier: str = DEFAULT_TIER
    priority: float = 5.0

    def __post_init__(self) -> None:
        try:
            object.__setattr__(self, "action", PolicyAction(self.action))
        except ValueError:
            choices = ", ".join(a.value for a in PolicyAction)
            raise ConfigError(f"policy action {self.action!r}: choose {choices}") from None
        if self.tier not in TIERS:
            raise ConfigError(f"unknown policy tier {self.tier!r}: choose {', '.join(TIERS)}")
        if not MIN_LAYER_PRIORITY <= self.priority <= MAX_LAYER_PRIORITY:
            raise ConfigError(
                f"policy priority {self.priority} is outside"
                f" {MIN_LAYER_PRIORITY:g}..{MAX_LAYER_PRIORITY:g}"
            )
        if self.action is PolicyAction.PASS and self.tier == BASELINE_TIER:
            raise ConfigError("a pass layer cannot sit in the baseline tier: nothing follows it")

    @property
    def rank(self) -> tuple[int, float]:
        """Evaluation key: ``(tier rank, priority)``, lower first."""
        return (TIERS[self.tier], self.priority)

    @property
    def baseline(self) -> bool:
        """Whether the layer is evaluated after Kubernetes NetworkPolicy."""
        return self.tier == BASELINE_TIER

    def __str__(self) -> str:
        return f"{self.tier}@{self.priority:g}:{self.action.value}"


@dataclass(frozen=True)
class PriorityCase:
    """A stack of policies applied together to one target; which one wins is the result.

    Every CNI layer matches the same traffic (the allowed client to the target's ports), so
    only the precedence rules decide the outcome.

    Attributes
    ----------
    name:
        Readable id (lowercase letters, digits, ``.-``), used in condition ids and so in
        result file names.
    kubernetes_deny:
        Whether a Kubernetes NetworkPolicy selecting the target with no ingress rule (deny all)
        is part of the case.
    layers:
        CNI policies, in any order (precedence comes from tier and priority).
    description:
        One line for reports.

    Raises
    ------
    ConfigError
        A bad name, a case applying nothing, too many layers, or two layers at the same
        ``(tier, priority)`` (their order would be undefined).
    """

    name: str
    kubernetes_deny: bool
    layers: tuple[PriorityLayer, ...] = ()
    description: str = ""

    def __post_init__(self) -> None:
        if not _CASE_NAME_RE.match(self.name):
            raise ConfigError(
                f"priority case name {self.name!r} must use lowercase letters, digits, '.-'"
            )
        object.__setattr__(self, "layers", tuple(self.layers))
        if not self.kubernetes_deny and not self.layers:
            raise ConfigError(f"priority case {self.name!r} applies no policy at all")
        if len(self.layers) > MAX_PRIORITY_LAYERS:
            raise ConfigError(
                f"priority case {self.name!r} has {len(self.layers)} layers;"
                f" at most {MAX_PRIORITY_LAYERS} are allowed"
            )
        ranks = [layer.rank for layer in self.layers]
        clashes = sorted({str(x) for x in self.layers if ranks.count(x.rank) > 1})
        if clashes:
            raise ConfigError(
                f"priority case {self.name!r} has layers at the same tier and priority:"
                f" {', '.join(clashes)}"
            )

    @property
    def ordered_layers(self) -> tuple[PriorityLayer, ...]:
        """The layers in evaluation order: by tier rank, then priority."""
        return tuple(sorted(self.layers, key=lambda layer: layer.rank))

    @property
    def needs_tiers(self) -> bool:
        """Whether the case uses a tier other than the default or a ``pass`` action, which
        only CNIs with policy tiers can express."""
        return any(
            layer.tier != DEFAULT_TIER or layer.action is PolicyAction.PASS for layer in self.layers
        )

    @property
    def summary(self) -> str:
        """E.g. ``"k8s-deny + application@5:allow"``."""
        parts = ["k8s-deny"] if self.kubernetes_deny else []
        parts += [str(layer) for layer in self.ordered_layers]
        return " + ".join(parts)


@dataclass(frozen=True)
class ReferenceDecision:
    """What the reference precedence decides for one source.

    Attributes
    ----------
    reachable:
        Whether the connection is admitted.
    winner:
        What decided: a layer (``"securityops@5:deny"``), ``"kubernetes deny-all"`` or
        ``"default allow"``.
    """

    reachable: bool
    winner: str


def reference_decision(case: PriorityCase, *, matched: bool = True) -> ReferenceDecision:
    """Outcome of ``case`` under the reference precedence, and what decided it.

    The reference is Antrea's documented evaluation order, which Kubernetes
    AdminNetworkPolicy / BaselineAdminNetworkPolicy also follow:

    1. tiered CNI layers (every tier but baseline), by ``(tier rank, priority)``; the first
       matching layer decides; ``pass`` skips the remaining tiered layers;
    2. Kubernetes NetworkPolicy: a deny-all selecting the target blocks;
    3. baseline-tier layers, by priority; the first match decides;
    4. otherwise the connection is allowed.

    Parameters
    ----------
    case:
        The priority case.
    matched:
        Whether the source is the one the CNI layers name (``False``: a second client no layer
        matches, so only the Kubernetes policy applies to it).

    Notes
    -----
    The reference is a yardstick, not a truth: seed 003 saw Calico block in the case
    "Kubernetes deny + Calico allow" (Fig. 8 C), where this order admits the connection. A CNI
    that differs from the reference is a finding to report, not an error.
    """
    tiered = [layer for layer in case.ordered_layers if not layer.baseline]
    baseline = [layer for layer in case.ordered_layers if layer.baseline]
    if matched:
        for layer in tiered:
            if layer.action is PolicyAction.PASS:
                break
            return ReferenceDecision(layer.action is PolicyAction.ALLOW, str(layer))
    if case.kubernetes_deny:
        return ReferenceDecision(False, "kubernetes deny-all")
    if matched:
        for layer in baseline:
            return ReferenceDecision(layer.action is PolicyAction.ALLOW, str(layer))
    return ReferenceDecision(True, "default allow")


def reference_outcome(case: PriorityCase, *, matched: bool = True) -> bool:
    """Whether ``case`` admits the connection under the reference precedence (see
    :func:`reference_decision`)."""
    return reference_decision(case, matched=matched).reachable


def _layer(action: str, tier: str = DEFAULT_TIER, priority: float = 5.0) -> PriorityLayer:
    return PriorityLayer(PolicyAction(action), tier, priority)


PRIORITY_CASES: tuple[PriorityCase, ...] = (
    PriorityCase(
        "cni-allow",
        kubernetes_deny=False,
        layers=(_layer("allow"),),
        description="a CNI allow alone (seed 003 Fig. 8 B-1)",
    ),
    PriorityCase(
        "k8s-deny",
        kubernetes_deny=True,
        description="a Kubernetes default-deny of the target alone (Fig. 8 B-2)",
    ),
    PriorityCase(
        "k8s-deny-and-cni-allow",
        kubernetes_deny=True,
        layers=(_layer("allow"),),
        description="Kubernetes default-deny and a CNI allow together (Fig. 8 C)",
    ),
    PriorityCase(
        "tier-securityops-deny-vs-application-allow",
        kubernetes_deny=False,
        layers=(_layer("deny", "securityops", 5.0), _layer("allow", "application", 10.0)),
        description="tier beats priority: securityops deny@5 against application allow@10",
    ),
    PriorityCase(
        "same-tier-priority",
        kubernetes_deny=False,
        layers=(_layer("allow", "application", 5.0), _layer("deny", "application", 10.0)),
        description="within one tier the lower priority number wins: allow@5 against deny@10",
    ),
    PriorityCase(
        "securityops-pass-and-k8s-deny",
        kubernetes_deny=True,
        layers=(_layer("pass", "securityops", 5.0), _layer("allow", "application", 10.0)),
        description="a securityops pass hands the decision to the Kubernetes deny, skipping"
        " the application allow",
    ),
)
"""The built-in cases of the ``priority`` scenario, in report order."""


def priority_case_named(name: str) -> PriorityCase:
    """The built-in case called ``name``; a one-line :class:`ConfigError` names the choices."""
    for case in PRIORITY_CASES:
        if case.name == name:
            return case
    choices = ", ".join(case.name for case in PRIORITY_CASES)
    raise ConfigError(f"unknown priority case {name!r}: choose one of {choices}")
