r"""Regression gate between two result sets: is the candidate measurably worse than the baseline?

``cnibench compare BASELINE CANDIDATE`` and the pytest plugin's ``--cnibench-compare-to`` both call
:func:`compare_result_sets`; a notebook calls :func:`compare_results` for the same numbers as a
tidy DataFrame. Nothing here plots.

What is compared
----------------
Successful, verified runs with a finite value (:func:`comparable_runs`). Conditions are matched
by :data:`MATCH_COLUMNS` (scenario, CNI, condition id and parameters); CNI version, environment
and options may differ, since telling those apart is what a regression gate is for. Every gated
metric of every baseline condition is compared with the candidate's: those of
:data:`METRIC_DIRECTIONS`, the one place that says which metrics matter and whether higher or
lower is better, and per-node CPU ``cpu@<role>`` (:func:`gated_direction`). Metrics outside
them (counts, split shares, per-node receive rates, ``throughput_sender``) are not gated. A
metric or a whole condition the candidate lacks is ``MISSING`` and fails the gate
(``allow_missing`` lists it instead); conditions only the candidate has are listed.

The interval
------------
The ratio is candidate / baseline of the geometric means (of the session means, when a side
has several sessions), the centre of its interval on the log scale. When some side holds two
or more sessions, each metric's session-to-session and run-to-run variance components are
estimated from the sessions of every condition with that metric, both sides
(:func:`cnibench.report.gate.plan.variance_components`), and the interval and the one-sided
test use them (:func:`cnibench.report.gate.plan.difference_variance`: with equal runs per
session, Student's t on the session means). With one session a side the runs cannot say how
much sessions differ, so they cannot bound a false alarm: such a comparison is *undecided*
(its interval, Welch's t on the logarithms of the runs, shown for orientation) unless the
caller gives a session-to-session SD (``session_sd``, ``--session-sd 3%``), which then enters
the variance as known. (:func:`session_variance` and :func:`gate_interval`, the pooled
estimator used before issue 32, stay for callers; ``between`` keeps its figure for
orientation.)

The gate
--------
With threshold ``t`` (:func:`parse_threshold`) and :class:`GateMode`:

- ``regression`` (default): a metric *regressed* when its ratio is worse than the threshold
  (``ratio < 1 - t`` for higher-is-better metrics, ``> 1 + t`` for lower-is-better ones) and
  it is significantly worse: its one-sided p-value, Holm-corrected over every comparison of
  the session, is at most :data:`GATE_ALPHA` (1 %). The false-alarm rate this gives depends on
  the baselines; the headline states the one of the baselines at hand, computed from each
  comparison's own test (:func:`~cnibench.report.gate.rates.stated_false_alarm_rate`), or
  that one session a side cannot bound it (``bench/coverage.py`` measures it by simulation:
  :func:`measured_false_alarm_rate`).
- ``non-inferiority``: a metric fails unless its interval's bound on the worse side clears the
  threshold (``ci_low > 1 - t``, ``ci_high < 1 + t``): the candidate must show it is no worse.

Whatever the mode, the gate also fails on a candidate run that failed or measured 0 where 0 is
impossible (a rate, a latency, an RTT: :func:`~cnibench.report.gate.directions.zero_is_impossible`;
named; ``allow_failed_runs`` leaves them out instead) and on what the candidate lacks. Identical
runs on both sides are judged by the exact ratio. Every comparison gets an :class:`Answer`:
regressed, within threshold, or undecided with what would decide it (candidate sessions or
runs, more baseline sessions, or a session SD); fewer than :data:`MIN_CANDIDATE_RUNS`
candidate runs, fewer than 2 baseline runs, or CPU or memory at 0 (verdict ``n/a``) are
undecided. The gate's own answer (:attr:`ResultComparison.answer`) is regressed when any
comparison fails, else undecided when any is, else within threshold: ``cnibench compare``
exits 1, 3 or 0. :func:`plan_gate` says how many sessions detect a given loss.

Where it lives
--------------
This module is the gate's public face: it re-exports the names of the package
:mod:`cnibench.report.gate`, one module per job: ``directions`` (which metrics, which way,
the threshold), ``verdicts`` (modes, verdicts, answers), ``loading`` (result sets, usable and
failed runs, matching), ``interval`` and ``decision`` (the statistics and
:func:`compare_result_sets`), ``rendering`` (:class:`ResultComparison`'s text and Markdown),
``markdown`` and ``junit`` (the pull-request comment and the CI report), ``plan`` (variance
components and ``--plan``) and ``rates`` (false-alarm rates). The ratio of
geometric means and the pooled session variance are pure statistics, in
:mod:`cnibench.stats.ratios`.
"""

from __future__ import annotations

from cnibench.report.gate.decision import compare_result_sets, compare_results
from cnibench.report.gate.directions import (
    DEFAULT_THRESHOLD,
    METRIC_DIRECTIONS,
    PER_NODE_CPU,
    Direction,
    format_threshold,
    gated_direction,
    parse_session_sd,
    parse_threshold,
    zero_is_impossible,
)
from cnibench.report.gate.interval import GateInterval, gate_interval
from cnibench.report.gate.loading import (
    MATCH_COLUMNS,
    ConditionKey,
    FailedRun,
    comparable_runs,
    failed_candidate_runs,
    load_result_set,
)
from cnibench.report.gate.markdown import MARKDOWN_LIMIT
from cnibench.report.gate.plan import plan_gate
from cnibench.report.gate.rates import (
    FalseAlarmRate,
    MeasuredRate,
    measured_false_alarm_rate,
    stated_false_alarm_rate,
)
from cnibench.report.gate.rendering import ResultComparison, write_junit, write_markdown
from cnibench.report.gate.verdicts import (
    COMPARISON_COLUMNS,
    GATE_ALPHA,
    MIN_CANDIDATE_RUNS,
    Answer,
    GateMode,
    Verdict,
)
from cnibench.stats.ratios import (
    RatioInterval,
    SessionVariance,
    log_ratio_interval,
    session_variance,
)

__all__ = [
    "COMPARISON_COLUMNS",
    "DEFAULT_THRESHOLD",
    "GATE_ALPHA",
    "MARKDOWN_LIMIT",
    "MATCH_COLUMNS",
    "METRIC_DIRECTIONS",
    "MIN_CANDIDATE_RUNS",
    "PER_NODE_CPU",
    "Answer",
    "ConditionKey",
    "Direction",
    "FailedRun",
    "FalseAlarmRate",
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
    "parse_session_sd",
    "parse_threshold",
    "plan_gate",
    "session_variance",
    "stated_false_alarm_rate",
    "write_junit",
    "write_markdown",
    "zero_is_impossible",
]
