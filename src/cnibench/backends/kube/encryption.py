"""WireGuard state as some CNIs publish it: a public key annotation on every Node.

Such a CNI's agents generate a WireGuard key pair per node and publish the public half on the
Kubernetes Node object, under an annotation the CNI's driver names
(:class:`WireguardAnnotation`); every agent configures one peer per other node that has
published a key. So the CNI's own account of "encryption is on, with peers" is readable from the
API alone. Drivers whose CNI reports otherwise read their agents instead (see
:meth:`~cnibench.backends.kube.cnis.base.CniDriver.encryption_status`).
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from cnibench.backends.base import EncryptionStatus

__all__ = ["WireguardAnnotation", "wireguard_from_annotations"]


@dataclass(frozen=True)
class WireguardAnnotation:
    """Where a CNI publishes a node's WireGuard public key, and its tunnel interface.

    Attributes
    ----------
    annotation:
        Node annotation holding the base64 public key.
    interface:
        Name of the WireGuard interface the agent creates on every node.
    """

    annotation: str
    interface: str


def _is_public_key(value: str) -> bool:
    try:
        return len(base64.b64decode(value, validate=True)) == 32
    except (binascii.Error, ValueError):
        return False


def wireguard_from_annotations(
    where: WireguardAnnotation, nodes: Sequence[tuple[str, Mapping[str, str]]]
) -> EncryptionStatus:
    """Encryption status of a cluster from its Nodes' annotations.

    Parameters
    ----------
    where:
        The CNI's annotation and interface.
    nodes:
        ``(node name, annotations)`` of every node of the cluster.

    Returns
    -------
    EncryptionStatus
        Enabled when every node published a valid 32-byte key; each node with a key has one
        peer per other node with a key (the agents build a full mesh). ``detail`` says, per
        node, which key was found (public keys are not secrets) or what was wrong.
    """
    keyed: list[str] = []
    details: list[str] = []
    for name, published in nodes:
        value = published.get(where.annotation, "")
        if not value:
            details.append(f"{name}: no {where.annotation} annotation")
        elif not _is_public_key(value):
            details.append(f"{name}: {where.annotation} is not a WireGuard public key")
        else:
            keyed.append(name)
            details.append(f"{name}: {where.annotation}={value}")
    enabled = bool(nodes) and len(keyed) == len(nodes)
    return EncryptionStatus(
        enabled=enabled,
        kind="wireguard" if enabled else "",
        interfaces={name: where.interface for name in keyed},
        peers={name: len(keyed) - 1 for name in keyed},
        detail="\n".join(details),
    )
