"""The Kubernetes backend: providers kind, aks and existing; CNI definitions; manifests.

Layers inside: :mod:`.images`, :mod:`.cni_types` and the drivers in :mod:`.cnis` (pinned
configuration; :mod:`.cni` finds a driver), :mod:`.render` and
:mod:`.helm` (pure rendering), :mod:`.providers` (where clusters come from), :mod:`.external`
(this host as the external host), :mod:`.api` (the one layer sending objects to an API server),
:mod:`.cluster` (the Cluster Protocol: a façade over :mod:`.runtime` and one module per
feature, :mod:`.pods`, :mod:`.egress`, :mod:`.filters`, :mod:`.split`, :mod:`.services`,
:mod:`.monitoring`, :mod:`.agents`, :mod:`.capture`), :mod:`.backend` (the Backend Protocol) and
:mod:`.clean` (``cnibench clean`` for kind clusters and session namespaces).
"""

from __future__ import annotations

from cnibench.backends.kube.backend import KubeBackend
from cnibench.backends.kube.clean import KubeCleanReport, clean_kube_leftovers
from cnibench.backends.kube.cluster import KubeCluster, KubePod
from cnibench.backends.kube.cni import CniDefinition, CniVersions, cni_definition
from cnibench.backends.kube.external import HostExternal
from cnibench.backends.kube.images import Images
from cnibench.backends.kube.providers import AksProvider, ExistingProvider, KindProvider

__all__ = [
    "AksProvider",
    "CniDefinition",
    "CniVersions",
    "ExistingProvider",
    "HostExternal",
    "Images",
    "KindProvider",
    "KubeBackend",
    "KubeCleanReport",
    "KubeCluster",
    "KubePod",
    "clean_kube_leftovers",
    "cni_definition",
]
