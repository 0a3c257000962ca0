"""Benchmark suite: network policy (seed 003). The probe matrix must hold before measuring."""

from __future__ import annotations

import pytest


@pytest.mark.policy
def test_policy(bench, cnibench_session, condition):
    # The conditions are the plugin's, planned for the session's backend (a Kubernetes CNI's
    # name no engine). The suite keeps cross-node at the largest client count (time on 2
    # cores); the others run from `cnibench run --scenario policy`.
    clients = max(cnibench_session.scenarios["policy"].options.clients)
    placement = condition.parameters["placement"]
    if placement != "cross-node" or condition.parameters["clients"] != clients:
        pytest.skip(f"the suite runs cross-node with {clients} clients only")
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
    # The set-up timed the engine: from the apply call until the matrix held, reported once.
    enforcement = result.values("policy_enforcement_time")
    if condition.parameters["policy"] == "on":
        assert len(enforcement) == 1, enforcement
        assert 0 < enforcement[0] < 60
        assert evidence["enforcement_seconds"] == pytest.approx(enforcement[0], abs=1e-3)
    else:
        assert enforcement == []
