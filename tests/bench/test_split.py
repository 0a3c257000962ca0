"""Benchmark suite: traffic split (seed 000), loaded from the external host with locust."""

from __future__ import annotations

import pytest

from cnibench.scenarios import SCENARIOS

SCENARIO = SCENARIOS["split"]
BY_ID = {c.id: c for c in SCENARIO.conditions()}
# The suite keeps to the weight-0 case and seed 000's 60/40 at 1000 users; the whole grid
# runs from `cnibench run --scenario split`.
CONDITIONS = [BY_ID["v1-100-v2-0-u10"], BY_ID["v1-60-v2-40-u1000"]]


@pytest.mark.split
@pytest.mark.parametrize("condition", CONDITIONS, ids=str)
def test_split(bench, condition):
    result = bench.run("split", condition)

    assert result.ok_runs, [run.reason for run in result.runs]
    assert all(run.evidence["verified"] for run in result.ok_runs)
    if '"v2": 0' in str(condition.parameters["weights"]):
        assert result.values("requests@v2") == [0.0] * len(result.ok_runs)
        assert all(v > 0 for v in result.values("requests@v1"))
    else:
        lows, highs = result.values("share_low@v1"), result.values("share_high@v1")
        assert lows
        assert all(0 < lo < hi < 1 for lo, hi in zip(lows, highs, strict=True))
    assert all(v > 0 for v in result.values("requests_per_second"))
