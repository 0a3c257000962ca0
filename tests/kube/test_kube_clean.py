"""``clean_kube_leftovers`` against a real API server: only session-labelled objects go.

A module of its own because cleaning removes *every* labelled namespace of the tier's server,
including those other modules' fixtures hold while their tests run.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import pytest
from kube_support import (
    PLACEHOLDER_IMAGE,
    cni_stand_in,
    kwok_node,
    role_nodes,
    wait_kwok_nodes_ready,
)

from cnibench.backends.kube import render
from cnibench.backends.kube.api import Applier
from cnibench.backends.kube.clean import clean_kube_leftovers
from cnibench.backends.kube.cnis.cilium import cilium_egress_gateway_policy


def _no_kind_clusters(argv: Sequence[str]) -> str:
    """Fake kind (no container engine here): there are no kind clusters."""
    return ""


@pytest.fixture
def namespaces(api_client: Any) -> Iterator[dict[str, bool]]:
    """Two labelled (leftover) and one unlabelled namespace; name to whether labelled."""
    applier = Applier(api_client)
    made = {"cnibench-left1": True, "cnibench-left2": True, "cbt-not-ours": False}
    manifests = []
    for name, labelled in made.items():
        manifest = render.namespace(name, session="gone")
        if not labelled:
            manifest["metadata"]["labels"] = {"team": "someone-else"}
        applier.apply(manifest)
        manifests.append(manifest)
    try:
        yield made
    finally:
        for manifest in manifests:
            applier.delete(manifest)


def _existing(api_client: Any) -> set[str]:
    from kubernetes import client

    core: Any = client.CoreV1Api(api_client)
    return {
        n.metadata.name for n in core.list_namespace().items if not n.metadata.deletion_timestamp
    }


def test_clean_removes_only_labelled_namespaces(
    api_client: Any, namespaces: dict[str, bool]
) -> None:
    report = clean_kube_leftovers(api_client=api_client, runner=_no_kind_clusters, timeout=60)
    left = _existing(api_client)
    assert {n for n, labelled in namespaces.items() if labelled} & left == set()
    assert "cbt-not-ours" in left
    assert "kube-system" in left
    removed = {i.name for i in report.items if i.kind == "namespace" and i.outcome == "removed"}
    assert {"cnibench-left1", "cnibench-left2"} <= removed


def test_clean_dry_run_keeps_namespaces(api_client: Any, namespaces: dict[str, bool]) -> None:
    report = clean_kube_leftovers(dry_run=True, api_client=api_client, runner=_no_kind_clusters)
    assert {"cnibench-left1", "cnibench-left2"} <= _existing(api_client)
    assert "kube: namespace cnibench-left1: would remove" in report.summary().splitlines()


@pytest.fixture
def egress_policies(api_client: Any, cilium_crds: list[str]) -> Iterator[dict[str, bool]]:
    """Two cluster-scoped CiliumEgressGatewayPolicies (real CRD): one a session left behind,
    one someone else's; name to whether labelled."""
    applier = Applier(api_client)
    made = {"cnibench-left-egress": True, "not-ours-egress": False}
    manifests = []
    for name, labelled in made.items():
        manifest = cilium_egress_gateway_policy(
            name,
            session="gone",
            namespace="cnibench-x",
            clients=["c1"],
            destinations=["198.18.0.9/32"],
        )
        if not labelled:
            manifest["metadata"]["labels"] = {"team": "someone-else"}
        applier.apply(manifest)
        manifests.append(manifest)
    try:
        yield made
    finally:
        for manifest in manifests:
            applier.delete(manifest)


def _egress_policy_names(api_client: Any) -> set[str]:
    from kubernetes import dynamic

    resource = dynamic.DynamicClient(api_client).resources.get(
        api_version="cilium.io/v2", kind="CiliumEgressGatewayPolicy"
    )
    return {o.metadata.name for o in resource.get().items}


def test_clean_removes_labelled_cluster_scoped_cni_objects(
    api_client: Any, egress_policies: dict[str, bool]
) -> None:
    dry = clean_kube_leftovers(dry_run=True, api_client=api_client, runner=_no_kind_clusters)
    assert "kube: ciliumegressgatewaypolicy cnibench-left-egress: would remove" in (
        dry.summary().splitlines()
    )
    assert set(egress_policies) <= _egress_policy_names(api_client)
    report = clean_kube_leftovers(api_client=api_client, runner=_no_kind_clusters, timeout=60)
    left = _egress_policy_names(api_client)
    assert "cnibench-left-egress" not in left
    assert "not-ours-egress" in left
    # Antrea and Calico CRDs are not served here: their kinds are skipped, not failures.
    assert not report.failed, report.summary()


def test_clean_keeps_the_namespace_of_a_live_session_in_another_process(
    api_client: Any, tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Another shell's `cnibench run` holds its session label (cnibench.leases): a real
    process holds it here, and `clean` keeps that namespace while removing a dead one's."""
    import subprocess
    import sys

    from cnibench import leases

    monkeypatch.setenv(leases.LEASES_VARIABLE, str(tmp_path / "leases"))
    applier = Applier(api_client)
    live, dead = (
        render.namespace("cnibench-live1", session="live1"),
        render.namespace("cnibench-dead1", session="dead1"),
    )
    code = (
        "import sys; from cnibench import leases;"
        f" leases.hold({render.KUBE_SESSION_LEASE!r}, 'live1'); print('held', flush=True);"
        " sys.stdin.read()"
    )
    holder = subprocess.Popen(
        [sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    try:
        assert holder.stdout is not None
        assert holder.stdout.readline().strip() == "held"
        for manifest in (live, dead):
            applier.apply(manifest)
        report = clean_kube_leftovers(api_client=api_client, runner=_no_kind_clusters, timeout=60)
        left = _existing(api_client)
        assert "cnibench-live1" in left
        assert "cnibench-dead1" not in left
        lines = report.summary().splitlines()
        assert f"kube: namespace cnibench-live1: kept: session live1 of live pid {holder.pid}" in (
            lines
        )
    finally:
        holder.kill()
        holder.wait()
        applier.delete(live)


# -- a killed `cnibench run --cluster existing`, then clean --kubeconfig ----------------------

BYSTANDER = "cbt-clean-bystander"
"""A node of the cluster's own that no role holds: tainted and labelled by its owner."""
BYSTANDER_TAINT = {"key": "team", "value": "db", "effect": "NoSchedule"}


@pytest.fixture(scope="module")
def calico_cluster(api_client: Any) -> Iterator[list[str]]:
    """An "existing" cluster: three role-labelled kwok nodes (labels its owner set), a
    tainted bystander node, and Calico's workloads rolled out (a stand-in); removed after."""
    from kubernetes import client

    core: Any = client.CoreV1Api(api_client)
    with role_nodes(core, "cbt-clean") as names:
        core.create_node(kwok_node(BYSTANDER, address="127.0.0.5", labels={"team": "db"}))
        try:
            wait_kwok_nodes_ready(core, [BYSTANDER], taints=[BYSTANDER_TAINT])
            with cni_stand_in(api_client, "calico"):
                yield names
        finally:
            core.delete_node(BYSTANDER)


def _cluster_state(api_client: Any) -> dict[str, Any]:
    """What a session could leave in a cluster's own space: namespaces (not terminating),
    ClusterRoles and bindings, and every node's labels and taints."""
    from kubernetes import client

    core: Any = client.CoreV1Api(api_client)
    rbac: Any = client.RbacAuthorizationV1Api(api_client)
    return {
        "namespaces": _existing(api_client),
        "clusterroles": {r.metadata.name for r in rbac.list_cluster_role().items},
        "clusterrolebindings": {r.metadata.name for r in rbac.list_cluster_role_binding().items},
        "nodes": {
            n.metadata.name: (
                dict(n.metadata.labels or {}),
                sorted((t.key, t.value or "", t.effect) for t in n.spec.taints or []),
            )
            for n in core.list_node().items
        },
    }


def test_clean_kubeconfig_after_a_killed_existing_run_leaves_the_cluster_as_it_was(
    api_client: Any,
    kubeconfig: Any,
    calico_cluster: list[str],
    tmp_path: Any,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Issue 33, item 3: a ``cnibench run --cluster existing`` SIGKILLed once it has made
    its namespace, Prometheus's cluster-wide RBAC and node-exporter's DaemonSet (the last of
    the monitoring objects; nothing of it can clean up) leaves them;
    ``clean_kube_leftovers(kubeconfig=...)``, the API half of ``cnibench clean
    --kubeconfig`` (its kind half is faked: no engine may be touched here), removes exactly
    those: namespaces, cluster-wide objects, node labels and taints are as before the run,
    the owner's role labels and the bystander's taint included."""
    import os
    import subprocess
    import sys
    import time

    from kubernetes import client

    from cnibench import leases
    from cnibench.backends.kube.render import SESSION_LABEL

    monkeypatch.setenv(leases.LEASES_VARIABLE, str(tmp_path / "leases"))
    env = {
        **os.environ,
        "KUBECONFIG": str(kubeconfig),
        # An existing cluster pulls from registries: name one (kwok never pulls it).
        "CNIBENCH_IMAGE_TOOLS": PLACEHOLDER_IMAGE,
        "CNIBENCH_IMAGE_SOCKPERF": PLACEHOLDER_IMAGE,
        leases.LEASES_VARIABLE: str(tmp_path / "leases"),
    }
    before = _cluster_state(api_client)
    apps: Any = client.AppsV1Api(api_client)
    core: Any = client.CoreV1Api(api_client)
    argv = [sys.executable, "-m", "cnibench.cli", "run", "--cluster", "existing",
            "--cni", "calico", "--scenario", "baseline", "--runs", "1",
            "--condition", "same-node-idle-iperf3",
            "--results-dir", str(tmp_path / "r")]  # fmt: skip
    child = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 120
        while child.poll() is None and time.monotonic() < deadline:
            if apps.list_daemon_set_for_all_namespaces(label_selector=SESSION_LABEL).items:
                child.kill()  # SIGKILL: no teardown, no handler
                break
            time.sleep(0.05)
        _, stderr = child.communicate(timeout=60)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
    assert child.returncode == -9, stderr.decode(errors="replace")
    left = _cluster_state(api_client)
    made = {key: left[key] - before[key] for key in ("namespaces", "clusterroles")}
    (namespace,) = made["namespaces"]
    assert namespace.startswith("cnibench-"), made
    assert made["clusterroles"] == {f"{namespace}-prometheus"}, made
    # node-exporter tolerates every taint, yet goes only to the nodes a role holds: the
    # DaemonSet controller (still running) places its pods after the kill.
    exporters = f"{SESSION_LABEL},app.kubernetes.io/name=node-exporter"
    placed: set[str] = set()
    deadline = time.monotonic() + 60
    while len(placed) < len(calico_cluster) and time.monotonic() < deadline:
        time.sleep(0.25)
        pods = core.list_namespaced_pod(namespace, label_selector=exporters).items
        placed = {str(p.spec.node_name) for p in pods if p.spec.node_name}
    assert placed == set(calico_cluster)
    (daemonset,) = apps.list_namespaced_daemon_set(namespace, label_selector=SESSION_LABEL).items
    assert daemonset.status.desired_number_scheduled == len(calico_cluster)
    assert left["nodes"] == before["nodes"]  # a run writes nothing to a node

    report = clean_kube_leftovers(kubeconfig=kubeconfig, runner=_no_kind_clusters, timeout=90)

    assert not report.failed, report.summary()
    removed = {(i.kind, i.name) for i in report.items if i.outcome == "removed"}
    assert {
        ("namespace", namespace),
        ("clusterrole", f"{namespace}-prometheus"),
        ("clusterrolebinding", f"{namespace}-prometheus"),
    } <= removed, report.summary()
    assert _cluster_state(api_client) == before
