"""A policy condition names only what its backend lets it choose (issue 31, item 2): the lab
enforces a policy with the engine a condition names (iptables, nftables, nftables-set), a
Kubernetes CNI with its own datapath whatever it is asked, so there a condition names no engine
and no ``rules_see`` and one measurement is never recorded twice under different labels.

The backends are the real ones, built as a session builds them (``--cluster kind`` names its
backend without asking a container engine); nothing is provisioned.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from cnibench.backends.base import Backend, PolicyChoices
from cnibench.errors import ConfigError
from cnibench.policy import PolicyEngine, RulesSee
from cnibench.scenarios import build_scenarios
from cnibench.scenarios.options import parse_scenario_options
from cnibench.scenarios.policy import PolicyScenario
from cnibench.session import CniRequest, plan_conditions, select_backend


def _backend(cluster: str, cni: str) -> Backend:
    backend, _ = select_backend(cluster, CniRequest.parse([cni]))
    return backend


def _policy_on(backend: Backend, **options: str) -> list[dict[str, object]]:
    scenario = PolicyScenario(parse_scenario_options(**options)).on_backend(backend)
    return [
        {"id": c.id, **c.parameters}
        for c in scenario.conditions()
        if c.parameters["policy"] == "on"
    ]


@pytest.mark.parametrize("kube_cni", ["kube-router", "cilium", "calico", "antrea"])
def test_a_kubernetes_cni_s_policy_conditions_name_no_engine_and_no_rules_see(
    kube_cni: str,
) -> None:
    on = _policy_on(_backend("kind", kube_cni), rules="0,100", clients="1")
    assert [c["id"] for c in on] == [
        "on-same-node-r0-c1",
        "on-same-node-r100-c1",
        "on-cross-node-r0-c1",
        "on-cross-node-r100-c1",
    ]
    assert not [c for c in on if "engine" in c or "rules_see" in c]


def test_the_lab_keeps_its_engines_in_parameters_and_ids() -> None:
    on = _policy_on(_backend("lab", "vxlan"), rules="0", clients="1")
    assert [c["id"] for c in on] == [
        f"on-{placement}-{engine}-r0-c1-new-connections"
        for placement in ("same-node", "cross-node")
        for engine in ("iptables", "nftables-set")
    ]
    assert {c["engine"] for c in on} == {"iptables", "nftables-set"}
    assert {c["rules_see"] for c in on} == {"new-connections"}


def test_engine_given_on_the_lab_chooses_among_its_engines() -> None:
    on = _policy_on(_backend("lab", "routed"), rules="0", clients="1", engine="all")
    assert {c["engine"] for c in on} == {e.value for e in PolicyEngine}


def test_engine_given_for_a_kubernetes_cni_is_refused_in_one_line() -> None:
    scenario = PolicyScenario(parse_scenario_options(engine="nftables-set"))
    with pytest.raises(ConfigError) as caught:
        scenario.on_backend(_backend("kind", "kube-router"))
    message = str(caught.value)
    assert message.startswith("--engine nftables-set: each CNI here enforces a policy")
    assert "leave --engine out (backend kube)" in message
    assert "\n" not in message


def test_rules_see_asked_of_a_backend_without_the_choice_is_refused() -> None:
    scenario = PolicyScenario(rules_see=[RulesSee.EVERY_PACKET])
    with pytest.raises(ConfigError, match=r"^rules_see every-packet: each CNI here"):
        scenario.on_backend(_backend("kind", "cilium"))


def test_an_engine_the_backend_does_not_offer_is_refused_naming_those_it_offers() -> None:
    with pytest.raises(ConfigError, match=r"^--engine nftables: this backend offers iptables$"):
        PolicyScenario(
            parse_scenario_options(engine="nftables"),
            choices=PolicyChoices(engines=(PolicyEngine.IPTABLES,), rules_see=tuple(RulesSee)),
        )


def test_planning_for_the_same_backend_twice_gives_the_same_conditions() -> None:
    backend = _backend("kind", "flannel")
    once = PolicyScenario().on_backend(backend)
    assert once.on_backend(backend).conditions() == once.conditions()


def test_other_scenarios_plan_the_same_conditions_on_every_backend() -> None:
    registry = build_scenarios()
    kube = {name: s.on_backend(_backend("kind", "flannel")) for name, s in registry.items()}
    for name in ("baseline", "egress", "split", "l7", "priority", "wireguard"):
        assert kube[name].conditions() == registry[name].conditions(), name


def test_the_enforcement_contrast_pairs_kubernetes_conditions_without_engine() -> None:
    """The verdict's contrasts still find their pairs when no engine is named."""
    scenario = PolicyScenario(parse_scenario_options(rules="0,100", clients="1")).on_backend(
        _backend("kind", "kube-router")
    )
    by_id = {c.id: c.parameters for c in scenario.conditions()}
    rules, enforcement = scenario.contrasts
    assert rules.is_control_of(by_id["on-cross-node-r0-c1"], by_id["on-cross-node-r100-c1"])
    assert enforcement.is_control_of(by_id["off-cross-node-c1"], by_id["on-cross-node-r0-c1"])


def test_kubernetes_condition_ids_plan_on_kube_and_lab_ids_do_not() -> None:
    backend = _backend("kind", "kube-router")
    registry = {name: s.on_backend(backend) for name, s in build_scenarios().items()}
    planned = plan_conditions(registry, ["policy"], ["on-cross-node-r0-c1"])
    assert [p.condition.id for p in planned] == ["on-cross-node-r0-c1"]
    with pytest.raises(ConfigError, match="no condition matches"):
        plan_conditions(registry, ["policy"], ["on-cross-node-iptables-r0-c1-new-connections"])


def test_cnibench_run_refuses_engine_on_kind_before_anything_is_asked(tmp_path: Path) -> None:
    """Through the command line: exit 2, one line, nothing written, before kind's preflight
    (which would say kind is missing on this machine)."""
    results = tmp_path / "results"
    done = subprocess.run(
        [
            sys.executable, "-m", "cnibench.cli", "run", "--cluster", "kind",
            "--cni", "kube-router", "--scenario", "policy", "--engine", "iptables",
            "--results-dir", str(results),
        ],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert done.returncode == 2, done.stderr
    (line,) = done.stderr.strip().splitlines()
    assert line.startswith("cnibench: error: --engine iptables: each CNI here enforces"), line
    assert not results.exists()
