"""The baseline's Service targets without a cluster: conditions, options, contrasts, and the
lab's rendered iptables chains and nftables maps."""

from __future__ import annotations

import re

import pytest

from cnibench.backends.base import Capability
from cnibench.backends.lab.service_rules import (
    SERVICE_RANGE,
    iptables_services_restore,
    nft_services_ruleset,
    plan_service,
)
from cnibench.errors import ConfigError
from cnibench.scenarios import SCENARIOS, build_scenarios
from cnibench.scenarios.baseline import BaselineScenario
from cnibench.scenarios.options import parse_scenario_options


def test_by_default_the_baseline_is_pod_to_pod_as_before() -> None:
    conditions = SCENARIOS["baseline"].conditions()
    assert len(conditions) == 16
    assert all("target" not in c.parameters for c in conditions)
    assert all(
        re.fullmatch(r"(same|cross)-node-(idle|loaded)-(iperf3|sockperf|ab|wrk)", c.id)
        for c in conditions
    )
    assert not any(SCENARIOS["baseline"].required_capabilities(c) for c in conditions)


def test_service_targets_multiply_by_proxy_and_table_size() -> None:
    options = parse_scenario_options(target="pod,service,nodeport", services="0,5000")
    conditions = BaselineScenario(options).conditions()
    # 16 pod conditions, then 2 targets x 2 proxies x 2 sizes for each of them.
    assert len(conditions) == 16 * (1 + 2 * 2 * 2)
    ids = {c.id for c in conditions}
    assert "cross-node-idle-iperf3-service-iptables-5000svc" in ids
    assert "same-node-loaded-wrk-nodeport-nftables-0svc" in ids
    service = next(c for c in conditions if c.id == "cross-node-idle-iperf3-service-nftables-0svc")
    assert service.parameters == {
        "placement": "cross-node",
        "load": "idle",
        "tool": "iperf3",
        "target": "service",
        "proxy": "nftables",
        "services": 0,
    }
    assert BaselineScenario(options).required_capabilities(service) == {
        Capability.SERVICE_PROXY,
        Capability.SERVICE_NFTABLES,
    }


@pytest.mark.parametrize(
    ("option", "value", "message"),
    [
        ("target", "clusterip", "unknown target 'clusterip': choose pod, service, nodeport"),
        ("proxy", "ipvs", "unknown service proxy 'ipvs': choose iptables, nftables, ebpf"),
        ("services", "20000", "services"),
    ],
)
def test_bad_service_options_are_refused(option: str, value: str, message: str) -> None:
    with pytest.raises(ConfigError, match=re.escape(message)):
        parse_scenario_options(**{option: value})


def test_a_service_target_is_compared_with_the_pod_and_with_zero_other_services() -> None:
    scenario = build_scenarios(parse_scenario_options(target="pod,service", services="0,1000"))[
        "baseline"
    ]
    by_id = {c.id: c.parameters for c in scenario.conditions()}
    path = next(c for c in scenario.contrasts if c.feature == "service path")
    tables = next(c for c in scenario.contrasts if c.feature == "other Services in the tables")
    treatment = by_id["cross-node-idle-iperf3-service-iptables-1000svc"]
    assert path.is_treatment(treatment)
    controls = [cid for cid, p in by_id.items() if path.is_control_of(p, treatment)]
    assert controls == ["cross-node-idle-iperf3"]  # the pod, not another Service condition
    assert tables.is_treatment(treatment)
    controls = [cid for cid, p in by_id.items() if tables.is_control_of(p, treatment)]
    assert controls == ["cross-node-idle-iperf3-service-iptables-0svc"]


def test_the_service_under_test_comes_after_every_other_in_the_iptables_walk() -> None:
    service, others = plan_service("srv", ["198.19.2.2"], [5201, 80], others=3)
    assert service.cluster_ip == str(SERVICE_RANGE.network_address + 1)
    assert [port for port, _, _ in service.ports] == [5201, 80]
    restore = iptables_services_restore(service, others)
    jumps = [line for line in restore.splitlines() if line.startswith("-A KUBE-SERVICES -d")]
    # 3 others (TCP) then the Service under test: TCP and UDP for each of its 2 ports.
    assert len(jumps) == 3 + 2 * 2
    assert all(service.cluster_ip not in line for line in jumps[:3])
    assert all(service.cluster_ip in line for line in jumps[3:])
    assert "-j DNAT --to-destination 198.19.2.2:5201" in restore
    assert restore.startswith("*nat\n")
    assert restore.endswith("COMMIT\n")
    # NodePorts follow local addresses, as kube-proxy's KUBE-NODEPORTS does.
    assert "-m addrtype --dst-type LOCAL -j KUBE-NODEPORTS" in restore


def test_endpoints_are_picked_with_kube_proxys_probabilities() -> None:
    service, _ = plan_service("srv", ["198.19.2.2", "198.19.2.3", "198.19.3.2"], [80], others=0)
    restore = iptables_services_restore(service, ())
    tcp_svc = re.search(r"-d \S+ -p tcp -m tcp --dport 80 -j (KUBE-SVC-\w+)", restore)
    assert tcp_svc is not None
    picks = [line for line in restore.splitlines() if line.startswith(f"-A {tcp_svc.group(1)} ")]
    probabilities = [re.search(r"--probability (\S+)", line) for line in picks]
    assert [float(p.group(1)) if p else 1.0 for p in probabilities] == pytest.approx(
        [1 / 3, 1 / 2, 1.0]
    )


def test_nftables_looks_every_service_up_in_one_map() -> None:
    service, others = plan_service("srv", ["198.19.2.2"], [80], others=500)
    ruleset = nft_services_ruleset("cb000000-svc", service, others)
    assert ruleset.count("ip daddr . meta l4proto . th dport vmap @service-ips") == 1
    assert f"{service.cluster_ip} . tcp . 80 : goto svc-" in ruleset
    assert ruleset.count(" . tcp . 80 : goto svc-") == 501
    assert "tcp . 30001 : goto svc-" in ruleset  # the NodePort map


def test_too_many_other_services_are_refused() -> None:
    with pytest.raises(ConfigError, match="other Services"):
        plan_service("srv", ["198.19.2.2"], [80], others=16001)
