"""KubeCluster's read-only views on the tier's real API server: the WireGuard status Antrea and
Calico publish on Nodes, and ``cluster.pykube``.

No agent runs here, so the Node annotations an agent would write are written by the test (the
key format is WireGuard's: 32 bytes, base64); what is tested is that cnibench reads every Node
of the cluster through the API and judges them all.
"""

from __future__ import annotations

import base64
from collections.abc import Iterator
from typing import Any

import pytest

from cnibench.backends.base import ClusterSpec
from cnibench.backends.kube.cluster import KubeCluster, Timeouts
from cnibench.backends.kube.cni import cni_definition

ANNOTATIONS = {
    "antrea": "node.antrea.io/wireguard-public-key",
    "calico": "projectcalico.org/WireguardPublicKey",
}
NODES = ("cbt-wg-a", "cbt-wg-b", "cbt-wg-c")


def _cluster(api_client: Any, cni: str) -> KubeCluster:
    spec = ClusterSpec(cni=cni, encryption="wireguard")
    return KubeCluster(
        api_client,
        spec,
        cni_definition(spec),
        provider="existing",
        session=f"wg{cni[:3]}",
        timeouts=Timeouts(pod_ready=30, delete=60),
    )


@pytest.fixture
def nodes(api_client: Any) -> Iterator[Any]:
    """Three bare Node objects (never scheduled to: no kwok annotation, so nobody manages them)."""
    from kubernetes import client

    core: Any = client.CoreV1Api(api_client)
    others = [n.metadata.name for n in core.list_node().items]
    assert others == [], f"another module left nodes behind: {others}"
    try:
        for name in NODES:
            core.create_node({"apiVersion": "v1", "kind": "Node", "metadata": {"name": name}})
        yield core
    finally:
        for name in NODES:
            core.delete_node(name)


def _publish(core: Any, node: str, annotation: str, key: bytes) -> None:
    core.patch_node(
        node, {"metadata": {"annotations": {annotation: base64.b64encode(key).decode()}}}
    )


@pytest.mark.parametrize("cni_name", ["antrea", "calico"])
def test_wireguard_on_when_every_node_published_a_key(
    api_client: Any, nodes: Any, cni_name: str
) -> None:
    cluster = _cluster(api_client, cni_name)
    for index, node in enumerate(NODES[:2]):
        _publish(nodes, node, ANNOTATIONS[cni_name], bytes([index]) * 32)
    partial = cluster.encryption_status()
    assert not partial.enabled
    assert f"{NODES[2]}: no {ANNOTATIONS[cni_name]} annotation" in partial.detail

    _publish(nodes, NODES[2], ANNOTATIONS[cni_name], bytes([7]) * 32)
    full = cluster.encryption_status()
    assert full.enabled
    assert full.peers == dict.fromkeys(NODES, 2)


def test_pykube_lists_what_the_cluster_sees(api_client: Any, nodes: Any) -> None:
    import pykube

    cluster = _cluster(api_client, "antrea")
    assert {n.name for n in pykube.Node.objects(cluster.pykube)} == set(NODES)
    assert cluster.pykube is cluster.pykube  # one client per cluster, built once


def test_l7_policy_is_refused_by_a_cni_without_one(api_client: Any) -> None:
    from cnibench.backends.base import Node, NodeRole
    from cnibench.backends.kube.cluster import KubePod
    from cnibench.errors import UnsupportedError

    cluster = _cluster(api_client, "calico")
    server = KubePod("srv", cluster.namespace, Node("n", NodeRole.SERVER, ""), "", api_client)
    with pytest.raises(UnsupportedError, match="calico has no L7"):
        cluster.apply_l7_policy(server, port=80, method="GET", path="/api/allowed")
