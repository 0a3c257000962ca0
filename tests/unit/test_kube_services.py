"""The Kubernetes side of the baseline's Service targets, without a cluster: the Service
rendered for a pod, which proxy a cluster runs, and the capabilities a condition needs.
(The objects are accepted by a real API server in tests/kube/test_kube_cli.py and measured
through real proxies in tests/kind.)"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest
from kubernetes.client.exceptions import ApiException

from cnibench.backends.base import Capability
from cnibench.backends.kube import render
from cnibench.backends.kube.services import proxy_hint, service_proxy


class _ConfigMaps:
    """Answers ``read_namespaced_config_map`` like the API server: the one ConfigMap it holds,
    else 404."""

    def __init__(self, config: str | None) -> None:
        self.config = config
        self.asked: list[tuple[str, str]] = []

    def read_namespaced_config_map(self, name: str, namespace: str) -> Any:
        self.asked.append((namespace, name))
        if self.config is None:
            raise ApiException(status=404, reason="Not Found")
        return SimpleNamespace(data={"config.conf": self.config})


@pytest.mark.parametrize(
    ("config", "proxy"),
    [
        ("apiVersion: kubeproxy.config.k8s.io/v1alpha1\nmode: iptables\n", "iptables"),
        ("apiVersion: kubeproxy.config.k8s.io/v1alpha1\nmode: nftables\n", "nftables"),
        # kube-proxy's default on Linux when the mode is left empty (kubeadm writes "").
        ('apiVersion: kubeproxy.config.k8s.io/v1alpha1\nmode: ""\n', "iptables"),
        ("apiVersion: kubeproxy.config.k8s.io/v1alpha1\nmode: ipvs\n", ""),
        ("mode: [unclosed\n", ""),
        (None, ""),
    ],
    ids=["iptables", "nftables", "empty-mode", "ipvs", "broken-yaml", "no-configmap"],
)
def test_kube_proxys_mode_is_read_from_its_configmap(config: str | None, proxy: str) -> None:
    core = _ConfigMaps(config)
    assert service_proxy(core, replaces_kube_proxy=False) == proxy
    assert core.asked == [("kube-system", "kube-proxy")]


def test_a_kube_proxy_replacement_is_ebpf_without_asking() -> None:
    core = _ConfigMaps("mode: iptables\n")
    assert service_proxy(core, replaces_kube_proxy=True) == "ebpf"
    assert core.asked == []


def test_the_hint_names_the_proxy_to_choose_or_why_none_is_known() -> None:
    assert proxy_hint("ebpf").endswith("choose --proxy ebpf")
    assert "kube-proxy replacement" in proxy_hint("ebpf")
    assert "choose --proxy iptables" in proxy_hint("iptables")
    assert "could not be told" in proxy_hint("")


def test_each_proxy_has_its_capability() -> None:
    assert Capability.service_proxy("iptables") is Capability.SERVICE_IPTABLES
    assert Capability.service_proxy("nftables") is Capability.SERVICE_NFTABLES
    assert Capability.service_proxy("ebpf") is Capability.SERVICE_EBPF
    with pytest.raises(ValueError, match="service-ipvs"):
        Capability.service_proxy("ipvs")


def test_the_service_selects_the_pod_with_every_port_given() -> None:
    ports = [
        {
            "name": "tcp-5201",
            "port": 5201,
            "targetPort": 5201,
            "protocol": "TCP",
            "nodePort": 30100,
        },
        {
            "name": "udp-5201",
            "port": 5201,
            "targetPort": 5201,
            "protocol": "UDP",
            "nodePort": 30100,
        },
    ]
    manifest = render.service(
        "bl-srv-svc", namespace="cnibench-s", session="s", endpoint="bl-srv", ports=ports,
        node_port=True,
    )  # fmt: skip
    assert manifest["kind"] == "Service"
    assert manifest["metadata"]["name"] == "bl-srv-svc"
    assert manifest["metadata"]["labels"][render.SESSION_LABEL] == "s"
    assert manifest["spec"]["type"] == "NodePort"
    assert manifest["spec"]["selector"] == {render.ENDPOINT_LABEL: "bl-srv"}
    assert manifest["spec"]["ports"] == ports
    filler = render.service(
        "bl-srv-svc-00001", namespace="cnibench-s", session="s", endpoint="bl-srv",
        ports=ports[:1],
    )  # fmt: skip
    assert filler["spec"]["type"] == "ClusterIP"
