"""Pure parts of the kube add-ons: manifest splitting and ordering, MetalLB's address range,
the Gateway API definitions of the CNIs, and manifest downloads from a loopback HTTP server."""

from __future__ import annotations

import http.server
import re
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from cnibench.backends.base import Capability, ClusterSpec
from cnibench.backends.kube import render
from cnibench.backends.kube.addons import apply_order, fetch_manifest, split_documents
from cnibench.backends.kube.backend import KubeBackend
from cnibench.backends.kube.cni import cni_definition, nginx_gateway_fabric_chart
from cnibench.backends.kube.external import DockerNetwork, load_balancer_range, ranges_overlap
from cnibench.backends.kube.helm import helm_install_argv
from cnibench.backends.kube.providers import ExistingProvider
from cnibench.errors import ConfigError, ProvisioningError

MULTI = """\
# leading comment
---
apiVersion: v1
kind: ServiceAccount
metadata: {name: a, namespace: ns}
---
---
apiVersion: v1
kind: List
items:
- {apiVersion: v1, kind: ConfigMap, metadata: {name: b, namespace: ns}}
- {apiVersion: v1, kind: ConfigMap, metadata: {name: c, namespace: ns}}
"""


def _obj(kind: str, name: str, api_version: str = "v1", **extra: object) -> dict[str, object]:
    return {"apiVersion": api_version, "kind": kind, "metadata": {"name": name}, **extra}


# -- split_documents ---------------------------------------------------------------------------


def test_split_drops_empty_documents_and_expands_lists() -> None:
    names = [d["metadata"]["name"] for d in split_documents(MULTI)]
    assert names == ["a", "b", "c"]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("a: [1, 2\nb: 3\n", r"x\.yaml is not valid YAML \(line \d+\)"),
        ("- just\n- a list\n", r"x\.yaml: document 1 is not a Kubernetes object"),
        ("apiVersion: v1\nkind: ConfigMap\n", "document 1 is not a Kubernetes object"),
        (
            "---\nkind: ConfigMap\napiVersion: v1\nmetadata: {name: a}\n---\n"
            "apiVersion: v1\nkind: X\nmetadata: {}\n",
            "document 2 is not",
        ),
    ],
    ids=["broken-yaml", "not-a-mapping", "no-metadata", "nameless-second"],
)
def test_split_rejects_what_is_not_an_object(text: str, message: str) -> None:
    with pytest.raises(ProvisioningError, match=message):
        split_documents(text, source="x.yaml")


# -- apply_order -------------------------------------------------------------------------------


def test_order_puts_crds_then_namespaces_then_rest_then_own_kinds_then_webhooks() -> None:
    crd = _obj(
        "CustomResourceDefinition",
        "pools.example.io",
        "apiextensions.k8s.io/v1",
        spec={"group": "example.io", "names": {"kind": "Pool"}},
    )
    documents = [
        _obj("ValidatingWebhookConfiguration", "hook", "admissionregistration.k8s.io/v1"),
        _obj("Pool", "p", "example.io/v1"),
        _obj("Deployment", "d", "apps/v1"),
        crd,
        _obj("Namespace", "ns"),
        _obj("Service", "s"),
    ]
    ordered = [d["kind"] for d in apply_order(documents)]
    assert ordered == [
        "CustomResourceDefinition",
        "Namespace",
        "Deployment",
        "Service",
        "Pool",
        "ValidatingWebhookConfiguration",
    ]


def test_order_keeps_a_kind_of_another_group_with_the_rest() -> None:
    crd = _obj(
        "CustomResourceDefinition",
        "pools.example.io",
        "apiextensions.k8s.io/v1",
        spec={"group": "example.io", "names": {"kind": "Pool"}},
    )
    other = _obj("Pool", "q", "elsewhere.io/v1")
    ordered = apply_order([other, _obj("Service", "s"), crd])
    assert [d["metadata"]["name"] for d in ordered] == ["pools.example.io", "q", "s"]


# -- MetalLB's address range -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("subnet", "expected"),
    [
        ("172.18.0.0/16", ("172.18.255.235", "172.18.255.250")),
        ("10.89.0.0/24", ("10.89.0.235", "10.89.0.250")),
        ("10.0.0.0/27", ("10.0.0.11", "10.0.0.26")),
    ],
    ids=["kind-default-16", "slash-24", "slash-27"],
)
def test_pool_is_sixteen_addresses_below_the_egress_four(
    subnet: str, expected: tuple[str, str]
) -> None:
    assert load_balancer_range(subnet) == expected


def test_default_pool_and_default_egress_range_are_disjoint() -> None:
    from cnibench.backends.kube.external import top_of_subnet_range

    subnet = "172.18.0.0/16"
    assert not ranges_overlap(load_balancer_range(subnet), top_of_subnet_range(subnet))


def test_pool_in_too_small_subnet_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match=re.escape("10.0.0.0/28 cannot spare 16")):
        load_balancer_range("10.0.0.0/28")


@pytest.mark.parametrize(
    ("first", "second", "overlap"),
    [
        (("10.0.0.1", "10.0.0.5"), ("10.0.0.5", "10.0.0.9"), True),
        (("10.0.0.1", "10.0.0.5"), ("10.0.0.6", "10.0.0.9"), False),
        (("10.0.0.3", "10.0.0.3"), ("10.0.0.1", "10.0.0.9"), True),
    ],
    ids=["shared-edge", "adjacent", "inside"],
)
def test_ranges_overlap(first: tuple[str, str], second: tuple[str, str], overlap: bool) -> None:
    assert ranges_overlap(first, second) is overlap


def test_configured_egress_range_inside_the_pool_is_refused(tmp_path: Path) -> None:
    backend = KubeBackend(ExistingProvider(tmp_path / "kubeconfig"))
    network = DockerNetwork(name="kind", subnet="172.18.0.0/16", gateway="172.18.0.1")
    with pytest.raises(ConfigError, match=re.escape("172.18.255.240-172.18.255.241 overlaps")):
        backend.load_balancer_range(network, ("172.18.255.240", "172.18.255.241"))


@pytest.mark.parametrize(
    ("address_range", "message"),
    [
        (("172.18.255.250", "172.18.255.235"), "empty"),
        (("172.18.255.300", "172.18.255.301"), "not two IPv4 addresses"),
        (("fd00::1", "fd00::2"), "not two IPv4 addresses"),
    ],
    ids=["reversed", "octet-too-large", "ipv6"],
)
def test_invalid_pool_range_is_refused_before_the_server(
    address_range: tuple[str, str], message: str
) -> None:
    with pytest.raises(ConfigError, match=message):
        render.metallb_ip_address_pool("p", namespace="metallb-system", address_range=address_range)


def test_advertisement_without_pools_is_refused() -> None:
    with pytest.raises(ConfigError, match="at least one IPAddressPool"):
        render.metallb_l2_advertisement("a", namespace="metallb-system", pools=[])


# -- Gateway API on the CNIs -------------------------------------------------------------------


def test_antrea_gateway_api_brings_nginx_gateway_fabric() -> None:
    cni = cni_definition(ClusterSpec(cni="antrea", options={"features": "gateway-api"}))
    assert cni.gateway_class == "nginx"
    assert Capability.TRAFFIC_SPLIT in cni.capabilities
    assert [c.release for c in cni.addon_charts] == ["ngf"]
    assert ("Deployment", "nginx-gateway", "ngf-nginx-gateway-fabric") in {
        (r.kind, r.namespace, r.name) for r in cni.readiness
    }


def test_antrea_without_features_has_no_gateway() -> None:
    cni = cni_definition(ClusterSpec(cni="antrea"))
    assert (cni.gateway_class, cni.gateway_api_crds, cni.addon_charts) == ("", "", ())
    assert Capability.TRAFFIC_SPLIT not in cni.capabilities


def test_antrea_unknown_feature_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="unknown antrea feature l7"):
        cni_definition(ClusterSpec(cni="antrea", options={"features": "l7"}))


def test_cilium_gateway_api_pins_the_documented_crd_release() -> None:
    cni = cni_definition(ClusterSpec(cni="cilium", options={"features": "gateway-api"}))
    # Cilium 1.18.4's installation.rst requires the v1.2.0 CRDs.
    assert cni.gateway_api_crds == "v1.2.0"


def test_oci_chart_is_installed_without_repo(tmp_path: Path) -> None:
    argv = helm_install_argv(
        nginx_gateway_fabric_chart(), tmp_path / "v.yaml", kubeconfig=tmp_path / "kubeconfig"
    )
    assert "--repo" not in argv
    assert argv[3:5] == ["ngf", "oci://ghcr.io/nginx/charts/nginx-gateway-fabric"]


# -- fetch_manifest against a loopback HTTP server ---------------------------------------------


class _Handler(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        if self.path == "/ok.yaml":
            body = MULTI.encode()
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
        else:
            self.send_error(404, "Not Found")

    def log_message(self, format: str, *args: object) -> None:
        return


@pytest.fixture
def http_base() -> Iterator[str]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


def test_fetch_returns_the_body(http_base: str) -> None:
    assert fetch_manifest(f"{http_base}/ok.yaml", timeout=5) == MULTI


def test_fetch_http_error_names_the_url(http_base: str) -> None:
    url = f"{http_base}/missing.yaml"
    with pytest.raises(ProvisioningError, match=re.escape(f"cannot fetch {url}: HTTP 404")):
        fetch_manifest(url, timeout=5)


def test_fetch_refused_connection_is_one_line() -> None:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    url = f"http://127.0.0.1:{port}/x.yaml"
    with pytest.raises(ProvisioningError, match=re.escape(f"cannot fetch {url}: ")) as caught:
        fetch_manifest(url, timeout=5)
    assert "\n" not in str(caught.value)
