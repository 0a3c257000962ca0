"""Benchmark suite: policy precedence (seed 003). The outcome of each case is the result.

On the lab the kernel walks chains in the documented reference order, so every run must match
the reference; on a Kubernetes CNI a mismatch is a finding to report, so only the set-up's
proof (reachable before and after the case, the probes ran) is asserted there.
"""

from __future__ import annotations

import pytest
from bench_support import recorded

# Worked out by hand from the reference order for the allowed client, independently of
# cnibench.policy.reference_outcome.
REFERENCE = {
    "cni-allow": 1.0,
    "k8s-deny": 0.0,
    "k8s-deny-and-cni-allow": 1.0,
    "tier-securityops-deny-vs-application-allow": 0.0,
    "same-tier-priority": 1.0,
    "securityops-pass-and-k8s-deny": 0.0,
}


@pytest.mark.priority
def test_priority(bench, cnibench_session, cni, profile_runs, condition):
    result = bench.run("priority", condition)

    assert result.verified, result.verification.detail
    assert len(result.ok_runs) == profile_runs, [run.reason for run in result.runs]
    for run in result.ok_runs:
        assert run.evidence["before"] == "http-200"
        assert run.evidence["after"] == "http-200"
    assert result.values("reference") == [REFERENCE[condition.id]] * profile_runs
    cluster = cnibench_session.pool.get(
        cnibench_session.scenarios["priority"].cluster_spec(cnibench_session.spec(cni), condition)
    )
    if cluster.backend == "lab":
        assert result.values("reachable") == [REFERENCE[condition.id]] * profile_runs
        assert result.values("matches_reference") == [1.0] * profile_runs
    stored = recorded(result)
    assert set(stored.metric) >= {"reachable", "reference", "matches_reference"}
    # A probe's CPU and memory say nothing about the CNI: none is recorded for this scenario.
    assert not set(stored.metric) & {"cpu", "ram"}
    assert stored.verified.all()
