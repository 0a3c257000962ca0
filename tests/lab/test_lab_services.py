"""Services on the lab: a virtual IP and NodePorts translated by kube-proxy-style rules (iptables
chains or an nftables verdict map) on the nodes, proven by conntrack's record of the DNAT."""

from __future__ import annotations

import ipaddress
import json
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from lab_support import HTTP_PORT, IPERF3_PORT, SOCKPERF_PORT, Lab

from cnibench import load_results
from cnibench.backends.base import Service
from cnibench.backends.lab.service_rules import SERVICE_RANGE
from cnibench.errors import ConfigError, ProvisioningError
from cnibench.scenarios.baseline import BaselineScenario
from cnibench.scenarios.options import parse_scenario_options
from cnibench.scenarios.profiles import profile_named
from suite_support import run_cnibench

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


TOOL_METRICS = {"iperf3": "throughput", "sockperf": "latency_avg", "ab": "requests_per_second",
                "wrk": "requests_per_second"}  # fmt: skip
"""Each tool of the baseline and the number it is run for."""


def test_the_cli_measures_the_pod_and_its_service_with_every_tool(
    lab_backend: object, tmp_path: Path
) -> None:
    """``cnibench run --scenario baseline --target pod,service`` as a person types it, cut to
    the cross-node idle conditions: verified runs of all four tools on both targets, the
    Service's ones answered by the server pod at a virtual IP, and a service-path verdict."""
    ids = [f"cross-node-idle-{tool}{suffix}" for tool in TOOL_METRICS
           for suffix in ("", "-service-nftables-0svc")]  # fmt: skip
    results = tmp_path / "results"
    done = run_cnibench(
        "run", "--cluster", "lab", "--cni", "routed", "--scenario", "baseline",
        "--target", "pod,service", "--proxy", "nftables", "--profile", "smoke",
        "--results-dir", results, *(arg for cid in ids for arg in ("--condition", cid)),
        timeout=900,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    frame = load_results(results)
    assert set(frame["condition"]) == set(ids)
    assert bool(frame["verified"].all())
    assert set(frame["status"]) == {"ok"}
    for tool, metric in TOOL_METRICS.items():
        for target in ("pod", "service"):
            rows = frame[(frame["param_tool"] == tool) & (frame["metric"] == metric)]
            rows = rows[rows["param_target"].fillna("pod") == target]
            assert len(rows) == 2, (tool, target, rows)
            assert (rows["value"] > 0).all(), (tool, target, rows)
        (proof,) = results.glob(f"*/verification-*-cross-node-idle-{tool}-service-*.json")
        evidence = json.loads(proof.read_text())
        host = evidence["url"].removeprefix("http://").rsplit(":", 1)[0]
        assert ipaddress.ip_address(host) in SERVICE_RANGE, evidence
        assert evidence["answered_by"] == "bl-srv", evidence
        assert (
            f"service path on routed (load=idle, placement=cross-node, proxy=nftables,"
            f" services=0, tool={tool})" in done.stdout
        )


def test_an_interleaved_service_condition_times_the_proxy_in_every_round(
    lab_backend: object, tmp_path: Path
) -> None:
    """``--interleave`` sets each condition's Services up again in every round, so every
    round's first run carries the time the proxy took to program them (only the first round's
    was kept before: the run numbered 0 alone carried it)."""
    ids = [f"cross-node-idle-sockperf-service-nftables-{n}svc" for n in (0, 100)]
    results = tmp_path / "results"
    done = run_cnibench(
        "run", "--cluster", "lab", "--cni", "routed", "--scenario", "baseline",
        "--target", "service", "--proxy", "nftables", "--services", "0,100",
        "--profile", "smoke", "--interleave", "--results-dir", results,
        *(arg for cid in ids for arg in ("--condition", cid)),
        timeout=900,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    frame = load_results(results)
    timed = frame[frame["metric"] == "service_programming_time"]
    runs = frame.drop_duplicates("run_id").groupby("condition").size().to_dict()
    assert runs == {cid: 2 for cid in ids}
    assert timed.groupby("condition").size().to_dict() == runs
    assert timed["run_id"].is_unique
    assert (timed["value"] >= 0).all(), timed["value"].tolist()
    # Every run also times one more Service among those loaded, from its request on: the
    # probe ran before it (it saw the address lead nowhere), and nothing else answered.
    added = frame[frame["metric"] == "new_service_time"]
    assert added.groupby("condition").size().to_dict() == runs
    assert (added["value"] > 0).all(), added["value"].tolist()
    assert (added["value"] < 15).all(), added["value"].tolist()
    leaks = frame[frame["metric"] == "new_service_time_leaks"]
    assert set(leaks["value"]) == {0.0}
    for probe in results.glob("*/raw/*/new_service_time.json"):
        evidence = json.loads(probe.read_text())
        assert evidence["new_service_time_probe_saw_old_state"] > 0, evidence
        assert evidence["new_service_time_probe_interval_ms"] <= 20, evidence
    assert len(list(results.glob("*/raw/*/new_service_time.json"))) == 4


@pytest.mark.parametrize("lab", ["routed"], indirect=True)
def test_one_more_service_answers_at_a_free_address_and_goes_with_the_others(
    service: tuple[Lab, Service],
) -> None:
    """``add_service`` puts one more Service at the address ``free_service_address`` gave,
    beside the 200 loaded with ``expose``; a taken address is refused; ``remove_service``
    takes it away with the others."""
    lab, exposed = service
    address = lab.cluster.free_service_address()
    assert ipaddress.ip_address(address) in SERVICE_RANGE
    assert address != exposed.cluster_ip
    assert http_status(lab, address, HTTP_PORT) != "200"
    lab.cluster.add_service(lab.server, HTTP_PORT, address=address)
    assert http_status(lab, address, HTTP_PORT) == "200"
    assert http_status(lab, exposed.cluster_ip, exposed.ports[HTTP_PORT]) == "200"
    following = lab.cluster.free_service_address()
    assert following not in (address, exposed.cluster_ip)
    with pytest.raises(ConfigError, match="taken"):
        lab.cluster.add_service(lab.server, HTTP_PORT, address=address)
    lab.cluster.remove_service()
    assert http_status(lab, address, HTTP_PORT) != "200"
    with pytest.raises(ProvisioningError, match="expose"):
        lab.cluster.add_service(lab.server, HTTP_PORT, address=following)
