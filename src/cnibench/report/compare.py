r"""Regression gate between two result sets: is the candidate measurably worse than the baseline?

``cnibench compare BASELINE CANDIDATE`` and the pytest plugin's ``--compare-to`` both call
:func:`compare_result_sets`; a notebook calls :func:`compare_results` for the same numbers as a
tidy DataFrame. Nothing here plots.

What is compared
----------------
Successful, verified runs with a finite value (:func:`comparable_runs`). Conditions are matched
by :data:`MATCH_COLUMNS` (scenario, CNI, condition id and parameters); CNI version, environment
and options may differ, since telling those apart is what a regression gate is for. Within a
matched condition every gated metric recorded on both sides is compared: those of
:data:`METRIC_DIRECTIONS`, the one place that says which metrics matter and whether higher or
lower is better, and per-node CPU ``cpu@<role>`` (:func:`gated_direction`). Metrics outside
them (counts, split shares, per-node receive rates, ``throughput_sender``) are not gated.

The interval
------------
The ratio is candidate / baseline of the geometric means (of the session means, when a side
has several sessions), the centre of its interval on the log scale. When some side holds two
or more sessions, each metric's session-to-session and run-to-run variance components are
estimated from the sessions of every condition with that metric, both sides
(:func:`cnibench.report.gate_plan.variance_components`), and the interval and the one-sided
test use them (:func:`cnibench.report.gate_plan.difference_variance`: with equal runs per
session, Student's t on the session means). With one session a side the interval is Welch's t
on the logarithms of the runs and the output warns that session-to-session variation is left
out. (:func:`session_variance` and :func:`gate_interval`, the pooled estimator used before
issue 32, stay for callers; ``between`` keeps its figure for orientation.)

The gate
--------
With threshold ``t`` (:func:`parse_threshold`) and :class:`GateMode`:

- ``regression`` (default): a metric *regressed* when its ratio is worse than the threshold
  (``ratio < 1 - t`` for higher-is-better metrics, ``> 1 + t`` for lower-is-better ones) and
  it is significantly worse: its one-sided p-value, Holm-corrected over every comparison of
  the session, is at most :data:`GATE_ALPHA` (1 %). The false-alarm rate this gives depends on
  the design; the headline quotes the one ``bench/coverage.py`` measured for it
  (:func:`measured_false_alarm_rate`).
- ``non-inferiority``: a metric fails unless its interval's bound on the worse side clears the
  threshold (``ci_low > 1 - t``, ``ci_high < 1 + t``): the candidate must show it is no worse.

Whatever the mode, the gate also fails on a candidate run that failed or measured a
higher-is-better metric at 0 (named; ``allow_failed_runs`` leaves them out instead), and on
fewer than :data:`MIN_CANDIDATE_RUNS` candidate runs. Identical runs on both sides are judged
by the exact ratio. Every comparison gets an :class:`Answer`: regressed, within threshold, or
undecided with the sessions (or runs) that would decide it. :func:`plan_gate` says how many
sessions detect a given loss. A comparison with fewer than 2 baseline runs, or a
lower-is-better metric at 0, gets verdict ``n/a`` and does not fail the gate.
"""

from __future__ import annotations

import enum
import math
import re
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any

import numpy as np
import numpy.typing as npt
import pandas as pd
from scipy import stats as sps

from cnibench import stats
from cnibench.errors import ConfigError, InsufficientDataError, ResultsError
from cnibench.report.data import LEVEL, ok_runs, run_values
from cnibench.report.gate_plan import (
    MAX_SESSIONS,
    GatePlan,
    VarianceComponents,
    budget_plan,
    difference_variance,
    variance_components,
)
from cnibench.report.scrub import scrub_text
from cnibench.report.tables import format_number, markdown_table, text_table
from cnibench.results import ALL_SESSIONS, atomic_write_bytes, load_results

__all__ = [
    "COMPARISON_COLUMNS",
    "DEFAULT_THRESHOLD",
    "GATE_ALPHA",
    "MATCH_COLUMNS",
    "METRIC_DIRECTIONS",
    "MIN_CANDIDATE_RUNS",
    "PER_NODE_CPU",
    "Answer",
    "ConditionKey",
    "Direction",
    "FailedRun",
    "GateInterval",
    "GateMode",
    "MeasuredRate",
    "RatioInterval",
    "ResultComparison",
    "SessionVariance",
    "Verdict",
    "comparable_runs",
    "compare_result_sets",
    "compare_results",
    "failed_candidate_runs",
    "format_threshold",
    "gate_interval",
    "gated_direction",
    "load_result_set",
    "log_ratio_interval",
    "measured_false_alarm_rate",
    "parse_threshold",
    "plan_gate",
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
    """No interval: too few baseline runs, or values that are not positive (see ``note``)."""
    FAILED_RUNS = "FAILED RUNS"
    """A candidate run of this condition failed, or recorded this metric at 0 (or not at all):
    fails the gate, naming the runs, unless failed runs are allowed (then they are left out)."""
    TOO_FEW_RUNS = "TOO FEW RUNS"
    """Fewer than :data:`MIN_CANDIDATE_RUNS` candidate runs: the gate cannot pass on so few."""


class Answer(enum.StrEnum):
    """The gate's three-way answer for one (condition, metric)."""

    REGRESSED = "regressed"
    """Worse than the threshold, and significantly so (or a failure): fails the gate."""
    WITHIN = "within threshold"
    """The interval's bound on the worse side clears the threshold (or, for identical runs,
    the exact ratio is within it): shown to be at most the threshold worse."""
    UNDECIDED = "undecided"
    """Neither: the ``decide`` column says which sessions or runs would decide it."""


MIN_CANDIDATE_RUNS = 3
"""Fewest candidate runs of a (condition, metric) that can pass the gate."""


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
        # sockperf during a --pairs run's iperf3 streams (µs).
        "latency_under_load_avg": _LOWER,
        "latency_under_load_p50": _LOWER,
        "latency_under_load_p99": _LOWER,
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
"""The metrics the gate compares and which way each gets better; the only place that says so,
with :data:`PER_NODE_CPU` for the per-node CPU of ``cpu@<role>``. In this order within a
condition."""

PER_NODE_CPU = "cpu@"
"""Prefix of the per-node CPU metrics (``cpu@egress-gw``: one node's CPU in cores, lower is
better), gated like ``cpu``."""


def gated_direction(metric: str) -> Direction | None:
    """Which way ``metric`` gets better, or ``None`` when the gate does not compare it."""
    if metric.startswith(PER_NODE_CPU) and len(metric) > len(PER_NODE_CPU):
        return Direction.LOWER_IS_BETTER
    return METRIC_DIRECTIONS.get(metric)


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
    "answer",
    "decide",
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
        A copy restricted to the gated metrics (:func:`gated_direction`).
    """
    rows = ok_runs(df)
    gated = rows["metric"].astype(str).map(lambda metric: gated_direction(metric) is not None)
    keep = rows["verified"].astype(bool) & gated.astype(bool)
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


@dataclass(frozen=True)
class FailedRun:
    """A candidate run the gate does not take silently.

    Attributes
    ----------
    key:
        The condition (:data:`MATCH_COLUMNS` values).
    metric:
        The metric it recorded at 0 or not finite, or ``""`` for a run that failed as a whole.
    run_id:
        The run's id (as in the results directory).
    reason:
        Why: the run's recorded reason, ``"at 0"`` or ``"not finite"``.
    """

    key: ConditionKey
    metric: str
    run_id: str
    reason: str


def failed_candidate_runs(candidate: pd.DataFrame) -> list[FailedRun]:
    """Runs of a candidate that failed, or recorded a gated metric at 0 or not at all.

    A failed attempt whose repetition was retried successfully in the same session is not
    counted. A higher-is-better metric at 0 or below (no throughput, no request) and any
    non-finite value of a gated metric are; a lower-is-better metric at 0 is not a failure.

    Parameters
    ----------
    candidate:
        Tidy results (:func:`cnibench.results.load_results`).

    Returns
    -------
    list of FailedRun
        In the order of the records.
    """
    if candidate.empty:
        return []
    frame = run_values(candidate).reset_index(drop=True)
    keys = frame[list(MATCH_COLUMNS)].astype(str).itertuples(index=False, name=None)
    statuses = frame["status"].astype(str).to_numpy()
    run_ids = frame["run_id"].astype(str).to_numpy()
    sessions = (
        frame["session_id"].astype(str).to_numpy()
        if "session_id" in frame.columns
        else np.full(len(frame), "", dtype=object)
    )
    repetitions = (
        frame["repetition"].astype(str).to_numpy() if "repetition" in frame.columns else run_ids
    )
    metrics = frame["metric"].astype(str).to_numpy()
    values = frame["value"].to_numpy(dtype=np.float64)
    reasons = (
        frame["reason"].astype(str).to_numpy()
        if "reason" in frame.columns
        else np.full(len(frame), "", dtype=object)
    )
    key_list: list[ConditionKey] = [(str(a), str(b), str(c), str(d)) for a, b, c, d in keys]
    succeeded = {
        (key, sessions[i], repetitions[i]) for i, key in enumerate(key_list) if statuses[i] == "ok"
    }
    out: list[FailedRun] = []
    seen: set[tuple[ConditionKey, str, str]] = set()
    for i, key in enumerate(key_list):
        if statuses[i] != "ok":
            if (key, sessions[i], repetitions[i]) in succeeded or (key, "", run_ids[i]) in seen:
                continue
            seen.add((key, "", run_ids[i]))
            reason = reasons[i] if reasons[i] not in ("", "nan") else statuses[i]
            out.append(FailedRun(key, "", str(run_ids[i]), f"failed: {reason}"))
            continue
        direction = gated_direction(str(metrics[i]))
        if direction is None:
            continue
        if not math.isfinite(values[i]):
            out.append(FailedRun(key, str(metrics[i]), str(run_ids[i]), "not finite"))
        elif values[i] <= 0.0 and direction is Direction.HIGHER_IS_BETTER:
            out.append(FailedRun(key, str(metrics[i]), str(run_ids[i]), "at 0"))
    return out


@dataclass(frozen=True)
class _Test:
    """What the second pass (Holm, verdict, answer, hint) needs of one comparison."""

    log_ratio: float
    se: float
    df: float
    exact: bool
    components: VarianceComponents | None
    baseline_runs: tuple[int, ...]
    candidate_runs: tuple[int, ...]
    baseline_var: float
    candidate_var: float


def _estimate(values: npt.NDArray[np.float64], level: float) -> float:
    """The estimate of :func:`cnibench.stats.summarize_runs`: the geometric mean of positive
    runs (computed directly, the gate's simulation calls this thousands of times)."""
    if not values.size:
        return math.nan
    if bool(np.all(values > 0)):
        return float(np.exp(np.mean(np.log(values))))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", stats.DegenerateDataWarning)
        return stats.summarize_runs(values, level=level).mean


def _session_means(sessions: Sequence[npt.NDArray[np.float64]]) -> float:
    return float(np.mean([float(np.mean(np.log(v))) for v in sessions if v.size]))


def _compare_metric(
    baseline: Sequence[npt.NDArray[np.float64]],
    candidate: Sequence[npt.NDArray[np.float64]],
    direction: Direction,
    level: float,
    components: VarianceComponents | None,
) -> tuple[dict[str, Any], _Test | None]:
    """Estimates, ratio, interval and one-sided p-value of one matched (condition, metric).

    ``candidate`` holds the runs the gate may use (its failed and zero runs already out).
    """
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
    row["baseline_mean"], row["candidate_mean"] = _estimate(base, level), _estimate(cand, level)
    if cand.size < MIN_CANDIDATE_RUNS:
        row["note"] = f"the candidate has {cand.size} usable run{'s' if cand.size != 1 else ''}"
        return row, None
    if base.size < 2:
        row["note"] = f"the baseline has {base.size} usable run: an interval needs at least 2"
        return row, None
    if min(float(base.min()), float(cand.min())) <= 0.0:
        row["note"] = "values <= 0: no ratio on the log scale"
        return row, None
    sizes_b = tuple(int(v.size) for v in baseline if v.size)
    sizes_c = tuple(int(v.size) for v in candidate if v.size)
    log_b, log_c = np.log(base), np.log(cand)
    spread_b, spread_c = float(np.ptp(log_b)), float(np.ptp(log_c))
    if spread_b == 0.0 and spread_c == 0.0:
        # Quantised metrics (a success rate of 1.0 in every run): no noise to test against,
        # so the exact ratio decides.
        log_ratio = float(log_c[0] - log_b[0])
        worse = log_ratio < 0 if direction is Direction.HIGHER_IS_BETTER else log_ratio > 0
        row.update(
            ratio=math.exp(log_ratio),
            ci_low=math.exp(log_ratio),
            ci_high=math.exp(log_ratio),
            p_value=0.0 if worse else 1.0,
            note="identical runs on each side: the exact ratio decides",
        )
        test = _Test(log_ratio, 0.0, math.inf, True, None, sizes_b, sizes_c, 0.0, 0.0)
        return row, test
    var_b = float(np.var(log_b, ddof=1)) if log_b.size > 1 else 0.0
    var_c = float(np.var(log_c, ddof=1)) if log_c.size > 1 else 0.0
    if components is not None and components.known:
        log_ratio = _session_means(candidate) - _session_means(baseline)
        variance, df = difference_variance(components, sizes_b, sizes_c)
        se = math.sqrt(variance)
    else:
        interval = gate_interval(baseline, candidate, direction, level=level, between=None)
        log_ratio = math.log(interval.ratio)
        se = math.sqrt(var_b / base.size + var_c / cand.size)
        df = interval.df
    row["ratio"] = math.exp(log_ratio)
    if se > 0 and math.isfinite(df):
        quantile = float(sps.t.ppf(0.5 + level / 2.0, df))
        turned = -log_ratio if direction is Direction.HIGHER_IS_BETTER else log_ratio
        row.update(
            ci_low=math.exp(log_ratio - quantile * se),
            ci_high=math.exp(log_ratio + quantile * se),
            p_value=float(sps.t.sf(turned / se, df)),
        )
    test = _Test(log_ratio, se, df, False, components, sizes_b, sizes_c, var_b, var_c)
    return row, test


def _worse_logs(direction: Direction, log_ratio: float, threshold: float) -> tuple[float, float]:
    """The log ratio and the threshold's log limit, both turned so that larger is worse."""
    if direction is Direction.HIGHER_IS_BETTER:
        return -log_ratio, -math.log1p(-min(threshold, 1.0 - 1e-12))
    return log_ratio, math.log1p(threshold)


def _decide_hint(
    test: _Test,
    direction: Direction,
    *,
    threshold: float,
    level: float,
    comparisons: int,
) -> str:
    """Which candidate sessions (or runs) would decide an undecided comparison, if the ratio
    stayed where it is."""
    worse, limit = _worse_logs(direction, test.log_ratio, threshold)
    df = test.df if math.isfinite(test.df) and test.df > 0 else 1.0
    if worse > limit:
        target = "regressed"
        needed = worse / float(sps.t.isf(GATE_ALPHA / max(comparisons, 1), df))
    elif worse < limit:
        target = "within threshold"
        needed = (limit - worse) / float(sps.t.ppf(0.5 + level / 2.0, df))
    else:
        return "the ratio sits at the threshold: no number of runs decides it"
    ratio = f"if the ratio stays {format_number(math.exp(test.log_ratio))}"
    runs = max(1, round(float(np.median(test.candidate_runs))))
    components = test.components
    if components is not None and components.known:

        def decides(extra: int) -> bool:
            variance, _ = difference_variance(
                components, test.baseline_runs, (*test.candidate_runs, *([runs] * extra))
            )
            return math.sqrt(variance) <= needed

        if decides(MAX_SESSIONS):
            # The variance falls as sessions are added: bisect for the fewest that decide.
            low, high = 0, MAX_SESSIONS
            while high - low > 1:
                middle = (low + high) // 2
                low, high = (low, middle) if decides(middle) else (middle, high)
            return (
                f"about {high} more candidate session{'s' if high != 1 else ''} of {runs}"
                f" runs would make it {target} ({ratio})"
            )
        return (
            f"no number of candidate sessions decides it: the baseline's"
            f" {len(test.baseline_runs)} sessions limit it; measure more baseline sessions"
        )
    n_b, n_c = sum(test.baseline_runs), sum(test.candidate_runs)
    room = needed**2 - test.baseline_var / n_b
    if room <= 0 or test.candidate_var <= 0:
        return (
            "no number of candidate runs decides it: the baseline's runs limit it; measure"
            " more baseline sessions (which also gives the session-to-session variation)"
        )
    more = max(1, math.ceil(test.candidate_var / room) - n_c)
    return (
        f"about {more} more candidate run{'s' if more != 1 else ''} would make it {target}"
        f" ({ratio}; session-to-session variation unknown with one baseline session)"
    )


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
            "rank": (~applicable).astype(int) * 2 + (~frame["regression"].astype(bool)).astype(int),
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
        Session-to-session variance pooled over every metric (:func:`session_variance`), for
        orientation only: the intervals use :attr:`components`. ``None`` when the baseline
        holds one session (then :meth:`warning` says so).
    components:
        Per metric, its variance components (:func:`variance_components`, both sides' sessions
        of every matched condition), which the intervals use.
    design:
        ``(baseline sessions, runs per baseline session)``: the design whose measured
        false-alarm rate the headline prints (:func:`measured_false_alarm_rate`).
    failed_runs:
        Candidate runs that failed or recorded a gated metric at 0 (:func:`failed_candidate_runs`)
        in a matched condition; they fail the gate unless :attr:`allow_failed_runs`.
    allow_failed_runs:
        Whether failed runs were left out instead of failing the gate.
    """

    frame: pd.DataFrame
    threshold: float
    level: float
    only_baseline: tuple[ConditionKey, ...]
    only_candidate: tuple[ConditionKey, ...]
    mode: GateMode = GateMode.REGRESSION
    between: SessionVariance | None = None
    components: Mapping[str, VarianceComponents] = field(
        default_factory=lambda: MappingProxyType({})
    )
    design: tuple[int, int] = (1, 0)
    failed_runs: tuple[FailedRun, ...] = ()
    allow_failed_runs: bool = False

    @property
    def regressions(self) -> pd.DataFrame:
        """Rows that fail the gate (regression, not shown, failed runs, too few runs)."""
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
        """One line: how many regressions (and failures) among how many comparisons, at which
        threshold, and the false-alarm rate measured for this design (never a constant)."""
        conditions = len(self.frame[list(MATCH_COLUMNS)].drop_duplicates())
        verdicts = self.frame["verdict"].tolist()
        found = sum(v in (Verdict.REGRESSION, Verdict.NOT_SHOWN) for v in verdicts)
        what = f"{found} REGRESSION{'S' if found != 1 else ''}" if found else "no regression"
        failures = []
        for verdict in (Verdict.FAILED_RUNS, Verdict.TOO_FEW_RUNS):
            count = verdicts.count(verdict)
            if count:
                failures.append(f"{verdict.value} in {count} comparison{'s' if count != 1 else ''}")
        if failures:
            what = f"{', '.join(failures)}; {what}"
        return (
            f"{what} beyond {format_threshold(self.threshold)} in {len(self.frame)} metric"
            f" comparison{'s' if len(self.frame) != 1 else ''} of {conditions} matched"
            f" condition{'s' if conditions != 1 else ''} (ratio = candidate / baseline of"
            f" geometric means, {100.0 * self.level:g}% CI; {self.mode.value} mode;"
            f" {self.false_alarm_statement()})"
        )

    def false_alarm_statement(self) -> str:
        """The A/A false-alarm rate ``bench/coverage.py`` measured for this design, with its
        simulations, date and machine; or that it was not measured, and the nearest that was."""
        sessions, runs = self.design
        design = f"{sessions} baseline session{'s' if sessions != 1 else ''} of {runs} runs"
        if self.mode is not GateMode.REGRESSION:
            return f"false-alarm rate not measured for {self.mode.value} mode"
        exact, nearest = measured_false_alarm_rate(sessions, runs)
        if exact is not None:
            return f"false-alarm rate {exact.describe()}"
        if nearest is None:
            return f"false-alarm rate not measured for this design ({design})"
        return (
            f"false-alarm rate not measured for this design ({design}); nearest measured:"
            f" {nearest.describe()}"
        )

    def warning(self) -> str:
        """Why the intervals may be too narrow, or which session-to-session SD each metric's
        intervals include."""
        known = {m: c for m, c in self.components.items() if c.known}
        if known:
            sds = ", ".join(f"{m} {c.session_sd_percent:.1f}%" for m, c in known.items())
            sessions = self.design[0]
            return (
                f"session-to-session SD per metric, from {sessions} baseline session"
                f"{'s' if sessions != 1 else ''} (and the candidate's when several): {sds};"
                " included in every interval"
            )
        return (
            "warning: the baseline holds one session, so session-to-session variation is not"
            " in the intervals and the false-alarm rate can be well above"
            f" {100 * GATE_ALPHA:g}% (the headline gives the measured one); give several A/A"
            " baseline sessions (the same code measured in separate sessions) to include it"
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
            if row["verdict"] in (Verdict.FAILED_RUNS, Verdict.TOO_FEW_RUNS):
                lines.append(f"{row['verdict']} {row['metric']} of {label}: {row['note']}")
                continue
            if str(row["note"]).startswith("TOTAL FAILURE"):
                why = str(row["note"])
            elif row["note"].startswith("identical runs"):
                why = (
                    f"identical runs on each side, the exact ratio {side}"
                    f" {format_number(row['limit'])} ({row['direction']}, threshold {threshold})"
                )
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
                    str(row["answer"]),
                    "; ".join(part for part in (str(row["note"]), str(row["decide"])) if part),
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
            "answer",
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
            f" Holm over this comparison at {100 * GATE_ALPHA:g}%); each is regressed, within"
            f" threshold or undecided. {self.false_alarm_statement()}. {self.warning()}. Worst"
            " first.",
            "",
        ]
        cells = []
        for row in self._cells():
            verdict, metric, label, base, cand, ratio, ci, n, answer, note = (
                _markdown_cell(cell) for cell in row
            )
            if row[0] in (Verdict.REGRESSION, Verdict.FAILED_RUNS, Verdict.TOO_FEW_RUNS):
                verdict = f"**{verdict}**"
            ci = f"{ci} ({answer}{'; ' + note if note else ''})"
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
# Measured false-alarm rates and the budget plan
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class MeasuredRate:
    """One design's A/A false-alarm rate as ``bench/coverage.py`` measured it.

    Attributes
    ----------
    baselines, runs:
        The design: A/A baseline sessions of this many runs each (one candidate session).
    rate, margin:
        Share of simulated A/A comparisons that failed the gate, and its Monte-Carlo 95 %
        half-width.
    simulations, comparisons:
        Simulated compared sessions, and metric comparisons in each.
    session_sd:
        The session-to-session SDs simulated, as text (e.g. ``"8 % on 2 metrics, 1 % on 3"``).
    date, machine:
        When and where it was measured.
    """

    baselines: int
    runs: int
    rate: float
    margin: float
    simulations: int
    comparisons: int
    session_sd: str
    date: str
    machine: str

    def describe(self) -> str:
        """``0.9% (±0.6) measured for 3 baseline sessions of 5 runs by bench/coverage.py (...)``."""
        sessions = f"session{'s' if self.baselines != 1 else ''}"
        return (
            f"{100 * self.rate:.1f}% (±{100 * self.margin:.1f}) measured for {self.baselines}"
            f" baseline {sessions} of {self.runs} runs by bench/coverage.py"
            f" ({self.simulations} simulated A/A comparisons of {self.comparisons} metrics,"
            f" session SD {self.session_sd}; {self.date}, {self.machine})"
        )


def measured_false_alarm_rate(
    baselines: int,
    runs: int,
    *,
    table: Sequence[Mapping[str, str | int | float]] | None = None,
) -> tuple[MeasuredRate | None, MeasuredRate | None]:
    """Look a design up in the table ``bench/coverage.py`` wrote (:mod:`gate_rates`).

    Parameters
    ----------
    baselines, runs:
        Baseline sessions, and runs per baseline session.
    table:
        Entries to search (default: :data:`cnibench.report.gate_rates.MEASURED`).

    Returns
    -------
    tuple
        ``(exact, nearest)``: the entry of this design or ``None``; and, when there is no
        exact entry, the nearest measured design (same number of baseline sessions first,
        then the closest runs), or ``None`` when the table is empty.
    """
    from cnibench.report.gate_rates import MEASURED

    entries = [
        MeasuredRate(
            baselines=int(entry["baselines"]),
            runs=int(entry["runs"]),
            rate=float(entry["rate"]),
            margin=float(entry["margin"]),
            simulations=int(entry["simulations"]),
            comparisons=int(entry["comparisons"]),
            session_sd=str(entry["session_sd"]),
            date=str(entry["date"]),
            machine=str(entry["machine"]),
        )
        for entry in (MEASURED if table is None else table)
    ]
    for entry in entries:
        if (entry.baselines, entry.runs) == (baselines, runs):
            return entry, None
    if not entries:
        return None, None

    def distance(entry: MeasuredRate) -> tuple[float, float]:
        # One baseline session and several behave differently (no session variance): the
        # number of sessions decides first.
        sessions = abs(math.log(max(entry.baselines, 1) / max(baselines, 1)))
        return sessions, abs(math.log(max(entry.runs, 1) / max(runs, 1)))

    return None, min(entries, key=distance)


def plan_gate(
    baseline: pd.DataFrame,
    *,
    loss: float = 0.10,
    power: float = 0.8,
    threshold: float = DEFAULT_THRESHOLD,
) -> list[GatePlan]:
    """The budget plan: per metric, the candidate sessions that detect ``loss`` with ``power``.

    Parameters
    ----------
    baseline:
        Tidy results of two or more A/A baseline sessions
        (:func:`cnibench.results.load_results`).
    loss, power:
        The loss to detect (fraction, e.g. 0.10) and how surely (e.g. 0.8).
    threshold:
        The gate's threshold, fraction.

    Returns
    -------
    list of GatePlan
        One per gated metric of the baseline, in table order
        (:func:`cnibench.report.gate_plan.budget_plan`); the family is every (condition,
        metric) of the baseline, as a candidate measuring all of them would be compared.

    Raises
    ------
    InsufficientDataError
        No gated metric, or no metric with two baseline sessions of a condition.
    ConfigError
        ``loss`` or ``power`` outside (0, 1).
    """
    chosen = _checked_threshold(threshold)
    for name, value in (("loss", loss), ("power", power)):
        if not 0.0 < value < 1.0:
            raise ConfigError(f"{name} must be strictly between 0 and 1, got {value!r}")
    rows = comparable_runs(baseline)
    if rows.empty:
        raise InsufficientDataError("the baseline has no successful verified run to plan from")
    values = _values_by_metric(rows)
    comparisons = len(values)
    plans = []
    for metric in sorted({m for _, m in values}, key=_metric_order):
        direction = gated_direction(metric)
        groups = [
            [v for v in sessions if v.size and bool(np.all(v > 0))]
            for (_, m), (sessions, _) in values.items()
            if m == metric
        ]
        components = variance_components(metric, groups)
        if direction is None or not components.known:
            continue
        sizes = [v.size for sessions in groups for v in sessions]
        sessions = max(len(group) for group in groups)
        plans.append(
            budget_plan(
                components,
                baseline_runs=[round(float(np.median(sizes)))] * sessions,
                groups=len(groups),
                comparisons=comparisons,
                threshold=chosen,
                alpha=GATE_ALPHA,
                loss=loss,
                power=power,
                higher_is_better=direction is Direction.HIGHER_IS_BETTER,
            )
        )
    if not plans:
        raise InsufficientDataError(
            "a plan needs two or more baseline sessions of a condition (A/A: the same code"
            " measured in separate sessions): the baseline holds one"
        )
    return plans


# --------------------------------------------------------------------------------------------
# Public entry points
# --------------------------------------------------------------------------------------------


def _metric_order(metric: str) -> tuple[int, str]:
    order = list(METRIC_DIRECTIONS)
    return (order.index(metric), "") if metric in order else (len(order), metric)


def compare_result_sets(
    baseline: pd.DataFrame,
    candidate: pd.DataFrame,
    *,
    threshold: float = DEFAULT_THRESHOLD,
    level: float = LEVEL,
    mode: GateMode | str = GateMode.REGRESSION,
    allow_failed_runs: bool = False,
) -> ResultComparison:
    """Compare every matched condition and metric of two result sets.

    Parameters
    ----------
    baseline, candidate:
        Tidy results (:func:`cnibench.results.load_results`), e.g. of main and of a branch.
        Several baseline sessions (A/A runs of the same code) give each metric's
        session-to-session variance, which the intervals then include
        (:func:`cnibench.report.gate_plan.variance_components`).
    threshold:
        Regression threshold as a fraction in [0, 1] (0.05 = 5 %; see :func:`parse_threshold`
        for the text form).
    level:
        Confidence level of the printed intervals, in (0, 1).
    mode:
        :class:`GateMode`: ``"regression"`` (default) or ``"non-inferiority"``.
    allow_failed_runs:
        Leave out candidate runs that failed or recorded a gated metric at 0 (named in the
        note) instead of failing the gate on them.

    Returns
    -------
    ResultComparison
        The table (see :func:`compare_results`) and the conditions only one side has.

    Raises
    ------
    InsufficientDataError
        A side has no successful verified run of a compared metric (and the candidate no
        failed run either), or no condition and metric is in both.
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
    failures = failed_candidate_runs(candidate)
    for name, runs in (("baseline", base_rows), ("candidate", cand_rows)):
        if runs.empty and not (name == "candidate" and failures):
            raise InsufficientDataError(
                f"the {name} has no successful verified run of a compared metric"
                f" ({', '.join(METRIC_DIRECTIONS)}, cpu@<role>)"
            )
    base_keys = _condition_keys(base_rows)
    cand_keys = list(
        dict.fromkeys([*_condition_keys(cand_rows), *(failure.key for failure in failures)])
    )
    in_both = set(base_keys) & set(cand_keys)
    matched = [key for key in base_keys if key in in_both]
    if not matched:
        raise InsufficientDataError(
            "no condition is in both result sets (same scenario, CNI, condition and"
            f" parameters): baseline has {', '.join(_labels(base_keys).values())};"
            f" candidate has {', '.join(_labels(cand_keys).values())}"
        )
    failures = [failure for failure in failures if failure.key in in_both]
    base_values, cand_values = _values_by_metric(base_rows), _values_by_metric(cand_rows)
    pairs: list[tuple[ConditionKey, str, Direction]] = []
    for key in matched:
        metrics = sorted({m for k, m in base_values if k == key}, key=_metric_order)
        for metric in metrics:
            direction = gated_direction(metric)
            run_failed = any(f.key == key and not f.metric for f in failures)
            if direction is not None and ((key, metric) in cand_values or run_failed):
                pairs.append((key, metric, direction))
    if not pairs:
        raise InsufficientDataError("the matched conditions share no compared metric")

    def usable(sessions: Sequence[npt.NDArray[np.float64]], direction: Direction) -> list[Any]:
        # Zero runs of a higher-is-better metric are failures (named, see failures); the rest
        # of the runs are what the statistics use.
        if direction is Direction.HIGHER_IS_BETTER:
            return [v[v > 0] for v in sessions]
        return list(sessions)

    base_sessions = {(k, m): usable(base_values[(k, m)][0], d) for k, m, d in pairs}
    cand_sessions = {
        (k, m): usable(cand_values[(k, m)][0], d) if (k, m) in cand_values else []
        for k, m, d in pairs
    }
    components: dict[str, VarianceComponents] = {}
    for metric in dict.fromkeys(m for _, m, _ in pairs):
        groups = [
            [v for v in side[(k, m)] if v.size and bool(np.all(v > 0))]
            for k, m, _ in pairs
            if m == metric
            for side in (base_sessions, cand_sessions)
        ]
        components[metric] = variance_components(metric, groups)
    between = session_variance(
        [
            [v for v in sessions if v.size and bool(np.all(v > 0))]
            for sessions, _ in base_values.values()
        ]
    )
    rows: list[dict[str, Any]] = []
    tests: list[_Test | None] = []
    for key, metric, direction in pairs:
        unit_b = base_values[(key, metric)][1]
        unit_c = cand_values[(key, metric)][1] if (key, metric) in cand_values else unit_b
        row: dict[str, Any] = dict(zip(MATCH_COLUMNS, key, strict=True))
        row.update(metric=metric, unit=unit_b, direction=direction.value)
        base_s = base_sessions[(key, metric)]
        cand_s = cand_sessions[(key, metric)] or [np.zeros(0, dtype=np.float64)]
        measured, test = _compare_metric(base_s, cand_s, direction, level, components.get(metric))
        row.update(measured)
        raw = (
            np.concatenate(cand_values[(key, metric)][0])
            if (key, metric) in cand_values
            else np.zeros(0)
        )
        base_all = np.concatenate(base_values[(key, metric)][0])
        total = (
            direction is Direction.HIGHER_IS_BETTER
            and raw.size > 0
            and float(raw.max()) <= 0.0
            and base_all.size > 0
            and float(base_all.min()) > 0.0
        )
        if total:
            row["note"] = "TOTAL FAILURE: every candidate run is 0"
        row["_failures"] = [f for f in failures if f.key == key and f.metric in ("", metric)]
        row["_total"] = total
        if unit_b != unit_c:
            row.update(p_value=math.nan, ci_low=math.nan, note=f"units differ: {unit_c}")
            test = None
        rows.append(row)
        tests.append(test)
    adjusted = stats.holm_adjusted([row["p_value"] for row in rows])
    comparisons = int(np.isfinite(np.asarray([row["p_value"] for row in rows])).sum())
    for row, test, p_adjusted in zip(rows, tests, adjusted.tolist(), strict=True):
        direction = Direction(row["direction"])
        own: list[FailedRun] = row.pop("_failures")
        total = bool(row.pop("_total"))
        verdict = _verdict(
            direction,
            row["ratio"],
            row["ci_low"],
            row["ci_high"],
            chosen,
            gate_mode,
            float(p_adjusted),
        )
        answer, decide = Answer.UNDECIDED, ""
        if total:
            verdict, answer = Verdict.REGRESSION, Answer.REGRESSED
        elif test is None:
            if row["n_candidate"] < MIN_CANDIDATE_RUNS:
                verdict = Verdict.TOO_FEW_RUNS
                need = MIN_CANDIDATE_RUNS - row["n_candidate"]
                decide = (
                    f"the gate cannot pass on fewer than {MIN_CANDIDATE_RUNS} candidate runs:"
                    f" measure at least {need} more"
                )
            elif row["n_baseline"] < 2:
                decide = "measure at least 2 baseline runs"
        elif verdict is Verdict.REGRESSION:
            answer = Answer.REGRESSED
        elif _cleared(direction, row["ci_low"], row["ci_high"], chosen) or (
            test.exact and verdict is not Verdict.NOT_SHOWN
        ):
            answer = Answer.WITHIN
        elif test.exact:
            answer = Answer.REGRESSED
        else:
            decide = _decide_hint(
                test, direction, threshold=chosen, level=level, comparisons=comparisons
            )
        if own and not total:
            named = ", ".join(
                f"{f.run_id} ({f.metric + ' ' if f.metric else ''}{f.reason})" for f in own
            )
            if allow_failed_runs:
                row["note"] = "; ".join(p for p in (f"left out: {named}", row["note"]) if p)
            else:
                verdict = Verdict.FAILED_RUNS
                row["note"] = (
                    f"candidate run{'s' if len(own) != 1 else ''} {named}: a failed or zero run"
                    " fails the gate unless failed runs are allowed (--allow-failed-runs)"
                )
        row.update(
            p_adjusted=float(p_adjusted),
            verdict=verdict.value,
            level=level,
            threshold=chosen,
            limit=_limit(direction, chosen),
            regression=verdict in _FAILING,
            answer=answer.value,
            decide=decide,
        )
    frame = _worst_first(pd.DataFrame(rows, columns=list(COMPARISON_COLUMNS)))
    frame["regression"] = frame["regression"].astype(bool)
    baseline_counts = [len(base_values[(k, m)][0]) for k, m, _ in pairs]
    baseline_sizes = [v.size for k, m, _ in pairs for v in base_values[(k, m)][0]]
    design = (max(baseline_counts), round(float(np.median(baseline_sizes))))
    return ResultComparison(
        frame=frame,
        threshold=chosen,
        level=level,
        only_baseline=tuple(key for key in base_keys if key not in in_both),
        only_candidate=tuple(key for key in cand_keys if key not in in_both),
        mode=gate_mode,
        between=between,
        components=MappingProxyType(components),
        design=design,
        failed_runs=tuple(failures),
        allow_failed_runs=allow_failed_runs,
    )


_FAILING = (Verdict.REGRESSION, Verdict.NOT_SHOWN, Verdict.FAILED_RUNS, Verdict.TOO_FEW_RUNS)
"""Verdicts that fail the gate."""


def _cleared(direction: Direction, low: float, high: float, threshold: float) -> bool:
    """Whether the interval's bound on the worse side is within the threshold."""
    if direction is Direction.HIGHER_IS_BETTER:
        return math.isfinite(low) and low > 1.0 - threshold
    return math.isfinite(high) and high < 1.0 + threshold


def compare_results(
    baseline: pd.DataFrame,
    candidate: pd.DataFrame,
    *,
    threshold: float = DEFAULT_THRESHOLD,
    level: float = LEVEL,
    mode: GateMode | str = GateMode.REGRESSION,
    allow_failed_runs: bool = False,
) -> pd.DataFrame:
    """The regression comparison of two result sets as a tidy DataFrame (notebook API).

    Parameters
    ----------
    baseline, candidate, threshold, level, mode, allow_failed_runs:
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
        bound, must pass), ``verdict`` (:class:`Verdict`), ``regression`` (fails the gate),
        ``answer`` (:class:`Answer`), ``decide`` (for an undecided one, the candidate sessions
        or runs that would decide it) and ``note`` (e.g. the failed runs, named).

    Examples
    --------
    >>> from cnibench.results import load_results
    >>> table = compare_results(load_results("main/"), load_results("branch/"))  # doctest: +SKIP
    >>> table[table.regression][["condition", "metric", "ratio"]]  # doctest: +SKIP
    """
    return compare_result_sets(
        baseline,
        candidate,
        threshold=threshold,
        level=level,
        mode=mode,
        allow_failed_runs=allow_failed_runs,
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
