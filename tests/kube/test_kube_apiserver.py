"""The Kubernetes backend against a real kube-apiserver (the kube tier, SPEC section 8).

Every object the backend renders for each CNI and scenario is applied server-side as a dry run
(``dryRun=All``) and must be accepted; a broken object must be rejected; the Cilium chart
rendered with cnibench's values must pass the chart's schema and the server; and the
orchestration path (namespace, role-placed pods, readiness, teardown) runs on kwok nodes.
Pods never run here: kwok only marks them Running and gives them an IP.
"""

from __future__ import annotations

import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from kube_support import (
    K8S_VERSION,
    KWOK_NODE_ANNOTATION,
    bin_dir,
    kube_proxy_configmap,
    kwok_node,
    wait_kwok_nodes_ready,
)

from cnibench.backends.base import Capability, ClusterSpec, NodeRole, WorkloadKind, WorkloadSpec
from cnibench.backends.kube import render
from cnibench.backends.kube.api import Applier
from cnibench.backends.kube.cluster import KubeCluster, Timeouts
from cnibench.backends.kube.cni import cni_definition
from cnibench.backends.kube.cnis import DRIVERS
from cnibench.backends.kube.cnis.base import ObjectScope
from cnibench.backends.kube.cnis.cilium import (
    cilium_egress_gateway_policy,
    cilium_l7_policy,
    cilium_values,
)
from cnibench.backends.kube.helm import helm_template_argv
from cnibench.backends.kube.images import Images
from cnibench.errors import ProvisioningError, UnsupportedError
from cnibench.policy import PolicyPeer, PolicySpec, PortRange, PriorityCase, PriorityLayer

SESSION = "tier"
NAMESPACE = "cnibench-tier-render"
KWOK_TAINT = {"key": KWOK_NODE_ANNOTATION[0], "value": "fake", "effect": "NoSchedule"}
KWOK_TOLERATION = {"key": KWOK_NODE_ANNOTATION[0], "operator": "Exists", "effect": "NoSchedule"}
IMAGES = Images(sockperf="docker.io/example/sockperf:3.10")


@pytest.fixture(scope="module")
def applier(api_client: Any) -> Applier:
    return Applier(api_client)


@pytest.fixture(scope="module")
def render_namespace(applier: Applier) -> Iterator[str]:
    manifest = render.namespace(NAMESPACE, session=SESSION)
    applier.apply(manifest)
    try:
        yield NAMESPACE
    finally:
        applier.delete(manifest)


def _policy(extra: int) -> PolicySpec:
    return PolicySpec(
        target=PolicyPeer("srv", "10.0.0.2"),
        allowed=(PolicyPeer("cli", "10.0.0.3"), PolicyPeer("cli2", "10.0.0.4")),
        ports=(PortRange.single(5201), PortRange(8000, 8010)),
        extra_rules=extra,
    )


CORE_CASES: dict[str, Callable[[str], list[dict[str, Any]]]] = {
    "pod-client": lambda ns: [render.pod("c", namespace=ns, session=SESSION, role=NodeRole.CLIENT)],
    **{
        f"pod-{kind.value}": (
            lambda ns, kind=kind: [
                render.pod(
                    "s",
                    namespace=ns,
                    session=SESSION,
                    role=NodeRole.SERVER,
                    workloads=[WorkloadSpec(kind, 8080)],
                    images=IMAGES,
                )
            ]
        )
        for kind in WorkloadKind
    },
    "pod-all-workloads": lambda ns: [
        render.pod(
            "all",
            namespace=ns,
            session=SESSION,
            role=NodeRole.SERVER,
            workloads=[
                WorkloadSpec(k, p)
                for k, p in zip(WorkloadKind, (5201, 11111, 80, 5557), strict=True)
            ],
            images=IMAGES,
        )
    ],
    **{
        f"network-policy-{extra}-rules": (
            lambda ns, extra=extra: [
                render.network_policy(_policy(extra), name="p", namespace=ns, session=SESSION)
            ]
        )
        for extra in (0, 100, 1000)
    },
    "monitoring": lambda ns: render.monitoring_manifests(namespace=ns, session=SESSION),
    "capture-pod": lambda ns: [
        render.capture_pod("cap", namespace=ns, session=SESSION, role=NodeRole.CLIENT)
    ],
    "split-service": lambda ns: [
        render.split_service("split-v1", namespace=ns, session=SESSION, endpoint="v1", port=80)
    ],
}


@pytest.mark.parametrize("case", sorted(CORE_CASES), ids=sorted(CORE_CASES))
def test_core_manifest_accepted(applier: Applier, render_namespace: str, case: str) -> None:
    for manifest in CORE_CASES[case](render_namespace):
        answer = applier.apply(manifest, dry_run=True)
        assert answer["metadata"]["name"] == manifest["metadata"]["name"]


def test_cilium_egress_gateway_policy_accepted(
    applier: Applier, render_namespace: str, cilium_crds: list[str]
) -> None:
    manifest = cilium_egress_gateway_policy(
        "eg",
        session=SESSION,
        namespace=render_namespace,
        clients=["c"],
        destinations=["198.18.0.9/32"],
    )
    answer = applier.apply(manifest, dry_run=True)
    assert answer["spec"]["destinationCIDRs"] == ["198.18.0.9/32"]


@pytest.mark.parametrize(
    ("method", "path"), [("GET", "/"), ("post", "/api/v1.0")], ids=["get-root", "post-dotted"]
)
def test_cilium_l7_policy_accepted(
    applier: Applier, render_namespace: str, cilium_crds: list[str], method: str, path: str
) -> None:
    manifest = cilium_l7_policy(
        "l7",
        namespace=render_namespace,
        session=SESSION,
        target="s",
        port=80,
        method=method,
        path=path,
    )
    answer = applier.apply(manifest, dry_run=True)
    rule = answer["spec"]["ingress"][0]["toPorts"][0]["rules"]["http"][0]
    assert rule["method"] == method.upper()


@pytest.mark.parametrize("weights", [(60, 40), (95, 5), (100, 0)], ids=["60-40", "95-5", "100-0"])
def test_gateway_and_route_accepted(
    applier: Applier, render_namespace: str, gateway_api_crds: list[str], weights: tuple[int, int]
) -> None:
    objects = [
        render.gateway("gw", namespace=render_namespace, session=SESSION, gateway_class="cilium"),
        render.http_route(
            "gw",
            namespace=render_namespace,
            session=SESSION,
            gateway_name="gw",
            backends={"split-v1": (80, weights[0]), "split-v2": (80, weights[1])},
        ),
    ]
    answers = [applier.apply(m, dry_run=True) for m in objects]
    refs = answers[1]["spec"]["rules"][0]["backendRefs"]
    assert [r["weight"] for r in refs] == list(weights)


def test_negative_route_weight_is_rejected(
    applier: Applier, render_namespace: str, gateway_api_crds: list[str]
) -> None:
    route = render.http_route(
        "bad", namespace=render_namespace, session=SESSION, gateway_name="gw",
        backends={"split-v1": (80, 1)},
    )  # fmt: skip
    route["spec"]["rules"][0]["backendRefs"][0]["weight"] = -1
    with pytest.raises(ProvisioningError, match="weight"):
        applier.apply(route, dry_run=True)


def test_network_policy_with_invalid_port_is_rejected(
    applier: Applier, render_namespace: str
) -> None:
    manifest = render.network_policy(
        _policy(0), name="p", namespace=render_namespace, session=SESSION
    )
    manifest["spec"]["ingress"][0]["ports"][0]["port"] = 70000
    with pytest.raises(ProvisioningError, match="NetworkPolicy"):
        applier.apply(manifest, dry_run=True)


CILIUM_SETS = {
    "kube-proxy": {"mode": "kube-proxy"},
    "kpr": {"mode": "kpr"},
    "kpr-egress-l7": {"mode": "kpr", "features": "egress-gateway,l7"},
    "kpr-gateway-api": {"mode": "kpr", "features": "gateway-api,l7"},
}


@pytest.mark.parametrize("encryption", ["", "wireguard"], ids=["plain", "wireguard"])
@pytest.mark.parametrize("option_set", sorted(CILIUM_SETS), ids=sorted(CILIUM_SETS))
def test_cilium_chart_renders_and_is_accepted(
    applier: Applier,
    cilium_module: Path,
    gateway_api_crds: list[str],
    cilium_crds: list[str],
    tmp_path: Path,
    option_set: str,
    encryption: str,
) -> None:
    helm = bin_dir() / "helm"
    if not helm.is_file():
        pytest.skip(f"helm missing in {bin_dir()} (run: bash scripts/kube-tier.sh)")
    cni = cni_definition(
        ClusterSpec(cni="cilium", encryption=encryption, options=CILIUM_SETS[option_set]),
        k8s_service_host="cnibench-control-plane",
    )
    assert cni.chart is not None
    values = tmp_path / "values.yaml"
    values.write_text(yaml.safe_dump(dict(cni.chart.values)))
    argv = helm_template_argv(
        cilium_module / "install" / "kubernetes" / "cilium",
        values,
        release="cilium",
        namespace="kube-system",
        kube_version=K8S_VERSION.removeprefix("v"),
    )
    done = subprocess.run(
        [str(helm), *argv[1:]], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr
    documents = [d for d in yaml.safe_load_all(done.stdout) if d]
    kinds = {d["kind"] for d in documents}
    assert {"DaemonSet", "Deployment"} <= kinds
    # Namespaces the chart creates (cilium-secrets) must exist for its namespaced objects to be
    # validated; a dry-run of the Namespace itself would not persist it.
    for document in documents:
        if document["kind"] == "Namespace":
            applier.apply(document)
    for document in documents:
        applier.apply(document, dry_run=True)


def test_cilium_values_reject_unknown_key_by_schema(cilium_module: Path, tmp_path: Path) -> None:
    helm = bin_dir() / "helm"
    if not helm.is_file():
        pytest.skip(f"helm missing in {bin_dir()} (run: bash scripts/kube-tier.sh)")
    values = cilium_values(mode="kpr", features=frozenset(), wireguard=False)
    values["kubeProxyReplacement"] = "sometimes"
    path = tmp_path / "values.yaml"
    path.write_text(yaml.safe_dump(values))
    argv = helm_template_argv(
        cilium_module / "install" / "kubernetes" / "cilium",
        path,
        release="c",
        namespace="kube-system",
        kube_version=K8S_VERSION.removeprefix("v"),
    )
    done = subprocess.run(
        [str(helm), *argv[1:]], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode != 0
    assert "kubeProxyReplacement" in done.stderr


# -- orchestration on kwok nodes -------------------------------------------------------------


@pytest.fixture(scope="module")
def kwok_nodes(api_client: Any) -> Iterator[list[str]]:
    """One fake node per role, Ready through kwok, carrying only the kwok taint."""
    from kubernetes import client

    core: Any = client.CoreV1Api(api_client)
    names = []
    roles = (NodeRole.CLIENT, NodeRole.SERVER, NodeRole.EGRESS_GW)
    try:
        for index, role in enumerate(roles):
            name = f"cbt-kwok-{role.value}"
            labels = {render.ROLE_LABEL: role.value, "type": "kwok"}
            address = f"127.0.1.{index + 2}"
            core.create_node(kwok_node(name, address=address, labels=labels, taints=[KWOK_TAINT]))
            names.append(name)
        wait_kwok_nodes_ready(core, names, taints=[KWOK_TAINT])
        yield names
    finally:
        for name in names:
            core.delete_node(name)


@pytest.fixture
def kube_cluster(api_client: Any, kwok_nodes: list[str]) -> Iterator[KubeCluster]:
    cluster = KubeCluster(
        api_client,
        ClusterSpec(cni="kindnet"),
        cni_definition(ClusterSpec(cni="kindnet")),
        provider="existing",
        session="kwok01",
        images=IMAGES,
        tolerations=[KWOK_TOLERATION],
        timeouts=Timeouts(pod_ready=60, delete=60),
    )
    cluster.start()
    try:
        yield cluster
    finally:
        cluster.teardown()


def test_nodes_are_found_by_role(kube_cluster: KubeCluster) -> None:
    assert [n.name for n in kube_cluster.nodes] == [
        "cbt-kwok-client", "cbt-kwok-server", "cbt-kwok-egress-gw",
    ]  # fmt: skip
    assert kube_cluster.node(NodeRole.SERVER).ip == "127.0.1.3"


@pytest.mark.parametrize("role", list(NodeRole), ids=[r.value for r in NodeRole])
def test_place_puts_pod_on_role_node(kube_cluster: KubeCluster, role: NodeRole) -> None:
    pod = kube_cluster.place(
        f"p-{role.value}", role=role, workloads=[WorkloadSpec(WorkloadKind.HTTP_ECHO, 80)]
    )
    assert pod.node.name == f"cbt-kwok-{role.value}"
    assert pod.node.role is role
    assert pod.ip


def test_a_service_and_further_services_are_accepted_with_one_node_port_per_port(
    kube_cluster: KubeCluster, api_client: Any
) -> None:
    """The baseline's Service target on a real API server: a NodePort Service with TCP and UDP
    on one NodePort per port, further Services selecting the same pod, the pod listed as the
    ready endpoint (the EndpointSlice controller), all removed again; another proxy than the
    cluster's is refused naming it."""
    from kubernetes import client

    core: Any = client.CoreV1Api(api_client)
    server = kube_cluster.place(
        "svc-srv",
        role=NodeRole.SERVER,
        workloads=[
            WorkloadSpec(WorkloadKind.IPERF3_SERVER, 5201),
            WorkloadSpec(WorkloadKind.HTTP_ECHO, 80),
        ],
    )
    with kube_proxy_configmap(core, "iptables"):
        caps = kube_cluster.capabilities
        assert {Capability.SERVICE_PROXY, Capability.SERVICE_IPTABLES} <= caps
        assert Capability.SERVICE_EBPF not in caps
        service = kube_cluster.expose(server, [5201, 80], proxy="iptables", others=3)
        with pytest.raises(UnsupportedError, match="choose --proxy iptables"):
            kube_cluster.expose(server, [5201, 80], proxy="ebpf", others=0)
    stored = core.read_namespaced_service("svc-srv-svc", kube_cluster.namespace)
    assert stored.spec.type == "NodePort"
    assert stored.spec.cluster_ip == service.cluster_ip
    assert stored.spec.selector == {render.ENDPOINT_LABEL: "svc-srv"}
    node_ports = {(p.port, p.protocol): p.node_port for p in stored.spec.ports}
    assert node_ports == {
        (port, protocol): service.node_ports[port]
        for port in (5201, 80)
        for protocol in ("TCP", "UDP")
    }
    assert len(set(service.node_ports.values())) == 2
    assert service.ports == {5201: 5201, 80: 80}
    assert service.node_ip == server.node.ip == "127.0.1.3"
    names = sorted(
        s.metadata.name for s in core.list_namespaced_service(kube_cluster.namespace).items
    )
    assert names == ["svc-srv-svc", *(f"svc-srv-svc-{i:05d}" for i in range(3))]
    kube_cluster.remove_service()
    kube_cluster.remove_service()  # safe to repeat
    assert core.list_namespaced_service(kube_cluster.namespace).items == []


def test_remove_deletes_the_pod(kube_cluster: KubeCluster, api_client: Any) -> None:
    from kubernetes import client

    pod = kube_cluster.place("gone", role=NodeRole.CLIENT)
    kube_cluster.remove(pod)
    names = [
        p.metadata.name
        for p in client.CoreV1Api(api_client).list_namespaced_pod(kube_cluster.namespace).items
    ]
    assert "gone" not in names


def test_teardown_leaves_nothing(api_client: Any, kwok_nodes: list[str]) -> None:
    from kubernetes import client

    cluster = KubeCluster(
        api_client,
        ClusterSpec(cni="kindnet"),
        cni_definition(ClusterSpec(cni="kindnet")),
        provider="existing",
        session="kwok02",
        tolerations=[KWOK_TOLERATION],
        timeouts=Timeouts(pod_ready=60, delete=60),
    )
    cluster.start()
    cluster.place("a", role=NodeRole.CLIENT)
    cluster.place(
        "b", role=NodeRole.SERVER, workloads=[WorkloadSpec(WorkloadKind.IPERF3_SERVER, 5201)]
    )
    cluster.teardown()
    core: Any = client.CoreV1Api(api_client)
    left = core.list_namespace(label_selector=f"{render.SESSION_LABEL}=kwok02").items
    assert left == []
    cluster.teardown()  # safe to repeat


# -- priority cases of seed 003 (Kubernetes + Cilium objects, server-side) -------------------


PRIORITY_SPEC = PolicySpec(
    target=PolicyPeer("srv", "10.0.0.2"),
    allowed=(PolicyPeer("cli", "10.0.0.3"),),
    ports=(PortRange.single(80), PortRange(8000, 8010)),
)


@pytest.mark.parametrize(
    "layers",
    [[PriorityLayer("allow")], [PriorityLayer("deny")],
     [PriorityLayer("allow", priority=5.0), PriorityLayer("deny", priority=6.0)]],
    ids=["k8s-deny+cilium-allow", "k8s-deny+cilium-deny", "k8s-deny+cilium-allow+deny"],
)  # fmt: skip
def test_priority_case_objects_accepted(
    applier: Applier,
    render_namespace: str,
    cilium_crds: list[str],
    layers: list[PriorityLayer],
) -> None:
    case = PriorityCase("k8s-deny-and-layers", kubernetes_deny=True, layers=tuple(layers))
    objects = [
        render.deny_all_ingress(
            "srv", name="cnibench-prio-k8s", namespace=render_namespace, session=SESSION
        ),
        *DRIVERS["cilium"].priority_objects(
            ObjectScope(session=SESSION, namespace=render_namespace), PRIORITY_SPEC, case
        ),
    ]
    answers = [applier.apply(m, dry_run=True) for m in objects]
    assert [a["kind"] for a in answers] == ["NetworkPolicy"] + ["CiliumNetworkPolicy"] * len(layers)
    assert answers[0]["spec"].get("ingress") in (None, [])
    for layer, answer in zip(layers, answers[1:], strict=True):
        key = "ingress" if layer.action == "allow" else "ingressDeny"
        ports = answer["spec"][key][0]["toPorts"][0]["ports"]
        assert ports[1] == {"port": "8000", "endPort": 8010, "protocol": "TCP"}


# -- exec on a kwok pod: no kubelet, so the API server cannot reach one ------------------------


@pytest.fixture
def unreachable_kubelet_pod(api_client: Any, render_namespace: str) -> Iterator[str]:
    """A Running pod (kwok) on a node whose kubelet endpoint is a closed loopback port, so the
    API server's exec dial is refused at once and never leaves this host."""
    from kubernetes import client

    core: Any = client.CoreV1Api(api_client)
    node = "cbt-kwok-noexec"
    core.create_node(kwok_node(node, address="127.0.0.1"))
    try:
        manifest = render.pod("noexec", namespace=render_namespace, session=SESSION,
                              role=NodeRole.CLIENT)  # fmt: skip
        manifest["spec"].pop("nodeSelector")
        manifest["spec"]["nodeName"] = node
        core.create_namespaced_pod(render_namespace, manifest)
        deadline = time.monotonic() + 30
        while not core.read_namespaced_pod("noexec", render_namespace).status.pod_ip:
            assert time.monotonic() < deadline, "kwok did not start the pod"
            time.sleep(0.2)
        yield "noexec"
    finally:
        core.delete_namespaced_pod("noexec", render_namespace, grace_period_seconds=0)
        core.delete_node(node)


def test_exec_without_kubelet_is_a_one_line_tool_error(
    api_client: Any, render_namespace: str, unreachable_kubelet_pod: str
) -> None:
    from cnibench.backends.base import Node
    from cnibench.backends.kube.cluster import KubePod
    from cnibench.errors import ToolError

    pod = KubePod(
        unreachable_kubelet_pod,
        render_namespace,
        Node("cbt-kwok-noexec", NodeRole.CLIENT, "127.0.0.1"),
        "10.0.0.1",
        api_client,
    )
    started = time.monotonic()
    with pytest.raises(ToolError) as caught:
        pod.run(["iperf3", "--version"], timeout=10)
    assert time.monotonic() - started < 10
    message = str(caught.value)
    assert "\n" not in message
    assert message.startswith("exec of iperf3 in pod noexec failed")
    assert "connection refused" in message
    assert "audit-id" not in message, message  # the server's message, not the headers


# -- Antrea egress (CRDs unavailable: a fake applier records them; labels are real) -----------


class _FakeApplier:
    """Records applied/deleted objects: Antrea's CRDs cannot be installed in this tier."""

    def __init__(self) -> None:
        self.log: list[tuple[str, str]] = []

    def apply_all(self, manifests: Any, *, dry_run: bool = False) -> list[dict[str, Any]]:
        self.log.extend(("apply", m["kind"]) for m in manifests)
        return []

    def delete(self, manifest: dict[str, Any]) -> bool:
        self.log.append(("delete", manifest["kind"]))
        return True

    def namespaced(self, manifest: dict[str, Any]) -> bool:
        """What the server's discovery would say: Antrea's Egress and ExternalIPPool
        (crd.antrea.io/v1beta1) are cluster-scoped."""
        return manifest["kind"] not in ("Egress", "ExternalIPPool")


@pytest.fixture
def antrea_cluster(api_client: Any, kwok_nodes: list[str]) -> Iterator[KubeCluster]:
    spec = ClusterSpec(cni="antrea")
    cluster = KubeCluster(
        api_client,
        spec,
        cni_definition(spec),
        provider="existing",
        session="kwok03",
        images=IMAGES,
        tolerations=[KWOK_TOLERATION],
        timeouts=Timeouts(pod_ready=60, delete=60),
        egress_ip_range=("172.18.255.251", "172.18.255.254"),
    )
    cluster.start()
    try:
        yield cluster
    finally:
        cluster.teardown()


def test_antrea_egress_returns_the_egress_ip_and_labels_clients(
    antrea_cluster: KubeCluster, api_client: Any
) -> None:
    from kubernetes import client

    pod = antrea_cluster.place("eg-cli", role=NodeRole.CLIENT)
    fake = _FakeApplier()
    antrea_cluster._runtime.applier = fake  # type: ignore[assignment]
    heard: list[str] = []
    antrea_cluster.listen(heard.append)
    source = antrea_cluster.enable_egress_gateway([pod], destination="172.18.0.1/32")
    # An existing cluster: both cluster-wide objects are named before they are applied.
    assert heard == [
        "creating cluster-wide ExternalIPPool cnibench-pool-kwok03, Egress"
        " cnibench-egress-kwok03 for antrea's egress gateway (labelled"
        " cnibench.io/session=kwok03; removed at teardown)"
    ]
    core: Any = client.CoreV1Api(api_client)
    labels = core.read_namespaced_pod("eg-cli", antrea_cluster.namespace).metadata.labels
    assert source == "172.18.255.251"
    assert labels["cnibench.io/egress"] == "cnibench-egress-kwok03"
    assert fake.log == [("apply", "ExternalIPPool"), ("apply", "Egress")]
    antrea_cluster.disable_egress_gateway()
    labels = core.read_namespaced_pod("eg-cli", antrea_cluster.namespace).metadata.labels
    assert "cnibench.io/egress" not in labels
    assert fake.log[2:] == [("delete", "Egress"), ("delete", "ExternalIPPool")]


def test_antrea_egress_without_range_is_unsupported(kube_cluster: KubeCluster) -> None:
    from cnibench.errors import UnsupportedError

    spec = ClusterSpec(cni="antrea")
    kube_cluster._runtime.cni = cni_definition(spec)
    with pytest.raises(UnsupportedError, match="egress-ip-range"):
        kube_cluster.egress_manifests(["c"], destination="172.18.0.1/32")


def test_cluster_without_external_host_is_unsupported(kube_cluster: KubeCluster) -> None:
    from cnibench.errors import UnsupportedError

    with pytest.raises(UnsupportedError, match="CNIBENCH_EXTERNAL_ADDRESS"):
        _ = kube_cluster.external


# -- teardown of owned clusters, secrets ------------------------------------------------------


def test_owned_cluster_teardown_releases_it_once(api_client: Any, kwok_nodes: list[str]) -> None:
    from kubernetes import client

    released: list[str] = []
    cluster = KubeCluster(
        api_client,
        ClusterSpec(cni="kindnet"),
        cni_definition(ClusterSpec(cni="kindnet")),
        provider="kind",
        session="kwok04",
        tolerations=[KWOK_TOLERATION],
        release=lambda: released.append("deleted"),
    )
    cluster.start()
    core: Any = client.CoreV1Api(api_client)
    try:
        cluster.teardown()
        cluster.teardown()
        assert released == ["deleted"]
        # The whole cluster goes, so the namespace is not deleted one by one first.
        assert core.read_namespace(cluster.namespace).metadata.name == cluster.namespace
    finally:
        core.delete_namespace(cluster.namespace)


def test_environment_holds_no_credentials(
    kube_cluster: KubeCluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ARM_CLIENT_SECRET", "arm-secret-5c1e")
    monkeypatch.setenv("KUBECONFIG", "/tmp/token-kubeconfig")
    text = repr(kube_cluster.environment().to_json_dict())
    assert "arm-secret-5c1e" not in text
    assert "token-kubeconfig" not in text
    assert "cbt-kwok-client" in text  # the nodes are there, so the check looked at real content
