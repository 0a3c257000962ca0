"""What a session runs and in which order: conditions planned per CNI (:func:`plan_conditions`),
interleaved in rounds unless a reason keeps them sequential (:func:`run_design`)."""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from cnibench.backends.base import ClusterSpec
from cnibench.errors import ConfigError
from cnibench.scenarios import Condition, Scenario, scenario_named
from cnibench.session.config import CniRequest


@dataclass(frozen=True)
class PlannedCondition:
    """A condition of a scenario chosen for a session, before the CNIs are known.

    ``only`` holds the CNIs a ``scenario@cni1+cni2`` item restricts it to, parsed as ``--cni``
    values are (:meth:`CniRequest.parse`); empty means every CNI of the session.
    """

    scenario: Scenario
    condition: Condition
    only: CniRequest = field(default_factory=CniRequest)


@dataclass(frozen=True)
class PlannedRun:
    """One condition on one CNI: what :meth:`BenchSession.plan` returns, in running order.

    ``spec`` is the CNI as the session parsed and checked it (one of
    :attr:`BenchSession.specs`, or a CNI a ``--scenario`` item named): the runner and the
    scenario take it as it is."""

    scenario: Scenario
    spec: ClusterSpec
    condition: Condition

    @property
    def cni(self) -> str:
        """The CNI as results record it (:attr:`ClusterSpec.label`)."""
        return self.spec.label


def interleaved_rounds(plan: Sequence[PlannedRun], runs: int) -> list[tuple[int, PlannedRun]]:
    """``plan`` as interleaved rounds: the conditions of one scenario on one CNI (one
    cluster) take turns, one repetition each per round, the order rotating every round, so
    that drift of the machine during the session falls on treatment and control alike.

    With a control C and a treatment T that is C T, T C, C T, ...; with more conditions each
    leads in turn. Groups keep the plan's order (one cluster at a time).

    Parameters
    ----------
    plan:
        :meth:`BenchSession.plan`'s running order.
    runs:
        Rounds (the profile's runs per condition).

    Returns
    -------
    list of (round, PlannedRun)
        The running order; ``round`` is the repetition number of that run.

    Examples
    --------
    Two conditions ``C`` and ``T`` of one scenario and CNI, 3 runs:
    ``[(0, C), (0, T), (1, T), (1, C), (2, C), (2, T)]``.
    """
    order: list[tuple[int, PlannedRun]] = []
    for members in _groups(plan).values():
        for round_number in range(runs):
            order += [(round_number, m) for m in rotated(members, round_number)]
    return order


def _groups(plan: Sequence[PlannedRun]) -> dict[tuple[str, str], list[PlannedRun]]:
    """``plan`` by (scenario, CNI), in the plan's order: what may take turns on one cluster."""
    groups: dict[tuple[str, str], list[PlannedRun]] = {}
    for planned in plan:
        groups.setdefault((planned.scenario.name, planned.cni), []).append(planned)
    return groups


_T = TypeVar("_T")


def rotated(members: Sequence[_T], round_number: int) -> list[_T]:
    """``members`` in the order of round ``round_number``: each leads in turn."""
    shift = round_number % len(members)
    return [*members[shift:], *members[:shift]]


class RunOrder(enum.Enum):
    """How the conditions of one scenario on one CNI take their repetitions."""

    INTERLEAVED = "interleaved"
    """In rounds, one repetition each, every round setting each condition up again."""
    SEQUENTIAL = "sequential"
    """One condition after the other, all its repetitions on one set-up."""


SEQUENTIAL_ASKED = "--sequential was given"
"""The reason :func:`run_design` records when every group is sequential because it was asked."""
LONE_CONDITION = "one condition: nothing to alternate with"
"""The reason recorded for a condition that is alone in its group (nothing to interleave with,
so setting it up again every round would cost time and balance nothing)."""


@dataclass(frozen=True)
class GroupDesign:
    """The order of some conditions of one scenario on one CNI, and why.

    Attributes
    ----------
    scenario, cni:
        The group: conditions that may take turns (on one cluster, or on the few the scenario
        asks for, as wireguard's with and without encryption).
    order:
        Interleaved or sequential.
    conditions:
        Their ids, in the order planned.
    reason:
        Why sequential (``""`` when interleaved): :meth:`Scenario.sequential_reason`,
        :data:`LONE_CONDITION` or :data:`SEQUENTIAL_ASKED`.
    rounds:
        The running order of these conditions: (repetition, run), the repetition ``-1`` for a
        sequential condition (all its repetitions on one set-up).
    shared_with:
        The other CNIs whose groups of this scenario take turns with this one in the same
        rounds (:attr:`RunDesign.blocks`): clusters that stand side by side, as the lab's do,
        so that a CNI against its reference is paired by round too. Empty: its own rounds.
    """

    scenario: str
    cni: str
    order: RunOrder
    conditions: tuple[str, ...]
    reason: str = ""
    rounds: tuple[tuple[int, PlannedRun], ...] = ()
    shared_with: tuple[str, ...] = ()

    def as_json(self) -> dict[str, Any]:
        """What ``design.json`` records of the group."""
        return {
            "scenario": self.scenario,
            "cni": self.cni,
            "order": self.order.value,
            "conditions": list(self.conditions),
            "reason": self.reason,
            "rounds_shared_with": list(self.shared_with),
        }


@dataclass(frozen=True)
class RunDesign:
    """The running order of a session's plan (:func:`run_design`), group by group.

    ``blocks`` holds the indices of :attr:`groups` that run together, their rounds merged
    (:func:`block_rounds`); empty: every group on its own, in order."""

    groups: tuple[GroupDesign, ...]
    blocks: tuple[tuple[int, ...], ...] = ()

    @property
    def running_blocks(self) -> list[tuple[GroupDesign, ...]]:
        """The groups in running order, those that share their rounds together."""
        blocks = self.blocks or tuple((i,) for i in range(len(self.groups)))
        return [tuple(self.groups[i] for i in block) for block in blocks]

    @property
    def order(self) -> list[tuple[int, PlannedRun]]:
        """Every (repetition, run) in running order; repetition ``-1``: all of them."""
        return [step for block in self.running_blocks for step in block_rounds(block)]

    def shared_line(self) -> str:
        """One line naming the scenarios whose CNIs take turns in the same rounds (``""``
        when none do), e.g. ``rounds shared across clusters: egress on routed, vxlan``."""
        shared = [
            f"{block[0].scenario} on {', '.join(g.cni for g in block)}"
            for block in self.running_blocks
            if len(block) > 1
        ]
        if not shared:
            return ""
        return (
            f"rounds shared across clusters: {'; '.join(shared)} (the clusters stand side by"
            " side, so each CNI against its reference is paired by round)"
        )

    def sequential_line(self) -> str:
        """One line saying what runs sequentially and why (``""`` when nothing does), e.g.
        ``sequential, not interleaved: baseline on flannel (...-1000svc): 1000 further
        Services ...``; reasons shared by several groups are said once."""
        by_reason: dict[str, list[str]] = {}
        for group in self.groups:
            if group.order is RunOrder.SEQUENTIAL:
                named = ", ".join(group.conditions[:NAMED_SKIPS])
                if len(group.conditions) > NAMED_SKIPS:
                    named = f"{len(group.conditions)} conditions"
                where = f"{group.scenario} on {group.cni} ({named})"
                by_reason.setdefault(group.reason, []).append(where)
        if not by_reason:
            return ""
        parts = [f"{'; '.join(where)}: {reason}" for reason, where in by_reason.items()]
        return f"sequential, not interleaved: {' | '.join(parts)}"


def block_rounds(groups: Sequence[GroupDesign]) -> list[tuple[int, PlannedRun]]:
    """The running order of ``groups`` taking turns in the same rounds: round ``r`` holds
    each group's runs of round ``r``, the groups' order rotating every round as the
    conditions' does within a group (:func:`rotated`). A group alone keeps its order."""
    if len(groups) == 1:
        return list(groups[0].rounds)
    by_round: list[dict[int, list[tuple[int, PlannedRun]]]] = []
    for group in groups:
        steps: dict[int, list[tuple[int, PlannedRun]]] = {}
        for step in group.rounds:
            steps.setdefault(step[0], []).append(step)
        by_round.append(steps)
    numbers = sorted({n for steps in by_round for n in steps})
    order: list[tuple[int, PlannedRun]] = []
    for n in numbers:
        for steps in rotated(by_round, n):
            order += steps.get(n, [])
    return order


def run_design(
    plan: Sequence[PlannedRun],
    runs: int,
    *,
    sequential: bool = False,
    across_clusters: bool = False,
) -> RunDesign:
    """The running order of ``plan``: interleaved rounds wherever conditions can be set up
    side by side, sequential where they cannot, each group saying which and why. Pure.

    The conditions of one scenario on one CNI (one cluster) whose set-up can be repeated
    cheaply take turns in rounds (:func:`interleaved_rounds`), so that drift of the machine
    falls on treatment and control alike; then each condition whose scenario gives a
    :meth:`Scenario.sequential_reason` (thousands of Services) runs all its repetitions on one
    set-up. A condition alone in its group runs sequentially too (:data:`LONE_CONDITION`).

    Parameters
    ----------
    plan:
        :meth:`BenchSession.plan`'s running order.
    runs:
        Repetitions per condition (the profile's runs).
    sequential:
        ``--sequential``: every condition after the other, as planned.
    across_clusters:
        The backend's clusters stand side by side at little cost (the lab's namespaces:
        :attr:`Backend.clusters_coexist <cnibench.backends.base.Backend.clusters_coexist>`):
        the interleaved groups of one scenario on different CNIs take turns in the same rounds
        (:attr:`RunDesign.blocks`), so that drift falls on a CNI and its reference alike and
        the contrast between them is paired by round. A Kubernetes cluster per CNI costs
        minutes and a share of a small machine; there each CNI keeps its own rounds.
    """
    groups: list[GroupDesign] = []
    for (name, cni), members in _groups(plan).items():
        if sequential:
            groups.append(_sequential(name, cni, members, SEQUENTIAL_ASKED))
            continue
        cheap = [p for p in members if not p.scenario.sequential_reason(p.condition)]
        if len(cheap) > 1:
            groups.append(
                GroupDesign(
                    name,
                    cni,
                    RunOrder.INTERLEAVED,
                    tuple(p.condition.id for p in cheap),
                    rounds=tuple(interleaved_rounds(cheap, runs)),
                )
            )
        elif cheap:
            groups.append(_sequential(name, cni, cheap, LONE_CONDITION))
        costly: dict[str, list[PlannedRun]] = {}
        for p in members:
            reason = p.scenario.sequential_reason(p.condition)
            if reason:
                costly.setdefault(reason, []).append(p)
        groups += [_sequential(name, cni, some, reason) for reason, some in costly.items()]
    if not across_clusters:
        return RunDesign(tuple(groups))
    return _shared_across_clusters(groups)


def _shared_across_clusters(groups: Sequence[GroupDesign]) -> RunDesign:
    """``groups`` with the interleaved groups of each scenario in one block, placed where
    the first of them stands, each naming the CNIs it shares its rounds with."""
    blocks: list[list[int]] = []
    block_of: dict[str, int] = {}
    for index, group in enumerate(groups):
        if group.order is RunOrder.INTERLEAVED and group.scenario in block_of:
            blocks[block_of[group.scenario]].append(index)
            continue
        if group.order is RunOrder.INTERLEAVED:
            block_of[group.scenario] = len(blocks)
        blocks.append([index])
    shared = list(groups)
    for block in blocks:
        if len(block) > 1:
            cnis = [groups[i].cni for i in block]
            for i in block:
                others = tuple(c for c in cnis if c != groups[i].cni)
                shared[i] = dataclasses.replace(groups[i], shared_with=others)
    return RunDesign(tuple(shared), tuple(tuple(block) for block in blocks))


def _sequential(name: str, cni: str, members: Sequence[PlannedRun], reason: str) -> GroupDesign:
    return GroupDesign(
        name,
        cni,
        RunOrder.SEQUENTIAL,
        tuple(p.condition.id for p in members),
        reason,
        tuple((-1, p) for p in members),
    )


def run_key(planned: PlannedRun) -> tuple[str, str, str]:
    return (planned.scenario.name, planned.cni, planned.condition.id)


def plan_conditions(
    registry: Mapping[str, Scenario],
    items: Sequence[str] = (),
    conditions: Sequence[str] = (),
    *,
    pairs: int | None = None,
) -> list[PlannedCondition]:
    """The conditions a session runs, from scenario items and condition ids; pure (no backend).

    ``items`` are ``--scenario`` values, each comma-separated, ``NAME`` or ``NAME@cni1+cni2``
    (the scenario only on those CNIs, parsed here as ``--cni`` values are and checked against
    the backend by :meth:`BenchSession.plan`); none means every scenario of ``registry``.
    ``conditions`` keeps only the conditions with those ids; none keeps all.

    ``pairs`` is ``--pairs`` (:attr:`ScenarioOptions.pairs`): above 1, every chosen scenario
    must run pairs (:attr:`Scenario.runs_pairs`).

    Both front ends call this: ``cnibench run`` before a backend is chosen (so a misspelt name
    is reported before "no engine answers"), the pytest plugin for each test marked with a
    scenario.

    Raises
    ------
    cnibench.errors.ConfigError
        An unknown scenario, a CNI after ``@`` that is not ``NAME[:OPTION,...]``, no
        condition matching ``conditions`` (the choices listed), or ``pairs`` above 1 for a
        scenario that runs one client (named).
    """
    names = [item for arg in items for item in arg.split(",") if item] or list(registry)
    chosen = []
    for item in names:
        name, _, only = item.partition("@")
        chosen.append(
            (scenario_named(name, registry), CniRequest.parse(c for c in only.split("+") if c))
        )
    if pairs is not None and pairs > 1:
        single = [scenario.name for scenario, _ in chosen if not scenario.runs_pairs]
        if single:
            takes = [s.name for s in registry.values() if s.runs_pairs]
            raise ConfigError(
                f"--pairs {pairs}: {', '.join(dict.fromkeys(single))} run(s) one client/server"
                f" pair; only {' and '.join(takes) or 'no scenario'} runs several"
                " (choose it with --scenario, or leave --pairs out)"
            )
    planned = [
        PlannedCondition(scenario, condition, only)
        for scenario, only in chosen
        for condition in scenario.conditions()
        if not conditions or condition.id in conditions
    ]
    if not planned:
        known = [c.id for scenario, _ in chosen for c in scenario.conditions()]
        raise ConfigError(
            f"no condition matches --condition {', '.join(conditions)}:"
            f" choose from {', '.join(dict.fromkeys(known))}"
        )
    return planned


NAMED_SKIPS = 4
"""Skipped conditions of one scenario and CNI are named up to this many, else counted."""
