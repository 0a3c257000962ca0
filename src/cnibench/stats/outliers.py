"""Runs far from the others: the modified z-score (MAD rule) and Tukey's fences, on the scale the
summary estimates on, with limits that keep the rate of flagged clean samples at 4 %."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

import numpy as np
import numpy.typing as npt
from scipy import stats as sps

from cnibench.errors import ConfigError
from cnibench.stats._validation import (
    FloatArray,
    _shown,
    _validated_choice,
    _validated_positive,
    _validated_values,
    _warn,
)

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


OUTLIER_METHOD: Literal["mad", "iqr"] = "mad"
"""The outlier rule of every per-condition summary: modified z-score (Iglewicz & Hoaglin)."""
OUTLIER_THRESHOLD = 3.5
"""The fixed limit of Iglewicz & Hoaglin, kept for callers that name it. Per-condition summaries
no longer use it: a run is *flagged* (shown, never dropped) when its modified z-score, on the
scale of the estimate, exceeds :func:`outlier_threshold` of the number of runs (27 at 3 runs,
9.0 at 5, 4.9 at 10, 4.2 at 20), because 3.5 flagged a run in 13-29 % of clean samples of 3-10
runs."""


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
