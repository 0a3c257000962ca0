"""The priority-case model and the reference precedence (Antrea's documented order).

Expected outcomes are worked out by hand from the documented order: tiered CNI layers by
(tier, priority) with the first match deciding and ``pass`` skipping to Kubernetes; then a
Kubernetes deny-all; then baseline-tier layers; else allowed.
"""

from __future__ import annotations

import pytest

from cnibench.errors import ConfigError
from cnibench.policy import (
    PRIORITY_CASES,
    TIERS,
    PolicyAction,
    PriorityCase,
    PriorityLayer,
    priority_case_named,
    reference_decision,
    reference_outcome,
)


def layer(action: str, tier: str = "application", priority: float = 5.0) -> PriorityLayer:
    return PriorityLayer(action, tier, priority)


# (allowed client reachable, second client reachable), derived by hand per built-in case.
BUILT_IN_EXPECTED = {
    "cni-allow": (True, True),
    "k8s-deny": (False, False),
    "k8s-deny-and-cni-allow": (True, False),
    "tier-securityops-deny-vs-application-allow": (False, True),
    "same-tier-priority": (True, True),
    "securityops-pass-and-k8s-deny": (False, False),
}


def test_built_in_cases_are_the_documented_set() -> None:
    assert [case.name for case in PRIORITY_CASES] == list(BUILT_IN_EXPECTED)


@pytest.mark.parametrize("name", list(BUILT_IN_EXPECTED), ids=list(BUILT_IN_EXPECTED))
def test_built_in_case_reference_for_the_allowed_client(name: str) -> None:
    assert reference_outcome(priority_case_named(name)) is BUILT_IN_EXPECTED[name][0]


@pytest.mark.parametrize("name", list(BUILT_IN_EXPECTED), ids=list(BUILT_IN_EXPECTED))
def test_built_in_case_reference_for_a_client_no_layer_names(name: str) -> None:
    case = priority_case_named(name)
    assert reference_outcome(case, matched=False) is BUILT_IN_EXPECTED[name][1]


def test_seed_003_antrea_experiment_is_won_by_the_securityops_deny() -> None:
    decision = reference_decision(priority_case_named("tier-securityops-deny-vs-application-allow"))
    assert decision.winner == "securityops@5:deny"
    assert not decision.reachable


HAND_CASES = [
    # Tier beats priority even when the numbers point the other way.
    ("emergency-allow-9000-beats-application-deny-1",
     False, (layer("deny", "application", 1), layer("allow", "emergency", 9000)), True),
    ("platform-deny-beats-application-allow",
     False, (layer("allow", "application", 1), layer("deny", "platform", 500)), False),
    # Within a tier the lower number wins, whatever the order of declaration.
    ("same-tier-deny-first",
     False, (layer("allow", priority=20), layer("deny", priority=2)), False),
    # Baseline comes after Kubernetes: a Kubernetes deny-all beats a baseline allow.
    ("k8s-deny-beats-baseline-allow", True, (layer("allow", "baseline", 1),), False),
    ("baseline-deny-alone", False, (layer("deny", "baseline", 1),), False),
    ("application-allow-beats-baseline-deny",
     False, (layer("deny", "baseline", 1), layer("allow", "application", 50)), True),
    # Pass skips every remaining tiered layer; Kubernetes, then baseline decide.
    ("pass-skips-allow-to-baseline-deny",
     False, (layer("pass", "emergency", 1), layer("allow", "application", 1),
             layer("deny", "baseline", 1)), False),
    ("pass-with-nothing-after-is-allowed", False, (layer("pass", "securityops", 3),), True),
    ("deny-before-pass-still-denies",
     True, (layer("deny", "emergency", 1), layer("pass", "securityops", 1)), False),
    ("allow-before-pass-beats-k8s-deny",
     True, (layer("allow", "emergency", 1), layer("pass", "securityops", 1)), True),
]  # fmt: skip


@pytest.mark.parametrize(
    ("name", "k8s_deny", "layers", "expected"), HAND_CASES, ids=[c[0] for c in HAND_CASES]
)
def test_reference_outcome_of_hand_worked_cases(name, k8s_deny, layers, expected) -> None:
    case = PriorityCase(name, kubernetes_deny=k8s_deny, layers=layers)
    assert reference_outcome(case) is expected


@pytest.mark.parametrize(
    ("k8s_deny", "winner"),
    [(True, "kubernetes deny-all"), (False, "default allow")],
    ids=["k8s-deny", "nothing-matches"],
)
def test_winner_when_no_layer_decides(k8s_deny: bool, winner: str) -> None:
    case = PriorityCase("x", kubernetes_deny=k8s_deny, layers=(layer("pass", "emergency", 1),))
    assert reference_decision(case).winner == winner


NINE = (1, 2, 3, 4, 5, 6, 7, 8, 9)


def test_tiers_are_antreas_ranks() -> None:
    assert dict(TIERS) == {
        "emergency": 50, "securityops": 100, "networkops": 150,
        "platform": 200, "application": 250, "baseline": 253,
    }  # fmt: skip


def test_layer_converts_a_plain_action_string() -> None:
    assert layer("pass", "securityops").action is PolicyAction.PASS


def test_ordered_layers_sort_by_tier_then_priority() -> None:
    case = PriorityCase(
        "o",
        kubernetes_deny=False,
        layers=(layer("allow", "baseline", 1), layer("deny", "application", 2),
                layer("allow", "application", 1), layer("deny", "emergency", 9999)),
    )  # fmt: skip
    assert [str(x) for x in case.ordered_layers] == [
        "emergency@9999:deny", "application@1:allow", "application@2:deny", "baseline@1:allow",
    ]  # fmt: skip


@pytest.mark.parametrize(
    ("layers", "needs"),
    [((layer("allow"), layer("deny", priority=9)), False),
     ((layer("deny", "securityops"),), True),
     ((layer("pass"),), True)],
    ids=["application-only", "other-tier", "pass"],
)  # fmt: skip
def test_needs_tiers(layers, needs: bool) -> None:
    assert PriorityCase("t", kubernetes_deny=False, layers=layers).needs_tiers is needs


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda: layer("reject"), "policy action 'reject'"),
        (lambda: layer("allow", "gold"), "unknown policy tier 'gold'"),
        (lambda: layer("allow", priority=0.5), "priority 0.5 is outside 1..10000"),
        (lambda: layer("allow", priority=10001), "priority 10001 is outside 1..10000"),
        (lambda: layer("allow", priority=float("nan")), "priority nan is outside"),
        (lambda: layer("pass", "baseline"), "pass layer cannot sit in the baseline tier"),
        (lambda: PriorityCase("empty", kubernetes_deny=False), "applies no policy"),
        (lambda: PriorityCase("Bad Name", kubernetes_deny=True), "'Bad Name' must use"),
        (lambda: PriorityCase("a+b", kubernetes_deny=True), "'a+b' must use"),
        (
            lambda: PriorityCase("dup", False, (layer("allow"), layer("deny"))),
            "same tier and priority: application@5:allow, application@5:deny",
        ),
        (
            lambda: PriorityCase("many", False, tuple(layer("allow", priority=p) for p in NINE)),
            "has 9 layers; at most 8",
        ),
        (lambda: priority_case_named("nope"), "unknown priority case 'nope': choose one of"),
    ],
    ids=["action", "tier", "priority-low", "priority-high", "priority-nan", "baseline-pass",
         "empty", "name", "name-plus", "same-rank", "too-many", "unknown-case"],
)  # fmt: skip
def test_invalid_input_is_a_one_line_config_error(make, message: str) -> None:
    with pytest.raises(ConfigError) as info:
        make()
    assert message in str(info.value)
    assert "\n" not in str(info.value)
