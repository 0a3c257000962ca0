"""cnibench.stats outlier flags: on the scale the estimator uses, at most 5 % of clean samples.

Small seeded simulations through the public API; ``bench/coverage.py`` measures the same rates
with more samples.
"""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
from scipy import stats as sps

from cnibench import stats

SAMPLES = 2000
RUNS = (3, 5, 10, 20)


@pytest.mark.parametrize("n", RUNS, ids=[f"n={n}" for n in RUNS])
def test_clean_lognormal_samples_get_a_run_flagged_at_most_5_percent_of_the_time(n: int) -> None:
    # Run-to-run CV 30 %; the fixed 3.5 on the raw values flagged 29 / 21 / 13 / 10 %.
    rng = np.random.default_rng(3200 + n)
    sigma = math.sqrt(math.log1p(0.30**2))
    samples = np.exp(rng.normal(0.0, sigma, size=(SAMPLES, n)))
    flagged = sum(bool(stats.outlier_runs(sample)) for sample in samples)
    assert flagged / SAMPLES <= 0.05


@pytest.mark.parametrize("n", RUNS, ids=[f"n={n}" for n in RUNS])
def test_clean_signed_samples_get_a_run_flagged_at_most_5_percent_by_summarize_runs(n: int) -> None:
    # A signed quantity (split errors around 0): the summary works on the values themselves.
    rng = np.random.default_rng(3300 + n)
    samples = rng.normal(0.0, 1.0, size=(SAMPLES, n))
    samples[:, 0] = -np.abs(samples[:, 0])  # at least one value <= 0: the linear scale
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", stats.DegenerateDataWarning)
        flagged = sum(bool(stats.summarize_runs(sample).outliers) for sample in samples)
    assert flagged / SAMPLES <= 0.05


@pytest.mark.parametrize("factor", [1.0 / 3.0, 3.0], ids=["a third", "three times"])
@pytest.mark.parametrize("n", [5, 10], ids=["n=5", "n=10"])
def test_a_run_at_a_third_or_three_times_the_others_is_flagged_on_the_log_scale(
    n: int, factor: float
) -> None:
    rng = np.random.default_rng(3400 + n)
    sigma = math.sqrt(math.log1p(0.05**2))
    hits = 0
    for _ in range(300):
        sample = np.exp(rng.normal(0.0, sigma, size=n))
        sample[0] *= factor
        found = stats.outlier_report(sample)
        hits += any(o.index == 0 and o.scale == "log" for o in found)
    assert hits / 300 >= 0.9


def test_a_third_and_three_times_are_equally_far_out() -> None:
    # Runs symmetric around 1 in the logarithms: a run at a third and one at three times the
    # others are mirror images there (on the values themselves, 3.0 is 3x farther out).
    others = np.exp([-0.02, -0.01, 0.01, 0.02]).tolist()
    (low,) = stats.outlier_report([*others, 1.0 / 3.0])
    (high,) = stats.outlier_report([*others, 3.0])
    assert low.score == pytest.approx(-high.score)
    assert "logarithms" in low.reason


@pytest.mark.parametrize("n", [3, 5, 10, 20, 35, 200, 500])
def test_the_default_threshold_grows_for_few_runs_and_stays_above_the_normal_limit(n: int) -> None:
    threshold = stats.outlier_threshold(n)
    # At least the limit a known sigma would need for a 4 % family rate over n runs.
    known = float(sps.norm.isf((1 - (1 - stats.OUTLIER_FAMILY_RATE) ** (1 / n)) / 2))
    assert threshold >= known
    assert threshold <= max(stats.outlier_threshold(3), known * 1.2)
