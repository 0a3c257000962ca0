"""Traffic-split accuracy: observed shares of one sample of counts against the configured
weights, with simultaneous intervals (Goodman, Sison-Glaz) and a G-test, and one pooled test of
several runs' counts that allows for overdispersion (:func:`split_test`)."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np
from scipy import stats as sps

from cnibench.errors import InsufficientDataError
from cnibench.stats._validation import (
    FloatArray,
    IntArray,
    _same_backends,
    _validated_choice,
    _validated_counts,
    _validated_level,
    _validated_weights,
    _warn,
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
    dispersion_estimate:
        :math:`\\hat\\phi` before its floor at 1 (NaN when it cannot be estimated): what
        :func:`skew_detection_plan` spreads over the dispersion's uncertainty. The floor
        would hide how far below 1 it came, and so make a pilot of multinomial runs look
        as if it might hide much more dispersion than it can.
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
    dispersion_estimate: float = math.nan


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
        dispersion_estimate=estimated,
    )
