"""Cilium: installed from its Helm chart, in the two set-ups seed 001 compares.

Options of ``--cni cilium``: ``mode`` (``kpr``, the default: eBPF kube-proxy replacement with
kind's ``kubeProxyMode: none``; or ``kube-proxy``, iptables kube-proxy kept) and ``features``
(comma-separated subset of :data:`CILIUM_FEATURES`; default ``egress-gateway,l7`` with
``kpr`` and ``l7`` with kube-proxy, since the egress gateway and Gateway API need kube-proxy
replacement). ``gateway-api`` needs the Gateway API CRDs installed *before* Cilium
(:attr:`~cnibench.backends.kube.cni.CniDefinition.gateway_api_crds`): cilium-operator looks
for them once at start and otherwise leaves Gateway API off.

With the offline image set (``CNIBENCH_IMAGES=offline``, or ``CNIBENCH_IMAGE_CILIUM`` set)
the chart is the one inside Cilium's Go module (``install/kubernetes/cilium`` in the module
cache, where ``cnibench images build --cni cilium`` put it) and every Cilium image is the one
built from that module. That build has no Envoy, so L7 policy and traffic splitting (the
``l7`` and ``gateway-api`` features) are not offered.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cnibench.backends.base import Capability
from cnibench.backends.kube.cni import (
    CniDefinition,
    HelmChart,
    Readiness,
    check_options,
    features_option,
)
from cnibench.errors import ConfigError

if TYPE_CHECKING:
    from cnibench.backends.base import ClusterSpec
    from cnibench.backends.kube.cni import CniVersions
    from cnibench.backends.kube.images import Images

__all__ = [
    "CHART_CAPABILITIES",
    "CILIUM",
    "CILIUM_FEATURES",
    "CILIUM_MODES",
    "CiliumDriver",
    "cilium_values",
]

CILIUM_MODES = ("kpr", "kube-proxy")
CILIUM_FEATURES = ("egress-gateway", "gateway-api", "l7")
_NEEDS_KPR = frozenset({"egress-gateway", "gateway-api"})
_NEEDS_ENVOY = frozenset({"gateway-api", "l7"})

CHART_CAPABILITIES = {
    "ciliumAgent": (
        "CHOWN",
        "KILL",
        "NET_ADMIN",
        "NET_RAW",
        "IPC_LOCK",
        "SYS_MODULE",
        "SYS_ADMIN",
        "SYS_RESOURCE",
        "DAC_OVERRIDE",
        "FOWNER",
        "SETGID",
        "SETUID",
    ),
    "cleanCiliumState": ("NET_ADMIN", "SYS_MODULE", "SYS_ADMIN", "SYS_RESOURCE"),
}
"""``securityContext.capabilities`` defaults of the Cilium 1.18.4 chart
(``install/kubernetes/cilium/values.yaml`` of the Go module) for the containers that ask for
``SYS_RESOURCE``."""


def _features(spec: ClusterSpec, mode: str, *, envoy: bool) -> frozenset[str]:
    features = features_option(spec, CILIUM_FEATURES)
    if features is None:
        defaults = {"egress-gateway", "l7"} if mode == "kpr" else {"l7"}
        return frozenset(defaults if envoy else defaults - _NEEDS_ENVOY)
    needs_kpr = sorted(features & _NEEDS_KPR)
    if mode != "kpr" and needs_kpr:
        raise ConfigError(
            f"cilium feature {', '.join(needs_kpr)} needs mode=kpr (kube-proxy replacement)"
        )
    needs_envoy = sorted(features & _NEEDS_ENVOY)
    if not envoy and needs_envoy:
        raise ConfigError(
            f"cilium feature {', '.join(needs_envoy)} needs Envoy, which the offline image set"
            " does not build"
        )
    return features


def _without_sys_resource() -> dict[str, list[str]]:
    return {
        container: [cap for cap in caps if cap != "SYS_RESOURCE"]
        for container, caps in CHART_CAPABILITIES.items()
    }


def _offline_values(image: str) -> dict[str, Any]:
    """Every Cilium image is ``image`` (never pulled), and what would need another image is
    off: Envoy, Hubble, node-init, pre-flight, the clustermesh API server, SPIRE."""
    own = {"override": image, "pullPolicy": "Never", "useDigest": False}
    return {
        "image": dict(own),
        "operator": {"image": dict(own)},
        "certgen": {"image": {"override": image, "pullPolicy": "Never"}},
        "envoy": {"enabled": False},
        "l7Proxy": False,
        "hubble": {"enabled": False, "relay": {"enabled": False}, "ui": {"enabled": False}},
        "nodeinit": {"enabled": False},
        "preflight": {"enabled": False},
        "clustermesh": {"useAPIServer": False},
        "authentication": {"mutual": {"spire": {"enabled": False}}},
    }


def cilium_values(
    *,
    mode: str,
    features: frozenset[str],
    wireguard: bool,
    k8s_service_host: str = "",
    k8s_service_port: int = 6443,
    image: str = "",
    drop_sys_resource: bool = False,
) -> dict[str, Any]:
    """Helm values of the Cilium chart for a mode and feature set.

    Parameters
    ----------
    mode:
        ``"kpr"`` or ``"kube-proxy"``.
    features:
        Subset of :data:`CILIUM_FEATURES`.
    wireguard:
        Encrypt pod-to-pod traffic with WireGuard (UDP 51871).
    k8s_service_host, k8s_service_port:
        API server address the agents use without kube-proxy (kind:
        ``<cluster>-control-plane`` and 6443); omitted when empty.
    image:
        One image for agent, operator and certgen (the offline build), used as it is and
        never pulled; with it Envoy, Hubble, node-init, pre-flight, the clustermesh API server
        and SPIRE are off. ``""``: the chart's own images.
    drop_sys_resource:
        Ask for the chart's default capabilities (:data:`CHART_CAPABILITIES`) without
        ``SYS_RESOURCE``: where the container runtime's bounding set lacks it, runc refuses
        to start a container that asks for it.

    Returns
    -------
    dict
        Values accepted by the chart's ``values.schema.json``.
    """
    kpr = mode == "kpr"
    values: dict[str, Any] = {
        "ipam": {"mode": "kubernetes"},
        "kubeProxyReplacement": kpr,
        "routingMode": "tunnel",
        "tunnelProtocol": "vxlan",
        "bpf": {"masquerade": kpr},
        "l7Proxy": "l7" in features or "gateway-api" in features,
        "egressGateway": {"enabled": "egress-gateway" in features},
        "gatewayAPI": {"enabled": "gateway-api" in features},
        "encryption": {"enabled": wireguard, "type": "wireguard"},
        "prometheus": {"enabled": True},
        "operator": {"replicas": 1, "prometheus": {"enabled": True}},
        "hubble": {"enabled": False},
    }
    if kpr and k8s_service_host:
        values["k8sServiceHost"] = k8s_service_host
        values["k8sServicePort"] = k8s_service_port
    if image:
        offline = _offline_values(image)
        offline["operator"] = {**values["operator"], **offline["operator"]}
        values.update(offline)
    if drop_sys_resource:
        values["securityContext"] = {"capabilities": _without_sys_resource()}
    return values


def module_chart_dir(version: str) -> Path:
    """Cilium's chart inside its Go module in the module cache (``install/kubernetes/cilium``
    of ``github.com/cilium/cilium@v<version>``; ``version`` as the chart names it, with or
    without the ``v`` of the module's tag)."""
    from cnibench.backends.kube.offline.builder import module_cache_dir
    from cnibench.backends.kube.offline.recipes import CILIUM_MODULE

    tag = "v" + version.removeprefix("v")
    return module_cache_dir(CILIUM_MODULE, tag) / "install" / "kubernetes" / "cilium"


def host_lacks_sys_resource() -> bool:
    """Whether this host's bounding set lacks ``CAP_SYS_RESOURCE`` (so do kind's nodes)."""
    from cnibench.backends.kube.engine import lacks_capability

    return lacks_capability()


class CiliumDriver:
    """Cilium's driver (see the module docstring for its options).

    Parameters
    ----------
    chart_dir:
        Version -> local chart directory, used with the offline image set
        (:func:`module_chart_dir` by default).
    lacks_sys_resource:
        Whether containers may not ask for ``CAP_SYS_RESOURCE``, asked with the offline
        image set only (:func:`host_lacks_sys_resource` by default: the offline set runs on
        this host's kind, while a remote cluster's nodes are not this host).
    """

    name = "cilium"

    def __init__(
        self,
        *,
        chart_dir: Callable[[str], Path] = module_chart_dir,
        lacks_sys_resource: Callable[[], bool] = host_lacks_sys_resource,
    ) -> None:
        self._chart_dir = chart_dir
        self._lacks_sys_resource = lacks_sys_resource

    def definition(
        self,
        spec: ClusterSpec,
        *,
        versions: CniVersions,
        images: Images,
        k8s_service_host: str = "",
    ) -> CniDefinition:
        """Chart, capabilities (policy and WireGuard always; egress gateway, L7 policy and
        traffic splitting with their features) and readiness (agent, operator, and Envoy
        when a feature needs it). With the offline image set (``images.offline`` or
        ``images.cilium`` set) the chart comes from the Go module and there is no Envoy.

        Raises
        ------
        cnibench.errors.ConfigError
            An unknown mode, feature or option, or a feature the mode cannot have.
        """
        check_options(spec, frozenset({"mode", "features"}))
        mode = spec.options.get("mode", "kpr")
        if mode not in CILIUM_MODES:
            raise ConfigError(f"unknown cilium mode {mode!r}: choose {', '.join(CILIUM_MODES)}")
        # The offline set is the one place images.cilium is set by default.
        own_image = images.cilium
        features = _features(spec, mode, envoy=not own_image)
        caps = {Capability.NETWORK_POLICY, Capability.WIREGUARD}
        if "egress-gateway" in features:
            caps.add(Capability.EGRESS_GATEWAY)
        if "l7" in features:
            caps.add(Capability.L7_POLICY)
        if "gateway-api" in features:
            caps.add(Capability.TRAFFIC_SPLIT)
        readiness = [
            Readiness("DaemonSet", "kube-system", "cilium"),
            Readiness("Deployment", "kube-system", "cilium-operator"),
        ]
        if "l7" in features or "gateway-api" in features:
            readiness.append(Readiness("DaemonSet", "kube-system", "cilium-envoy"))
        return CniDefinition(
            name=self.name,
            version=versions.cilium,
            capabilities=frozenset(caps),
            readiness=tuple(readiness),
            chart=HelmChart(
                repo="https://helm.cilium.io",
                chart="cilium",
                version=versions.cilium,
                release="cilium",
                namespace="kube-system",
                values=cilium_values(
                    mode=mode,
                    features=features,
                    wireguard=spec.encryption == "wireguard",
                    k8s_service_host=k8s_service_host,
                    image=own_image,
                    drop_sys_resource=bool(own_image) and self._lacks_sys_resource(),
                ),
                path=str(self._chart_dir(versions.cilium)) if own_image else "",
            ),
            replaces_kube_proxy=mode == "kpr",
            egress_api="cilium" if "egress-gateway" in features else "",
            gateway_class="cilium" if "gateway-api" in features else "",
            encryption=spec.encryption,
            gateway_api_crds=versions.cilium_gateway_api if "gateway-api" in features else "",
        )

    def manifests(self, definition: CniDefinition, images: Images) -> list[dict[str, Any]]:
        """None: Cilium is installed from its chart."""
        return []


CILIUM = CiliumDriver()
"""The driver registered in :data:`cnibench.backends.kube.cnis.DRIVERS`."""
