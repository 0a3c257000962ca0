"""The offline image set: every image a kind cluster and cnibench's pods need, built from Debian
packages and Go modules only (``cnibench images build``), for machines that reach no container
registry. :mod:`.recipes` says what goes in (pure); :mod:`.builder` builds it."""

from cnibench.backends.kube.offline.builder import (
    BuildReport,
    OfflineBuilder,
    cache_root,
    offline_bin_dir,
)
from cnibench.backends.kube.offline.recipes import OfflineVersions, pod_image_tags

__all__ = [
    "BuildReport",
    "OfflineBuilder",
    "OfflineVersions",
    "cache_root",
    "offline_bin_dir",
    "pod_image_tags",
]
