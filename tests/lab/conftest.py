"""Fixtures of the lab tier: real namespaces, real tools, real Prometheus (needs root).

Tests that need root take the ``lab_backend`` fixture (directly or through ``lab``). When the
lab cannot run here they are skipped with the reason, except when ``CNIBENCH_REQUIRE`` names
``lab`` (as in CI): then they fail, so a CI machine without root cannot pass silently.

``lab`` is session-scoped and parametrized indirectly by a profile key (``routed``, ``vxlan``,
``routed+wireguard``, ``vxlan+wireguard``); pytest groups the tests by key, so one lab is alive at
a time. Each lab has three pods: ``server`` (server node: HTTP echo, iperf3, sockperf), ``client``
(client node) and ``neighbour`` (client node, HTTP echo), so cross-node and same-node paths exist.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from lab_support import (
    HTTP_PORT,
    IPERF3_PORT,
    SOCKPERF_PORT,
    Lab,
    provision_or_skip,
    spec_for,
    unavailable,
)

from cnibench.backends.base import NodeRole, WorkloadKind, WorkloadSpec
from cnibench.backends.lab import LabBackend


@pytest.fixture(scope="session")
def lab_backend() -> LabBackend:
    """The lab backend, when this host can run labs."""
    backend = LabBackend()
    ok, reason = backend.available()
    if not ok:
        unavailable(reason)
    return backend


@pytest.fixture(scope="session")
def lab(request: pytest.FixtureRequest, lab_backend: LabBackend) -> Iterator[Lab]:
    """A lab for the profile key given by indirect parametrization, with its pods."""
    key = getattr(request, "param", "routed")
    cluster = provision_or_skip(lab_backend, spec_for(key))
    try:
        server = cluster.place(
            "server",
            role=NodeRole.SERVER,
            workloads=(
                WorkloadSpec(WorkloadKind.HTTP_ECHO, HTTP_PORT),
                WorkloadSpec(WorkloadKind.IPERF3_SERVER, IPERF3_PORT),
                WorkloadSpec(WorkloadKind.SOCKPERF_SERVER, SOCKPERF_PORT),
            ),
        )
        client = cluster.place("client", role=NodeRole.CLIENT)
        neighbour = cluster.place(
            "neighbour",
            role=NodeRole.CLIENT,
            workloads=(WorkloadSpec(WorkloadKind.HTTP_ECHO, HTTP_PORT),),
        )
        yield Lab(cluster, server, client, neighbour)
    finally:
        cluster.teardown()
