"""The Kubernetes backend: providers kind, aks and existing; CNI definitions; manifests.

Layers inside: :mod:`.images` and :mod:`.cni` (pinned configuration), :mod:`.render` and
:mod:`.helm` (pure rendering), :mod:`.providers` (where clusters come from), :mod:`.api` (the
one layer sending objects to an API server), :mod:`.cluster` (the Cluster Protocol) and
:mod:`.backend` (the Backend Protocol).
"""

from __future__ import annotations

from cnibench.backends.kube.backend import KubeBackend
from cnibench.backends.kube.cluster import KubeCluster, KubePod
from cnibench.backends.kube.cni import CniDefinition, CniVersions, cni_definition
from cnibench.backends.kube.images import Images
from cnibench.backends.kube.providers import AksProvider, ExistingProvider, KindProvider

__all__ = [
    "AksProvider",
    "CniDefinition",
    "CniVersions",
    "ExistingProvider",
    "Images",
    "KindProvider",
    "KubeBackend",
    "KubeCluster",
    "KubePod",
    "cni_definition",
]
