r"""Regression gate between two result sets: is the candidate measurably worse than the baseline?

``cnibench compare BASELINE CANDIDATE`` and the pytest plugin's ``--compare-to`` both call
:func:`compare_result_sets`; a notebook calls :func:`compare_results` for the same numbers as a
tidy DataFrame. Nothing here plots.

What is compared
----------------
Successful, verified runs with a finite value (:func:`comparable_runs`). Conditions are matched
by :data:`MATCH_COLUMNS` (scenario, CNI, condition id and parameters); CNI version, environment
and options may differ, since telling those apart is what a regression gate is for. Within a
matched condition every metric of :data:`METRIC_DIRECTIONS` recorded on both sides is compared;
that table is the one place that says which metrics matter and whether higher or lower is
better. Metrics outside it (counts, split shares, per-node receive rates, ``throughput_sender``)
are not gated.

The interval
------------
Every successful, verified run counts (the estimator of :func:`cnibench.stats.summarize_runs`,
as in the run table, the report and the verdict). The ratio is candidate / baseline of the
geometric means, the centre of its interval on the log scale. With one baseline session the
interval is Welch's t on the logarithms (:func:`log_ratio_interval`), and the output warns that
session-to-session variation is left out. With several baseline sessions (A/A: the same code
measured in separate sessions) :func:`session_variance` estimates the session-to-session
variance of the logarithms, pooled over every condition and metric, and :func:`gate_interval`
adds it: :math:`\sigma_s^2(1/S_b + 1/S_c) + s_w^2(1/n_b + 1/n_c)`, Satterthwaite's degrees of
freedom.

The gate
--------
With threshold ``t`` (:func:`parse_threshold`) and :class:`GateMode`:

- ``regression`` (default): a metric *regressed* when its ratio is worse than the threshold
  (``ratio < 1 - t`` for higher-is-better metrics, ``> 1 + t`` for lower-is-better ones) and
  it is significantly worse: its one-sided p-value, Holm-corrected over every comparison of
  the session, is at most :data:`GATE_ALPHA` (1 %). So the chance that an unchanged candidate
  fails the gate is at most 1 % per compared session, when the session variance is known
  (``bench/coverage.py`` measures it, and the power for a 10 % regression).
- ``non-inferiority``: a metric fails unless its interval's bound on the worse side clears the
  threshold (``ci_low > 1 - t``, ``ci_high < 1 + t``): the candidate must show it is no worse.

A candidate whose every run of a higher-is-better metric is 0 where the baseline's were
positive is a total failure and fails the gate. Otherwise a comparison with fewer than 2 runs
on a side, or non-positive values, gets verdict ``n/a`` and never fails the gate.
"""

from __future__ import annotations

import enum
import math
import re
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Any

import numpy as np
import numpy.typing as npt
import pandas as pd
from scipy import stats as sps

from cnibench import stats
from cnibench.errors import ConfigError, InsufficientDataError, ResultsError
from cnibench.report.data import LEVEL, ok_runs
from cnibench.report.scrub import scrub_text
from cnibench.report.tables import format_number, markdown_table, text_table
from cnibench.results import ALL_SESSIONS, atomic_write_bytes, load_results

__all__ = [
    "COMPARISON_COLUMNS",
    "DEFAULT_THRESHOLD",
    "GATE_ALPHA",
    "MATCH_COLUMNS",
    "METRIC_DIRECTIONS",
    "ConditionKey",
    "Direction",
    "GateInterval",
    "GateMode",
    "RatioInterval",
    "ResultComparison",
    "SessionVariance",
    "Verdict",
    "comparable_runs",
    "compare_result_sets",
    "compare_results",
    "format_threshold",
    "gate_interval",
    "load_result_set",
    "log_ratio_interval",
    "parse_threshold",
    "session_variance",
    "write_markdown",
]


class Direction(enum.StrEnum):
    """Which way a metric gets better."""

    HIGHER_IS_BETTER = "higher is better"
    LOWER_IS_BETTER = "lower is better"


class Verdict(enum.StrEnum):
    """Outcome of one (condition, metric) comparison, worst first."""

    REGRESSION = "REGRESSION"
    """Significantly worse (one-sided, Holm over the session at :data:`GATE_ALPHA`) and the
    estimate worse than the threshold: fails the gate."""
    NOT_SHOWN = "NOT SHOWN WITHIN THRESHOLD"
    """Non-inferiority mode: the interval's bound on the worse side does not clear the
    threshold: fails the gate."""
    WORSE = "worse"
    """The whole 95 % interval is on the worse side of 1, but no regression."""
    NO_CHANGE = "no detectable change"
    """The interval covers 1."""
    BETTER = "better"
    """The whole interval is on the better side of 1."""
    NOT_APPLICABLE = "n/a"
    """No interval: too few runs, or values that are not positive (see ``note``)."""


_HIGHER = Direction.HIGHER_IS_BETTER
_LOWER = Direction.LOWER_IS_BETTER
METRIC_DIRECTIONS: Mapping[str, Direction] = MappingProxyType(
    {
        # Rates (bits/s, requests/s, 1/s) and the share of connections that succeed.
        "throughput": _HIGHER,
        "requests_per_second": _HIGHER,
        "new_connections_per_second": _HIGHER,
        "connection_success_rate": _HIGHER,
        # Times (µs or ms): iperf3 RTT, sockperf, ab, wrk, curl request-response.
        "latency_avg": _LOWER,
        "latency_mean": _LOWER,
        "latency_p50": _LOWER,
        "latency_p99": _LOWER,
        "time_per_request": _LOWER,
        "rtt_mean": _LOWER,
        "rr_mean": _LOWER,
        "rr_p50": _LOWER,
        "rr_p99": _LOWER,
        # Resources of the nodes over the run window (%, MB).
        "cpu": _LOWER,
        "ram": _LOWER,
    }
)
"""The metrics the gate compares and which way each gets better; the only place that says so.
In this order within a condition."""

MATCH_COLUMNS: tuple[str, ...] = ("scenario", "cni", "condition", "parameters")
"""Columns of :func:`cnibench.results.load_results` that must be equal for two runs to be
compared (``parameters`` is JSON text with sorted keys)."""

DEFAULT_THRESHOLD = 0.05
"""5 %: the default of ``cnibench compare --threshold`` and of ``--fail-on-regression``."""

COMPARISON_COLUMNS: tuple[str, ...] = (
    "scenario",
    "cni",
    "condition",
    "parameters",
    "metric",
    "unit",
    "direction",
    "n_baseline",
    "n_candidate",
    "baseline_mean",
    "candidate_mean",
    "ratio",
    "ci_low",
    "ci_high",
    "level",
    "p_value",
    "p_adjusted",
    "threshold",
    "limit",
    "verdict",
    "regression",
    "note",
)
"""Columns of :func:`compare_results`, one row per matched (condition, metric)."""

ConditionKey = tuple[str, str, str, str]
"""Values of :data:`MATCH_COLUMNS` of one condition."""

_NUMBER = re.compile(r"^(?P<number>[+-]?(?:\d+(?:\.\d*)?|\.\d+))\s*(?P<percent>%?)$")
_MARKDOWN_SPECIAL = re.compile(r"([\\`*_\[\]<>])")
"""Markdown syntax escaped in a cell; ``|`` is escaped by :func:`markdown_table`."""


# --------------------------------------------------------------------------------------------
# Threshold
# --------------------------------------------------------------------------------------------


def parse_threshold(text: str) -> float:
    """The regression threshold as a fraction: ``"5%"`` and ``"0.05"`` both give ``0.05``.

    Parameters
    ----------
    text:
        A percentage from 0 % to 100 % (``"5%"``, ``"2.5 %"``), or a plain fraction below 1
        (``"0.05"``). A plain number of 1 or more is refused as ambiguous (``"5"`` could mean
        5 % or 500 %).

    Returns
    -------
    float
        The threshold in [0, 1].

    Raises
    ------
    ConfigError
        Garbage, a negative value, more than 100 %, or a plain number >= 1; one line saying
        what to write instead.
    """
    cleaned = str(text).strip()
    match = _NUMBER.match(cleaned)
    if match is None:
        raise ConfigError(
            f"invalid threshold {text!r}: write a percentage such as 5% or a fraction such as 0.05"
        )
    value = float(match.group("number"))
    if value < 0:
        raise ConfigError(f"invalid threshold {text!r}: it must not be negative")
    if match.group("percent"):
        if value > 100:
            raise ConfigError(f"invalid threshold {text!r}: it must be at most 100%")
        return value / 100.0
    if value >= 1:
        raise ConfigError(
            f"invalid threshold {text!r}: a plain number must be a fraction below 1;"
            f" write {match.group('number')}% for per cent"
        )
    return value


def format_threshold(threshold: float) -> str:
    """``0.05`` -> ``"5%"`` (as the command line takes it)."""
    return f"{100.0 * threshold:g}%"


def _checked_threshold(threshold: float) -> float:
    if isinstance(threshold, bool) or not isinstance(threshold, int | float):
        raise ConfigError(f"threshold must be a fraction in [0, 1], got {threshold!r}")
    if not 0.0 <= float(threshold) <= 1.0:
        raise ConfigError(f"threshold must be a fraction in [0, 1], got {threshold!r}")
    return float(threshold)


# --------------------------------------------------------------------------------------------
# Statistics
# --------------------------------------------------------------------------------------------


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
    baseline: npt.ArrayLike, candidate: npt.ArrayLike, *, level: float = LEVEL
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
    comparison = stats.compare(log_b, log_c, level=level, method="welch")
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


GATE_ALPHA = 0.01
"""Family-wise false-alarm rate of one compared session: the one-sided p-values of all its
(condition, metric) comparisons are Holm-corrected at this level."""


class GateMode(enum.StrEnum):
    """What the gate asks of a metric."""

    REGRESSION = "regression"
    """Fail when the candidate is significantly worse (one-sided, Holm over the session at
    :data:`GATE_ALPHA`) and its estimate is worse than the threshold."""
    NON_INFERIORITY = "non-inferiority"
    """Fail unless the interval's bound on the worse side clears the threshold: the candidate
    must *show* it is at most the threshold worse."""


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


@dataclass(frozen=True)
class GateInterval:
    """Ratio candidate / baseline of geometric means with an interval that includes the
    session-to-session variance when it is known."""

    ratio: float
    low: float
    high: float
    p_worse: float
    df: float


def gate_interval(
    baseline_sessions: Sequence[npt.NDArray[np.float64]],
    candidate_sessions: Sequence[npt.NDArray[np.float64]],
    direction: Direction,
    *,
    level: float,
    between: SessionVariance | None,
) -> GateInterval:
    """The gate's ratio, interval and one-sided p-value of "worse" for one metric.

    With ``between`` the variance of the log ratio is
    :math:`\\sigma_s^2 (1/S_b + 1/S_c) + s_w^2 (1/n_b + 1/n_c)` (:math:`s_w^2` the pooled
    within-session variance of the logs, :math:`S` sessions and :math:`n` runs per side),
    with Welch-Satterthwaite degrees of freedom; without it, Welch's t on the logarithms.
    """
    base = np.concatenate(baseline_sessions)
    cand = np.concatenate(candidate_sessions)
    log_ratio = float(np.mean(np.log(cand)) - np.mean(np.log(base)))
    if between is None:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", stats.DegenerateDataWarning)
            warnings.simplefilter("ignore", RuntimeWarning)
            comparison = stats.compare(np.log(base), np.log(cand), level=level)
        se = math.sqrt(
            float(np.var(np.log(base), ddof=1)) / base.size
            + float(np.var(np.log(cand), ddof=1)) / cand.size
        )
        df = comparison.df
    else:
        squares, dof = 0.0, 0
        for values in (*baseline_sessions, *candidate_sessions):
            logs = np.log(values)
            squares += float(np.sum((logs - logs.mean()) ** 2))
            dof += logs.size - 1
        within = squares / dof if dof > 0 else 0.0
        part_session = between.variance * (
            1.0 / len(baseline_sessions) + 1.0 / len(candidate_sessions)
        )
        part_within = within * (1.0 / base.size + 1.0 / cand.size)
        se = math.sqrt(part_session + part_within)
        terms = (part_session**2 / between.df if between.df else 0.0) + (
            part_within**2 / dof if dof else 0.0
        )
        df = (part_session + part_within) ** 2 / terms if terms > 0 else math.inf
    if not (se > 0 and math.isfinite(df)):
        return GateInterval(
            math.exp(log_ratio), math.exp(log_ratio), math.exp(log_ratio), math.nan, df
        )
    quantile = float(sps.t.ppf(0.5 + level / 2.0, df))
    worse = -log_ratio if direction is Direction.HIGHER_IS_BETTER else log_ratio
    return GateInterval(
        math.exp(log_ratio),
        math.exp(log_ratio - quantile * se),
        math.exp(log_ratio + quantile * se),
        float(sps.t.sf(worse / se, df)),
        df,
    )


def _verdict(
    direction: Direction,
    ratio: float,
    low: float,
    high: float,
    threshold: float,
    mode: GateMode,
    p_adjusted: float,
) -> Verdict:
    if not (math.isfinite(low) and math.isfinite(high)):
        return Verdict.NOT_APPLICABLE
    if direction is Direction.HIGHER_IS_BETTER:
        worse, beyond, better = high < 1.0, ratio < 1.0 - threshold, low > 1.0
        cleared = low > 1.0 - threshold
    else:
        worse, beyond, better = low > 1.0, ratio > 1.0 + threshold, high < 1.0
        cleared = high < 1.0 + threshold
    if mode is GateMode.NON_INFERIORITY:
        if not cleared:
            return Verdict.NOT_SHOWN
    elif beyond and math.isfinite(p_adjusted) and p_adjusted <= GATE_ALPHA:
        return Verdict.REGRESSION
    if worse:
        return Verdict.WORSE
    return Verdict.BETTER if better else Verdict.NO_CHANGE


def _limit(direction: Direction, threshold: float) -> float:
    """The ratio the whole interval must pass to be a regression."""
    return 1.0 - threshold if direction is Direction.HIGHER_IS_BETTER else 1.0 + threshold


# --------------------------------------------------------------------------------------------
# Matching
# --------------------------------------------------------------------------------------------


def comparable_runs(df: pd.DataFrame) -> pd.DataFrame:
    """Rows the gate may use: successful, verified, finite, and a metric it compares.

    Parameters
    ----------
    df:
        Tidy results (:func:`cnibench.results.load_results`).

    Returns
    -------
    pandas.DataFrame
        A copy restricted to :data:`METRIC_DIRECTIONS`.
    """
    rows = ok_runs(df)
    keep = rows["verified"].astype(bool) & rows["metric"].isin(list(METRIC_DIRECTIONS))
    kept: pd.DataFrame = rows[keep].copy()
    return kept


def _condition_keys(rows: pd.DataFrame) -> list[ConditionKey]:
    keys = rows[list(MATCH_COLUMNS)].astype(str).drop_duplicates()
    return [(str(a), str(b), str(c), str(d)) for a, b, c, d in keys.itertuples(index=False)]


def _label(key: ConditionKey, ambiguous: bool = False) -> str:
    """``scenario/cni/condition``, with the parameters when the id alone is ambiguous."""
    scenario, cni, condition, parameters = key
    label = f"{scenario}/{cni}/{condition}"
    return f"{label} {parameters}" if ambiguous else label


def _labels(keys: Sequence[ConditionKey]) -> dict[ConditionKey, str]:
    plain = [_label(key) for key in keys]
    return {key: _label(key, plain.count(_label(key)) > 1) for key in keys}


def _values_by_metric(
    rows: pd.DataFrame,
) -> dict[tuple[ConditionKey, str], tuple[list[npt.NDArray[np.float64]], str]]:
    """(condition key, metric) -> (values of each session in run order, unit)."""
    out: dict[tuple[ConditionKey, str], tuple[list[npt.NDArray[np.float64]], str]] = {}
    ordered = rows.sort_values(["time", "run_id"], kind="stable")
    values = ordered["value"].to_numpy(dtype=np.float64)
    units = ordered["unit"].astype(str).to_numpy()
    sessions = (
        ordered["session_id"].astype(str).to_numpy()
        if "session_id" in ordered.columns
        else np.full(len(ordered), "", dtype=object)
    )
    # Positions of each group's rows, in run order (groupby's indices keep the frame order).
    groups = ordered.groupby([*MATCH_COLUMNS, "metric"], sort=False).indices
    for group_key, positions in groups.items():
        parts: tuple[Any, ...] = tuple(group_key)  # type: ignore[arg-type]
        scenario, cni, condition, parameters, metric = (str(part) for part in parts)
        names = sessions[positions]
        per_session = [values[positions[names == name]] for name in dict.fromkeys(names.tolist())]
        found = sorted({str(unit) for unit in units[positions]})
        out[((scenario, cni, condition, parameters), metric)] = (
            per_session,
            found[0] if len(found) == 1 else "/".join(found),
        )
    return out


def _compare_metric(
    baseline: Sequence[npt.NDArray[np.float64]],
    candidate: Sequence[npt.NDArray[np.float64]],
    direction: Direction,
    level: float,
    between: SessionVariance | None,
) -> dict[str, Any]:
    """Estimates, ratio, interval and one-sided p-value of one matched (condition, metric)."""
    base, cand = np.concatenate(baseline), np.concatenate(candidate)
    row: dict[str, Any] = {
        "n_baseline": int(base.size),
        "n_candidate": int(cand.size),
        "baseline_mean": math.nan,
        "candidate_mean": math.nan,
        "ratio": math.nan,
        "ci_low": math.nan,
        "ci_high": math.nan,
        "p_value": math.nan,
        "note": "",
    }
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", stats.DegenerateDataWarning)
        row["baseline_mean"] = stats.summarize_runs(base, level=level).mean
        row["candidate_mean"] = stats.summarize_runs(cand, level=level).mean
    if base.size < 2 or cand.size < 2:
        row["note"] = "an interval needs at least 2 runs on each side"
    elif min(float(base.min()), float(cand.min())) <= 0.0:
        if float(cand.max()) <= 0.0 < float(base.min()) and direction is _HIGHER:
            row["note"] = "TOTAL FAILURE: every candidate run is 0"
        else:
            row["note"] = "values <= 0: no ratio on the log scale"
    else:
        interval = gate_interval(baseline, candidate, direction, level=level, between=between)
        row.update(
            ratio=interval.ratio,
            ci_low=interval.low,
            ci_high=interval.high,
            p_value=interval.p_worse,
        )
        if interval.low == interval.high:
            row["note"] = "all runs equal on both sides: zero-width interval"
    return row


_VERDICT_RANK = {verdict: rank for rank, verdict in enumerate(Verdict)}


def _worst_first(frame: pd.DataFrame) -> pd.DataFrame:
    """Regressions first, then by how much worse the estimate is; ``n/a`` last."""
    if frame.empty:
        return frame
    applicable = frame["verdict"] != Verdict.NOT_APPLICABLE
    # log of the ratio turned so that larger is worse (NaN without a ratio).
    sign = np.where(frame["direction"] == Direction.HIGHER_IS_BETTER, -1.0, 1.0)
    with np.errstate(divide="ignore", invalid="ignore"):
        worsening = sign * np.log(frame["ratio"].to_numpy(dtype=np.float64))
    key = pd.DataFrame(
        {
            "rank": (~applicable).astype(int) * 2
            + (frame["verdict"] != Verdict.REGRESSION).astype(int),
            "better_first": -worsening,
        },
        index=frame.index,
    )
    order = key.sort_values(["rank", "better_first"], kind="stable", na_position="last").index
    return frame.loc[order].reset_index(drop=True)


@dataclass(frozen=True)
class ResultComparison:
    """A comparison of two result sets: the tidy table plus what did not match.

    Attributes
    ----------
    frame:
        One row per matched (condition, metric), columns :data:`COMPARISON_COLUMNS`, worst
        first (:func:`compare_results`).
    threshold:
        The regression threshold as a fraction.
    level:
        Confidence level of the intervals.
    only_baseline, only_candidate:
        Conditions (:data:`MATCH_COLUMNS` values) present on one side only.
    mode:
        The :class:`GateMode` applied.
    between:
        Session-to-session variance from the baseline's A/A sessions, or ``None`` when the
        baseline holds one session (then :meth:`warning` says so).
    """

    frame: pd.DataFrame
    threshold: float
    level: float
    only_baseline: tuple[ConditionKey, ...]
    only_candidate: tuple[ConditionKey, ...]
    mode: GateMode = GateMode.REGRESSION
    between: SessionVariance | None = None

    @property
    def regressions(self) -> pd.DataFrame:
        """Rows whose verdict is :attr:`Verdict.REGRESSION`."""
        return self.frame[self.frame["regression"]]

    @property
    def regressed(self) -> bool:
        """Whether the gate fails."""
        return bool(self.frame["regression"].any())

    def _row_labels(self) -> list[str]:
        keys: list[ConditionKey] = [
            (str(r.scenario), str(r.cni), str(r.condition), str(r.parameters))
            for r in self.frame.itertuples(index=False)
        ]
        labels = _labels(list(dict.fromkeys(keys)))
        return [labels[key] for key in keys]

    def headline(self) -> str:
        """One line: how many regressions among how many comparisons, at which threshold."""
        conditions = len(self.frame[list(MATCH_COLUMNS)].drop_duplicates())
        found = int(self.frame["regression"].sum())
        what = f"{found} REGRESSION{'S' if found != 1 else ''}" if found else "no regression"
        return (
            f"{what} beyond {format_threshold(self.threshold)} in {len(self.frame)} metric"
            f" comparison{'s' if len(self.frame) != 1 else ''} of {conditions} matched"
            f" condition{'s' if conditions != 1 else ''} (ratio = candidate / baseline of"
            f" geometric means, {100.0 * self.level:g}% CI; {self.mode.value} mode,"
            f" false-alarm rate at most {100 * GATE_ALPHA:g}% per comparison)"
        )

    def warning(self) -> str:
        """Why the intervals may be too narrow, or ``""``: with one baseline session the
        session-to-session variance is unknown and left out."""
        if self.between is not None:
            return (
                f"session-to-session SD {self.between.sd_percent:.1f}% from"
                f" {self.between.sessions} baseline sessions (df {self.between.df:.0f}), included"
                " in every interval"
            )
        return (
            "warning: the baseline holds one session, so session-to-session variation is not"
            " in the intervals and the false-alarm rate can be well above"
            f" {100 * GATE_ALPHA:g}%; give several A/A baseline sessions (the same code"
            " measured in separate sessions) to include it"
        )

    def regression_lines(self) -> list[str]:
        """One line per regression, naming the metric and the condition."""
        lines = []
        level = f"{100.0 * self.level:g}%"
        threshold = format_threshold(self.threshold)
        for label, row in zip(self._row_labels(), self.frame.to_dict("records"), strict=True):
            if not row["regression"]:
                continue
            side = "below" if row["direction"] == Direction.HIGHER_IS_BETTER else "above"
            if str(row["note"]).startswith("TOTAL FAILURE"):
                why = str(row["note"])
            elif row["verdict"] == Verdict.NOT_SHOWN:
                why = (
                    f"the interval's bound is not {side} {format_number(row['limit'])} on the"
                    " safe side"
                    f" ({row['direction']}, threshold {threshold}, non-inferiority)"
                )
            else:
                why = (
                    f"ratio {side} {format_number(row['limit'])} and significantly worse (one-sided"
                    f" adjusted p = {row['p_adjusted']:.2g}; {row['direction']}, threshold"
                    f" {threshold})"
                )
            lines.append(
                f"{row['verdict']} {row['metric']} of {label}: ratio {format_number(row['ratio'])}"
                f" ({level} CI {format_number(row['ci_low'])}-{format_number(row['ci_high'])},"
                f" n = {row['n_baseline']} vs {row['n_candidate']}): {why}"
            )
        return [scrub_text(line) for line in lines]

    def equivalence_line(self, margin: float) -> str:
        """Which metrics are shown the same within ``±margin``: their whole interval inside
        ``[1 - margin, 1 + margin]`` (two one-sided tests)."""
        low = self.frame["ci_low"].to_numpy(dtype=np.float64)
        high = self.frame["ci_high"].to_numpy(dtype=np.float64)
        inside = (low >= 1.0 - margin) & (high <= 1.0 + margin)
        return (
            f"same within ±{100 * margin:g}%: {int(inside.sum())} of {len(self.frame)} metric"
            " comparisons (the rest could not show it: their interval reaches beyond the"
            " margin)"
        )

    def unmatched_lines(self) -> list[str]:
        """One line per side naming the conditions present only there (none when all match)."""
        lines = []
        for side, keys in (("baseline", self.only_baseline), ("candidate", self.only_candidate)):
            if keys:
                names = ", ".join(_labels(list(keys)).values())
                lines.append(f"only in the {side} (not compared): {names}")
        return [scrub_text(line) for line in lines]

    def _cells(self) -> list[list[str]]:
        rows = []
        for label, row in zip(self._row_labels(), self.frame.to_dict("records"), strict=True):
            has_ci = math.isfinite(row["ci_low"]) and math.isfinite(row["ci_high"])
            rows.append(
                [
                    str(row["verdict"]),
                    str(row["metric"]),
                    label,
                    _value(row["baseline_mean"], row["unit"]),
                    _value(row["candidate_mean"], row["unit"]),
                    format_number(row["ratio"]) if math.isfinite(row["ratio"]) else "-",
                    (
                        f"[{format_number(row['ci_low'])}, {format_number(row['ci_high'])}]"
                        if has_ci
                        else "-"
                    ),
                    f"{row['n_baseline']} vs {row['n_candidate']}",
                    str(row["note"]),
                ]
            )
        return rows

    def text(self) -> str:
        """The terminal table: headline, then one line per (condition, metric), worst first."""
        header = [
            "verdict",
            "metric",
            "condition",
            "baseline",
            "candidate",
            "ratio",
            f"{100.0 * self.level:g}% CI",
            "n",
            "note",
        ]
        rows = self._cells()
        if not any(row[-1] for row in rows):
            header, rows = header[:-1], [row[:-1] for row in rows]
        lines = [self.headline(), self.warning(), text_table(header, rows, right={3, 4, 5})]
        lines += self.unmatched_lines()
        return scrub_text("\n".join(lines))

    def markdown(self) -> str:
        """A Markdown section for a pull-request comment: headline, method, table, unmatched."""
        level = f"{100.0 * self.level:g} %"
        found = int(self.frame["regression"].sum())
        title = f"**{found} regression{'s' if found != 1 else ''}**" if found else "no regression"
        lines = [
            f"### cnibench compare: {title} beyond {format_threshold(self.threshold)}",
            "",
            f"Ratio = candidate / baseline of the geometric means of successful, verified runs,"
            f" with its {level} confidence interval (t on the log scale). A regression is a"
            " metric whose ratio is worse than the threshold and significantly worse (one-sided,"
            f" Holm over this comparison at {100 * GATE_ALPHA:g}%). {self.warning()}. Worst"
            " first.",
            "",
        ]
        cells = []
        for row in self._cells():
            verdict, metric, label, base, cand, ratio, ci, n, note = (
                _markdown_cell(cell) for cell in row
            )
            if row[0] == Verdict.REGRESSION:
                verdict = f"**{verdict}**"
            if note:
                ci = f"{ci} ({note})"
            cells.append([verdict, metric, label, base, cand, ratio, ci, n])
        headers = ["verdict", "metric", "condition", "baseline", "candidate", "ratio"]
        lines.append(markdown_table([*headers, f"{level} CI", "n"], cells, right={3, 4, 5, 7}))
        unmatched = self.unmatched_lines()
        if unmatched:
            lines += ["", *(f"- {_markdown_cell(line)}" for line in unmatched)]
        return scrub_text("\n".join(lines) + "\n")


def _value(value: float, unit: str) -> str:
    """A mean with its unit: ``16.43G bits/s``, ``103.5 us`` (:func:`format_number`)."""
    return f"{format_number(value)} {unit}".strip()


def _markdown_cell(text: str) -> str:
    return _MARKDOWN_SPECIAL.sub(r"\\\1", text.replace("\n", " "))


# --------------------------------------------------------------------------------------------
# Public entry points
# --------------------------------------------------------------------------------------------


def compare_result_sets(
    baseline: pd.DataFrame,
    candidate: pd.DataFrame,
    *,
    threshold: float = DEFAULT_THRESHOLD,
    level: float = LEVEL,
    mode: GateMode | str = GateMode.REGRESSION,
) -> ResultComparison:
    """Compare every matched condition and metric of two result sets.

    Parameters
    ----------
    baseline, candidate:
        Tidy results (:func:`cnibench.results.load_results`), e.g. of main and of a branch.
        Several baseline sessions (A/A runs of the same code) give the session-to-session
        variance the intervals then include (:func:`session_variance`).
    threshold:
        Regression threshold as a fraction in [0, 1] (0.05 = 5 %; see :func:`parse_threshold`
        for the text form).
    level:
        Confidence level of the printed intervals, in (0, 1).
    mode:
        :class:`GateMode`: ``"regression"`` (default) or ``"non-inferiority"``.

    Returns
    -------
    ResultComparison
        The table (see :func:`compare_results`) and the conditions only one side has.

    Raises
    ------
    InsufficientDataError
        A side has no successful verified run of a compared metric, or no condition and metric
        is in both.
    ConfigError
        Bad ``threshold``, ``level`` or ``mode``.
    """
    chosen = _checked_threshold(threshold)
    if not 0.0 < level < 1.0:
        raise ConfigError(f"level must be strictly between 0 and 1, got {level!r}")
    try:
        gate_mode = GateMode(mode)
    except ValueError:
        raise ConfigError(
            f"mode must be one of {', '.join(m.value for m in GateMode)}, got {mode!r}"
        ) from None
    base_rows, cand_rows = comparable_runs(baseline), comparable_runs(candidate)
    for name, runs in (("baseline", base_rows), ("candidate", cand_rows)):
        if runs.empty:
            raise InsufficientDataError(
                f"the {name} has no successful verified run of a compared metric"
                f" ({', '.join(METRIC_DIRECTIONS)})"
            )
    base_keys, cand_keys = _condition_keys(base_rows), _condition_keys(cand_rows)
    matched = [key for key in base_keys if key in set(cand_keys)]
    in_both = set(matched)
    if not matched:
        raise InsufficientDataError(
            "no condition is in both result sets (same scenario, CNI, condition and"
            f" parameters): baseline has {', '.join(_labels(base_keys).values())};"
            f" candidate has {', '.join(_labels(cand_keys).values())}"
        )
    base_values, cand_values = _values_by_metric(base_rows), _values_by_metric(cand_rows)
    between = session_variance(
        [
            [v for v in sessions if v.size and bool(np.all(v > 0))]
            for sessions, _ in base_values.values()
        ]
    )
    rows: list[dict[str, Any]] = []
    for key in matched:
        for metric, direction in METRIC_DIRECTIONS.items():
            if (key, metric) not in base_values or (key, metric) not in cand_values:
                continue
            (b, unit_b), (c, unit_c) = base_values[(key, metric)], cand_values[(key, metric)]
            row: dict[str, Any] = dict(zip(MATCH_COLUMNS, key, strict=True))
            row.update(metric=metric, unit=unit_b, direction=direction.value)
            row.update(_compare_metric(b, c, direction, level, between))
            if unit_b != unit_c:
                row.update(p_value=math.nan, ci_low=math.nan, note=f"units differ: {unit_c}")
            rows.append(row)
    if not rows:
        raise InsufficientDataError("the matched conditions share no compared metric")
    adjusted = stats.holm_adjusted([row["p_value"] for row in rows])
    for row, p_adjusted in zip(rows, adjusted.tolist(), strict=True):
        direction = Direction(row["direction"])
        verdict = _verdict(
            direction,
            row["ratio"],
            row["ci_low"],
            row["ci_high"],
            chosen,
            gate_mode,
            float(p_adjusted),
        )
        if row["note"].startswith("TOTAL FAILURE"):
            verdict = Verdict.REGRESSION
        row.update(
            p_adjusted=float(p_adjusted),
            verdict=verdict.value,
            level=level,
            threshold=chosen,
            limit=_limit(direction, chosen),
            regression=verdict in (Verdict.REGRESSION, Verdict.NOT_SHOWN),
        )
    frame = _worst_first(pd.DataFrame(rows, columns=list(COMPARISON_COLUMNS)))
    frame["regression"] = frame["regression"].astype(bool)
    return ResultComparison(
        frame=frame,
        threshold=chosen,
        level=level,
        only_baseline=tuple(key for key in base_keys if key not in in_both),
        only_candidate=tuple(key for key in cand_keys if key not in in_both),
        mode=gate_mode,
        between=between,
    )


def compare_results(
    baseline: pd.DataFrame,
    candidate: pd.DataFrame,
    *,
    threshold: float = DEFAULT_THRESHOLD,
    level: float = LEVEL,
    mode: GateMode | str = GateMode.REGRESSION,
) -> pd.DataFrame:
    """The regression comparison of two result sets as a tidy DataFrame (notebook API).

    Parameters
    ----------
    baseline, candidate, threshold, level, mode:
        As for :func:`compare_result_sets`.

    Returns
    -------
    pandas.DataFrame
        One row per (condition, metric) present in both, worst first, columns
        :data:`COMPARISON_COLUMNS`: the match columns; ``metric``, ``unit``, ``direction``
        (:class:`Direction`); ``n_baseline``/``n_candidate`` (every successful verified run);
        ``baseline_mean``/``candidate_mean`` (the estimate of
        :func:`cnibench.stats.summarize_runs`, the geometric mean of positive runs, in
        ``unit``); ``ratio``, ``ci_low``, ``ci_high`` (candidate / baseline of the geometric
        means and its interval, which includes the session-to-session variance when the
        baseline holds several sessions; NaN where the verdict is ``n/a``); ``level``;
        ``p_value`` (one-sided, candidate worse) and ``p_adjusted`` (Holm over the rows);
        ``threshold``, ``limit`` (the ratio the estimate, or in non-inferiority mode the
        bound, must pass), ``verdict`` (:class:`Verdict`), ``regression`` (fails the gate)
        and ``note``.

    Examples
    --------
    >>> from cnibench.results import load_results
    >>> table = compare_results(load_results("main/"), load_results("branch/"))  # doctest: +SKIP
    >>> table[table.regression][["condition", "metric", "ratio"]]  # doctest: +SKIP
    """
    return compare_result_sets(
        baseline, candidate, threshold=threshold, level=level, mode=mode
    ).frame


def load_result_set(paths: Path | Sequence[Path], *, what: str) -> pd.DataFrame:
    """Load one or more results directories for a comparison, or say in one line why not.

    Parameters
    ----------
    paths:
        Results directories or session directories.
    what:
        How the error messages name this side, e.g. ``"baseline"``.

    Returns
    -------
    pandas.DataFrame
        The records of all of them (:func:`cnibench.results.load_results`).

    Raises
    ------
    ConfigError
        A path that does not exist or is not a directory, unreadable or corrupted results, or
        no record at all.
    """
    chosen = [paths] if isinstance(paths, Path) else list(paths)
    frames = []
    for path in chosen:
        if not path.exists():
            raise ConfigError(f"{what} results directory {path} does not exist")
        if not path.is_dir():
            raise ConfigError(f"{what} results path {path} is not a directory")
        try:
            # A baseline is every session of its directories (e.g. main's last runs).
            frames.append(load_results(path, sessions=ALL_SESSIONS))
        except ResultsError as exc:
            raise ConfigError(f"{what} results in {path} cannot be read: {exc}") from exc
    frame = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()
    if frame.empty:
        names = ", ".join(str(path) for path in chosen) or "(none)"
        raise ConfigError(f"{what} results in {names} hold no run records")
    return frame


def write_markdown(comparison: ResultComparison, path: Path) -> Path:
    """Write :meth:`ResultComparison.markdown` atomically (never a half-written file).

    Raises
    ------
    ConfigError
        The file cannot be written (missing directory, permissions).
    """
    try:
        return atomic_write_bytes(path, comparison.markdown().encode())
    except ResultsError as exc:
        raise ConfigError(f"cannot write --markdown {path}: {exc}") from exc
