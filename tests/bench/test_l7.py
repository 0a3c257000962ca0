"""Benchmark suite: L7 policy (seed 003): ab -c 100 with and without a method/path filter."""

from __future__ import annotations

import pytest


@pytest.mark.l7
def test_l7(bench, condition):
    result = bench.run("l7", condition)

    assert result.ok_runs, [run.reason for run in result.runs]
    matrix = str(result.verification.evidence["http_matrix"])
    refused = "403" if condition.parameters["policy"] == "on" else "200"
    assert f"POST /api/allowed={refused}/" in matrix
    assert f"GET /api/other={refused}/" in matrix
    assert "GET /api/allowed=200/" in matrix
    assert all(v > 0 for v in result.values("requests_per_second"))
    assert all(v == 0 for v in result.values("non_2xx"))
