"""Priority cases on the Kubernetes backend against a real kube-apiserver with Cilium's CRDs.

:meth:`KubeCluster.apply_priority_case` applies (really, not as a dry run) exactly the objects
the backend would apply on a Cilium cluster; the server must accept them, hold what each case
needs, and have none of them left after :meth:`KubeCluster.remove_priority_case`. Cases Cilium
cannot express (tiers, pass) and CNI layers on a CNI without its own policy API must be
refused with :class:`UnsupportedError` before anything is created. Antrea and Calico CRDs are
not available to this tier, so their objects are checked as rendered, not applied.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from cnibench.backends.base import ClusterSpec
from cnibench.backends.kube import render
from cnibench.backends.kube.api import Applier
from cnibench.backends.kube.cluster import KubeCluster, Timeouts
from cnibench.backends.kube.cni import cni_definition
from cnibench.errors import UnsupportedError
from cnibench.policy import (
    PolicyPeer,
    PolicySpec,
    PortRange,
    PriorityCase,
    PriorityLayer,
    priority_case_named,
)

SPEC = PolicySpec(
    target=PolicyPeer("prio-srv", "10.0.0.2"),
    allowed=(PolicyPeer("prio-cli", "10.0.0.3"),),
    ports=(PortRange.single(80),),
)
# Worked out by hand: the NetworkPolicy count, and the Cilium policies' rule key in order.
CILIUM_CASES = {
    "cni-allow": (0, ["ingress"]),
    "k8s-deny": (1, []),
    "k8s-deny-and-cni-allow": (1, ["ingress"]),
    "same-tier-priority": (0, ["ingress", "ingressDeny"]),
}
CILIUM_REFUSED = ["tier-securityops-deny-vs-application-allow", "securityops-pass-and-k8s-deny"]


def _cluster(api_client: Any, cni: str, session: str) -> KubeCluster:
    spec = ClusterSpec(cni=cni)
    return KubeCluster(
        api_client,
        spec,
        cni_definition(spec),
        provider="existing",
        session=session,
        timeouts=Timeouts(pod_ready=30, delete=60),
    )


@pytest.fixture(scope="module")
def cilium_cluster(api_client: Any, cilium_crds: list[str]) -> Iterator[KubeCluster]:
    """A Cilium KubeCluster whose session namespace exists (no nodes needed for policies)."""
    cluster = _cluster(api_client, "cilium", "prio01")
    Applier(api_client).apply(render.namespace(cluster.namespace, session=cluster.session))
    try:
        yield cluster
    finally:
        cluster.teardown()


def _stored(api_client: Any, namespace: str) -> tuple[list[Any], list[dict[str, Any]]]:
    from kubernetes import client

    policies = client.NetworkingV1Api(api_client).list_namespaced_network_policy(namespace).items
    cilium = client.CustomObjectsApi(api_client).list_namespaced_custom_object(
        "cilium.io", "v2", namespace, "ciliumnetworkpolicies"
    )["items"]
    return policies, sorted(cilium, key=lambda item: item["metadata"]["name"])


@pytest.mark.parametrize("name", list(CILIUM_CASES), ids=list(CILIUM_CASES))
def test_cilium_case_objects_are_stored_by_the_server(
    cilium_cluster: KubeCluster, api_client: Any, name: str
) -> None:
    deny_all, rule_keys = CILIUM_CASES[name]
    cilium_cluster.apply_priority_case(priority_case_named(name), SPEC)
    try:
        policies, cilium = _stored(api_client, cilium_cluster.namespace)
    finally:
        cilium_cluster.remove_priority_case()
    assert len(policies) == deny_all
    for policy in policies:
        assert policy.spec.pod_selector.match_labels == {render.ENDPOINT_LABEL: "prio-srv"}
        assert policy.spec.policy_types == ["Ingress"]
        assert not policy.spec.ingress
    assert [next(k for k in ("ingress", "ingressDeny") if k in c["spec"]) for c in cilium] == (
        rule_keys
    )
    for item in cilium:
        assert item["metadata"]["labels"][render.SESSION_LABEL] == "prio01"
        rule = item["spec"].get("ingress", item["spec"].get("ingressDeny"))[0]
        assert rule["fromEndpoints"] == [{"matchLabels": {render.ENDPOINT_LABEL: "prio-cli"}}]


@pytest.mark.parametrize("name", list(CILIUM_CASES), ids=list(CILIUM_CASES))
def test_removing_a_cilium_case_leaves_no_object(
    cilium_cluster: KubeCluster, api_client: Any, name: str
) -> None:
    cilium_cluster.apply_priority_case(priority_case_named(name), SPEC)
    cilium_cluster.remove_priority_case()
    cilium_cluster.remove_priority_case()  # safe to repeat
    assert _stored(api_client, cilium_cluster.namespace) == ([], [])


def test_a_new_case_replaces_the_previous_one(cilium_cluster: KubeCluster, api_client: Any) -> None:
    cilium_cluster.apply_priority_case(priority_case_named("same-tier-priority"), SPEC)
    cilium_cluster.apply_priority_case(priority_case_named("k8s-deny"), SPEC)
    try:
        policies, cilium = _stored(api_client, cilium_cluster.namespace)
    finally:
        cilium_cluster.remove_priority_case()
    assert (len(policies), cilium) == (1, [])


@pytest.mark.parametrize("name", CILIUM_REFUSED, ids=CILIUM_REFUSED)
def test_cilium_refuses_cases_needing_tiers_and_creates_nothing(
    cilium_cluster: KubeCluster, api_client: Any, name: str
) -> None:
    with pytest.raises(UnsupportedError, match="cilium has no policy tiers"):
        cilium_cluster.apply_priority_case(priority_case_named(name), SPEC)
    assert _stored(api_client, cilium_cluster.namespace) == ([], [])


@pytest.fixture
def kindnet_cluster(api_client: Any) -> Iterator[KubeCluster]:
    cluster = _cluster(api_client, "kindnet", "prio02")
    Applier(api_client).apply(render.namespace(cluster.namespace, session=cluster.session))
    try:
        yield cluster
    finally:
        cluster.teardown()


def test_kindnet_applies_the_kubernetes_deny_alone(
    kindnet_cluster: KubeCluster, api_client: Any
) -> None:
    from kubernetes import client

    kindnet_cluster.apply_priority_case(priority_case_named("k8s-deny"), SPEC)
    try:
        names = [
            p.metadata.name
            for p in client.NetworkingV1Api(api_client)
            .list_namespaced_network_policy(kindnet_cluster.namespace)
            .items
        ]
    finally:
        kindnet_cluster.remove_priority_case()
    assert names == ["cnibench-prio-k8s"]


def test_kindnet_refuses_cni_layers(kindnet_cluster: KubeCluster) -> None:
    with pytest.raises(UnsupportedError, match="kindnet has no policy API of its own"):
        kindnet_cluster.apply_priority_case(priority_case_named("k8s-deny-and-cni-allow"), SPEC)


def test_antrea_tier_case_maps_tier_and_priority(api_client: Any) -> None:
    cluster = _cluster(api_client, "antrea", "prio03")
    case = priority_case_named("tier-securityops-deny-vs-application-allow")
    objects = cluster.priority_case_manifests(case, SPEC)
    seen = [
        (o["kind"], o["spec"]["tier"], o["spec"]["priority"], o["spec"]["ingress"][0]["action"])
        for o in objects
    ]
    assert sorted(seen) == [
        ("ClusterNetworkPolicy", "application", 10.0, "Allow"),
        ("ClusterNetworkPolicy", "securityops", 5.0, "Drop"),
    ]


@pytest.mark.parametrize(
    ("cni_name", "expected"),
    [("antrea", ("ClusterNetworkPolicy", "Pass")), ("calico", ("NetworkPolicy", "Pass"))],
    ids=["antrea", "calico"],
)
def test_pass_layer_renders_the_cnis_pass_action(
    api_client: Any, cni_name: str, expected: tuple[str, str]
) -> None:
    # Upstream: Antrea ClusterNetworkPolicy rule action Pass (crd.antrea.io/v1beta1); Calico
    # NetworkPolicy rule action Pass (projectcalico.org/v3).
    cluster = _cluster(api_client, cni_name, f"prio04{cni_name[0]}")
    case = priority_case_named("securityops-pass-and-k8s-deny")
    objects = cluster.priority_case_manifests(case, SPEC)
    actions = [
        (o["kind"], rule.get("action")) for o in objects for rule in o["spec"].get("ingress", [])
    ]
    assert expected in actions
    # The Kubernetes deny-all is there too (a NetworkPolicy without ingress rules).
    assert any(o["apiVersion"] == "networking.k8s.io/v1" for o in objects)


def test_cilium_refuses_a_pass_layer(api_client: Any) -> None:
    cluster = _cluster(api_client, "cilium", "prio04c")
    pass_only = PriorityCase("cilium-pass", False, (PriorityLayer("pass", "application", 5),))
    with pytest.raises(UnsupportedError, match="cilium has no policy tiers"):
        cluster.priority_case_manifests(pass_only, SPEC)


@pytest.mark.parametrize(
    ("layers", "orders"),
    [
        ((PriorityLayer("deny", "securityops", 5), PriorityLayer("allow", "application", 10)),
         [("Deny", 5.0), ("Allow", 10.0)]),
    ],
    ids=["tier-order-agrees-with-priority"],
)  # fmt: skip
def test_calico_order_is_the_layer_priority(api_client: Any, layers, orders) -> None:
    cluster = _cluster(api_client, "calico", "prio05")
    objects = cluster.priority_case_manifests(PriorityCase("c", False, layers), SPEC)
    assert sorted((o["spec"]["ingress"][0]["action"], o["spec"]["order"]) for o in objects) == (
        sorted(orders)
    )


def test_calico_refuses_tiers_its_order_cannot_express(api_client: Any) -> None:
    cluster = _cluster(api_client, "calico", "prio06")
    # securityops comes first by tier, but its priority number is the larger one.
    case = PriorityCase(
        "c",
        False,
        (PriorityLayer("deny", "securityops", 50), PriorityLayer("allow", "application", 10)),
    )
    with pytest.raises(UnsupportedError, match="Calico order alone cannot express"):
        cluster.priority_case_manifests(case, SPEC)
