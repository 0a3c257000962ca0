"""Paired rounds and per-question families, checked against statsmodels and scipy (independent
implementations) and against the property each promises: a call interval excludes no change
exactly when Holm rejects."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats as sps
from statsmodels.stats.multitest import multipletests
from statsmodels.stats.power import TTestPower
from statsmodels.stats.weightstats import DescrStatsW

from cnibench import stats
from cnibench.errors import InsufficientDataError


@pytest.mark.parametrize("seed", range(5), ids=lambda s: f"seed{s}")
def test_paired_log_ratio_matches_statsmodels_on_the_log_differences(seed: int) -> None:
    rng = np.random.default_rng(seed)
    rounds = np.exp(rng.normal(0.0, 0.05, 7))
    control = 10e9 * rounds * np.exp(rng.normal(0.0, 0.02, 7))
    treatment = 10.5e9 * rounds * np.exp(rng.normal(0.0, 0.02, 7))
    result = stats.paired_log_ratio(control, treatment, level=0.9)
    reference = DescrStatsW(np.log(treatment) - np.log(control))
    low, high = reference.tconfint_mean(alpha=0.1)
    assert result.low == pytest.approx(low, rel=1e-10)
    assert result.high == pytest.approx(high, rel=1e-10)
    assert result.p_value == pytest.approx(sps.ttest_rel(np.log(treatment), np.log(control)).pvalue)
    assert result.ratio == pytest.approx(math.exp(reference.mean))
    assert result.n_pairs == 7
    assert result.df == 6


def test_pairing_removes_the_round_effect_that_welch_keeps() -> None:
    """A round effect ten times the run noise: the paired interval is far narrower."""
    rng = np.random.default_rng(1)
    rounds = np.exp(rng.normal(0.0, 0.2, 6))
    control = rounds * np.exp(rng.normal(0.0, 0.02, 6))
    treatment = 1.05 * rounds * np.exp(rng.normal(0.0, 0.02, 6))
    paired = stats.paired_log_ratio(control, treatment)
    welch = sps.ttest_ind(np.log(treatment), np.log(control), equal_var=False)
    assert paired.low > 0.0  # the ×1.05 is found
    assert welch.pvalue > 0.05  # and lost without the pairing
    assert paired.high - paired.low < 0.1


def test_unequal_sides_are_no_pairs() -> None:
    with pytest.raises(InsufficientDataError, match="one value per round"):
        stats.paired_difference([1.0, 2.0, 3.0], [1.0, 2.0])
    with pytest.raises(InsufficientDataError, match="positive"):
        stats.paired_log_ratio([1.0, 0.0], [1.0, 2.0])


@pytest.mark.parametrize(("effect", "pairs"), [(0.5, 6), (1.0, 4), (0.3, 20)])
def test_paired_power_matches_statsmodels(effect: float, pairs: int) -> None:
    expected = TTestPower().power(effect_size=effect, nobs=pairs, alpha=0.05)
    assert stats.paired_power(effect, 1.0, pairs, alpha=0.05) == pytest.approx(expected, rel=1e-6)


def test_paired_runs_needed_is_the_smallest_that_reaches_the_power() -> None:
    sd, margin, alpha = 0.03, math.log(1.05), 0.01
    n = stats.paired_runs_needed(sd, margin, alpha=alpha, power=0.8)
    solver = TTestPower()
    assert solver.power(effect_size=margin / sd, nobs=n, alpha=alpha) >= 0.8
    assert solver.power(effect_size=margin / sd, nobs=n - 1, alpha=alpha) < 0.8


def test_an_sd_from_few_rounds_asks_for_more_rounds() -> None:
    plug_in = stats.paired_runs_needed(0.03, math.log(1.05))
    bounded = stats.paired_runs_needed(0.03, math.log(1.05), df_sd=4)
    assert bounded > plug_in


def test_family_holm_matches_statsmodels_within_each_family() -> None:
    rng = np.random.default_rng(3)
    p = rng.uniform(0.0, 0.2, 12)
    families = ["egress@vxlan"] * 5 + ["cilium vs flannel"] * 4 + ["wireguard@vxlan"] * 3
    adjusted = stats.family_holm(p, families)
    for name in dict.fromkeys(families):
        members = [i for i, f in enumerate(families) if f == name]
        expected = multipletests(p[members], method="holm")[1]
        np.testing.assert_allclose(adjusted[members], expected)


def test_a_family_of_one_is_not_corrected() -> None:
    adjusted = stats.family_holm([0.03, 0.03, 0.03], ["a", "b", "b"])
    assert adjusted[0] == pytest.approx(0.03)
    assert adjusted[1] == pytest.approx(0.06)


@pytest.mark.parametrize("seed", range(20), ids=lambda s: f"seed{s}")
def test_the_call_interval_excludes_no_change_exactly_when_holm_rejects(seed: int) -> None:
    rng = np.random.default_rng(seed)
    family = []
    for shift in (0.0, 0.02, 0.05, 0.1):
        control = rng.normal(0.0, 0.05, 5)
        treatment = rng.normal(shift, 0.05, 5)
        family.append(stats.compare(control, treatment, level=0.95))
    p = np.array([c.p_value for c in family])
    adjusted = stats.family_holm(p, ["row"] * len(family))
    levels = stats.call_levels(p, adjusted, level=0.95)
    for comparison, p_adj, to_level in zip(family, adjusted, levels, strict=True):
        assert 0.95 - 1e-12 <= to_level <= 1.0 - 0.05 / len(family) + 1e-12
        low, high = stats.interval_at_level(
            comparison.difference,
            comparison.ci_low,
            comparison.ci_high,
            comparison.df,
            level=0.95,
            to_level=to_level,
        )
        excludes = low > 0.0 or high < 0.0
        if abs(p_adj - 0.05) > 1e-9:
            assert excludes == (p_adj <= 0.05), (p_adj, low, high)


def test_interval_at_level_matches_a_fresh_student_interval() -> None:
    values = np.array([1.0, 1.4, 0.9, 1.3, 1.1])
    wide = DescrStatsW(values).tconfint_mean(alpha=0.01)
    narrow = DescrStatsW(values).tconfint_mean(alpha=0.05)
    moved = stats.interval_at_level(
        float(values.mean()), *narrow, df=4.0, level=0.95, to_level=0.99
    )
    np.testing.assert_allclose(moved, wide)
