"""The verdict: each scenario's planned contrasts with intervals, corrected together.

One module per job: what is compared (:mod:`cnibench.report.verdict.plan`), the numbers of
each contrast and how its runs were taken (:mod:`cnibench.report.verdict.measure`), the
lines in words (:mod:`cnibench.report.verdict.words`, the numbers they print from
:mod:`cnibench.report.verdict.formatting`); each module's notes describe its own part.
:func:`verdict` plans, measures, corrects the contrasts together and words them.

Multiplicity
------------
Holm's step-down correction (:func:`cnibench.stats.holm_adjusted`) over all contrasts of one
verdict. Holm rather than Benjamini-Hochberg: every verdict line is a claim someone acts on
("the gateway costs 17 % throughput"), so the family-wise error rate is what should be
controlled (the chance that *any* line claims a difference that is not there), and Holm
controls it under any dependence between contrasts, which share control and reference runs.
Intervals are shown at their own 95 % level (simultaneous intervals from 2-3 runs would be
too wide to read).
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import numpy as np
import pandas as pd

from cnibench import stats
from cnibench.errors import ConfigError
from cnibench.report import design
from cnibench.report.data import LEVEL
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
    is_apart,
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
    "ContrastKind",
    "PlannedContrast",
    "Scale",
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
    "design",
    "sessions",
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
        interval lies within ``1 ± margin`` is "same within ±2 %" (two one-sided tests at
        ``(1 - level) / 2`` each). ``None``: no equivalence claims; "inconclusive" lines name
        the runs for ±5 %.
    scenarios:
        Registry with the declarations (default :data:`cnibench.scenarios.SCENARIOS`).

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
        ``ci_low``/``ci_high`` (NaN where there is none; none for a split); ``ratio`` (the
        estimate of a ratio row, NaN otherwise: the centre of its interval on the log
        scale); ``level``; ``p_value`` and ``p_adjusted`` (Holm's, over all rows with a
        p-value); ``effect_size`` (standardized: ``|log ratio|`` or ``|difference|`` over the
        pooled run-to-run SD, Cohen's h for proportions, Cohen's w for splits);
        ``detectable`` (the effect this n detects with power 0.8: relative for ratios, in
        ``unit`` for differences); ``runs_needed`` (runs per side for ±margin or ±5 %, or
        requests for a 5-point skew of a split at its number of runs; -1 when unknown, or for a
        split when only more runs would do); ``margin``; ``equivalent``;
        ``significant`` (``p_adjusted <= 1 - level`` and the interval excludes no
        difference); ``design`` (how the sides' runs were taken: ``interleaved``,
        ``sequential``, ``across sessions``, or ``unknown`` without run times) and
        ``sessions`` (the sessions the contrast draws on: ``"A"``, or ``"B vs A"``,
        treatment first, when the sides' sessions differ); and ``verdict`` (the line).
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
        df, reference=reference, scenarios=scenarios, notes=notes, references=references
    )
    rows = usable_rows(df)
    positions = design.run_positions(df)
    rows = rows.assign(
        _position=design.run_keys(rows).map(positions).astype(np.float64)
        if not positions.empty
        else np.nan
    )
    drift = Drift(rows, planned)
    measured = [(p, measure_contrast(p, rows, level, margin, drift)) for p in planned]
    adjusted = stats.holm_adjusted([m["p_value"] for _, m in measured]).tolist()
    records = []
    for (p, m), p_adj in zip(measured, adjusted, strict=True):
        m["p_adjusted"] = float(p_adj)
        m["kind"] = p.kind
        m["significant"] = bool(math.isfinite(p_adj) and p_adj <= 1.0 - level and is_apart(m))
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
                **{k: v for k, v in m.items() if k not in ("why_not", "detail", "kind")},
                "verdict": sentence(p, m),
            }
        )
    frame = pd.DataFrame(records, columns=list(VERDICT_COLUMNS))
    if not frame.empty:
        frame = frame.iloc[grouped_order(frame)].reset_index(drop=True)
    frame.attrs["notes"] = notes
    frame.attrs["reference"] = reference_cni(df, reference) if not df.empty else ""
    frame.attrs["references"] = references
    return frame
