"""Issue 47: a sequential contrast's interval allows for the drift its runs cannot rule out,
not only for the drift they estimate. From 5 runs a side the residuals' autocorrelation cannot
tell no drift from AR(1) 0.4, and lines printed because the estimate came out low were the
lines whose drift was missed (``bench/coverage.py --sections aa-printed`` measures the rates).
"""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from scipy import stats as sps

from cnibench import report
from cnibench.report import design


def _sides(values: np.ndarray) -> tuple[design.SideRuns, design.SideRuns]:
    """Control then treatment, one session, in this run order (a sequential design)."""
    n = values.size // 2
    positions = np.arange(2 * n, dtype=np.float64)
    return (
        design.SideRuns(values[:n], ("s",) * n, positions[:n]),
        design.SideRuns(values[n:], ("s",) * n, positions[n:]),
    )


def _alternating(n: int) -> np.ndarray:
    """Runs that zig-zag: residuals less autocorrelated than independent runs' on average."""
    return 9.0 + 0.1 * np.array([(-1.0) ** i for i in range(2 * n)])


def _ar1(n: int, rho: float, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    out = np.zeros(2 * n)
    out[0] = rng.normal()
    for i in range(1, 2 * n):
        out[i] = rho * out[i - 1] + rng.normal(0.0, np.sqrt(1.0 - rho * rho))
    return out


@pytest.mark.parametrize("runs", [5, 10], ids=["5-a-side", "10-a-side"])
def test_runs_that_show_no_drift_are_still_widened_for_the_drift_they_cannot_rule_out(
    runs: int,
) -> None:
    control, treatment = _sides(_alternating(runs))
    found = design.drift_bound([(control, treatment)])
    assert found.estimate == 0.0
    assert found.bound > 0.15
    assert design.drift_autocorrelation([(control, treatment)]) == found.bound
    factor, df = design.drift_widening(control, treatment, found.bound)
    assert factor > 1.0
    assert df < 2 * runs - 2


def test_with_few_runs_the_widening_exceeds_that_at_the_same_coefficient_known() -> None:
    control, treatment = _sides(_ar1(5, 0.3, seed=11))
    found = design.drift_bound([(control, treatment)])
    assert found.bound > found.estimate
    known = design.drift_widening(control, treatment, found.estimate)
    bounded = design.drift_widening(control, treatment, found.bound)
    assert bounded[0] > known[0]
    assert bounded[1] < known[1]


def test_the_bound_tends_to_the_estimate_as_runs_grow() -> None:
    gaps = []
    for runs in (5, 20, 60):
        found = design.drift_bound([_sides(_ar1(runs, 0.5, seed=3))])
        assert found.bound >= found.estimate
        gaps.append(found.bound - found.estimate)
    assert gaps[2] < gaps[0] / 2
    assert gaps[2] < 0.1
    floors = [design.drift_bound([_sides(_alternating(runs))]).bound for runs in (5, 10, 20)]
    assert floors == sorted(floors, reverse=True)
    assert floors[-1] < floors[0] / 2


@pytest.mark.parametrize("runs", [5, 10], ids=["5-a-side", "10-a-side"])
def test_the_widening_grows_with_the_coefficient_so_the_bound_is_the_widest_case(
    runs: int,
) -> None:
    # The interval is widened for the bound alone: that is the widest over every coefficient
    # from 0 to it only because the variance factor grows and the df shrink with rho.
    control, treatment = _sides(_alternating(runs))
    widening = [design.drift_widening(control, treatment, rho) for rho in np.linspace(0, 0.9, 19)]
    factors = [f for f, _ in widening]
    dfs = [min(df, 2 * runs - 2) for _, df in widening]
    assert factors == sorted(factors)
    assert dfs == sorted(dfs, reverse=True)


def test_a_sequential_aa_line_whose_runs_show_no_drift_prints_a_wider_interval_than_welchs():
    # Off then on, 5 runs each, no effect and residuals that look independent: before issue
    # 47 the drift estimate was 0 and the line printed Welch's interval as it was.
    values = 9e9 * np.exp(np.array([0.0, 0.03, -0.02, 0.01, -0.01, 0.02, -0.03, 0.0, 0.01, -0.01]))
    rows = []
    for i, value in enumerate(values):
        state, k = ("off", i) if i < 5 else ("on", i - 5)
        rows.append(
            {
                "session_id": "A",
                "run_id": f"A-{state}-r{k}",
                "time": pd.Timestamp("2026-12-06T08:00:00Z") + pd.Timedelta(seconds=i),
                "scenario": "egress",
                "cni": "vxlan",
                "condition": f"gateway-{state}",
                "parameters": json.dumps({"gateway": state}),
                "repetition": k,
                "metric": "throughput",
                "value": float(value),
                "unit": "bits/s",
                "verified": True,
                "status": "ok",
            }
        )
    row = report.verdict(pd.DataFrame(rows)).iloc[0]
    logs = np.log(values)
    welch = sps.ttest_ind(logs[5:], logs[:5], equal_var=False).confidence_interval(0.95)
    assert row.design == "sequential"
    assert "sequential, drift allowed for" in row.verdict
    assert np.log(row.ci_high) - np.log(row.ci_low) > 1.2 * (welch.high - welch.low)
    assert row.ci_low <= 1.0 <= row.ci_high
