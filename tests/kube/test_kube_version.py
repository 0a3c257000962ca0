"""The kube tier validates against the Kubernetes version the kind nodes would run."""

from __future__ import annotations

import re
from typing import Any

from cnibench.backends.kube.images import Images

_PINNED = re.compile(r"^docker\.io/kindest/node:(?P<tag>v\d+\.\d+\.\d+)@sha256:[0-9a-f]{64}$")


def test_kind_node_image_is_pinned_by_tag_and_digest() -> None:
    assert _PINNED.match(Images().kind_node), Images().kind_node


def test_api_server_of_the_tier_runs_the_kind_node_version(api_client: Any) -> None:
    from kubernetes import client

    served = client.VersionApi(api_client).get_code().git_version
    match = _PINNED.match(Images().kind_node)
    assert match is not None
    # A manifest accepted here could still be refused by a newer or older kind node's server.
    assert served == match.group("tag")
