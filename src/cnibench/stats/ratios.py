r"""Ratios of geometric means on the log scale, and the session-to-session variance of logs.

The regression gate (:mod:`cnibench.report.compare`) and the verdict compare two sides by the
ratio of their geometric means: the difference of the mean logarithms, with Welch's interval
(:func:`log_ratio_interval`). Runs of one session share that session's conditions, so when a
side holds several A/A sessions the variance of its logs has a session-to-session component
(:func:`session_variance`). A one-sided test of such a ratio against a threshold raises a false
alarm, when nothing changed, at the rate :func:`false_alarm_beyond` (a significant loss beyond
the threshold) or :func:`false_alarm_not_cleared` (an interval that does not clear it) give.

Pure: numbers in, a frozen result out; the values carry whatever unit they were measured in
(bits/s, µs, %, MB) and the ratios are dimensionless. Import these from
``cnibench.stats.ratios`` (or from :mod:`cnibench.report.compare`, which re-exports them).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
from scipy import stats as sps

from cnibench.errors import ConfigError, InsufficientDataError
from cnibench.stats.contrasts import compare

__all__ = [
    "RatioInterval",
    "SessionVariance",
    "false_alarm_beyond",
    "false_alarm_not_cleared",
    "log_ratio_interval",
    "session_variance",
]

_LARGE_DF = 1e4
"""Degrees of freedom beyond which the estimated standard error is taken as exact."""


@dataclass(frozen=True)
class RatioInterval:
    """Ratio candidate / baseline of geometric means with its interval.

    Attributes
    ----------
    ratio:
        ``exp(mean(log candidate) - mean(log baseline))``; dimensionless.
    low, high:
        Bounds of the interval: positive and finite for positive values with at least 2 per
        side; equal to ``ratio`` when both samples are constant.
    level:
        Confidence level, e.g. 0.95.
    p_value:
        Welch's two-sided p-value for equal mean logarithms (NaN when undefined).
    df:
        Welch–Satterthwaite degrees of freedom of the log-scale interval.
    n_baseline, n_candidate:
        Sample sizes.
    """

    ratio: float
    low: float
    high: float
    level: float
    p_value: float
    df: float
    n_baseline: int
    n_candidate: int


def log_ratio_interval(
    baseline: npt.ArrayLike, candidate: npt.ArrayLike, *, level: float = 0.95
) -> RatioInterval:
    """Ratio of geometric means candidate / baseline with a Welch t interval on the log scale.

    Parameters
    ----------
    baseline, candidate:
        One positive value per run, same unit (e.g. bits/s).
    level:
        Confidence level in (0, 1).

    Returns
    -------
    RatioInterval
        ``exp`` of :func:`cnibench.stats.compare` applied to ``log(baseline)`` and
        ``log(candidate)``: the difference of the mean logarithms and its Welch interval.

    Raises
    ------
    InsufficientDataError
        Empty input, NaN/infinite or non-positive values.
    ConfigError
        ``level`` outside (0, 1).

    Warns
    -----
    cnibench.stats.DegenerateDataWarning
        Fewer than 2 values on a side (NaN bounds) or both sides constant (zero width).

    Examples
    --------
    >>> r = log_ratio_interval([100.0, 104.0, 96.0], [80.0, 83.0, 77.0])
    >>> round(r.ratio, 3), r.low < r.ratio < r.high < 1.0
    (0.8, True)
    """
    b = np.asarray(baseline, dtype=np.float64)
    c = np.asarray(candidate, dtype=np.float64)
    for name, values in (("baseline", b), ("candidate", c)):
        finite = values[np.isfinite(values)]
        if finite.size and np.any(finite <= 0.0):
            raise InsufficientDataError(
                f"{name} has values <= 0: a ratio on the log scale needs positive values"
            )
    with np.errstate(divide="ignore", invalid="ignore"):
        log_b, log_c = np.log(b), np.log(c)
    comparison = compare(log_b, log_c, level=level, method="welch")
    return RatioInterval(
        ratio=math.exp(comparison.difference),
        low=math.exp(comparison.ci_low),
        high=math.exp(comparison.ci_high),
        level=comparison.level,
        p_value=comparison.p_value,
        df=comparison.df,
        n_baseline=comparison.n_baseline,
        n_candidate=comparison.n_treatment,
    )


@dataclass(frozen=True)
class SessionVariance:
    """Session-to-session variance of the log values, from several A/A baseline sessions.

    Attributes
    ----------
    variance:
        Between-session variance component of ``log(value)``, pooled over every condition and
        metric (a common relative session-to-session SD), at least 0.
    df:
        Its effective degrees of freedom (Satterthwaite, see :func:`session_variance`), at
        most the sum of (sessions - 1) over the groups pooled.
    sessions:
        Most baseline sessions of one group.
    """

    variance: float
    df: float
    sessions: int

    @property
    def sd_percent(self) -> float:
        """The session-to-session SD as a relative change, in %."""
        return 100.0 * math.expm1(math.sqrt(self.variance))


def session_variance(groups: Sequence[Sequence[npt.ArrayLike]]) -> SessionVariance | None:
    r"""Pooled session-to-session variance of log values from A/A baseline sessions.

    Parameters
    ----------
    groups:
        Per (condition, metric), the positive values of each baseline session.

    Returns
    -------
    SessionVariance or None
        ``None`` when no group has two sessions.

    Notes
    -----
    Per group with :math:`S` sessions of :math:`n_s` runs, session means :math:`m_s` of the
    logarithms and within-session variances :math:`s_s^2`: :math:`T = \mathrm{var}(m_s)`
    (:math:`S - 1` df) and :math:`W = \overline{s_s^2/n_s}` (:math:`\sum (n_s - 1)` df),
    each pooled over groups with weights :math:`S - 1`; the method-of-moments component is
    :math:`\hat\sigma_s^2 = \max(0, T - W)`. Its degrees of freedom are Satterthwaite's for a
    difference, :math:`(T - W)^2 / (T^2/\nu_T + W^2/\nu_W)`: far fewer than the
    :math:`\sum (S - 1)` of :math:`T` alone when the run noise is a large part of it, and
    using those made the gate's far-tail p-values too small (1.6 % family-wise false alarms
    instead of 1 % in a simulation of 20 metrics, 3 sessions of 5 runs, CV 5 %, session SD 3 %).
    """
    weight_sum, tau, within, df_within, most = 0, 0.0, 0.0, 0, 0
    for sessions in groups:
        logs = [np.log(np.asarray(v, dtype=np.float64)) for v in sessions]
        logs = [v for v in logs if v.size >= 1]
        if len(logs) < 2:
            continue
        means = np.array([float(v.mean()) for v in logs])
        parts = [float(v.var(ddof=1)) / v.size for v in logs if v.size >= 2]
        weight = len(logs) - 1
        tau += weight * float(means.var(ddof=1))
        within += weight * (float(np.mean(parts)) if parts else 0.0)
        df_within += sum(v.size - 1 for v in logs)
        weight_sum += weight
        most = max(most, len(logs))
    if weight_sum == 0:
        return None
    tau, within = tau / weight_sum, within / weight_sum
    variance = max(0.0, tau - within)
    spread = tau**2 / weight_sum + (within**2 / df_within if df_within else 0.0)
    df = (tau - within) ** 2 / spread if spread > 0 and variance > 0 else float(weight_sum)
    return SessionVariance(variance, max(1.0, min(df, float(weight_sum))), most)


def _checked_df(df: float) -> float:
    if not df > 0:  # also NaN
        raise ConfigError(f"df must be positive, got {df!r}")
    return float(df)


def _se_ratio(df: float) -> sps.rv_continuous | None:
    """Distribution of the estimated over the true standard error, ``sqrt(V / df)`` with
    ``V`` chi-square on ``df`` degrees of freedom; ``None`` when it is 1 (``df`` infinite)."""
    if df >= _LARGE_DF:
        return None
    frozen: sps.rv_continuous = sps.chi(df, scale=1.0 / math.sqrt(df))
    return frozen


def false_alarm_beyond(limit: float, critical: float, df: float) -> float:
    r"""Chance that a one-sided t test rejects *and* the estimate lies beyond a limit, when the
    true difference is 0.

    Parameters
    ----------
    limit:
        The limit the estimate must pass, in true standard errors (e.g. the log of a 5 %
        threshold over the standard error of a log ratio); at most 0 means no limit.
    critical:
        The t statistic's critical value (e.g. ``t.isf(alpha / m, df)``).
    df:
        Degrees of freedom of the estimated standard error (``math.inf``: known exactly).

    Returns
    -------
    float
        :math:`P(Z > a \wedge Z / \sqrt{V/\nu} > c)` for :math:`Z \sim N(0, 1)` and
        :math:`V \sim \chi^2_\nu` independent: the false-alarm rate of one comparison of the
        regression gate when its variance model is right. With ``limit <= 0`` it is the t
        test's own ``t.sf(critical, df)``.

    Raises
    ------
    ConfigError
        ``df`` not positive.

    Examples
    --------
    >>> round(false_alarm_beyond(0.0, 2.0, 8.0), 4) == round(float(sps.t.sf(2.0, 8.0)), 4)
    True
    """
    nu = _checked_df(df)
    se_ratio = _se_ratio(nu)
    if se_ratio is None:
        return float(sps.norm.sf(max(limit, critical)))
    if critical <= 0.0:
        return float(sps.norm.sf(limit)) if limit > 0 else float(sps.t.sf(critical, nu))
    # Below s* = limit / critical the limit binds, above it the test does.
    split = max(limit, 0.0) / critical
    below = float(sps.norm.sf(limit)) * float(se_ratio.cdf(split)) if limit > 0 else 0.0
    above = float(se_ratio.expect(lambda s: sps.norm.sf(critical * s), lb=split))
    return min(1.0, below + above)


def false_alarm_not_cleared(limit: float, quantile: float, df: float) -> float:
    r"""Chance that an interval's bound on the worse side does not clear a limit, when the true
    difference is 0 (the false-alarm rate of a non-inferiority test).

    Parameters
    ----------
    limit:
        The limit the bound must stay below, in true standard errors.
    quantile:
        The interval's t quantile (e.g. ``t.ppf(0.975, df)`` for a 95 % two-sided interval).
    df:
        Degrees of freedom of the estimated standard error (``math.inf``: known exactly).

    Returns
    -------
    float
        :math:`P(Z + q \sqrt{V/\nu} \ge a)` for :math:`Z \sim N(0, 1)` and
        :math:`V \sim \chi^2_\nu` independent.

    Raises
    ------
    ConfigError
        ``df`` not positive.
    """
    nu = _checked_df(df)
    se_ratio = _se_ratio(nu)
    if se_ratio is None:
        return float(sps.norm.sf(limit - quantile))
    return min(1.0, float(se_ratio.expect(lambda s: sps.norm.sf(limit - quantile * s))))
