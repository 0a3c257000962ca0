"""The offline image set: every image a kind cluster and cnibench's pods need, built from Debian
packages and Go modules only (``cnibench images build``), for machines that reach no container
registry. :mod:`.recipes` says what the shared images hold and each CNI driver's offline recipe
what its own image holds (pure; :mod:`.plan` gathers them from the registered drivers);
:mod:`.builder` builds it."""

from cnibench.backends.kube.offline.builder import (
    BuildReport,
    OfflineBuilder,
    cache_root,
    offline_bin_dir,
)
from cnibench.backends.kube.offline.plan import cluster_image_tags, pod_image_tags
from cnibench.backends.kube.offline.recipes import OfflineVersions

__all__ = [
    "BuildReport",
    "OfflineBuilder",
    "OfflineVersions",
    "cache_root",
    "cluster_image_tags",
    "offline_bin_dir",
    "pod_image_tags",
]
