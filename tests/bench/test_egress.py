"""Benchmark suite: egress gateway (seed 000). Every run proves the path by its source address."""

from __future__ import annotations

import pytest
from bench_support import recorded

from cnibench.backends.base import NodeRole


@pytest.mark.egress
def test_egress(bench, cnibench_session, cni, condition):
    result = bench.run("egress", condition)

    cluster = cnibench_session.pool.get(
        cnibench_session.scenarios["egress"].cluster_spec(cnibench_session.spec(cni), condition)
    )
    gateway_on = condition.parameters["gateway"] == "on"
    # Independent of the scenario's own expectation: the node the address must belong to.
    expected = cluster.node(NodeRole.EGRESS_GW if gateway_on else NodeRole.CLIENT).ip
    assert result.ok_runs, [run.reason for run in result.runs]
    for run in result.ok_runs:
        assert run.evidence["source_seen"] == expected
    assert result.verification.evidence["source_seen"] == expected
    assert all(v > 0 for v in result.values("throughput"))
    stored = recorded(result)
    assert len(stored) > 0
    assert stored.verified.all()
