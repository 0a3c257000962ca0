"""Constants and helpers shared by the lab tests (a plain module that test files import)."""

from __future__ import annotations

import os
from dataclasses import dataclass

import pytest

from cnibench.backends.base import ClusterSpec, NodeRole
from cnibench.backends.lab import LabBackend, LabCluster, LabPod
from cnibench.errors import ProvisioningError

PLAIN = ("routed", "vxlan")
ENCRYPTED = ("routed+wireguard", "vxlan+wireguard")
ALL_PROFILES = PLAIN + ENCRYPTED

HTTP_PORT = 80
IPERF3_PORT = 5201
SOCKPERF_PORT = 11111


def lab_required() -> bool:
    """Whether ``CNIBENCH_REQUIRE`` (comma-separated tiers) names the lab tier."""
    tiers = {part.strip() for part in os.environ.get("CNIBENCH_REQUIRE", "").split(",")}
    return "lab" in tiers


def unavailable(reason: str) -> None:
    """Skip, or fail when the lab tier is required."""
    if lab_required():
        pytest.fail(f"lab tier required by CNIBENCH_REQUIRE but unavailable: {reason}")
    pytest.skip(reason)


def spec_for(key: str, roles: tuple[NodeRole, ...] | None = None) -> ClusterSpec:
    """``"vxlan+wireguard"`` -> ``ClusterSpec(cni="vxlan", encryption="wireguard")``."""
    cni, _, encryption = key.partition("+")
    if roles is None:
        return ClusterSpec(cni=cni, encryption=encryption)
    return ClusterSpec(cni=cni, encryption=encryption, roles=roles)


def provision_or_skip(backend: LabBackend, spec: ClusterSpec) -> LabCluster:
    """Provision ``spec``; a host without any WireGuard skips (or fails when required)."""
    try:
        return backend.provision(spec)
    except ProvisioningError as exc:
        if "neither kernel WireGuard nor wireguard-go" in str(exc):
            unavailable(str(exc))
        raise


@dataclass(frozen=True)
class Lab:
    """A provisioned lab and its three pods."""

    cluster: LabCluster
    server: LabPod
    client: LabPod
    neighbour: LabPod

    @property
    def encrypted(self) -> bool:
        """Whether the lab runs WireGuard."""
        return self.cluster.spec.encryption == "wireguard"
