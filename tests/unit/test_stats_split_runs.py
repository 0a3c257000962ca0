"""cnibench.stats split statistics across runs: intervals that keep their level when shares vary
between runs, and a "requests needed" that is the power of the test at that number of runs.

Small seeded simulations through the public API; ``bench/coverage.py`` measures the same with
more samples.
"""

from __future__ import annotations

import numpy as np
import pytest

from cnibench import stats

WEIGHTS = {"v1": 60, "v2": 40}


def _runs(
    rng: np.random.Generator, runs: int, requests: int, share: float, spread: float
) -> list[dict[str, int]]:
    """Per-run counts of a 2-backend split whose v1 share varies by ``spread`` between runs."""
    shares = np.clip(rng.normal(share, spread, size=runs), 0.0, 1.0)
    v1 = rng.binomial(requests, shares)
    return [{"v1": int(a), "v2": requests - int(a)} for a in v1]


def _rejections(
    rng: np.random.Generator, *, runs: int, total: int, share: float, spread: float, tests: int
) -> float:
    hits = 0
    for _ in range(tests):
        sample = _runs(rng, runs, total // runs, share, spread)
        hits += stats.split_test(sample, WEIGHTS).p_value < 0.01
    return hits / tests


@pytest.mark.parametrize("runs", [3, 5], ids=["3 runs", "5 runs"])
def test_split_intervals_keep_95_percent_when_shares_vary_3_points_between_runs(runs: int) -> None:
    # Widening chi-square Goodman intervals by sqrt(dispersion) covered 0.88 (3 runs) and
    # 0.92 (5 runs) here.
    rng = np.random.default_rng(4000 + runs)
    covered = 0
    for _ in range(500):
        test = stats.split_test(_runs(rng, runs, 1000, 0.6, 0.03), WEIGHTS)
        covered += all(
            low <= test.expected[name] <= high for name, (low, high) in test.intervals.items()
        )
    assert covered / 500 >= 0.94


def test_split_test_power_is_what_1429_requests_over_5_runs_really_have() -> None:
    # requests_to_detect_skew's 1429 requests assume many runs; with 5 the dispersion has 4 df.
    stated = stats.split_test_power(WEIGHTS, requests=1429, runs=5)
    simulated = _rejections(
        np.random.default_rng(4100), runs=5, total=1429, share=0.55, spread=0.0, tests=600
    )
    assert stated == pytest.approx(0.56, abs=0.02)
    assert simulated == pytest.approx(stated, abs=0.05)


@pytest.mark.parametrize("runs", [3, 5], ids=["3 runs", "5 runs"])
def test_the_stated_requests_have_the_stated_power(runs: int) -> None:
    plan = stats.skew_detection_plan(WEIGHTS, runs=runs, requests_per_run=1000)
    assert plan.reachable
    assert plan.requests is not None
    assert plan.power == pytest.approx(0.9, abs=0.01)
    assert f"{plan.requests} requests over {runs} run(s)" in plan.statement()
    simulated = _rejections(
        np.random.default_rng(4200 + runs),
        runs=runs,
        total=plan.requests,
        share=0.55,
        spread=0.0,
        tests=600,
    )
    assert simulated == pytest.approx(plan.power, abs=0.05)


def test_when_runs_vary_too_much_the_plan_asks_for_runs_not_requests() -> None:
    # Shares varying by 2 points between runs of 1000 requests: dispersion 1 + 999 * 0.02^2 /
    # 0.24 = 2.67. More requests per run only make the runs' own variation show more.
    plan = stats.skew_detection_plan(WEIGHTS, runs=5, requests_per_run=1000, dispersion=2.665)
    assert not plan.reachable
    assert plan.power < 0.9
    assert plan.runs_needed > 5
    assert plan.run_requests is not None
    assert f"about {plan.runs_needed} runs of {plan.run_requests} requests" in plan.statement()
    simulated = _rejections(
        np.random.default_rng(4300),
        runs=plan.runs_needed,
        total=plan.runs_needed * plan.run_requests,
        share=0.55,
        spread=0.02,
        tests=400,
    )
    assert simulated >= 0.9 - 0.05


def test_the_runs_advised_are_trimmed_to_the_fewest_requests_that_reach_the_power() -> None:
    # Whole runs of the measured 1000 requests overshoot the power: the last run adds a step.
    # The runs advised hold the fewest requests per run that still reach 0.9, and one request
    # fewer per run falls short (the dispersion known, so the power is split_test_power's).
    plan = stats.skew_detection_plan(WEIGHTS, runs=5, requests_per_run=1000, dispersion=2.665)
    assert plan.run_requests is not None
    k, m = plan.runs_needed, plan.run_requests
    assert m < 1000

    def power(per_run: int) -> float:
        dispersion = 1.0 + (per_run - 1) * (2.665 - 1.0) / 999
        return stats.split_test_power(
            WEIGHTS, requests=k * per_run, runs=k, dispersion=dispersion, alpha=0.01
        )

    assert power(m) >= 0.9
    assert power(m - 1) < 0.9
    assert power(1000) > power(m)
