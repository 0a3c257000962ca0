"""Issue 33, item 1: a policy with more rules than the cluster's CNI is configured for is
skipped, not attempted. The bound is read from the CNI's ConfigMap
(:func:`cnibench.backends.kube.limits.policy_rule_limit`); the API is a stand-in object here
(the kube tier reads a real API server: tests/kube/test_kube_cli.py)."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest
from kubernetes.client.exceptions import ApiException

from cnibench.backends.base import ClusterSpec
from cnibench.backends.kube.cni import cni_definition
from cnibench.backends.kube.cni_types import ConfigLimit
from cnibench.backends.kube.limits import policy_rule_limit
from cnibench.scenarios import build_scenarios
from cnibench.scenarios.options import ScenarioOptions

LIMIT = ConfigLimit("ns", "cfg", "map-max", default=1000, counts="slots", takes=(100, 5000))


class StandInCore:
    """Answers ``read_namespaced_config_map`` for one ConfigMap (else 404), like
    :class:`kubernetes.client.CoreV1Api`; counts the reads."""

    def __init__(self, data: dict[str, str] | None, *, status: int = 404) -> None:
        self.data = data
        self.status = status
        self.reads: list[tuple[str, str]] = []

    def read_namespaced_config_map(self, name: str, namespace: str) -> Any:
        self.reads.append((namespace, name))
        if self.data is None or (namespace, name) != ("ns", "cfg"):
            raise ApiException(status=self.status, reason="stand-in")
        return SimpleNamespace(data=self.data)


@pytest.mark.parametrize(
    ("data", "rules", "reason"),
    [
        ({"map-max": "4096"}, 4096, "map-max=4096 in ns/cfg: at most 4096 slots"),
        ({"map-max": " 250 \n"}, 250, "map-max=250 in ns/cfg: at most 250 slots"),
        ({}, 1000, "map-max unset in ns/cfg, so 1000: at most 1000 slots"),
        ({"other": "1"}, 1000, "map-max unset in ns/cfg, so 1000: at most 1000 slots"),
        ({"map-max": "7"}, 100, "map-max=7 in ns/cfg, taken as 100: at most 100 slots"),
        ({"map-max": "70000"}, 5000, "map-max=70000 in ns/cfg, taken as 5000: at most 5000 slots"),
    ],
)
def test_the_bound_is_the_configured_value_the_default_or_the_nearest_taken(
    data: dict[str, str], rules: int, reason: str
) -> None:
    core = StandInCore(data)
    limit = policy_rule_limit(core, LIMIT)
    assert limit is not None
    assert (limit.rules, limit.reason) == (rules, reason)
    assert core.reads == [("ns", "cfg")]


@pytest.mark.parametrize(
    "core",
    [
        StandInCore(None),  # no such ConfigMap
        StandInCore(None, status=403),  # no right to read it
        StandInCore({"map-max": "16k"}),  # not a whole number
        StandInCore({"map-max": ""}),
    ],
)
def test_a_bound_that_cannot_be_told_skips_nothing(core: StandInCore) -> None:
    assert policy_rule_limit(core, LIMIT) is None


def test_cilium_names_its_policy_map_and_flannel_calico_name_none() -> None:
    """Cilium's definition carries bpf-policy-map-max of kube-system/cilium-config, whose
    default (16384) holds the largest policy the scenario may apply; the others name none."""
    from cnibench.policy import MAX_EXTRA_RULES

    cilium = cni_definition(ClusterSpec("cilium")).policy_limit
    assert cilium is not None
    assert (cilium.namespace, cilium.config_map, cilium.key) == (
        "kube-system",
        "cilium-config",
        "bpf-policy-map-max",
    )
    assert cilium.default > MAX_EXTRA_RULES + 1
    assert cilium.takes[0] < MAX_EXTRA_RULES + 1 <= cilium.takes[1]
    for cni in ("flannel", "calico", "kindnet"):
        assert cni_definition(ClusterSpec(cni)).policy_limit is None, cni


def test_policy_conditions_count_their_rules_when_the_policy_is_on() -> None:
    scenario = build_scenarios(ScenarioOptions(rules=(0, 300), clients=(1,)))["policy"]
    counted = {c.id: scenario.policy_rules(c) for c in scenario.conditions()}
    on = {cid: n for cid, n in counted.items() if cid.startswith("on-")}
    off = {cid: n for cid, n in counted.items() if cid.startswith("off-")}
    assert off
    assert set(off.values()) == {0}
    assert on
    assert {n for cid, n in on.items() if "-r300-" in cid} == {301}
    assert {n for cid, n in on.items() if "-r0-" in cid} == {1}
    egress = build_scenarios()["egress"]
    assert {egress.policy_rules(c) for c in egress.conditions()} == {0}
