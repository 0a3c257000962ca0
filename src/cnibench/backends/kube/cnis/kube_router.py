"""kube-router, rendered by cnibench as Kubernetes objects: pod routing over BGP between the
nodes and NetworkPolicy enforced with iptables and ipsets. kube-proxy stays (kube-router's own
service proxy needs IPVS, which kernels like this one lack), so ``--run-service-proxy=false``.

One DaemonSet, ``kube-system/kube-router``, host network, privileged. Pods are wired by the
reference ``bridge`` plugin (bridge ``kube-bridge``, the node's default gateway for its pods)
with ``host-local`` addresses: an init container puts :func:`conflist` into the node's CNI
directory, and kube-router inserts the node's ``spec.podCIDR`` into its IPAM ranges and the
MTU of the node's interface (what its routing controller does with
``KUBE_ROUTER_CNI_CONF_FILE``). The pod is ready once that range is in the file, so pods
scheduled after readiness get addresses. All kind nodes share one L2 network, so the routes
BGP learns are direct and no overlay is needed (``--enable-overlay=false``).

The objects are written here from kube-router's documentation (its user guide and the flags of
``kube-router --help``), not copied from its release manifests. They carry
:data:`~cnibench.backends.kube.render.MANAGED_BY` but no session label: the CNI belongs to the
cluster. The offline image set builds :data:`OFFLINE_VERSION`, the only release the Go module
proxy serves, which has reported security flaws: run it in throwaway kind clusters only. The
public set pins :data:`VERSION`.
"""

from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cnibench.backends.base import Capability
from cnibench.backends.kube.build_recipes import PATH_ENV, GoBuild, ImageRecipe, OfflineRecipe
from cnibench.backends.kube.cni_types import Agent, CniDefinition, Readiness, check_options
from cnibench.backends.kube.cnis.base import DriverBase
from cnibench.backends.kube.images import CniImage
from cnibench.backends.kube.render import MANAGED_BY, service_account_rbac
from cnibench.errors import UnsupportedError

if TYPE_CHECKING:
    from cnibench.backends.base import ClusterSpec
    from cnibench.backends.kube.cni_types import CniVersions
    from cnibench.backends.kube.images import Images

__all__ = [
    "AGENT_SELECTOR",
    "ARGS",
    "CONFLIST_PATH",
    "IMAGE",
    "KUBE_ROUTER",
    "KUBE_ROUTER_MODULE",
    "KUBE_ROUTER_OFFLINE",
    "OFFLINE_VERSION",
    "VERSION",
    "KubeRouterDriver",
    "conflist",
    "image_version",
    "kube_router_go_mod",
    "kube_router_image",
]

VERSION = "v2.6.1"
"""The pinned kube-router release (public image set), referenced by public installs."""
OFFLINE_VERSION = "v2.1.0"
"""``github.com/cloudnativelabs/kube-router/v2`` release the offline image set builds: the only
one the Go module proxy serves. Security flaws are reported for it, so it runs in throwaway
kind clusters only."""
KUBE_ROUTER_MODULE = "github.com/cloudnativelabs/kube-router/v2"
IMAGE = CniImage(
    "kube_router",
    public=f"docker.io/cloudnativelabs/kube-router:{VERSION}",
    offline=f"localhost/cnibench-kube-router:{OFFLINE_VERSION}-offline-1",
)
"""kube-router (``kube-router`` on PATH, with iptables, ipset and iproute2): the release image
of :data:`VERSION`, or the offline build of :data:`OFFLINE_VERSION`
(:data:`KUBE_ROUTER_OFFLINE`); ``CNIBENCH_IMAGE_KUBE_ROUTER`` overrides it."""

NAMESPACE = "kube-system"
DAEMONSET = "kube-router"
SERVICE_ACCOUNT = "kube-router"
CLUSTER_ROLE = "kube-router"
CONFIG_MAP = "kube-router-cni"
CNI_CONF_DIR = "/etc/cni/net.d"
CONFLIST_PATH = f"{CNI_CONF_DIR}/10-kuberouter.conflist"
"""Sorts before other CNI configs a node may hold (the runtime uses the first)."""
POD_LABELS = {"k8s-app": "kube-router", "tier": "node"}
AGENT_SELECTOR = "k8s-app=kube-router"
"""Label selector of the agent pods (their CPU and memory are the CNI's own)."""
HEALTH_PORT = 20244
ARGS = (
    "--run-router=true",
    "--run-firewall=true",
    "--run-service-proxy=false",
    "--enable-overlay=false",
    "--bgp-graceful-restart=true",
    f"--health-port={HEALTH_PORT}",
)
"""kube-router's flags: routing and NetworkPolicy on, its IPVS service proxy off, no tunnels
(kind's nodes share one L2 network)."""
L7_POLICY_HINT = "kube-router enforces NetworkPolicy at L3/L4 only"
TRAFFIC_SPLIT_HINT = (
    "kube-router brings no Gateway API implementation: add one with"
    " --cni kube-router:gateway=traefik"
)
_INSTALL_CNI = f"""\
set -eu
if [ ! -f {CONFLIST_PATH} ]; then
    cp /etc/kube-router/conflist.json {CONFLIST_PATH}.tmp
    mv -f {CONFLIST_PATH}.tmp {CONFLIST_PATH}
fi
"""
"""The init container's script: the template into place, atomically, unless kube-router has
already filled it in on an earlier start."""


def conflist() -> str:
    """The CNI conflist kube-router completes: ``bridge`` on ``kube-bridge`` (gateway and
    default route of the node's pods, hairpin on) with ``host-local`` IPAM whose ranges
    kube-router fills with the node's pod CIDR, then ``portmap``."""
    return json.dumps(
        {
            "cniVersion": "0.3.1",
            "name": "kubernetes",
            "plugins": [
                {
                    "type": "bridge",
                    "name": "kubernetes",
                    "bridge": "kube-bridge",
                    "isDefaultGateway": True,
                    "hairpinMode": True,
                    "ipam": {"type": "host-local"},
                },
                {"type": "portmap", "capabilities": {"portMappings": True}, "snat": True},
            ],
        },
        indent=2,
    )


def image_version(image: str, default: str) -> str:
    """The release an image runs, from its tag (``...:v1.2.3-offline-1`` -> ``v1.2.3``), else
    ``default``: the offline set builds another release than the public set pins."""
    match = re.search(r":(v\d+\.\d+\.\d+)", image)
    return match.group(1) if match else default


def _labels(**extra: str) -> dict[str, str]:
    return {**MANAGED_BY, **extra}


def _rbac() -> list[dict[str, Any]]:
    read = ["get", "list", "watch"]
    return service_account_rbac(
        service_account=SERVICE_ACCOUNT,
        namespace=NAMESPACE,
        cluster_role=CLUSTER_ROLE,
        labels=_labels(),
        rules=[
            # Routes from nodes' pod CIDRs; policies select pods and namespaces.
            {
                "apiGroups": [""],
                "resources": ["namespaces", "pods", "services", "nodes", "endpoints"],
                "verbs": read,
            },
            {"apiGroups": ["networking.k8s.io"], "resources": ["networkpolicies"], "verbs": read},
            {"apiGroups": ["discovery.k8s.io"], "resources": ["endpointslices"], "verbs": read},
            {
                "apiGroups": ["coordination.k8s.io"],
                "resources": ["leases"],
                "verbs": ["get", "create", "update"],
            },
            {"apiGroups": [""], "resources": ["services/status"], "verbs": ["update"]},
        ],
    )


def _config_map() -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": CONFIG_MAP, "namespace": NAMESPACE, "labels": _labels(**POD_LABELS)},
        "data": {"conflist.json": conflist()},
    }


def _daemon_set(image: str) -> dict[str, Any]:
    field = {"name": "NODE_NAME", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}}
    cni_mount = {"name": "cni", "mountPath": CNI_CONF_DIR}
    container = {
        "name": "kube-router",
        "image": image,
        "args": list(ARGS),
        "env": [field, {"name": "KUBE_ROUTER_CNI_CONF_FILE", "value": CONFLIST_PATH}],
        "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}},
        # Routes, the bridge, iptables and ipsets of the node.
        "securityContext": {"privileged": True},
        "livenessProbe": {
            "httpGet": {"path": "/healthz", "port": HEALTH_PORT},
            "initialDelaySeconds": 10,
            "periodSeconds": 5,
        },
        # Ready once the node's pod CIDR is in the conflist: a pod scheduled after readiness
        # gets an address.
        "readinessProbe": {
            "exec": {"command": ["/bin/sh", "-c", f"grep -q '\"subnet\"' {CONFLIST_PATH}"]},
            "periodSeconds": 2,
        },
        "volumeMounts": [
            cni_mount,
            {"name": "lib-modules", "mountPath": "/lib/modules", "readOnly": True},
            # iptables here and in kube-proxy share one lock.
            {"name": "xtables-lock", "mountPath": "/run/xtables.lock"},
        ],
    }
    init = {
        "name": "install-cni",
        "image": image,
        "command": ["/bin/sh", "-c", _INSTALL_CNI],
        "volumeMounts": [cni_mount, {"name": "template", "mountPath": "/etc/kube-router"}],
    }
    return {
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": {"name": DAEMONSET, "namespace": NAMESPACE, "labels": _labels(**POD_LABELS)},
        "spec": {
            "selector": {"matchLabels": dict(POD_LABELS)},
            "template": {
                "metadata": {"labels": _labels(**POD_LABELS)},
                "spec": {
                    "hostNetwork": True,
                    "hostPID": True,
                    "priorityClassName": "system-node-critical",
                    "serviceAccountName": SERVICE_ACCOUNT,
                    # Every node needs pod networking, whatever its taints.
                    "tolerations": [{"operator": "Exists"}],
                    "nodeSelector": {"kubernetes.io/os": "linux"},
                    "initContainers": [init],
                    "containers": [container],
                    "volumes": [
                        {"name": "cni", "hostPath": {"path": CNI_CONF_DIR}},
                        {"name": "lib-modules", "hostPath": {"path": "/lib/modules"}},
                        {
                            "name": "xtables-lock",
                            "hostPath": {"path": "/run/xtables.lock", "type": "FileOrCreate"},
                        },
                        {"name": "template", "configMap": {"name": CONFIG_MAP}},
                    ],
                },
            },
        },
    }


# -- the offline build ---------------------------------------------------------------------

_KUBE_ROUTER_RECIPE = "kube-router-1"
"""Bumped when the way kube-router is built changes without its version changing."""


def kube_router_go_mod(version: str) -> str:
    """go.mod of the wrapper module that builds kube-router (its go.mod replaces nothing, so
    the wrapper only requires it; the build completes go.mod and go.sum itself)."""
    return "\n".join(
        [
            "module cnibench.local/kube-router",
            "",
            "go 1.24.0",
            "",
            f"require {KUBE_ROUTER_MODULE} {version}",
            "",
        ]
    )


def _wrapper(version: str, module: Path | None) -> dict[str, str]:
    return {
        "go.mod": kube_router_go_mod(version),
        "doc.go": "// Package kuberouter only holds the go.mod that builds kube-router.\n"
        "package kuberouter\n",
    }


def kube_router_image(tag: str) -> ImageRecipe:
    """kube-router on its own root filesystem: it programs iptables (Debian's default backend,
    as kube-proxy's image) and ipsets for NetworkPolicy, and routes and the bridge for pod
    routing."""
    return ImageRecipe(
        tag=tag,
        rootfs="kube-router",
        files={"/usr/local/bin/kube-router": "kube-router"},
        entrypoint=("/usr/local/bin/kube-router",),
        env=PATH_ENV,
    )


def _offline(version: str) -> OfflineRecipe:
    package = f"{KUBE_ROUTER_MODULE}/cmd/kube-router"
    return OfflineRecipe(
        version=version,
        # A main package of a dependency: -mod=mod (the Go environment's) completes
        # go.mod/go.sum.
        build=GoBuild(
            module=KUBE_ROUTER_MODULE,
            packages=(package,),
            flags=("-trimpath", "-ldflags", "-s -w"),
            wrapper=_wrapper,
            digest_inputs=(_KUBE_ROUTER_RECIPE, version, package),
        ),
        image=kube_router_image,
        image_name=IMAGE.name,
        rootfs={"kube-router": ("iptables", "ipset", "nftables", "conntrack", "iproute2", "kmod")},
        recipe="kube-router",
        build_minutes=3,
    )


KUBE_ROUTER_OFFLINE = _offline(OFFLINE_VERSION)
"""kube-router's offline recipe (built only when asked: ``--cni kube-router``)."""


class KubeRouterDriver(DriverBase):
    """kube-router as a :class:`~cnibench.backends.kube.cnis.CniDriver`: BGP routing and
    NetworkPolicy, kube-proxy kept, no encryption, installed from :meth:`manifests`."""

    name = "kube-router"
    version = VERSION
    own_images = (IMAGE,)
    offline = KUBE_ROUTER_OFFLINE

    def definition(
        self,
        spec: ClusterSpec,
        *,
        versions: CniVersions,
        images: Images,
        k8s_service_host: str = "",
    ) -> CniDefinition:
        """kube-router's definition: NetworkPolicy, readiness of ``kube-system/kube-router``,
        its objects in :attr:`~cnibench.backends.kube.cni.CniDefinition.manifests`, and the
        release its image (:data:`IMAGE` as ``images`` has it) runs as its version.

        Raises
        ------
        cnibench.errors.ConfigError
            Any cluster option.
        cnibench.errors.UnsupportedError
            WireGuard encryption: kube-router has none (the condition is skipped).
        """
        check_options(spec)
        if spec.encryption:
            raise UnsupportedError(
                "--cni kube-router cannot encrypt with WireGuard: it has no encryption"
            )
        base = CniDefinition(
            name=self.name,
            version=image_version(
                images.cni_image(IMAGE), versions.version(self.name, self.version)
            ),
            capabilities=frozenset({Capability.NETWORK_POLICY}),
            readiness=(Readiness("DaemonSet", NAMESPACE, DAEMONSET),),
            agent=Agent("kube-router", NAMESPACE, AGENT_SELECTOR),
            capability_hints={
                Capability.L7_POLICY: L7_POLICY_HINT,
                Capability.TRAFFIC_SPLIT: TRAFFIC_SPLIT_HINT,
            },
        )
        return dataclasses.replace(base, manifests=tuple(self.manifests(base, images)))

    def manifests(self, definition: CniDefinition, images: Images) -> list[dict[str, Any]]:
        """ServiceAccount, ClusterRole and ClusterRoleBinding ``kube-router``, ConfigMap
        ``kube-router-cni`` (the conflist template) and DaemonSet ``kube-router`` running
        :data:`IMAGE` as ``images`` has it, in that order."""
        return [*_rbac(), _config_map(), _daemon_set(images.cni_image(IMAGE))]


KUBE_ROUTER = KubeRouterDriver()
"""The driver registered in :data:`cnibench.backends.kube.cnis.DRIVERS`."""
