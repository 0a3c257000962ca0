"""The monitoring pods' command lines as the programs parse them.

Found on the first real kind cluster: values were substituted as JSON inside a longer string,
so Prometheus was started with ``--web.listen-address=:"9090"`` and both containers exited.
The kwok tier accepted those objects, since nothing runs there.
"""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from cnibench.backends.kube.render import (
    NODE_EXPORTER_PORT,
    PROMETHEUS_PORT,
    monitoring_manifests,
)


def _args(kind: str, name: str) -> list[str]:
    documents: list[dict[str, Any]] = monitoring_manifests(namespace="ns", session="s")
    (found,) = [d for d in documents if d["kind"] == kind and d["metadata"]["name"] == name]
    (container,) = found["spec"]["template"]["spec"]["containers"]
    return [str(arg) for arg in container["args"]]


@pytest.mark.parametrize(
    ("kind", "name", "port"),
    [
        ("Deployment", "prometheus", PROMETHEUS_PORT),
        ("DaemonSet", "node-exporter", NODE_EXPORTER_PORT),
    ],
    ids=["prometheus", "node-exporter"],
)
def test_listen_address_is_a_plain_port(kind: str, name: str, port: int) -> None:
    assert f"--web.listen-address=:{port}" in _args(kind, name)
    assert not any('"' in arg for arg in _args(kind, name))


def test_static_targets_name_each_node_for_any_prometheus_build() -> None:
    from cnibench.backends.kube.render import prometheus_config

    config = yaml.safe_load(
        prometheus_config(namespace="ns", node_addresses={"w2": "172.18.0.3", "w1": "fd00::2"})
    )
    (job,) = config["scrape_configs"]
    assert "kubernetes_sd_configs" not in job  # Debian's Prometheus has no Kubernetes discovery
    assert job["static_configs"] == [
        {"targets": [f"[fd00::2]:{NODE_EXPORTER_PORT}"], "labels": {"instance": "w1"}},
        {"targets": [f"172.18.0.3:{NODE_EXPORTER_PORT}"], "labels": {"instance": "w2"}},
    ]


def _exporter_affinity(node_addresses: dict[str, str] | None) -> Any:
    documents = monitoring_manifests(namespace="ns", session="s", node_addresses=node_addresses)
    (exporter,) = [d for d in documents if d["kind"] == "DaemonSet"]
    return exporter["spec"]["template"]["spec"].get("affinity")


def test_node_exporter_runs_only_on_the_nodes_prometheus_scrapes() -> None:
    """Issue 33, item 2: on an existing cluster the nodes no role holds get no node-exporter
    (nor its host port); its pods are pinned by node name, the scraped targets' names."""
    affinity = _exporter_affinity({"w2": "172.18.0.3", "w1": "172.18.0.2"})
    terms = affinity["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    # One term per node: the API server takes one value per field selector (the kube tier
    # refused ["w1", "w2"] in one term).
    assert terms["nodeSelectorTerms"] == [
        {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [name]}]}
        for name in ("w1", "w2")
    ]


@pytest.mark.parametrize("node_addresses", [None, {}], ids=["discovered-targets", "no-nodes-yet"])
def test_node_exporter_without_static_targets_is_not_pinned(
    node_addresses: dict[str, str] | None,
) -> None:
    assert _exporter_affinity(node_addresses) is None
