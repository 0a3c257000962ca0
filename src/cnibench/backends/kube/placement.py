"""Which node holds which role, chosen without changing any node.

A cluster's nodes are read once (:meth:`NodeFacts.of_node`) and handed to
:func:`choose_nodes`, a pure function: a role named by ``--nodes`` gets that node, else a node
labelled ``cnibench.io/role=<role>`` (what kind clusters cnibench makes carry), else a
schedulable, Ready node whose taints the benchmark pods tolerate, workers before control-plane
nodes, a node of its own while there are enough. Pods then select their node by the label the
kubelet put on it (:class:`~cnibench.backends.kube.render.NodeTarget`): nothing is written to a
node, so nothing is left on a user's cluster.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from cnibench.backends.base import NodePins, NodeRole
from cnibench.backends.kube.render import ROLE_LABEL, NodeTarget
from cnibench.errors import ConfigError, ProvisioningError

__all__ = [
    "CONTROL_PLANE_LABELS",
    "ZONE_LABEL",
    "ChosenBy",
    "NodeChoice",
    "NodeFacts",
    "RoleNode",
    "Taint",
    "blocking_taint",
    "choose_nodes",
]

CONTROL_PLANE_LABELS = ("node-role.kubernetes.io/control-plane", "node-role.kubernetes.io/master")
"""Labels (and taint keys) marking a control-plane node; workers are preferred to them."""
ZONE_LABEL = "topology.kubernetes.io/zone"
_BLOCKING_EFFECTS = ("NoSchedule", "NoExecute")
_LIFECYCLE_TAINTS = (
    "node.kubernetes.io/not-ready",
    "node.kubernetes.io/unreachable",
    "node.kubernetes.io/network-unavailable",
    # Cilium taints a node until its agent there is ready and then removes the taint itself:
    # a cluster right after Cilium's install can still show it on a labelled node.
    "node.cilium.io/agent-not-ready",
)
"""Taints the control plane sets while a node is not Ready yet and removes by itself: they
keep a node from being chosen, but not a labelled one (a kind node right after its CNI
came up may still carry one for a moment)."""


@dataclass(frozen=True)
class Taint:
    """A node taint (``key=value:Effect``)."""

    key: str
    value: str = ""
    effect: str = "NoSchedule"

    def __str__(self) -> str:
        value = f"={self.value}" if self.value else ""
        return f"{self.key}{value}:{self.effect}"


@dataclass(frozen=True)
class NodeFacts:
    """What :func:`choose_nodes` needs to know of one node.

    Attributes
    ----------
    name:
        Node name.
    labels:
        The node's labels.
    taints:
        The node's taints.
    unschedulable:
        Cordoned (``spec.unschedulable``).
    ready:
        Its ``Ready`` condition is ``True``.
    address:
        Its ``InternalIP``, ``""`` when it has none.
    """

    name: str
    labels: Mapping[str, str] = field(default_factory=dict)
    taints: tuple[Taint, ...] = ()
    unschedulable: bool = False
    ready: bool = True
    address: str = ""

    @classmethod
    def of_node(cls, node: Any) -> NodeFacts:
        """The facts of a ``V1Node`` of the official client (read, never changed)."""
        spec = node.spec
        status = node.status
        taints = tuple(
            Taint(str(t.key), str(t.value or ""), str(t.effect))
            for t in (getattr(spec, "taints", None) or [])
        )
        ready = any(
            c.type == "Ready" and c.status == "True"
            for c in (getattr(status, "conditions", None) or [])
        )
        address = next(
            (
                str(a.address)
                for a in (getattr(status, "addresses", None) or [])
                if a.type == "InternalIP"
            ),
            "",
        )
        return cls(
            name=str(node.metadata.name),
            labels=dict(node.metadata.labels or {}),
            taints=taints,
            unschedulable=bool(getattr(spec, "unschedulable", False)),
            ready=ready,
            address=address,
        )

    @property
    def control_plane(self) -> bool:
        """Whether it is labelled or tainted as a control-plane node."""
        return any(label in self.labels for label in CONTROL_PLANE_LABELS) or any(
            t.key in CONTROL_PLANE_LABELS for t in self.taints
        )

    @property
    def zone(self) -> str:
        """Its ``topology.kubernetes.io/zone`` label, ``""`` when it has none."""
        return self.labels.get(ZONE_LABEL, "")


def _tolerated(taint: Taint, tolerations: Sequence[Mapping[str, Any]]) -> bool:
    """Whether one of ``tolerations`` (pod-spec form) tolerates ``taint``."""
    for toleration in tolerations:
        effect = toleration.get("effect") or ""
        if effect and effect != taint.effect:
            continue
        key = toleration.get("key") or ""
        operator = toleration.get("operator") or "Equal"
        if operator == "Exists" and (not key or key == taint.key):
            return True
        value = toleration.get("value") or ""
        if operator == "Equal" and key == taint.key and value == taint.value:
            return True
    return False


def blocking_taint(
    node: NodeFacts, tolerations: Sequence[Mapping[str, Any]] = (), *, lifecycle: bool = True
) -> Taint | None:
    """The first ``NoSchedule``/``NoExecute`` taint of ``node`` that ``tolerations`` (what
    every benchmark pod carries) do not tolerate, or ``None``.

    ``lifecycle=False`` ignores the taints the control plane sets on a node that is not Ready
    yet and removes by itself (``node.kubernetes.io/not-ready`` and the like).
    """
    for taint in node.taints:
        if taint.effect not in _BLOCKING_EFFECTS:
            continue
        if not lifecycle and taint.key in _LIFECYCLE_TAINTS:
            continue
        if not _tolerated(taint, tolerations):
            return taint
    return None


def _why_unusable(
    node: NodeFacts, tolerations: Sequence[Mapping[str, Any]], *, strict: bool
) -> str:
    """Why benchmark pods cannot run on ``node`` (``""``: they can). ``strict=False`` (a
    labelled node) overlooks what goes away by itself once the node is Ready."""
    if node.unschedulable:
        return "is cordoned (unschedulable)"
    taint = blocking_taint(node, tolerations, lifecycle=strict)
    if taint is not None:
        return f"has taint {taint} that the benchmark pods do not tolerate"
    if strict and not node.ready:
        return "is not Ready"
    return ""


class ChosenBy(enum.StrEnum):
    """How a role's node was found."""

    PINNED = "pinned"
    """Named by ``--nodes``."""
    LABEL = "label"
    """Labelled ``cnibench.io/role=<role>`` (kind clusters cnibench makes)."""
    CHOSEN = "chosen"
    """Chosen by cnibench among the usable nodes."""


@dataclass(frozen=True)
class RoleNode:
    """The node holding one role.

    Attributes
    ----------
    role:
        The role.
    node:
        The node's facts.
    chosen_by:
        How it was found.
    """

    role: NodeRole
    node: NodeFacts
    chosen_by: ChosenBy

    @property
    def target(self) -> NodeTarget:
        """How pods land on it: its hostname label, else its name."""
        return NodeTarget.of_node(self.node.name, self.node.labels)


@dataclass(frozen=True)
class NodeChoice:
    """Which node holds each role (in the order of the spec's roles)."""

    roles: tuple[RoleNode, ...]

    @property
    def same_node(self) -> bool:
        """Whether one node holds several roles (their traffic then never crosses nodes)."""
        names = [r.node.name for r in self.roles]
        return len(set(names)) < len(names)

    def roles_of(self, name: str) -> list[NodeRole]:
        """The roles node ``name`` holds."""
        return [r.role for r in self.roles if r.node.name == name]

    def line(self) -> str:
        """One line for the run's output, e.g. ``nodes: client=w1 (chosen), server=w2
        (chosen), egress-gw=w2 (chosen); same-node: w2 holds server and egress-gw``."""
        parts = [f"{r.role.value}={r.node.name} ({r.chosen_by.value})" for r in self.roles]
        text = "nodes: " + ", ".join(parts)
        shared = [
            f"{name} holds {' and '.join(role.value for role in self.roles_of(name))}"
            for name in dict.fromkeys(r.node.name for r in self.roles)
            if len(self.roles_of(name)) > 1
        ]
        if shared:
            text += "; same-node: " + "; ".join(shared) + " (their traffic never crosses nodes)"
        return text


def choose_nodes(
    nodes: Sequence[NodeFacts],
    roles: Sequence[NodeRole],
    *,
    pins: NodePins | None = None,
    tolerations: Sequence[Mapping[str, Any]] = (),
) -> NodeChoice:
    """A node for each of ``roles``, in order of precedence:

    1. the node ``pins`` names for the role (refused when missing, cordoned, not Ready or
       tainted against the benchmark pods);
    2. a node labelled ``cnibench.io/role=<role>``, by name (refused when cordoned or tainted;
       it may still be becoming Ready);
    3. a schedulable, Ready node whose taints ``tolerations`` tolerate, not pinned or
       labelled for another role: workers before control-plane nodes, then by name, a
       node of its own while there are enough; after that a role shares the node of the
       role before it (with the spec's order client, server, egress-gw on two nodes: the
       client alone, server and gateway together), and :attr:`NodeChoice.same_node` says so.

    Raises
    ------
    cnibench.errors.ConfigError
        A pinned node does not exist or cannot hold the pods; a labelled node cannot hold them
        (one line naming the node and why).
    cnibench.errors.ProvisioningError
        A role is left and no node can hold benchmark pods (the line names each node and why).
    """
    pinned = pins.nodes if pins is not None else {}
    by_name = {node.name: node for node in nodes}
    for role, name in pinned.items():
        if name not in by_name:
            raise ConfigError(f"--nodes {role.value}={name}: this cluster has no node {name}")
    found: list[RoleNode | None] = [None] * len(roles)
    for index, role in enumerate(roles):
        if role not in pinned:
            continue
        name = pinned[role]
        why = _why_unusable(by_name[name], tolerations, strict=True)
        if why:
            raise ConfigError(f"--nodes {role.value}={name}: node {name} {why}")
        found[index] = RoleNode(role, by_name[name], ChosenBy.PINNED)
    labelled = sorted(
        (n for n in nodes if ROLE_LABEL in n.labels and n.name not in pinned.values()),
        key=lambda n: n.name,
    )
    for index, role in enumerate(roles):
        if found[index] is not None:
            continue
        taken = {r.node.name for r in found if r is not None and r.role is role}
        candidate = next(
            (n for n in labelled if n.labels[ROLE_LABEL] == role.value and n.name not in taken),
            None,
        )
        if candidate is None:
            continue
        why = _why_unusable(candidate, tolerations, strict=False)
        if why:
            raise ConfigError(
                f"node {candidate.name} is labelled {ROLE_LABEL}={role.value} but {why}"
                f" (remove the label or pin another node: --nodes {role.value}=NODE)"
            )
        found[index] = RoleNode(role, candidate, ChosenBy.LABEL)
    if all(r is not None for r in found):
        return NodeChoice(tuple(r for r in found if r is not None))
    usable = sorted(
        (n for n in nodes if not _why_unusable(n, tolerations, strict=True)),
        key=lambda n: (n.control_plane, n.name),
    )
    if not usable:
        reasons = "; ".join(
            f"{n.name} {_why_unusable(n, tolerations, strict=True)}"
            for n in sorted(nodes, key=lambda n: n.name)
        )
        left = ", ".join(role.value for role, r in zip(roles, found, strict=True) if r is None)
        raise ProvisioningError(
            f"no node can hold the benchmark pods for {left}: {reasons or 'the cluster has none'}"
        )
    reserved = {n.name for n in labelled} | {r.node.name for r in found if r is not None}
    free = [n for n in usable if n.name not in reserved]
    for index, role in enumerate(roles):
        if found[index] is not None:
            continue
        if free:
            node = free.pop(0)
        else:
            before = [r for r in found[:index] if r is not None]
            after = [r for r in found[index + 1 :] if r is not None]
            node = before[-1].node if before else after[0].node if after else usable[0]
        found[index] = RoleNode(role, node, ChosenBy.CHOSEN)
    return NodeChoice(tuple(r for r in found if r is not None))
