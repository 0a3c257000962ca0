"""Pure rendering of the Kubernetes objects cnibench creates, from templates in ``manifests/``.

Each function returns one object (or a list) as a plain dict, ready for server-side apply. The
templates hold the fixed structure; the values are substituted JSON-encoded (JSON is YAML flow
syntax), so a name or a list can never change a document's shape. Every object carries
:data:`SESSION_LABEL` so teardown and ``cnibench clean`` find it.
"""

from __future__ import annotations

import json
import string
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from cnibench.backends.base import (
    NODE_EXPORTER_PORT,
    ClusterSpec,
    NodeRole,
    WorkloadKind,
    WorkloadSpec,
)
from cnibench.backends.kube.cni_types import CniDefinition
from cnibench.backends.kube.images import Images
from cnibench.backends.kube.resources import data_tree
from cnibench.errors import ConfigError
from cnibench.policy import PolicySpec
from cnibench.tools.sockperf import PINNED_CPU, sockperf_server_argv

__all__ = [
    "ENDPOINT_LABEL",
    "HOSTNAME_LABEL",
    "KUBE_SESSION_LEASE",
    "MANAGED_BY",
    "PROMETHEUS_PORT",
    "ROLE_LABEL",
    "SESSION_LABEL",
    "TOOLS_CONTAINER",
    "NodeTarget",
    "capture_pod",
    "check_policy_action",
    "deny_all_ingress",
    "gateway",
    "http_route",
    "kind_cluster_config",
    "l4_ports",
    "l7_values",
    "manifests_dir",
    "metallb_ip_address_pool",
    "metallb_l2_advertisement",
    "monitoring_manifests",
    "namespace",
    "network_policy",
    "pod",
    "prometheus_config",
    "pull_policy",
    "render_template",
    "service",
    "session_labels",
    "split_service",
]

SESSION_LABEL = "cnibench.io/session"
KUBE_SESSION_LEASE = "kube-session"
"""The lease kind (:mod:`cnibench.leases`) a process holds on each :data:`SESSION_LABEL` value
it labels objects with, while it runs."""
ROLE_LABEL = "cnibench.io/role"
ENDPOINT_LABEL = "cnibench.io/endpoint"
MANAGED_BY = {"app.kubernetes.io/managed-by": "cnibench"}
TOOLS_CONTAINER = "tools"
"""Container of every pod in which :meth:`Endpoint.run` executes client commands."""
LOAD_CONTAINER = "locust"
"""Container of a load pod (:data:`WorkloadKind.LOAD_GENERATOR`): the locust image, idle; that
pod's commands (locust's master or a worker) run in it instead of :data:`TOOLS_CONTAINER`."""


def command_container(workloads: Sequence[WorkloadSpec]) -> str:
    """The container :meth:`Endpoint.run` executes in for a pod running ``workloads``:
    :data:`LOAD_CONTAINER` in a load pod, else :data:`TOOLS_CONTAINER`."""
    if any(w.kind is WorkloadKind.LOAD_GENERATOR for w in workloads):
        return LOAD_CONTAINER
    return TOOLS_CONTAINER


HOSTNAME_LABEL = "kubernetes.io/hostname"
"""Label the kubelet puts on its node (usually, not always, the node's name)."""
PROMETHEUS_PORT = 9090
_MONITORING = "cnibench-monitoring"


@dataclass(frozen=True)
class NodeTarget:
    """How a pod is pinned to one node without changing the node: a nodeSelector on labels
    the node already carries (its :data:`HOSTNAME_LABEL`), or, for a node without one, its
    name (``spec.nodeName``, which skips the scheduler).

    Attributes
    ----------
    labels:
        Labels of the node to select it by; empty when ``name`` is used.
    name:
        Node name for ``spec.nodeName``; ``""`` when ``labels`` select the node.
    """

    labels: Mapping[str, str] = field(default_factory=dict)
    name: str = ""

    @classmethod
    def of_node(cls, name: str, labels: Mapping[str, str]) -> NodeTarget:
        """The target of node ``name`` with ``labels``: by its hostname label's own value
        when it has one, else by name."""
        hostname = labels.get(HOSTNAME_LABEL, "")
        return cls({HOSTNAME_LABEL: hostname}) if hostname else cls(name=name)

    @classmethod
    def role(cls, role: NodeRole) -> NodeTarget:
        """Nodes labelled :data:`ROLE_LABEL` = ``role`` (a kind cluster cnibench made)."""
        return cls({ROLE_LABEL: role.value})

    def place(self, pod_spec: dict[str, Any]) -> dict[str, Any]:
        """``pod_spec`` (a pod's or a pod template's ``spec``) pinned to the node, in place."""
        pod_spec["nodeSelector"] = dict(self.labels)
        if self.name:
            pod_spec["nodeName"] = self.name
        return pod_spec


def manifests_dir() -> Path:
    """The template directory: ``CNIBENCH_MANIFESTS``, the checkout's ``manifests/``, or the copy
    inside an installed wheel (:func:`~cnibench.backends.kube.resources.data_tree`)."""
    return data_tree("manifests", override_env="CNIBENCH_MANIFESTS")


def render_template(
    relative: str, values: Mapping[str, Any], *, root: Path | None = None
) -> dict[str, Any]:
    """Load ``manifests/<relative>`` with ``${key}`` replaced by ``json.dumps(values[key])``.

    Raises
    ------
    cnibench.errors.ConfigError
        If the template is missing, needs a value not given, or is not one YAML mapping.
    """
    path = (root or manifests_dir()) / relative
    try:
        text = path.read_text()
    except OSError as exc:
        raise ConfigError(f"manifest template {path} cannot be read: {exc}") from exc
    encoded = {key: json.dumps(value) for key, value in values.items()}
    try:
        rendered = string.Template(text).substitute(encoded)
    except (KeyError, ValueError) as exc:
        raise ConfigError(f"manifest template {relative} needs value {exc}") from exc
    document = yaml.safe_load(rendered)
    if not isinstance(document, dict):
        raise ConfigError(f"manifest template {relative} is not one YAML mapping")
    return document


def session_labels(session: str, **extra: str) -> dict[str, str]:
    """Labels of every object of a session (``cnibench.io/session`` and managed-by)."""
    return {**MANAGED_BY, SESSION_LABEL: session, **extra}


def service_account_rbac(
    *,
    service_account: str,
    namespace: str,
    cluster_role: str,
    rules: list[dict[str, Any]],
    labels: Mapping[str, str],
) -> list[dict[str, Any]]:
    """A ServiceAccount, a ClusterRole with ``rules`` and the ClusterRoleBinding between them,
    each labelled ``labels``: what a cluster-wide agent (a CNI's, a gateway's) runs as."""
    rbac = "rbac.authorization.k8s.io"
    cluster = dict(labels)
    return [
        {
            "apiVersion": "v1",
            "kind": "ServiceAccount",
            "metadata": {"name": service_account, "namespace": namespace, "labels": dict(labels)},
        },
        {
            "apiVersion": f"{rbac}/v1",
            "kind": "ClusterRole",
            "metadata": {"name": cluster_role, "labels": cluster},
            "rules": rules,
        },
        {
            "apiVersion": f"{rbac}/v1",
            "kind": "ClusterRoleBinding",
            "metadata": {"name": cluster_role, "labels": dict(cluster)},
            "roleRef": {"apiGroup": rbac, "kind": "ClusterRole", "name": cluster_role},
            "subjects": [
                {"kind": "ServiceAccount", "name": service_account, "namespace": namespace}
            ],
        },
    ]


def namespace(name: str, *, session: str) -> dict[str, Any]:
    """The session's Namespace, labelled so ``cnibench clean`` finds it."""
    return render_template("core/namespace.yaml", {"name": name, "labels": session_labels(session)})


def _tcp_ready(port: int) -> dict[str, Any]:
    return {"tcpSocket": {"port": port}, "periodSeconds": 1, "failureThreshold": 60}


def _workload_containers(workload: WorkloadSpec, images: Images) -> list[dict[str, Any]]:
    port = workload.port
    if workload.kind is WorkloadKind.LOAD_GENERATOR:
        # Idle until exec starts locust in it: a master listens on the port for its workers.
        return [
            {
                "name": LOAD_CONTAINER,
                "image": images.locust,
                "command": ["sleep", "infinity"],
                "ports": [{"containerPort": port, "protocol": "TCP"}],
            }
        ]
    if workload.kind is WorkloadKind.IPERF3_SERVER:
        return [
            {
                "name": "iperf3",
                "image": images.tools,
                "command": ["iperf3", "-s", "-p", str(port)],
                "ports": [{"containerPort": port, "protocol": "TCP"}],
                "readinessProbe": _tcp_ready(port),
            }
        ]
    if workload.kind is WorkloadKind.SOCKPERF_SERVER:
        if not images.sockperf:
            raise ConfigError(
                "no sockperf image configured: set CNIBENCH_IMAGE_SOCKPERF to an image with"
                " sockperf and taskset on PATH"
            )
        return [
            {
                "name": "sockperf-udp",
                "image": images.sockperf,
                "command": sockperf_server_argv(port=port, cpu=PINNED_CPU),
                "ports": [{"containerPort": port, "protocol": "UDP"}],
            },
            {
                "name": "sockperf-tcp",
                "image": images.sockperf,
                "command": sockperf_server_argv(port=port, tcp=True, cpu=PINNED_CPU),
                "ports": [{"containerPort": port, "protocol": "TCP"}],
                "readinessProbe": _tcp_ready(port),
            },
        ]
    # nginx answers every path with the pod's name in the body and the X-Backend header; the
    # name comes from the downward API because it is only known once the pod exists.
    config = (
        f"server {{ listen {port}; location / {{ default_type text/plain;"
        ' add_header X-Backend "$POD_NAME" always; return 200 "$POD_NAME\\n"; } }'
    )
    script = (
        f"printf '%s\\n' '{config}' | sed \"s/\\$POD_NAME/$POD_NAME/g\""
        " > /etc/nginx/conf.d/default.conf && exec nginx -g 'daemon off;'"
    )
    return [
        {
            "name": "http-echo",
            "image": images.http_echo,
            "command": ["sh", "-c", script],
            "env": [
                {"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}
            ],
            "ports": [{"containerPort": port, "protocol": "TCP"}],
            "readinessProbe": _tcp_ready(port),
        }
    ]


def pull_policy(image: str) -> str:
    """``Never`` for a ``localhost/`` image (built here and loaded into the cluster; no
    registry has it, so a missing one fails at once with ``ErrImageNeverPull`` instead of
    backing off on pulls), ``IfNotPresent`` for any other."""
    return "Never" if image.startswith("localhost/") else "IfNotPresent"


def pod(
    name: str,
    *,
    namespace: str,
    session: str,
    role: NodeRole,
    workloads: Sequence[WorkloadSpec] = (),
    images: Images | None = None,
    tolerations: Sequence[Mapping[str, Any]] = (),
    node: NodeTarget | None = None,
) -> dict[str, Any]:
    """A benchmark pod for ``role``, on ``node`` (default: nodeSelector on :data:`ROLE_LABEL`).

    Every pod has a :data:`TOOLS_CONTAINER` (client tools, idle until a command is executed)
    plus one container per workload, each with a TCP readiness probe, so a Ready pod accepts
    connections on every workload port.

    Raises
    ------
    cnibench.errors.ConfigError
        Two workloads on one port, or a workload without a configured image.
    """
    images = images or Images()
    ports = [w.port for w in workloads]
    if len(set(ports)) != len(ports):
        raise ConfigError(f"pod {name!r}: two workloads share a port ({ports})")
    containers: list[dict[str, Any]] = [
        {"name": TOOLS_CONTAINER, "image": images.tools, "command": ["sleep", "infinity"]}
    ]
    for workload in workloads:
        containers.extend(_workload_containers(workload, images))
    for container in containers:
        container["imagePullPolicy"] = pull_policy(container["image"])
    manifest = render_template(
        "workloads/pod.yaml",
        {
            "name": name,
            "namespace": namespace,
            "labels": session_labels(session, **{ENDPOINT_LABEL: name, ROLE_LABEL: role.value}),
            "node_selector": {},
            "tolerations": list(tolerations),
            "containers": containers,
        },
    )
    (node or NodeTarget.role(role)).place(manifest["spec"])
    return manifest


def capture_pod(
    name: str,
    *,
    namespace: str,
    session: str,
    role: NodeRole,
    images: Images | None = None,
    tolerations: Sequence[Mapping[str, Any]] = (),
    node: NodeTarget | None = None,
) -> dict[str, Any]:
    """A host-network pod for the ``role`` node, on ``node`` (default: by :data:`ROLE_LABEL`),
    whose tools container may capture packets (``NET_RAW``, ``NET_ADMIN``): it sees the
    node's interfaces, so tcpdump on the node's uplink sees what travels between nodes (see
    :mod:`cnibench.backends.kube.capture`)."""
    images = images or Images()
    manifest = render_template(
        "workloads/capture-pod.yaml",
        {
            "name": name,
            "namespace": namespace,
            "labels": session_labels(session, **{ROLE_LABEL: role.value}),
            "node_selector": {},
            "tolerations": list(tolerations),
            "container": TOOLS_CONTAINER,
            "image": images.tools,
        },
    )
    (node or NodeTarget.role(role)).place(manifest["spec"])
    return manifest


def network_policy(spec: PolicySpec, *, name: str, namespace: str, session: str) -> dict[str, Any]:
    """NetworkPolicy letting only ``spec.allowed`` reach ``spec.target`` on ``spec.ports``.

    The non-matching rules of ``spec.extra_rules`` become ingress rules before the matching
    one, from the same peers to the filler port ranges (:func:`cnibench.policy.filler_rules`).
    """
    from cnibench.policy import filler_rules

    peers = [{"podSelector": {"matchLabels": {ENDPOINT_LABEL: p.name}}} for p in spec.allowed]
    protocol = spec.protocol.value.upper()

    def port_entry(first: int, last: int) -> dict[str, Any]:
        entry: dict[str, Any] = {"protocol": protocol, "port": first}
        if last != first:
            entry["endPort"] = last
        return entry

    ingress = [
        {
            "from": [{"podSelector": {"matchLabels": {ENDPOINT_LABEL: peer.name}}}],
            "ports": [port_entry(ports.first, ports.last)],
        }
        for peer, ports in filler_rules(spec)
    ]
    ingress.append({"from": peers, "ports": [port_entry(p.first, p.last) for p in spec.ports]})
    return render_template(
        "policy/network-policy.yaml",
        {
            "name": name,
            "namespace": namespace,
            "labels": session_labels(session),
            "target_labels": {ENDPOINT_LABEL: spec.target.name},
            "ingress": ingress,
        },
    )


_POLICY_ACTIONS = ("allow", "deny", "pass")


def l4_ports(spec: PolicySpec) -> list[dict[str, Any]]:
    """``spec.ports`` as NetworkPolicy port entries (``protocol``, ``port``, ``endPort``)."""
    protocol = spec.protocol.value.upper()
    ports: list[dict[str, Any]] = []
    for port in spec.ports:
        entry: dict[str, Any] = {"protocol": protocol, "port": port.first}
        if port.last != port.first:
            entry["endPort"] = port.last
        ports.append(entry)
    return ports


def check_policy_action(action: str) -> str:
    """``action`` when it is ``allow``, ``deny`` or ``pass``.

    Raises
    ------
    cnibench.errors.ConfigError
        Any other action.
    """
    if action not in _POLICY_ACTIONS:
        raise ConfigError(f"policy action {action!r}: choose {', '.join(_POLICY_ACTIONS)}")
    return action


def deny_all_ingress(target: str, *, name: str, namespace: str, session: str) -> dict[str, Any]:
    """NetworkPolicy selecting pod ``target`` with no ingress rule: all ingress is denied."""
    return render_template(
        "policy/network-policy.yaml",
        {
            "name": name,
            "namespace": namespace,
            "labels": session_labels(session),
            "target_labels": {ENDPOINT_LABEL: target},
            "ingress": [],
        },
    )


def l7_values(name: str, namespace: str, session: str, target: str, path: str) -> dict[str, Any]:
    """Template values every L7 policy shares, once ``path`` is known to be absolute."""
    if not path.startswith("/"):
        raise ConfigError(f"L7 policy path {path!r} must start with '/'")
    return {
        "name": name,
        "namespace": namespace,
        "labels": session_labels(session),
        "target_labels": {ENDPOINT_LABEL: target},
    }


def service(
    name: str,
    *,
    namespace: str,
    session: str,
    endpoint: str,
    ports: Sequence[Mapping[str, Any]],
    node_port: bool = False,
) -> dict[str, Any]:
    """A Service selecting the pod ``endpoint`` (the baseline's ``service``/``nodeport``
    targets, and the further Services loaded beside it): ``ports`` are ServicePort objects
    (``name``, ``port``, ``targetPort``, ``protocol``, optionally ``nodePort``); type NodePort
    when ``node_port``, else ClusterIP."""
    return render_template(
        "workloads/service.yaml",
        {
            "name": name,
            "namespace": namespace,
            "labels": session_labels(session),
            "type": "NodePort" if node_port else "ClusterIP",
            "selector": {ENDPOINT_LABEL: endpoint},
            "ports": [dict(port) for port in ports],
        },
    )


def split_service(
    name: str, *, namespace: str, session: str, endpoint: str, port: int
) -> dict[str, Any]:
    """ClusterIP Service selecting one split backend pod (HTTPRoute refs point at Services)."""
    return render_template(
        "split/service.yaml",
        {
            "name": name,
            "namespace": namespace,
            "labels": session_labels(session),
            "selector": {ENDPOINT_LABEL: endpoint},
            "port": port,
        },
    )


def gateway(
    name: str, *, namespace: str, session: str, gateway_class: str, port: int = 80
) -> dict[str, Any]:
    """Gateway (``gateway.networking.k8s.io/v1``) with one HTTP listener."""
    return render_template(
        "split/gateway.yaml",
        {
            "name": name,
            "namespace": namespace,
            "labels": session_labels(session),
            "gateway_class": gateway_class,
            "port": port,
        },
    )


def http_route(
    name: str,
    *,
    namespace: str,
    session: str,
    gateway_name: str,
    backends: Mapping[str, tuple[int, int]],
) -> dict[str, Any]:
    """HTTPRoute splitting by weight: ``backends`` maps a Service name to ``(port, weight)``.

    Raises
    ------
    cnibench.errors.ConfigError
        No backend, a negative weight, or all weights zero.
    """
    if not backends:
        raise ConfigError("a traffic split needs at least one backend")
    bad = {n: w for n, (_, w) in backends.items() if w < 0}
    if bad:
        raise ConfigError(f"split weights must be >= 0, got {bad}")
    if not any(w for _, w in backends.values()):
        raise ConfigError("split weights are all zero")
    refs = [{"name": n, "port": p, "weight": w} for n, (p, w) in backends.items()]
    return render_template(
        "split/http-route.yaml",
        {
            "name": name,
            "namespace": namespace,
            "labels": session_labels(session),
            "gateway": gateway_name,
            "backend_refs": refs,
        },
    )


def prometheus_config(
    *,
    namespace: str,
    scrape_interval: float = 1.0,
    node_addresses: Mapping[str, str] | None = None,
) -> str:
    """``prometheus.yml`` scraping the node-exporters, each target's ``instance`` set to its
    node's name (so queries group by node).

    Parameters
    ----------
    scrape_interval:
        Seconds between scrapes; short, so ``irate(...[5s])`` has data within seconds.
    node_addresses:
        Node name -> address: static targets on :data:`NODE_EXPORTER_PORT` (node-exporter runs
        in the host network), which every Prometheus build understands; Debian's, which the
        offline image set uses, has no Kubernetes service discovery. ``None``: the
        node-exporter pods of ``namespace`` found through the API.
    """
    if not 0.1 <= scrape_interval <= 60:
        raise ConfigError(f"scrape interval {scrape_interval} s is outside 0.1..60 s")
    interval = f"{round(scrape_interval * 1000)}ms"
    if node_addresses is not None:
        static = {
            "global": {"scrape_interval": interval, "evaluation_interval": interval},
            "scrape_configs": [
                {
                    "job_name": "node-exporter",
                    "static_configs": [
                        {
                            "targets": [_host_port(address, NODE_EXPORTER_PORT)],
                            "labels": {"instance": name},
                        }
                        for name, address in sorted(node_addresses.items())
                    ],
                }
            ],
        }
        return yaml.safe_dump(static, sort_keys=False)
    config = {
        "global": {"scrape_interval": interval, "evaluation_interval": interval},
        "scrape_configs": [
            {
                "job_name": "node-exporter",
                "kubernetes_sd_configs": [{"role": "pod", "namespaces": {"names": [namespace]}}],
                "relabel_configs": [
                    {
                        "source_labels": ["__meta_kubernetes_pod_label_app_kubernetes_io_name"],
                        "regex": "node-exporter",
                        "action": "keep",
                    },
                    {
                        "source_labels": ["__meta_kubernetes_pod_node_name"],
                        "target_label": "instance",
                    },
                ],
            }
        ],
    }
    return yaml.safe_dump(config, sort_keys=False)


def _host_port(address: str, port: int) -> str:
    return f"[{address}]:{port}" if ":" in address else f"{address}:{port}"


def monitoring_manifests(
    *,
    namespace: str,
    session: str,
    images: Images | None = None,
    scrape_interval: float = 1.0,
    prometheus_role: NodeRole = NodeRole.SERVER,
    tolerations: Sequence[Mapping[str, Any]] = (),
    node_addresses: Mapping[str, str] | None = None,
    prometheus_node: NodeTarget | None = None,
) -> list[dict[str, Any]]:
    """Prometheus (Deployment + RBAC + config) and node-exporter (DaemonSet) in ``namespace``.

    Cluster-scoped RBAC objects are named after ``namespace`` so sessions never collide.
    ``node_addresses`` (node name -> address) makes the targets static (see
    :func:`prometheus_config`) and runs node-exporter on those nodes only: on a cluster
    cnibench did not create, nodes no role holds get nothing (nor its host port). Prometheus
    runs on ``prometheus_node`` (default: the node labelled ``prometheus_role``).
    """
    images = images or Images()
    labels = session_labels(session)
    prom = {"app.kubernetes.io/name": "prometheus", SESSION_LABEL: session}
    exporter = {"app.kubernetes.io/name": "node-exporter", SESSION_LABEL: session}
    rbac_name = f"{namespace}-prometheus"
    exporters = render_template(
        "monitoring/node-exporter.yaml",
        {
            "name": "node-exporter",
            "namespace": namespace,
            "labels": labels,
            "selector": exporter,
            "pod_labels": {**labels, **exporter},
            "image": images.node_exporter,
            "port": NODE_EXPORTER_PORT,
            "listen_argument": f"--web.listen-address=:{NODE_EXPORTER_PORT}",
        },
    )
    if node_addresses:
        # By name (a field every node has), as the DaemonSet controller itself pins its pods;
        # a field selector takes one value, so one term per node (terms are ORed).
        terms = [
            {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [name]}]}
            for name in sorted(node_addresses)
        ]
        exporters["spec"]["template"]["spec"]["affinity"] = {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": terms}
            }
        }
    return [
        render_template(
            "monitoring/service-account.yaml",
            {"name": "prometheus", "namespace": namespace, "labels": labels},
        ),
        render_template("monitoring/cluster-role.yaml", {"name": rbac_name, "labels": labels}),
        render_template(
            "monitoring/cluster-role-binding.yaml",
            {
                "name": rbac_name,
                "labels": labels,
                "service_account": "prometheus",
                "namespace": namespace,
            },
        ),
        render_template(
            "monitoring/prometheus-config.yaml",
            {
                "name": "prometheus",
                "namespace": namespace,
                "labels": labels,
                "config": prometheus_config(
                    namespace=namespace,
                    scrape_interval=scrape_interval,
                    node_addresses=node_addresses,
                ),
            },
        ),
        _placed_deployment(
            render_template(
                "monitoring/prometheus.yaml",
                {
                    "name": "prometheus",
                    "namespace": namespace,
                    "labels": labels,
                    "selector": prom,
                    "pod_labels": {**labels, **prom},
                    "service_account": "prometheus",
                    "node_selector": {},
                    "tolerations": list(tolerations),
                    "image": images.prometheus,
                    "port": PROMETHEUS_PORT,
                    "listen_argument": f"--web.listen-address=:{PROMETHEUS_PORT}",
                    "config_map": "prometheus",
                },
            ),
            prometheus_node or NodeTarget.role(prometheus_role),
        ),
        exporters,
    ]


def _placed_deployment(deployment: dict[str, Any], node: NodeTarget) -> dict[str, Any]:
    """``deployment`` with its pods pinned to ``node``."""
    node.place(deployment["spec"]["template"]["spec"])
    return deployment


def kind_cluster_config(
    name: str, spec: ClusterSpec, cni: CniDefinition, *, images: Images | None = None
) -> dict[str, Any]:
    """kind ``Cluster`` config: one control plane plus one worker per role in ``spec.roles``,
    each worker labelled ``cnibench.io/role=<role>``; the default CNI off unless the CNI is
    kindnet, kube-proxy off when the CNI replaces it, else in the mode of the ``kube-proxy``
    option (kind's default, iptables, without it); every node on the pinned image."""
    images = images or Images()
    networking: dict[str, Any] = {"podSubnet": cni.pod_subnet}
    if cni.disable_default_cni:
        networking["disableDefaultCNI"] = True
    if cni.replaces_kube_proxy:
        networking["kubeProxyMode"] = "none"
    elif "kube-proxy" in spec.options:
        networking["kubeProxyMode"] = spec.options["kube-proxy"]
    nodes: list[dict[str, Any]] = [{"role": "control-plane", "image": images.kind_node}]
    nodes.extend(
        {"role": "worker", "image": images.kind_node, "labels": {ROLE_LABEL: role.value}}
        for role in spec.roles
    )
    return render_template(
        "kind/cluster.yaml", {"name": name, "networking": networking, "nodes": nodes}
    )


def metallb_ip_address_pool(
    name: str, *, namespace: str, address_range: tuple[str, str]
) -> dict[str, Any]:
    """MetalLB ``IPAddressPool`` (``metallb.io/v1beta1``) of one ``first-last`` IPv4 range.

    Parameters
    ----------
    name:
        Pool name.
    namespace:
        MetalLB's namespace (``metallb-system``); the controller reads pools only there.
    address_range:
        ``(first, last)`` IPv4 addresses, ``first <= last``.

    Raises
    ------
    cnibench.errors.ConfigError
        The range is not two IPv4 addresses in order: MetalLB checks addresses only in its
        webhook, so a bad range would otherwise surface as a cryptic admission error.
    """
    import ipaddress

    first_text, last_text = address_range
    try:
        first = ipaddress.IPv4Address(first_text)
        last = ipaddress.IPv4Address(last_text)
    except ValueError:
        raise ConfigError(
            f"MetalLB address range {first_text}-{last_text} is not two IPv4 addresses"
        ) from None
    if first > last:
        raise ConfigError(f"MetalLB address range {first}-{last} is empty (first > last)")
    return render_template(
        "metallb/ip-address-pool.yaml",
        {
            "name": name,
            "namespace": namespace,
            "labels": dict(MANAGED_BY),
            "addresses": [f"{first}-{last}"],
        },
    )


def metallb_l2_advertisement(name: str, *, namespace: str, pools: Sequence[str]) -> dict[str, Any]:
    """MetalLB ``L2Advertisement`` announcing the addresses of ``pools`` over ARP.

    Raises
    ------
    cnibench.errors.ConfigError
        ``pools`` is empty (an empty list would announce every pool, not none).
    """
    if not pools:
        raise ConfigError("an L2Advertisement needs at least one IPAddressPool")
    return render_template(
        "metallb/l2-advertisement.yaml",
        {
            "name": name,
            "namespace": namespace,
            "labels": dict(MANAGED_BY),
            "pools": list(pools),
        },
    )
