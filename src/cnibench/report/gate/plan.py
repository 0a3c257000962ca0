r"""Variance components of the regression gate, its test, and the budget plan built on them.

``cnibench compare`` (:mod:`cnibench.report.compare`) compares the mean logarithm of a metric
between a baseline and a candidate. Runs of one session share that session's conditions (the
machine's load, the cluster's placement), so the variance of a session's mean log is
:math:`\sigma_s^2 + \sigma_w^2 / n`: a session-to-session component and the runs' own noise.
Both are estimated here **per metric** (every condition of that metric, both sides pooled):
the session-to-session SD of a tail latency can be eight times that of a memory figure, and
one pooled figure made the gate raise 9 % false alarms where it promised 1 % (issue 32).

:func:`difference_variance` gives the variance of the difference of the two sides' means of
session means, with its degrees of freedom. With the same number of runs in every session it
is the pooled variance of the session means times :math:`1/S_b + 1/S_c`, an exact t test; with
unequal runs, Satterthwaite's approximation. :func:`budget_plan` turns the baseline's
components into the candidate sessions (and, when the baseline's own sessions limit what any
candidate can show, the baseline sessions) that detect a given loss with a given power at the
gate's family-wise level, and :func:`plan_gate` does so for every gated metric of a baseline
(``cnibench compare --plan``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np
import numpy.typing as npt
import pandas as pd

from cnibench.errors import ConfigError, InsufficientDataError
from cnibench.report.gate.directions import (
    DEFAULT_THRESHOLD,
    Direction,
    checked_threshold,
    gated_direction,
    metric_order,
)
from cnibench.report.gate.loading import comparable_runs, values_by_metric
from cnibench.report.gate.verdicts import GATE_ALPHA
from cnibench.stats import beyond_margin_power, variance_upper_factor

__all__ = [
    "MAX_SESSIONS",
    "PLAN_ASSURANCE",
    "GatePlan",
    "VarianceComponents",
    "budget_plan",
    "detection_power",
    "difference_variance",
    "plan_gate",
    "variance_components",
]

MAX_SESSIONS = 60
"""The most sessions a plan or a "would decide it" hint considers on one side."""

PLAN_ASSURANCE = 0.9
"""The upper confidence bound of the baseline's variances a plan sizes for: with bounds at
0.8, the allocation reached its stated power for the truth in only 0.79 of simulated baselines
(``bench/coverage.py``'s ``gate-plan`` section, 2026-12-06); the promise is 0.9."""


@dataclass(frozen=True)
class VarianceComponents:
    r"""Session-to-session and run-to-run variance of one metric's logarithms.

    Attributes
    ----------
    metric:
        The metric, e.g. ``throughput``.
    spread:
        Pooled variance of the session means of the logs within each (condition, side),
        :math:`\hat T`; NaN without a condition holding two sessions on a side.
    spread_df:
        Its degrees of freedom, :math:`\sum (S - 1)` over (condition, side).
    run_variance:
        Pooled variance of the logs within a session, :math:`\hat\sigma_w^2`.
    run_df:
        Its degrees of freedom, :math:`\sum (n - 1)` over sessions.
    mean_inverse_runs:
        Mean of :math:`1/n` over the sessions that enter :attr:`spread`, so that
        :math:`\hat T - k\hat\sigma_w^2` estimates :math:`\sigma_s^2`.
    groups:
        How many (condition, side) groups with two or more sessions entered :attr:`spread`.
    """

    metric: str
    spread: float
    spread_df: int
    run_variance: float
    run_df: int
    mean_inverse_runs: float
    groups: int

    @property
    def known(self) -> bool:
        """Whether the session-to-session component is estimated (some side had 2 sessions)."""
        return self.spread_df > 0

    @property
    def session_variance(self) -> float:
        r""":math:`\hat\sigma_s^2 = \max(0, \hat T - k \hat\sigma_w^2)` on the log scale."""
        if not self.known:
            return math.nan
        return max(0.0, self.spread - self.mean_inverse_runs * self.run_variance)

    @property
    def session_sd_percent(self) -> float:
        """The session-to-session SD as a relative change, in %."""
        return 100.0 * math.expm1(math.sqrt(self.session_variance))

    @property
    def run_cv_percent(self) -> float:
        """The run-to-run SD within a session as a relative change, in %."""
        return 100.0 * math.expm1(math.sqrt(max(self.run_variance, 0.0)))


def variance_components(
    metric: str, groups: Sequence[Sequence[npt.ArrayLike]]
) -> VarianceComponents:
    """Estimate one metric's components from its sessions.

    Parameters
    ----------
    metric:
        The metric's name (kept for the messages).
    groups:
        Per (condition, side), the positive values of each session of that side (one array
        per session). A side with one session adds to the run variance only.

    Returns
    -------
    VarianceComponents
        :attr:`VarianceComponents.known` is false when no group has two sessions.
    """
    squares, run_df = 0.0, 0
    spread_sum, spread_df, inverse, counted, used = 0.0, 0, 0.0, 0, 0
    for sessions in groups:
        logs = [np.log(np.asarray(v, dtype=np.float64)) for v in sessions]
        logs = [v for v in logs if v.size >= 1]
        for values in logs:
            squares += float(np.sum((values - values.mean()) ** 2))
            run_df += values.size - 1
        if len(logs) >= 2:
            means = np.array([float(v.mean()) for v in logs])
            spread_sum += float(np.sum((means - means.mean()) ** 2))
            spread_df += len(logs) - 1
            inverse += sum(1.0 / v.size for v in logs)
            counted += len(logs)
            used += 1
    return VarianceComponents(
        metric=metric,
        spread=spread_sum / spread_df if spread_df else math.nan,
        spread_df=spread_df,
        run_variance=squares / run_df if run_df else math.nan,
        run_df=run_df,
        mean_inverse_runs=inverse / counted if counted else math.nan,
        groups=used,
    )


def difference_variance(
    components: VarianceComponents,
    baseline_runs: Sequence[int],
    candidate_runs: Sequence[int],
) -> tuple[float, float]:
    r"""Variance of the difference of the two sides' means of session mean logs, and its df.

    Parameters
    ----------
    components:
        The metric's components; :attr:`VarianceComponents.known` must be true.
    baseline_runs, candidate_runs:
        Runs in each session of each side.

    Returns
    -------
    tuple of float
        ``(variance, df)``. With :math:`a = 1/S_b + 1/S_c` and
        :math:`c = \sum_b 1/(n_b S_b^2) + \sum_c 1/(n_c S_c^2)` the variance is
        :math:`a \hat T + (c - a k) \hat\sigma_w^2`, which is :math:`a\hat T` (df
        :math:`\sum(S-1)`, an exact t test) when every session has the same runs, and has
        Satterthwaite's df otherwise. When that is below the run noise alone
        (:math:`\hat\sigma_s^2 < 0`), :math:`c\hat\sigma_w^2` with the spread's df.
    """
    s_b, s_c = len(baseline_runs), len(candidate_runs)
    a = 1.0 / s_b + 1.0 / s_c
    c = sum(1.0 / n for n in baseline_runs) / s_b**2 + sum(1.0 / n for n in candidate_runs) / s_c**2
    spread, runs = components.spread, components.run_variance
    run_part = (c - a * components.mean_inverse_runs) * runs
    variance = a * spread + run_part
    floor = c * runs
    if not variance >= floor:
        return floor, float(components.spread_df)
    terms = (a * spread) ** 2 / components.spread_df + (
        run_part**2 / components.run_df if components.run_df else 0.0
    )
    df = variance**2 / terms if terms > 0 else math.inf
    return variance, float(min(df, components.spread_df + components.run_df))


def detection_power(
    components: VarianceComponents,
    *,
    loss: float,
    threshold: float,
    baseline_runs: Sequence[int],
    candidate_runs: Sequence[int],
    comparisons: int,
    alpha: float,
    extra_df: int = 0,
    higher_is_better: bool = True,
) -> float:
    """Chance that the gate finds a true loss of ``loss`` in one metric (one comparison).

    The estimated components are taken as the truth; the gate's test is one-sided at
    ``alpha / comparisons`` (Holm's first step, so this is a little conservative), with the
    df of :func:`difference_variance` plus ``extra_df`` (the candidate sessions' own spread,
    which the gate pools in), and the estimate must also be beyond the threshold.

    Parameters
    ----------
    loss:
        Fraction lost, e.g. 0.10: a ratio of 0.9 for a higher-is-better metric, 1.1 for a
        lower-is-better one.
    threshold:
        The gate's threshold as a fraction.
    """
    variance, df = difference_variance(components, baseline_runs, candidate_runs)
    df += extra_df
    se = math.sqrt(variance)
    shift = -math.log1p(-loss) if higher_is_better else math.log1p(loss)
    limit = -math.log1p(-threshold) if higher_is_better else math.log1p(threshold)
    return beyond_margin_power(shift, limit, se, df, alpha=alpha / max(comparisons, 1))


@dataclass(frozen=True)
class GatePlan:
    """How many sessions detect a loss of one metric with the wanted power.

    Attributes
    ----------
    components:
        The baseline's components the plan is computed from.
    loss, power_wanted:
        The loss (fraction) and power asked for.
    candidate_sessions, runs_per_session:
        Candidate sessions to measure, of this many runs each (the baseline's runs per
        session: equal runs keep the test exact). ``None`` when no design up to
        :data:`MAX_SESSIONS` reaches the power.
    extra_baseline_sessions:
        Baseline sessions to add as well (0 when the baseline's sessions suffice).
    power:
        The power of the recommended design (or of the largest one tried) at the upper
        confidence bound of the variances.
    assurance:
        The confidence of that bound.
    comparisons:
        Comparisons in the family the gate corrects over.
    """

    components: VarianceComponents
    loss: float
    power_wanted: float
    candidate_sessions: int | None
    runs_per_session: int
    extra_baseline_sessions: int
    power: float
    comparisons: int
    assurance: float = PLAN_ASSURANCE
    higher_is_better: bool = True

    def statement(self) -> str:
        """One line: what to measure, and the components it is computed from."""
        c = self.components
        basis = (
            f"session SD {c.session_sd_percent:.1f}%, run CV {c.run_cv_percent:.1f}% from the"
            f" baseline (df {c.spread_df}), sized for the {100 * self.assurance:g}% upper bound"
            f" of the variance; {self.comparisons} comparisons"
        )
        change = "loss" if self.higher_is_better else "increase"
        goal = f"a {100 * self.loss:g}% {c.metric} {change} with power {self.power_wanted:g}"
        if self.candidate_sessions is None:
            return (
                f"plan: no design up to {MAX_SESSIONS} sessions per side detects {goal}"
                f" (at most {self.power:.2f}; {basis})"
            )
        more = (
            f" and {self.extra_baseline_sessions} more baseline session"
            f"{'s' if self.extra_baseline_sessions != 1 else ''} of {self.runs_per_session} runs"
            if self.extra_baseline_sessions
            else ""
        )
        sessions = self.candidate_sessions
        return (
            f"plan: {sessions} candidate session{'s' if sessions != 1 else ''} of"
            f" {self.runs_per_session} runs{more} detect {goal} (stated power"
            f" {self.power:.2f}; {basis})"
        )


def budget_plan(
    components: VarianceComponents,
    *,
    baseline_runs: Sequence[int],
    groups: int,
    comparisons: int,
    threshold: float,
    alpha: float,
    loss: float = 0.10,
    power: float = 0.8,
    assurance: float = PLAN_ASSURANCE,
    higher_is_better: bool = True,
) -> GatePlan:
    """The fewest new sessions that detect ``loss`` of one metric with ``power``.

    Parameters
    ----------
    components:
        The metric's components from the baseline (:func:`variance_components`); the
        session-to-session component must be known (two or more baseline sessions).
    baseline_runs:
        Runs in each baseline session of one condition.
    groups:
        Conditions with this metric: each candidate session adds ``S_c - 1`` df per
        condition to the pooled spread.
    comparisons, threshold, alpha:
        The gate's family size, threshold and family-wise level.
    loss, power:
        What to detect and how surely.
    assurance:
        The plan sizes for the ``assurance`` upper confidence bound of the baseline's
        variances (chi-square on their df), not their estimates: three baseline sessions
        estimate a variance within a factor of about two, and a baseline that happened to look
        quiet must not under-size the plan. With probability about ``assurance`` the true
        power is then at least ``power``.

    Returns
    -------
    GatePlan
        Candidate sessions of the baseline's runs per session; baseline sessions are added
        only when the baseline's own session-to-session noise keeps every candidate design
        below the power. The design with the fewest new sessions in all wins.
    """
    runs = max(1, round(float(np.median(baseline_runs)))) if len(baseline_runs) else 1
    upper = replace(
        components,
        spread=components.spread * variance_upper_factor(components.spread_df, assurance=assurance),
        run_variance=components.run_variance
        * variance_upper_factor(max(components.run_df, 1), assurance=assurance),
    )
    best: tuple[int, int, float] | None = None
    last = 0.0
    for extra in range(MAX_SESSIONS):
        base = [*baseline_runs, *([runs] * extra)]
        for sessions in range(1, MAX_SESSIONS + 1):
            if best is not None and extra + sessions >= best[0] + best[1]:
                break
            got = detection_power(
                upper,
                loss=loss,
                threshold=threshold,
                baseline_runs=base,
                candidate_runs=[runs] * sessions,
                comparisons=comparisons,
                alpha=alpha,
                extra_df=groups * (sessions - 1 + extra),
                higher_is_better=higher_is_better,
            )
            last = max(last, got)
            if got >= power:
                best = (extra, sessions, got)
                break
        if best is not None and extra >= best[0] + best[1]:
            break
    chosen: tuple[int | None, int, float] = (
        (None, 0, last) if best is None else (best[1], best[0], best[2])
    )
    return GatePlan(
        components,
        loss,
        power,
        chosen[0],
        runs,
        chosen[1],
        chosen[2],
        comparisons,
        assurance,
        higher_is_better,
    )


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
        One per gated metric of the baseline, in table order (:func:`budget_plan`); the
        family is every (condition, metric) of the baseline, as a candidate measuring all of
        them would be compared.

    Raises
    ------
    InsufficientDataError
        No gated metric, or no metric with two baseline sessions of a condition.
    ConfigError
        ``loss`` or ``power`` outside (0, 1).
    """
    chosen = checked_threshold(threshold)
    for name, value in (("loss", loss), ("power", power)):
        if not 0.0 < value < 1.0:
            raise ConfigError(f"{name} must be strictly between 0 and 1, got {value!r}")
    rows = comparable_runs(baseline)
    if rows.empty:
        raise InsufficientDataError("the baseline has no successful verified run to plan from")
    values = values_by_metric(rows)
    comparisons = len(values)
    plans = []
    for metric in sorted({m for _, m in values}, key=metric_order):
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
