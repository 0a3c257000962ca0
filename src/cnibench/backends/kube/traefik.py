"""Traefik as the Gateway API implementation of any CNI: ``--cni X:gateway=traefik``.

The CNIs cnibench can build offline bring no Gateway API implementation (Cilium's needs Envoy),
and the Envoy-based ones cannot be built here; Traefik is one written in Go, built from its
module (``cnibench images build --gateway traefik``). It runs as one Deployment in the host
network of the ``egress-gw`` node (idle in the split scenario, so the gateway's CPU is that
node's own), with the Kubernetes Gateway provider on and one entry point on port
:data:`ENTRYPOINT_PORT`, which a Gateway listener of the same port binds to. Traefik writes its
node's address into each Gateway's status (``statusAddress.ip`` from the pod's host IP), so
the split scenario's load generator on this host reaches the Gateway at ``http://<node>/``
without a LoadBalancer.

The objects are written here from Traefik's documentation (the Kubernetes Gateway provider's
options and its RBAC reference), not copied. They carry
:data:`~cnibench.backends.kube.render.MANAGED_BY` and no session label: the gateway belongs to
the cluster, like the CNI.
"""

from __future__ import annotations

import re
from typing import Any

from cnibench.backends.base import NodeRole
from cnibench.backends.kube.render import MANAGED_BY, ROLE_LABEL, service_account_rbac

__all__ = [
    "CONTROLLER",
    "ENTRYPOINT_PORT",
    "GATEWAY_CLASS",
    "GATEWAY_OPTION",
    "NAMESPACE",
    "traefik_args",
    "traefik_manifests",
]

GATEWAY_OPTION = "traefik"
"""The value of the ``gateway`` cluster option that installs Traefik."""
NAMESPACE = "traefik"
DEPLOYMENT = "traefik"
GATEWAY_CLASS = "traefik"
CONTROLLER = "traefik.io/gateway-controller"
"""The ``controllerName`` Traefik's Gateway provider serves."""
ENTRYPOINT_PORT = 80
"""Port of Traefik's ``web`` entry point in the node's network; a Gateway listener on this
port is served by it (the split Gateway's listener is on 80)."""
PING_PORT = 8082
"""Port of the ``ping`` entry point the readiness probe asks."""
NODE_ROLE = NodeRole.EGRESS_GW
_LABELS = {"app.kubernetes.io/name": "traefik"}
SELECTOR = "app.kubernetes.io/name=traefik"
"""Label selector of Traefik's pods (``cpu@traefik``, ``ram@traefik``)."""
_GATEWAY_RESOURCES = (
    "gatewayclasses",
    "gateways",
    "httproutes",
    "grpcroutes",
    "referencegrants",
    "backendtlspolicies",
)


def traefik_args() -> list[str]:
    """Traefik's static configuration as flags: the Gateway provider (standard channel only),
    the ``web`` and ``ping`` entry points, the node's address as every Gateway's status
    address (``$(HOST_IP)``, expanded by the kubelet), no dashboard, access logs off."""
    return [
        f"--entryPoints.web.address=:{ENTRYPOINT_PORT}",
        f"--entryPoints.ping.address=:{PING_PORT}",
        "--ping.entryPoint=ping",
        "--providers.kubernetesGateway=true",
        "--providers.kubernetesGateway.statusAddress.ip=$(HOST_IP)",
        "--api=false",
        "--log.level=INFO",
        "--global.checkNewVersion=false",
        "--global.sendAnonymousUsage=false",
    ]


def image_version(image: str) -> str:
    """The Traefik release an image tag names (``...:v3.6.12-offline-1`` -> ``v3.6.12``)."""
    match = re.search(r":(v\d+\.\d+\.\d+)", image)
    return match.group(1) if match else ""


def _meta(name: str, *, namespaced: bool = True) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "labels": {**MANAGED_BY, **_LABELS}}
    if namespaced:
        meta["namespace"] = NAMESPACE
    return meta


def _rbac() -> list[dict[str, Any]]:
    read = ["get", "list", "watch"]
    return service_account_rbac(
        service_account="traefik",
        namespace=NAMESPACE,
        cluster_role="cnibench-traefik",
        labels=_meta("traefik")["labels"],
        rules=[
            {"apiGroups": [""], "resources": ["namespaces"], "verbs": ["list", "watch"]},
            {"apiGroups": [""], "resources": ["services", "secrets", "configmaps"], "verbs": read},
            {
                "apiGroups": ["discovery.k8s.io"],
                "resources": ["endpointslices"],
                "verbs": ["list", "watch"],
            },
            {
                "apiGroups": ["gateway.networking.k8s.io"],
                "resources": list(_GATEWAY_RESOURCES),
                "verbs": read,
            },
            {
                "apiGroups": ["gateway.networking.k8s.io"],
                "resources": [f"{r}/status" for r in _GATEWAY_RESOURCES],
                "verbs": ["update"],
            },
        ],
    )


def _deployment(image: str) -> dict[str, Any]:
    container = {
        "name": "traefik",
        "image": image,
        "args": traefik_args(),
        "env": [{"name": "HOST_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.hostIP"}}}],
        "ports": [
            {"name": "web", "containerPort": ENTRYPOINT_PORT},
            {"name": "ping", "containerPort": PING_PORT},
        ],
        "readinessProbe": {
            "httpGet": {"path": "/ping", "port": PING_PORT},
            "periodSeconds": 2,
        },
        "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}},
        # Port 80 in the node's network.
        "securityContext": {"capabilities": {"add": ["NET_BIND_SERVICE"]}},
    }
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": _meta(DEPLOYMENT),
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": dict(_LABELS)},
            "template": {
                "metadata": {"labels": {**MANAGED_BY, **_LABELS}},
                "spec": {
                    "serviceAccountName": "traefik",
                    "hostNetwork": True,
                    "dnsPolicy": "ClusterFirstWithHostNet",
                    "nodeSelector": {ROLE_LABEL: NODE_ROLE.value},
                    "tolerations": [{"operator": "Exists"}],
                    "containers": [container],
                },
            },
        },
    }


def traefik_manifests(image: str) -> list[dict[str, Any]]:
    """Namespace ``traefik``, its RBAC, GatewayClass ``traefik`` and the Deployment running
    ``image``, in apply order (the Gateway API CRDs must be Established before)."""
    return [
        {
            "apiVersion": "v1",
            "kind": "Namespace",
            "metadata": {
                "name": NAMESPACE,
                "labels": {
                    **MANAGED_BY,
                    **_LABELS,
                    # Host network: privileged pods in this namespace.
                    "pod-security.kubernetes.io/enforce": "privileged",
                },
            },
        },
        *_rbac(),
        {
            "apiVersion": "gateway.networking.k8s.io/v1",
            "kind": "GatewayClass",
            "metadata": _meta(GATEWAY_CLASS, namespaced=False),
            "spec": {"controllerName": CONTROLLER},
        },
        _deployment(image),
    ]
