"""Pure planning of a lab: names, addresses, routes, rulesets and the commands that build them.

Nothing here touches the system. :func:`plan_lab` turns a
:class:`~cnibench.backends.base.ClusterSpec` and a lab id into a :class:`LabPlan`; the ``*_steps``
functions turn a plan into :class:`Step` values (an argv list and optional stdin) that
:mod:`cnibench.backends.lab.runner` executes. Keeping this layer pure lets the address plan, the
routing per datapath and the nftables rulesets be tested without root.

One module per job, every name importable from this package:

- :mod:`~cnibench.backends.lab.plan.addresses`: the address plan (its table is there), the
  fixed names and numbers, :class:`LabDatapath` and lab ids;
- :mod:`~cnibench.backends.lab.plan.topology`: the plan's value types and :func:`plan_lab`;
- :mod:`~cnibench.backends.lab.plan.network`: namespaces, kernel settings, underlay, tunnels
  (WireGuard, VXLAN), routes and NAPI threading;
- :mod:`~cnibench.backends.lab.plan.egress`: the nodes' NAT tables and the egress gateway;
- :mod:`~cnibench.backends.lab.plan.pods`: a pod's plan and the steps that add and remove it;
- :mod:`~cnibench.backends.lab.plan.servers`: the workloads' server processes and Prometheus'
  configuration (the only module importing the tool adapters and YAML).

Each name is imported from its module on first use (:mod:`cnibench._lazy`), so naming a
datapath (:mod:`~cnibench.backends.lab.plan.addresses`) loads neither the tool adapters nor YAML.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from cnibench._lazy import lazy_exports

if TYPE_CHECKING:
    from cnibench.backends.lab.plan.addresses import (
        BENCHMARK_RANGE,
        EGRESS_RULE_PRIORITY,
        EGRESS_TABLE,
        EXTERNAL_IP,
        IFNAME_MAX,
        LAB_ID_RE,
        LAB_NAMESPACE_RE,
        MAX_NODES,
        MONITOR_IP,
        NODE_EXPORTER_PORT,
        NODE_UPLINK,
        POD_SUPERNET,
        PROMETHEUS_PORT,
        UNDERLAY,
        UNDERLAY_DEVICE_REGEX,
        VXLAN_INTERFACE,
        VXLAN_PORT,
        VXLAN_VNI,
        WIREGUARD_PORT,
        LabDatapath,
        lab_state_dir,
        new_lab_id,
        validate_lab_id,
    )
    from cnibench.backends.lab.plan.egress import (
        egress_removal_steps,
        egress_route,
        egress_steps,
        nat_steps,
        node_nat_ruleset,
        plan_egress,
    )
    from cnibench.backends.lab.plan.network import (
        namespace_removal_step,
        namespace_steps,
        napi_steps,
        node_routes,
        route_steps,
        sysctl_steps,
        underlay_steps,
        vxlan_steps,
        wg_allowed_ips,
        wg_set_argv,
        wireguard_address_steps,
    )
    from cnibench.backends.lab.plan.pods import (
        plan_pod,
        pod_removal_steps,
        pod_steps,
    )
    from cnibench.backends.lab.plan.servers import (
        WorkloadProcess,
        nginx_echo_config,
        prometheus_yaml,
        workload_processes,
    )
    from cnibench.backends.lab.plan.topology import (
        NAPI_MODES,
        EgressPlan,
        HostPlan,
        LabPlan,
        NodePlan,
        PodPlan,
        Route,
        Step,
        napi_option,
        plan_lab,
    )

__all__ = [
    "BENCHMARK_RANGE",
    "EGRESS_RULE_PRIORITY",
    "EGRESS_TABLE",
    "EXTERNAL_IP",
    "IFNAME_MAX",
    "LAB_ID_RE",
    "LAB_NAMESPACE_RE",
    "MAX_NODES",
    "MONITOR_IP",
    "NAPI_MODES",
    "NODE_EXPORTER_PORT",
    "NODE_UPLINK",
    "POD_SUPERNET",
    "PROMETHEUS_PORT",
    "UNDERLAY",
    "UNDERLAY_DEVICE_REGEX",
    "VXLAN_INTERFACE",
    "VXLAN_PORT",
    "VXLAN_VNI",
    "WIREGUARD_PORT",
    "EgressPlan",
    "HostPlan",
    "LabDatapath",
    "LabPlan",
    "NodePlan",
    "PodPlan",
    "Route",
    "Step",
    "WorkloadProcess",
    "egress_removal_steps",
    "egress_route",
    "egress_steps",
    "lab_state_dir",
    "namespace_removal_step",
    "namespace_steps",
    "napi_option",
    "napi_steps",
    "nat_steps",
    "new_lab_id",
    "nginx_echo_config",
    "node_nat_ruleset",
    "node_routes",
    "plan_egress",
    "plan_lab",
    "plan_pod",
    "pod_removal_steps",
    "pod_steps",
    "prometheus_yaml",
    "route_steps",
    "sysctl_steps",
    "underlay_steps",
    "validate_lab_id",
    "vxlan_steps",
    "wg_allowed_ips",
    "wg_set_argv",
    "wireguard_address_steps",
    "workload_processes",
]

_MODULE_OF = {
    "BENCHMARK_RANGE": "addresses",
    "EGRESS_RULE_PRIORITY": "addresses",
    "EGRESS_TABLE": "addresses",
    "EXTERNAL_IP": "addresses",
    "IFNAME_MAX": "addresses",
    "LAB_ID_RE": "addresses",
    "LAB_NAMESPACE_RE": "addresses",
    "MAX_NODES": "addresses",
    "MONITOR_IP": "addresses",
    "NODE_EXPORTER_PORT": "addresses",
    "NODE_UPLINK": "addresses",
    "POD_SUPERNET": "addresses",
    "PROMETHEUS_PORT": "addresses",
    "UNDERLAY": "addresses",
    "UNDERLAY_DEVICE_REGEX": "addresses",
    "VXLAN_INTERFACE": "addresses",
    "VXLAN_PORT": "addresses",
    "VXLAN_VNI": "addresses",
    "WIREGUARD_PORT": "addresses",
    "LabDatapath": "addresses",
    "lab_state_dir": "addresses",
    "new_lab_id": "addresses",
    "validate_lab_id": "addresses",
    "NAPI_MODES": "topology",
    "EgressPlan": "topology",
    "HostPlan": "topology",
    "LabPlan": "topology",
    "NodePlan": "topology",
    "PodPlan": "topology",
    "Route": "topology",
    "Step": "topology",
    "napi_option": "topology",
    "plan_lab": "topology",
    "namespace_removal_step": "network",
    "namespace_steps": "network",
    "napi_steps": "network",
    "node_routes": "network",
    "route_steps": "network",
    "sysctl_steps": "network",
    "underlay_steps": "network",
    "vxlan_steps": "network",
    "wg_allowed_ips": "network",
    "wg_set_argv": "network",
    "wireguard_address_steps": "network",
    "egress_removal_steps": "egress",
    "egress_route": "egress",
    "egress_steps": "egress",
    "nat_steps": "egress",
    "node_nat_ruleset": "egress",
    "plan_egress": "egress",
    "plan_pod": "pods",
    "pod_removal_steps": "pods",
    "pod_steps": "pods",
    "WorkloadProcess": "servers",
    "nginx_echo_config": "servers",
    "prometheus_yaml": "servers",
    "workload_processes": "servers",
}

__getattr__ = lazy_exports(__name__, _MODULE_OF)
