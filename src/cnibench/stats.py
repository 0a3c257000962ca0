"""Statistics for benchmark results: summaries, intervals, comparisons and traffic-split accuracy.

Every function here is pure: data go in as the first argument(s), options are keyword-only, and a
frozen result dataclass comes out that keeps the raw material it was computed from (sample sizes,
levels, bootstrap distributions). The functions are unit-agnostic: an estimate carries the unit of
the values passed in (bits/s, µs, %, MB, seconds); shares and weights are fractions in [0, 1].

Error policy
------------
* Bad *data* (empty input, NaN or infinite values, negative counts, mismatched lengths, missing
  backend labels) raises :class:`cnibench.errors.InsufficientDataError`.
* Bad *options* (``level`` outside (0, 1), negative or all-zero weights, weights and counts that
  name different backends, unknown ``method``, non-positive ``window`` or ``tolerance``) raises
  :class:`cnibench.errors.ConfigError`.
* Valid but degenerate data (a single value, zero variance) emits :class:`DegenerateDataWarning`
  and returns the degenerate result each function documents; it never crashes.

Both error types derive from :class:`ValueError`.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, TypeAlias

import numpy as np
import numpy.typing as npt
import pandas as pd
from scipy import integrate, optimize
from scipy import stats as sps

from cnibench.errors import ConfigError, InsufficientDataError

__all__ = [
    "Comparison",
    "DegenerateDataWarning",
    "Histogram",
    "Interval",
    "Outlier",
    "ProportionDifference",
    "RunSummary",
    "SkewPlan",
    "SplitResult",
    "SplitTest",
    "Summary",
    "compare",
    "confidence_interval",
    "describe",
    "detectable_effect",
    "geometric_mean_interval",
    "histogram",
    "holm_adjusted",
    "outlier_report",
    "outlier_runs",
    "outlier_threshold",
    "proportion_difference",
    "proportion_interval",
    "requests_needed",
    "requests_to_detect_skew",
    "runs_needed",
    "skew_detection_plan",
    "split_test",
    "split_test_power",
    "splitting_error",
    "summarize_runs",
    "trimmed_sample",
    "truncated_mean",
    "truncated_mean_interval",
    "windowed_shares",
]

FloatArray: TypeAlias = npt.NDArray[np.float64]
IntArray: TypeAlias = npt.NDArray[np.int64]
RandomSource: TypeAlias = "np.random.Generator | int | None"
BootstrapMethod: TypeAlias = Literal["BCa", "percentile", "basic"]

# Iglewicz & Hoaglin (1993): 0.6745 = Φ⁻¹(0.75) makes the MAD a consistent estimator of σ for
# normal data; sqrt(π/2) does the same for the mean absolute deviation (fallback when MAD = 0).
_MAD_TO_SIGMA = 0.6745
_MEAN_AD_TO_SIGMA = math.sqrt(math.pi / 2.0)
_TUKEY_FENCE = 1.5
OUTLIER_FAMILY_RATE = 0.04
"""Share of clean samples (normal on the scale the flag uses) that get any run flagged by the
default ``"mad"`` rule, at every number of runs: designed at 4 % so that it stays at most 5 %."""
# The 1 - OUTLIER_FAMILY_RATE quantile of the largest |modified z-score| of n standard normal
# values, by simulation (bench/outlier_thresholds.py: 400 000 samples per n, seed 20261127).
# The fixed 3.5 of Iglewicz & Hoaglin flags a run in 29 % / 21 % / 13 % of clean samples at
# n = 3 / 5 / 10, because the MAD of a few runs is itself very noisy.
# fmt: off
_HAMPEL_THRESHOLDS: dict[int, float] = {
    3: 27.097, 4: 7.763, 5: 9.013, 6: 6.023, 7: 6.357, 8: 5.278,
    9: 5.458, 10: 4.860, 11: 4.967, 12: 4.630, 13: 4.671, 14: 4.438,
    15: 4.494, 16: 4.320, 17: 4.360, 18: 4.240, 19: 4.261, 20: 4.166,
    21: 4.189, 22: 4.107, 23: 4.131, 24: 4.062, 25: 4.089, 26: 4.021,
    27: 4.046, 28: 3.995, 29: 4.011, 30: 3.974, 35: 3.946, 40: 3.898,
    50: 3.858, 60: 3.841, 80: 3.822, 100: 3.826, 150: 3.852, 200: 3.881,
}
# fmt: on


class DegenerateDataWarning(RuntimeWarning):
    """Data were valid but too degenerate for the statistic (one value, zero variance, ...).

    The function that warns still returns a result, whose degenerate form it documents.
    """


# --------------------------------------------------------------------------------------------
# Result types
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Summary:
    """Descriptive statistics of one sample, in the unit of the values (e.g. bits/s or µs).

    Attributes
    ----------
    n : int
        Number of values.
    mean : float
        Arithmetic mean.
    std : float
        Sample standard deviation (ddof=1); NaN when ``n == 1``.
    min, max : float
        Smallest and largest value.
    median, p90, p99 : float
        50th, 90th and 99th percentiles (linear interpolation between order statistics).
    """

    n: int
    mean: float
    std: float
    min: float
    max: float
    median: float
    p90: float
    p99: float


@dataclass(frozen=True)
class Outlier:
    """One value that :func:`outlier_report` flags, with why.

    Attributes
    ----------
    index : int
        Position of the value in the input (e.g. the run number minus one).
    value : float
        The value itself, in the unit of the input.
    method : str
        ``"mad"`` or ``"iqr"``.
    score : float
        Modified z-score (``"mad"``) or distance beyond the nearer quartile in IQRs (``"iqr"``),
        on the scale of ``scale``.
    reason : str
        One line a report can print next to the flagged run.
    scale : str
        ``"log"`` (the rule looked at the logarithms: every value was positive) or
        ``"linear"``.
    threshold : float
        The limit ``score`` went beyond.
    """

    index: int
    value: float
    method: str
    score: float
    reason: str
    scale: str = "linear"
    threshold: float = math.nan


@dataclass(frozen=True)
class Interval:
    """A point estimate of the mean with a two-sided confidence interval.

    Attributes
    ----------
    estimate : float
        Sample mean, in the unit of the values.
    low, high : float
        Interval bounds; NaN when ``n == 1``, both equal to ``estimate`` when all values are equal.
    level : float
        Confidence level, e.g. 0.95.
    method : str
        ``"t"`` or ``"bootstrap"``.
    n : int
        Number of values.
    bootstrap_method : str or None
        ``"BCa"``, ``"percentile"`` or ``"basic"`` for bootstrap intervals, else None.
    bootstrap_distribution : numpy.ndarray or None
        The resampled means (bootstrap only), kept for plots and diagnostics.
    """

    estimate: float
    low: float
    high: float
    level: float
    method: str
    n: int
    bootstrap_method: str | None = None
    bootstrap_distribution: FloatArray | None = field(default=None, repr=False, compare=False)

    @property
    def width(self) -> float:
        """Length of the interval ``high - low``, in the unit of the values."""
        return self.high - self.low

    def contains(self, value: float) -> bool:
        """Whether ``value`` lies inside the closed interval ``[low, high]``."""
        return bool(self.low <= value <= self.high)


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


@dataclass(frozen=True)
class SplitResult:
    """How well observed per-backend request counts follow configured weights.

    Every mapping is keyed by backend name; shares are fractions in [0, 1].

    Attributes
    ----------
    n : int
        Total number of requests (all backends, weight-0 ones included).
    observed : dict[str, float]
        Observed share ``count / n``.
    expected : dict[str, float]
        Normalised weight ``weight / sum(weights)``.
    error : dict[str, float]
        ``observed - expected`` (signed).
    abs_error : dict[str, float]
        ``|observed - expected|``.
    intervals : dict[str, tuple[float, float]]
        Simultaneous confidence intervals ``(low, high)`` of the true shares.
    max_abs_error : float
        Largest ``abs_error``.
    total_variation : float
        ``0.5 * sum(abs_error)``: the share of requests that went to the "wrong" backend.
    g_statistic : float
        G statistic of the goodness-of-fit test over the backends with non-zero weight.
    p_value : float
        Its p-value (chi-square, ``k - 1`` df); NaN when fewer than two backends have weight.
    zero_weight_hits : list[str]
        Backends with weight 0 that nevertheless received requests (a failed verification).
    counts : dict[str, int]
        The raw counts.
    level : float
        Simultaneous confidence level of ``intervals``.
    method : str
        ``"goodman"`` or ``"sison-glaz"``.
    """

    n: int
    observed: dict[str, float]
    expected: dict[str, float]
    error: dict[str, float]
    abs_error: dict[str, float]
    intervals: dict[str, tuple[float, float]]
    max_abs_error: float
    total_variation: float
    g_statistic: float
    p_value: float
    zero_weight_hits: list[str]
    counts: dict[str, int]
    level: float
    method: str

    @property
    def expected_within_intervals(self) -> bool:
        """True when every expected share lies inside its simultaneous interval."""
        return all(
            low <= self.expected[name] <= high for name, (low, high) in self.intervals.items()
        )


@dataclass(frozen=True)
class Histogram:
    """Bin counts and edges, the input of a bar plot.

    Attributes
    ----------
    counts : numpy.ndarray
        Number of values per bin (``len(edges) - 1`` bins; the last bin includes its right
        edge, as in :func:`numpy.histogram`).
    edges : numpy.ndarray
        Bin edges, ascending, in the unit of the values.
    """

    counts: IntArray = field(repr=False)
    edges: FloatArray = field(repr=False)

    @property
    def centers(self) -> FloatArray:
        """Mid-points of the bins (geometric mid-points are not used, even for log bins)."""
        return np.asarray((self.edges[:-1] + self.edges[1:]) / 2.0, dtype=np.float64)

    @property
    def density(self) -> FloatArray:
        """Counts normalised so that the histogram integrates to 1 (per unit of the values)."""
        widths = np.diff(self.edges)
        return np.asarray(self.counts / (self.counts.sum() * widths), dtype=np.float64)


# --------------------------------------------------------------------------------------------
# Validation: one place per kind of input
# --------------------------------------------------------------------------------------------


def _validated_values(values: npt.ArrayLike, name: str) -> FloatArray:
    """Return ``values`` as a 1-D float array, or raise InsufficientDataError saying why not."""
    try:
        array = np.asarray(values, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise InsufficientDataError(f"{name} must be numbers: {exc}") from exc
    if array.ndim != 1:
        raise InsufficientDataError(
            f"{name} must be a one-dimensional sequence, got shape {array.shape}"
        )
    if array.size == 0:
        raise InsufficientDataError(f"{name} is empty: at least one value is needed")
    # A sum is finite only if every term is (NaN and inf propagate), and it needs no temporary
    # array; the element-wise check runs only when the sum is not finite (or overflowed).
    if not math.isfinite(float(np.add.reduce(array))):
        bad = np.flatnonzero(~np.isfinite(array))
        if bad.size:
            raise InsufficientDataError(
                f"{name} contains {bad.size} NaN or infinite value(s), "
                f"the first at index {int(bad[0])} ({float(array[bad[0]])!r})"
            )
    return array


def _shown(value: object) -> str:
    """repr() of a user value, with NumPy scalars shown as the plain Python number."""
    return repr(value.item() if isinstance(value, np.generic) else value)


def _validated_level(level: float) -> float:
    """Return ``level`` as a float in (0, 1), or raise ConfigError."""
    if isinstance(level, bool) or not isinstance(level, int | float | np.integer | np.floating):
        raise ConfigError(f"level must be a number strictly between 0 and 1, got {_shown(level)}")
    value = float(level)
    if not 0.0 < value < 1.0:
        raise ConfigError(
            f"level must be strictly between 0 and 1 (e.g. 0.95), got {_shown(level)}"
        )
    return value


def _validated_choice(value: str, allowed: Sequence[str], name: str) -> str:
    if value not in allowed:
        choices = ", ".join(repr(choice) for choice in allowed)
        raise ConfigError(f"{name} must be one of {choices}, got {_shown(value)}")
    return value


def _validated_positive(value: float, name: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float | np.integer | np.floating):
        raise ConfigError(f"{name} must be a positive number, got {_shown(value)}")
    number = float(value)
    if not (math.isfinite(number) and number > 0.0):
        raise ConfigError(f"{name} must be a positive finite number, got {_shown(value)}")
    return number


def _validated_weights(weights: Mapping[str, float] | Sequence[float]) -> dict[str, float]:
    """Return the weights normalised to sum 1, or raise ConfigError naming the bad backend."""
    named: Mapping[str, float] = (
        weights
        if isinstance(weights, Mapping)
        else {f"#{index}": weight for index, weight in enumerate(weights)}
    )
    if not named:
        raise ConfigError("weights are empty: at least one backend needs a weight")
    clean: dict[str, float] = {}
    for name, weight in named.items():
        if not isinstance(name, str):
            raise ConfigError(f"backend names must be strings, got {name!r}")
        try:
            number = float(weight)
        except (TypeError, ValueError) as exc:
            raise ConfigError(
                f"weight of backend {name!r} is not a number: {_shown(weight)}"
            ) from exc
        if not math.isfinite(number) or number < 0.0:
            raise ConfigError(
                f"weight of backend {name!r} must be a finite number >= 0, got {_shown(weight)}"
            )
        clean[name] = number
    total = sum(clean.values())
    if total <= 0.0:
        raise ConfigError(f"weights are all zero ({clean}): at least one must be positive")
    return {name: weight / total for name, weight in clean.items()}


def _validated_counts(counts: Mapping[str, int]) -> dict[str, int]:
    """Return the counts as ints, or raise InsufficientDataError naming the bad backend."""
    if not counts:
        raise InsufficientDataError("counts are empty: no backend was observed")
    clean: dict[str, int] = {}
    for name, count in counts.items():
        if not isinstance(name, str):
            raise InsufficientDataError(f"backend names must be strings, got {name!r}")
        try:
            number = float(count)
        except (TypeError, ValueError) as exc:
            raise InsufficientDataError(
                f"count of backend {name!r} is not a number: {_shown(count)}"
            ) from exc
        if not (math.isfinite(number) and number >= 0.0 and number.is_integer()):
            raise InsufficientDataError(
                f"count of backend {name!r} must be a whole number >= 0, got {_shown(count)}"
            )
        clean[name] = int(number)
    if sum(clean.values()) == 0:
        raise InsufficientDataError(f"no requests were counted ({clean}): nothing to compare")
    return clean


def _same_backends(counted: Sequence[str], weighted: Mapping[str, float]) -> None:
    """Raise ConfigError naming the first backend that only one side knows."""
    without_weight = [name for name in counted if name not in weighted]
    if without_weight:
        raise ConfigError(
            f"backend {without_weight[0]!r} has requests but no weight "
            f"(weights name {sorted(weighted)})"
        )
    not_counted = [name for name in weighted if name not in set(counted)]
    if not_counted:
        raise ConfigError(
            f"backend {not_counted[0]!r} has a weight but no count "
            f"(counts name {sorted(counted)}; give it a count of 0)"
        )


def _warn(message: str) -> None:
    # stacklevel 3: the warning points at the caller of the public function.
    warnings.warn(message, DegenerateDataWarning, stacklevel=3)


# --------------------------------------------------------------------------------------------
# Descriptive statistics
# --------------------------------------------------------------------------------------------


def describe(values: npt.ArrayLike) -> Summary:
    """Summarise one sample: size, mean, sample std, extremes and percentiles.

    Parameters
    ----------
    values : array_like
        One value per run or per request, in any unit (bits/s, µs, %, MB, seconds).

    Returns
    -------
    Summary
        All statistics in the unit of ``values``.

    Raises
    ------
    InsufficientDataError
        ``values`` is empty, not one-dimensional, or holds NaN/infinite values.

    Warns
    -----
    DegenerateDataWarning
        With a single value: ``std`` is NaN.

    Notes
    -----
    ``std`` is the sample standard deviation :math:`\\sqrt{\\sum (x_i - \\bar x)^2 / (n - 1)}`,
    the convention of the "Std Dev" rows in the tables of seed 001. Percentiles interpolate
    linearly between order statistics (NumPy's default).

    Examples
    --------
    >>> s = describe([7660.57, 7757.71, 7867.42, 7864.38, 8104.38])  # Mbps
    >>> round(s.mean, 2), round(s.std, 2)
    (7850.89, 165.54)
    """
    x = _validated_values(values, "values")
    if x.size < 2:
        _warn("describe() got a single value: the standard deviation is undefined (NaN)")
        std = math.nan
    else:
        std = float(np.std(x, ddof=1))
    median, p90, p99 = (float(q) for q in np.percentile(x, [50.0, 90.0, 99.0]))
    return Summary(
        n=int(x.size),
        mean=float(np.mean(x)),
        std=std,
        min=float(np.min(x)),
        max=float(np.max(x)),
        median=median,
        p90=p90,
        p99=p99,
    )


def truncated_mean(values: npt.ArrayLike, *, proportion: float = 0.1) -> float:
    """Mean after cutting the same number of smallest and largest values.

    Parameters
    ----------
    values : array_like
        One value per run, any unit.
    proportion : float, default 0.1
        Fraction cut from *each* end, in [0, 0.5).

    Returns
    -------
    float
        The truncated mean, in the unit of ``values``.

    Raises
    ------
    InsufficientDataError
        Empty input or NaN/infinite values.
    ConfigError
        ``proportion`` outside [0, 0.5).

    Notes
    -----
    Same definition as :func:`scipy.stats.trim_mean`: with ``n`` values,
    ``g = int(proportion * n)`` values are removed from each end of the sorted sample and the
    remaining ``n - 2g`` are averaged. With 8 runs and ``proportion=0.1`` nothing is cut
    (``int(0.8) == 0``); use :func:`outlier_runs` to exclude a single bad run.

    Examples
    --------
    >>> truncated_mean([1.0, 2.0, 3.0, 4.0, 100.0], proportion=0.2)
    3.0
    """
    return float(np.mean(trimmed_sample(values, proportion=proportion)))


def trimmed_sample(values: npt.ArrayLike, *, proportion: float = 0.1) -> FloatArray:
    """The values :func:`truncated_mean` averages: sorted, ``int(proportion * n)`` cut per end.

    Parameters
    ----------
    values : array_like
        One value per run, any unit.
    proportion : float, default 0.1
        Fraction cut from *each* end, in [0, 0.5).

    Returns
    -------
    numpy.ndarray
        The kept values, sorted ascending, in the unit of ``values``.
    """
    x = _validated_values(values, "values")
    if isinstance(proportion, bool) or not isinstance(
        proportion, int | float | np.integer | np.floating
    ):
        raise ConfigError(f"proportion must be a number in [0, 0.5), got {_shown(proportion)}")
    if not 0.0 <= float(proportion) < 0.5:
        raise ConfigError(
            f"proportion must be in [0, 0.5) (cut from each end), got {_shown(proportion)}"
        )
    cut = int(float(proportion) * x.size)
    return np.sort(x)[cut : x.size - cut]


def truncated_mean_interval(
    values: npt.ArrayLike, *, proportion: float = 0.1, level: float = 0.95
) -> Interval:
    """Truncated mean with the Student-t interval of the values it keeps.

    Not what cnibench's tables show (that is :func:`summarize_runs`, the geometric mean of
    every run): the Student-t interval of the *kept* values uses their plain standard error,
    not the winsorized one, so once ``int(proportion * n) >= 1`` it is too narrow (coverage
    0.87-0.90 for n = 10-20 in issue 23's simulation). Kept for the SPEC's contract.

    Parameters
    ----------
    values : array_like
        One value per run, any unit.
    proportion : float, default 0.1
        Fraction cut from *each* end, in [0, 0.5).
    level : float, default 0.95
        Confidence level in (0, 1).

    Returns
    -------
    Interval
        ``estimate`` equals :func:`truncated_mean`; ``low``/``high`` are
        :func:`confidence_interval` (method ``"t"``) of :func:`trimmed_sample`, whose size is
        ``n``. With fewer than ``1 / proportion`` values nothing is cut and this is the plain
        t interval of the mean.
    """
    return confidence_interval(trimmed_sample(values, proportion=proportion), level=level)


OUTLIER_METHOD: Literal["mad", "iqr"] = "mad"
"""The outlier rule of every per-condition summary: modified z-score (Iglewicz & Hoaglin)."""
OUTLIER_THRESHOLD = 3.5
"""The fixed limit of Iglewicz & Hoaglin, kept for callers that name it. Per-condition summaries
no longer use it: a run is *flagged* (shown, never dropped) when its modified z-score, on the
scale of the estimate, exceeds :func:`outlier_threshold` of the number of runs (27 at 3 runs,
9.0 at 5, 4.9 at 10, 4.2 at 20), because 3.5 flagged a run in 13-29 % of clean samples of 3-10
runs."""

SummaryScale: TypeAlias = Literal["log", "linear", "binary"]


@dataclass(frozen=True)
class RunSummary:
    """What a table row, a bar and a report line say about one metric of one condition.

    Attributes
    ----------
    n:
        Runs summarised: every finite run. Outlying runs are flagged, never dropped.
    mean:
        The point estimate, named by ``estimator``: the geometric mean of the runs (``"log"``),
        their arithmetic mean (``"linear"``) or the share of yes (``"binary"``).
    low, high:
        Its interval, on the scale of ``scale``; NaN with fewer than two runs (``"log"``,
        ``"linear"``).
    outliers:
        Runs whose modified z-score, on the scale of ``scale`` (the logarithms for ``"log"``),
        is beyond :func:`outlier_threshold` of ``n`` (index into the finite values given, in
        order) and why: a clean sample has a run flagged with probability 4 % at any ``n``.
        They are *in* the estimate and its interval; a table shows them so a reader can look
        at them.
    scale:
        ``"log"``: every run is positive (throughput, latency, CPU, ...): geometric mean with
        the Student-t interval of the mean logarithm, exponentiated
        (:func:`geometric_mean_interval`), never negative. ``"linear"``: some run is zero or
        negative (a signed error, an idle node's CPU): arithmetic mean with the Student-t
        interval. ``"binary"``: a yes/no outcome per run (0 or 1): the share of yes with its
        Clopper-Pearson interval (:func:`proportion_interval`).
    estimator:
        The name of ``mean`` in words: ``"geometric mean"``, ``"mean"`` or ``"proportion"``.
    successes:
        Runs that said yes (``"binary"`` only; else -1).
    """

    n: int
    mean: float
    low: float
    high: float
    outliers: tuple[Outlier, ...]
    scale: SummaryScale = "linear"
    estimator: str = "mean"
    successes: int = -1


_ESTIMATOR_NAMES: dict[str, str] = {
    "log": "geometric mean",
    "linear": "mean",
    "binary": "proportion",
}


def summarize_runs(
    values: npt.ArrayLike,
    *,
    level: float = 0.95,
    scale: Literal["auto", "log", "linear", "binary"] = "auto",
    upper: float | None = None,
) -> RunSummary:
    """The one per-condition summary: every run in, outlying runs flagged.

    ``cnibench run``'s table, the plugin's lines, the report's bars, figures and verdict and
    ``cnibench compare`` all use this estimator, so they always agree. Degenerate data (one
    run, identical runs) gives a NaN or zero-width interval without a warning: the ``n``
    beside it says why.

    Parameters
    ----------
    values:
        One value per run (NaN and infinite values, i.e. failed runs, are left out).
    level:
        Confidence level in (0, 1).
    scale:
        ``"auto"`` (the default) takes ``"log"`` when every run is positive, else
        ``"linear"``; ``"binary"`` must be asked for (a yes/no metric, unit ``bool``) and
        needs every value to be 0 or 1. See :attr:`RunSummary.scale`.
    upper:
        The largest value the quantity can take (100 for a CPU percentage): an interval is
        cut there, so runs near it never get a bound beyond it.

    Raises
    ------
    InsufficientDataError
        No finite value.
    ConfigError
        ``"log"`` with a non-positive run, ``"binary"`` with a value other than 0 or 1, an
        unknown ``scale``, or a bad ``level``.

    Notes
    -----
    Why the geometric mean: with lognormal runs its log-t interval is exact (coverage 95.0 %
    at any n), where the previous rule (drop runs by the MAD rule, then the Student-t interval
    of the 10 %-trimmed mean) covered 82-90 % at n = 3-20; ``bench/coverage.py`` measures
    both. It is the centre of its own interval, and the ratio of two of them is the centre of
    the log-scale Welch interval the verdict and the gate print.
    """
    confidence = _validated_level(level)
    if scale not in ("auto", "log", "linear", "binary"):
        raise ConfigError(f"scale must be 'auto', 'log', 'linear' or 'binary', got {scale!r}")
    x = np.asarray(values, dtype=np.float64).reshape(-1)
    x = x[np.isfinite(x)]
    if x.size == 0:
        raise InsufficientDataError("no finite value to summarise")
    positive = bool((x > 0).all())
    if scale == "log" and not positive:
        raise ConfigError("a log-scale interval needs every run to be positive")
    if scale == "binary":
        if not np.isin(x, (0.0, 1.0)).all():
            raise ConfigError("a yes/no summary needs every run to be 0 or 1")
        successes = int(x.sum())
        interval = proportion_interval(successes, int(x.size), level=confidence)
        return RunSummary(
            int(x.size),
            interval.estimate,
            interval.low,
            interval.high,
            (),
            "binary",
            _ESTIMATOR_NAMES["binary"],
            successes,
        )
    used: SummaryScale = "log" if scale != "linear" and positive else "linear"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DegenerateDataWarning)
        outliers = outlier_report(
            x, method=OUTLIER_METHOD, scale="log" if used == "log" else "linear"
        )
        if used == "log":
            interval = geometric_mean_interval(x, level=confidence)
        else:
            interval = confidence_interval(x, level=confidence)
    low, high = interval.low, interval.high
    if upper is not None and math.isfinite(high):
        high = min(high, upper)
    return RunSummary(
        int(x.size),
        interval.estimate,
        low,
        high,
        tuple(outliers),
        used,
        _ESTIMATOR_NAMES[used],
    )


def geometric_mean_interval(values: npt.ArrayLike, *, level: float = 0.95) -> Interval:
    """Geometric mean of positive values with the Student-t interval of the mean logarithm.

    Parameters
    ----------
    values : array_like
        One positive value per run, any unit (bits/s, µs, cores).
    level : float, default 0.95
        Confidence level, strictly between 0 and 1.

    Returns
    -------
    Interval
        ``estimate = exp(mean(log x))`` and ``exp`` of the bounds of
        ``scipy.stats.t.interval(level, n - 1, loc=mean(log x), scale=sem(log x))``; method
        ``"log-t"``. The estimate is the geometric centre of its interval:
        ``estimate**2 == low * high``.

    Raises
    ------
    InsufficientDataError
        Empty input, NaN/infinite or non-positive values.
    ConfigError
        ``level`` outside (0, 1).

    Warns
    -----
    DegenerateDataWarning
        One value (bounds are NaN) or all values equal (bounds equal the estimate).

    Notes
    -----
    The estimand is the population geometric mean, the median of a lognormal run
    distribution: the "typical run". For multiplicative run-to-run noise (lognormal) the
    interval is exact at every n.

    Examples
    --------
    >>> ci = geometric_mean_interval([100.0, 110.0, 90.0, 105.0])
    >>> round(ci.estimate, 1), round(ci.low, 1), round(ci.high, 1)
    (101.0, 88.1, 115.8)
    """
    x = _validated_values(values, "values")
    confidence = _validated_level(level)
    if np.any(x <= 0.0):
        raise InsufficientDataError("a geometric mean needs every value to be positive")
    logs = np.log(x)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DegenerateDataWarning)
        on_logs = confidence_interval(logs, level=confidence)
    if x.size < 2:
        _warn("a confidence interval needs at least 2 values, got 1: bounds are NaN")
    elif np.ptp(x) == 0.0:
        _warn("all values are equal: the confidence interval has zero width")
    return Interval(
        math.exp(on_logs.estimate),
        math.exp(on_logs.low) if math.isfinite(on_logs.low) else math.nan,
        math.exp(on_logs.high) if math.isfinite(on_logs.high) else math.nan,
        confidence,
        "log-t",
        int(x.size),
    )


def proportion_interval(
    successes: int,
    trials: int,
    *,
    level: float = 0.95,
    method: Literal["clopper-pearson", "wilson"] = "clopper-pearson",
) -> Interval:
    """Share of yes among ``trials`` yes/no outcomes, with its interval.

    Parameters
    ----------
    successes, trials : int
        Count of yes and of outcomes (e.g. 4 of 5 probes reachable), ``0 <= successes <=
        trials``, ``trials >= 1``.
    level : float, default 0.95
        Confidence level, strictly between 0 and 1.
    method : {"clopper-pearson", "wilson"}, default "clopper-pearson"
        Exact (Clopper-Pearson, never below ``level``) or Wilson's score interval.

    Returns
    -------
    Interval
        ``estimate = successes / trials`` and the bounds, in [0, 1]; ``n = trials``.

    Raises
    ------
    InsufficientDataError
        Counts that are negative, not whole, or more successes than trials.
    ConfigError
        ``level`` outside (0, 1), unknown ``method``.

    Notes
    -----
    Clopper-Pearson: the ``alpha/2`` and ``1 - alpha/2`` quantiles of
    ``Beta(k, n - k + 1)`` and ``Beta(k + 1, n - k)`` (0 and 1 at the edges). Wilson:
    :math:`(\\hat p + z^2/2n \\pm z\\sqrt{\\hat p(1-\\hat p)/n + z^2/4n^2}) / (1 + z^2/n)`.

    References
    ----------
    C. J. Clopper and E. S. Pearson, Biometrika 26 (1934) 404-413.
    E. B. Wilson, JASA 22 (1927) 209-212.

    Examples
    --------
    >>> ci = proportion_interval(4, 5)
    >>> round(ci.low, 2), round(ci.high, 2)
    (0.28, 0.99)
    """
    k, n = _validated_count_pair(successes, trials)
    confidence = _validated_level(level)
    chosen = _validated_choice(method, ("clopper-pearson", "wilson"), "method")
    alpha = 1.0 - confidence
    if chosen == "clopper-pearson":
        low = 0.0 if k == 0 else float(sps.beta.ppf(alpha / 2.0, k, n - k + 1))
        high = 1.0 if k == n else float(sps.beta.ppf(1.0 - alpha / 2.0, k + 1, n - k))
    else:
        low, high = _wilson_bounds(k, n, alpha)
    return Interval(k / n, low, high, confidence, chosen, n)


def _validated_count_pair(successes: int, trials: int) -> tuple[int, int]:
    for name, value in (("successes", successes), ("trials", trials)):
        if isinstance(value, bool) or not isinstance(value, int | np.integer):
            raise InsufficientDataError(f"{name} must be a whole number, got {_shown(value)}")
    k, n = int(successes), int(trials)
    if n < 1 or not 0 <= k <= n:
        raise InsufficientDataError(
            f"need 0 <= successes <= trials and trials >= 1, got {k} of {n}"
        )
    return k, n


def _wilson_bounds(k: int, n: int, alpha: float) -> tuple[float, float]:
    z = float(sps.norm.ppf(1.0 - alpha / 2.0))
    p = k / n
    centre = (p + z * z / (2.0 * n)) / (1.0 + z * z / n)
    half = z * math.sqrt(p * (1.0 - p) / n + z * z / (4.0 * n * n)) / (1.0 + z * z / n)
    return max(0.0, centre - half), min(1.0, centre + half)


@dataclass(frozen=True)
class ProportionDifference:
    """Difference of two proportions (treatment - control) with Newcombe's interval.

    Attributes
    ----------
    difference:
        ``k_t / n_t - k_c / n_c``, in [-1, 1].
    low, high:
        Newcombe's hybrid score interval (method 10), built from the two Wilson intervals.
    level:
        Confidence level.
    p_value:
        Two-sided p-value of Fisher's exact test of the 2x2 table.
    successes_treatment, trials_treatment, successes_control, trials_control:
        The counts.
    """

    difference: float
    low: float
    high: float
    level: float
    p_value: float
    successes_treatment: int
    trials_treatment: int
    successes_control: int
    trials_control: int


def proportion_difference(
    successes_control: int,
    trials_control: int,
    successes_treatment: int,
    trials_treatment: int,
    *,
    level: float = 0.95,
) -> ProportionDifference:
    """Treatment minus control share of yes, with Newcombe's interval and Fisher's exact test.

    Parameters
    ----------
    successes_control, trials_control, successes_treatment, trials_treatment : int
        The two counts, e.g. 5 of 5 reachable without a policy and 4 of 5 with it.
    level : float, default 0.95
        Confidence level, strictly between 0 and 1.

    Returns
    -------
    ProportionDifference

    Notes
    -----
    With Wilson bounds :math:`(l_t, u_t)` and :math:`(l_c, u_c)` and :math:`d = \\hat p_t -
    \\hat p_c`, Newcombe's interval is :math:`d - \\sqrt{(\\hat p_t - l_t)^2 + (u_c - \\hat
    p_c)^2}` to :math:`d + \\sqrt{(u_t - \\hat p_t)^2 + (\\hat p_c - l_c)^2}`.

    References
    ----------
    R. G. Newcombe, "Interval estimation for the difference between independent proportions:
    comparison of eleven methods", Statistics in Medicine 17 (1998) 873-890.
    """
    kc, nc = _validated_count_pair(successes_control, trials_control)
    kt, nt = _validated_count_pair(successes_treatment, trials_treatment)
    confidence = _validated_level(level)
    alpha = 1.0 - confidence
    pt, pc = kt / nt, kc / nc
    lt, ut = _wilson_bounds(kt, nt, alpha)
    lc, uc = _wilson_bounds(kc, nc, alpha)
    d = pt - pc
    low = d - math.sqrt((pt - lt) ** 2 + (uc - pc) ** 2)
    high = d + math.sqrt((ut - pt) ** 2 + (pc - lc) ** 2)
    table = [[kt, nt - kt], [kc, nc - kc]]
    p_value = float(sps.fisher_exact(table).pvalue)
    return ProportionDifference(d, low, high, confidence, p_value, kt, nt, kc, nc)


# --------------------------------------------------------------------------------------------
# Power: what a contrast could detect, and how many runs a margin needs
# --------------------------------------------------------------------------------------------


def _two_sample_power(effect: float, n1: float, n2: float, alpha: float) -> float:
    """Power of the two-sided two-sample t test (pooled df) for a standardized effect."""
    df = n1 + n2 - 2.0
    nc = effect * math.sqrt(n1 * n2 / (n1 + n2))
    crit = float(sps.t.ppf(1.0 - alpha / 2.0, df))
    return float(sps.nct.sf(crit, df, nc) + sps.nct.cdf(-crit, df, nc))


def detectable_effect(
    sd: float, n_control: int, n_treatment: int, *, alpha: float = 0.05, power: float = 0.8
) -> float:
    """Smallest true difference a two-sample t test detects with ``power`` at ``alpha``.

    Parameters
    ----------
    sd : float
        Run-to-run standard deviation, on the scale compared (of the logarithms for a ratio).
    n_control, n_treatment : int
        Runs per side (at least 2 each).
    alpha : float, default 0.05
        Two-sided significance level.
    power : float, default 0.8
        Wanted power.

    Returns
    -------
    float
        The difference in the unit of ``sd`` (``exp`` of it minus 1 is the relative change
        for a log-scale ``sd``); from the noncentral t distribution, as
        ``statsmodels.stats.power.TTestIndPower`` solves it.
    """
    if n_control < 2 or n_treatment < 2:
        raise InsufficientDataError("power needs at least 2 runs per side")
    scale = _validated_positive(sd, "sd")
    _validated_level(alpha)
    _validated_level(power)
    n1, n2 = float(n_control), float(n_treatment)
    hi = 1.0
    while _two_sample_power(hi, n1, n2, alpha) < power:
        hi *= 2.0
    effect = optimize.brentq(
        lambda d: _two_sample_power(d, n1, n2, alpha) - power, 0.0, hi, xtol=1e-10, rtol=1e-10
    )
    return float(effect) * scale


def runs_needed(
    sd: float, margin: float, *, alpha: float = 0.05, power: float = 0.8, most: int = 100_000
) -> int:
    """Runs per side for a two-sample t test to detect a difference of ``margin``.

    Parameters
    ----------
    sd : float
        Run-to-run standard deviation on the compared scale (logarithms for a ratio).
    margin : float
        The difference to detect, same scale (``log(1.05)`` for ±5 %).
    alpha, power : float
        Two-sided level and wanted power.
    most : int
        Give up above this many (returned as is).

    Returns
    -------
    int
        Smallest equal ``n`` per side (at least 2) reaching ``power``.
    """
    scale = _validated_positive(sd, "sd")
    size = _validated_positive(margin, "margin")
    _validated_level(alpha)
    _validated_level(power)
    effect = size / scale

    def enough(n: int) -> bool:
        return _two_sample_power(effect, n, n, alpha) >= power

    if enough(2):
        return 2
    lo, hi = 2, 4
    while not enough(hi):
        if hi >= most:
            return most
        lo, hi = hi, min(2 * hi, most)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if enough(mid):
            hi = mid
        else:
            lo = mid
    return hi


def outlier_threshold(n: int) -> float:
    """Default limit of the ``"mad"`` rule for ``n`` runs: the modified z-score beyond which a
    clean normal sample of ``n`` has any run flagged with probability
    :data:`OUTLIER_FAMILY_RATE` (4 %).

    Parameters
    ----------
    n : int
        Number of runs, at least 3.

    Returns
    -------
    float
        27.1 at n = 3, 9.0 at 5, 4.86 at 10, 4.17 at 20, 3.86 at 50 (dimensionless).

    Notes
    -----
    Tabulated by simulation for n = 3-30 and at 35-200 (``bench/outlier_thresholds.py``),
    linearly interpolated between; beyond 200 runs it follows the normal quantile of a
    Šidák-corrected 4 % (the limit a known sigma would have), scaled to agree at 200. The
    Hampel identifier normalised for the sample size (Davies & Gather 1993).
    """
    if isinstance(n, bool) or not isinstance(n, int | np.integer) or n < 3:
        raise ConfigError(f"an outlier threshold needs at least 3 runs, got {_shown(n)}")
    if n in _HAMPEL_THRESHOLDS:
        return _HAMPEL_THRESHOLDS[int(n)]
    sizes = sorted(_HAMPEL_THRESHOLDS)
    if n < sizes[-1]:
        return float(np.interp(n, sizes, [_HAMPEL_THRESHOLDS[size] for size in sizes]))

    def known_sigma(size: int) -> float:
        per_value = 1.0 - (1.0 - OUTLIER_FAMILY_RATE) ** (1.0 / size)
        return float(sps.norm.isf(per_value / 2.0))

    return _HAMPEL_THRESHOLDS[sizes[-1]] * known_sigma(int(n)) / known_sigma(sizes[-1])


def outlier_report(
    values: npt.ArrayLike,
    *,
    method: Literal["mad", "iqr"] = "mad",
    threshold: float | None = None,
    scale: Literal["auto", "log", "linear"] = "auto",
) -> list[Outlier]:
    """Find runs whose value lies far from the others, and say why.

    Parameters
    ----------
    values : array_like
        One value per run, any unit.
    method : {"mad", "iqr"}, default "mad"
        ``"mad"``: modified z-score of Iglewicz & Hoaglin; ``"iqr"``: Tukey's fences.
    threshold : float, optional
        Flag when the modified z-score's magnitude exceeds this (default
        :func:`outlier_threshold` of the number of values, so that a clean sample has a run
        flagged with probability 4 % at any n), or when a value lies more than this many IQRs
        outside the quartiles (default 1.5 for ``"iqr"``).
    scale : {"auto", "log", "linear"}, default "auto"
        Where the rule looks: ``"auto"`` takes the logarithms when every value is positive
        (the scale :func:`summarize_runs` estimates on: a run at a third of the others is as
        far out as one at three times), else the values themselves.

    Returns
    -------
    list of Outlier
        In input order; empty when nothing is flagged.

    Raises
    ------
    InsufficientDataError
        Empty input or NaN/infinite values.
    ConfigError
        Unknown ``method`` or ``scale``, non-positive ``threshold``, ``"log"`` with a value
        that is not positive.

    Warns
    -----
    DegenerateDataWarning
        Fewer than 3 values: nothing can be called an outlier, the list is empty.

    Notes
    -----
    Modified z-score: :math:`M_i = 0.6745 (y_i - \\tilde y) / \\mathrm{MAD}` with
    :math:`y` the values or their logarithms, :math:`\\tilde y` the median and MAD the median
    absolute deviation. When more than half the values are equal (MAD = 0) the mean absolute
    deviation from the median, scaled by :math:`\\sqrt{\\pi/2}`, replaces ``MAD / 0.6745``;
    when all values are equal, nothing is flagged. Tukey's fences are
    :math:`Q_1 - k\\,\\mathrm{IQR}` and :math:`Q_3 + k\\,\\mathrm{IQR}` (quartiles by linear
    interpolation).

    The fixed limit 3.5 that Iglewicz & Hoaglin suggest flags a run in 29 % of clean normal
    samples of 3 runs, 21 % of 5 and 13 % of 10, because the MAD of a few runs is itself
    noisy; the default limit grows for few runs instead (27 at n = 3, 9.0 at 5, 4.9 at 10).
    ``bench/coverage.py`` measures both the rate on clean samples and how often a run at a
    third or three times the others is flagged.

    References
    ----------
    B. Iglewicz and D. C. Hoaglin, *How to Detect and Handle Outliers*, ASQC, 1993.
    L. Davies and U. Gather, "The identification of multiple outliers", JASA 88 (1993) 782-792.
    J. W. Tukey, *Exploratory Data Analysis*, Addison-Wesley, 1977.

    Examples
    --------
    >>> [o.index for o in outlier_report([101.0, 99.0, 100.0, 98.0, 140.0, 102.0])]
    [4]
    """
    x = _validated_values(values, "values")
    chosen = _validated_choice(method, ("mad", "iqr"), "method")
    where = _validated_choice(scale, ("auto", "log", "linear"), "scale")
    positive = bool(np.all(x > 0.0))
    if where == "log" and not positive:
        raise ConfigError("outliers on the log scale need every value to be positive")
    used = "log" if where != "linear" and positive else "linear"
    given = None if threshold is None else _validated_positive(threshold, "threshold")
    if x.size < 3:
        _warn(f"outlier detection needs at least 3 values, got {x.size}: nothing flagged")
        return []
    if given is not None:
        limit = given
    else:
        limit = outlier_threshold(int(x.size)) if chosen == "mad" else _TUKEY_FENCE
    y = np.log(x) if used == "log" else x
    if chosen == "mad":
        return _mad_outliers(x, y, limit, used)
    return _iqr_outliers(x, y, limit, used)


def _mad_outliers(x: FloatArray, y: FloatArray, limit: float, scale: str) -> list[Outlier]:
    median = float(np.median(y))
    deviations = np.abs(y - median)
    mad = float(np.median(deviations))
    of = "of the logarithms " if scale == "log" else ""
    centre = f"median {math.exp(median) if scale == 'log' else median:.6g}"
    if mad > 0.0:
        sigma = mad / _MAD_TO_SIGMA
        spread = f"MAD {of}{mad:.6g}"
    else:
        mean_ad = float(np.mean(deviations))
        if mean_ad == 0.0:
            return []
        sigma = mean_ad * _MEAN_AD_TO_SIGMA
        spread = f"MAD 0, mean absolute deviation {of}{mean_ad:.6g}"
    scores = (y - median) / sigma
    return [
        Outlier(
            index=int(i),
            value=float(x[i]),
            method="mad",
            score=float(scores[i]),
            reason=(
                f"modified z-score {of}{scores[i]:+.2f} beyond ±{limit:.3g} ({centre}, {spread})"
            ),
            scale=scale,
            threshold=limit,
        )
        for i in np.flatnonzero(np.abs(scores) > limit)
    ]


def _iqr_outliers(x: FloatArray, y: FloatArray, limit: float, scale: str) -> list[Outlier]:
    def shown(v: float) -> float:
        return math.exp(v) if scale == "log" else v

    q1, q3 = (float(q) for q in np.percentile(y, [25.0, 75.0]))
    iqr = q3 - q1
    low, high = q1 - limit * iqr, q3 + limit * iqr
    of = ", on the logarithms" if scale == "log" else ""
    found: list[Outlier] = []
    for i in np.flatnonzero((y < low) | (y > high)):
        value = float(y[i])
        beyond = (q1 - value) if value < low else (value - q3)
        side = (
            f"below the lower fence {shown(low):.6g}"
            if value < low
            else f"above the upper fence {shown(high):.6g}"
        )
        found.append(
            Outlier(
                index=int(i),
                value=float(x[i]),
                method="iqr",
                score=beyond / iqr if iqr > 0.0 else math.inf,
                reason=(
                    f"{float(x[i]):.6g} {side} (Q1 {shown(q1):.6g}, Q3 {shown(q3):.6g},"
                    f" {limit:g}×IQR{of})"
                ),
                scale=scale,
                threshold=limit,
            )
        )
    return found


def outlier_runs(
    values: npt.ArrayLike,
    *,
    method: Literal["mad", "iqr"] = "mad",
    threshold: float | None = None,
    scale: Literal["auto", "log", "linear"] = "auto",
) -> list[int]:
    """Indices of the runs a report may exclude as outliers.

    Parameters
    ----------
    values : array_like
        One value per run, any unit.
    method : {"mad", "iqr"}, default "mad"
        See :func:`outlier_report`.
    threshold : float, optional
        See :func:`outlier_report`.
    scale : {"auto", "log", "linear"}, default "auto"
        See :func:`outlier_report`: the logarithms when every value is positive.

    Returns
    -------
    list of int
        Ascending indices into ``values``.

    Raises
    ------
    InsufficientDataError
        Empty input or NaN/infinite values.
    ConfigError
        Unknown ``method`` or ``scale``, non-positive ``threshold``.

    Notes
    -----
    The reason of each exclusion is in :func:`outlier_report`, which takes the same arguments;
    a report that drops runs should print those reasons.

    Examples
    --------
    >>> outlier_runs([5.1, 5.2, 5.0, 5.1, 9.7], method="iqr")
    [4]
    """
    return [
        found.index
        for found in outlier_report(values, method=method, threshold=threshold, scale=scale)
    ]


# --------------------------------------------------------------------------------------------
# Intervals and comparisons
# --------------------------------------------------------------------------------------------


def _validated_resamples(n_resamples: int) -> int:
    if isinstance(n_resamples, bool) or not isinstance(n_resamples, int | np.integer):
        raise ConfigError(f"n_resamples must be a positive integer, got {_shown(n_resamples)}")
    if n_resamples < 1:
        raise ConfigError(f"n_resamples must be a positive integer, got {_shown(n_resamples)}")
    return int(n_resamples)


def _validated_rng(rng: RandomSource) -> np.random.Generator:
    try:
        return np.random.default_rng(rng)
    except (TypeError, ValueError) as exc:
        raise ConfigError(
            f"rng must be a numpy.random.Generator, an integer seed or None, got {_shown(rng)}"
        ) from exc


def confidence_interval(
    values: npt.ArrayLike,
    *,
    level: float = 0.95,
    method: Literal["t", "bootstrap"] = "t",
    rng: RandomSource = None,
    n_resamples: int = 9999,
    bootstrap_method: BootstrapMethod = "BCa",
) -> Interval:
    """Confidence interval of the mean of one sample.

    Parameters
    ----------
    values : array_like
        One value per run, any unit (bits/s, µs, %, MB).
    level : float, default 0.95
        Confidence level, strictly between 0 and 1.
    method : {"t", "bootstrap"}, default "t"
        Student-t interval, or a bootstrap interval of the mean.
    rng : numpy.random.Generator or int, optional
        Randomness of the bootstrap (a seed or a generator); ignored for ``"t"``.
    n_resamples : int, default 9999
        Bootstrap resamples.
    bootstrap_method : {"BCa", "percentile", "basic"}, default "BCa"
        Bootstrap interval type, as in :func:`scipy.stats.bootstrap`.

    Returns
    -------
    Interval
        Mean and bounds in the unit of ``values``.

    Raises
    ------
    InsufficientDataError
        Empty input or NaN/infinite values.
    ConfigError
        ``level`` outside (0, 1), unknown ``method``/``bootstrap_method``, bad ``n_resamples``.

    Warns
    -----
    DegenerateDataWarning
        One value (bounds are NaN) or all values equal (bounds equal the mean).

    Notes
    -----
    ``"t"``: :math:`\\bar x \\pm t_{1-\\alpha/2,\\,n-1}\\, s/\\sqrt{n}`, computed with
    ``scipy.stats.t.interval(level, n - 1, loc=mean, scale=sem)``. ``"bootstrap"`` calls
    :func:`scipy.stats.bootstrap` with ``numpy.mean`` as the statistic and the given ``rng``;
    BCa (bias-corrected and accelerated, Efron 1987) is the default because it is second-order
    accurate; ``"percentile"`` is the simplest to explain.

    References
    ----------
    B. Efron, "Better bootstrap confidence intervals", JASA 82 (1987) 171-185.

    Examples
    --------
    >>> ci = confidence_interval([485.0, 487.0, 486.0, 481.0, 485.0])  # µs
    >>> round(ci.low, 2), round(ci.high, 2)
    (481.97, 487.63)
    """
    x = _validated_values(values, "values")
    confidence = _validated_level(level)
    chosen = _validated_choice(method, ("t", "bootstrap"), "method")
    resamples = _validated_resamples(n_resamples)
    flavour: str | None = None
    if chosen == "bootstrap":
        flavour = _validated_choice(
            bootstrap_method, ("BCa", "percentile", "basic"), "bootstrap_method"
        )
    mean = float(np.mean(x))
    n = int(x.size)
    if n < 2:
        _warn("a confidence interval needs at least 2 values, got 1: bounds are NaN")
        return Interval(mean, math.nan, math.nan, confidence, chosen, n, flavour)
    if np.ptp(x) == 0.0:
        _warn("all values are equal: the confidence interval has zero width")
        return Interval(mean, mean, mean, confidence, chosen, n, flavour)
    if chosen == "t":
        sem = float(np.std(x, ddof=1)) / math.sqrt(n)
        low, high = sps.t.interval(confidence, n - 1, loc=mean, scale=sem)
        return Interval(mean, float(low), float(high), confidence, chosen, n)
    result = sps.bootstrap(
        (x,),
        np.mean,
        confidence_level=confidence,
        n_resamples=resamples,
        method=flavour,
        rng=_validated_rng(rng),
    )
    return Interval(
        mean,
        float(result.confidence_interval.low),
        float(result.confidence_interval.high),
        confidence,
        chosen,
        n,
        flavour,
        np.asarray(result.bootstrap_distribution, dtype=np.float64),
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


# --------------------------------------------------------------------------------------------
# Traffic splitting
# --------------------------------------------------------------------------------------------


def _goodman_bounds(
    counts: IntArray, level: float, *, quantile: float | None = None
) -> tuple[FloatArray, FloatArray]:
    """Goodman's intervals; ``quantile`` replaces :math:`\\chi^2_{1,1-\\alpha/k}` (the
    quasi-multinomial intervals of :func:`split_test` pass a larger one)."""
    n = float(counts.sum())
    if quantile is None:
        quantile = float(sps.chi2.ppf(1.0 - (1.0 - level) / counts.size, 1))
    n_i = counts.astype(np.float64)
    root = np.sqrt(quantile * (quantile + 4.0 * n_i * (n - n_i) / n))
    low = (quantile + 2.0 * n_i - root) / (2.0 * (n + quantile))
    high = (quantile + 2.0 * n_i + root) / (2.0 * (n + quantile))
    # Exact 0 and 1 where the formula gives them in exact arithmetic, so that a backend that got
    # nothing (or everything) is covered by its own interval despite rounding.
    low[counts == 0] = 0.0
    high[counts == counts.sum()] = 1.0
    return np.clip(low, 0.0, 1.0), np.clip(high, 0.0, 1.0)


def _poisson_window(low: IntArray, high: IntArray, mean: FloatArray) -> FloatArray:
    """P(low <= Y <= high) for Y ~ Poisson(mean), element-wise."""
    return np.asarray(
        sps.poisson.cdf(high, mean) - sps.poisson.cdf(low - 1, mean), dtype=np.float64
    )


def _sison_glaz_coverage(counts: IntArray, c: IntArray) -> FloatArray:
    """Edgeworth approximation of P(|N_i - n_i| <= c for all i), one value per c."""
    n = int(counts.sum())
    mean = counts.astype(np.float64)
    low = np.maximum(counts - c[:, None], 0)
    high = counts + c[:, None]
    inside = _poisson_window(low, high, mean)
    # Factorial moments of the truncated Poisson: E[W(W-1)..(W-r+1)] =
    # mean^r P(low - r <= Y <= high - r) / P(low <= Y <= high).
    with np.errstate(divide="ignore", invalid="ignore"):
        f1, f2, f3, f4 = (
            mean**r * _poisson_window(low - r, high - r, mean) / inside for r in (1, 2, 3, 4)
        )
    m1 = f1
    m2 = f2 + f1
    m3 = f3 + 3.0 * f2 + f1
    m4 = f4 + 6.0 * f3 + 7.0 * f2 + f1
    var = m2 - m1**2
    mu3 = m3 - 3.0 * m1 * m2 + 2.0 * m1**3
    mu4 = m4 - 4.0 * m1 * m3 + 6.0 * m1**2 * m2 - 3.0 * m1**4
    total_var = var.sum(axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        g1 = mu3.sum(axis=1) / total_var**1.5
        g2 = (mu4 - 3.0 * var**2).sum(axis=1) / total_var**2
        x = (n - m1.sum(axis=1)) / np.sqrt(total_var)
        edgeworth = np.asarray(sps.norm.pdf(x), dtype=np.float64) * (
            1.0
            + g1 * (x**3 - 3.0 * x) / 6.0
            + g2 * (x**4 - 6.0 * x**2 + 3.0) / 24.0
            + g1**2 * (x**6 - 15.0 * x**4 + 45.0 * x**2 - 15.0) / 72.0
        )
        log_inside = np.log(inside).sum(axis=1)
        # n! / (n^n e^-n) = 1 / P(Poisson(n) = n)
        log_scale = -float(sps.poisson.logpmf(n, n))
        return np.asarray(
            np.exp(log_scale + log_inside) * edgeworth / np.sqrt(total_var), dtype=np.float64
        )


def _sison_glaz_bounds(counts: IntArray, level: float) -> tuple[FloatArray, FloatArray] | None:
    """Sison-Glaz intervals, or None when the approximated coverage never crosses ``level``."""
    n = int(counts.sum())
    start, block = 1, 64
    while start <= n:
        c = np.arange(start, start + block + 1, dtype=np.int64)
        nu = _sison_glaz_coverage(counts, c)
        bracket = np.flatnonzero((nu[:-1] <= level) & (level < nu[1:]))
        if bracket.size:
            j = int(bracket[0])
            gamma = (level - nu[j]) / (nu[j + 1] - nu[j])
            shares = counts / n
            low = shares - c[j] / n
            high = shares + (c[j] + 2.0 * gamma) / n
            return np.clip(low, 0.0, 1.0), np.clip(high, 0.0, 1.0)
        start += block
        block *= 2
    return None


def splitting_error(
    counts: Mapping[str, int],
    weights: Mapping[str, float],
    *,
    level: float = 0.95,
    method: Literal["goodman", "sison-glaz"] = "goodman",
) -> SplitResult:
    """Compare the requests each backend received with the configured traffic-split weights.

    Parameters
    ----------
    counts : Mapping[str, int]
        Requests answered per backend name, e.g. ``{"v1": 612, "v2": 388}``. A backend that got
        nothing must appear with 0.
    weights : Mapping[str, float]
        Configured weight per backend, any scale (``{"v1": 60, "v2": 40}``); normalised to sum 1.
    level : float, default 0.95
        Simultaneous confidence level of the intervals.
    method : {"goodman", "sison-glaz"}, default "goodman"
        Simultaneous confidence intervals for multinomial proportions.

    Returns
    -------
    SplitResult
        Per-backend observed/expected shares, errors and intervals, plus the G-test and the
        weight-0 backends that were hit.

    Raises
    ------
    InsufficientDataError
        Empty counts, a negative or non-integer count, or no request at all.
    ConfigError
        Negative, non-finite or all-zero weights; a backend named in ``counts`` but not in
        ``weights`` or the other way round (the message names it); ``level`` outside (0, 1);
        unknown ``method``.

    Notes
    -----
    Goodman (1965) is the default: for each of the :math:`k` backends (weight-0 ones included,
    because their share is estimated too), with :math:`A = \\chi^2_{1,\\,1-\\alpha/k}`, it gives

    .. math:: \\frac{A + 2n_i \\mp \\sqrt{A\\,[A + 4 n_i (n - n_i)/n]}}{2(n + A)}

    which is conservative for few backends (exact coverage about 97.5 % for a 95/5 or 60/40
    split of 1000 requests at ``level=0.95``) and needs no iteration. Sison & Glaz (1995) is
    tighter for many backends: intervals ``[p_i - c/n, p_i + (c + 2γ)/n]`` with ``c`` and ``γ``
    from their Edgeworth approximation of the multinomial coverage (truncation bounds
    ``n_i ± c`` not clipped at ``n``, as in the R package MultinomialCI). That approximation is
    rougher for two backends with skewed shares (exact coverage 93.6 % for 95/5, 95.5 % for
    60/40, with 1000 requests) and has no solution for tiny or all-in-one-backend samples;
    then Goodman is used, with a :class:`DegenerateDataWarning`, and ``method`` in the result
    says ``"goodman"``.

    With a single backend the share is 1 by definition and the interval is ``(1, 1)``. A
    weight-0 backend that received nothing has the interval ``[0, upper]``, so its true share 0
    is covered; if it received anything it is listed in ``zero_weight_hits``.

    The G-test compares counts with the weights over backends with non-zero weight only (a hit
    on a weight-0 backend is reported through ``zero_weight_hits`` instead of making G
    infinite): :math:`G = 2 \\sum O_i \\ln(O_i/E_i)`, chi-square with ``k' - 1`` df
    (``scipy.stats.power_divergence(lambda_="log-likelihood")``). With one weighted backend
    (100/0 splits) G is 0 and the p-value NaN: there is nothing to test.

    References
    ----------
    L. A. Goodman, "On simultaneous confidence intervals for multinomial proportions",
    Technometrics 7 (1965) 247-254.
    C. P. Sison and J. Glaz, "Simultaneous confidence intervals and sample size determination for
    multinomial proportions", JASA 90 (1995) 366-369.

    Examples
    --------
    >>> r = splitting_error({"v1": 612, "v2": 388}, {"v1": 60, "v2": 40})
    >>> round(r.error["v1"], 3), r.expected_within_intervals
    (0.012, True)
    """
    observed_counts = _validated_counts(counts)
    shares = _validated_weights(weights)
    _same_backends(list(observed_counts), shares)
    confidence = _validated_level(level)
    chosen = _validated_choice(method, ("goodman", "sison-glaz"), "method")

    names = sorted(observed_counts)
    count_array = np.array([observed_counts[name] for name in names], dtype=np.int64)
    n = int(count_array.sum())
    if count_array.size == 1:
        low = high = np.ones(1)
    elif chosen == "goodman":
        low, high = _goodman_bounds(count_array, confidence)
    else:
        bounds = _sison_glaz_bounds(count_array, confidence)
        if bounds is None:
            _warn(
                f"the Sison-Glaz approximation has no solution for counts "
                f"{count_array.tolist()}; using Goodman intervals instead"
            )
            chosen = "goodman"
            bounds = _goodman_bounds(count_array, confidence)
        low, high = bounds

    observed = {name: observed_counts[name] / n for name in names}
    error = {name: observed[name] - shares[name] for name in names}
    abs_error = {name: abs(value) for name, value in error.items()}

    weighted = [name for name in names if shares[name] > 0.0]
    weighted_counts = np.array([observed_counts[name] for name in weighted], dtype=np.float64)
    weighted_total = float(weighted_counts.sum())
    if len(weighted) < 2:
        g_statistic, p_value = 0.0, math.nan
    elif weighted_total == 0.0:
        g_statistic, p_value = math.nan, math.nan
    else:
        weight_sum = sum(shares[name] for name in weighted)
        expected_counts = (
            np.array([shares[name] / weight_sum for name in weighted]) * weighted_total
        )
        test = sps.power_divergence(weighted_counts, expected_counts, lambda_="log-likelihood")
        g_statistic, p_value = float(test.statistic), float(test.pvalue)

    return SplitResult(
        n=n,
        observed=observed,
        expected={name: shares[name] for name in names},
        error=error,
        abs_error=abs_error,
        intervals={name: (float(low[i]), float(high[i])) for i, name in enumerate(names)},
        max_abs_error=max(abs_error.values()),
        total_variation=0.5 * sum(abs_error.values()),
        g_statistic=g_statistic,
        p_value=p_value,
        zero_weight_hits=[
            name for name in names if shares[name] == 0.0 and observed_counts[name] > 0
        ],
        counts=dict(observed_counts),
        level=confidence,
        method=chosen,
    )


@dataclass(frozen=True)
class SplitTest:
    """One test of a traffic split against its weights, pooled over runs.

    Attributes
    ----------
    runs:
        Runs pooled.
    n:
        Requests pooled.
    counts:
        Pooled requests per backend.
    observed, expected:
        Pooled shares and configured shares (weights normalised), per backend.
    intervals:
        Quasi-multinomial Goodman simultaneous intervals of the pooled shares: Goodman's
        (:func:`splitting_error`) with its :math:`\\chi^2_{1,1-\\alpha/k}` replaced by
        :math:`\\max(\\chi^2_{1,1-\\alpha/k},\\ \\hat\\phi\\, F_{1,d,1-\\alpha/k})`, with
        :math:`\\hat\\phi` the unfloored dispersion and :math:`d` its degrees of freedom
        (``dispersion_df``), so they keep their level when shares vary between runs.
    statistic:
        Pearson's :math:`X^2` of the pooled counts against the weights (weight-0 backends
        left out).
    df:
        Its degrees of freedom, backends with a weight minus one.
    dispersion:
        Estimated overdispersion between runs, :math:`\\hat\\phi = X^2_{het} / ((R-1)(K-1))`
        (1 when it cannot be estimated); above 1 the runs vary more than independent requests
        would.
    p_value:
        ``F(df, (R-1)(K-1))`` of :math:`(X^2/df)/\\hat\\phi` when :math:`\\hat\\phi > 1`, else
        ``chi2(df)`` of :math:`X^2` (NaN with one weighted backend).
    max_abs_error:
        Largest ``|observed - expected|`` over backends (a share).
    level:
        Confidence level of the intervals.
    dispersion_df:
        Degrees of freedom of the dispersion estimate, :math:`(R-1)(K-1)` over the runs with
        requests (0 when it cannot be estimated: one run, one weighted backend).
    """

    runs: int
    n: int
    counts: dict[str, int]
    observed: dict[str, float]
    expected: dict[str, float]
    intervals: dict[str, tuple[float, float]]
    statistic: float
    df: int
    dispersion: float
    p_value: float
    max_abs_error: float
    level: float
    dispersion_df: int = 0


def split_test(
    run_counts: Sequence[Mapping[str, int]],
    weights: Mapping[str, float],
    *,
    level: float = 0.95,
) -> SplitTest:
    """Test whether pooled per-run request counts follow the configured weights.

    One test per split, however many backends (their shares sum to 1, so per-backend tests
    would count one question several times), allowing for runs that vary more than
    independent requests would (quasi-likelihood F test).

    Parameters
    ----------
    run_counts : sequence of mappings
        Per run, requests per backend, e.g. ``[{"v1": 602, "v2": 400}, {"v1": 601, ...}]``.
    weights : Mapping[str, float]
        Configured weights (any scale).
    level : float, default 0.95
        Level of the Goodman intervals.

    Returns
    -------
    SplitTest

    Raises
    ------
    InsufficientDataError
        No run, no request, negative counts, or backends that differ between runs.
    ConfigError
        Bad weights or ``level``.

    Notes
    -----
    With :math:`R` runs, :math:`K` weighted backends, :math:`n_{rk}` requests of run
    :math:`r` to backend :math:`k`, :math:`N_k = \\sum_r n_{rk}`, :math:`N = \\sum_k N_k` and
    weights :math:`w_k`: :math:`X^2 = \\sum_k (N_k - N w_k)^2 / (N w_k)`. The heterogeneity
    between runs is :math:`X^2_{het} = \\sum_{r,k} (n_{rk} - N_r \\hat p_k)^2 / (N_r \\hat
    p_k)` with the pooled shares :math:`\\hat p_k = N_k / N`, and :math:`\\hat\\phi =
    X^2_{het} / ((R-1)(K-1))`. Under independent requests :math:`\\hat\\phi \\approx 1` and
    :math:`X^2 \\sim \\chi^2_{K-1}`; with overdispersion :math:`(X^2/(K-1))/\\hat\\phi \\sim
    F_{K-1,(R-1)(K-1)}` (McCullagh & Nelder 1989, section 4.5). :math:`\\hat\\phi` is never
    taken below 1: a proxy that splits more evenly than chance (round robin) makes the test
    conservative, never liberal.

    The intervals are Goodman's on the pooled counts with the quantile
    :math:`\\max(\\chi^2_{1,1-\\alpha/k}, \\hat\\phi F_{1,(R-1)(K-1),1-\\alpha/k})` (Goodman's
    formula on counts divided by :math:`\\hat\\phi`, with the F quantile for an estimated
    dispersion). Widening the chi-square intervals by :math:`\\sqrt{\\max(1, \\hat\\phi)}`, as
    before, covered 0.86-0.93 with shares varying 2-5 points between 3-5 runs; these cover
    0.96-0.99 (``bench/coverage.py``). With 3 runs they are about twice as wide as plain
    Goodman's even for multinomial runs: 2 degrees of freedom cannot tell those from runs
    that vary. How many requests or runs the test needs: :func:`skew_detection_plan`.

    Examples
    --------
    >>> t = split_test([{"v1": 1204, "v2": 800}, {"v1": 1202, "v2": 802}], {"v1": 60, "v2": 40})
    >>> round(t.p_value, 2)
    0.97
    """
    if len(run_counts) == 0:
        raise InsufficientDataError("a split test needs at least one run of counts")
    shares = _validated_weights(weights)
    confidence = _validated_level(level)
    runs = [_validated_counts(counts) for counts in run_counts]
    names = sorted(runs[0])
    for counts in runs:
        _same_backends(list(counts), shares)
    table = np.array([[counts[name] for name in names] for counts in runs], dtype=np.float64)
    totals = table.sum(axis=0)
    n = int(totals.sum())
    if n == 0:
        raise InsufficientDataError("no request in any run: nothing to test")
    pooled = splitting_error(
        {name: int(totals[i]) for i, name in enumerate(names)}, shares, level=confidence
    )
    weighted = [i for i, name in enumerate(names) if shares[name] > 0.0]
    k = len(weighted)
    per_run = table[:, weighted]
    run_totals = per_run.sum(axis=1)
    per_run = per_run[run_totals > 0]
    run_totals = run_totals[run_totals > 0]
    r = int(per_run.shape[0])
    weight_sum = sum(shares[names[i]] for i in weighted)
    expected_share = np.array([shares[names[i]] / weight_sum for i in weighted])
    weighted_total = float(per_run.sum())
    dispersion = 1.0
    estimated = math.nan  # the unfloored dispersion, when it can be estimated
    df_between = max((r - 1) * (k - 1), 0)
    if k < 2 or weighted_total == 0.0:
        statistic, p_value = 0.0, math.nan
    else:
        pooled_counts = per_run.sum(axis=0)
        expected = weighted_total * expected_share
        statistic = float(np.sum((pooled_counts - expected) ** 2 / expected))
        p_hat = pooled_counts / weighted_total
        if df_between > 0 and np.all(p_hat > 0):
            fitted = np.outer(run_totals, p_hat)
            heterogeneity = float(np.sum((per_run - fitted) ** 2 / fitted))
            estimated = heterogeneity / df_between
            dispersion = max(1.0, estimated)
        if dispersion > 1.0:
            p_value = float(sps.f.sf(statistic / (k - 1) / dispersion, k - 1, df_between))
        else:
            p_value = float(sps.chi2.sf(statistic, k - 1))
    if math.isnan(estimated):
        df_between = 0
    intervals = pooled.intervals
    if df_between > 0 and len(names) > 1:
        # Quasi-multinomial Goodman: the pooled counts vary phi times as much as multinomial
        # ones, and phi is estimated with df_between degrees of freedom, so the chi-square(1)
        # quantile becomes phi_hat * F(1, df_between). Never below Goodman's own: with 3-5
        # runs the dispersion estimate can come out far below 1 by chance. Coverage with
        # shares varying 2-5 points between runs: bench/coverage.py.
        tail = (1.0 - confidence) / len(names)
        quantile = max(
            float(sps.chi2.isf(tail, 1)), estimated * float(sps.f.isf(tail, 1, df_between))
        )
        low, high = _goodman_bounds(totals.astype(np.int64), confidence, quantile=quantile)
        intervals = {name: (float(low[i]), float(high[i])) for i, name in enumerate(names)}
    return SplitTest(
        runs=len(runs),
        n=n,
        counts={name: int(totals[i]) for i, name in enumerate(names)},
        observed=pooled.observed,
        expected=pooled.expected,
        intervals=intervals,
        statistic=statistic,
        df=max(k - 1, 0),
        dispersion=dispersion,
        p_value=p_value,
        max_abs_error=pooled.max_abs_error,
        level=confidence,
        dispersion_df=df_between,
    )


def requests_to_detect_skew(
    weights: Mapping[str, float] | Sequence[float],
    *,
    skew: float = 0.05,
    power: float = 0.9,
    alpha: float = 0.01,
    dispersion: float = 1.0,
) -> int:
    """Requests a pooled split test needs to detect ``skew`` with ``power`` at ``alpha``.

    Parameters
    ----------
    weights : Mapping[str, float] or sequence of float
        Configured weights (any scale; weight-0 backends are not tested).
    skew : float, default 0.05
        Share moved from one backend to another (0.05 = five percentage points, a 70/30
        route served as 65/35), in (0, 1).
    power : float, default 0.9
        Wanted probability of rejecting the weights under that skew.
    alpha : float, default 0.01
        Level of the test.
    dispersion : float, default 1
        Overdispersion between runs (:attr:`SplitTest.dispersion`); the answer scales with it.

    Returns
    -------
    int
        Smallest total ``N`` with ``P(X^2 > chi2_{1-alpha, K-1}) >= power`` under the
        noncentral chi-square with :math:`\\lambda = N \\delta^2 (1/w_i + 1/w_j)`, the skew
        between the two largest weights (the hardest to see), times ``dispersion``.

    Notes
    -----
    ``statsmodels.stats.power.GofChisquarePower`` solves the same equation with effect size
    :math:`\\sqrt{\\lambda / N}` and ``n_bins = K``. That is the power with the dispersion
    known, i.e. with many runs. :func:`split_test` with a few runs estimates the dispersion
    with :math:`(R-1)(K-1)` degrees of freedom and has far less: for a 60/40 split this
    function's 1429 requests have power 0.56 over 5 runs, not 0.9. For the test at hand use
    :func:`skew_detection_plan`, which also says when only more runs can help.
    """
    shares = _validated_weights(weights)
    delta = _validated_positive(skew, "skew")
    if delta >= 1.0:
        raise ConfigError(f"skew is a share and must be below 1, got {_shown(skew)}")
    _validated_level(power)
    _validated_level(alpha)
    phi = max(1.0, _validated_positive(dispersion, "dispersion"))
    positive = sorted((w for w in shares.values() if w > 0.0), reverse=True)
    if len(positive) < 2:
        raise ConfigError("a split with fewer than two weighted backends has nothing to test")
    total = sum(positive)
    first, second = positive[0] / total, positive[1] / total
    per_request = delta**2 * (1.0 / first + 1.0 / second)
    df = len(positive) - 1
    critical = float(sps.chi2.isf(alpha, df))

    def reached(n: int) -> bool:
        return float(sps.ncx2.sf(critical, df, n * per_request)) >= power

    lo, hi = 1, 2
    while not reached(hi):
        lo, hi = hi, hi * 2
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if reached(mid):
            hi = mid
        else:
            lo = mid
    return math.ceil(hi * phi)


def _skew_per_request(shares: Mapping[str, float], delta: float) -> tuple[float, int]:
    """Noncentrality per request of a ``delta`` skew between the two largest weights, and the
    test's degrees of freedom (weighted backends minus one)."""
    positive = sorted((w for w in shares.values() if w > 0.0), reverse=True)
    if len(positive) < 2:
        raise ConfigError("a split with fewer than two weighted backends has nothing to test")
    total = sum(positive)
    first, second = positive[0] / total, positive[1] / total
    return delta**2 * (1.0 / first + 1.0 / second), len(positive) - 1


def _split_test_power(
    noncentrality: float, dispersion: float, df: int, df_between: int, alpha: float
) -> float:
    """Power of split_test's rule: the F test when its dispersion estimate exceeds 1, else
    the chi-square test, with ``X^2 / phi`` noncentral chi-square (``noncentrality / phi``)
    and ``phi_hat = phi V / d``, ``V`` chi-square with ``d = df_between``, independent."""
    phi = max(1.0, dispersion)
    shifted = noncentrality / phi
    chi_critical = float(sps.chi2.isf(alpha, df))
    if df_between == 0:
        return float(sps.ncx2.sf(chi_critical / phi, df, shifted))
    f_critical = float(sps.f.isf(alpha, df, df_between))
    switch = df_between / phi  # V above this: phi_hat > 1, the F test is used

    def rejected_by_f(v: float) -> float:
        threshold = df * f_critical * v / df_between
        return float(sps.chi2.pdf(v, df_between) * sps.ncx2.sf(threshold, df, shifted))

    by_f, _ = integrate.quad(rejected_by_f, switch, math.inf, limit=200)
    by_chi = float(sps.chi2.cdf(switch, df_between) * sps.ncx2.sf(chi_critical / phi, df, shifted))
    return min(1.0, max(0.0, float(by_f) + by_chi))


def _validated_runs(runs: int, name: str = "runs") -> int:
    if isinstance(runs, bool) or not isinstance(runs, int | np.integer) or runs < 1:
        raise ConfigError(f"{name} must be a whole number >= 1, got {_shown(runs)}")
    return int(runs)


def split_test_power(
    weights: Mapping[str, float] | Sequence[float],
    *,
    requests: float,
    runs: int,
    skew: float = 0.05,
    alpha: float = 0.01,
    dispersion: float = 1.0,
) -> float:
    """Power of :func:`split_test` to reject the weights when ``skew`` moved between backends.

    Parameters
    ----------
    weights : Mapping[str, float] or sequence of float
        Configured weights (any scale; weight-0 backends are not tested).
    requests : float
        Requests pooled over all runs.
    runs : int
        Runs they are spread over (equally).
    skew : float, default 0.05
        Share moved from the largest weight to the second largest (0.05 = five points).
    alpha : float, default 0.01
        Level of the test.
    dispersion : float, default 1
        Between-run overdispersion at ``requests / runs`` requests per run (values below 1
        count as 1, as the test floors its estimate).

    Returns
    -------
    float
        The probability that ``split_test(...).p_value < alpha``, in [0, 1].

    Notes
    -----
    :func:`split_test` uses the F test :math:`(X^2/(K-1))/\\hat\\phi \\sim F_{K-1,d}`,
    :math:`d = (R-1)(K-1)`, when :math:`\\hat\\phi > 1`, else the chi-square test of
    :math:`X^2`. With :math:`X^2/\\phi` noncentral chi-square with :math:`K-1` df and
    noncentrality :math:`\\lambda/\\phi`, :math:`\\lambda = N\\delta^2(1/w_1 + 1/w_2)`, and
    :math:`\\hat\\phi = \\phi V/d` with :math:`V \\sim \\chi^2_d` independent of it, the power
    is the integral of both branches over :math:`V`. With many runs it tends to the
    noncentral chi-square power :func:`requests_to_detect_skew` solves; with 5 runs it is
    far below it (1429 requests give 0.57, not 0.9, for a 5-point skew of a 60/40 split).
    """
    shares = _validated_weights(weights)
    delta = _validated_positive(skew, "skew")
    if delta >= 1.0:
        raise ConfigError(f"skew is a share and must be below 1, got {_shown(skew)}")
    _validated_level(alpha)
    n = _validated_positive(requests, "requests")
    r = _validated_runs(runs)
    phi = _validated_positive(dispersion, "dispersion")
    per_request, df = _skew_per_request(shares, delta)
    return _split_test_power(n * per_request, phi, df, (r - 1) * df, alpha)


@dataclass(frozen=True)
class SkewPlan:
    """How many requests :func:`split_test` needs to see a skew, or that runs are needed.

    Attributes
    ----------
    skew:
        Share moved between the two largest weights (0.05 = five points).
    power_wanted:
        The power asked for.
    alpha:
        Level of the test.
    runs:
        Runs the requests are spread over.
    requests:
        Fewest requests pooled over ``runs`` runs whose power reaches ``power_wanted``; None
        when no number of requests can at this many runs (see ``runs_needed``).
    power:
        Power of :func:`split_test` at ``requests``; when unreachable, the most any number of
        requests gives at ``runs`` runs (its limit).
    runs_needed:
        ``runs`` when reachable; else the fewest runs of ``requests_per_run`` requests each
        that reach ``power_wanted``.
    requests_per_run:
        Requests per run at which ``dispersion`` was measured.
    dispersion:
        Between-run dispersion at ``requests_per_run`` (at least 1).
    """

    skew: float
    power_wanted: float
    alpha: float
    runs: int
    requests: int | None
    power: float
    runs_needed: int
    requests_per_run: float
    dispersion: float

    @property
    def reachable(self) -> bool:
        """True when more requests at ``runs`` runs reach the power; else more runs are
        needed."""
        return self.requests is not None

    def statement(self) -> str:
        """One clause for a report, e.g. ``"a 5-point skew needs about 2713 requests over 5
        runs (power 0.9, alpha 0.01)"``."""
        what = f"a {100 * self.skew:g}-point skew"
        wanted = f"power {self.power_wanted:g}, alpha {self.alpha:g}"
        if self.requests is not None:
            return f"{what} needs about {self.requests} requests over {self.runs} run(s) ({wanted})"
        return (
            f"{what}: no number of requests over {self.runs} run(s) reaches {wanted} (at most"
            f" {self.power:.2f}: the runs vary too much); about {self.runs_needed} runs of"
            f" {self.requests_per_run:.0f} requests do"
        )


def skew_detection_plan(
    weights: Mapping[str, float] | Sequence[float],
    *,
    runs: int,
    requests_per_run: float,
    dispersion: float = 1.0,
    skew: float = 0.05,
    power: float = 0.9,
    alpha: float = 0.01,
    most_runs: int = 100_000,
) -> SkewPlan:
    """Requests :func:`split_test` needs at ``runs`` runs to detect ``skew``, or runs instead.

    Parameters
    ----------
    weights : Mapping[str, float] or sequence of float
        Configured weights (any scale; weight-0 backends are not tested).
    runs : int
        Runs the test pools (e.g. :attr:`SplitTest.runs`).
    requests_per_run : float
        Requests per run at which ``dispersion`` was measured (:attr:`SplitTest.n` divided by
        :attr:`SplitTest.runs`).
    dispersion : float, default 1
        Between-run overdispersion measured there (:attr:`SplitTest.dispersion`).
    skew, power, alpha : float
        Share moved between the two largest weights, wanted power, level of the test.
    most_runs : int, default 100000
        Give up looking for runs above this many (returned as is).

    Returns
    -------
    SkewPlan
        ``requests`` with its power from :func:`split_test_power` (the test's own F or
        chi-square rule with ``(runs - 1)(K - 1)`` df for the dispersion), or, when no number
        of requests reaches ``power``, ``requests = None`` and ``runs_needed``.

    Notes
    -----
    Runs whose shares vary by :math:`\\tau` have dispersion :math:`\\phi(m) = 1 + (m - 1)\\beta`
    at :math:`m` requests per run, :math:`\\beta = \\tau^2/(p(1-p))` (exact for a
    Dirichlet-multinomial). ``dispersion`` at ``requests_per_run`` gives :math:`\\beta`, so
    more requests per run raise the dispersion too: the noncentrality
    :math:`\\lambda/\\phi` tends to :math:`R\\delta^2(1/w_1+1/w_2)/\\beta` and the power to
    that of the noncentral F with it. When that limit is below ``power``, only runs help, and
    ``runs_needed`` is the fewest runs of ``requests_per_run`` requests that reach it.
    ``bench/coverage.py`` checks the stated power against simulated split tests.

    Examples
    --------
    >>> plan = skew_detection_plan({"v1": 60, "v2": 40}, runs=5, requests_per_run=1000)
    >>> plan.requests, round(plan.power, 2)
    (4378, 0.9)
    """
    shares = _validated_weights(weights)
    delta = _validated_positive(skew, "skew")
    if delta >= 1.0:
        raise ConfigError(f"skew is a share and must be below 1, got {_shown(skew)}")
    wanted = _validated_level(power)
    level = _validated_level(alpha)
    r = _validated_runs(runs)
    ceiling = _validated_runs(most_runs, "most_runs")
    m = _validated_positive(requests_per_run, "requests_per_run")
    phi = max(1.0, _validated_positive(dispersion, "dispersion"))
    per_request, df = _skew_per_request(shares, delta)
    slope = (phi - 1.0) / (m - 1.0) if m > 1.0 else 0.0

    def power_at(n: float, r_: int, phi_: float) -> float:
        return _split_test_power(n * per_request, phi_, df, (r_ - 1) * df, level)

    def power_with_requests(n: int) -> float:
        return power_at(n, r, 1.0 + slope * max(n / r - 1.0, 0.0))

    if slope > 0.0 and r > 1:
        limit = float(
            sps.ncf.sf(
                sps.f.isf(level, df, (r - 1) * df), df, (r - 1) * df, r * per_request / slope
            )
        )
    else:
        limit = 1.0
    if limit < wanted:

        def reached(count: int) -> bool:
            return power_at(count * m, count, phi) >= wanted

        lo, hi = r, r + 1
        while not reached(hi) and hi < ceiling:
            lo, hi = hi, min(2 * hi, ceiling)
        while hi - lo > 1:
            mid = (lo + hi) // 2
            if reached(mid):
                hi = mid
            else:
                lo = mid
        return SkewPlan(delta, wanted, level, r, None, limit, hi, m, phi)
    lo, hi = 0, max(r, 2)
    while power_with_requests(hi) < wanted:
        lo, hi = hi, hi * 2
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if power_with_requests(mid) >= wanted:
            hi = mid
        else:
            lo = mid
    return SkewPlan(delta, wanted, level, r, hi, power_with_requests(hi), r, m, phi)


def _factorized_labels(labels: Any, expected_length: int) -> tuple[npt.NDArray[np.intp], list[str]]:
    """Integer codes (0..K-1) and names of backend labels, fast for 10^7 labels.

    Categorical data use their codes; NumPy unicode arrays are hashed as fixed-width integers
    (exact for names up to 2 characters, hash-and-verify for longer ones) because pandas'
    factorize on unicode arrays converts each element to a Python object first.
    """
    if isinstance(labels, pd.Series) and isinstance(labels.dtype, pd.CategoricalDtype):
        codes = np.asarray(labels.cat.codes, dtype=np.intp)
        names = [str(name) for name in labels.cat.categories]
    elif isinstance(labels, pd.Categorical):
        codes = np.asarray(labels.codes, dtype=np.intp)
        names = [str(name) for name in labels.categories]
    elif isinstance(labels, np.ndarray) and labels.dtype.kind == "U" and labels.dtype.itemsize:
        codes, names = _factorized_unicode(np.ascontiguousarray(labels))
    else:
        raw = (
            labels if isinstance(labels, pd.Series | pd.Index) else np.asarray(labels, dtype=object)
        )
        factor_codes, uniques = pd.factorize(raw)
        codes = np.asarray(factor_codes, dtype=np.intp)
        names = [str(name) for name in uniques]
    if codes.ndim != 1 or codes.size != expected_length:
        raise InsufficientDataError(
            f"backends has {codes.size} labels but timestamps has {expected_length} values"
        )
    if codes.size and int(codes.min()) < 0:
        missing = np.flatnonzero(codes < 0)
        raise InsufficientDataError(
            f"backends has {missing.size} missing label(s), the first at index {int(missing[0])}"
        )
    if len(set(names)) != len(names):
        raise InsufficientDataError(f"backend labels are not distinct as strings: {names}")
    return codes, names


def _factorized_unicode(labels: npt.NDArray[np.str_]) -> tuple[npt.NDArray[np.intp], list[str]]:
    width = labels.dtype.itemsize
    if width in (4, 8):
        key_type = np.uint32 if width == 4 else np.uint64
        factor_codes, uniques = pd.factorize(labels.view(key_type))
        names = [str(name) for name in np.asarray(uniques, dtype=key_type).view(labels.dtype)]
        return np.asarray(factor_codes, dtype=np.intp), names
    # Longer names: a 64-bit polynomial hash of the characters, then an exact check of every
    # label against its class representative. Blocks keep the temporaries small (see
    # _window_counts for why that matters at 10^7 labels).
    chars = labels.view(np.uint32).reshape(labels.size, width // 4)
    keys = np.empty(labels.size, dtype=np.uint64)
    step = 1 << 16
    for begin in range(0, labels.size, step):
        block, key = chars[begin : begin + step], keys[begin : begin + step]
        key[...] = block[:, 0]
        for column in range(1, block.shape[1]):
            key *= np.uint64(1_000_003)
            key ^= block[:, column]
    factor_codes, _ = pd.factorize(keys)
    codes = np.asarray(factor_codes, dtype=np.intp)
    # pandas numbers codes by first appearance, so the running maximum steps up exactly at the
    # first occurrence of each code: that element is the label's representative.
    first = np.searchsorted(np.maximum.accumulate(codes), np.arange(int(codes.max()) + 1))
    representatives = labels[first]
    for begin in range(0, labels.size, step):
        if not np.array_equal(
            representatives[codes[begin : begin + step]], labels[begin : begin + step]
        ):  # a hash collision: fall back to the exact (slower) factorisation
            factor_codes, uniques = pd.factorize(labels.astype(object))
            return np.asarray(factor_codes, dtype=np.intp), [str(name) for name in uniques]
    return codes, [str(name) for name in representatives]


def _window_counts(
    timestamps: FloatArray, codes: npt.NDArray[np.intp], n_codes: int, length: float
) -> IntArray:
    """Requests per (window, label code) as a ``(n_windows, n_codes)`` array.

    Works through the records in blocks of 2^18 with two reused buffers: whole-array temporaries
    of 10^7 elements cost more in fresh memory pages than the arithmetic itself. Counting over
    the raw codes (and moving the few columns afterwards) avoids remapping every code.
    """
    first = float(timestamps.min())
    # The same float steps as for each element below, so the last window index agrees.
    n_windows = math.floor((float(timestamps.max()) - first) / length) + 1
    counts = np.zeros(n_windows * n_codes, dtype=np.int64)
    block = min(1 << 18, timestamps.size)
    offsets = np.empty(block, dtype=np.float64)
    keys = np.empty(block, dtype=np.int64)
    for begin in range(0, timestamps.size, block):
        part = timestamps[begin : begin + block]
        offset, key = offsets[: part.size], keys[: part.size]
        np.subtract(part, first, out=offset)
        np.divide(offset, length, out=offset)
        np.floor(offset, out=offset)
        key[...] = offset
        key *= n_codes
        key += codes[begin : begin + block]
        counts += np.bincount(key, minlength=counts.size)
    return counts.reshape(n_windows, n_codes)


def windowed_shares(
    timestamps: npt.ArrayLike,
    backends: npt.ArrayLike | pd.Series | pd.Categorical,
    *,
    window: float = 5.0,
    weights: Mapping[str, float] | None = None,
) -> pd.DataFrame:
    """Share of requests per backend in consecutive time windows, and distance to the weights.

    Parameters
    ----------
    timestamps : array_like
        Time of each request in seconds (any origin, e.g. Unix time; need not be sorted).
    backends : array_like, pandas.Series or pandas.Categorical
        Name of the backend that answered each request, same length as ``timestamps``.
        Categorical data and NumPy string arrays are the fastest inputs.
    window : float, default 5.0
        Window length in seconds.
    weights : Mapping[str, float], optional
        Configured weights (any scale, normalised); adds the reference share and distances.

    Returns
    -------
    pandas.DataFrame
        One row per (non-empty window, backend), sorted by ``window_start`` then ``backend``,
        with columns ``window_start`` (s since the earliest timestamp), ``backend``, ``count``,
        ``window_total`` (requests in the window) and ``share``; with ``weights`` also
        ``reference`` (normalised weight), ``distance`` (``|share - reference|``) and
        ``total_variation`` (half the sum of the window's distances, repeated on each of its
        rows). Every backend seen or weighted has a row in every non-empty window, with count 0
        if it answered nothing there.

    Raises
    ------
    InsufficientDataError
        Empty or non-finite timestamps, lengths that differ, missing backend labels.
    ConfigError
        Non-positive ``window``; bad ``weights``; a backend in the data without a weight.

    Notes
    -----
    Window ``j`` is the half-open interval ``[t0 + j*window, t0 + (j+1)*window)`` with ``t0`` the
    earliest timestamp; the last window may be partial. Windows with no request at all have no
    share and are left out. The computation is vectorised (integer label codes, then
    ``numpy.bincount`` over ``window * K + backend`` in blocks): on a 2-core machine, 10^7
    requests take about 0.1 s with Categorical labels or short NumPy string labels, and up to
    about 1 s with long names, object arrays or pandas string Series (``bench/analysis.py``).

    Examples
    --------
    >>> df = windowed_shares([0.0, 1.0, 2.0, 6.0], ["a", "b", "a", "b"], weights={"a": 1, "b": 1})
    >>> df["window_start"].tolist(), df["backend"].tolist(), df["count"].tolist()
    ([0.0, 0.0, 5.0, 5.0], ['a', 'b', 'a', 'b'], [2, 1, 0, 1])
    >>> df["total_variation"].round(3).tolist()
    [0.167, 0.167, 0.5, 0.5]
    """
    t = _validated_values(timestamps, "timestamps")
    length = _validated_positive(window, "window")
    reference = None if weights is None else _validated_weights(weights)
    codes, seen = _factorized_labels(backends, t.size)
    if reference is not None:
        unknown = [name for name in seen if name not in reference]
        if unknown:
            raise ConfigError(
                f"backend {unknown[0]!r} answered requests but has no weight "
                f"(weights name {sorted(reference)})"
            )
    names = sorted(set(seen) | set(reference or {}))
    column_of_code = np.array([names.index(name) for name in seen], dtype=np.intp)

    by_code = _window_counts(t, codes, len(seen), length)
    n_windows = by_code.shape[0]
    grid = np.zeros((n_windows, len(names)), dtype=np.int64)
    grid[:, column_of_code] = by_code
    totals = grid.sum(axis=1)
    occupied = np.flatnonzero(totals > 0)
    grid, totals = grid[occupied], totals[occupied]
    share = grid / totals[:, None]

    k = len(names)
    frame = pd.DataFrame(
        {
            "window_start": np.repeat(occupied * length, k).astype(np.float64),
            "backend": np.tile(np.array(names, dtype=object), occupied.size),
            "count": grid.ravel(),
            "window_total": np.repeat(totals, k),
            "share": share.ravel(),
        }
    )
    if reference is not None:
        reference_row = np.array([reference[name] for name in names], dtype=np.float64)
        distance = np.abs(share - reference_row)
        frame["reference"] = np.tile(reference_row, occupied.size)
        frame["distance"] = distance.ravel()
        frame["total_variation"] = np.repeat(0.5 * distance.sum(axis=1), k)
    return frame


def requests_needed(
    weights: Mapping[str, float] | Sequence[float],
    *,
    tolerance: float,
    level: float = 0.95,
) -> int:
    """Number of requests after which every backend's share is known to within ``tolerance``.

    Parameters
    ----------
    weights : Mapping[str, float] or sequence of float
        Configured weights (any scale, normalised), e.g. ``{"v1": 95, "v2": 5}``.
    tolerance : float
        Largest acceptable half-width of each share's simultaneous interval, as a fraction
        (0.01 = one percentage point), in (0, 1).
    level : float, default 0.95
        Simultaneous confidence level, strictly between 0 and 1.

    Returns
    -------
    int
        Smallest ``n >= 1`` for which the Goodman interval of every backend, computed at its
        expected count ``n * p_i``, has half-width ``<= tolerance``.

    Raises
    ------
    ConfigError
        Bad weights, ``tolerance`` outside (0, 1), ``level`` outside (0, 1).

    Notes
    -----
    The Goodman interval (see :func:`splitting_error`) of a share :math:`p` with :math:`k`
    backends has half-width :math:`h(n) = \\sqrt{A^2 + 4Anp(1-p)} / (2(n + A))` with
    :math:`A = \\chi^2_{1,\\,1-\\alpha/k}` (a Bonferroni split of :math:`\\alpha`), decreasing in
    :math:`n`. The worst backend is the one whose weight is nearest 0.5 (largest
    :math:`q = p(1-p)`); :math:`h(n) \\le \\varepsilon` is the quadratic
    :math:`4\\varepsilon^2 n^2 + (8\\varepsilon^2 A - 4Aq) n + (4\\varepsilon^2 - 1)A^2 \\ge 0`,
    whose larger root, rounded up, is the answer (checked against :math:`h` to absorb rounding).
    For large :math:`n` this is the familiar :math:`n \\approx A q / \\varepsilon^2`. With a single
    backend there is nothing to estimate and the answer is 1.

    Examples
    --------
    >>> requests_needed({"v1": 60, "v2": 40}, tolerance=0.02)
    3010
    """
    shares = _validated_weights(weights)
    epsilon = _validated_positive(tolerance, "tolerance")
    if epsilon >= 1.0:
        raise ConfigError(f"tolerance is a share and must be below 1, got {_shown(tolerance)}")
    confidence = _validated_level(level)
    k = len(shares)
    if k == 1:
        return 1
    a = float(sps.chi2.ppf(1.0 - (1.0 - confidence) / k, 1))
    q = max(p * (1.0 - p) for p in shares.values())

    def half_width(n: int) -> float:
        return math.sqrt(a * a + 4.0 * a * n * q) / (2.0 * (n + a))

    quad_b = 8.0 * epsilon**2 * a - 4.0 * a * q
    quad_c = (4.0 * epsilon**2 - 1.0) * a * a
    discriminant = quad_b**2 - 16.0 * epsilon**2 * quad_c
    root = (-quad_b + math.sqrt(max(discriminant, 0.0))) / (8.0 * epsilon**2)
    n = max(1, math.ceil(root))
    while half_width(n) > epsilon:
        n += 1
    while n > 1 and half_width(n - 1) <= epsilon:
        n -= 1
    return n


# --------------------------------------------------------------------------------------------
# Figure helpers
# --------------------------------------------------------------------------------------------


def histogram(
    values: npt.ArrayLike,
    *,
    bins: int | str | Sequence[float] = "auto",
    log: bool = False,
) -> Histogram:
    """Histogram of a sample, optionally with logarithmically spaced bins.

    Parameters
    ----------
    values : array_like
        The sample, any unit; strictly positive when ``log`` is true.
    bins : int, str or sequence of float, default "auto"
        Number of bins, a NumPy bin-width rule (``"auto"``, ``"fd"``, ``"sturges"``, ...) or
        explicit edges (used as given, also with ``log``).
    log : bool, default False
        Space the bins evenly in ``log10(values)`` (for long-tailed request times).

    Returns
    -------
    Histogram
        Counts and edges; every value is counted exactly once.

    Raises
    ------
    InsufficientDataError
        Empty input, NaN/infinite values, or non-positive values with ``log``.
    ConfigError
        Unknown rule, non-positive number of bins or decreasing edges.

    Notes
    -----
    With ``log``, the rule or number of bins is applied to ``log10(values)`` and the edges are
    mapped back with ``10**edge``; the outer edges are then widened to the exact extremes so no
    value is lost to rounding.

    Examples
    --------
    >>> h = histogram([1.0, 10.0, 100.0, 1000.0], bins=3, log=True)
    >>> h.counts.tolist()
    [1, 1, 2]
    """
    x = _validated_values(values, "values")
    if log and float(x.min()) <= 0.0:
        raise InsufficientDataError(
            f"log-spaced bins need positive values, got a minimum of {float(x.min())!r}"
        )
    if isinstance(bins, bool) or (isinstance(bins, int | np.integer) and int(bins) < 1):
        raise ConfigError(f"bins must be a positive number of bins, got {_shown(bins)}")
    explicit = not isinstance(bins, str | int | np.integer)
    try:
        if explicit:
            edges = np.asarray(bins, dtype=np.float64)
        elif log:
            edges = 10.0 ** np.histogram_bin_edges(np.log10(x), bins=bins)
            edges[0] = min(edges[0], float(x.min()))
            edges[-1] = max(edges[-1], float(x.max()))
        else:
            edges = np.histogram_bin_edges(x, bins=bins)
        counts, edges = np.histogram(x, bins=edges)
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"bins={bins!r} cannot be used: {exc}") from exc
    return Histogram(counts=counts.astype(np.int64), edges=edges.astype(np.float64))
