"""Antrea: installed from its Helm chart with the Egress and L7NetworkPolicy feature gates.

Options of ``--cni antrea``: ``features`` (``gateway-api``: Antrea has no Gateway API of its
own, so NGINX Gateway Fabric is installed after it, Gateway API CRDs first, GatewayClass
``nginx``) and ``egress-ip-range`` (``FIRST-LAST`` IPv4 addresses for the ExternalIPPool on
the egress-gw node; the first is the egress IP; without it kind clusters use the top of the
kind network's subnet).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from cnibench.backends.base import Capability
from cnibench.backends.kube.cni import (
    NGF_NAMESPACE,
    NGF_RELEASE,
    CniDefinition,
    HelmChart,
    Readiness,
    check_options,
    features_option,
    nginx_gateway_fabric_chart,
)

if TYPE_CHECKING:
    from cnibench.backends.base import ClusterSpec
    from cnibench.backends.kube.cni import CniVersions
    from cnibench.backends.kube.images import Images

__all__ = ["ANTREA", "ANTREA_FEATURES", "AntreaDriver"]

ANTREA_FEATURES = ("gateway-api",)


class AntreaDriver:
    """Antrea's driver (see the module docstring for its options)."""

    name = "antrea"

    def definition(
        self,
        spec: ClusterSpec,
        *,
        versions: CniVersions,
        images: Images,
        k8s_service_host: str = "",
    ) -> CniDefinition:
        """Chart values (feature gates, WireGuard mode), capabilities (policy, tiers, egress,
        WireGuard, L7; traffic splitting with ``gateway-api``) and readiness.

        Raises
        ------
        cnibench.errors.ConfigError
            An unknown option or feature, or an unreadable ``egress-ip-range``.
        """
        check_options(spec, frozenset({"egress-ip-range", "features"}))
        if "egress-ip-range" in spec.options:
            from cnibench.backends.kube.external import parse_ip_range

            parse_ip_range(spec.options["egress-ip-range"])
        config: dict[str, Any] = {
            "featureGates": {"Egress": True, "L7NetworkPolicy": True},
            "disableTXChecksumOffload": True,
        }
        if spec.encryption == "wireguard":
            config["trafficEncryptionMode"] = "wireGuard"
        gateway_api = "gateway-api" in (features_option(spec, ANTREA_FEATURES) or ())
        caps = {
            Capability.NETWORK_POLICY,
            Capability.EGRESS_GATEWAY,
            Capability.WIREGUARD,
            Capability.L7_POLICY,
            Capability.POLICY_TIERS,
        }
        readiness = [
            Readiness("DaemonSet", "kube-system", "antrea-agent"),
            Readiness("Deployment", "kube-system", "antrea-controller"),
        ]
        if gateway_api:
            caps.add(Capability.TRAFFIC_SPLIT)
            readiness.append(
                Readiness("Deployment", NGF_NAMESPACE, f"{NGF_RELEASE}-nginx-gateway-fabric")
            )
        return CniDefinition(
            name=self.name,
            version=versions.antrea,
            capabilities=frozenset(caps),
            readiness=tuple(readiness),
            chart=HelmChart(
                repo="https://charts.antrea.io",
                chart="antrea",
                version=versions.antrea,
                release="antrea",
                namespace="kube-system",
                values=config,
            ),
            egress_api="antrea",
            encryption=spec.encryption,
            gateway_class="nginx" if gateway_api else "",
            gateway_api_crds=versions.nginx_gateway_api if gateway_api else "",
            addon_charts=(nginx_gateway_fabric_chart(versions),) if gateway_api else (),
        )

    def manifests(self, definition: CniDefinition, images: Images) -> list[dict[str, Any]]:
        """None: Antrea is installed from its chart."""
        return []


ANTREA = AntreaDriver()
"""The driver registered in :data:`cnibench.backends.kube.cnis.DRIVERS`."""
