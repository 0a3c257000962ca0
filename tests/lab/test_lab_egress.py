"""The egress gateway: which source address an external iperf3 server sees from a client pod."""

from __future__ import annotations

import pytest
from lab_support import ALL_PROFILES, PLAIN, Lab

from cnibench.backends.base import NodeRole

EXTERNAL_PORT = 5201


def source_seen_by_external_server(lab: Lab) -> str:
    """Run a one-second iperf3 test from the client pod; the address the server saw."""
    external = lab.cluster.external
    future = external.iperf3_server_once(port=EXTERNAL_PORT, timeout=20)
    result = lab.client.run(
        ["iperf3", "-c", external.ip, "-p", str(EXTERNAL_PORT), "-t", "1"], timeout=30
    )
    assert result.returncode == 0, result.stderr
    seen = future.result()
    assert seen.received_bits_per_second > 0
    return seen.remote_host


@pytest.mark.parametrize("lab", PLAIN, indirect=True)
def test_without_gateway_the_external_host_sees_the_client_node(lab: Lab) -> None:
    assert source_seen_by_external_server(lab) == lab.cluster.node(NodeRole.CLIENT).ip


@pytest.mark.parametrize("lab", ALL_PROFILES, indirect=True)
def test_with_gateway_the_external_host_sees_the_gateway_node(lab: Lab) -> None:
    external = lab.cluster.external
    announced = lab.cluster.enable_egress_gateway([lab.client], destination=f"{external.ip}/32")
    try:
        seen = source_seen_by_external_server(lab)
    finally:
        lab.cluster.disable_egress_gateway()
    gateway = lab.cluster.node(NodeRole.EGRESS_GW).ip
    assert (announced, seen) == (gateway, gateway)


@pytest.mark.parametrize("lab", PLAIN, indirect=True)
def test_disabling_the_gateway_restores_the_client_node_source(lab: Lab) -> None:
    external = lab.cluster.external
    lab.cluster.enable_egress_gateway([lab.client], destination=f"{external.ip}/32")
    lab.cluster.disable_egress_gateway()
    assert source_seen_by_external_server(lab) == lab.cluster.node(NodeRole.CLIENT).ip


@pytest.mark.parametrize("lab", ["routed"], indirect=True)
def test_gateway_selects_only_the_listed_pods(lab: Lab) -> None:
    external = lab.cluster.external
    lab.cluster.enable_egress_gateway([lab.neighbour], destination=f"{external.ip}/32")
    try:
        seen = source_seen_by_external_server(lab)
    finally:
        lab.cluster.disable_egress_gateway()
    assert seen == lab.cluster.node(NodeRole.CLIENT).ip


@pytest.mark.parametrize("lab", ["routed"], indirect=True)
def test_abandoned_one_shot_server_is_replaced_by_the_next(lab: Lab) -> None:
    lab.cluster.external.iperf3_server_once(port=EXTERNAL_PORT, timeout=60)
    assert source_seen_by_external_server(lab) == lab.cluster.node(NodeRole.CLIENT).ip


@pytest.mark.parametrize("lab", ["routed"], indirect=True)
def test_external_host_runs_commands_at_its_own_address(lab: Lab) -> None:
    external = lab.cluster.external
    result = external.run(["ip", "-4", "-o", "addr", "show", "dev", "eth0"], timeout=10)
    assert f"inet {external.ip}/24" in result.stdout
