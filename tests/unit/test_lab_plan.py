"""Pure planning and parsing of the lab backend: no root, no namespaces, no network.

Expected values are written out by hand from the address plan in the lab's documentation
(node i at 198.18.0.<10+i>, pods 198.19.<i>.0/24, WireGuard 198.18.64.<i>, VXLAN 198.18.128.<i>).
"""

from __future__ import annotations

import ipaddress
import shutil
import socket
import subprocess
from pathlib import Path

import pytest
import yaml

from cnibench.backends.base import ClusterSpec, NodeRole, WorkloadKind, WorkloadSpec
from cnibench.backends.lab import LabBackend, parse_tool_version, parse_wg_dump, redact_wg_dump
from cnibench.backends.lab.plan import (
    LabPlan,
    Step,
    egress_route,
    nginx_echo_config,
    node_nat_ruleset,
    node_routes,
    plan_egress,
    plan_lab,
    plan_pod,
    prometheus_yaml,
    validate_lab_id,
    vxlan_steps,
    wg_set_argv,
    workload_processes,
)
from cnibench.backends.lab.runner import listening_ports
from cnibench.errors import ConfigError, ParseError
from cnibench.tools.sockperf import PINNED_CPU

LAB = "cb0a1b2c"


def make_plan(key: str, roles: int = 3) -> LabPlan:
    cni, _, encryption = key.partition("+")
    all_roles = (NodeRole.CLIENT, NodeRole.SERVER, NodeRole.EGRESS_GW)
    spec = ClusterSpec(cni=cni, encryption=encryption, roles=all_roles[:roles])
    return plan_lab(spec, LAB, state_root=Path("/tmp/cnibench-state"))


def test_unknown_datapath_is_a_config_error() -> None:
    with pytest.raises(ConfigError) as info:
        plan_lab(ClusterSpec(cni="calico"), LAB)
    assert str(info.value) == "unknown lab datapath 'calico': choose routed or vxlan"


def test_backend_rejects_unknown_datapath_before_creating_anything() -> None:
    with pytest.raises(ConfigError, match="unknown lab datapath 'x'"):
        LabBackend(state_root=Path("/nonexistent/cnibench")).provision(ClusterSpec(cni="x"))


def test_unknown_encryption_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="ipsec"):
        plan_lab(ClusterSpec(cni="routed", encryption="ipsec"), LAB)


def test_options_are_rejected() -> None:
    with pytest.raises(ConfigError, match="mode"):
        plan_lab(ClusterSpec(cni="routed", options={"mode": "kpr"}), LAB)
    with pytest.raises(ConfigError, match="napi=inline or napi=threaded"):
        plan_lab(ClusterSpec(cni="routed", options={"napi": "busy"}), LAB)


def test_threaded_napi_is_opt_in_and_covers_every_machine_and_bridge_port() -> None:
    from cnibench.backends.lab.plan import napi_steps

    default = plan_lab(ClusterSpec(cni="routed"), LAB)
    assert not default.napi_threaded
    assert napi_steps(default) == []
    plan = plan_lab(ClusterSpec(cni="vxlan", options={"napi": "threaded"}), LAB)
    assert plan.napi_threaded
    assert set(plan.machines) == {"n1", "n2", "n3", "ext", "mon"}
    steps = napi_steps(plan)
    threaded = {s.argv[3] for s in steps if "threaded" in s.argv[-1]}
    assert threaded == set(plan.machines.values())
    gro = {s.argv[3] for s in steps if s.argv[-2:] == ("gro", "on")}
    assert gro == threaded
    tso_off = {s.argv[6] for s in steps if s.argv[-2:] == ("tso", "off")}
    assert tso_off == {n.bridge_port for n in plan.nodes} | {"ext", "mon"}
    assert all(s.argv[3] == plan.underlay_namespace for s in steps if "tso" in s.argv)


@pytest.mark.parametrize("lab_id", ["cb12345", "cbt1a2b3", "xx123456", "cb1234567", "CB123456"])
def test_malformed_lab_id_is_rejected(lab_id: str) -> None:
    with pytest.raises(ConfigError, match="lab id"):
        validate_lab_id(lab_id)


@pytest.mark.parametrize(
    ("index", "underlay", "pods", "gateway", "overlay", "wg"),
    [
        (0, "198.18.0.11", "198.19.1.0/24", "198.19.1.1", "198.18.128.1", "198.18.64.1"),
        (2, "198.18.0.13", "198.19.3.0/24", "198.19.3.1", "198.18.128.3", "198.18.64.3"),
    ],
    ids=["first-node", "third-node"],
)
def test_node_addresses_follow_the_address_plan(
    index: int, underlay: str, pods: str, gateway: str, overlay: str, wg: str
) -> None:
    node = make_plan("vxlan+wireguard").nodes[index]
    assert (node.underlay_ip, node.pod_cidr, node.pod_gateway, node.overlay_ip, node.wg_ip) == (
        underlay,
        pods,
        gateway,
        overlay,
        wg,
    )


def test_every_namespace_carries_the_lab_id() -> None:
    plan = make_plan("routed")
    assert all(name.startswith(f"{LAB}-") for name in plan.namespaces)


def test_every_address_is_in_the_benchmarking_range() -> None:
    plan = make_plan("vxlan+wireguard")
    addresses = [plan.external.ip, plan.monitor.ip]
    for node in plan.nodes:
        addresses += [node.underlay_ip, node.pod_gateway, node.overlay_ip, node.wg_ip]
        addresses += [str(ipaddress.ip_network(node.pod_cidr).network_address)]
    bench = ipaddress.ip_network("198.18.0.0/15")
    assert all(ipaddress.ip_address(a) in bench for a in addresses)


def test_interface_names_fit_the_kernel_limit_with_100_nodes() -> None:
    spec = ClusterSpec(cni="vxlan", encryption="wireguard", roles=(NodeRole.CLIENT,) * 100)
    plan = plan_lab(spec, LAB)
    pod = plan_pod(plan, "p", plan.nodes[-1], host=254, seq=99999)
    names = [plan.bridge, pod.host_veth, *plan.wg_interfaces]
    names += [node.bridge_port for node in plan.nodes]
    assert max(len(name) for name in names) <= 15


def test_more_than_100_nodes_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="1 to 100 nodes"):
        plan_lab(ClusterSpec(cni="routed", roles=(NodeRole.CLIENT,) * 101), LAB)


def test_wireguard_interface_names_differ_between_labs() -> None:
    spec = ClusterSpec(cni="routed", encryption="wireguard")
    first = plan_lab(spec, "cb000001").wg_interfaces
    second = plan_lab(spec, "cb000002").wg_interfaces
    assert not set(first) & set(second)


@pytest.mark.parametrize(
    ("key", "mtu"),
    [("routed", 1500), ("vxlan", 1450), ("routed+wireguard", 1420), ("vxlan+wireguard", 1370)],
    ids=["routed", "vxlan", "routed+wireguard", "vxlan+wireguard"],
)
def test_pod_mtu_leaves_room_for_every_tunnel_header(key: str, mtu: int) -> None:
    assert make_plan(key).pod_mtu == mtu


def test_routed_datapath_routes_pod_subnets_via_peer_underlay() -> None:
    plan = make_plan("routed")
    routes = {(r.destination, r.via, r.device) for r in node_routes(plan, plan.nodes[0])}
    assert routes == {
        ("198.19.2.0/24", "198.18.0.12", "eth0"),
        ("198.19.3.0/24", "198.18.0.13", "eth0"),
    }


def test_vxlan_datapath_routes_pod_subnets_via_peer_overlay() -> None:
    plan = make_plan("vxlan")
    routes = {(r.destination, r.via, r.device) for r in node_routes(plan, plan.nodes[1])}
    assert routes == {
        ("198.19.1.0/24", "198.18.128.1", "vxlan42"),
        ("198.19.3.0/24", "198.18.128.3", "vxlan42"),
    }


def test_routed_wireguard_routes_pod_subnets_into_the_tunnel() -> None:
    plan = make_plan("routed+wireguard")
    devices = {r.device for r in node_routes(plan, plan.nodes[0])}
    assert devices == {f"{LAB}-wg1"}


def test_vxlan_over_wireguard_uses_tunnel_addresses_as_endpoints() -> None:
    plan = make_plan("vxlan+wireguard", roles=2)
    text = " ".join(" ".join(step.argv) + (step.stdin or "") for step in vxlan_steps(plan))
    assert "local 198.18.64.1" in text
    assert "dst 198.18.64.2" in text
    assert "198.18.0.1" not in text


@pytest.mark.parametrize(
    ("key", "via", "device"),
    [
        ("routed", "198.18.0.13", "eth0"),
        ("vxlan", "198.18.128.3", "vxlan42"),
        ("routed+wireguard", "198.18.64.3", f"{LAB}-wg1"),
    ],
    ids=["routed", "vxlan", "routed+wireguard"],
)
def test_egress_route_reaches_the_gateway_the_way_pod_traffic_travels(
    key: str, via: str, device: str
) -> None:
    plan = make_plan(key)
    route = egress_route(plan, plan.nodes[0], plan.nodes[2])
    assert (route.destination, route.via, route.device) == ("default", via, device)


def test_masquerade_spares_pod_to_pod_traffic() -> None:
    plan = make_plan("routed")
    ruleset = node_nat_ruleset(plan, plan.nodes[0])
    assert "ip saddr 198.19.0.0/16 ip daddr != 198.19.0.0/16" in ruleset
    assert "masquerade" in ruleset


def test_client_node_skips_masquerade_for_gateway_flows_first() -> None:
    plan = make_plan("routed")
    egress = plan_egress(plan, plan.nodes[2], [(plan.nodes[0].name, "198.19.1.2")], "198.18.0.200")
    ruleset = node_nat_ruleset(plan, plan.nodes[0], egress)
    bypass = ruleset.index("ip saddr 198.19.1.2 ip daddr 198.18.0.200/32 return")
    assert bypass < ruleset.index("masquerade")


def test_gateway_node_translates_pod_traffic_to_its_own_address() -> None:
    plan = make_plan("routed")
    egress = plan_egress(plan, plan.nodes[2], [(plan.nodes[0].name, "198.19.1.2")], "198.18.0.200")
    ruleset = node_nat_ruleset(plan, plan.nodes[2], egress)
    assert "ip daddr 198.18.0.200/32" in ruleset
    assert "snat to 198.18.0.13" in ruleset


def test_uninvolved_node_has_no_gateway_rules() -> None:
    plan = make_plan("routed")
    egress = plan_egress(plan, plan.nodes[2], [(plan.nodes[0].name, "198.19.1.2")], "198.18.0.200")
    assert node_nat_ruleset(plan, plan.nodes[1], egress) == node_nat_ruleset(plan, plan.nodes[1])


def test_gateway_node_pods_need_no_policy_route() -> None:
    plan = make_plan("routed")
    egress = plan_egress(plan, plan.nodes[2], [(plan.nodes[2].name, "198.19.3.2")], "198.18.0.200")
    assert egress.clients == ()


def test_egress_destination_must_be_a_cidr() -> None:
    plan = make_plan("routed")
    with pytest.raises(ConfigError, match="not a CIDR"):
        plan_egress(plan, plan.nodes[2], [], "external-host")


def test_wireguard_peer_of_gateway_also_owns_the_egress_destination() -> None:
    plan = make_plan("routed+wireguard")
    keys = {node.name: f"key-of-{node.name}" for node in plan.nodes}
    argv = wg_set_argv(
        plan,
        plan.nodes[0],
        private_key=Path("/k"),
        public_keys=keys,
        extra_allowed={plan.nodes[2].name: ["198.18.0.200/32"]},
    )
    gateway_peer = argv.index(f"key-of-{plan.nodes[2].name}")
    allowed = argv[argv.index("allowed-ips", gateway_peer) + 1]
    assert allowed.split(",") == ["198.18.64.3/32", "198.19.3.0/24", "198.18.0.200/32"]


def test_sockperf_workload_serves_udp_and_tcp() -> None:
    plan = make_plan("routed")
    pod = plan_pod(plan, "srv", plan.nodes[1], host=2, seq=1)
    processes = workload_processes(
        pod, WorkloadSpec(WorkloadKind.SOCKPERF_SERVER, 11111), Path("/tmp/x")
    )
    assert sorted("--tcp" in p.argv for p in processes) == [False, True]
    # On the CPU the measuring client runs on (cnibench.tools.sockperf's docstring says why).
    assert {p.argv[:3] for p in processes} == {("taskset", "-c", str(PINNED_CPU))}


def test_pod_name_that_would_break_nginx_is_rejected() -> None:
    with pytest.raises(ConfigError, match="pod name"):
        nginx_echo_config('a";b', "198.19.1.2", 80, Path("/tmp/x"))


@pytest.mark.skipif(shutil.which("nginx") is None, reason="nginx is not installed")
def test_nginx_accepts_the_echo_config(tmp_path: Path) -> None:
    # `nginx -t` binds the listen address, so this check listens on a free loopback port.
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    conf = tmp_path / "nginx.conf"
    conf.write_text(nginx_echo_config("srv-1", "127.0.0.1", port, tmp_path))
    result = subprocess.run(
        ["nginx", "-t", "-c", str(conf), "-p", str(tmp_path), "-e", str(tmp_path / "e.log")],
        capture_output=True,
        text=True,
        timeout=10,
        check=False,
    )
    assert result.returncode == 0, result.stderr


def test_prometheus_config_labels_each_node_target() -> None:
    plan = make_plan("routed")
    config = yaml.safe_load(prometheus_yaml(plan))
    labels = {
        cfg["targets"][0]: cfg["labels"] for cfg in config["scrape_configs"][0]["static_configs"]
    }
    assert labels["198.18.0.13:9100"] == {
        "node": f"{LAB}-n3",
        "role": "egress-gw",
        "instance": f"{LAB}-n3",
    }


@pytest.mark.skipif(shutil.which("promtool") is None, reason="promtool is not installed")
def test_promtool_accepts_the_prometheus_config(tmp_path: Path) -> None:
    config = tmp_path / "prometheus.yml"
    config.write_text(prometheus_yaml(make_plan("vxlan")))
    result = subprocess.run(
        ["promtool", "check", "config", str(config)],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_route_batch_line_spells_onlink_and_table() -> None:
    plan = make_plan("vxlan")
    route = egress_route(plan, plan.nodes[0], plan.nodes[2])
    assert (
        route.batch_line() == "route replace default via 198.18.128.3 dev vxlan42 onlink table 200"
    )


def test_step_keeps_argv_as_a_list_of_words() -> None:
    step = Step("x", ("ip", "netns", "add", "cb000001-ul"))
    assert step.argv[3] == "cb000001-ul"


# Real outputs of the Debian tools on the development machine (2026-11, Debian 12 packages).
VERSION_OUTPUTS = {
    "iperf3": (
        "iperf 3.12 (cJSON 1.7.15)\nLinux vm 6.18.44-fc-v595 #1 SMP PREEMPT_DYNAMIC x86_64\n",
        "3.12",
    ),
    "sockperf": ("sockperf, version 3.7-no.git\n   compiled 2021-08-23 12:14:23\n", "3.7"),
    "nginx": ("nginx version: nginx/1.22.1\n", "1.22.1"),
    "wireguard-tools": (
        "wireguard-tools v1.0.20210914 - https://git.zx2c4.com/wireguard-tools/\n",
        "1.0.20210914",
    ),
    "wireguard-go": ("wireguard-go v0.0.20220316\n\nUserspace WireGuard daemon\n", "0.0.20220316"),
    "prometheus": (
        "prometheus, version 2.42.0+ds (branch: debian/sid, revision: 2.42.0+ds-5+deb12u1)\n",
        "2.42.0",
    ),
    "node-exporter": (
        "node_exporter, version 1.5.0 (branch: debian/sid, revision: 1.5.0-1+b6)\n",
        "1.5.0",
    ),
    "haproxy": ("HAProxy version 2.6.12-1+deb12u4 2026/10/17 - https://haproxy.org/\n", "2.6.12"),
    "ab": ("This is ApacheBench, Version 2.3 <$Revision$>\n", "2.3"),
    "wrk": ("wrk debian/4.1.0-3+b2 [epoll] Copyright (C) 2012 Will Glozer\n", "4.1.0"),
    "tcpdump": ("tcpdump version 4.99.3\nlibpcap version 1.10.3 (with TPACKET_V3)\n", "4.99.3"),
    "nftables": ("nftables v1.0.6 (Lester Gooch #5)\n", "1.0.6"),
    "iproute2": ("ip utility, iproute2-6.1.0, libbpf 1.1.2\n", "6.1.0"),
}


@pytest.mark.parametrize("tool", sorted(VERSION_OUTPUTS), ids=sorted(VERSION_OUTPUTS))
def test_tool_version_is_parsed_from_real_output(tool: str) -> None:
    text, expected = VERSION_OUTPUTS[tool]
    assert parse_tool_version(tool, text) == expected


def test_version_output_without_version_is_a_parse_error() -> None:
    with pytest.raises(ParseError, match="iperf3"):
        parse_tool_version("iperf3", "iperf3: command not found")


# `wg show <if> dump` of a wireguard-go node of a deleted lab (throwaway keys).
WG_DUMP = (
    "8JqIKwQA0EhULgpr2yj+PdTPahnH6hvS5MIScibwZmU=\tRk/ytWhWBQfsyAlupZBJHsxtj8FMsWgWgw2BKVoqQA0="
    "\t51820\toff\n"
    "jky6V4j2OLOC3LmUfB8TRD5EqAbQrHBoOS/zOD8ipWc=\t(none)\t198.18.0.12:51820\t"
    "198.18.64.2/32,198.19.2.0/24\t1795344800\t600972\t601316\toff\n"
)


def test_wg_dump_lists_each_peer_with_endpoint_and_handshake() -> None:
    (peer,) = parse_wg_dump(WG_DUMP)
    assert (peer["endpoint"], peer["latest_handshake"], peer["allowed_ips"]) == (
        "198.18.0.12:51820",
        "1795344800",
        "198.18.64.2/32,198.19.2.0/24",
    )


def test_wg_dump_redaction_hides_the_private_key() -> None:
    redacted = redact_wg_dump(WG_DUMP)
    assert "8JqIKwQA0EhULgpr2yj+PdTPahnH6hvS5MIScibwZmU=" not in redacted
    assert "Rk/ytWhWBQfsyAlupZBJHsxtj8FMsWgWgw2BKVoqQA0=" in redacted


def test_truncated_wg_dump_is_a_parse_error() -> None:
    with pytest.raises(ParseError):
        parse_wg_dump(WG_DUMP.replace("\t600972\t601316\toff", ""))


# /proc/<pid>/net/tcp of a pod running `sockperf server -i 198.19.2.2 -p 11111 --tcp`.
PROC_NET_TCP = (
    "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout"
    " inode\n"
    "   0: 020213C6:2B67 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0"
    " 160151 1 00000000d5d17f0e 100 0 0 10 0\n"
    "   1: 0100007F:A897 0100007F:8FC0 06 00000000:00000000 03:00000519 00000000     0        0"
    " 0 3 000000009ac94a2c\n"
)


def test_listening_sockets_are_read_from_proc_net_tcp() -> None:
    assert listening_ports(PROC_NET_TCP) == {("198.19.2.2", 11111)}
