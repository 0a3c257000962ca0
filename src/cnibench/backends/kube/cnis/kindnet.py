"""kindnet: kind's own CNI, left on (nothing to install). It takes no options."""

from __future__ import annotations

from typing import TYPE_CHECKING

from cnibench.backends.base import Capability
from cnibench.backends.kube.cni_types import (
    CniDefinition,
    Readiness,
    check_options,
    refuse_wireguard,
)
from cnibench.backends.kube.cnis.base import DriverBase

if TYPE_CHECKING:
    from cnibench.backends.base import ClusterSpec
    from cnibench.backends.kube.cni_types import CniVersions
    from cnibench.backends.kube.images import Images

__all__ = ["KINDNET", "KindnetDriver"]


class KindnetDriver(DriverBase):
    """kindnet's driver."""

    name = "kindnet"
    version = "kind"
    not_offline = "kindnetd is a nested module of kind the Go module proxy does not serve"

    def definition(
        self,
        spec: ClusterSpec,
        *,
        versions: CniVersions,
        images: Images,
        k8s_service_host: str = "",
    ) -> CniDefinition:
        """kind's default CNI kept on; NetworkPolicy (kindnet enforces it since kind v0.24).

        Raises
        ------
        cnibench.errors.ConfigError
            Any option, or WireGuard encryption.
        """
        check_options(spec)
        refuse_wireguard(spec)
        return CniDefinition(
            name=self.name,
            version=versions.version(self.name, self.version),
            capabilities=frozenset({Capability.NETWORK_POLICY}),
            readiness=(Readiness("DaemonSet", "kube-system", "kindnet"),),
            disable_default_cni=False,
        )


KINDNET = KindnetDriver()
"""The driver registered in :data:`cnibench.backends.kube.cnis.DRIVERS`."""
