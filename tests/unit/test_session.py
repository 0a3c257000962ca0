from __future__ import annotations

import pytest

from cnibench.backends.base import ClusterSpec, NodeRole
from cnibench.errors import ConfigError
from cnibench.scenarios import SCENARIOS, scenario_named
from cnibench.session import (
    CniRequest,
    SessionConfig,
    choose_cluster,
    select_backend,
    validate_cnis,
)


def test_lab_defaults_to_both_datapath_profiles():
    backend, reason = select_backend("lab")
    assert backend.name == "lab"
    assert reason == "--cluster lab"
    assert validate_cnis(backend, CniRequest()) == (ClusterSpec("routed"), ClusterSpec("vxlan"))
    vxlan = CniRequest.parse(["vxlan", "vxlan"])
    assert validate_cnis(backend, vxlan) == vxlan.specs


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
    vxlan = ClusterSpec(cni="vxlan", options={"napi": "threaded"})
    assert wg.cluster_spec(vxlan, on) == ClusterSpec(
        cni="vxlan", encryption="wireguard", options={"napi": "threaded"}
    )
    assert wg.cluster_spec(vxlan, off) == vxlan
    assert wg.cluster_spec(vxlan, on).key == "vxlan+wireguard+napi=threaded"


def test_cluster_spec_default_roles():
    assert ClusterSpec(cni="routed").roles == (NodeRole.CLIENT, NodeRole.SERVER, NodeRole.EGRESS_GW)


def _no_engine() -> str:
    return ""


def _engine_answers() -> str:
    return "docker"


def _engine_must_not_be_asked() -> str:
    raise AssertionError("the container engine was asked, though the request decides alone")


def test_a_kubernetes_cni_without_any_cluster_says_what_is_missing_and_what_to_run() -> None:
    """The engine probe is faked to answer nothing (no engine may be started here)."""
    with pytest.raises(ConfigError) as caught:
        choose_cluster("auto", CniRequest.parse(["antrea"]), engine=_no_engine)
    message = str(caught.value)
    assert "\n" not in message
    assert "needs a Kubernetes cluster" in message
    assert "no container engine answers" in message
    assert 'eval "$(cnibench engine up)"' in message
    assert "KUBECONFIG" in message


def test_a_kubernetes_cni_on_the_explicit_lab_names_the_lab_datapaths() -> None:
    backend, _ = select_backend("lab")
    with pytest.raises(ConfigError, match="routed / vxlan"):
        validate_cnis(backend, CniRequest.parse(["cilium"]))


@pytest.mark.parametrize(
    ("cnis", "engine", "expected"),
    [
        (["vxlan"], _engine_must_not_be_asked, "lab"),
        (["routed:napi=threaded", "vxlan"], _engine_must_not_be_asked, "lab"),
        (["flannel"], _engine_answers, "kind"),
        (["cilium:mode=kpr"], _engine_answers, "kind"),
        ([], _engine_answers, "kind"),
        ([], _no_engine, "lab"),
    ],
    ids=["lab-datapath", "two-datapaths", "kube-cni", "kube-cni-options", "none-engine", "none"],
)
def test_cluster_auto_is_chosen_from_the_request(cnis, engine, expected) -> None:
    """Issue 24: a lab datapath selects the lab even when an engine answers. The engine probe
    is a fake (answers "docker", or nothing), since no engine may be started here; with lab
    datapaths it must not even be asked."""
    cluster, reason = choose_cluster("auto", CniRequest.parse(cnis), engine=engine)
    assert cluster == expected
    assert reason.startswith("--cluster auto: ")


def test_a_mixed_request_says_how_to_split_it() -> None:
    with pytest.raises(ConfigError) as caught:
        choose_cluster(
            "auto", CniRequest.parse(["vxlan", "flannel", "routed"]), engine=_engine_answers
        )
    message = str(caught.value)
    assert "\n" not in message
    assert "cnibench run --cni vxlan --cni routed ... and cnibench run --cni flannel ..." in (
        message
    )


def test_an_unknown_name_without_an_engine_is_unknown_not_a_missing_cluster() -> None:
    with pytest.raises(ConfigError, match="unknown --cni 'weave': choose a lab datapath"):
        choose_cluster("auto", CniRequest.parse(["weave"]), engine=_no_engine)


def test_a_lab_datapath_on_kind_names_the_lab() -> None:
    from cnibench.backends.kube import ExistingProvider, KubeBackend

    kube = KubeBackend(ExistingProvider())  # checks names only: no cluster is reached
    with pytest.raises(ConfigError, match="'vxlan' is a lab datapath and a Kubernetes cluster"):
        validate_cnis(kube, CniRequest.parse(["vxlan"]))


def test_cni_values_are_parsed_once_into_specs() -> None:
    request = CniRequest.parse(["cilium:l7,mode=kube-proxy", "cilium:mode=kube-proxy,l7", "vxlan"])
    assert request.specs == (
        ClusterSpec(cni="cilium", options={"mode": "kube-proxy", "features": "l7"}),
        ClusterSpec(cni="vxlan"),
    )
    assert request.labels == ("cilium:l7,mode=kube-proxy", "vxlan")
    # A notebook may give labels: they are parsed on construction, the same way.
    assert SessionConfig(cnis=("vxlan", "vxlan")).cnis == CniRequest.parse(["vxlan"])
