"""Nodes chosen on an existing cluster without labelling any, against the tier's API server.

kwok nodes stand in for a user's cluster: two plain workers (their kubelet's hostname label
only), one tainted and one cordoned. A session chooses among them, places a pod by the
hostname label, refuses a pinned tainted node before creating anything, and leaves every
node's labels and taints as they were.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from kube_support import kwok_node, stand_in_workload, wait_kwok_nodes_ready

from cnibench.backends.base import ClusterSpec, NodePins, NodeRole
from cnibench.backends.kube import render
from cnibench.backends.kube.cluster import KubeCluster, Timeouts
from cnibench.backends.kube.cni import cni_definition
from cnibench.backends.kube.images import Images
from cnibench.errors import ConfigError

PREFIX = "cbt-nodes"
TAINT = {"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}


def _snapshot(core: Any, names: list[str]) -> dict[str, tuple[dict[str, str], list[Any]]]:
    out = {}
    for name in names:
        node = core.read_node(name)
        taints = [(t.key, t.value, t.effect) for t in (node.spec.taints or [])]
        out[name] = (dict(node.metadata.labels or {}), taints)
    return out


@pytest.fixture(scope="module")
def user_nodes(api_client: Any) -> Iterator[dict[str, str]]:
    """Unlabelled workers w1, w2, a tainted node and a cordoned one (kwok, loopback)."""
    from kubernetes import client

    core: Any = client.CoreV1Api(api_client)
    names = {k: f"{PREFIX}-{k}" for k in ("w1", "w2", "tainted", "cordoned")}
    try:
        for index, name in enumerate(names.values()):
            labels = {"kubernetes.io/hostname": name, "type": "kwok"}
            core.create_node(kwok_node(name, address=f"127.0.0.{index + 2}", labels=labels))
        wait_kwok_nodes_ready(core, [names["w1"], names["w2"], names["cordoned"]], taints=[])
        wait_kwok_nodes_ready(core, [names["tainted"]], taints=[TAINT])
        core.patch_node(names["cordoned"], {"spec": {"unschedulable": True}})
        yield names
    finally:
        for name in names.values():
            core.delete_node(name)


def _cluster(api_client: Any, session: str, pins: NodePins | None = None) -> KubeCluster:
    spec = ClusterSpec(cni="calico")
    return KubeCluster(
        api_client,
        spec,
        cni_definition(spec),
        provider="existing",
        session=session,
        images=Images(tools="registry.invalid/cnibench/placeholder:0"),
        timeouts=Timeouts(pod_ready=60, delete=60),
        pins=pins,
    )


def _session_namespaces(api_client: Any, session: str) -> list[str]:
    from kubernetes import client

    listed = client.CoreV1Api(api_client).list_namespace(
        label_selector=f"{render.SESSION_LABEL}={session}"
    )
    return [str(item.metadata.name) for item in listed.items]


def test_unlabelled_workers_are_chosen_and_pods_land_there_by_hostname(
    api_client: Any, user_nodes: dict[str, str]
) -> None:
    from kubernetes import client

    core: Any = client.CoreV1Api(api_client)
    before = _snapshot(core, list(user_nodes.values()))
    cluster = _cluster(api_client, "nodes01")
    try:
        cluster.start()
        by_role = {node.role: node.name for node in cluster.nodes}
        assert by_role == {
            NodeRole.CLIENT: user_nodes["w1"],
            NodeRole.SERVER: user_nodes["w2"],
            NodeRole.EGRESS_GW: user_nodes["w2"],
        }
        (line,) = cluster.notes
        assert f"server={user_nodes['w2']} (chosen)" in line
        assert "same-node" in line
        nodes = cluster.environment().nodes
        assert nodes[user_nodes["w2"]]["role"] == "server+egress-gw"
        assert nodes[user_nodes["w2"]]["same_node"] is True
        assert nodes[user_nodes["w1"]]["chosen_by"] == "chosen"
        assert nodes[user_nodes["w1"]]["zone"] == ""
        placed = cluster.place("srv", role=NodeRole.SERVER)
        assert placed.node.name == user_nodes["w2"]
        manifest = core.read_namespaced_pod("srv", cluster.namespace)
        assert manifest.spec.node_selector == {"kubernetes.io/hostname": user_nodes["w2"]}
    finally:
        cluster.teardown()
    assert _snapshot(core, list(user_nodes.values())) == before


def test_a_pinned_tainted_node_is_refused_before_anything_is_created(
    api_client: Any, user_nodes: dict[str, str]
) -> None:
    tainted = user_nodes["tainted"]
    cluster = _cluster(api_client, "nodes02", NodePins.parse(f"server={tainted}"))
    with pytest.raises(ConfigError) as caught:
        cluster.start()
    assert str(caught.value).startswith(
        f"--nodes server={tainted}: node {tainted} has taint dedicated=gpu:NoSchedule"
    )
    assert _session_namespaces(api_client, "nodes02") == []


def test_pinned_nodes_are_used_as_named(api_client: Any, user_nodes: dict[str, str]) -> None:
    pins = NodePins.parse(f"client={user_nodes['w2']},server={user_nodes['w1']}")
    cluster = _cluster(api_client, "nodes03", pins)
    try:
        cluster.start()
        assert [(n.role, n.name) for n in cluster.nodes] == [
            (NodeRole.CLIENT, user_nodes["w2"]),
            (NodeRole.SERVER, user_nodes["w1"]),
            (NodeRole.EGRESS_GW, user_nodes["w1"]),  # no third usable node: shares
        ]
    finally:
        cluster.teardown()


def test_a_cni_other_than_the_one_running_is_refused_naming_it(api_client: Any) -> None:
    from cnibench.backends.kube.addons import install_manifests
    from cnibench.backends.kube.backend import existing_cni

    stand_in = stand_in_workload("DaemonSet", "kube-system", "cilium")
    install_manifests(api_client, [stand_in], timeout=10)
    try:
        # The shared API server may also hold other tests' stand-ins (a calico-node): the
        # line names every CNI found, cilium among them, and never flannel.
        with pytest.raises(ConfigError, match=r"^--cni flannel: this cluster runs ") as refused:
            existing_cni(api_client, ClusterSpec(cni="flannel"))
        found = str(refused.value).removeprefix("--cni flannel: this cluster runs ").split(" and ")
        assert "cilium" in found, refused.value
        assert "flannel" not in found, refused.value
        accepted = existing_cni(api_client, ClusterSpec(cni="cilium"))
        assert accepted.startswith("CNI: this cluster runs "), accepted
        assert "cilium (DaemonSet kube-system/cilium)" in accepted
    finally:
        from kubernetes import client

        client.AppsV1Api(api_client).delete_namespaced_daemon_set("cilium", "kube-system")
