"""The policy and priority scenarios wait as long as the cluster says its policies take to
come into force (:attr:`~cnibench.backends.base.Policies.policy_settle_seconds`,
:attr:`~cnibench.backends.base.Policies.priority_settle_seconds`), whatever its backend is
called.

The clusters and pods here are stand-ins: the point is what the scenario does with the time a
cluster states, which no real backend lets a test choose. Each stand-in calls itself ``lab``,
whose policies were once assumed to need no wait by name.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field

import pytest

from cnibench.backends.base import CommandResult, Node, NodeRole
from cnibench.policy import PolicySpec, PriorityCase
from cnibench.scenarios.base import Prepared
from cnibench.scenarios.policy import PolicyScenario
from cnibench.scenarios.priority import PriorityScenario
from cnibench.scenarios.profiles import profile_named


@dataclass
class ScriptedPod:
    """A pod answering the scenarios' probes: the TCP probe script with ``probe_answer`` per
    target (one answer per call, the last repeating), curl with HTTP 200."""

    name: str
    ip: str
    role: NodeRole = NodeRole.CLIENT
    probe_answers: list[str] = field(default_factory=lambda: ["open"])
    runs: list[float] = field(default_factory=list)
    """``time.monotonic()`` of each command run."""

    @property
    def node(self) -> Node:
        return Node(f"node-{self.role.value}", self.role, "192.0.2.1")

    def run(self, argv: Sequence[str], *, timeout: float) -> CommandResult:
        self.runs.append(time.monotonic())
        if argv[0] == "curl":
            return CommandResult(tuple(argv), 0, "200", "", 0.0)
        answer = self.probe_answers.pop(0) if len(self.probe_answers) > 1 else self.probe_answers[0]
        targets = [arg for arg in argv[4:]]
        stdout = "".join(f"{target} {answer}\n" for target in targets)
        return CommandResult(tuple(argv), 0, stdout, "", 0.0)


@dataclass
class SettlingCluster:
    """Only what the two scenarios ask of a cluster here, with chosen settle times."""

    policy_settle_seconds: float = 0.0
    priority_settle_seconds: float = 0.0
    backend: str = "lab"
    applied_at: list[float] = field(default_factory=list)
    removed_at: list[float] = field(default_factory=list)

    def apply_priority_case(self, case: PriorityCase, spec: PolicySpec) -> None:
        self.applied_at.append(time.monotonic())

    def remove_priority_case(self) -> None:
        self.removed_at.append(time.monotonic())


def _policy_on_with_denied_pod_open_at_first() -> tuple[PolicyScenario, Prepared, object]:
    scenario = PolicyScenario()
    condition = next(c for c in scenario.conditions() if c.parameters["policy"] == "on")
    prepared = Prepared()
    prepared.endpoints["server"] = ScriptedPod("pol-srv", "10.0.0.2", NodeRole.SERVER)
    prepared.endpoints["client0"] = ScriptedPod("pol-cli0", "10.0.0.3")
    # The CNI has not programmed the policy at the first probe: the denied pod still gets in.
    prepared.endpoints["denied"] = ScriptedPod(
        "pol-deny", "10.0.0.4", probe_answers=["open", "timeout"]
    )
    return scenario, prepared, condition


@pytest.mark.parametrize(
    ("settle", "held", "attempts"),
    [(0.0, False, 1), (5.0, True, 2)],
    ids=["no-settle-time-first-matrix-is-the-answer", "settle-time-probes-again"],
)
def test_policy_verification_probes_again_for_the_clusters_settle_time(
    settle: float, held: bool, attempts: int
) -> None:
    scenario, prepared, condition = _policy_on_with_denied_pod_open_at_first()
    cluster = SettlingCluster(policy_settle_seconds=settle)
    verification = scenario.verify(cluster, prepared, condition)  # type: ignore[arg-type]
    assert verification.ok is held, verification.detail
    assert verification.evidence["attempts"] == attempts


@pytest.mark.parametrize("settle", [0.0, 0.6], ids=["no-settle-time", "settle-0.6s"])
def test_priority_probes_after_the_clusters_settle_time(settle: float) -> None:
    scenario = PriorityScenario()
    condition = scenario.conditions()[0]
    server = ScriptedPod("prio-srv", "10.0.0.2", NodeRole.SERVER)
    client = ScriptedPod("prio-cli", "10.0.0.3")
    other = ScriptedPod("prio-other", "10.0.0.4")
    prepared = Prepared(endpoints={"server": server, "client": client, "other": other})
    cluster = SettlingCluster(priority_settle_seconds=settle)
    scenario.measure(cluster, prepared, condition, profile_named("smoke"), 0)  # type: ignore[arg-type]
    (applied,) = cluster.applied_at
    (removed,) = cluster.removed_at
    first_probe_with_case = min(t for t in [*client.runs, *other.runs] if t > applied)
    first_probe_after_removal = min(t for t in client.runs if t > removed)
    for waited in (first_probe_with_case - applied, first_probe_after_removal - removed):
        assert settle <= waited < settle + 0.5
