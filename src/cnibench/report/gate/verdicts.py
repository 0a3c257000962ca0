"""The regression gate's vocabulary: its modes, each comparison's verdict and answer (the gate's
own answer is one of the same three), the family-wise level and the columns of its table."""

from __future__ import annotations

import enum

__all__ = [
    "COMPARISON_COLUMNS",
    "FAILING",
    "GATE_ALPHA",
    "MIN_CANDIDATE_RUNS",
    "Answer",
    "GateMode",
    "Verdict",
]


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
    """A candidate run of this condition failed, or recorded this metric at 0 where 0 is
    impossible (:func:`~cnibench.report.gate.directions.zero_is_impossible`): fails the gate,
    naming the runs, unless failed runs are allowed (then they are left out)."""
    MISSING = "MISSING"
    """The candidate lacks this metric of a baseline condition, or the whole condition: fails
    the gate, naming it, unless missing ones are allowed (then they are listed, not gated)."""
    TOO_FEW_RUNS = "TOO FEW RUNS"
    """Fewer than :data:`MIN_CANDIDATE_RUNS` candidate runs: the gate cannot decide on so few
    (undecided, naming the runs that would decide it)."""


class Answer(enum.StrEnum):
    """The gate's three-way answer for one (condition, metric), and for the whole comparison
    (:attr:`cnibench.report.compare.ResultComparison.answer`: regressed when any comparison
    is, else undecided when any is, else within threshold)."""

    REGRESSED = "regressed"
    """Worse than the threshold, and significantly so, or a failure (failed runs, a missing
    metric or condition): fails the gate."""
    WITHIN = "within threshold"
    """The interval's bound on the worse side clears the threshold (or, for identical runs,
    the exact ratio is within it): shown to be at most the threshold worse."""
    UNDECIDED = "undecided"
    """Neither: the ``decide`` column says what would decide it (more sessions or runs, or a
    session-to-session SD the data do not give)."""


class GateMode(enum.StrEnum):
    """What the gate asks of a metric."""

    REGRESSION = "regression"
    """Fail when the candidate is significantly worse (one-sided, Holm over the session at
    :data:`GATE_ALPHA`) and its estimate is worse than the threshold."""
    NON_INFERIORITY = "non-inferiority"
    """Fail unless the interval's bound on the worse side clears the threshold: the candidate
    must *show* it is at most the threshold worse."""


GATE_ALPHA = 0.01
"""Family-wise false-alarm rate of one compared session: the one-sided p-values of all its
(condition, metric) comparisons are Holm-corrected at this level."""

MIN_CANDIDATE_RUNS = 3
"""Fewest candidate runs of a (condition, metric) that can pass the gate."""

FAILING = (Verdict.REGRESSION, Verdict.NOT_SHOWN, Verdict.FAILED_RUNS, Verdict.MISSING)
"""Verdicts that fail the gate (answer regressed)."""

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
"""Columns of :func:`cnibench.report.compare.compare_results`, one row per matched
(condition, metric)."""
