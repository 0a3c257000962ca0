"""cnibench.stats confidence intervals and two-sample comparisons, checked against scipy."""

from __future__ import annotations

import math

import numpy as np
import pytest
import scipy.stats

from cnibench import stats

SAMPLES = {
    "iperf3-mbps": [7660.57, 7757.71, 7867.42, 7864.38, 8104.38],
    "sockperf-us": [504.884, 500.168, 501.531, 502.710, 505.814, 498.2, 507.9, 503.3],
    "skewed-30": np.random.default_rng(11).lognormal(3.0, 0.8, size=30).tolist(),
}
LEVELS = [0.8, 0.9, 0.95, 0.99]


@pytest.mark.parametrize("level", LEVELS, ids=lambda level: f"level{level}")
@pytest.mark.parametrize("name", list(SAMPLES))
def test_t_interval_equals_scipy_t_interval(name: str, level: float) -> None:
    values = np.asarray(SAMPLES[name])
    sem = values.std(ddof=1) / math.sqrt(values.size)
    low, high = scipy.stats.t.interval(level, values.size - 1, loc=values.mean(), scale=sem)
    interval = stats.confidence_interval(values, level=level)
    assert interval.estimate == pytest.approx(values.mean(), rel=1e-12)
    assert (interval.low, interval.high) == pytest.approx((low, high), rel=1e-12)
    assert (interval.level, interval.method, interval.n) == (level, "t", values.size)


@pytest.mark.parametrize("flavour", ["BCa", "percentile", "basic"])
@pytest.mark.parametrize("name", list(SAMPLES))
def test_bootstrap_interval_equals_scipy_bootstrap_with_same_seed(name: str, flavour: str) -> None:
    values = np.asarray(SAMPLES[name])
    reference = scipy.stats.bootstrap(
        (values,),
        np.mean,
        confidence_level=0.95,
        n_resamples=2000,
        method=flavour,
        rng=np.random.default_rng(20240601),
    )
    interval = stats.confidence_interval(
        values,
        method="bootstrap",
        bootstrap_method=flavour,
        n_resamples=2000,
        rng=np.random.default_rng(20240601),
    )
    assert interval.low == reference.confidence_interval.low
    assert interval.high == reference.confidence_interval.high
    assert interval.bootstrap_distribution is not None
    assert interval.bootstrap_distribution.shape == (2000,)


def test_bootstrap_interval_with_integer_seed_is_reproducible() -> None:
    values = SAMPLES["skewed-30"]
    first = stats.confidence_interval(values, method="bootstrap", rng=7, n_resamples=500)
    second = stats.confidence_interval(values, method="bootstrap", rng=7, n_resamples=500)
    assert (first.low, first.high) == (second.low, second.high)
    assert first.low < first.estimate < first.high


def test_interval_of_one_value_warns_and_has_nan_bounds() -> None:
    with pytest.warns(stats.DegenerateDataWarning, match="at least 2 values"):
        interval = stats.confidence_interval([5.2])
    assert interval.estimate == 5.2
    assert math.isnan(interval.low)
    assert math.isnan(interval.high)


@pytest.mark.parametrize("method", ["t", "bootstrap"])
def test_interval_of_equal_values_warns_and_has_zero_width(method: str) -> None:
    with pytest.warns(stats.DegenerateDataWarning, match="zero width"):
        interval = stats.confidence_interval([3.0, 3.0, 3.0], method=method)
    assert (interval.low, interval.estimate, interval.high) == (3.0, 3.0, 3.0)


PAIRS = {
    "seed001-idle-throughput": (
        [7660.57, 7757.71, 7867.42, 7864.38, 8104.38],
        [6840.76, 6901.81, 7176.38, 7186.28, 7252.80],
    ),
    "seed001-idle-cpu": ([19.21, 19.30, 19.24, 19.24, 19.41], [19.28, 19.58, 19.14, 19.07, 19.20]),
    "unequal-sizes": (
        np.random.default_rng(5).normal(100.0, 3.0, size=6).tolist(),
        np.random.default_rng(6).normal(104.0, 9.0, size=15).tolist(),
    ),
}


@pytest.mark.parametrize("name", list(PAIRS))
def test_compare_p_value_equals_scipy_welch_test(name: str) -> None:
    baseline, treatment = PAIRS[name]
    expected = scipy.stats.ttest_ind(treatment, baseline, equal_var=False)
    result = stats.compare(baseline, treatment)
    assert result.p_value == pytest.approx(expected.pvalue, rel=1e-12)
    assert result.df == pytest.approx(expected.df, rel=1e-12)


@pytest.mark.parametrize("level", [0.9, 0.95, 0.99], ids=lambda level: f"level{level}")
@pytest.mark.parametrize("name", list(PAIRS))
def test_compare_welch_interval_equals_scipy_welch_interval(name: str, level: float) -> None:
    baseline, treatment = PAIRS[name]
    expected = scipy.stats.ttest_ind(treatment, baseline, equal_var=False).confidence_interval(
        confidence_level=level
    )
    result = stats.compare(baseline, treatment, level=level)
    assert (result.ci_low, result.ci_high) == pytest.approx(
        (expected.low, expected.high), rel=1e-10
    )


def test_compare_difference_and_ratio_are_treatment_over_baseline() -> None:
    result = stats.compare([10.0, 12.0, 14.0], [15.0, 18.0, 21.0])
    assert result.difference == pytest.approx(6.0)
    assert result.ratio == pytest.approx(1.5)
    assert (result.baseline_mean, result.treatment_mean) == pytest.approx((12.0, 18.0))


@pytest.mark.parametrize("name", list(PAIRS))
def test_compare_fieller_ratio_bounds_solve_the_fieller_equation(name: str) -> None:
    baseline, treatment = (np.asarray(sample) for sample in PAIRS[name])
    result = stats.compare(baseline, treatment)
    var_b = baseline.var(ddof=1) / baseline.size
    var_t = treatment.var(ddof=1) / treatment.size
    q = scipy.stats.t.ppf(0.975, result.df)
    for r in (result.ratio_ci_low, result.ratio_ci_high):
        lhs = (treatment.mean() - r * baseline.mean()) ** 2
        rhs = q**2 * (var_t + r**2 * var_b)
        assert lhs == pytest.approx(rhs, rel=1e-9)
    assert result.ratio_ci_low < result.ratio < result.ratio_ci_high


@pytest.mark.parametrize("name", list(PAIRS))
def test_compare_ratio_interval_excludes_one_exactly_when_difference_excludes_zero(
    name: str,
) -> None:
    baseline, treatment = PAIRS[name]
    result = stats.compare(baseline, treatment)
    ratio_excludes_one = result.ratio_ci_low > 1.0 or result.ratio_ci_high < 1.0
    assert ratio_excludes_one == result.excludes_zero


def test_compare_statement_claims_a_difference_when_interval_excludes_zero() -> None:
    baseline, treatment = PAIRS["seed001-idle-throughput"]
    result = stats.compare(baseline, treatment)
    assert result.excludes_zero
    estimate, low, high = result.relative_change
    assert estimate == pytest.approx(100.0 * (7071.606 / 7850.892 - 1.0))
    assert low < estimate < high < 0.0
    assert result.statement("iptables", "eBPF").startswith("eBPF is 9.9% lower than iptables")


def test_compare_statement_claims_nothing_when_interval_contains_zero() -> None:
    baseline, treatment = PAIRS["seed001-idle-cpu"]
    result = stats.compare(baseline, treatment)
    assert not result.excludes_zero
    assert result.statement("iptables", "eBPF").startswith("no significant difference")


def test_compare_bootstrap_is_reproducible_and_brackets_the_difference() -> None:
    baseline, treatment = PAIRS["unequal-sizes"]
    first = stats.compare(baseline, treatment, method="bootstrap", rng=3, n_resamples=2000)
    second = stats.compare(baseline, treatment, method="bootstrap", rng=3, n_resamples=2000)
    assert (first.ci_low, first.ci_high) == (second.ci_low, second.ci_high)
    assert first.ci_low < first.difference < first.ci_high
    assert first.ratio_ci_low < first.ratio < first.ratio_ci_high
    assert first.method == "bootstrap"
    welch = stats.compare(baseline, treatment)
    assert first.p_value == welch.p_value


def test_compare_with_one_value_per_side_warns_and_has_nan_interval() -> None:
    with pytest.warns(stats.DegenerateDataWarning, match="at least 2 values per sample"):
        result = stats.compare([1.0], [2.0])
    assert result.difference == 1.0
    assert math.isnan(result.ci_low)
    assert math.isnan(result.p_value)


def test_compare_constant_samples_warn_and_collapse_the_interval() -> None:
    with pytest.warns(stats.DegenerateDataWarning, match="both samples are constant"):
        result = stats.compare([2.0, 2.0], [3.0, 3.0, 3.0])
    assert (result.ci_low, result.ci_high) == (1.0, 1.0)
    assert result.excludes_zero
