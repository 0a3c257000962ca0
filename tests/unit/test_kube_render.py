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
from cnibench.backends.kube.cni import cni_definition
from cnibench.backends.kube.cnis import DRIVERS, cni_names
from cnibench.backends.kube.cnis.antrea import (
    ANTREA_TIERS,
    antrea_cluster_network_policy,
    antrea_egress,
    antrea_external_ip_pool,
    antrea_l7_policy,
)
from cnibench.backends.kube.cnis.base import ObjectScope
from cnibench.backends.kube.cnis.cilium import cilium_network_policy, parse_cilium_encryption
from cnibench.backends.kube.images import Images
from cnibench.backends.kube.pods import exec_returncode
from cnibench.backends.kube.providers import (
    AksProvider,
    KindProvider,
    aks_variables,
    kind_create_argv,
)
from cnibench.errors import ConfigError, ToolError, UnsupportedError
from cnibench.policy import PolicyPeer, PolicySpec, PortRange, PriorityCase, PriorityLayer
from cnibench.scenarios.profiles import profile_named
from cnibench.tools.registry import ToolTarget
from cnibench.tools.sockperf import SOCKPERF
from engine_stand_in import fake_engine, node_containers


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


@pytest.mark.parametrize("name", cni_names())
def test_every_cni_declares_readiness(name: str) -> None:
    cni = cni_definition(ClusterSpec(cni=name))
    assert cni.readiness
    assert all(r.kind in ("DaemonSet", "Deployment") for r in cni.readiness)


def test_unknown_cni_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="weave"):
        cni_definition(ClusterSpec(cni="weave"))


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


def test_sockperf_servers_run_on_the_cpu_the_client_runs_on() -> None:
    manifest = render.pod(
        "sp",
        namespace="ns",
        session="s1",
        role=NodeRole.SERVER,
        workloads=[WorkloadSpec(WorkloadKind.SOCKPERF_SERVER, 11111)],
    )
    client = SOCKPERF.client
    assert client is not None
    pinned = client.argv(ToolTarget("198.19.1.4", 11111), profile_named("smoke"))[:3]
    containers = manifest["spec"]["containers"]
    commands = [c["command"] for c in containers if c["name"].startswith("sockperf")]
    assert len(commands) == 2  # UDP and TCP
    assert all(command[:3] == pinned and "sockperf" in command for command in commands)
    assert pinned[0] == "taskset"


def test_sockperf_without_image_is_refused() -> None:
    with pytest.raises(ConfigError, match="CNIBENCH_IMAGE_SOCKPERF"):
        render.pod(
            "sp",
            namespace="ns",
            session="s1",
            role=NodeRole.SERVER,
            workloads=[WorkloadSpec(WorkloadKind.SOCKPERF_SERVER, 11111)],
            images=Images(sockperf=""),
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
    egress = antrea_egress("eg", session="s", namespace="ns", pool="pool")
    assert egress["apiVersion"] == "crd.antrea.io/v1beta1"
    assert egress["spec"]["externalIPPool"] == "pool"
    assert egress["spec"]["appliedTo"]["podSelector"]["matchLabels"]["cnibench.io/egress"] == "eg"


def test_antrea_l7_policy_structure() -> None:
    # Upstream API: crd.antrea.io/v1beta1 NetworkPolicy, ingress rule with ports and
    # l7Protocols [{http: {method, path}}] (Antrea docs/antrea-l7-network-policy.md).
    policy = antrea_l7_policy(
        "l7", namespace="ns", session="s", target="srv", port=80, method="get", path="/api/x"
    )
    assert (policy["apiVersion"], policy["kind"]) == ("crd.antrea.io/v1beta1", "NetworkPolicy")
    assert policy["metadata"]["namespace"] == "ns"
    assert policy["spec"]["appliedTo"] == [{"podSelector": {"matchLabels": {ENDPOINT: "srv"}}}]
    (rule,) = policy["spec"]["ingress"]
    assert rule["action"] == "Allow"
    assert rule["ports"] == [{"protocol": "TCP", "port": 80}]
    assert rule["l7Protocols"] == [{"http": {"method": "GET", "path": "/api/x"}}]


@pytest.mark.parametrize("path", ["api/x", "/api/*"], ids=["relative", "glob"])
def test_antrea_l7_policy_refuses_paths_it_would_not_match_exactly(path: str) -> None:
    with pytest.raises(ConfigError, match="L7 policy path"):
        antrea_l7_policy(
            "l7", namespace="ns", session="s", target="srv", port=80, method="GET", path=path
        )


def test_antrea_external_ip_pool_structure() -> None:
    # Upstream API: crd.antrea.io/v1beta1 ExternalIPPool (ipRanges start/end, nodeSelector).
    pool = antrea_external_ip_pool(
        "pool", session="s", first_ip="172.18.0.200", last_ip="172.18.0.209"
    )
    assert pool["spec"]["ipRanges"] == [{"start": "172.18.0.200", "end": "172.18.0.209"}]
    assert pool["spec"]["nodeSelector"]["matchLabels"] == {"cnibench.io/role": "egress-gw"}


@pytest.mark.parametrize(
    ("label", "kube_proxy_mode", "default_cni_off"),
    [
        ("cilium", "none", True),
        ("flannel", None, True),
        ("kindnet", None, False),
        ("flannel:kube-proxy=nftables", "nftables", True),
        ("kube-router:kube-proxy=iptables,napi=threaded", "iptables", True),
        ("cilium:mode=kube-proxy,kube-proxy=nftables", "nftables", True),
    ],
    ids=["cilium-kpr", "flannel", "kindnet", "flannel-nft", "kube-router-ipt", "cilium-kp-nft"],
)
def test_kind_config_round_trips(
    label: str, kube_proxy_mode: str | None, default_cni_off: bool
) -> None:
    spec = ClusterSpec.from_label(label)
    text = yaml.safe_dump(render.kind_cluster_config("c1", spec, cni_definition(spec)))
    config = yaml.safe_load(text)
    assert config["apiVersion"] == "kind.x-k8s.io/v1alpha4"
    assert config["networking"].get("kubeProxyMode") == kube_proxy_mode
    assert config["networking"].get("disableDefaultCNI", False) is default_cni_off
    roles = [n.get("labels", {}).get("cnibench.io/role") for n in config["nodes"]]
    assert roles == [None, "client", "server", "egress-gw"]
    assert {n["image"] for n in config["nodes"]} == {Images().kind_node}


@pytest.mark.parametrize(
    ("label", "message"),
    [
        ("flannel:kube-proxy=ipvs", "kube-proxy=ipvs: choose iptables or nftables"),
        ("flannel:napi=busy", "napi=busy: choose inline or threaded"),
        ("cilium:kube-proxy=nftables", "replaces kube-proxy, so it has no kube-proxy mode"),
    ],
)
def test_cluster_options_every_cni_takes_are_checked(label: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        cni_definition(ClusterSpec.from_label(label))


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
    node = f"{name}-control-plane"

    def kind(argv: list[str]) -> str:
        calls.append(list(argv))
        return {"clusters": name, "nodes": node}.get(argv[2], "") if argv[1] == "get" else ""

    existing = KindProvider(
        tmp_path,
        runner=kind,
        # Its node runs; no image there: the fake runner "builds" it.
        engine=fake_engine(node_containers({node: 4242})),
        modules_dir=tmp_path / "lib-modules",
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


# -- Antrea egress IP, priority cases (Antrea, Calico), exec status ---------------------------


def test_antrea_egress_pins_the_egress_ip() -> None:
    # Upstream API: crd.antrea.io/v1beta1 Egress spec.egressIP (must lie in the pool).
    egress = antrea_egress(
        "eg", session="s", namespace="ns", pool="pool", egress_ip="172.18.255.251"
    )
    assert egress["spec"]["egressIP"] == "172.18.255.251"
    assert "egressIP" not in antrea_egress("eg", session="s", namespace="ns", pool="p")["spec"]


ENDPOINT = render.ENDPOINT_LABEL
SCOPE = ObjectScope(session="s", namespace="ns")
PRIO_SPEC = PolicySpec(
    target=PolicyPeer("srv", "10.0.0.2"),
    allowed=(PolicyPeer("cli", "10.0.0.3"), PolicyPeer("cli2", "10.0.0.4")),
    ports=(PortRange.single(80), PortRange(8000, 8010)),
)


def test_antrea_tiers_match_upstream_priorities() -> None:
    # Antrea's static tiers (docs/antrea-network-policy.md, crd.antrea.io/v1beta1 Tier).
    assert dict(ANTREA_TIERS) == {
        "emergency": 50, "securityops": 100, "networkops": 150, "platform": 200,
        "application": 250, "baseline": 253,
    }  # fmt: skip


def test_antrea_tier_pair_renders_drop_above_allow() -> None:
    # Upstream API: crd.antrea.io/v1beta1 ClusterNetworkPolicy (tier, priority, appliedTo,
    # ingress[].action Allow/Drop, from[].podSelector+namespaceSelector, ports[].endPort).
    case = PriorityCase(
        "tier-pair",
        kubernetes_deny=False,
        layers=(
            PriorityLayer("deny", tier="securityops", priority=5.0),
            PriorityLayer("allow", tier="application", priority=10.0),
        ),
    )
    objects = DRIVERS["antrea"].priority_objects(SCOPE, PRIO_SPEC, case)
    assert [o["kind"] for o in objects] == ["ClusterNetworkPolicy", "ClusterNetworkPolicy"]
    assert [o["apiVersion"] for o in objects] == ["crd.antrea.io/v1beta1"] * 2
    assert [(o["spec"]["tier"], o["spec"]["priority"]) for o in objects] == [
        ("securityops", 5.0), ("application", 10.0),
    ]  # fmt: skip
    assert [o["spec"]["ingress"][0]["action"] for o in objects] == ["Drop", "Allow"]
    rule = objects[1]["spec"]["ingress"][0]
    assert rule["ports"] == [
        {"protocol": "TCP", "port": 80},
        {"protocol": "TCP", "port": 8000, "endPort": 8010},
    ]
    assert rule["from"][1]["podSelector"]["matchLabels"] == {"cnibench.io/endpoint": "cli2"}
    applied = objects[0]["spec"]["appliedTo"][0]
    assert applied["namespaceSelector"]["matchLabels"] == {"kubernetes.io/metadata.name": "ns"}
    assert applied["podSelector"]["matchLabels"] == {"cnibench.io/endpoint": "srv"}


@pytest.mark.parametrize(
    ("tier", "priority"), [("gold", 5.0), ("application", 0.5)], ids=["bad-tier", "bad-priority"]
)
def test_antrea_rejects_unknown_tier_or_priority(tier: str, priority: float) -> None:
    with pytest.raises(ConfigError):
        antrea_cluster_network_policy(
            PRIO_SPEC, name="p", namespace="ns", session="s", tier=tier, priority=priority
        )


def test_kubernetes_deny_plus_calico_allow() -> None:
    # Upstream API: projectcalico.org/v3 NetworkPolicy (order, selector, types, ingress[].action
    # Allow/Deny, source.selector, destination.ports with "first:last" ranges).
    case = PriorityCase(
        "k8s-deny-calico-allow",
        kubernetes_deny=True,
        layers=(PriorityLayer("allow", priority=100.0),),
    )
    (allow,) = DRIVERS["calico"].priority_objects(SCOPE, PRIO_SPEC, case)
    assert allow["apiVersion"] == "projectcalico.org/v3"
    assert allow["spec"]["order"] == 100.0
    assert allow["spec"]["selector"] == "cnibench.io/endpoint == 'srv'"
    rule = allow["spec"]["ingress"][0]
    assert rule["action"] == "Allow"
    assert rule["source"]["selector"] == "cnibench.io/endpoint in {'cli', 'cli2'}"
    assert rule["destination"]["ports"] == [80, "8000:8010"]


def test_priority_case_needs_a_cni_policy_api() -> None:
    case = PriorityCase("allow-only", kubernetes_deny=False, layers=(PriorityLayer("allow"),))
    with pytest.raises(UnsupportedError, match="flannel has no policy API of its own"):
        DRIVERS["flannel"].priority_objects(SCOPE, PRIO_SPEC, case)


@pytest.mark.parametrize(
    ("status", "code"),
    [
        ('{"metadata":{},"status":"Success"}', 0),
        ('{"metadata":{},"status":"Failure","message":"command terminated with non-zero exit'
         ' code: error executing command [sh -c exit 3], exit code 3","reason":"NonZeroExitCode",'
         '"details":{"causes":[{"reason":"ExitCode","message":"3"}]}}', 3),
    ],
    ids=["success", "exit-3"],
)  # fmt: skip
def test_exec_returncode_from_status(status: str, code: int) -> None:
    # Status shapes as the API server sends them on the exec error channel (hand-written).
    assert exec_returncode(status, tool="sh", pod="p") == code


@pytest.mark.parametrize(
    "status",
    ['{"status":"Failure","message":"container not found (\\"tools\\")","reason":"BadRequest"}',
     ""],
    ids=["failure", "empty"],
)  # fmt: skip
def test_exec_that_never_ran_is_a_tool_error(status: str) -> None:
    with pytest.raises(ToolError, match="exec of sh in pod p"):
        exec_returncode(status, tool="sh", pod="p")


def test_cilium_policy_refuses_a_pass_action() -> None:
    with pytest.raises(ConfigError, match="no pass action"):
        cilium_network_policy(PRIO_SPEC, name="p", namespace="ns", session="s1", action="pass")
