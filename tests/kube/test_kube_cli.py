"""``cnibench run --cluster existing`` end to end against the tier's real API server.

The tier's nodes are kwok nodes: they run no container, so a run gets as far as anything
without a kubelet can go (nodes found by role, the CNI's workloads checked, session namespace,
pods placed and Ready, the case's NetworkPolicy accepted) and then fails at the first exec into
a pod. These tests check that the command line fails there the way SPEC section 9 asks: one
line, a non-zero exit, no traceback, no namespace or policy left, and results that load.

The "installed CNI" is a stand-in: Calico's operator Deployment and ``calico-node`` DaemonSet
with a placeholder image, which kwok reports as rolled out; or flannel's real objects, which
cnibench renders itself, with a placeholder image. The images named in the environment are
never pulled (kwok runs nothing).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kube_support import (
    K8S_VERSION,
    PLACEHOLDER_IMAGE,
    cni_stand_in,
    delete_and_wait_gone,
    free_port,
    kube_proxy_configmap,
)
from kube_support import role_nodes as kube_role_nodes

from cnibench import load_results
from cnibench.backends.base import NodeRole
from cnibench.backends.kube import render

PLACEHOLDER = PLACEHOLDER_IMAGE
ROLLOUT_TIMEOUT = 90.0
RUN_TIMEOUT = 300.0
"""Well below the 600 s a CNI gets to roll out: a run that waited for a workload nobody is
creating would be killed here and fail the test."""


@pytest.fixture(scope="module")
def role_nodes(api_client: Any) -> Iterator[list[str]]:
    """One kwok node per role, Ready and untainted (the CLI adds no kwok toleration)."""
    from kubernetes import client

    with kube_role_nodes(client.CoreV1Api(api_client), "cbt-cli") as names:
        yield names


@pytest.fixture(scope="module")
def calico_stand_in(api_client: Any, role_nodes: list[str]) -> Iterator[None]:
    """What cnibench waits on for Calico, rolled out on the kwok nodes."""
    with cni_stand_in(api_client, "calico", timeout=ROLLOUT_TIMEOUT):
        yield


@pytest.fixture
def flannel_installed(api_client: Any, role_nodes: list[str], tmp_path: Path) -> Iterator[None]:
    """flannel's own objects (cnibench renders them), its DaemonSet rolled out on the kwok
    nodes with a placeholder image; removed again after the test, so no later test finds a
    second CNI."""
    from kubernetes import client

    from cnibench.backends.base import ClusterSpec
    from cnibench.backends.kube.addons import install_cni, wait_rollouts
    from cnibench.backends.kube.cni import cni_definition
    from cnibench.backends.kube.images import Images

    definition = cni_definition(
        ClusterSpec(cni="flannel"), images=Images(cni_overrides={"flannel": PLACEHOLDER})
    )
    core: Any = client.CoreV1Api(api_client)
    for name in role_nodes:
        # flannel's DaemonSet selects Linux nodes by the label every kubelet sets; kwok's
        # nodes have no kubelet to set it.
        core.patch_node(name, {"metadata": {"labels": {"kubernetes.io/os": "linux"}}})
    try:
        install_cni(
            api_client,
            definition,
            kubeconfig=tmp_path / "kubeconfig",
            timeout=10,
        )
        wait_rollouts(api_client, definition.readiness, timeout=ROLLOUT_TIMEOUT, owner="flannel")
        yield
    finally:
        delete_and_wait_gone(api_client, definition.manifests)


def _session_namespaces(api_client: Any) -> list[str]:
    from kubernetes import client

    listed = client.CoreV1Api(api_client).list_namespace(label_selector=render.SESSION_LABEL)
    return [str(item.metadata.name) for item in listed.items]  # Terminating ones included


def _cli_env(kubeconfig: Path) -> dict[str, str]:
    return {
        **os.environ,
        "KUBECONFIG": str(kubeconfig),
        # An existing cluster pulls from registries: name pullable images (never pulled here).
        "CNIBENCH_IMAGE_TOOLS": PLACEHOLDER,
        "CNIBENCH_IMAGE_SOCKPERF": PLACEHOLDER,
    }


def _run_argv(results: Path, *args: str) -> list[str]:
    return [sys.executable, "-m", "cnibench.cli", "run", "--cluster", "existing",
            "--results-dir", str(results), *args]  # fmt: skip


def _run_cli(kubeconfig: Path, results: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        _run_argv(results, *args),
        capture_output=True, text=True, timeout=RUN_TIMEOUT, env=_cli_env(kubeconfig),
        check=False,
    )  # fmt: skip


def _the_one_error_line(done: subprocess.CompletedProcess[str]) -> str:
    """The single ``cnibench: error:`` line of a run that failed with exit 1, no traceback."""
    assert done.returncode == 1, done.stdout + done.stderr
    assert "Traceback" not in done.stderr, done.stderr
    errors = [line for line in done.stderr.splitlines() if line.startswith("cnibench: error:")]
    assert len(errors) == 1, done.stderr
    return errors[0]


def _wait_namespaces_gone(api_client: Any, timeout: float = 90.0) -> list[str]:
    deadline = time.monotonic() + timeout
    left = _session_namespaces(api_client)
    while left and time.monotonic() < deadline:
        time.sleep(0.5)
        left = _session_namespaces(api_client)
    return left


def test_existing_cluster_without_the_cni_fails_at_once_in_one_line(
    api_client: Any, kubeconfig: Path, role_nodes: list[str], tmp_path: Path
) -> None:
    done = _run_cli(
        kubeconfig, tmp_path / "results",
        "--cni", "cilium", "--scenario", "priority", "--condition", "k8s-deny",
    )  # fmt: skip
    error = _the_one_error_line(done)
    assert "DaemonSet kube-system/cilium not found" in error
    assert "is cilium installed on this cluster?" in error
    assert _wait_namespaces_gone(api_client) == []


def test_run_on_kwok_nodes_fails_at_the_first_exec_and_leaves_nothing(
    api_client: Any, kubeconfig: Path, calico_stand_in: None, tmp_path: Path
) -> None:
    from kubernetes import client

    results = tmp_path / "results"
    done = _run_cli(
        kubeconfig, results, "--cni", "calico", "--scenario", "priority",
        "--condition", "k8s-deny",
    )  # fmt: skip
    output = done.stdout + done.stderr
    assert done.returncode == 1, output
    assert "Traceback" not in output, output
    # The pods were placed and Ready (kwok), so the first probe's exec is what failed: the
    # condition is reported unverified and the session ends normally (no "error:" line).
    not_verified = [line for line in output.splitlines() if line.startswith("NOT VERIFIED")]
    assert len(not_verified) == 1, output
    assert "priority/k8s-deny on calico: a check could not run: exec of" in not_verified[0]
    assert "connection refused" in not_verified[0]  # the closed loopback kubelet port
    assert "cnibench: error:" not in output
    assert _wait_namespaces_gone(api_client) == []
    policies = client.NetworkingV1Api(api_client).list_network_policy_for_all_namespaces(
        label_selector=render.SESSION_LABEL
    )
    assert policies.items == []
    frame = load_results(results)
    assert set(frame.scenario) == {"priority"}, output
    assert set(frame.cni) == {"calico"}
    assert not frame.verified.any()


def test_run_where_every_condition_is_skipped_says_so_and_fails(
    api_client: Any, kubeconfig: Path, calico_stand_in: None, tmp_path: Path
) -> None:
    """Calico has no Gateway API: every split condition is skipped. That is one line with the
    reason and the count (not one wrapped line per condition), and exit 1: nothing measured."""
    from cnibench.scenarios import build_scenarios

    conditions = len(build_scenarios()["split"].conditions())
    done = _run_cli(kubeconfig, tmp_path / "results", "--cni", "calico", "--scenario", "split")
    lines = done.stderr.splitlines()
    assert done.returncode == 1, done.stdout + done.stderr
    skips = [line for line in lines if line.startswith("skipped ")]
    assert skips == [
        f"skipped split/calico ({conditions} of {conditions} conditions):"
        " kube/calico lacks traffic-split"
    ], done.stderr
    assert "nothing was measured: every condition was skipped" in lines
    assert "truncated mean" not in done.stdout + done.stderr
    assert _wait_namespaces_gone(api_client) == []


def test_policy_scenarios_on_flannel_are_skipped_saying_it_enforces_no_policy(
    api_client: Any, kubeconfig: Path, flannel_installed: None, tmp_path: Path
) -> None:
    """Every priority condition needs NetworkPolicy, which flannel does not enforce: each is
    skipped before anything is deployed, and the skip lines give the reason and the hint."""
    from cnibench.backends.kube.cnis.flannel import NETWORK_POLICY_HINT
    from cnibench.scenarios import build_scenarios

    conditions = len(build_scenarios()["priority"].conditions())
    done = _run_cli(kubeconfig, tmp_path / "results", "--cni", "flannel", "--scenario", "priority")
    lines = done.stderr.splitlines()
    assert done.returncode == 1, done.stdout + done.stderr
    assert "Traceback" not in done.stderr, done.stderr
    skips = [line for line in lines if line.startswith("skipped ")]
    assert skips, done.stderr
    skipped = 0
    for line in skips:
        assert line.startswith("skipped priority/flannel ("), line
        assert ": kube/flannel lacks network-policy" in line, line
        assert line.endswith(f" ({NETWORK_POLICY_HINT})"), line
        skipped += int(line.split("(", 1)[1].split(" of ", 1)[0])
    assert skipped == conditions, done.stderr
    assert "nothing was measured: every condition was skipped" in lines
    assert _wait_namespaces_gone(api_client) == []


def test_cluster_that_cannot_port_forward_fails_with_the_reason(
    api_client: Any, kubeconfig: Path, calico_stand_in: None, tmp_path: Path
) -> None:
    """baseline needs Prometheus, reached through a port-forward; kwok's Prometheus pod is
    "Ready" but its kubelet refuses: one line naming the pod and the API server's reason."""
    done = _run_cli(
        kubeconfig, tmp_path / "results", "--cni", "calico", "--scenario", "baseline",
        "--runs", "1", "--condition", "same-node-idle-iperf3",
    )  # fmt: skip
    error = _the_one_error_line(done)
    assert "port-forward to pod cnibench-" in error
    assert "/prometheus-" in error
    assert ":9090 failed: error dialing backend: dial tcp 127.0.0." in error, error
    assert "audit-id" not in error  # the server's message, not the handshake's headers
    assert "connection refused" in error, error
    assert _wait_namespaces_gone(api_client) == []


def test_settings_the_cluster_would_need_changed_are_skipped_before_it_is_touched(
    api_client: Any, kubeconfig: Path, calico_stand_in: None, tmp_path: Path
) -> None:
    """Issue 33, item 1: ``napi=threaded`` and the wireguard scenario's encryption would
    change an existing cluster's settings. Their conditions are skipped up front, each group
    in one line said right after the backend line, before the cluster is looked at (no
    ``CNI:`` line, which the first provision prints), and no namespace is ever made."""
    from cnibench.backends.kube.existing import NEVER_CHANGES

    done = _run_cli(
        kubeconfig, tmp_path / "results", "--cni", "calico:napi=threaded",
        "--scenario", "egress,wireguard",
    )  # fmt: skip
    lines = done.stderr.splitlines()
    assert done.returncode == 1, done.stdout + done.stderr
    assert "Traceback" not in done.stderr, done.stderr
    skips = [line for line in lines if line.startswith("skipped ")]
    threaded = f"napi=threaded: {NEVER_CHANGES}"
    assert skips == [
        f"skipped egress/calico:napi=threaded (2 of 2 conditions: gateway-off, gateway-on):"
        f" {threaded}",
        f"skipped wireguard/calico:napi=threaded (2 of 4 conditions: off-rr, off-iperf3):"
        f" {threaded}",
        "skipped wireguard/calico:napi=threaded (2 of 4 conditions: on-rr, on-iperf3):"
        f" encryption wireguard: {NEVER_CHANGES}",
    ], done.stderr
    assert lines.index(skips[0]) == 1, done.stderr  # right after "--cluster existing"
    assert not [line for line in lines if ": CNI: " in line], done.stderr
    assert "nothing was measured: every condition was skipped" in lines
    assert "cnibench: error:" not in done.stderr
    assert _session_namespaces(api_client) == []


def test_cluster_wide_objects_are_said_before_they_are_made_and_removed_after(
    api_client: Any, kubeconfig: Path, calico_stand_in: None, tmp_path: Path
) -> None:
    """Issue 33, item 2: baseline needs Prometheus, whose ClusterRole and binding live
    outside the session namespace. On an existing cluster the run says so, naming both and
    the session label, before the run goes on (here it ends at the port-forward kwok cannot
    serve); at the end neither is left, nor any other session-labelled cluster-wide object."""
    from kubernetes import client

    done = _run_cli(
        kubeconfig, tmp_path / "results", "--cni", "calico", "--scenario", "baseline",
        "--runs", "1", "--condition", "same-node-idle-iperf3",
    )  # fmt: skip
    lines = done.stderr.splitlines()
    said = [line for line in lines if "creating cluster-wide" in line]
    assert len(said) == 1, done.stderr
    session = said[0].rsplit(f"{render.SESSION_LABEL}=", 1)[1].split(";", 1)[0]
    assert said[0] == (
        f"calico: creating cluster-wide ClusterRole cnibench-{session}-prometheus,"
        f" ClusterRoleBinding cnibench-{session}-prometheus for Prometheus to find"
        " node-exporter (CPU and memory per run) (labelled"
        f" {render.SESSION_LABEL}={session}; removed at teardown)"
    )
    error = _the_one_error_line(done)
    assert lines.index(said[0]) < lines.index(error)
    assert lines.index(said[0]) > next(i for i, line in enumerate(lines) if ": CNI: " in line)
    rbac: Any = client.RbacAuthorizationV1Api(api_client)
    for listed in (rbac.list_cluster_role, rbac.list_cluster_role_binding):
        assert listed(label_selector=render.SESSION_LABEL).items == []
    assert _wait_namespaces_gone(api_client) == []


def test_underlay_capture_places_a_host_network_pod_and_fails_cleanly_without_kubelet(
    api_client: Any, role_nodes: list[str]
) -> None:
    """The WireGuard proof on Kubernetes: a host-network capture pod lands on the sender's
    node and is Ready; its first exec (finding the uplink) is what kwok cannot serve."""
    from kubernetes import client

    from cnibench.backends.base import Capability, ClusterSpec
    from cnibench.backends.kube.cluster import KubeCluster, Timeouts
    from cnibench.backends.kube.cni import cni_definition
    from cnibench.backends.kube.images import Images
    from cnibench.errors import ToolError

    spec = ClusterSpec(cni="calico")
    cluster = KubeCluster(
        api_client, spec, cni_definition(spec), provider="existing", session="cap01",
        images=Images(tools=PLACEHOLDER, sockperf=PLACEHOLDER),
        timeouts=Timeouts(pod_ready=60, delete=60),
    )  # fmt: skip
    cluster.start()
    try:
        assert Capability.UNDERLAY_CAPTURE in cluster.capabilities
        sender = cluster.place("sender", role=NodeRole.CLIENT)
        with pytest.raises(ToolError, match=r"^exec of ip in pod capture-client failed: "):
            cluster.capture_underlay(b"cnibench-marker-1", ["true"], source=sender)
        stored = client.CoreV1Api(api_client).read_namespaced_pod(
            "capture-client", cluster.namespace
        )
        assert stored.spec.host_network is True
        assert stored.spec.node_name == sender.node.name == "cbt-cli-client"
        added = stored.spec.containers[0].security_context.capabilities.add
        assert sorted(added) == ["NET_ADMIN", "NET_RAW"]
        assert stored.status.pod_ip == "127.0.0.2"  # host network: the node's own address
    finally:
        cluster.teardown()
    assert _wait_namespaces_gone(api_client) == []


def test_terminated_kube_run_exits_130_and_leaves_nothing(
    api_client: Any, kubeconfig: Path, calico_stand_in: None, tmp_path: Path
) -> None:
    """SIGTERM once the run's first pod exists: the session namespace and everything in it
    go, and the command exits 130 (Ctrl-C is tested on a real cluster by the kind tier)."""
    signum = signal.SIGTERM
    from kubernetes import client

    core: Any = client.CoreV1Api(api_client)
    argv = _run_argv(tmp_path / "results", "--cni", "calico", "--scenario", "priority",
                     "--condition", "k8s-deny")  # fmt: skip
    child = subprocess.Popen(
        argv, env=_cli_env(kubeconfig), stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    try:
        deadline = time.monotonic() + 120
        signalled = False
        while child.poll() is None and time.monotonic() < deadline:
            pods = core.list_pod_for_all_namespaces(label_selector=render.SESSION_LABEL).items
            if pods:
                child.send_signal(signum)
                signalled = True
                break
            time.sleep(0.05)
        _, stderr = child.communicate(timeout=120)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
    assert signalled, "the run ended before any pod appeared"
    assert child.returncode == 130, stderr.decode(errors="replace")
    assert b"Traceback" not in stderr
    assert _wait_namespaces_gone(api_client) == []


# -- cnibench doctor on an existing cluster -------------------------------------------------


def test_doctor_names_the_server_the_cni_and_the_roles(
    kubeconfig: Path, calico_stand_in: None
) -> None:
    env = {**os.environ, "KUBECONFIG": str(kubeconfig), "COLUMNS": "300"}
    done = subprocess.run(
        [sys.executable, "-m", "cnibench.cli", "doctor"],
        capture_output=True, text=True, timeout=120, env=env, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    row = next(line for line in done.stdout.splitlines() if "│ existing" in line)
    cells = [cell.strip() for cell in row.strip("│ ").split("│")]
    assert cells[:2] == ["existing", "yes"], row
    roles = ("client", "server", "egress-gw")
    nodes = ", ".join(f"{role}=cbt-cli-{role} (label)" for role in roles)
    assert cells[2] == f"Kubernetes {K8S_VERSION}; CNI: calico; nodes: {nodes}", row


def test_doctor_on_an_unreachable_server_says_so_quickly(tmp_path: Path) -> None:
    from cnibench.backends.kube.doctor import existing_cluster_report

    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "c", "cluster": {"server": f"https://127.0.0.1:{free_port()}"}}],
        "users": [{"name": "u", "user": {"token": "t"}}],
        "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}],
        "current-context": "x",
    }
    path = tmp_path / "kubeconfig"
    path.write_text(json.dumps(config))
    usable, why = existing_cluster_report(path)
    assert usable is False
    assert why.startswith(f"kubeconfig {path}: API server not reachable: "), why
    assert "\n" not in why


def test_egress_without_an_external_host_is_skipped_up_front_with_the_variable_to_set(
    api_client: Any, kubeconfig: Path, calico_stand_in: None, tmp_path: Path
) -> None:
    """No CNIBENCH_EXTERNAL_ADDRESS on an existing cluster: both egress conditions are skipped
    before anything is deployed (no Prometheus, no pod), and the skip says what to set."""
    env = _cli_env(kubeconfig)
    env.pop("CNIBENCH_EXTERNAL_ADDRESS", None)
    done = subprocess.run(
        _run_argv(tmp_path / "results", "--cni", "calico", "--scenario", "egress"),
        capture_output=True, text=True, timeout=RUN_TIMEOUT, check=False, env=env,
    )  # fmt: skip
    hint = "(set CNIBENCH_EXTERNAL_ADDRESS to an address of this host its pods can reach)"
    assert done.returncode == 1, done.stdout + done.stderr
    skips = sorted(line for line in done.stderr.splitlines() if line.startswith("skipped "))
    assert skips == [
        "skipped egress/calico (1 of 2 conditions: gateway-off): kube/calico lacks"
        f" external-host {hint}",
        f"skipped egress/calico (1 of 2 conditions: gateway-on): kube/calico lacks egress-gateway,"
        f" external-host {hint}",
    ], done.stderr
    assert "cnibench: error" not in done.stderr
    assert "Prometheus" not in done.stderr
    assert _wait_namespaces_gone(api_client) == []


def test_service_targets_without_a_known_proxy_are_skipped_up_front_saying_why(
    api_client: Any, kubeconfig: Path, calico_stand_in: None, tmp_path: Path
) -> None:
    """The tier runs no kube-proxy and has no kube-system/kube-proxy ConfigMap, so which proxy
    programs its Services cannot be told: each Service condition is skipped before anything
    is deployed, with that reason."""
    from cnibench.backends.kube.services import proxy_hint

    done = _run_cli(
        kubeconfig, tmp_path / "results", "--cni", "calico", "--scenario", "baseline",
        "--target", "service", "--proxy", "iptables",
        "--condition", "cross-node-idle-iperf3-service-iptables-0svc",
    )  # fmt: skip
    assert done.returncode == 1, done.stdout + done.stderr
    skips = [line for line in done.stderr.splitlines() if line.startswith("skipped ")]
    assert skips == [
        "skipped baseline/calico (1 of 1 conditions: cross-node-idle-iperf3-service-iptables-0svc):"
        f" kube/calico lacks service-iptables ({proxy_hint('')})"
    ], done.stderr
    assert "could not be told" in skips[0]
    assert _wait_namespaces_gone(api_client) == []


@pytest.fixture
def cilium_with_a_small_policy_map(api_client: Any, role_nodes: list[str]) -> Iterator[None]:
    """Cilium's workloads rolled out on the kwok nodes, and its ConfigMap as an operator who
    sized the policy map down to 4096 entries per endpoint would have written it."""
    from kubernetes import client

    core: Any = client.CoreV1Api(api_client)
    config = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "cilium-config", "namespace": "kube-system"},
        "data": {"bpf-policy-map-max": "4096", "tunnel-protocol": "vxlan"},
    }
    with cni_stand_in(api_client, "cilium", timeout=ROLLOUT_TIMEOUT):
        core.create_namespaced_config_map("kube-system", config)
        try:
            yield
        finally:
            core.delete_namespaced_config_map("cilium-config", "kube-system")


def test_policies_beyond_what_the_cni_is_configured_for_are_skipped_naming_the_setting(
    api_client: Any, kubeconfig: Path, cilium_with_a_small_policy_map: None, tmp_path: Path
) -> None:
    """Issue 33, item 1: "rule counts beyond what the cluster allows" are skipped. 5000
    non-matching rules and the matching one need at least 5001 entries in the server pod's
    policy map, and this Cilium holds 4096: the condition is skipped before anything of it is
    placed (no Prometheus, no pod), naming the setting, its value and where it was read."""
    from kubernetes import client

    done = _run_cli(
        kubeconfig, tmp_path / "results", "--cni", "cilium", "--scenario", "policy",
        "--rules", "5000", "--clients", "1", "--condition", "on-cross-node-r5000-c1",
    )  # fmt: skip
    output = done.stdout + done.stderr
    assert done.returncode == 1, output
    assert "Traceback" not in output, output
    skips = [line for line in done.stderr.splitlines() if line.startswith("skipped ")]
    assert len(skips) == 1, output
    assert skips[0].startswith("skipped policy/cilium (1 of 1 conditions: on-cross-node-r5000-c1)")
    assert "a policy of 5001 rules" in skips[0]
    assert "bpf-policy-map-max=4096 in kube-system/cilium-config" in skips[0]
    assert "never changes a CNI's settings" in skips[0]
    assert "nothing was measured: every condition was skipped" in done.stderr.splitlines()
    assert "cnibench: error:" not in output
    assert _wait_namespaces_gone(api_client) == []
    policies = client.NetworkingV1Api(api_client).list_network_policy_for_all_namespaces(
        label_selector=render.SESSION_LABEL
    )
    assert policies.items == []


@pytest.fixture
def kube_proxy_config(api_client: Any) -> Iterator[None]:
    from kubernetes import client

    with kube_proxy_configmap(client.CoreV1Api(api_client), "iptables"):
        yield


def test_service_targets_of_another_proxy_are_skipped_naming_the_clusters(
    api_client: Any,
    kubeconfig: Path,
    calico_stand_in: None,
    kube_proxy_config: None,
    tmp_path: Path,
) -> None:
    """With kube-proxy in iptables mode (its ConfigMap as kubeadm writes it), an nftables
    condition is skipped before anything is deployed, naming the proxy to choose."""
    done = _run_cli(
        kubeconfig, tmp_path / "results", "--cni", "calico", "--scenario", "baseline",
        "--target", "service", "--proxy", "nftables",
        "--condition", "cross-node-idle-iperf3-service-nftables-0svc",
    )  # fmt: skip
    output = done.stdout + done.stderr
    assert done.returncode == 1, output
    skips = [line for line in done.stderr.splitlines() if line.startswith("skipped ")]
    assert len(skips) == 1, output
    assert "cross-node-idle-iperf3-service-nftables-0svc" in skips[0]
    assert "lacks service-nftables" in skips[0]
    assert "this cluster's Services go through iptables" in skips[0]
    assert "choose --proxy iptables" in skips[0]
    assert _wait_namespaces_gone(api_client) == []
