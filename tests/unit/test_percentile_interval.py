"""A percentile with a distribution-free interval (``stats.percentile_interval``): the
interval's ends are values of the sample, it covers the true percentile at least as often as
its level says (simulated on skewed and two-step times, the shapes times to effect take), and
an end the runs are too few for is open, until :func:`stats.runs_to_bound` runs."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats as sps

from cnibench import stats
from cnibench.errors import ConfigError, InsufficientDataError


def _two_steps(rng: np.random.Generator, n: int) -> np.ndarray:
    """A proxy that resyncs in batches: a third of the changes near 0.03 s, the rest near
    0.4 s."""
    fast = rng.random(n) < 1 / 3
    return np.where(fast, rng.normal(0.03, 0.003, n), rng.normal(0.4, 0.06, n))


def _two_steps_percentile(q: float) -> float:
    grid = np.linspace(0.0, 1.0, 200_001)
    cdf = sps.norm.cdf(grid, 0.03, 0.003) / 3 + 2 * sps.norm.cdf(grid, 0.4, 0.06) / 3
    return float(grid[np.searchsorted(cdf, q)])


@pytest.mark.parametrize("n", [10, 20])
@pytest.mark.parametrize("shape", ["lognormal", "two steps"])
def test_the_median_s_interval_covers_at_least_its_level(shape: str, n: int) -> None:
    rng = np.random.default_rng(20261206)
    trials = 3000
    if shape == "lognormal":
        truth = 0.1  # the median of lognormal(log 0.1, 0.5)
        draws = [rng.lognormal(math.log(0.1), 0.5, n) for _ in range(trials)]
    else:
        truth = _two_steps_percentile(0.5)
        draws = [_two_steps(rng, n) for _ in range(trials)]
    covered = np.mean(
        [(i.low <= truth <= i.high) for i in (stats.percentile_interval(d, 50) for d in draws)]
    )
    margin = 1.96 * math.sqrt(0.95 * 0.05 / trials)
    assert covered >= 0.95 - margin, covered


def test_the_p90_s_lower_end_holds_with_too_few_runs_for_an_upper_one() -> None:
    rng = np.random.default_rng(7)
    truth = _two_steps_percentile(0.9)
    intervals = [stats.percentile_interval(_two_steps(rng, 10), 90) for _ in range(3000)]
    assert all(math.isinf(i.high) for i in intervals)
    below = np.mean([i.low <= truth for i in intervals])
    assert below >= 0.975 - 1.96 * math.sqrt(0.975 * 0.025 / 3000), below


def test_the_ends_are_values_of_the_sample_around_the_estimate() -> None:
    values = np.random.default_rng(3).lognormal(0.0, 1.0, 40)
    for percentile in (10, 50, 75, 90):
        interval = stats.percentile_interval(values, percentile)
        assert interval.low in values
        assert interval.high in values
        assert interval.low <= interval.estimate <= interval.high
        assert interval.estimate == pytest.approx(np.percentile(values, percentile))


@pytest.mark.parametrize("percentile", [50, 90, 99])
def test_an_end_is_open_until_runs_to_bound_runs(percentile: float) -> None:
    enough = stats.runs_to_bound(percentile)
    assert not stats.percentile_interval(np.arange(enough - 1.0), percentile).bounded
    assert stats.percentile_interval(np.arange(float(enough)), percentile).bounded


def test_a_higher_level_never_narrows_the_interval() -> None:
    values = np.random.default_rng(5).exponential(0.2, 60)
    wide = stats.percentile_interval(values, 50, level=0.99)
    narrow = stats.percentile_interval(values, 50, level=0.8)
    assert wide.low <= narrow.low
    assert narrow.high <= wide.high
    assert (wide.low, wide.high) != (narrow.low, narrow.high)


def test_bad_input_is_refused() -> None:
    with pytest.raises(ConfigError):
        stats.percentile_interval([1.0, 2.0], 100)
    with pytest.raises(ConfigError):
        stats.runs_to_bound(0)
    with pytest.raises(InsufficientDataError):
        stats.percentile_interval([], 50)
    with pytest.raises(InsufficientDataError):
        stats.percentile_interval([1.0, math.nan], 50)
