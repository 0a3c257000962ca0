"""Benchmark suite: network policy (seed 003). The probe matrix must hold before measuring."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from cnibench.scenarios.base import Condition


def in_suite(condition: Condition, planned: Sequence[Condition]) -> bool:
    """The suite keeps cross-node at the largest client count (time on 2 cores); the other
    conditions run from ``cnibench run --scenario policy``. tests/bench/conftest.py deselects
    the rest at collection, so a required tier never reports them as skipped."""
    clients = max(int(c.parameters["clients"]) for c in planned)
    return (
        condition.parameters["placement"] == "cross-node"
        and condition.parameters["clients"] == clients
    )


@pytest.mark.policy
def test_policy(bench, condition):
    # The conditions are the plugin's, planned for the session's backend (a Kubernetes CNI's
    # name no engine), and only those in_suite keeps.
    result = bench.run("policy", condition)

    assert result.ok_runs, [run.reason for run in result.runs]
    evidence = result.verification.evidence
    # Every client pod has two allowed cells; the pod outside the policy one more.
    assert evidence["probes"] == evidence["probes_ok"]
    cells = str(evidence["probe_matrix"]).split(";")
    denied = [cell for cell in cells if cell.startswith("pol-deny->")]
    expected = "/deny/ok" if condition.parameters["policy"] == "on" else "open/allow/ok"
    assert len(denied) == 1, cells
    assert denied[0].endswith(expected), denied
    assert all(v > 0 for v in result.values("throughput"))
    assert all(v > 0 for v in result.values("new_connections_per_second"))
    assert all(v == 1.0 for v in result.values("connection_success_rate"))
    # The set-up timed the engine: from the apply call until the effect probe saw the pod
    # outside the policy blocked, reported once, with the probe's spacing as evidence.
    enforcement = result.values("policy_enforcement_time")
    if condition.parameters["policy"] == "on":
        assert len(enforcement) == 1, enforcement
        assert 0 < enforcement[0] < 60
        assert evidence["enforcement_seconds"] == pytest.approx(enforcement[0], abs=1e-3)
        assert evidence["enforcement_probe_interval_ms"] <= 20, evidence
        assert len(result.values("policy_enforcement_time_leaks")) == 1
    else:
        assert enforcement == []
