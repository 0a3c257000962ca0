r"""The statistics of one gated comparison: the ratio of geometric means, its interval and
one-sided p-value, the verdict they give, and what would decide an undecided one.

When some side holds two or more sessions, each metric's session-to-session and run-to-run
variance components (:func:`cnibench.report.gate.plan.variance_components`) give the variance
of the difference (:func:`cnibench.report.gate.plan.difference_variance`: with equal runs per
session, Student's t on the session means). With one session a side the data give no
session-to-session variance: with a session SD the user gives (``--session-sd``) it enters the
variance as known (:func:`given_session_variance`); without one the ratio and interval are
Welch's t on the logarithms of the runs, shown for orientation, and the comparison cannot be
decided on them (:func:`unknown_session_hint` says what would decide it).
(:func:`gate_interval` with a pooled :class:`~cnibench.stats.ratios.SessionVariance`, the
estimator used before issue 32, stays for callers.)
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from cnibench import stats
from cnibench.report.gate.directions import Direction
from cnibench.report.gate.plan import MAX_SESSIONS, VarianceComponents, difference_variance
from cnibench.report.gate.verdicts import GATE_ALPHA, MIN_CANDIDATE_RUNS, GateMode, Verdict
from cnibench.report.tables import format_number
from cnibench.stats import t_critical, t_two_sided, t_upper_tail
from cnibench.stats.ratios import SessionVariance

__all__ = [
    "GateInterval",
    "MetricTest",
    "cleared",
    "compare_metric",
    "decide_hint",
    "gate_interval",
    "given_session_variance",
    "limit_of",
    "unknown_session_hint",
    "verdict_of",
    "worse_logs",
]


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
    quantile = t_two_sided(level, df)
    worse = -log_ratio if direction is Direction.HIGHER_IS_BETTER else log_ratio
    return GateInterval(
        math.exp(log_ratio),
        math.exp(log_ratio - quantile * se),
        math.exp(log_ratio + quantile * se),
        t_upper_tail(worse / se, df),
        df,
    )


def verdict_of(
    direction: Direction,
    ratio: float,
    low: float,
    high: float,
    threshold: float,
    mode: GateMode,
    p_adjusted: float,
) -> Verdict:
    """The verdict of a ratio and its interval (before failures are taken into account)."""
    if not (math.isfinite(low) and math.isfinite(high)):
        return Verdict.NOT_APPLICABLE
    if direction is Direction.HIGHER_IS_BETTER:
        worse, beyond, better = high < 1.0, ratio < 1.0 - threshold, low > 1.0
        is_cleared = low > 1.0 - threshold
    else:
        worse, beyond, better = low > 1.0, ratio > 1.0 + threshold, high < 1.0
        is_cleared = high < 1.0 + threshold
    if mode is GateMode.NON_INFERIORITY:
        if not is_cleared:
            return Verdict.NOT_SHOWN
    elif beyond and math.isfinite(p_adjusted) and p_adjusted <= GATE_ALPHA:
        return Verdict.REGRESSION
    if worse:
        return Verdict.WORSE
    return Verdict.BETTER if better else Verdict.NO_CHANGE


def limit_of(direction: Direction, threshold: float) -> float:
    """The ratio the whole interval must pass to be a regression."""
    return 1.0 - threshold if direction is Direction.HIGHER_IS_BETTER else 1.0 + threshold


def cleared(direction: Direction, low: float, high: float, threshold: float) -> bool:
    """Whether the interval's bound on the worse side is within the threshold."""
    if direction is Direction.HIGHER_IS_BETTER:
        return math.isfinite(low) and low > 1.0 - threshold
    return math.isfinite(high) and high < 1.0 + threshold


@dataclass(frozen=True)
class MetricTest:
    """What the second pass (Holm, verdict, answer, hint) needs of one comparison.

    Attributes
    ----------
    log_ratio, se, df:
        The log of the ratio, its standard error and degrees of freedom.
    exact:
        Identical runs on each side: the exact ratio decides.
    components:
        The metric's variance components, when the test used them.
    baseline_runs, candidate_runs:
        Runs in each session of each side.
    baseline_var, candidate_var:
        Variance of each side's log runs (the Welch test's material).
    given:
        The session-to-session variance of the logs the user gave (``--session-sd``), when
        the test used it; then ``run_variance`` and ``run_df`` are the pooled within-session
        variance of this comparison's logs and its degrees of freedom.
    """

    log_ratio: float
    se: float
    df: float
    exact: bool
    components: VarianceComponents | None
    baseline_runs: tuple[int, ...]
    candidate_runs: tuple[int, ...]
    baseline_var: float
    candidate_var: float
    given: float | None = None
    run_variance: float = math.nan
    run_df: int = 0

    @property
    def session_known(self) -> bool:
        """Whether the test includes a session-to-session variance (estimated or given), or
        needs none (identical runs): otherwise it cannot decide."""
        estimated = self.components is not None and self.components.known
        return self.exact or estimated or self.given is not None


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


def given_session_variance(
    session: float,
    run_variance: float,
    run_df: int,
    baseline_runs: Sequence[int],
    candidate_runs: Sequence[int],
) -> tuple[float, float]:
    r"""Variance of the difference of the two sides' means of session mean logs when the
    session-to-session variance is given (known), and its degrees of freedom.

    Parameters
    ----------
    session:
        The session-to-session variance of the logs, :math:`\sigma_s^2 = \ln(1 + SD)^2`.
    run_variance, run_df:
        The pooled within-session variance of the logs and its degrees of freedom.
    baseline_runs, candidate_runs:
        Runs in each session of each side.

    Returns
    -------
    tuple of float
        ``(variance, df)``: :math:`\sigma_s^2 (1/S_b + 1/S_c) + \hat\sigma_w^2 c` with
        :math:`c = \sum_b 1/(n_b S_b^2) + \sum_c 1/(n_c S_c^2)`; Satterthwaite's df, the
        known part adding none.
    """
    s_b, s_c = len(baseline_runs), len(candidate_runs)
    c = sum(1.0 / n for n in baseline_runs) / s_b**2 + sum(1.0 / n for n in candidate_runs) / s_c**2
    run_part = c * max(run_variance, 0.0)
    variance = session * (1.0 / s_b + 1.0 / s_c) + run_part
    df = variance**2 / (run_part**2 / run_df) if run_df > 0 and run_part > 0 else math.inf
    return variance, df


def compare_metric(
    baseline: Sequence[npt.NDArray[np.float64]],
    candidate: Sequence[npt.NDArray[np.float64]],
    direction: Direction,
    level: float,
    components: VarianceComponents | None,
    *,
    session_sd: float | None = None,
) -> tuple[dict[str, Any], MetricTest | None]:
    """Estimates, ratio, interval and one-sided p-value of one matched (condition, metric).

    ``candidate`` holds the runs the gate may use (its failed and zero runs already out).
    ``session_sd`` (a relative SD, 0.03 = 3 %) is used when ``components`` do not estimate
    the session-to-session variance.
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
        test = MetricTest(log_ratio, 0.0, math.inf, True, None, sizes_b, sizes_c, 0.0, 0.0)
        return row, test
    var_b = float(np.var(log_b, ddof=1)) if log_b.size > 1 else 0.0
    var_c = float(np.var(log_c, ddof=1)) if log_c.size > 1 else 0.0
    given, run_variance, run_df = None, math.nan, 0
    if components is not None and components.known:
        log_ratio = _session_means(candidate) - _session_means(baseline)
        variance, df = difference_variance(components, sizes_b, sizes_c)
        se = math.sqrt(variance)
    elif session_sd is not None:
        given = math.log1p(session_sd) ** 2
        squares = 0.0
        for values in (*baseline, *candidate):
            logs = np.log(values)
            squares += float(np.sum((logs - logs.mean()) ** 2))
            run_df += logs.size - 1
        run_variance = squares / run_df if run_df > 0 else 0.0
        log_ratio = _session_means(candidate) - _session_means(baseline)
        variance, df = given_session_variance(given, run_variance, run_df, sizes_b, sizes_c)
        se = math.sqrt(variance)
    else:
        interval = gate_interval(baseline, candidate, direction, level=level, between=None)
        log_ratio = math.log(interval.ratio)
        se = math.sqrt(var_b / base.size + var_c / cand.size)
        df = interval.df
    row["ratio"] = math.exp(log_ratio)
    if se > 0 and math.isfinite(df):
        quantile = t_two_sided(level, df)
        turned = -log_ratio if direction is Direction.HIGHER_IS_BETTER else log_ratio
        row.update(
            ci_low=math.exp(log_ratio - quantile * se),
            ci_high=math.exp(log_ratio + quantile * se),
            p_value=t_upper_tail(turned / se, df),
        )
    test = MetricTest(
        log_ratio,
        se,
        df,
        False,
        components,
        sizes_b,
        sizes_c,
        var_b,
        var_c,
        given=given,
        run_variance=run_variance,
        run_df=run_df,
    )
    return row, test


def worse_logs(direction: Direction, log_ratio: float, threshold: float) -> tuple[float, float]:
    """The log ratio and the threshold's log limit, both turned so that larger is worse."""
    if direction is Direction.HIGHER_IS_BETTER:
        return -log_ratio, -math.log1p(-min(threshold, 1.0 - 1e-12))
    return log_ratio, math.log1p(threshold)


def decide_hint(
    test: MetricTest,
    direction: Direction,
    *,
    threshold: float,
    level: float,
    comparisons: int,
) -> str:
    """Which candidate sessions (or runs) would decide an undecided comparison, if the ratio
    stayed where it is."""
    worse, limit = worse_logs(direction, test.log_ratio, threshold)
    df = test.df if math.isfinite(test.df) and test.df > 0 else 1.0
    if worse > limit:
        target = "regressed"
        needed = worse / t_critical(GATE_ALPHA / max(comparisons, 1), df)
    elif worse < limit:
        target = "within threshold"
        needed = (limit - worse) / t_two_sided(level, df)
    else:
        return "the ratio sits at the threshold: no number of runs decides it"
    ratio = f"if the ratio stays {format_number(math.exp(test.log_ratio))}"
    runs = max(1, round(float(np.median(test.candidate_runs))))
    components, given = test.components, test.given
    if (components is not None and components.known) or given is not None:

        def decides(extra: int) -> bool:
            more = (*test.candidate_runs, *([runs] * extra))
            if given is not None:
                variance, _ = given_session_variance(
                    given, test.run_variance, test.run_df, test.baseline_runs, more
                )
            else:
                assert components is not None
                variance, _ = difference_variance(components, test.baseline_runs, more)
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
        sessions = len(test.baseline_runs)
        return (
            f"no number of candidate sessions decides it: the baseline's {sessions}"
            f" session{'s limit' if sessions != 1 else ' limits'} it; measure more baseline"
            " sessions"
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


def unknown_session_hint(
    test: MetricTest,
    direction: Direction,
    *,
    threshold: float,
    level: float,
    comparisons: int,
    regressed_alone: bool,
    within_alone: bool,
) -> str:
    """What would decide a comparison whose session-to-session variance is unknown (one session
    a side and no ``--session-sd``): how it reads at the runs' noise alone, and the session SD
    (relative, %) up to which that reading would hold.

    Parameters
    ----------
    test:
        The comparison's Welch test on the runs (:func:`compare_metric`).
    regressed_alone, within_alone:
        Whether the gate would call it regressed (Holm included), or within threshold, at the
        runs' noise alone.
    """
    worse, limit = worse_logs(direction, test.log_ratio, threshold)
    df = test.df if math.isfinite(test.df) and test.df > 0 else 1.0
    sessions = 1.0 / max(len(test.baseline_runs), 1) + 1.0 / max(len(test.candidate_runs), 1)
    unknown = "one session a side gives no session-to-session SD"
    decide = "--session-sd or several A/A baseline sessions decide it"
    if regressed_alone:
        # The one-sided test must stay significant at Holm's first step, alpha / m.
        room = (worse / t_critical(GATE_ALPHA / max(comparisons, 1), df)) ** 2
        reading = "regressed"
    elif within_alone:
        room = ((limit - worse) / t_two_sided(level, df)) ** 2
        reading = "within threshold"
    else:
        at_runs = decide_hint(
            test, direction, threshold=threshold, level=level, comparisons=comparisons
        )
        return f"undecided even at the runs' noise alone: {at_runs}; and {unknown} ({decide})"
    largest = max(room - test.se**2, 0.0) / sessions
    sd = 100.0 * math.expm1(math.sqrt(largest))
    return (
        f"{unknown}: {reading} at the runs' noise alone, and still at a session SD up to"
        f" {sd:.1f}%; {decide}"
    )
