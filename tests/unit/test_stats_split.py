"""cnibench.stats traffic-split statistics: splitting_error, windowed_shares, requests_needed."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np
import pandas as pd
import pytest
import scipy.stats

from cnibench import stats

# Sison & Glaz (1995), example 1: seven categories, 467 observations. Goodman's 95 % intervals
# as printed in the paper (3 decimals), and the Sison-Glaz intervals computed by the R package
# MultinomialCI (as published with statsmodels' tests).
SISON_GLAZ_COUNTS = [56, 72, 73, 59, 62, 87, 58]
GOODMAN_PAPER = [
    (0.085, 0.166),
    (0.115, 0.204),
    (0.116, 0.207),
    (0.091, 0.173),
    (0.096, 0.181),
    (0.143, 0.239),
    (0.089, 0.171),
]
SISON_GLAZ_R = [
    (0.07922912, 0.1643361),
    (0.11349036, 0.1985973),
    (0.11563169, 0.2007386),
    (0.08565310, 0.1707601),
    (0.09207709, 0.1771840),
    (0.14561028, 0.2307172),
    (0.08351178, 0.1686187),
]


def _example(counts: list[int]) -> tuple[dict[str, int], dict[str, float]]:
    names = [f"b{i}" for i in range(len(counts))]
    return dict(zip(names, counts, strict=True)), dict.fromkeys(names, 1.0)


def test_goodman_intervals_match_goodman_example_of_sison_glaz_paper() -> None:
    counts, weights = _example(SISON_GLAZ_COUNTS)
    result = stats.splitting_error(counts, weights, level=0.95)
    got = [result.intervals[name] for name in counts]
    for (low, high), (paper_low, paper_high) in zip(got, GOODMAN_PAPER, strict=True):
        assert round(low, 3) == paper_low
        assert round(high, 3) == paper_high


def test_sison_glaz_intervals_match_r_multinomialci() -> None:
    # The Edgeworth step amplifies rounding; R and Python agree to about 1e-4 (as statsmodels
    # found), so the tolerance is 2e-4 in share units.
    counts, weights = _example(SISON_GLAZ_COUNTS)
    result = stats.splitting_error(counts, weights, method="sison-glaz")
    assert result.method == "sison-glaz"
    for name, (r_low, r_high) in zip(counts, SISON_GLAZ_R, strict=True):
        low, high = result.intervals[name]
        assert low == pytest.approx(r_low, abs=2e-4)
        assert high == pytest.approx(r_high, abs=2e-4)


def test_sison_glaz_without_solution_falls_back_to_goodman_with_warning() -> None:
    with pytest.warns(stats.DegenerateDataWarning, match="using Goodman"):
        result = stats.splitting_error({"v1": 1, "v2": 1}, {"v1": 1, "v2": 1}, method="sison-glaz")
    assert result.method == "goodman"


def test_splitting_error_shares_and_errors() -> None:
    result = stats.splitting_error({"v1": 612, "v2": 388}, {"v1": 60, "v2": 40})
    assert result.n == 1000
    assert result.observed == pytest.approx({"v1": 0.612, "v2": 0.388})
    assert result.expected == pytest.approx({"v1": 0.6, "v2": 0.4})
    assert result.error == pytest.approx({"v1": 0.012, "v2": -0.012})
    assert result.abs_error == pytest.approx({"v1": 0.012, "v2": 0.012})
    assert result.max_abs_error == pytest.approx(0.012)
    assert result.total_variation == pytest.approx(0.012)
    assert result.zero_weight_hits == []


def test_splitting_error_g_test_follows_its_definition() -> None:
    result = stats.splitting_error({"v1": 612, "v2": 388}, {"v1": 60, "v2": 40})
    g = 2.0 * (612 * math.log(612 / 600) + 388 * math.log(388 / 400))
    assert result.g_statistic == pytest.approx(g, rel=1e-12)
    assert result.p_value == pytest.approx(scipy.stats.chi2.sf(g, 1), rel=1e-12)


def test_splitting_error_flags_hits_on_zero_weight_backend() -> None:
    result = stats.splitting_error({"v1": 990, "v2": 10}, {"v1": 100, "v2": 0})
    assert result.zero_weight_hits == ["v2"]
    assert result.expected == {"v1": 1.0, "v2": 0.0}
    assert not result.expected_within_intervals
    # One weighted backend: nothing left for the G-test to test.
    assert result.g_statistic == 0.0
    assert math.isnan(result.p_value)


def test_splitting_error_100_0_split_that_works_is_covered() -> None:
    result = stats.splitting_error({"v1": 1000, "v2": 0}, {"v1": 100, "v2": 0})
    assert result.zero_weight_hits == []
    assert result.intervals["v1"][1] == 1.0
    assert result.intervals["v2"][0] == 0.0
    assert result.expected_within_intervals
    assert result.max_abs_error == 0.0


def test_splitting_error_single_backend_has_a_certain_share() -> None:
    result = stats.splitting_error({"only": 7}, {"only": 3})
    assert result.observed == {"only": 1.0}
    assert result.intervals == {"only": (1.0, 1.0)}
    assert result.total_variation == 0.0


COVERAGE_WEIGHTS = {
    "95/5": {"v1": 95.0, "v2": 5.0},
    "60/40": {"v1": 60.0, "v2": 40.0},
    "70/30/0": {"v1": 70.0, "v2": 30.0, "v3": 0.0},
}


@pytest.mark.parametrize("split", list(COVERAGE_WEIGHTS))
def test_goodman_intervals_cover_the_true_weights_in_repeated_draws(split: str) -> None:
    # The weight-0 backend's true share is 0; under the true model it never gets a request, so
    # its interval starts at exactly 0 and covers it, and it must never be flagged.
    weights = COVERAGE_WEIGHTS[split]
    names = list(weights)
    truth = np.array([weights[name] for name in names]) / sum(weights.values())
    draws = np.random.default_rng(424242).multinomial(1000, truth, size=1000)
    covered = 0
    for draw in draws:
        result = stats.splitting_error(dict(zip(names, draw.tolist(), strict=True)), weights)
        assert result.zero_weight_hits == []
        covered += all(
            result.intervals[name][0] <= share <= result.intervals[name][1]
            for name, share in zip(names, truth, strict=True)
        )
    assert covered / len(draws) >= 0.93


def test_sison_glaz_intervals_cover_five_equal_backends_in_repeated_draws() -> None:
    weights = {f"b{i}": 1.0 for i in range(5)}
    draws = np.random.default_rng(77).multinomial(1000, [0.2] * 5, size=200)
    covered = sum(
        stats.splitting_error(
            dict(zip(weights, draw.tolist(), strict=True)), weights, method="sison-glaz"
        ).expected_within_intervals
        for draw in draws
    )
    assert covered / len(draws) >= 0.90


# Twelve requests by hand, window 5 s, starting at t = 100 s:
#   [100, 105): a a a b    -> a 3, b 1
#   [105, 110): b b a b    -> a 1, b 3   (105.0 belongs to the second window)
#   [110, 115): a a a b    -> a 3, b 1
HAND_RECORDS = [
    (100.0, "a"),
    (101.2, "b"),
    (102.5, "a"),
    (104.99, "a"),
    (105.0, "b"),
    (106.0, "b"),
    (107.5, "a"),
    (109.9, "b"),
    (110.0, "a"),
    (111.0, "a"),
    (112.0, "a"),
    (114.0, "b"),
]
HAND_COUNTS = {0.0: {"a": 3, "b": 1}, 5.0: {"a": 1, "b": 3}, 10.0: {"a": 3, "b": 1}}

LABEL_FORMS: dict[str, Callable[[list[str]], Any]] = {
    "list": lambda labels: labels,
    "numpy-U1": lambda labels: np.array(labels),
    "numpy-long-names": lambda labels: np.array([f"backend-{label}" for label in labels]),
    "object-array": lambda labels: np.array(labels, dtype=object),
    "series": lambda labels: pd.Series(labels),
    "categorical": lambda labels: pd.Categorical(labels),
}


@pytest.mark.parametrize("form", list(LABEL_FORMS))
def test_windowed_shares_counts_a_hand_made_example(form: str) -> None:
    times = [time for time, _ in HAND_RECORDS]
    labels = LABEL_FORMS[form]([label for _, label in HAND_RECORDS])
    frame = stats.windowed_shares(times, labels, window=5.0)
    prefix = "backend-" if form == "numpy-long-names" else ""
    got = {(row.window_start, row.backend): row.count for row in frame.itertuples(index=False)}
    expected = {
        (start, prefix + name): count
        for start, by_name in HAND_COUNTS.items()
        for name, count in by_name.items()
    }
    assert got == expected
    assert frame["window_total"].tolist() == [4] * 6


def test_windowed_shares_distance_to_weights() -> None:
    times = [time for time, _ in HAND_RECORDS]
    labels = [label for _, label in HAND_RECORDS]
    frame = stats.windowed_shares(times, labels, weights={"a": 1, "b": 1, "c": 0})
    # Every window: shares 3/4 and 1/4 (or the reverse) against 1/2 each; c gets nothing.
    assert frame["backend"].tolist() == ["a", "b", "c"] * 3
    assert frame["share"].tolist() == [0.75, 0.25, 0.0, 0.25, 0.75, 0.0, 0.75, 0.25, 0.0]
    assert frame["reference"].tolist() == [0.5, 0.5, 0.0] * 3
    assert frame["distance"].tolist() == [0.25, 0.25, 0.0] * 3
    assert frame["total_variation"].tolist() == [0.25] * 9


def test_windowed_shares_does_not_need_sorted_input() -> None:
    order = np.random.default_rng(9).permutation(len(HAND_RECORDS))
    times = [HAND_RECORDS[i][0] for i in order]
    labels = [HAND_RECORDS[i][1] for i in order]
    frame = stats.windowed_shares(times, labels)
    assert frame["count"].tolist() == [3, 1, 1, 3, 3, 1]


def test_windowed_shares_leaves_out_empty_windows() -> None:
    frame = stats.windowed_shares([0.0, 1.0, 11.0], ["a", "a", "a"], window=5.0)
    assert frame["window_start"].tolist() == [0.0, 10.0]
    assert frame["count"].tolist() == [2, 1]


@pytest.mark.parametrize(
    ("weights", "tolerance"),
    [
        ({"v1": 60, "v2": 40}, 0.01),
        ({"v1": 95, "v2": 5}, 0.005),
        ({"v1": 70, "v2": 30, "v3": 0}, 0.02),
        ({"v1": 25, "v2": 25, "v3": 25, "v4": 25}, 0.03),
    ],
    ids=["60/40-1pp", "95/5-0.5pp", "70/30/0-2pp", "4x25-3pp"],
)
def test_requests_needed_is_the_smallest_n_within_tolerance(
    weights: dict[str, float], tolerance: float
) -> None:
    # Goodman (1965) half-width at n requests for a share p among k backends.
    total = sum(weights.values())
    shares = [weight / total for weight in weights.values()]
    a = scipy.stats.chi2.ppf(1.0 - 0.05 / len(weights), 1)

    def widest(n: int) -> float:
        return max(
            float(math.sqrt(a * a + 4 * a * n * p * (1 - p)) / (2 * (n + a))) for p in shares
        )

    n = stats.requests_needed(weights, tolerance=tolerance)
    assert widest(n) <= tolerance
    assert widest(n - 1) > tolerance


def test_requests_needed_agrees_with_splitting_error_intervals() -> None:
    n = stats.requests_needed({"v1": 50, "v2": 50}, tolerance=0.01)
    even = n + n % 2
    result = stats.splitting_error({"v1": even // 2, "v2": even // 2}, {"v1": 1, "v2": 1})
    low, high = result.intervals["v1"]
    assert (high - low) / 2 <= 0.01
    smaller = stats.splitting_error({"v1": n // 4, "v2": n // 4}, {"v1": 1, "v2": 1})
    low, high = smaller.intervals["v1"]
    assert (high - low) / 2 > 0.01


def test_requests_needed_single_backend_needs_one_request() -> None:
    assert stats.requests_needed({"only": 1}, tolerance=0.01) == 1
