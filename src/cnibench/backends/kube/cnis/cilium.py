"""Cilium: installed from its Helm chart, in the two set-ups seed 001 compares.

Options of ``--cni cilium``: ``mode`` (``kpr``, the default: eBPF kube-proxy replacement with
kind's ``kubeProxyMode: none``; or ``kube-proxy``, iptables kube-proxy kept) and ``features``
(comma-separated subset of :data:`CILIUM_FEATURES`; default ``egress-gateway,l7`` with
``kpr`` and ``l7`` with kube-proxy, since the egress gateway and Gateway API need kube-proxy
replacement). ``gateway-api`` needs the Gateway API CRDs installed *before* Cilium
(:attr:`~cnibench.backends.kube.cni.CniDefinition.gateway_api_crds`): cilium-operator looks
for them once at start and otherwise leaves Gateway API off.
"""

from __future__ import annotations

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

__all__ = ["CILIUM", "CILIUM_FEATURES", "CILIUM_MODES", "CiliumDriver", "cilium_values"]

CILIUM_MODES = ("kpr", "kube-proxy")
CILIUM_FEATURES = ("egress-gateway", "gateway-api", "l7")
_NEEDS_KPR = frozenset({"egress-gateway", "gateway-api"})


def _features(spec: ClusterSpec, mode: str) -> frozenset[str]:
    features = features_option(spec, CILIUM_FEATURES)
    if features is None:
        return frozenset({"egress-gateway", "l7"} if mode == "kpr" else {"l7"})
    needs_kpr = sorted(features & _NEEDS_KPR)
    if mode != "kpr" and needs_kpr:
        raise ConfigError(
            f"cilium feature {', '.join(needs_kpr)} needs mode=kpr (kube-proxy replacement)"
        )
    return features


def cilium_values(
    *,
    mode: str,
    features: frozenset[str],
    wireguard: bool,
    k8s_service_host: str = "",
    k8s_service_port: int = 6443,
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
    return values


class CiliumDriver:
    """Cilium's driver (see the module docstring for its options)."""

    name = "cilium"

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
        when a feature needs it).

        Raises
        ------
        cnibench.errors.ConfigError
            An unknown mode, feature or option, or a feature the mode cannot have.
        """
        check_options(spec, frozenset({"mode", "features"}))
        mode = spec.options.get("mode", "kpr")
        if mode not in CILIUM_MODES:
            raise ConfigError(f"unknown cilium mode {mode!r}: choose {', '.join(CILIUM_MODES)}")
        features = _features(spec, mode)
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
                ),
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
