"""truncated_mean_interval: the summary the CLI table and the report share."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats as scipy_stats

from cnibench import stats


@pytest.mark.parametrize("n", [5, 10, 23], ids=["nothing-cut", "one-cut", "two-cut"])
def test_matches_scipy_on_the_values_trim_mean_keeps(n):
    values = np.random.default_rng(7).lognormal(size=n)
    interval = stats.truncated_mean_interval(values, proportion=0.1, level=0.95)
    cut = int(0.1 * n)
    kept = np.sort(values)[cut : n - cut]
    low, high = scipy_stats.t.interval(
        0.95, kept.size - 1, loc=kept.mean(), scale=scipy_stats.sem(kept)
    )
    assert interval.estimate == pytest.approx(scipy_stats.trim_mean(values, 0.1))
    assert (interval.low, interval.high) == pytest.approx((low, high))
    assert interval.n == kept.size


def test_truncated_mean_is_the_mean_of_trimmed_sample():
    values = [1.0, 2.0, 3.0, 4.0, 100.0]
    assert list(stats.trimmed_sample(values, proportion=0.2)) == [2.0, 3.0, 4.0]
    assert stats.truncated_mean(values, proportion=0.2) == 3.0
