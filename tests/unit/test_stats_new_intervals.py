"""The intervals and tests of issue 23, each checked against scipy or statsmodels (never
against numbers copied from the code under test)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats as sps
from statsmodels.stats.power import GofChisquarePower, TTestIndPower
from statsmodels.stats.proportion import confint_proportions_2indep, proportion_confint

from cnibench import stats
from cnibench.errors import ConfigError, InsufficientDataError
from cnibench.report.compare import Direction, gate_interval, session_variance


@pytest.mark.parametrize(
    "values",
    [[100.0, 110.0, 90.0, 105.0], [9.5, 9.6, 9.4, 9.55, 5.0], [4.2e9, 19.6e9]],
    ids=["four-runs", "one-low-run", "two-far-apart"],
)
def test_geometric_mean_interval_is_scipys_t_interval_of_the_logs(values):
    ci = stats.geometric_mean_interval(values)
    logs = np.log(values)
    low, high = sps.t.interval(0.95, logs.size - 1, loc=logs.mean(), scale=sps.sem(logs))
    assert ci.estimate == pytest.approx(sps.gmean(values))
    assert (ci.low, ci.high) == pytest.approx((math.exp(low), math.exp(high)))
    assert ci.estimate**2 == pytest.approx(ci.low * ci.high)


def test_geometric_mean_of_a_non_positive_value_is_refused():
    with pytest.raises(InsufficientDataError, match="positive"):
        stats.geometric_mean_interval([1.0, 0.0, 2.0])


@pytest.mark.parametrize(("k", "n"), [(4, 5), (0, 5), (5, 5), (1, 3), (37, 120)])
def test_clopper_pearson_is_scipys_exact_interval(k, n):
    ci = stats.proportion_interval(k, n)
    exact = sps.binomtest(k, n).proportion_ci(0.95, method="exact")
    assert (ci.estimate, ci.low, ci.high) == pytest.approx((k / n, exact.low, exact.high))


@pytest.mark.parametrize(("k", "n"), [(4, 5), (0, 5), (5, 5), (37, 120)])
def test_wilson_is_statsmodels_wilson(k, n):
    ci = stats.proportion_interval(k, n, method="wilson", level=0.9)
    low, high = proportion_confint(k, n, alpha=0.1, method="wilson")
    assert (ci.low, ci.high) == pytest.approx((low, high))


def test_four_of_five_reachable_is_0_28_to_0_99():
    ci = stats.proportion_interval(4, 5)
    assert (round(ci.low, 2), round(ci.high, 2)) == (0.28, 0.99)


@pytest.mark.parametrize(
    ("kc", "nc", "kt", "nt"), [(5, 5, 4, 5), (0, 10, 3, 10), (40, 50, 30, 45), (7, 7, 7, 7)]
)
def test_proportion_difference_is_statsmodels_newcombe_and_scipys_fisher(kc, nc, kt, nt):
    got = stats.proportion_difference(kc, nc, kt, nt)
    low, high = confint_proportions_2indep(kt, nt, kc, nc, method="newcomb", compare="diff")
    assert (got.difference, got.low, got.high) == pytest.approx((kt / nt - kc / nc, low, high))
    assert got.p_value == pytest.approx(sps.fisher_exact([[kt, nt - kt], [kc, nc - kc]]).pvalue)


@pytest.mark.parametrize(("successes", "trials"), [(6, 5), (-1, 5), (1, 0), (1.5, 3)])
def test_impossible_counts_are_one_line_errors(successes, trials):
    with pytest.raises(InsufficientDataError) as caught:
        stats.proportion_interval(successes, trials)
    assert "\n" not in str(caught.value)


@pytest.mark.parametrize(("n1", "n2"), [(3, 3), (5, 5), (4, 8), (20, 20)])
def test_detectable_effect_is_statsmodels_t_test_power(n1, n2):
    expected = TTestIndPower().solve_power(
        effect_size=None, nobs1=n1, ratio=n2 / n1, alpha=0.05, power=0.8
    )
    assert stats.detectable_effect(0.03, n1, n2) == pytest.approx(0.03 * expected, rel=1e-6)


@pytest.mark.parametrize("effect", [0.25, 0.8, 2.0])
def test_runs_needed_is_statsmodels_sample_size_rounded_up(effect):
    expected = TTestIndPower().solve_power(effect_size=effect, nobs1=None, alpha=0.05, power=0.8)
    assert stats.runs_needed(0.04, 0.04 * effect) == max(2, math.ceil(expected))


@pytest.mark.parametrize(
    "weights", [{"v1": 60, "v2": 40}, {"v1": 70, "v2": 30}, {"a": 50, "b": 30, "c": 20}]
)
def test_requests_to_detect_a_5_point_skew_is_statsmodels_gof_power(weights):
    shares = sorted((w / sum(weights.values()) for w in weights.values()), reverse=True)
    effect = math.sqrt(0.05**2 * (1 / shares[0] + 1 / shares[1]))
    expected = GofChisquarePower().solve_power(
        effect_size=effect, nobs=None, n_bins=len(weights), alpha=0.01, power=0.9
    )
    assert stats.requests_to_detect_skew(weights) == math.ceil(expected)
    # Overdispersion between runs costs requests in proportion.
    assert stats.requests_to_detect_skew(weights, dispersion=2.0) == 2 * math.ceil(expected)


def test_split_test_without_overdispersion_is_pearsons_chi_square_of_the_pooled_counts():
    runs = [{"v1": 620, "v2": 380}, {"v1": 590, "v2": 410}, {"v1": 605, "v2": 395}]
    got = stats.split_test(runs, {"v1": 60, "v2": 40})
    pooled = sps.chisquare([1815, 1185], f_exp=[1800, 1200])
    # Heterogeneity between runs by scipy's contingency chi-square: below its df here.
    het = sps.chi2_contingency([[620, 380], [590, 410], [605, 395]], correction=False)
    assert het.statistic / het.dof < 1
    assert got.dispersion == 1.0
    assert (got.statistic, got.p_value) == pytest.approx((pooled.statistic, pooled.pvalue))


def test_split_test_with_overdispersed_runs_is_a_quasi_likelihood_f_test():
    runs = [{"v1": 700, "v2": 300}, {"v1": 520, "v2": 480}, {"v1": 640, "v2": 360}]
    got = stats.split_test(runs, {"v1": 60, "v2": 40})
    het = sps.chi2_contingency([[700, 300], [520, 480], [640, 360]], correction=False)
    phi = het.statistic / het.dof
    pooled = sps.chisquare([1860, 1140], f_exp=[1800, 1200])
    assert got.dispersion == pytest.approx(phi)
    assert got.p_value == pytest.approx(sps.f.sf(pooled.statistic / phi, 1, het.dof))
    # Quasi-multinomial Goodman: Goodman's formula with phi * F(1, 2) in place of chi2(1),
    # both at 1 - 0.05 / 2 (two backends), i.e. Goodman on the counts divided by phi.
    a = phi * sps.f.ppf(1 - 0.05 / 2, 1, het.dof)
    assert a > sps.chi2.ppf(1 - 0.05 / 2, 1)
    n, n1 = 3000, 1860
    root = math.sqrt(a * (a + 4 * n1 * (n - n1) / n))
    expected = ((a + 2 * n1 - root) / (2 * (n + a)), (a + 2 * n1 + root) / (2 * (n + a)))
    assert got.intervals["v1"] == pytest.approx(expected)
    assert got.dispersion_df == het.dof


def test_split_test_refuses_runs_naming_other_backends():
    with pytest.raises(ConfigError):
        stats.split_test([{"v1": 5, "v3": 5}], {"v1": 1, "v2": 1})


def test_summarize_runs_flags_outliers_and_keeps_them_in_the_estimate():
    values = [9.5, 9.6, 9.4, 9.55, 5.0]
    summary = stats.summarize_runs(values)
    assert [o.index for o in summary.outliers] == [4]
    assert summary.n == 5
    assert summary.mean == pytest.approx(sps.gmean(values))
    assert summary.estimator == "geometric mean"


def test_summarize_runs_of_a_yes_no_metric_refuses_other_values():
    with pytest.raises(ConfigError, match="0 or 1"):
        stats.summarize_runs([1.0, 0.5], scale="binary")


def test_session_variance_recovers_a_planted_component():
    # Three sessions whose means differ by exactly +-d on the log scale, no run noise.
    d = 0.03
    sessions = [np.exp(np.full(4, shift)) for shift in (-d, 0.0, d)]
    got = session_variance([sessions, sessions])
    assert got is not None
    assert got.variance == pytest.approx(np.var([-d, 0.0, d], ddof=1))
    assert got.df == 4
    assert session_variance([[np.array([1.0, 2.0])]]) is None


def test_gate_interval_adds_the_session_variance_to_the_run_noise():
    base = [np.array([100.0, 102.0, 98.0]), np.array([103.0, 101.0, 104.0])]
    cand = [np.array([95.0, 97.0, 96.0])]
    between = session_variance([base])
    assert between is not None
    got = gate_interval(base, cand, Direction.HIGHER_IS_BETTER, level=0.95, between=between)
    logs = [np.log(v) for v in (*base, *cand)]
    within = sum(((v - v.mean()) ** 2).sum() for v in logs) / sum(v.size - 1 for v in logs)
    part_s = between.variance * (1 / 2 + 1)
    part_w = within * (1 / 6 + 1 / 3)
    se = math.sqrt(part_s + part_w)
    df = (part_s + part_w) ** 2 / (part_s**2 / between.df + part_w**2 / 6)
    log_ratio = np.log(np.concatenate(cand)).mean() - np.log(np.concatenate(base)).mean()
    q = sps.t.ppf(0.975, df)
    assert (got.low, got.high) == pytest.approx(
        (math.exp(log_ratio - q * se), math.exp(log_ratio + q * se))
    )
    assert got.p_worse == pytest.approx(sps.t.sf(-log_ratio / se, df))
