"""Benchmark suite: L7 policy (seed 003): ab -c 100 with and without a method/path filter."""

from __future__ import annotations

import pytest

from cnibench.scenarios.l7 import refused


@pytest.mark.l7
def test_l7(bench, condition):
    result = bench.run("l7", condition)

    assert result.ok_runs, [run.reason for run in result.runs]
    matrix = str(result.verification.evidence["http_matrix"])
    seen = {
        request: observed.split("/", 1)[0]
        for request, observed in (cell.split("=", 1) for cell in matrix.split(";"))
    }
    assert seen["GET /api/allowed"] == "200"
    for request in ("POST /api/allowed", "GET /api/other"):
        if condition.parameters["policy"] == "on":
            # A proxy's 403 (lab, Cilium) or no HTTP answer (Antrea resets the connection).
            assert refused(seen[request]), matrix
        else:
            assert seen[request] == "200", matrix
    assert all(v > 0 for v in result.values("requests_per_second"))
    assert all(v == 0 for v in result.values("non_2xx"))
