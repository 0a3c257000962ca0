"""Pure parts of the Kubernetes backend: CNI definitions, rendered objects, kind config, AKS.

These need no API server. Objects of APIs whose CRDs are not available here (Antrea, whose API
module is not on the Go proxy) are checked for structure against the upstream API version
named in each test.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from cnibench.backends.base import Capability, ClusterSpec, NodeRole, WorkloadKind, WorkloadSpec
from cnibench.backends.kube import render
from cnibench.backends.kube.cluster import parse_cilium_encryption
from cnibench.backends.kube.cni import CNI_NAMES, cni_definition
from cnibench.backends.kube.images import Images
from cnibench.backends.kube.providers import (
    AksProvider,
    KindProvider,
    aks_variables,
    kind_create_argv,
)
from cnibench.errors import ConfigError


@pytest.mark.parametrize(
    ("options", "replaces"),
    [({"mode": "kpr"}, True), ({"mode": "kube-proxy"}, False)],
    ids=["kpr", "kube-proxy"],
)
def test_cilium_mode_decides_kube_proxy(options: dict[str, str], replaces: bool) -> None:
    cni = cni_definition(ClusterSpec(cni="cilium", options=options))
    assert cni.replaces_kube_proxy is replaces
    assert cni.chart is not None
    assert cni.chart.values["kubeProxyReplacement"] is replaces


def test_cilium_egress_gateway_needs_kpr() -> None:
    with pytest.raises(ConfigError, match="needs mode=kpr"):
        cni_definition(
            ClusterSpec(cni="cilium", options={"mode": "kube-proxy", "features": "egress-gateway"})
        )


def test_cilium_wireguard_sets_encryption_values() -> None:
    cni = cni_definition(ClusterSpec(cni="cilium", encryption="wireguard"))
    assert cni.chart is not None
    assert cni.chart.values["encryption"] == {"enabled": True, "type": "wireguard"}


@pytest.mark.parametrize("name", CNI_NAMES, ids=CNI_NAMES)
def test_every_cni_declares_readiness(name: str) -> None:
    cni = cni_definition(ClusterSpec(cni=name))
    assert cni.readiness
    assert all(r.kind in ("DaemonSet", "Deployment") for r in cni.readiness)


def test_unknown_cni_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="weave"):
        cni_definition(ClusterSpec(cni="weave"))


def test_flannel_cannot_encrypt() -> None:
    with pytest.raises(ConfigError, match="WireGuard"):
        cni_definition(ClusterSpec(cni="flannel", encryption="wireguard"))


def test_antrea_offers_egress_and_tiers() -> None:
    caps = cni_definition(ClusterSpec(cni="antrea")).capabilities
    assert {Capability.EGRESS_GATEWAY, Capability.POLICY_TIERS} <= caps


def test_pod_is_pinned_to_its_role() -> None:
    manifest = render.pod("srv", namespace="ns", session="s1", role=NodeRole.SERVER)
    assert manifest["spec"]["nodeSelector"] == {"cnibench.io/role": "server"}
    assert manifest["metadata"]["labels"]["cnibench.io/session"] == "s1"


def test_http_echo_names_the_pod_from_the_downward_api() -> None:
    manifest = render.pod(
        "echo",
        namespace="ns",
        session="s1",
        role=NodeRole.SERVER,
        workloads=[WorkloadSpec(WorkloadKind.HTTP_ECHO, 8080)],
    )
    echo = next(c for c in manifest["spec"]["containers"] if c["name"] == "http-echo")
    assert echo["env"][0]["valueFrom"]["fieldRef"]["fieldPath"] == "metadata.name"
    assert "X-Backend" in echo["command"][-1]
    assert echo["readinessProbe"]["tcpSocket"]["port"] == 8080


def test_sockperf_without_image_is_refused() -> None:
    with pytest.raises(ConfigError, match="CNIBENCH_IMAGE_SOCKPERF"):
        render.pod(
            "sp",
            namespace="ns",
            session="s1",
            role=NodeRole.SERVER,
            workloads=[WorkloadSpec(WorkloadKind.SOCKPERF_SERVER, 11111)],
            images=Images(),
        )


def test_images_come_from_environment() -> None:
    images = Images.from_environment({"CNIBENCH_IMAGE_TOOLS": "registry.example/tools:1"})
    assert images.tools == "registry.example/tools:1"


def test_template_values_cannot_break_the_document() -> None:
    hostile = 'x"\nkind: Secret'
    manifest = render.namespace(hostile, session="s")
    assert manifest["kind"] == "Namespace"
    assert manifest["metadata"]["name"] == hostile


def test_antrea_egress_structure() -> None:
    # Upstream API: crd.antrea.io/v1beta1 Egress (appliedTo, externalIPPool), Antrea >= 1.13.
    egress = render.antrea_egress("eg", session="s", namespace="ns", pool="pool")
    assert egress["apiVersion"] == "crd.antrea.io/v1beta1"
    assert egress["spec"]["externalIPPool"] == "pool"
    assert egress["spec"]["appliedTo"]["podSelector"]["matchLabels"]["cnibench.io/egress"] == "eg"


def test_antrea_external_ip_pool_structure() -> None:
    # Upstream API: crd.antrea.io/v1beta1 ExternalIPPool (ipRanges start/end, nodeSelector).
    pool = render.antrea_external_ip_pool(
        "pool", session="s", first_ip="172.18.0.200", last_ip="172.18.0.209"
    )
    assert pool["spec"]["ipRanges"] == [{"start": "172.18.0.200", "end": "172.18.0.209"}]
    assert pool["spec"]["nodeSelector"]["matchLabels"] == {"cnibench.io/role": "egress-gw"}


@pytest.mark.parametrize(
    ("cni_name", "kube_proxy_mode", "default_cni_off"),
    [("cilium", "none", True), ("flannel", None, True), ("kindnet", None, False)],
    ids=["cilium-kpr", "flannel", "kindnet"],
)
def test_kind_config_round_trips(
    cni_name: str, kube_proxy_mode: str | None, default_cni_off: bool
) -> None:
    spec = ClusterSpec(cni=cni_name)
    text = yaml.safe_dump(render.kind_cluster_config("c1", spec, cni_definition(spec)))
    config = yaml.safe_load(text)
    assert config["apiVersion"] == "kind.x-k8s.io/v1alpha4"
    assert config["networking"].get("kubeProxyMode") == kube_proxy_mode
    assert config["networking"].get("disableDefaultCNI", False) is default_cni_off
    roles = [n.get("labels", {}).get("cnibench.io/role") for n in config["nodes"]]
    assert roles == [None, "client", "server", "egress-gw"]
    assert {n["image"] for n in config["nodes"]} == {Images().kind_node}


def test_prometheus_relabels_instance_to_node_name() -> None:
    config = yaml.safe_load(render.prometheus_config(namespace="ns", scrape_interval=1.0))
    assert config["global"]["scrape_interval"] == "1000ms"
    relabel = config["scrape_configs"][0]["relabel_configs"]
    assert {"source_labels": ["__meta_kubernetes_pod_node_name"], "target_label": "instance"} in (
        relabel
    )


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            "KVStore: Disabled\nEncryption:   Wireguard   [NodeEncryption: Disabled, cilium_wg0"
            " (Pubkey: abc=, Port: 51871, Peers: 2)]\n",
            (True, "cilium_wg0", 2),
        ),
        ("Encryption:   Disabled\n", (False, "", 0)),
    ],
    ids=["wireguard", "disabled"],
)
def test_parse_cilium_encryption(text: str, expected: tuple[bool, str, int]) -> None:
    # Line shape from Cilium's status printer (pkg/command/... "Encryption:"), hand-written.
    assert parse_cilium_encryption(text) == expected


def test_kind_provider_reuses_a_cluster_with_the_same_hash(tmp_path: Path) -> None:
    """kind cannot create clusters here (no container engine): a fake runner records argv."""
    calls: list[list[str]] = []
    spec = ClusterSpec(cni="cilium")
    provider = KindProvider(tmp_path, runner=lambda argv: calls.append(list(argv)) or "")
    name, _ = provider.plan(spec, cni_definition(spec))
    calls.clear()
    existing = KindProvider(
        tmp_path,
        runner=lambda argv: calls.append(list(argv)) or (name if argv[1] == "get" else ""),
    )
    made = existing.ensure(spec, cni_definition(spec))
    assert made.created is False
    assert not any(c[:3] == ["kind", "create", "cluster"] for c in calls)


def test_kind_create_argv_uses_generated_config(tmp_path: Path) -> None:
    assert kind_create_argv("c", tmp_path / "c.yaml") == [
        "kind", "create", "cluster", "--name", "c", "--config", str(tmp_path / "c.yaml"),
        "--wait", "0s",
    ]  # fmt: skip


class _FakeTerraform:
    """Stands in for python_terraform.Terraform: Azure cannot be reached from here."""

    calls: list[tuple[str, dict[str, Any]]]

    def __init__(self, working_dir: str) -> None:
        self.working_dir = working_dir
        _FakeTerraform.calls.append(("new", {"working_dir": working_dir}))

    def init(self, **kwargs: Any) -> tuple[int, str, str]:
        _FakeTerraform.calls.append(("init", kwargs))
        return 0, "", ""

    def apply(self, **kwargs: Any) -> tuple[int, str, str]:
        _FakeTerraform.calls.append(("apply", kwargs))
        return 0, "", ""

    def output(self, name: str) -> str:
        _FakeTerraform.calls.append(("output", {"name": name}))
        return "apiVersion: v1\nkind: Config\n"


def test_aks_fake_terraform_gets_variables_and_no_credentials(tmp_path: Path) -> None:
    """Fake terraform (Azure unreachable): exact variables, credentials only via ARM_*."""
    _FakeTerraform.calls = []
    environ = {v: f"secret-{v}" for v in ("ARM_CLIENT_ID", "ARM_CLIENT_SECRET", "ARM_TENANT_ID")}
    environ["ARM_SUBSCRIPTION_ID"] = "sub"
    provider = AksProvider(state_dir=tmp_path, terraform=_FakeTerraform, environ=environ)
    spec = ClusterSpec(cni="cilium")
    made = provider.ensure(spec, cni_definition(spec))
    apply = next(kw for op, kw in _FakeTerraform.calls if op == "apply")
    assert apply["var"] == aks_variables(
        made.name, location="westeurope", node_count=3, vm_size="Standard_A2_v2",
        kubernetes_version="1.33",
    )  # fmt: skip
    assert "secret" not in repr(_FakeTerraform.calls)
    assert made.kubeconfig.stat().st_mode & 0o077 == 0
    assert (made.kubeconfig.parent / "main.tf").is_file()


def test_aks_without_credentials_is_a_config_error(tmp_path: Path) -> None:
    provider = AksProvider(state_dir=tmp_path, terraform=_FakeTerraform, environ={})
    with pytest.raises(ConfigError, match="ARM_CLIENT_ID"):
        provider.ensure(ClusterSpec(cni="cilium"), cni_definition(ClusterSpec(cni="cilium")))
