from __future__ import annotations

import pytest

from cnibench.backends.base import ClusterSpec, NodeRole
from cnibench.errors import ConfigError
from cnibench.scenarios import SCENARIOS, scenario_named
from cnibench.session import select_backend, validate_cnis


def test_lab_defaults_to_both_datapath_profiles():
    backend, reason = select_backend("lab")
    assert backend.name == "lab"
    assert reason == "--cluster lab"
    assert validate_cnis(backend, []) == ("routed", "vxlan")
    assert validate_cnis(backend, ["vxlan", "vxlan"]) == ("vxlan",)


def test_unknown_scenario_lists_choices():
    with pytest.raises(
        ConfigError, match=r"unknown scenario .nope.: choose one of baseline, egress"
    ):
        scenario_named("nope")


def test_condition_ids_are_unique_and_readable():
    for scenario in SCENARIOS.values():
        ids = [c.id for c in scenario.conditions()]
        assert len(ids) == len(set(ids))
        assert all(" " not in i and i for i in ids)
    assert [c.id for c in SCENARIOS["egress"].conditions()] == ["gateway-off", "gateway-on"]


def test_wireguard_on_needs_its_own_cluster():
    wg = SCENARIOS["wireguard"]
    on, off = (
        next(c for c in wg.conditions() if c.parameters["encryption"] == e) for e in ("on", "off")
    )
    assert wg.cluster_spec("vxlan", on) == ClusterSpec(cni="vxlan", encryption="wireguard")
    assert wg.cluster_spec("vxlan", off).key == "vxlan"
    assert wg.cluster_spec("vxlan", on).key == "vxlan+wireguard"


def test_cluster_spec_default_roles():
    assert ClusterSpec(cni="routed").roles == (NodeRole.CLIENT, NodeRole.SERVER, NodeRole.EGRESS_GW)


def test_a_kubernetes_cni_without_any_cluster_says_what_is_missing_and_what_to_run() -> None:
    backend, _ = select_backend("lab")
    with pytest.raises(ConfigError) as caught:
        validate_cnis(backend, ["antrea"], requested="auto")
    message = str(caught.value)
    assert "\n" not in message
    assert "needs a Kubernetes cluster" in message
    assert "no container engine answers" in message
    assert "cnibench engine up" in message
    assert "KUBECONFIG" in message


def test_a_kubernetes_cni_on_the_explicit_lab_names_the_lab_datapaths() -> None:
    backend, _ = select_backend("lab")
    with pytest.raises(ConfigError, match="routed / vxlan"):
        validate_cnis(backend, ["cilium"], requested="lab")
