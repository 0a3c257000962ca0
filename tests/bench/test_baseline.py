"""Benchmark suite: baseline pod-to-pod datapath (seeds 001 and 004)."""

from __future__ import annotations

import math

import pytest

HEADLINE = {
    "iperf3": ("throughput", "bits/s"),
    "sockperf": ("latency_avg", "us"),
    "ab": ("requests_per_second", "requests/s"),
    "wrk": ("requests_per_second", "requests/s"),
}


@pytest.mark.baseline
def test_baseline(bench, profile_runs, condition):
    result = bench.run("baseline", condition)

    assert result.verified, result.verification.detail
    assert len(result.ok_runs) == profile_runs
    metric, _unit = HEADLINE[condition.parameters["tool"]]
    values = result.values(metric)
    assert len(values) == len(result.ok_runs)
    assert all(math.isfinite(v) and v > 0 for v in values), values
    assert all(0.0 <= v <= 100.0 for v in result.values("cpu"))
    assert all(v > 0 for v in result.values("ram"))
    same_node = (
        result.verification.evidence["server_node"] == result.verification.evidence["client_node"]
    )
    assert same_node == (condition.parameters["placement"] == "same-node")
