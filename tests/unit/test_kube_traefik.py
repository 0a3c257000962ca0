"""``--cni X:gateway=traefik``: Traefik as the Gateway API implementation beside any CNI."""

from __future__ import annotations

from typing import Any

import pytest

from cnibench.backends.base import Capability, ClusterSpec
from cnibench.backends.kube import traefik
from cnibench.backends.kube.cni import cni_definition
from cnibench.backends.kube.images import OFFLINE_IMAGES, Images
from cnibench.backends.kube.offline.plan import image_recipes, pod_image_tags
from cnibench.backends.kube.offline.recipes import OfflineVersions
from cnibench.backends.kube.render import ROLE_LABEL, gateway
from cnibench.errors import ConfigError


def _by_kind(objects: Any) -> dict[str, dict[str, Any]]:
    return {o["kind"]: o for o in objects}


@pytest.mark.parametrize(
    ("label", "with_gateway"),
    [
        ("flannel", "flannel:gateway=traefik"),
        ("kube-router", "kube-router:gateway=traefik"),
        ("cilium:mode=kube-proxy", "cilium:gateway=traefik,mode=kube-proxy"),
    ],
)
def test_any_cni_gets_traffic_splitting_from_traefik(label: str, with_gateway: str) -> None:
    plain = cni_definition(ClusterSpec.from_label(label), images=Images())
    assert Capability.TRAFFIC_SPLIT not in plain.capabilities
    definition = cni_definition(ClusterSpec.from_label(with_gateway), images=Images())
    assert Capability.TRAFFIC_SPLIT in definition.capabilities
    assert Capability.TRAFFIC_SPLIT not in definition.capability_hints
    assert definition.gateway_class == traefik.GATEWAY_CLASS
    assert definition.gateway_api_crds == OfflineVersions().gateway_api
    assert definition.gateway_api_crds_dir == ""  # the public set downloads the release
    assert definition.manifests == plain.manifests  # the CNI itself is unchanged
    assert definition.readiness[: len(plain.readiness)] == plain.readiness
    (added,) = definition.readiness[len(plain.readiness) :]
    assert (added.kind, added.namespace, added.name) == ("Deployment", "traefik", "traefik")


def test_the_offline_set_applies_the_crds_from_the_module_cache() -> None:
    definition = cni_definition(
        ClusterSpec.from_label("flannel:gateway=traefik"), images=OFFLINE_IMAGES
    )
    assert definition.gateway_api_crds_dir.endswith(
        f"sigs.k8s.io/gateway-api@{OfflineVersions().gateway_api}/config/crd/standard"
    )
    deployment = _by_kind(definition.addon_manifests)["Deployment"]
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    assert container["image"] == OFFLINE_IMAGES.traefik


def test_traefik_serves_its_gateway_class_on_the_gateway_listener_port() -> None:
    objects = traefik.traefik_manifests("img:1")
    assert [o["kind"] for o in objects] == [
        "Namespace",
        "ServiceAccount",
        "ClusterRole",
        "ClusterRoleBinding",
        "GatewayClass",
        "Deployment",
    ]
    found = _by_kind(objects)
    assert found["GatewayClass"]["spec"]["controllerName"] == traefik.CONTROLLER
    spec = found["Deployment"]["spec"]["template"]["spec"]
    assert spec["hostNetwork"] is True
    assert spec["nodeSelector"] == {ROLE_LABEL: "egress-gw"}
    args = spec["containers"][0]["args"]
    assert "--providers.kubernetesGateway=true" in args
    # The split Gateway's listener port is an entry point of Traefik's.
    listener = gateway("g", namespace="n", session="s", gateway_class="traefik")
    (port,) = {entry["port"] for entry in listener["spec"]["listeners"]}
    assert f"--entryPoints.web.address=:{port}" in args
    # Traefik writes the node's address into each Gateway's status, which cnibench reads.
    assert "--providers.kubernetesGateway.statusAddress.ip=$(HOST_IP)" in args
    env = {e["name"]: e for e in spec["containers"][0]["env"]}
    assert env["HOST_IP"]["valueFrom"]["fieldRef"]["fieldPath"] == "status.hostIP"


def test_traefik_may_read_routes_and_write_their_status() -> None:
    role = _by_kind(traefik.traefik_manifests("img:1"))["ClusterRole"]
    granted = {
        (group, resource): set(rule["verbs"])
        for rule in role["rules"]
        for group in rule["apiGroups"]
        for resource in rule["resources"]
    }
    gw = "gateway.networking.k8s.io"
    for resource in ("gateways", "httproutes", "gatewayclasses"):
        assert {"get", "list", "watch"} <= granted[(gw, resource)]
        assert "update" in granted[(gw, f"{resource}/status")]
    assert {"list", "watch"} <= granted[("discovery.k8s.io", "endpointslices")]


def test_a_cni_with_its_own_gateway_refuses_a_second() -> None:
    with pytest.raises(ConfigError, match="choose one"):
        cni_definition(
            ClusterSpec.from_label("cilium:features=gateway-api,gateway=traefik"), images=Images()
        )
    with pytest.raises(ConfigError, match="gateway=nginx: choose traefik"):
        cni_definition(ClusterSpec.from_label("flannel:gateway=nginx"), images=Images())


def test_traefiks_image_is_a_static_binary_built_only_when_asked_for() -> None:
    assert OFFLINE_IMAGES.traefik not in pod_image_tags(OFFLINE_IMAGES, cnis=["flannel"])
    (recipe,) = (
        r
        for r in image_recipes(OFFLINE_IMAGES, cnis=["traefik"])
        if r.tag == OFFLINE_IMAGES.traefik
    )
    assert recipe.rootfs == ""
    assert recipe.files == {"/usr/local/bin/traefik": "traefik"}
    assert traefik.image_version(OFFLINE_IMAGES.traefik) == OfflineVersions().traefik


def _route(weights: dict[str, int], conditions: list[dict[str, str]] | None) -> dict[str, Any]:
    refs = [{"name": n, "port": 80, "weight": w} for n, w in weights.items()]
    route: dict[str, Any] = {"spec": {"rules": [{"backendRefs": refs}]}}
    if conditions is not None:
        route["status"] = {"parents": [{"conditions": conditions}]}
    return route


ACCEPTED = {"type": "Accepted", "status": "True"}
RESOLVED = {"type": "ResolvedRefs", "status": "True"}


@pytest.mark.parametrize(
    ("route", "problem"),
    [
        (_route({"split-v1": 60, "split-v2": 40}, [ACCEPTED, RESOLVED]), ""),
        (_route({"split-v1": 60, "split-v2": 40}, None), "no Gateway implementation"),
        (
            _route(
                {"split-v1": 60, "split-v2": 40},
                [
                    ACCEPTED,
                    {"type": "ResolvedRefs", "status": "False", "message": "svc split-v2 absent"},
                ],
            ),
            "ResolvedRefs is not True: svc split-v2 absent",
        ),
        (_route({"split-v1": 50, "split-v2": 50}, [ACCEPTED, RESOLVED]), "weights are"),
    ],
    ids=["serving", "not-taken", "unresolved", "other-weights"],
)
def test_a_split_serves_only_once_its_route_is_taken_at_the_weights_asked_for(
    route: dict[str, Any], problem: str
) -> None:
    from cnibench.backends.kube.split import route_problem

    found = route_problem(route, {"split-v1": 60, "split-v2": 40})
    assert (found == "") if not problem else (problem in found), found
