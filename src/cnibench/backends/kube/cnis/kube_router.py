"""kube-router: installed from its release manifest (routing and NetworkPolicy, no
encryption). It takes no options."""

from __future__ import annotations

from typing import TYPE_CHECKING

from cnibench.backends.base import Capability
from cnibench.backends.kube.cni import CniDefinition, Readiness, check_options, refuse_wireguard
from cnibench.backends.kube.cnis.base import DriverBase

if TYPE_CHECKING:
    from cnibench.backends.base import ClusterSpec
    from cnibench.backends.kube.cni import CniVersions
    from cnibench.backends.kube.images import Images

__all__ = ["KUBE_ROUTER", "KubeRouterDriver"]


class KubeRouterDriver(DriverBase):
    """kube-router's driver."""

    name = "kube-router"

    def definition(
        self,
        spec: ClusterSpec,
        *,
        versions: CniVersions,
        images: Images,
        k8s_service_host: str = "",
    ) -> CniDefinition:
        """The generic DaemonSet manifest of the pinned release; NetworkPolicy only.

        Raises
        ------
        cnibench.errors.ConfigError
            Any option, or WireGuard encryption.
        """
        check_options(spec)
        refuse_wireguard(spec)
        return CniDefinition(
            name=self.name,
            version=versions.kube_router,
            capabilities=frozenset({Capability.NETWORK_POLICY}),
            readiness=(Readiness("DaemonSet", "kube-system", "kube-router"),),
            manifest_urls=(
                "https://raw.githubusercontent.com/cloudnativelabs/kube-router/"
                f"{versions.kube_router}/daemonset/generic-kuberouter.yaml",
            ),
        )


KUBE_ROUTER = KubeRouterDriver()
"""The driver registered in :data:`cnibench.backends.kube.cnis.DRIVERS`."""
