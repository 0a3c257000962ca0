"""The mean of one sample with its confidence interval: Student t, bootstrap, and the geometric
mean with the Student-t interval of the mean logarithm."""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass, field
from typing import Literal

import numpy as np
import numpy.typing as npt
from scipy import stats as sps

from cnibench.errors import InsufficientDataError
from cnibench.stats._validation import (
    BootstrapMethod,
    DegenerateDataWarning,
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
