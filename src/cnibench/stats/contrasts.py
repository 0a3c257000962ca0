"""Two conditions against each other: the difference and ratio of two means with Welch's and
Fieller's (or bootstrap) intervals, and Holm's adjustment of a family of p-values."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
import numpy.typing as npt
from scipy import stats as sps

from cnibench.stats._validation import (
    FloatArray,
    RandomSource,
    _validated_choice,
    _validated_level,
    _validated_resamples,
    _validated_rng,
    _validated_values,
    _warn,
)


@dataclass(frozen=True)
class Comparison:
    """Effect of a treatment (e.g. a CNI feature switched on) against a baseline.

    Attributes
    ----------
    difference : float
        ``mean(treatment) - mean(baseline)``, in the unit of the values.
    ratio : float
        ``mean(treatment) / mean(baseline)`` (NaN when the baseline mean is 0).
    ci_low, ci_high : float
        Confidence interval of ``difference``.
    p_value : float
        Two-sided p-value of Welch's t-test (unequal variances), whatever ``method`` is.
    method : str
        How the interval was computed: ``"welch"`` or ``"bootstrap"``.
    level : float
        Confidence level of the intervals.
    baseline_mean, treatment_mean : float
        The two sample means.
    n_baseline, n_treatment : int
        The two sample sizes.
    df : float
        Welch–Satterthwaite degrees of freedom (also for ``"bootstrap"``, where it only serves
        the p-value).
    ratio_ci_low, ratio_ci_high : float
        Confidence interval of ``ratio``: Fieller's interval for ``"welch"`` (infinite when the
        baseline mean is not clearly non-zero), percentile of the same resamples for
        ``"bootstrap"``.
    """

    difference: float
    ratio: float
    ci_low: float
    ci_high: float
    p_value: float
    method: str
    level: float
    baseline_mean: float
    treatment_mean: float
    n_baseline: int
    n_treatment: int
    df: float
    ratio_ci_low: float
    ratio_ci_high: float

    @property
    def excludes_zero(self) -> bool:
        """True when the interval of the difference lies entirely above or below zero.

        Only then may a report claim that treatment and baseline differ.
        """
        return bool(self.ci_low > 0.0 or self.ci_high < 0.0)

    @property
    def relative_change(self) -> tuple[float, float, float]:
        """Relative change of treatment vs baseline in %, as ``(estimate, low, high)``.

        ``100 * (ratio - 1)`` with the bounds of the ratio's interval. For ``"welch"`` the
        Fieller interval excludes 0 % exactly when the difference interval excludes 0.
        """
        return (
            100.0 * (self.ratio - 1.0),
            100.0 * (self.ratio_ci_low - 1.0),
            100.0 * (self.ratio_ci_high - 1.0),
        )

    def statement(self, baseline: str = "baseline", treatment: str = "treatment") -> str:
        """One sentence for a report, claiming a difference only when the interval excludes 0.

        Parameters
        ----------
        baseline, treatment : str
            Names of the two conditions, e.g. ``"iptables"`` and ``"eBPF"``.

        Returns
        -------
        str
            For example ``"eBPF is 10.3% lower than iptables (95% CI 7.4% to 13.3% lower)"``.
        """
        estimate, low, high = self.relative_change
        level = f"{100.0 * self.level:g}%"
        if not self.excludes_zero:
            return (
                f"no significant difference between {treatment} and {baseline} "
                f"({level} CI of the change {low:+.1f}% to {high:+.1f}%)"
            )
        if not (math.isfinite(low) and math.isfinite(high)):
            # The baseline mean is not clearly non-zero, so no relative interval exists; the
            # absolute difference still has one, in the data's own unit.
            direction = "higher" if self.difference >= 0.0 else "lower"
            return (
                f"{treatment} is {abs(self.difference):.4g} {direction} than {baseline} "
                f"({level} CI of the difference {self.ci_low:.4g} to {self.ci_high:.4g}; "
                "no relative interval: the baseline mean is too uncertain)"
            )
        if estimate >= 0.0:
            return (
                f"{treatment} is {estimate:.1f}% higher than {baseline} "
                f"({level} CI {low:.1f}% to {high:.1f}%)"
            )
        return (
            f"{treatment} is {-estimate:.1f}% lower than {baseline} "
            f"({level} CI {-high:.1f}% to {-low:.1f}% lower)"
        )


def _fieller(
    mean_b: float, var_b: float, mean_t: float, var_t: float, quantile: float
) -> tuple[float, float]:
    """Fieller interval of mean_t / mean_b from the two means and their squared standard errors.

    The set of ratios r with (mean_t - r mean_b)^2 <= q^2 (var_t + r^2 var_b) is an interval when
    the baseline mean is significantly non-zero (a > 0), else it is unbounded.
    """
    a = mean_b**2 - quantile**2 * var_b
    if a <= 0.0:
        return -math.inf, math.inf
    half = quantile * math.sqrt(mean_t**2 * var_b + var_t * a)
    return (mean_t * mean_b - half) / a, (mean_t * mean_b + half) / a


def compare(
    baseline: npt.ArrayLike,
    treatment: npt.ArrayLike,
    *,
    level: float = 0.95,
    method: Literal["welch", "bootstrap"] = "welch",
    rng: RandomSource = None,
    n_resamples: int = 9999,
) -> Comparison:
    """Difference and ratio of two means with confidence intervals and Welch's p-value.

    Parameters
    ----------
    baseline, treatment : array_like
        One value per run of each condition, same unit (e.g. bits/s for iperf3 throughput).
    level : float, default 0.95
        Confidence level, strictly between 0 and 1.
    method : {"welch", "bootstrap"}, default "welch"
        Interval of the difference from Welch's t distribution, or from a BCa bootstrap of the
        two independent samples.
    rng : numpy.random.Generator or int, optional
        Randomness of the bootstrap; ignored for ``"welch"``.
    n_resamples : int, default 9999
        Bootstrap resamples.

    Returns
    -------
    Comparison
        ``difference = mean(treatment) - mean(baseline)`` and
        ``ratio = mean(treatment) / mean(baseline)`` with their intervals;
        :attr:`Comparison.excludes_zero` and :meth:`Comparison.statement` turn it into words.

    Raises
    ------
    InsufficientDataError
        Either sample empty or with NaN/infinite values.
    ConfigError
        ``level`` outside (0, 1), unknown ``method``, bad ``n_resamples``.

    Warns
    -----
    DegenerateDataWarning
        A sample with fewer than 2 values (intervals and p-value are NaN), both samples constant
        (intervals collapse to the estimates), or a zero baseline mean (ratio is NaN).

    Notes
    -----
    With :math:`v_b = s_b^2/n_b` and :math:`v_t = s_t^2/n_t`, Welch's interval is
    :math:`\\bar t - \\bar b \\pm t_{1-\\alpha/2,\\nu}\\sqrt{v_b + v_t}` with the
    Welch–Satterthwaite degrees of freedom
    :math:`\\nu = (v_b + v_t)^2 / (v_b^2/(n_b-1) + v_t^2/(n_t-1))`. The p-value is that of
    ``scipy.stats.ttest_ind(treatment, baseline, equal_var=False)`` for both methods. The ratio's
    interval (``"welch"``) is Fieller's: all :math:`r` with
    :math:`(\\bar t - r\\bar b)^2 \\le t^2 (v_t + r^2 v_b)`, using the same quantile, so it excludes
    1 exactly when the difference interval excludes 0.

    References
    ----------
    B. L. Welch, "The generalization of Student's problem when several different population
    variances are involved", Biometrika 34 (1947) 28-35.
    E. C. Fieller, "Some problems in interval estimation", JRSS B 16 (1954) 175-185.

    Examples
    --------
    >>> iptables = [7850.0, 7760.0, 7870.0, 7860.0, 8100.0]  # Mbps
    >>> ebpf = [6840.0, 6900.0, 7180.0, 7190.0, 7250.0]
    >>> c = compare(iptables, ebpf)
    >>> c.excludes_zero, round(c.relative_change[0], 1)
    (True, -10.3)
    >>> c.statement("iptables", "eBPF")
    'eBPF is 10.3% lower than iptables (95% CI 7.4% to 13.3% lower)'
    """
    b = _validated_values(baseline, "baseline")
    t = _validated_values(treatment, "treatment")
    confidence = _validated_level(level)
    chosen = _validated_choice(method, ("welch", "bootstrap"), "method")
    resamples = _validated_resamples(n_resamples)
    mean_b, mean_t = float(np.mean(b)), float(np.mean(t))
    difference = mean_t - mean_b
    if mean_b == 0.0:
        _warn("the baseline mean is 0: the ratio is undefined (NaN)")
        ratio = math.nan
    else:
        ratio = mean_t / mean_b

    def result(
        ci: tuple[float, float], p_value: float, df: float, ratio_ci: tuple[float, float]
    ) -> Comparison:
        return Comparison(
            difference=difference,
            ratio=ratio,
            ci_low=ci[0],
            ci_high=ci[1],
            p_value=p_value,
            method=chosen,
            level=confidence,
            baseline_mean=mean_b,
            treatment_mean=mean_t,
            n_baseline=int(b.size),
            n_treatment=int(t.size),
            df=df,
            ratio_ci_low=ratio_ci[0],
            ratio_ci_high=ratio_ci[1],
        )

    if b.size < 2 or t.size < 2:
        _warn(
            f"comparing needs at least 2 values per sample, got {b.size} and {t.size}: "
            "intervals and p-value are NaN"
        )
        return result((math.nan, math.nan), math.nan, math.nan, (math.nan, math.nan))
    var_b = float(np.var(b, ddof=1)) / b.size
    var_t = float(np.var(t, ddof=1)) / t.size
    if var_b + var_t == 0.0:
        _warn("both samples are constant: intervals have zero width and the p-value is NaN")
        return result((difference, difference), math.nan, math.nan, (ratio, ratio))
    df = (var_b + var_t) ** 2 / (var_b**2 / (b.size - 1) + var_t**2 / (t.size - 1))
    p_value = float(sps.ttest_ind(t, b, equal_var=False).pvalue)
    if chosen == "welch":
        quantile = float(sps.t.ppf(0.5 + confidence / 2.0, df))
        half = quantile * math.sqrt(var_b + var_t)
        if math.isnan(ratio):
            ratio_ci = (math.nan, math.nan)
        else:
            ratio_ci = _fieller(mean_b, var_b, mean_t, var_t, quantile)
            if math.isinf(ratio_ci[0]):
                _warn("the baseline mean is not clearly non-zero: the ratio interval is unbounded")
        return result((difference - half, difference + half), p_value, df, ratio_ci)

    def difference_and_ratio(
        base: FloatArray, treat: FloatArray, axis: int = -1
    ) -> npt.NDArray[Any]:
        means_b = np.mean(base, axis=axis)
        means_t = np.mean(treat, axis=axis)
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.stack([means_t - means_b, means_t / means_b])

    boot = sps.bootstrap(
        (b, t),
        difference_and_ratio,
        confidence_level=confidence,
        n_resamples=resamples,
        method="BCa",
        rng=_validated_rng(rng),
    )
    lows, highs = boot.confidence_interval.low, boot.confidence_interval.high
    ratio_ci = (math.nan, math.nan) if math.isnan(ratio) else (float(lows[1]), float(highs[1]))
    return result((float(lows[0]), float(highs[0])), p_value, df, ratio_ci)


def holm_adjusted(p_values: npt.ArrayLike) -> FloatArray:
    """Holm's step-down adjusted p-values of a family of tests.

    Parameters
    ----------
    p_values : array_like
        One p-value per test, each in [0, 1]; NaN marks a test without a p-value, which is
        left out of the family and stays NaN.

    Returns
    -------
    numpy.ndarray
        Adjusted p-values in input order: rejecting every test whose adjusted p-value is at
        most ``alpha`` keeps the family-wise error rate at ``alpha`` under any dependence
        between the tests.

    Raises
    ------
    ValueError
        A p-value outside [0, 1] or an infinite one.

    Notes
    -----
    With the ``m`` finite p-values sorted, :math:`p_{(1)} \\le \\dots \\le p_{(m)}`, the adjusted
    value of the ``i``-th is :math:`\\max_{j \\le i} \\min(1, (m - j + 1)\\, p_{(j)})`.

    References
    ----------
    S. Holm, "A simple sequentially rejective multiple test procedure", Scandinavian Journal of
    Statistics 6 (1979) 65-70.

    Examples
    --------
    >>> holm_adjusted([0.01, 0.04, 0.03]).tolist()
    [0.03, 0.06, 0.06]
    """
    p = np.asarray(p_values, dtype=np.float64).reshape(-1)
    known = ~np.isnan(p)
    if np.any(np.isinf(p)) or np.any((p[known] < 0.0) | (p[known] > 1.0)):
        raise ValueError(f"p-values must lie in [0, 1], got {p.tolist()}")
    out = np.full(p.shape, np.nan)
    finite = np.flatnonzero(known)
    m = finite.size
    if m == 0:
        return out
    order = finite[np.argsort(p[finite], kind="stable")]
    scaled = (m - np.arange(m)) * p[order]
    out[order] = np.minimum(1.0, np.maximum.accumulate(scaled))
    return out
