"""Summaries of one sample and of one condition's runs: descriptive statistics, truncated means,
the per-condition estimate every table and report shows (:func:`summarize_runs`), histograms."""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal, TypeAlias

import numpy as np
import numpy.typing as npt

from cnibench.errors import ConfigError, InsufficientDataError
from cnibench.stats._validation import (
    DegenerateDataWarning,
    FloatArray,
    IntArray,
    _shown,
    _validated_level,
    _validated_values,
    _warn,
)
from cnibench.stats.intervals import Interval, confidence_interval, geometric_mean_interval
from cnibench.stats.outliers import OUTLIER_METHOD, Outlier, outlier_report
from cnibench.stats.proportions import proportion_interval


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
