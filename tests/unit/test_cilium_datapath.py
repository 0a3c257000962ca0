"""Cilium's data path as asked and as its agents report it (issue 48, item 3).

The status parser reads ``fixtures/cilium/``, which is written from Cilium's documented status
layout, not captured (its README says so: no kind cluster can run here). The chart values read
back are the committed kind study's own fingerprints. The cluster side of the reading runs
against stand-ins for the API server and the agents' exec, which cannot run here; what they
answer is the fixtures' text and a ConfigMap as kubeadm writes it.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from kubernetes.client.exceptions import ApiException

from cnibench.backends.base import ClusterSpec
from cnibench.backends.kube.agents import KubeAgentAccess
from cnibench.backends.kube.cni import CniVersions
from cnibench.backends.kube.cnis.base import DriverBase
from cnibench.backends.kube.cnis.cilium import CILIUM, parse_cilium_datapath
from cnibench.backends.kube.images import OFFLINE_IMAGES, Images
from cnibench.errors import ToolError

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "fixtures" / "cilium"
STUDY = ROOT / "docs" / "results" / "kind-2026-11-27"


def _status(name: str) -> str:
    return (FIXTURES / name).read_text()


@pytest.mark.parametrize(
    ("fixture", "expected"),
    [
        (
            "status-1.18-kpr-bpf-masquerade.txt",
            {"kube-proxy replacement": "true", "host routing": "bpf", "masquerade": "bpf"},
        ),
        (
            "status-1.18-kpr-iptables-masquerade.txt",
            {"kube-proxy replacement": "true", "host routing": "legacy", "masquerade": "iptables"},
        ),
        (
            "status-1.18-kube-proxy.txt",
            {"kube-proxy replacement": "false", "host routing": "legacy", "masquerade": "iptables"},
        ),
        (
            "status-1.15-kube-proxy.txt",
            {"kube-proxy replacement": "false", "host routing": "legacy", "masquerade": "iptables"},
        ),
    ],
    ids=["1.18-kpr-bpf", "1.18-kpr-iptables", "1.18-kube-proxy", "1.15-layout"],
)
def test_the_status_parser_reads_the_three_data_path_lines(
    fixture: str, expected: dict[str, str]
) -> None:
    assert parse_cilium_datapath(_status(fixture)) == expected


def test_a_status_without_those_lines_reports_nothing() -> None:
    assert parse_cilium_datapath("Cilium:   Ok   1.18.4\nEncryption:   Disabled\n") == {}


class _Agents:
    """Stands in for the cluster's exec into each agent pod (no API server runs here)."""

    def __init__(self, outputs: Sequence[tuple[str, str]]) -> None:
        self.outputs = list(outputs)
        self.argv: list[Sequence[str]] = []

    def node_annotations(self) -> list[tuple[str, Mapping[str, str]]]:
        return []

    def exec_in_agents(
        self, namespace: str, selector: str, container: str, argv: Sequence[str]
    ) -> list[tuple[str, str]]:
        self.argv.append(argv)
        return self.outputs


def test_the_agents_of_every_node_are_read_and_a_replacement_names_its_proxy() -> None:
    status = _status("status-1.18-kpr-bpf-masquerade.txt")
    agents = _Agents([("worker", status), ("worker2", status)])
    assert CILIUM.datapath_status(agents) == {
        "kube-proxy replacement": "true",
        "host routing": "bpf",
        "masquerade": "bpf",
        "service proxy": "cilium eBPF",
    }
    assert agents.argv == [["cilium-dbg", "status"]]


def test_agents_that_disagree_are_recorded_node_by_node() -> None:
    agents = _Agents(
        [
            ("worker", _status("status-1.18-kpr-bpf-masquerade.txt")),
            ("worker2", _status("status-1.18-kpr-iptables-masquerade.txt")),
        ]
    )
    settings = CILIUM.datapath_status(agents)
    assert settings["host routing"] == "bpf (worker), legacy (worker2)"
    assert settings["masquerade"] == "bpf (worker), iptables (worker2)"


@pytest.mark.parametrize(
    ("session", "expected"),
    [
        (
            "20261127T163747Z-2791dd",
            {"kube-proxy replacement": "true", "masquerade": "bpf", "egress gateway": "on"},
        ),
        (
            "20261127T161027Z-aa9e1e",
            {"kube-proxy replacement": "false", "masquerade": "iptables", "egress gateway": "off"},
        ),
    ],
    ids=["kube-proxy-replacement", "kube-proxy-mode"],
)
def test_what_the_studys_chart_values_asked_of_the_data_path(
    session: str, expected: dict[str, str]
) -> None:
    (fingerprint,) = (STUDY / session / "environments").glob("*.json")
    values = json.loads(fingerprint.read_text())["cni_values"]
    assert CILIUM.datapath_settings(values) == expected


# -- the two modes differ in the Service proxy alone ---------------------------------------------


def _values(label: str, images: Images) -> dict[str, Any]:
    definition = CILIUM.definition(
        ClusterSpec.from_label(label), versions=CniVersions(), images=images
    )
    assert definition.chart is not None
    return dict(definition.chart.values)


DATA_PATH_VALUES = ("bpf", "egressGateway", "gatewayAPI", "l7Proxy", "routingMode", "encryption")
"""Chart values on the data path besides the Service proxy (``kubeProxyReplacement``)."""


@pytest.mark.parametrize("images", [Images(), OFFLINE_IMAGES], ids=["public", "offline"])
def test_kube_proxy_mode_changes_only_the_kube_proxy_replacement(images: Images) -> None:
    kpr, kube_proxy = _values("cilium", images), _values("cilium:mode=kube-proxy", images)
    assert kpr["kubeProxyReplacement"] is True
    assert kube_proxy["kubeProxyReplacement"] is False
    assert {key: kpr.get(key) for key in DATA_PATH_VALUES} == {
        key: kube_proxy.get(key) for key in DATA_PATH_VALUES
    }
    assert kpr["bpf"] == {"masquerade": False}
    assert kpr["egressGateway"] == {"enabled": False}


def test_the_egress_gateway_is_asked_for_by_name_and_brings_bpf_masquerading() -> None:
    values = _values("cilium:egress-gateway", OFFLINE_IMAGES)
    assert values["kubeProxyReplacement"] is True
    assert values["egressGateway"] == {"enabled": True}
    assert values["bpf"] == {"masquerade": True}


# -- the cluster's reading ----------------------------------------------------------------------


class _ConfigMaps:
    """Answers ``read_namespaced_config_map`` with kube-proxy's ConfigMap, or 404 without one."""

    def __init__(self, config: str | None) -> None:
        self.config = config

    def read_namespaced_config_map(self, name: str, namespace: str) -> Any:
        if self.config is None:
            raise ApiException(status=404, reason="Not Found")
        return SimpleNamespace(data={"config.conf": self.config})


class _FailingAgents(DriverBase):
    name = "failing"

    def datapath_status(self, access: Any) -> dict[str, str]:
        raise ToolError("exec into cilium-x failed: container not found")


@pytest.mark.parametrize(
    ("driver", "config", "expected"),
    [
        (DriverBase(), "mode: nftables\n", {"service proxy": "kube-proxy nftables"}),
        (DriverBase(), None, {}),
        (_FailingAgents(), 'mode: ""\n', {"service proxy": "kube-proxy iptables"}),
    ],
    ids=["kube-proxy-nftables", "nothing-to-read", "agents-unreadable"],
)
def test_the_cluster_records_what_it_can_read_and_never_fails_on_it(
    driver: DriverBase, config: str | None, expected: dict[str, str]
) -> None:
    runtime = SimpleNamespace(driver=driver, core=_ConfigMaps(config))
    access = KubeAgentAccess(runtime)  # type: ignore[arg-type]
    assert access.datapath_settings() == expected
