"""Pods of real labs reach each other across and within nodes, on every datapath."""

from __future__ import annotations

import json
import os
import time

import pytest
from lab_support import ALL_PROFILES, HTTP_PORT, IPERF3_PORT, PLAIN, SOCKPERF_PORT, Lab

from cnibench.backends.base import Endpoint, NodeRole
from cnibench.backends.lab import LabPod
from cnibench.errors import ConfigError, ToolError
from cnibench.scenarios.profiles import profile_named
from cnibench.tools.registry import ToolTarget
from cnibench.tools.sockperf import PINNED_CPU, SOCKPERF


def fetch(source: Endpoint, target: Endpoint, path: str = "/") -> str:
    result = source.run(
        ["curl", "-sS", "--max-time", "5", f"http://{target.ip}:{HTTP_PORT}{path}"], timeout=15
    )
    assert result.returncode == 0, result.stderr
    return result.stdout


@pytest.mark.parametrize("lab", ALL_PROFILES, indirect=True)
def test_pod_reaches_pod_on_another_node(lab: Lab) -> None:
    assert fetch(lab.client, lab.server) == "server\n"


@pytest.mark.parametrize("lab", ALL_PROFILES, indirect=True)
def test_pod_reaches_pod_on_the_same_node(lab: Lab) -> None:
    assert fetch(lab.client, lab.neighbour) == "neighbour\n"


@pytest.mark.parametrize("lab", ALL_PROFILES, indirect=True)
def test_reply_comes_back_across_nodes(lab: Lab) -> None:
    assert fetch(lab.server, lab.neighbour) == "neighbour\n"


@pytest.mark.parametrize("lab", PLAIN, indirect=True)
def test_http_echo_names_the_pod_in_a_header(lab: Lab) -> None:
    result = lab.client.run(
        ["curl", "-sS", "-i", "--max-time", "5", f"http://{lab.server.ip}:{HTTP_PORT}/any/path"],
        timeout=15,
    )
    assert "X-Backend: server" in result.stdout.splitlines()[1:]
    assert result.stdout.startswith("HTTP/1.1 200")


@pytest.mark.parametrize("lab", PLAIN, indirect=True)
@pytest.mark.parametrize("role", [NodeRole.CLIENT, NodeRole.SERVER], ids=["client", "server"])
def test_endpoint_node_is_the_node_role_asked_for(lab: Lab, role: NodeRole) -> None:
    pod = lab.client if role is NodeRole.CLIENT else lab.server
    assert pod.node == lab.cluster.node(role)


def _links(namespace: str, lab: Lab) -> list[dict[str, object]]:
    result = lab.client.run(["ip", "-n", namespace, "-j", "link", "show"], timeout=10)
    links: list[dict[str, object]] = json.loads(result.stdout)
    return links


@pytest.mark.parametrize("lab", ["routed"], indirect=True)
def test_endpoint_node_holds_the_peer_of_the_pod_veth(lab: Lab) -> None:
    # Independent of the backend's bookkeeping: the pod's eth0 and a veth in the reported node
    # namespace must point at each other's interface index.
    pod: LabPod = lab.server
    (eth0,) = [link for link in _links(pod.namespace, lab) if link["ifname"] == "eth0"]
    peers = [
        link
        for link in _links(pod.node.name, lab)
        if link["ifindex"] == eth0["link_index"] and link.get("link_index") == eth0["ifindex"]
    ]
    assert len(peers) == 1


@pytest.mark.parametrize("lab", ALL_PROFILES, indirect=True)
def test_iperf3_between_nodes_moves_data(lab: Lab) -> None:
    result = lab.client.run(
        ["iperf3", "-c", lab.server.ip, "-p", str(IPERF3_PORT), "-t", "1", "-J"], timeout=30
    )
    report = json.loads(result.stdout)
    assert report["end"]["sum_received"]["bits_per_second"] > 0


@pytest.mark.parametrize("lab", ["routed"], indirect=True)
@pytest.mark.parametrize("transport", [[], ["--tcp"]], ids=["udp", "tcp"])
def test_sockperf_server_answers_ping_pong(lab: Lab, transport: list[str]) -> None:
    argv = ["sockperf", "ping-pong", "-i", lab.server.ip, "-p", str(SOCKPERF_PORT), "-t", "1"]
    result = lab.client.run([*argv, *transport], timeout=20)
    assert result.returncode == 0, result.stderr
    assert "Summary: Latency is" in result.stdout


@pytest.mark.parametrize("lab", ["routed"], indirect=True)
def test_run_kills_a_command_that_outlives_its_timeout(lab: Lab) -> None:
    started = time.monotonic()
    with pytest.raises(ToolError, match=r"did not finish within 0\.5 s"):
        lab.client.run(["sleep", "30"], timeout=0.5)
    assert time.monotonic() - started < 5


@pytest.mark.parametrize("lab", ["routed"], indirect=True)
def test_run_reports_the_exit_status(lab: Lab) -> None:
    assert lab.client.run(["sh", "-c", "exit 3"], timeout=5).returncode == 3


@pytest.mark.parametrize("lab", ["routed"], indirect=True)
def test_duplicate_pod_name_is_a_config_error(lab: Lab) -> None:
    with pytest.raises(ConfigError, match="already exists"):
        lab.cluster.place("client", role=NodeRole.CLIENT)


@pytest.mark.parametrize("lab", ["routed"], indirect=True)
def test_removed_pod_leaves_no_namespace_and_frees_its_address(lab: Lab) -> None:
    first = lab.cluster.place("transient", role=NodeRole.SERVER)
    namespace, address = first.namespace, first.ip
    lab.cluster.remove(first)
    second = lab.cluster.place("transient", role=NodeRole.SERVER)
    try:
        listed = lab.client.run(["ip", "netns", "list"], timeout=10).stdout
        assert (namespace not in listed, second.ip) == (True, address)
    finally:
        lab.cluster.remove(second)


def _processes_in(namespace: str, command: str) -> list[int]:
    """PIDs of the processes named ``command`` in network namespace ``namespace`` (read from
    /proc, not from the lab's bookkeeping)."""
    inode = os.stat(f"/run/netns/{namespace}").st_ino
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/comm") as handle:
                name = handle.read().strip()
            if name == command and os.stat(f"/proc/{entry}/ns/net").st_ino == inode:
                found.append(int(entry))
        except OSError:  # the process ended meanwhile
            continue
    return found


@pytest.mark.parametrize("lab", ["routed"], indirect=True)
def test_sockperf_runs_both_ends_on_one_cpu(lab: Lab) -> None:
    """The servers run on the CPU the measuring client asks for, and that client measures
    (``taskset`` present, the round trip parsed): tools/sockperf.py says why."""
    servers = _processes_in(lab.server.namespace, "sockperf")
    assert len(servers) == 2  # UDP and TCP
    assert all(os.sched_getaffinity(pid) == {PINNED_CPU} for pid in servers)
    run = SOCKPERF.client
    assert run is not None
    argv = run.argv(ToolTarget(lab.server.ip, SOCKPERF_PORT), profile_named("smoke"))
    assert argv[:3] == ["taskset", "-c", str(PINNED_CPU)]
    result = lab.client.run([*argv, "--tcp"], timeout=run.timeout(profile_named("smoke")))
    measured = {m.metric: m.value for m in run.measurements(result.stdout, result.stderr)}
    assert measured["latency_p50"] > 0
