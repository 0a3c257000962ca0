"""The priority scenario's conditions and what each needs from a cluster (no cluster here)."""

from __future__ import annotations

import pytest

from cnibench.backends.base import Capability
from cnibench.scenarios import SCENARIOS

SCENARIO = SCENARIOS["priority"]
CONDITIONS = {c.id: c for c in SCENARIO.conditions()}


def test_one_condition_per_built_in_case() -> None:
    assert list(CONDITIONS) == [
        "cni-allow",
        "k8s-deny",
        "k8s-deny-and-cni-allow",
        "tier-securityops-deny-vs-application-allow",
        "same-tier-priority",
        "securityops-pass-and-k8s-deny",
    ]


def test_priority_sits_between_l7_and_wireguard_in_report_order() -> None:
    names = list(SCENARIOS)
    assert names.index("priority") == names.index("l7") + 1
    assert names.index("wireguard") == names.index("priority") + 1


@pytest.mark.parametrize(
    ("case", "reference", "winner"),
    [
        ("k8s-deny-and-cni-allow", "allow", "application@5:allow"),
        ("tier-securityops-deny-vs-application-allow", "deny", "securityops@5:deny"),
        ("securityops-pass-and-k8s-deny", "deny", "kubernetes deny-all"),
    ],
    ids=["fig8-c", "antrea-tiers", "pass"],
)
def test_condition_records_the_reference_and_its_winner(
    case: str, reference: str, winner: str
) -> None:
    parameters = CONDITIONS[case].parameters
    assert parameters["reference"] == reference
    assert parameters["reference_winner"] == winner


@pytest.mark.parametrize(
    ("case", "needed"),
    [
        ("cni-allow", {Capability.NETWORK_POLICY}),
        ("k8s-deny", {Capability.NETWORK_POLICY}),
        ("same-tier-priority", {Capability.NETWORK_POLICY}),
        ("tier-securityops-deny-vs-application-allow",
         {Capability.NETWORK_POLICY, Capability.POLICY_TIERS}),
        ("securityops-pass-and-k8s-deny", {Capability.NETWORK_POLICY, Capability.POLICY_TIERS}),
    ],
    ids=["cni-allow", "k8s-deny", "same-tier", "tiers", "pass"],
)  # fmt: skip
def test_required_capabilities(case: str, needed: set[Capability]) -> None:
    assert SCENARIO.required_capabilities(CONDITIONS[case]) == needed
