"""WireGuard status from Antrea/Calico node annotations (pure; the kube tier reads real Nodes)."""

from __future__ import annotations

import base64

import pytest

from cnibench.backends.kube.cnis.antrea import ANTREA_WIREGUARD
from cnibench.backends.kube.cnis.calico import CALICO_WIREGUARD
from cnibench.backends.kube.encryption import WireguardAnnotation, wireguard_from_annotations

KEY = base64.b64encode(bytes(range(32))).decode()
OTHER = base64.b64encode(bytes(range(1, 33))).decode()
ANTREA = "node.antrea.io/wireguard-public-key"
CALICO = "projectcalico.org/WireguardPublicKey"


@pytest.mark.parametrize(
    ("where", "annotation", "interface"),
    [(ANTREA_WIREGUARD, ANTREA, "antrea-wg0"), (CALICO_WIREGUARD, CALICO, "wireguard.cali")],
    ids=["antrea", "calico"],
)
def test_every_node_keyed_is_a_full_mesh(
    where: WireguardAnnotation, annotation: str, interface: str
) -> None:
    nodes = [("n1", {annotation: KEY}), ("n2", {annotation: OTHER}), ("n3", {annotation: KEY})]
    status = wireguard_from_annotations(where, nodes)
    assert status.enabled
    assert status.kind == "wireguard"
    assert status.peers == {"n1": 2, "n2": 2, "n3": 2}
    assert set(status.interfaces.values()) == {interface}


def test_a_node_without_key_means_not_encrypted() -> None:
    status = wireguard_from_annotations(ANTREA_WIREGUARD, [("n1", {ANTREA: KEY}), ("n2", {})])
    assert not status.enabled
    assert status.peers == {"n1": 0}
    assert "n2: no node.antrea.io/wireguard-public-key annotation" in status.detail


def test_the_other_cnis_annotation_does_not_count() -> None:
    status = wireguard_from_annotations(
        CALICO_WIREGUARD, [("n1", {ANTREA: KEY}), ("n2", {ANTREA: KEY})]
    )
    assert not status.enabled


@pytest.mark.parametrize(
    "value",
    ["not-base64!", base64.b64encode(b"short").decode()],
    ids=["not-base64", "wrong-length"],
)
def test_a_malformed_key_is_reported(value: str) -> None:
    status = wireguard_from_annotations(CALICO_WIREGUARD, [("n1", {CALICO: value})])
    assert not status.enabled
    assert "is not a WireGuard public key" in status.detail


def test_no_nodes_is_not_encrypted() -> None:
    assert not wireguard_from_annotations(ANTREA_WIREGUARD, []).enabled
