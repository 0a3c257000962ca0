"""The verdict: each scenario's planned contrasts with intervals, each question decided.

One module per job: what is compared (:mod:`cnibench.report.verdict.plan`), the numbers of
each contrast and how its runs were taken (:mod:`cnibench.report.verdict.measure`), the
calls (:mod:`cnibench.report.verdict.decide`: a cost, same within ±m, or undecided with the
runs that would decide it), the lines in words (:mod:`cnibench.report.verdict.words`, the
numbers they print from :mod:`cnibench.report.verdict.formatting`); each module's notes
describe its own part. :func:`verdict` plans, measures, decides and words them.

Multiplicity
------------
Holm's step-down correction within each question (:func:`cnibench.report.verdict.decide.
question_of`: a feature on one configuration, one CNI against its reference in one scenario).
Holm rather than Benjamini-Hochberg: every verdict line is a claim someone acts on ("the
gateway costs 17 % throughput"), so the family-wise error rate of each question is what is
controlled, under any dependence between its contrasts, which share their control runs; and
within questions rather than over the report, so an answer does not depend on how many other
questions the report asks (``bench/coverage.py --sections families`` measures the rate and the
power of all three choices side by side). Each interval is printed at the level that carries
its call (:func:`cnibench.stats.call_levels`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np
import numpy.typing as npt
import pandas as pd

from cnibench.errors import ConfigError
from cnibench.report import design
from cnibench.report.data import HOST_IDLE_METRIC, LEVEL, saturated_runs
from cnibench.report.verdict.decide import Call, call_of, decide
from cnibench.report.verdict.formatting import interval_text
from cnibench.report.verdict.measure import (
    DEFAULT_MARGIN,
    RATIO_SPAN,
    Drift,
    Scale,
    measure_contrast,
)
from cnibench.report.verdict.measure import DRIFT_TOO_STRONG as DRIFT_TOO_STRONG
from cnibench.report.verdict.plan import (
    ContrastKind,
    PlannedContrast,
    plan_contrasts,
    reference_cni,
    usable_rows,
)
from cnibench.report.verdict.words import (
    CORRECTION,
    SUMMARY_LINES,
    grouped_order,
    sentence,
    verdict_lines,
    verdict_summary,
)
from cnibench.report.verdict.words import metric_words as metric_words
from cnibench.report.verdict.words import tested_count as tested_count
from cnibench.scenarios.base import Scenario

__all__ = [
    "CORRECTION",
    "DEFAULT_MARGIN",
    "RATIO_SPAN",
    "SUMMARY_LINES",
    "VERDICT_COLUMNS",
    "Call",
    "ContrastKind",
    "PlannedContrast",
    "Scale",
    "call_of",
    "interval_text",
    "plan_contrasts",
    "reference_cni",
    "verdict",
    "verdict_lines",
    "verdict_summary",
]

# DRIFT_TOO_STRONG, metric_words and tested_count are re-exported as well (``X as X``
# above): other report modules import them from here, outside ``__all__`` as before.

VERDICT_COLUMNS: tuple[str, ...] = (
    "scenario",
    "kind",
    "feature",
    "cni",
    "control_cni",
    "treatment",
    "control",
    "context",
    "treatment_parameters",
    "contrast",
    "metric",
    "unit",
    "scale",
    "n_treatment",
    "n_control",
    "treatment_mean",
    "control_mean",
    "estimate",
    "ratio",
    "ci_low",
    "ci_high",
    "level",
    "p_value",
    "p_adjusted",
    "effect_size",
    "detectable",
    "runs_needed",
    "margin",
    "equivalent",
    "significant",
    "question",
    "family_size",
    "call_level",
    "looks",
    "design",
    "pairing",
    "sessions",
    "saturated",
    "backend",
    "implementation",
    "verdict",
)
"""Columns of :func:`verdict`, one row per contrast."""


def verdict(
    df: pd.DataFrame,
    *,
    reference: str | None = None,
    level: float = LEVEL,
    margin: float | None = None,
    scenarios: Mapping[str, Scenario] | None = None,
    environments: pd.DataFrame | None = None,
) -> pd.DataFrame:
    """The planned contrasts of a result set as a tidy DataFrame, grouped by feature.

    Parameters
    ----------
    df:
        Tidy results (:func:`cnibench.results.load_results`).
    reference:
        CNI every other CNI is compared with (default: the first measured, i.e. the first
        ``--cni``).
    level:
        Confidence level of the intervals and of the corrected test, in (0, 1).
    margin:
        Equivalence margin as a fraction (0.02 = ±2 %, ``--margin 2%``): a ratio whose whole
        interval (the one that carries its call) lies within ``1 ± margin`` is "same within
        ±2 %" (two one-sided tests). ``None``: :data:`DEFAULT_MARGIN` (±5 %); a difference
        uses its unit's margin (:data:`cnibench.report.verdict.decide.ABSOLUTE_MARGINS`).
    scenarios:
        Registry with the declarations (default :data:`cnibench.scenarios.SCENARIOS`).
    environments:
        The results' environment fingerprints (:func:`cnibench.results.load_environments`),
        which hold each configuration's data-path settings as asked and as its cluster
        reported them: two configurations of one CNI that differ in such a setting besides
        the option compared are "not compared: differs in ..." (:func:`plan_contrasts`), a
        line with no number that stays out of its question's family; they also say what
        ran the lab's WireGuard (kernel or wireguard-go), which its lines then name.
        ``None``: no setting is known, option contrasts go by the labels alone, and the
        lab's WireGuard is named without its implementation.

    Returns
    -------
    pandas.DataFrame
        One row per contrast (:func:`plan_contrasts`), columns :data:`VERDICT_COLUMNS`:
        ``scenario``; ``kind`` (:class:`ContrastKind`); ``feature``; ``cni`` and
        ``control_cni``; ``treatment`` and ``control`` (condition ids); ``context``;
        ``treatment_parameters`` (the treatment condition's recorded parameters, JSON);
        ``contrast`` (how the line names it); ``metric`` and ``unit``; ``scale``
        (:class:`Scale`); ``n_treatment``/``n_control`` (every successful verified run;
        ``n_treatment`` counts runs for a split); ``treatment_mean``/``control_mean`` (the
        estimates compared: geometric means for a ratio, means for a difference, shares of
        yes for a proportion); ``estimate`` (the ratio, the difference in ``unit``, the
        difference of proportions, or a split's largest share error) and its interval
        ``ci_low``/``ci_high`` at ``call_level`` (NaN where there is none; none for a split);
        ``ratio`` (the estimate of a ratio row, NaN otherwise: the centre of its interval on
        the log scale); ``level`` (the family's); ``p_value`` and ``p_adjusted`` (Holm's
        within the contrast's ``question``, of ``family_size`` tested contrasts);
        ``effect_size`` (standardized: ``|log ratio|`` or ``|difference|`` over the pooled
        run-to-run SD, Cohen's h for proportions, Cohen's w for splits);
        ``detectable`` (the effect this n detects with power 0.8 at the question's corrected
        level: relative for ratios, in ``unit`` for differences); ``runs_needed`` (runs, or
        rounds where paired, per side for ±margin, from the SD's 80 % upper bound, or
        requests for a 5-point skew of a split at its number of runs; -1 when unknown, or for a
        split when only more runs would do); ``margin``; ``equivalent``;
        ``significant`` (``p_adjusted <= 1 - level``: its interval then excludes no
        difference); ``question``, ``family_size``, ``call_level``; ``looks`` (the analyses
        planned for the sides' runs: above 1 for a session run until decided, whose p-values
        are multiplied by it before Holm's correction, :mod:`cnibench.stats.sequential`);
        ``design`` (how the sides' runs were taken: ``interleaved``, ``sequential``,
        ``across sessions``, or ``unknown`` without run times);
        ``pairing`` (``"6 rounds, paired"`` where an interleaved contrast was estimated from
        its within-round differences, why not where a round lacked a side, else ``""``);
        ``sessions`` (the sessions the contrast draws on: ``"A"``, or ``"B vs A"``,
        treatment first, when the sides' sessions differ); ``saturated`` (how many of the
        sides' runs left less than 5 % of the host's CPU idle,
        :func:`cnibench.report.data.saturated_runs`: such a contrast is no finding, with no
        p-value or interval, and its line says why); ``backend`` (the treatment's, ``""``
        when not recorded); ``implementation`` (what ran the treatment's encryption as its
        sessions recorded it, :attr:`PlannedContrast.implementation`: the lab's ``"kernel"``
        or ``"wireguard-go"``, ``""`` when not recorded); and ``verdict`` (the line).
        Grouped by scenario, kind (feature, option, CNI, weights, outcome) and feature,
        each in order of first appearance; within a group by ``effect_size``, largest
        first, rows without a p-value last.
        ``attrs["notes"]`` lists what could not be compared and why (confounded pairs of
        configurations among them), ``attrs["reference"]`` the reference CNI asked for (or
        the first measured), ``attrs["references"]`` the reference chosen for each group of
        comparable configurations.

    Raises
    ------
    ConfigError
        Bad ``reference``, ``level`` or ``margin``, or unreadable parameters.

    Examples
    --------
    >>> from cnibench.results import load_results
    >>> from cnibench import report
    >>> table = report.verdict(load_results("results/"))  # doctest: +SKIP
    >>> table[["verdict", "p_adjusted"]]  # doctest: +SKIP
    """
    if isinstance(level, bool) or not isinstance(level, int | float) or not 0.0 < level < 1.0:
        raise ConfigError(f"level must be strictly between 0 and 1, got {level!r}")
    if margin is not None and (
        isinstance(margin, bool) or not isinstance(margin, int | float) or not 0.0 < margin < 1.0
    ):
        raise ConfigError(f"margin must be a fraction strictly between 0 and 1, got {margin!r}")
    notes: list[str] = []
    references: dict[str, str] = {}
    planned = plan_contrasts(
        df,
        reference=reference,
        scenarios=scenarios,
        notes=notes,
        references=references,
        environments=environments,
    )
    rows = usable_rows(df)
    positions = design.run_positions(df)
    rows = rows.assign(
        _position=design.run_keys(rows).map(positions).astype(np.float64)
        if not positions.empty
        else np.nan
    )
    rows = rows.assign(_saturated=_saturated_mask(df, rows))
    drift = Drift(rows, planned)
    measured = [(p, measure_contrast(p, rows, level, drift)) for p in planned]
    for p, m in measured:
        if p.not_compared:
            _set_aside_not_compared(m, p.not_compared)
    decide(measured, level=level, margin=margin)
    records = []
    for p, m in measured:
        records.append(
            {
                "scenario": p.scenario,
                "kind": p.kind.value,
                "feature": p.feature,
                "cni": p.cni,
                "control_cni": p.control_cni,
                "treatment": p.treatment,
                "control": p.control,
                "context": p.context,
                "treatment_parameters": p.treatment_parameters,
                "contrast": p.label,
                "metric": p.metric,
                "backend": p.backend,
                "implementation": p.implementation,
                **{k: v for k, v in m.items() if k not in ("why_not", "detail", "kind")},
                "verdict": _not_compared_line(p) if p.not_compared else sentence(p, m),
            }
        )
    frame = pd.DataFrame(records, columns=list(VERDICT_COLUMNS))
    if not frame.empty:
        frame = frame.iloc[grouped_order(frame)].reset_index(drop=True)
    frame.attrs["notes"] = notes
    frame.attrs["reference"] = reference_cni(df, reference) if not df.empty else ""
    frame.attrs["references"] = references
    return frame


def _set_aside_not_compared(row: dict[str, Any], why: str) -> None:
    """Drop every number of a contrast its plan holds back (:attr:`PlannedContrast.
    not_compared`), in place: no estimate, interval or p-value, so that no call is made and
    Holm's correction of its question runs without it; its run counts stay."""
    row.update(
        treatment_mean=math.nan,
        control_mean=math.nan,
        estimate=math.nan,
        ratio=math.nan,
        ci_low=math.nan,
        ci_high=math.nan,
        p_value=math.nan,
        effect_size=math.nan,
        detectable=math.nan,
        runs_needed=-1,
        sd=math.nan,
        why_not=why,
    )


def _not_compared_line(planned: PlannedContrast) -> str:
    """``"<contrast>: <metric> not compared: differs in masquerade (bpf vs iptables)"``."""
    return f"{planned.label}: {metric_words(planned.metric)} not compared: {planned.not_compared}"


def _saturated_mask(df: pd.DataFrame, rows: pd.DataFrame) -> npt.NDArray[np.bool_]:
    """Which of ``rows`` belong to a run that saturated its host
    (:func:`cnibench.report.data.saturated_runs` of ``df``); none without ``host_idle``."""
    if rows.empty or not (df["metric"] == HOST_IDLE_METRIC).any():
        return np.zeros(len(rows), dtype=bool)
    flagged = saturated_runs(df)
    if flagged.empty:
        return np.zeros(len(rows), dtype=bool)
    keys = set(design.run_keys(flagged))
    return design.run_keys(rows).isin(keys).to_numpy(dtype=bool)
