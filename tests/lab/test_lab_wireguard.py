"""WireGuard encryption: tunnel status from the datapath, and what the underlay shows."""

from __future__ import annotations

import secrets

import pytest
from lab_support import ALL_PROFILES, ENCRYPTED, HTTP_PORT, Lab


@pytest.mark.parametrize("lab", ALL_PROFILES, indirect=True)
def test_encryption_status_matches_the_profile(lab: Lab) -> None:
    status = lab.cluster.encryption_status()
    assert (status.enabled, status.kind) == ((True, "wireguard") if lab.encrypted else (False, ""))


@pytest.mark.parametrize("lab", ENCRYPTED, indirect=True)
def test_every_node_has_a_peer_per_other_node(lab: Lab) -> None:
    status = lab.cluster.encryption_status()
    others = len(lab.cluster.nodes) - 1
    assert status.peers == {node.name: others for node in lab.cluster.nodes}


@pytest.mark.parametrize("lab", ENCRYPTED, indirect=True)
def test_every_peer_completed_a_handshake(lab: Lab) -> None:
    status = lab.cluster.encryption_status()
    others = len(lab.cluster.nodes) - 1
    assert status.detail.count(f"{others} handshakes completed") == len(lab.cluster.nodes)


@pytest.mark.parametrize("lab", ENCRYPTED, indirect=True)
def test_status_detail_never_contains_a_private_key(lab: Lab) -> None:
    detail = lab.cluster.encryption_status().detail
    keys = [path.read_text().strip() for path in (lab.cluster.state_dir / "keys").iterdir()]
    assert len(keys) == len(lab.cluster.nodes)
    assert not [key for key in keys if key in detail]


@pytest.mark.parametrize("lab", ALL_PROFILES, indirect=True)
def test_marker_is_visible_on_the_underlay_only_without_encryption(lab: Lab) -> None:
    marker = f"cnibench-marker-{secrets.token_hex(8)}"
    send = [
        "curl", "-sS", "-o", "/dev/null", "--max-time", "5",
        f"http://{lab.server.ip}:{HTTP_PORT}/{marker}",
    ]  # fmt: skip
    seen = lab.cluster.capture_underlay(marker.encode(), send, source=lab.client)
    assert seen is not lab.encrypted
