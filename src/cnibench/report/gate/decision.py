"""The regression gate's decision: every (condition, metric) of the baseline compared with the
candidate's, Holm over the session, each answered regressed, within threshold or undecided,
and the false-alarm rate for the baselines at hand (:func:`compare_result_sets`,
:func:`compare_results`).

A comparison is decided only where the test includes the session-to-session variance: estimated
from two or more sessions of a side, or given (``session_sd``). With one session a side and no
given SD it is undecided, whatever the runs say, since the runs cannot bound a false alarm.
What the candidate lacks (a metric, a condition), a failed run and a 0 where 0 is impossible
fail the gate, each named, unless allowed.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from types import MappingProxyType
from typing import Any

import numpy as np
import numpy.typing as npt
import pandas as pd

from cnibench import stats
from cnibench.errors import ConfigError, InsufficientDataError
from cnibench.report.data import LEVEL
from cnibench.report.gate.directions import (
    DEFAULT_THRESHOLD,
    METRIC_DIRECTIONS,
    Direction,
    checked_threshold,
    gated_direction,
    metric_order,
    zero_is_impossible,
)
from cnibench.report.gate.interval import (
    MetricTest,
    cleared,
    compare_metric,
    decide_hint,
    limit_of,
    unknown_session_hint,
    verdict_of,
)
from cnibench.report.gate.loading import (
    MATCH_COLUMNS,
    ConditionKey,
    FailedRun,
    comparable_runs,
    condition_keys,
    condition_labels,
    failed_candidate_runs,
    values_by_metric,
)
from cnibench.report.gate.plan import VarianceComponents, variance_components
from cnibench.report.gate.rates import FalseAlarmRate, stated_false_alarm_rate
from cnibench.report.gate.rendering import ResultComparison
from cnibench.report.gate.verdicts import (
    COMPARISON_COLUMNS,
    FAILING,
    MIN_CANDIDATE_RUNS,
    Answer,
    GateMode,
    Verdict,
)
from cnibench.stats.ratios import session_variance

__all__ = ["compare_result_sets", "compare_results", "worst_first"]


def worst_first(frame: pd.DataFrame) -> pd.DataFrame:
    """Failing comparisons first, then undecided ones, then those within threshold; within
    each, by how much worse the estimate is (``n/a`` last)."""
    if frame.empty:
        return frame
    # log of the ratio turned so that larger is worse (NaN without a ratio).
    sign = np.where(frame["direction"] == Direction.HIGHER_IS_BETTER, -1.0, 1.0)
    with np.errstate(divide="ignore", invalid="ignore"):
        worsening = sign * np.log(frame["ratio"].to_numpy(dtype=np.float64))
    failing = frame["regression"].astype(bool)
    within = frame["answer"] == Answer.WITHIN
    key = pd.DataFrame(
        {
            "rank": np.where(failing, 0, np.where(within, 2, 1)),
            "better_first": -worsening,
        },
        index=frame.index,
    )
    order = key.sort_values(["rank", "better_first"], kind="stable", na_position="last").index
    return frame.loc[order].reset_index(drop=True)


def _checked_session_sd(session_sd: float | None) -> float | None:
    if session_sd is None:
        return None
    if isinstance(session_sd, bool) or not isinstance(session_sd, int | float):
        raise ConfigError(f"session_sd must be a fraction in [0, 1], got {session_sd!r}")
    if not 0.0 <= float(session_sd) <= 1.0:
        raise ConfigError(f"session_sd must be a fraction in [0, 1], got {session_sd!r}")
    return float(session_sd)


def _missing_row(
    key: ConditionKey,
    metric: str,
    direction: Direction,
    values: tuple[list[npt.NDArray[np.float64]], str],
    why: str,
    level: float,
) -> dict[str, Any]:
    """The row of a (condition, metric) the candidate lacks: it fails the gate, named."""
    base = np.concatenate(values[0]) if values[0] else np.zeros(0)
    positive = base[np.isfinite(base) & (base > 0)]
    row: dict[str, Any] = dict(zip(MATCH_COLUMNS, key, strict=True))
    row.update(
        metric=metric,
        unit=values[1],
        direction=direction.value,
        n_baseline=int(base.size),
        n_candidate=0,
        baseline_mean=float(np.exp(np.mean(np.log(positive)))) if positive.size else math.nan,
        candidate_mean=math.nan,
        ratio=math.nan,
        ci_low=math.nan,
        ci_high=math.nan,
        level=level,
        p_value=math.nan,
        p_adjusted=math.nan,
        verdict=Verdict.MISSING.value,
        regression=True,
        answer=Answer.REGRESSED.value,
        decide="",
        note=f"{why}: a missing one fails the gate unless allowed (--allow-missing)",
    )
    return row


def compare_result_sets(
    baseline: pd.DataFrame,
    candidate: pd.DataFrame,
    *,
    threshold: float = DEFAULT_THRESHOLD,
    level: float = LEVEL,
    mode: GateMode | str = GateMode.REGRESSION,
    allow_failed_runs: bool = False,
    allow_missing: bool = False,
    session_sd: float | None = None,
) -> ResultComparison:
    """Compare every condition and metric of the baseline with the candidate's.

    Parameters
    ----------
    baseline, candidate:
        Tidy results (:func:`cnibench.results.load_results`), e.g. of main and of a branch.
        Several baseline sessions (A/A runs of the same code) give each metric's
        session-to-session variance, which the intervals then include
        (:func:`cnibench.report.gate.plan.variance_components`).
    threshold:
        Regression threshold as a fraction in [0, 1] (0.05 = 5 %; see
        :func:`~cnibench.report.gate.directions.parse_threshold` for the text form).
    level:
        Confidence level of the printed intervals, in (0, 1).
    mode:
        :class:`GateMode`: ``"regression"`` (default) or ``"non-inferiority"``.
    allow_failed_runs:
        Leave out candidate runs that failed or recorded a metric at an impossible 0 (named in
        the note) instead of failing the gate on them.
    allow_missing:
        List the baseline's conditions and metrics the candidate lacks instead of failing the
        gate on them.
    session_sd:
        The session-to-session SD as a relative change (fraction, 0.03 = 3 %), for the
        metrics whose sessions do not estimate it (one session a side). Without it those
        comparisons are undecided: one baseline session cannot bound false alarms.

    Returns
    -------
    ResultComparison
        The table (see :func:`compare_results`), the gate's answer
        (:attr:`ResultComparison.answer`), the conditions only one side has and the
        false-alarm rate for these baselines.

    Raises
    ------
    InsufficientDataError
        A side has no successful verified run of a compared metric (and the candidate no
        failed run either), or no condition and metric is in both.
    ConfigError
        Bad ``threshold``, ``level``, ``mode`` or ``session_sd``.
    """
    chosen = checked_threshold(threshold)
    if not 0.0 < level < 1.0:
        raise ConfigError(f"level must be strictly between 0 and 1, got {level!r}")
    try:
        gate_mode = GateMode(mode)
    except ValueError:
        raise ConfigError(
            f"mode must be one of {', '.join(m.value for m in GateMode)}, got {mode!r}"
        ) from None
    given = _checked_session_sd(session_sd)
    base_rows, cand_rows = comparable_runs(baseline), comparable_runs(candidate)
    failures = failed_candidate_runs(candidate)
    for name, runs in (("baseline", base_rows), ("candidate", cand_rows)):
        if runs.empty and not (name == "candidate" and failures):
            raise InsufficientDataError(
                f"the {name} has no successful verified run of a compared metric"
                f" ({', '.join(METRIC_DIRECTIONS)}, cpu@<role>)"
            )
    base_keys = condition_keys(base_rows)
    cand_keys = list(
        dict.fromkeys([*condition_keys(cand_rows), *(failure.key for failure in failures)])
    )
    in_both = set(base_keys) & set(cand_keys)
    if not in_both:
        raise InsufficientDataError(
            "no condition is in both result sets (same scenario, CNI, condition and"
            f" parameters): baseline has {', '.join(condition_labels(base_keys).values())};"
            f" candidate has {', '.join(condition_labels(cand_keys).values())}"
        )
    failures = [failure for failure in failures if failure.key in in_both]
    recorded = set(condition_keys(candidate)) if not candidate.empty else set()
    base_values, cand_values = values_by_metric(base_rows), values_by_metric(cand_rows)
    pairs: list[tuple[ConditionKey, str, Direction]] = []
    lacking: list[tuple[ConditionKey, str, Direction, str]] = []
    for key in base_keys:
        run_failed = any(f.key == key and not f.metric for f in failures)
        for metric in sorted({m for k, m in base_values if k == key}, key=metric_order):
            direction = gated_direction(metric)
            if direction is None:
                continue
            if key not in in_both:
                why = (
                    "the candidate has no successful verified run of this condition"
                    if key in recorded
                    else "the candidate did not run this condition"
                )
                lacking.append((key, metric, direction, why))
            elif (
                (key, metric) in cand_values
                or run_failed
                or any(f.key == key and f.metric == metric for f in failures)
            ):
                pairs.append((key, metric, direction))
            else:
                why = f"the candidate recorded no {metric} in this condition"
                lacking.append((key, metric, direction, why))
    if not pairs and (allow_missing or not lacking):
        raise InsufficientDataError("the matched conditions share no compared metric")

    def usable(sessions: Sequence[npt.NDArray[np.float64]], metric: str) -> list[Any]:
        # A run at 0 where 0 is impossible is a failure (a candidate's is named, see
        # failures); the rest of the runs are what the statistics use.
        if zero_is_impossible(metric):
            return [v[v > 0] for v in sessions]
        return list(sessions)

    base_sessions = {(k, m): usable(base_values[(k, m)][0], m) for k, m, _ in pairs}
    cand_sessions = {
        (k, m): usable(cand_values[(k, m)][0], m) if (k, m) in cand_values else []
        for k, m, _ in pairs
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
    tests: list[MetricTest | None] = []
    for key, metric, direction in pairs:
        unit_b = base_values[(key, metric)][1]
        unit_c = cand_values[(key, metric)][1] if (key, metric) in cand_values else unit_b
        row: dict[str, Any] = dict(zip(MATCH_COLUMNS, key, strict=True))
        row.update(metric=metric, unit=unit_b, direction=direction.value)
        base_s = base_sessions[(key, metric)]
        cand_s = cand_sessions[(key, metric)] or [np.zeros(0, dtype=np.float64)]
        measured, test = compare_metric(
            base_s, cand_s, direction, level, components.get(metric), session_sd=given
        )
        row.update(measured)
        raw = (
            np.concatenate(cand_values[(key, metric)][0])
            if (key, metric) in cand_values
            else np.zeros(0)
        )
        base_used = np.concatenate(base_s) if base_s else np.zeros(0)
        total = (
            zero_is_impossible(metric)
            and raw.size > 0
            and float(raw.max()) <= 0.0
            and base_used.size > 0
        )
        if total:
            row["note"] = "TOTAL FAILURE: every candidate run is 0"
        dropped = int(sum(v.size for v in base_values[(key, metric)][0]) - base_used.size)
        if dropped:
            left_out = f"{dropped} baseline run{'s' if dropped != 1 else ''} at 0 left out"
            row["note"] = "; ".join(p for p in (row["note"], left_out) if p)
        row["_failures"] = [f for f in failures if f.key == key and f.metric in ("", metric)]
        row["_total"] = total
        if unit_b != unit_c:
            row.update(p_value=math.nan, ci_low=math.nan, note=f"units differ: {unit_c}")
            test = None
        rows.append(row)
        tests.append(test)
    adjusted = stats.holm_adjusted([row["p_value"] for row in rows]) if rows else np.zeros(0)
    comparisons = int(np.isfinite(np.asarray([row["p_value"] for row in rows])).sum())
    for row, test, p_adjusted in zip(rows, tests, adjusted.tolist(), strict=True):
        _answer(
            row,
            test,
            float(p_adjusted),
            threshold=chosen,
            level=level,
            mode=gate_mode,
            comparisons=comparisons,
            allow_failed_runs=allow_failed_runs,
        )
    if not allow_missing:
        rows += [_missing_row(k, m, d, base_values[(k, m)], why, level) for k, m, d, why in lacking]
    frame = pd.DataFrame(rows, columns=list(COMPARISON_COLUMNS))
    frame["threshold"] = chosen
    frame["level"] = level
    frame["limit"] = [
        limit_of(Direction(direction), chosen) for direction in frame["direction"].tolist()
    ]
    frame = worst_first(frame)
    frame["regression"] = frame["regression"].astype(bool)
    entered = [(k, m) for k, m, _ in pairs] or [(k, m) for k, m, _, _ in lacking]
    baseline_counts = [len(base_values[(k, m)][0]) for k, m in entered]
    baseline_sizes = [v.size for k, m in entered for v in base_values[(k, m)][0]]
    design = (max(baseline_counts), round(float(np.median(baseline_sizes))))
    tested = [(t, d) for t, (_, _, d) in zip(tests, pairs, strict=True) if t is not None]
    metrics = list(dict.fromkeys(m for _, m, _ in pairs))
    unknown = tuple(
        dict.fromkeys(m for t, (_, m, _) in zip(tests, pairs, strict=True) if _unknown(t))
    )
    rate = FalseAlarmRate(
        rate=None
        if unknown
        else stated_false_alarm_rate(
            [(t, d) for t, d in tested if t.session_known],
            threshold=chosen,
            level=level,
            mode=gate_mode,
            comparisons=comparisons,
        ),
        comparisons=comparisons,
        estimated=tuple(m for m in metrics if components[m].known),
        given=tuple(
            dict.fromkeys(
                m for t, (_, m, _) in zip(tests, pairs, strict=True) if t and t.given is not None
            )
        ),
        unknown=unknown,
        session_sd=given,
        baselines=design[0],
        runs=design[1],
        mode=gate_mode,
    )
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
        allow_missing=allow_missing,
        missing=tuple((k, m) for k, m, _, _ in lacking) if allow_missing else (),
        session_sd=given,
        false_alarm=rate,
    )


def _unknown(test: MetricTest | None) -> bool:
    """Whether a comparison has a test whose session-to-session variance is unknown."""
    return test is not None and not test.session_known


def _answer(
    row: dict[str, Any],
    test: MetricTest | None,
    p_adjusted: float,
    *,
    threshold: float,
    level: float,
    mode: GateMode,
    comparisons: int,
    allow_failed_runs: bool,
) -> None:
    """Fill ``row``'s verdict, answer and what would decide it (the second pass, once Holm has
    adjusted every p-value of the session)."""
    direction = Direction(row["direction"])
    own: list[FailedRun] = row.pop("_failures")
    total = bool(row.pop("_total"))
    low, high = row["ci_low"], row["ci_high"]
    verdict = verdict_of(direction, row["ratio"], low, high, threshold, mode, p_adjusted)
    answer, decide = Answer.UNDECIDED, ""
    if total:
        verdict, answer = Verdict.REGRESSION, Answer.REGRESSED
    elif test is None:
        if row["n_candidate"] < MIN_CANDIDATE_RUNS:
            verdict = Verdict.TOO_FEW_RUNS
            need = MIN_CANDIDATE_RUNS - row["n_candidate"]
            decide = (
                f"the gate cannot decide on fewer than {MIN_CANDIDATE_RUNS} candidate runs:"
                f" measure at least {need} more"
            )
        elif row["n_baseline"] < 2:
            decide = "measure at least 2 baseline runs"
        elif str(row["note"]).startswith("units differ"):
            decide = "nothing decides it until both sides record it in one unit"
        else:
            decide = "nothing decides it while a run is at 0"
    elif not test.session_known:
        # One session a side and no --session-sd: the runs alone cannot bound a false alarm,
        # so neither a regression nor "within" is decided. Non-inferiority's failure is: a
        # session variance of any size would only widen the interval.
        if not (mode is GateMode.NON_INFERIORITY and verdict is Verdict.NOT_SHOWN):
            alone = verdict is Verdict.REGRESSION
            verdict = verdict_of(
                direction, row["ratio"], low, high, threshold, GateMode.REGRESSION, math.nan
            )
            decide = unknown_session_hint(
                test,
                direction,
                threshold=threshold,
                level=level,
                comparisons=comparisons,
                regressed_alone=alone,
                within_alone=cleared(direction, low, high, threshold),
            )
        else:
            answer = Answer.REGRESSED
    elif verdict in (Verdict.REGRESSION, Verdict.NOT_SHOWN):
        answer = Answer.REGRESSED
    elif cleared(direction, low, high, threshold) or test.exact:
        answer = Answer.WITHIN
    else:
        decide = decide_hint(
            test, direction, threshold=threshold, level=level, comparisons=comparisons
        )
    if own and not total:
        named = ", ".join(
            f"{f.run_id} ({f.metric + ' ' if f.metric else ''}{f.reason})" for f in own
        )
        if allow_failed_runs:
            row["note"] = "; ".join(p for p in (f"left out: {named}", row["note"]) if p)
        else:
            verdict, answer, decide = Verdict.FAILED_RUNS, Answer.REGRESSED, ""
            row["note"] = (
                f"candidate run{'s' if len(own) != 1 else ''} {named}: a failed or zero run"
                " fails the gate unless failed runs are allowed (--allow-failed-runs)"
            )
    row.update(
        p_adjusted=p_adjusted,
        verdict=verdict.value,
        regression=verdict in FAILING,
        answer=answer.value,
        decide=decide,
    )


def compare_results(
    baseline: pd.DataFrame,
    candidate: pd.DataFrame,
    *,
    threshold: float = DEFAULT_THRESHOLD,
    level: float = LEVEL,
    mode: GateMode | str = GateMode.REGRESSION,
    allow_failed_runs: bool = False,
    allow_missing: bool = False,
    session_sd: float | None = None,
) -> pd.DataFrame:
    """The regression comparison of two result sets as a tidy DataFrame (notebook API).

    Parameters
    ----------
    baseline, candidate, threshold, level, mode, allow_failed_runs, allow_missing, session_sd:
        As for :func:`compare_result_sets`.

    Returns
    -------
    pandas.DataFrame
        One row per (condition, metric) of the baseline that the gate compares (and, unless
        allowed, one per metric the candidate lacks, verdict ``MISSING``), failing ones
        first, then undecided, then within threshold; columns
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
        ``answer`` (:class:`Answer`), ``decide`` (for an undecided one, what would decide it:
        the candidate sessions or runs, or a session SD) and ``note`` (e.g. the failed runs,
        named).

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
        allow_missing=allow_missing,
        session_sd=session_sd,
    ).frame
