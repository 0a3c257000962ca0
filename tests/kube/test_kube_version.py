"""The kube tier validates against the Kubernetes version the kind tier's nodes run."""

from __future__ import annotations

import re
from typing import Any

from cnibench.backends.kube.images import OFFLINE_IMAGES, Images

_PINNED = re.compile(r"^docker\.io/kindest/node:(?P<tag>v\d+\.\d+\.\d+)@sha256:[0-9a-f]{64}$")


def test_kind_node_image_is_pinned_by_tag_and_digest() -> None:
    assert _PINNED.match(Images().kind_node), Images().kind_node


def test_api_server_of_the_tier_runs_the_kind_tier_node_version(api_client: Any) -> None:
    from kubernetes import client

    from cnibench.backends.kube.offline import OfflineVersions

    served = client.VersionApi(api_client).get_code().git_version
    # One Kubernetes build serves both tiers: the manifests accepted here are the ones the kind
    # tier's real clusters (the offline node image) run.
    assert served == OfflineVersions().kubernetes
    assert OfflineVersions().kubernetes in OFFLINE_IMAGES.kind_node
