"""Calico: installed through the tigera-operator chart, VXLAN (cross-subnet) on kind's pod
subnet. It takes no options."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from cnibench.backends.base import Capability
from cnibench.backends.kube.cni import (
    KIND_POD_SUBNET,
    CniDefinition,
    HelmChart,
    Readiness,
    check_options,
)

if TYPE_CHECKING:
    from cnibench.backends.base import ClusterSpec
    from cnibench.backends.kube.cni import CniVersions
    from cnibench.backends.kube.images import Images

__all__ = ["CALICO", "CalicoDriver"]


class CalicoDriver:
    """Calico's driver."""

    name = "calico"

    def definition(
        self,
        spec: ClusterSpec,
        *,
        versions: CniVersions,
        images: Images,
        k8s_service_host: str = "",
    ) -> CniDefinition:
        """The operator chart with one IP pool, capabilities (policy, tiers, WireGuard) and
        readiness (operator, then calico-node).

        Raises
        ------
        cnibench.errors.ConfigError
            Any option.
        """
        check_options(spec)
        pool = {"cidr": KIND_POD_SUBNET, "encapsulation": "VXLANCrossSubnet"}
        return CniDefinition(
            name=self.name,
            version=versions.calico,
            capabilities=frozenset(
                {Capability.NETWORK_POLICY, Capability.WIREGUARD, Capability.POLICY_TIERS}
            ),
            readiness=(
                Readiness("Deployment", "tigera-operator", "tigera-operator"),
                Readiness("DaemonSet", "calico-system", "calico-node"),
            ),
            chart=HelmChart(
                repo="https://docs.tigera.io/calico/charts",
                chart="tigera-operator",
                version=f"v{versions.calico}",
                release="calico",
                namespace="tigera-operator",
                values={"installation": {"calicoNetwork": {"ipPools": [pool]}}},
            ),
            encryption=spec.encryption,
        )

    def manifests(self, definition: CniDefinition, images: Images) -> list[dict[str, Any]]:
        """None: Calico is installed from its chart."""
        return []


CALICO = CalicoDriver()
"""The driver registered in :data:`cnibench.backends.kube.cnis.DRIVERS`."""
