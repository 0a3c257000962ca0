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
