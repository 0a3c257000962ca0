"""Prometheus and node-exporter of a lab, reached through the in-process port-forward."""

from __future__ import annotations

import json
import time
import urllib.parse
import urllib.request
from typing import Any

import pytest
from lab_support import PLAIN, Lab


def query(url: str, promql: str) -> list[dict[str, Any]]:
    address = f"{url}/api/v1/query?{urllib.parse.urlencode({'query': promql})}"
    with urllib.request.urlopen(address, timeout=5) as response:
        document = json.load(response)
    assert document["status"] == "success"
    result: list[dict[str, Any]] = document["data"]["result"]
    return result


def query_until(
    url: str, promql: str, count: int, *, timeout: float = 30.0
) -> list[dict[str, Any]]:
    """Poll ``promql`` until it returns ``count`` series whose value is 1 (bounded)."""
    deadline = time.monotonic() + timeout
    while True:
        result = query(url, promql)
        if len(result) == count and all(r["value"][1] == "1" for r in result):
            return result
        if time.monotonic() > deadline:
            return result
        time.sleep(0.5)


@pytest.mark.parametrize("lab", PLAIN, indirect=True)
def test_prometheus_url_is_served_on_loopback(lab: Lab) -> None:
    url = lab.cluster.prometheus_url()
    assert urllib.parse.urlparse(url).hostname == "127.0.0.1"


@pytest.mark.parametrize("lab", PLAIN, indirect=True)
def test_up_has_one_live_target_per_node(lab: Lab) -> None:
    url = lab.cluster.prometheus_url()
    result = query_until(url, "up", len(lab.cluster.nodes))
    seen = {(r["metric"]["node"], r["metric"]["role"], r["value"][1]) for r in result}
    assert seen == {(node.name, node.role.value, "1") for node in lab.cluster.nodes}


@pytest.mark.parametrize("lab", PLAIN, indirect=True)
def test_device_regex_selects_one_underlay_interface_per_node(lab: Lab) -> None:
    url = lab.cluster.prometheus_url()
    regex = lab.cluster.metrics_device_regex
    promql = f'count by (node) (node_network_receive_bytes_total{{device=~"{regex}"}})'
    result = query_until(url, promql, len(lab.cluster.nodes))
    assert sorted(r["metric"]["node"] for r in result) == sorted(n.name for n in lab.cluster.nodes)


@pytest.mark.parametrize("lab", ["routed"], indirect=True)
def test_prometheus_url_is_stable_across_calls(lab: Lab) -> None:
    assert lab.cluster.prometheus_url() == lab.cluster.prometheus_url()


@pytest.mark.parametrize("lab", ["vxlan"], indirect=True)
def test_environment_describes_the_lab(lab: Lab) -> None:
    env = lab.cluster.environment()
    assert (env.backend, env.provider, env.cni, len(env.nodes)) == ("lab", "lab", "vxlan", 3)


@pytest.mark.parametrize("lab", ["vxlan"], indirect=True)
def test_environment_lists_the_measuring_tools(lab: Lab) -> None:
    versions = lab.cluster.environment().tool_versions
    assert {"iperf3", "sockperf", "nginx", "prometheus"} <= set(versions)


@pytest.mark.parametrize("lab", ["vxlan"], indirect=True)
def test_environment_does_not_depend_on_the_lab_id(lab: Lab) -> None:
    assert lab.cluster.lab_id not in json.dumps(lab.cluster.environment().to_json_dict())
