"""Cluster add-ons and the install path against a real kube-apiserver.

MetalLB's CRDs and release manifest and the Gateway API CRDs come from their Go modules in the
module cache; cnibench's installer receives them through an injected fetcher, so nothing is
downloaded over the network. helm cannot install a CNI here (no nodes run pods), so the install
order is checked with a helm stand-in that inspects the real API server when it is called.

MetalLB's webhook never serves here. While its webhook configuration exists, these tests keep
its Service absent: the API server then fails the webhook call before connecting anywhere,
whereas with the Service present it would dial the Service's cluster IP, which is not loopback.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from kube_support import GATEWAY_API_MODULE, go_module_dir

from cnibench.backends.base import ClusterSpec
from cnibench.backends.kube import render
from cnibench.backends.kube.addons import (
    METALLB_NAMESPACE,
    AddonVersions,
    apply_when_admitted,
    gateway_api_crds_url,
    install_cni,
    install_manifests,
    install_release_manifest,
    metallb_manifest_url,
    split_documents,
)
from cnibench.backends.kube.api import Applier
from cnibench.backends.kube.cni import cni_definition, pinned_versions
from cnibench.backends.kube.external import load_balancer_range
from cnibench.errors import ProvisioningError

WEBHOOK_CONFIGURATION = "metallb-webhook-configuration"
WEBHOOK_SERVICE = "metallb-webhook-service"
NAMESPACE_GONE_TIMEOUT = 90.0
BUNDLE_VERSION = "gateway.networking.k8s.io/bundle-version"


def _module_fetcher(files: dict[str, list[Path]]) -> Callable[[str], str]:
    """A fetcher serving each URL as the concatenation of module files (no network)."""

    def fetch(url: str) -> str:
        if url not in files:
            raise AssertionError(f"unexpected download of {url}")
        return "\n---\n".join(path.read_text() for path in files[url])

    return fetch


def _gateway_api_files(version: str) -> list[Path]:
    try:
        module = go_module_dir(f"sigs.k8s.io/gateway-api@{version}")
    except RuntimeError as exc:
        pytest.skip(f"Gateway API {version} unavailable: {exc}")
    return sorted((module / "config" / "crd" / "standard").glob("*.yaml"))


def _native_manifest(metallb_module: Path) -> Path:
    return metallb_module / "config" / "manifests" / "metallb-native.yaml"


@pytest.fixture
def pool_namespace(api_client: Any) -> Iterator[str]:
    """A throw-away namespace for MetalLB objects validated by the CRD schemas alone."""
    import os

    from kubernetes import client

    name = f"cbt-mlb-{os.urandom(3).hex()}"
    core = client.CoreV1Api(api_client)
    core.create_namespace({"metadata": {"name": name}})
    try:
        yield name
    finally:
        core.delete_namespace(name)


def _pool(namespace: str) -> dict[str, Any]:
    return render.metallb_ip_address_pool(
        "cnibench", namespace=namespace, address_range=load_balancer_range("172.18.0.0/16")
    )


# -- cnibench's IPAddressPool and L2Advertisement against MetalLB's CRD schemas ---------------


def test_pool_and_advertisement_are_accepted(
    api_client: Any, metallb_crds: list[str], pool_namespace: str
) -> None:
    applier = Applier(api_client)
    pool = applier.apply(_pool(pool_namespace))
    advertisement = applier.apply(
        render.metallb_l2_advertisement("cnibench", namespace=pool_namespace, pools=["cnibench"])
    )
    assert pool["spec"]["addresses"] == ["172.18.255.235-172.18.255.250"]
    assert pool["spec"]["autoAssign"] is True
    assert advertisement["spec"]["ipAddressPools"] == ["cnibench"]


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("addresses", "172.18.255.235-172.18.255.250", "spec.addresses"),
        ("autoAssign", "yes", "spec.autoAssign"),
    ],
    ids=["addresses-not-a-list", "auto-assign-not-a-boolean"],
)
def test_malformed_pool_is_rejected(
    api_client: Any,
    metallb_crds: list[str],
    pool_namespace: str,
    field: str,
    value: str,
    message: str,
) -> None:
    pool = _pool(pool_namespace)
    pool["spec"][field] = value
    with pytest.raises(ProvisioningError, match=message):
        Applier(api_client).apply(pool)


def test_pool_without_addresses_is_rejected(
    api_client: Any, metallb_crds: list[str], pool_namespace: str
) -> None:
    pool = _pool(pool_namespace)
    del pool["spec"]["addresses"]
    with pytest.raises(ProvisioningError, match="addresses: Required value"):
        Applier(api_client).apply(pool)


# -- MetalLB's release manifest through cnibench's installer ----------------------------------


def _delete_metallb(api_client: Any, documents: list[dict[str, Any]]) -> None:
    """Remove what metallb-native.yaml created, webhook configuration first, except the CRDs
    (shared with the schema tests); wait until its namespace is gone so a later install
    can create it again."""
    from kubernetes import client
    from kubernetes.client.exceptions import ApiException

    applier = Applier(api_client)
    for kind in ("ValidatingWebhookConfiguration", "ClusterRoleBinding", "ClusterRole"):
        for document in documents:
            if document["kind"] == kind:
                applier.delete(document)
    core = client.CoreV1Api(api_client)
    try:
        core.delete_namespace(METALLB_NAMESPACE)
    except ApiException as exc:
        if exc.status != 404:
            raise
    deadline = time.monotonic() + NAMESPACE_GONE_TIMEOUT
    while True:
        try:
            core.read_namespace(METALLB_NAMESPACE)
        except ApiException as exc:
            if exc.status == 404:
                return
            raise
        assert time.monotonic() < deadline, "namespace metallb-system was not deleted in time"
        time.sleep(0.5)


@pytest.fixture
def metallb_native(
    api_client: Any, metallb_module: Path
) -> Iterator[tuple[list[str], list[dict[str, Any]]]]:
    """metallb-native.yaml installed by :func:`install_release_manifest` from the module
    (the fetcher serves the pinned URL); yields what was applied and the documents."""
    path = _native_manifest(metallb_module)
    documents = split_documents(path.read_text(), source=str(path))
    url = metallb_manifest_url(AddonVersions().metallb)
    try:
        applied = install_release_manifest(
            api_client, url, fetch=_module_fetcher({url: [path]}), timeout=60
        )
        yield applied, documents
    finally:
        _delete_metallb(api_client, documents)


def test_native_manifest_objects_exist(
    api_client: Any, metallb_native: tuple[list[str], list[dict[str, Any]]]
) -> None:
    from kubernetes import client

    apps = client.AppsV1Api(api_client)
    admission = client.AdmissionregistrationV1Api(api_client)
    assert apps.read_namespaced_deployment("controller", METALLB_NAMESPACE).metadata.name
    assert apps.read_namespaced_daemon_set("speaker", METALLB_NAMESPACE).metadata.name
    webhook = admission.read_validating_webhook_configuration(WEBHOOK_CONFIGURATION)
    assert any(w.name == "ipaddresspoolvalidationwebhook.metallb.io" for w in webhook.webhooks)
    crd = client.ApiextensionsV1Api(api_client).read_custom_resource_definition(
        "ipaddresspools.metallb.io"
    )
    assert {c.type: c.status for c in crd.status.conditions}["Established"] == "True"


def test_native_manifest_applied_crds_first_and_webhook_last(
    metallb_native: tuple[list[str], list[dict[str, Any]]],
) -> None:
    applied, documents = metallb_native
    kinds = [entry.split(" ")[0] for entry in applied]
    assert len(applied) == len(documents) == 25
    assert kinds[:8] == ["CustomResourceDefinition"] * 8
    assert kinds[8] == "Namespace"
    assert kinds[-1] == "ValidatingWebhookConfiguration"


def _without_webhook_service(api_client: Any) -> None:
    from kubernetes import client

    client.CoreV1Api(api_client).delete_namespaced_service(WEBHOOK_SERVICE, METALLB_NAMESPACE)


def test_pool_is_retried_until_the_webhook_admits_it(
    api_client: Any, metallb_native: tuple[list[str], list[dict[str, Any]]]
) -> None:
    from kubernetes import client

    _without_webhook_service(api_client)
    admission = client.AdmissionregistrationV1Api(api_client)
    # Stands in for the webhook starting to serve: after 1.5 s nothing blocks the pool any more.
    opens = threading.Timer(
        1.5, admission.delete_validating_webhook_configuration, args=(WEBHOOK_CONFIGURATION,)
    )
    pool = _pool(METALLB_NAMESPACE)
    advertisement = render.metallb_l2_advertisement(
        "cnibench", namespace=METALLB_NAMESPACE, pools=["cnibench"]
    )
    started = time.monotonic()
    opens.start()
    try:
        stored = apply_when_admitted(api_client, [pool, advertisement], timeout=30, interval=0.3)
    finally:
        opens.join()
    assert time.monotonic() - started >= 1.5
    assert [s["kind"] for s in stored] == ["IPAddressPool", "L2Advertisement"]


def test_pool_fails_when_the_webhook_never_serves(
    api_client: Any, metallb_native: tuple[list[str], list[dict[str, Any]]]
) -> None:
    _without_webhook_service(api_client)
    started = time.monotonic()
    with pytest.raises(ProvisioningError, match="waited 2 s for the admission webhook to review"):
        apply_when_admitted(api_client, [_pool(METALLB_NAMESPACE)], timeout=2, interval=0.3)
    assert time.monotonic() - started < 10


# -- Gateway API CRDs before the CNI chart ----------------------------------------------------


@pytest.fixture
def gateway_api_crds_restored(api_client: Any) -> Iterator[None]:
    """Put the tier's Gateway API CRDs (the session fixture's release) back afterwards if they
    were installed, since the install-order test applies other releases over them."""
    from kubernetes import client

    extensions = client.ApiextensionsV1Api(api_client)
    before = {
        crd.metadata.name
        for crd in extensions.list_custom_resource_definition().items
        if crd.spec.group == "gateway.networking.k8s.io"
    }
    try:
        yield
    finally:
        if before:
            module = go_module_dir(GATEWAY_API_MODULE)
            documents = [
                d
                for path in sorted((module / "config" / "crd" / "standard").glob("*.yaml"))
                for d in yaml.safe_load_all(path.read_text())
                if d and d["metadata"]["name"] in before
            ]
            install_manifests(api_client, documents, timeout=60)


class RecordingHelm:
    """Stands in for helm (which cannot install a CNI without nodes that run pods): records
    each argv and, at that moment, the Gateway API CRDs on the real API server."""

    def __init__(self, api_client: Any) -> None:
        self.api_client = api_client
        self.calls: list[tuple[list[str], dict[str, tuple[bool, str]]]] = []

    def __call__(self, argv: Any) -> None:
        from kubernetes import client

        crds = {}
        for crd in (
            client.ApiextensionsV1Api(self.api_client).list_custom_resource_definition().items
        ):
            if crd.spec.group != "gateway.networking.k8s.io":
                continue
            conditions = {c.type: c.status for c in (crd.status.conditions or [])}
            version = (crd.metadata.annotations or {}).get(BUNDLE_VERSION, "")
            crds[crd.metadata.name] = (conditions.get("Established") == "True", version)
        self.calls.append((list(argv), crds))


@pytest.mark.parametrize(
    ("cni_name", "gateway_api", "releases"),
    [
        ("cilium", pinned_versions()["cilium-gateway-api"], ["cilium"]),
        ("antrea", pinned_versions()["nginx-gateway-api"], ["antrea", "ngf"]),
    ],
    ids=["cilium-gateway-api", "antrea-nginx-gateway-fabric"],
)
def test_gateway_api_crds_are_established_before_helm(
    api_client: Any,
    gateway_api_crds_restored: None,
    tmp_path: Path,
    cni_name: str,
    gateway_api: str,
    releases: list[str],
) -> None:
    files = _gateway_api_files(gateway_api)
    expected = {
        d["metadata"]["name"] for path in files for d in yaml.safe_load_all(path.read_text()) if d
    }
    definition = cni_definition(ClusterSpec(cni=cni_name, options={"features": "gateway-api"}))
    helm = RecordingHelm(api_client)
    url = gateway_api_crds_url(gateway_api)
    install_cni(
        api_client,
        definition,
        kubeconfig=tmp_path / "kubeconfig",
        helm=helm,
        fetch=_module_fetcher({url: files}),
        timeout=60,
    )
    assert [argv[3] for argv, _ in helm.calls] == releases
    for _, crds in helm.calls:
        assert {name: crds.get(name) for name in expected} == {
            name: (True, gateway_api) for name in expected
        }


# -- objects that name no namespace (kubectl's rule: namespaced kinds go to "default") --------


def test_release_objects_without_a_namespace_land_where_kubectl_puts_them(
    api_client: Any,
) -> None:
    import os

    from kubernetes import client

    suffix = os.urandom(3).hex()
    config_map = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": f"cbt-nons-{suffix}", "labels": {"app": "cbt"}},
        "data": {"k": "v"},
    }
    cluster_role = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRole",
        "metadata": {"name": f"cbt-nons-{suffix}"},
        "rules": [],
    }
    core, rbac = client.CoreV1Api(api_client), client.RbacAuthorizationV1Api(api_client)
    try:
        applied = install_manifests(api_client, [config_map, cluster_role], timeout=10)
        stored = core.read_namespaced_config_map(f"cbt-nons-{suffix}", "default")
        assert stored.data == {"k": "v"}
        assert rbac.read_cluster_role(f"cbt-nons-{suffix}").metadata.namespace is None
        assert sorted(applied) == sorted(
            [f"ConfigMap cbt-nons-{suffix}", f"ClusterRole cbt-nons-{suffix}"]
        )
        assert Applier(api_client).delete(config_map) is True
        assert Applier(api_client).delete(config_map) is False
    finally:
        Applier(api_client).delete(config_map)
        Applier(api_client).delete(cluster_role)


def test_object_without_a_name_is_refused_in_one_line(api_client: Any) -> None:
    nameless = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {}, "data": {}}
    with pytest.raises(ProvisioningError, match=r"^object without metadata\.name: ConfigMap"):
        Applier(api_client).apply(nameless)
