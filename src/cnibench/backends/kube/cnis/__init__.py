"""CNI drivers: one module per CNI behind :class:`CniDriver`, found through :data:`DRIVERS`.

A driver turns a :class:`~cnibench.backends.base.ClusterSpec` into a
:class:`~cnibench.backends.kube.cni.CniDefinition` and, for a CNI cnibench installs from
objects it renders itself, renders those objects. Drivers are pure: nothing here talks to a
cluster; :func:`~cnibench.backends.kube.addons.install_cni` applies what they describe.

:func:`~cnibench.backends.kube.cni.cni_definition` asks :data:`DRIVERS` for every CNI. To add
a CNI: one module in this package with a driver object, its entry in :data:`DRIVERS`, its name
in :data:`~cnibench.backends.kube.cni.CNI_NAMES`. (What a running cluster does per CNI —
egress objects, priority objects, L7 rules, the encryption proof — still branches in
:mod:`cnibench.backends.kube.cluster` and :mod:`cnibench.backends.kube.render`.)

Driver modules import :mod:`cnibench.backends.kube.cni` (for ``CniDefinition``), so that
module imports this one only inside :func:`~cnibench.backends.kube.cni.cni_definition`.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Protocol

from cnibench.backends.kube.cnis.antrea import ANTREA
from cnibench.backends.kube.cnis.calico import CALICO
from cnibench.backends.kube.cnis.cilium import CILIUM
from cnibench.backends.kube.cnis.flannel import FLANNEL
from cnibench.backends.kube.cnis.kindnet import KINDNET
from cnibench.backends.kube.cnis.kube_router import KUBE_ROUTER

if TYPE_CHECKING:
    from cnibench.backends.base import ClusterSpec
    from cnibench.backends.kube.cni import CniDefinition, CniVersions
    from cnibench.backends.kube.images import Images

__all__ = ["DRIVERS", "CniDriver"]


class CniDriver(Protocol):
    """What :func:`~cnibench.backends.kube.cni.cni_definition` needs from a CNI's module."""

    @property
    def name(self) -> str:
        """The CNI's ``--cni`` name (its key in :data:`DRIVERS`)."""
        ...

    def definition(
        self,
        spec: ClusterSpec,
        *,
        versions: CniVersions,
        images: Images,
        k8s_service_host: str,
    ) -> CniDefinition:
        """The CNI's definition for ``spec``, with :attr:`CniDefinition.manifests` filled when
        cnibench renders the CNI's objects itself.

        Parameters
        ----------
        spec:
            Cluster spec; ``spec.encryption`` is already known to be ``""`` or
            ``"wireguard"``.
        versions:
            Pinned versions.
        images:
            Images of the objects rendered for the CNI.
        k8s_service_host:
            API server host, for CNIs that replace kube-proxy (``""`` when unknown).

        Raises
        ------
        cnibench.errors.ConfigError
            An option or encryption the CNI does not take (one line).
        """
        ...

    def manifests(self, definition: CniDefinition, images: Images) -> list[dict[str, Any]]:
        """The objects that install the CNI as ``definition`` describes it, in apply order
        (namespaces and RBAC before workloads); empty for a CNI installed by chart or release
        manifest."""
        ...


DRIVERS: Mapping[str, CniDriver] = MappingProxyType(
    {driver.name: driver for driver in (KINDNET, CILIUM, ANTREA, CALICO, FLANNEL, KUBE_ROUTER)}
)
"""CNI drivers by ``--cni`` name (the same names as
:data:`~cnibench.backends.kube.cni.CNI_NAMES`, in its order)."""
