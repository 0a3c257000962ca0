"""Benchmark suite: WireGuard encryption off/on (seeds 002 and 003)."""

from __future__ import annotations

import pytest
from bench_support import recorded


@pytest.mark.wireguard
def test_wireguard(bench, profile_runs, condition):
    result = bench.run("wireguard", condition)

    encrypted = condition.parameters["encryption"] == "on"
    # The marker must be seen in clear text without encryption and never with it.
    assert result.verification.evidence["marker_seen_on_underlay"] is (not encrypted)
    assert result.verification.evidence["encryption_enabled"] is encrypted
    assert result.verified
    assert recorded(result).verified.all()
    assert len(result.ok_runs) == profile_runs
    if condition.parameters["measurement"] == "rr":
        assert all(v > 0 for v in result.values("rr_mean"))
        assert result.values("rr_failures") == [0.0] * profile_runs
    else:
        assert all(v > 0 for v in result.values("throughput"))
