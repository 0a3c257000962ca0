"""Services on the lab: a virtual IP and NodePorts translated by kube-proxy-style rules (iptables
chains or an nftables verdict map) on the nodes, proven by conntrack's record of the DNAT."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator

import pytest
from lab_support import HTTP_PORT, IPERF3_PORT, SOCKPERF_PORT, Lab

from cnibench.backends.base import Service
from cnibench.scenarios.baseline import BaselineScenario
from cnibench.scenarios.options import parse_scenario_options
from cnibench.scenarios.profiles import profile_named

PORTS = (IPERF3_PORT, SOCKPERF_PORT, HTTP_PORT)


def http_status(lab: Lab, address: str, port: int) -> str:
    result = lab.client.run(
        ["curl", "-sS", "-o", "/dev/null", "-w", "%{http_code}", "-m", "3",
         f"http://{address}:{port}/"],
        timeout=10,
    )  # fmt: skip
    return result.stdout.strip()


def conntrack_dnat(node: str, address: str, port: int) -> list[str]:
    """conntrack entries on ``node`` of TCP connections to ``address:port``."""
    done = subprocess.run(
        ["ip", "netns", "exec", node, "conntrack", "-L", "-p", "tcp", "--orig-dst", address,
         "--orig-port-dst", str(port)],
        capture_output=True, text=True, timeout=30, check=False,
    )  # fmt: skip
    return [line for line in done.stdout.splitlines() if line.strip()]


@pytest.fixture(params=["iptables", "nftables"])
def service(request: pytest.FixtureRequest, lab: Lab) -> Iterator[tuple[Lab, Service]]:
    exposed = lab.cluster.expose(lab.server, PORTS, proxy=request.param, others=200)
    try:
        yield lab, exposed
    finally:
        lab.cluster.remove_service()


@pytest.mark.parametrize("lab", ["routed"], indirect=True)
def test_the_virtual_ip_reaches_the_pod_through_a_dnat_conntrack_records(
    service: tuple[Lab, Service],
) -> None:
    lab, exposed = service
    assert exposed.ports[HTTP_PORT] == HTTP_PORT
    assert http_status(lab, exposed.cluster_ip, exposed.ports[HTTP_PORT]) == "200"
    # The client's own node translated the virtual IP: its reply side comes from the pod.
    entries = conntrack_dnat(lab.client.node.name, exposed.cluster_ip, HTTP_PORT)
    assert any(f"src={lab.server.ip} " in entry for entry in entries), entries


@pytest.mark.parametrize("lab", ["routed"], indirect=True)
def test_the_node_port_on_the_servers_node_reaches_the_pod(service: tuple[Lab, Service]) -> None:
    lab, exposed = service
    node_port = exposed.node_ports[HTTP_PORT]
    assert node_port >= 30000
    assert exposed.node_ip == lab.server.node.ip
    assert http_status(lab, exposed.node_ip, node_port) == "200"
    entries = conntrack_dnat(lab.server.node.name, exposed.node_ip, node_port)
    assert any(f"src={lab.server.ip} " in entry for entry in entries), entries


@pytest.mark.parametrize("lab", ["routed"], indirect=True)
@pytest.mark.parametrize("proxy", ["iptables", "nftables"])
def test_without_the_rules_the_virtual_ip_leads_nowhere(lab: Lab, proxy: str) -> None:
    exposed = lab.cluster.expose(lab.server, PORTS, proxy=proxy, others=0)
    lab.cluster.remove_service()
    lab.cluster.remove_service()  # safe to repeat
    assert http_status(lab, exposed.cluster_ip, HTTP_PORT) != "200"
    assert http_status(lab, exposed.node_ip, exposed.node_ports[HTTP_PORT]) != "200"


@pytest.mark.parametrize("lab", ["routed"], indirect=True)
@pytest.mark.parametrize("target", ["service", "nodeport"])
def test_the_baselines_verification_fails_once_the_translation_is_gone(
    lab: Lab, target: str
) -> None:
    """The scenario's own check: verified through the Service, NOT verified when the same
    address is probed after the proxy's rules were removed (the negative control)."""
    options = parse_scenario_options(target=target, proxy="nftables")
    scenario = BaselineScenario(options)
    condition = next(
        c for c in scenario.conditions() if c.id == f"cross-node-idle-ab-{target}-nftables-0svc"
    )
    prepared = scenario.prepare(lab.cluster, condition, profile_named("smoke"))
    try:
        proven = scenario.verify(lab.cluster, prepared, condition)
        assert proven.ok, proven.detail
        assert proven.evidence["answered_by"] == "bl-srv"
        lab.cluster.remove_service()
        unproven = scenario.verify(lab.cluster, prepared, condition)
        assert not unproven.ok
        assert "cannot reach server" in unproven.detail
    finally:
        scenario.cleanup(lab.cluster, prepared)


@pytest.mark.parametrize("lab", ["routed"], indirect=True)
def test_ebpf_services_are_not_the_labs_and_the_hint_says_where_they_are(lab: Lab) -> None:
    from cnibench.backends.base import Capability
    from cnibench.errors import ConfigError

    caps = lab.cluster.capabilities
    assert {Capability.SERVICE_IPTABLES, Capability.SERVICE_NFTABLES} <= caps
    assert Capability.SERVICE_EBPF not in caps
    assert "--cni cilium" in lab.cluster.capability_hint(Capability.SERVICE_EBPF)
    with pytest.raises(ConfigError, match="the lab has no service proxy 'ebpf'"):
        lab.cluster.expose(lab.server, PORTS, proxy="ebpf", others=0)
