"""The calls of a verdict (one step of :mod:`cnibench.report.verdict`): each question its own
family, the interval that carries each call, "same within ±m", and the runs that would decide
what is still undecided.

Questions
---------
A report asks several questions at once, and each is a family of its own
(:func:`question_of`): a feature on one configuration (the gateway on vxlan, over its
metrics), an option of one CNI against its default, one CNI against its reference over the
conditions of one scenario, one split against its weights. Holm's correction runs within each
(:func:`cnibench.stats.family_holm`), so the chance that a question gets any false call stays
at 5 % however many other questions the report holds; correcting over the whole report made
every answer depend on them (a ×0.8 at CV 10 % and 5 runs: detected in 0.85 alone, 0.07 among
130 contrasts; ``bench/coverage.py --sections families``).

Calls
-----
Each tested contrast is one of:

- a *cost* (``significant``): Holm-adjusted p at most ``1 - level`` within its question;
- *same within ±m* (``equivalent``): the interval lies inside ``1 ± m`` (a ratio; default
  ±5 %) or ``± m`` in the unit (a difference, where :data:`ABSOLUTE_MARGINS` gives one, e.g.
  ±0.05 cores): two one-sided tests, each at the interval's level;
- *undecided*: with the runs (or rounds) per side that would decide it
  (:func:`advise`);
- *not decided*, no finding at all (:func:`set_aside_saturated`): a side has a run that left
  less than 5 % of the host's CPU idle (:func:`cnibench.report.data.saturated_runs`). Such a
  run measured a machine with no CPU to spare, not the datapath, so the contrast gets no
  p-value, no interval and no call, and it stays out of its question's family (Holm's
  correction runs over the contrasts that can make a claim).

The interval a line prints is the one that carries its call: Student's interval at the level
:func:`cnibench.stats.call_levels` gives (between 95 % and Bonferroni's for the question), which
excludes no change exactly when the corrected test calls a cost. No line can print an interval
that excludes no change beside "undecided", and "same within" is read off the same interval.
"""

from __future__ import annotations

import enum
import math
import warnings
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from cnibench import stats
from cnibench.report.verdict.measure import DEFAULT_MARGIN, DETECT_POWER, Scale
from cnibench.report.verdict.plan import ContrastKind, PlannedContrast

__all__ = [
    "ABSOLUTE_MARGINS",
    "Call",
    "advise",
    "call_of",
    "decide",
    "is_apart",
    "margin_of",
    "question_of",
    "question_text",
    "set_aside_saturated",
]

ABSOLUTE_MARGINS: Mapping[str, float] = {"cores": 0.05}
"""Margins of "same within" in a unit, for contrasts on the difference scale (a side near
zero, where a ratio means little): an idle node's CPU moving by less than 0.05 cores is no
cost a platform team plans for."""


class Call(enum.Enum):
    """What a verdict line decided, as every reader of the verdict (the matrix, a document's
    ``call`` facts) names it."""

    HIGHER = "higher"
    """A difference after the correction: the treatment above its control."""
    LOWER = "lower"
    """A difference after the correction: the treatment below its control."""
    SAME = "same"
    """The same within the line's margin."""
    UNDECIDED = "undecided"
    """Neither (or no test at all)."""
    SATURATED = "saturated"
    """A side ran on a saturated machine: no claim (:func:`set_aside_saturated`)."""


def call_of(row: Mapping[Any, Any]) -> Call:
    """The call of verdict line ``row`` (its ``saturated``, ``significant``, ``equivalent``,
    ``scale`` and ``estimate``, which is the ratio on the ratio scale)."""
    if int(row.get("saturated", 0) or 0):
        return Call.SATURATED
    if bool(row["significant"]):
        value = float(row["estimate"])
        above = value > 1.0 if row["scale"] == Scale.RATIO.value else value > 0.0
        return Call.HIGHER if above else Call.LOWER
    if bool(row["equivalent"]):
        return Call.SAME
    return Call.UNDECIDED


def question_of(planned: PlannedContrast) -> tuple[str, ...]:
    """The family ``planned`` belongs to: the question its line answers.

    A feature or option contrast: the pair of conditions on one configuration (every metric
    of it); a CNI contrast: the CNI against its reference within one scenario (every condition
    and metric); a split or an outcome: itself.
    """
    if planned.kind is ContrastKind.CNI:
        return (planned.scenario, planned.kind.value, planned.cni, planned.control_cni)
    return (
        planned.scenario,
        planned.kind.value,
        planned.cni,
        planned.control_cni,
        planned.treatment,
        planned.treatment_parameters,
        planned.control,
        planned.control_parameters,
    )


def question_text(planned: PlannedContrast) -> str:
    """The question in words, as a line names its contrast without the metric."""
    if planned.kind is ContrastKind.CNI:
        return f"{planned.scenario} {planned.cni} vs reference {planned.control_cni}"
    return planned.label


def margin_of(row: Mapping[str, Any], margin: float) -> float:
    """The margin of "same within" for ``row``: ``margin`` (relative) for a ratio, the unit's
    :data:`ABSOLUTE_MARGINS` entry for a difference, else NaN (no such claim)."""
    if row["scale"] == Scale.RATIO:
        return margin
    if row["scale"] == Scale.DIFFERENCE:
        return ABSOLUTE_MARGINS.get(str(row["unit"]), math.nan)
    return math.nan


def is_apart(row: Mapping[str, Any]) -> bool:
    """Whether the row's interval excludes "no difference" (its own test for splits)."""
    low, high = float(row["ci_low"]), float(row["ci_high"])
    if row.get("kind") == ContrastKind.OUTCOME or row.get("kind") == "outcome":
        return False
    if row["scale"] == Scale.SPLIT:
        p = float(row["p_value"])
        return math.isfinite(p) and p <= 1.0 - float(row["level"])
    null = 1.0 if row["scale"] == Scale.RATIO else 0.0
    return math.isfinite(low) and math.isfinite(high) and (low > null or high < null)


def _within(row: Mapping[str, Any], margin: float) -> bool:
    low, high = float(row["ci_low"]), float(row["ci_high"])
    if not (math.isfinite(margin) and math.isfinite(low) and math.isfinite(high)):
        return False
    if row["scale"] == Scale.RATIO:
        return 1.0 - margin <= low and high <= 1.0 + margin
    return -margin <= low and high <= margin


def _carry_call(row: dict[str, Any], to_level: float) -> None:
    """Move ``row``'s interval from its own level to ``to_level`` (the call's)."""
    level = float(row["level"])
    low, high = float(row["ci_low"]), float(row["ci_high"])
    if to_level == level or not (math.isfinite(low) and math.isfinite(high)):
        return
    if row["scale"] == Scale.RATIO:
        centre = math.log(float(row["estimate"]))
        low, high = stats.interval_at_level(
            centre, math.log(low), math.log(high), float(row["df"]), level=level, to_level=to_level
        )
        row.update(ci_low=math.exp(low), ci_high=math.exp(high))
    elif row["scale"] == Scale.DIFFERENCE:
        low, high = stats.interval_at_level(
            float(row["estimate"]), low, high, float(row["df"]), level=level, to_level=to_level
        )
        row.update(ci_low=low, ci_high=high)
    elif row["scale"] == Scale.PROPORTION and row.get("counts"):
        kc, nc, kt, nt = row["counts"]
        moved = stats.proportion_difference(kc, nc, kt, nt, level=to_level)
        row.update(ci_low=moved.low, ci_high=moved.high)


def advise(row: dict[str, Any], *, alpha: float, margin: float) -> None:
    """The effect this design detects and the runs per side that would decide ±``margin``,
    at ``alpha`` (the question's Bonferroni level, which Holm's step-down never needs more
    than) and power 0.8, from the run-to-run SD raised to its 80 % upper bound for the degrees
    of freedom it was estimated with (an SD from 5 runs comes out low half the time)."""
    sd, sd_df = float(row["sd"]), float(row["sd_df"])
    if not (math.isfinite(sd) and sd > 0.0 and math.isfinite(sd_df) and sd_df >= 1.0):
        return
    paired = bool(row["paired"])
    ratio = row["scale"] == Scale.RATIO
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", stats.DegenerateDataWarning)
            warnings.simplefilter("ignore", RuntimeWarning)
            if paired:
                pairs = int(row["n_treatment"])
                shift = stats.paired_detectable_effect(sd, pairs, alpha=alpha, power=DETECT_POWER)
            else:
                shift = stats.detectable_effect(
                    sd,
                    int(row["n_control"]),
                    int(row["n_treatment"]),
                    alpha=alpha,
                    power=DETECT_POWER,
                )
            row["detectable"] = math.expm1(shift) if ratio else shift
            if not math.isfinite(margin):
                return
            size = math.log1p(margin) if ratio else margin
            plan = stats.paired_runs_needed if paired else stats.runs_needed
            row["runs_needed"] = plan(sd, size, alpha=alpha, power=DETECT_POWER, df_sd=sd_df)
    except (ValueError, ArithmeticError):
        # Advice is a courtesy: a numerical failure of a power solve leaves it out, never
        # the line (the call above it is made already).
        return


def set_aside_saturated(row: dict[str, Any]) -> bool:
    """Whether ``row`` has a saturated run on a side (its ``saturated`` count); if so, drop
    its p-value and interval in place, so that nothing can call it (its estimate stays)."""
    if not int(row.get("saturated", 0)):
        return False
    row.update(p_value=math.nan, ci_low=math.nan, ci_high=math.nan)
    return True


def decide(
    measured: Sequence[tuple[PlannedContrast, dict[str, Any]]],
    *,
    level: float,
    margin: float | None,
) -> None:
    """Call every measured contrast, in place: ``p_adjusted`` (Holm within its question, of
    each p-value times its contrast's planned ``looks``: Bonferroni over the looks of runs
    until decided, :mod:`cnibench.stats.sequential`; 1 for a fixed design),
    ``question``, ``family_size``, ``call_level`` and the interval moved to it,
    ``significant``, ``margin``, ``equivalent``, and the advice (:func:`advise`); a contrast
    with a saturated run is set aside first (:func:`set_aside_saturated`): no call."""
    alpha = 1.0 - level
    relative = DEFAULT_MARGIN if margin is None else margin
    aside = [set_aside_saturated(m) for _, m in measured]
    looks = np.array([max(1, int(m.get("looks", 1))) for _, m in measured], dtype=np.int64)
    # Bonferroni over a contrast's planned looks (runs until decided: cnibench.stats.
    # sequential), then Holm within its question: K·p is what Holm corrects further.
    p_values = np.minimum(
        1.0, looks * np.array([float(m["p_value"]) for _, m in measured], dtype=np.float64)
    )
    families = [question_of(p) for p, _ in measured]
    adjusted = stats.family_holm(p_values, families)
    sizes = stats.family_sizes(p_values, families)
    # The level whose interval excludes no change exactly when K·p passes Holm, moved to
    # the raw p's scale: 1 - alpha·p/p_adj = 1 - (1 - holm's level)/K.
    levels = 1.0 - (1.0 - stats.call_levels(p_values, adjusted, level=level)) / looks
    for (planned, row), p_adj, size, to_level, saturated, k in zip(
        measured, adjusted, sizes, levels, aside, looks, strict=True
    ):
        row["kind"] = planned.kind
        row["looks"] = int(k)
        row["p_adjusted"] = float(p_adj)
        row["question"] = question_text(planned)
        row["family_size"] = int(size)
        if math.isfinite(to_level) and planned.kind is not ContrastKind.WEIGHTS:
            _carry_call(row, float(to_level))
            row["call_level"] = float(to_level)
        row["significant"] = bool(math.isfinite(p_adj) and p_adj <= alpha and is_apart(row))
        row["margin"] = margin_of(row, relative)
        row["equivalent"] = bool(
            not row["significant"]
            and not row["why_not"]
            and not saturated
            and _within(row, row["margin"])
        )
        if planned.kind is not ContrastKind.WEIGHTS and not saturated:
            advise(row, alpha=alpha / max(int(size), 1) / int(k), margin=float(row["margin"]))
