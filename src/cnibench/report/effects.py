"""How fast a change takes effect, per configuration: the time-to-effect metrics as
distributions.

A policy's enforcement and its removal (``policy_enforcement_time``, ``policy_removal_time``),
an egress gateway's takeover (``egress_gateway_takeover_time``) and a new Service's first
answer (``new_service_time``) are timed once per set-up or per run
(:mod:`cnibench.scenarios.effect`), so a condition holds one value per round or run. Their mean
says little (they are skewed, and a proxy that resyncs in batches gives two modes), and what a
platform team asks is "how long, usually, and at worst": :func:`time_to_effect` gives each
configuration's P50, P90 and P99 with a distribution-free interval
(:func:`cnibench.stats.percentile_interval`: open above where the runs are too few for that
percentile, with the runs that would close it), and the attempts that got through meanwhile in
a way the change rules out (``leaks``). :func:`effect_cells` turns the P50 and P90 into rows of
the feature matrix (:mod:`cnibench.report.matrix`), one per change and size (rules, Services),
one column per configuration.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from cnibench.report.data import ok_runs
from cnibench.scenarios.effect import EFFECT_CONSECUTIVE
from cnibench.stats.quantiles import percentile_interval, runs_to_bound
from cnibench.tools.effect_probe import PROBE_INTERVAL

__all__ = [
    "EFFECTS",
    "EFFECT_CAPTION",
    "EFFECT_COLUMNS",
    "MATRIX_PERCENTILES",
    "PERCENTILES",
    "Effect",
    "effect_cells",
    "effect_parts",
    "effect_table",
    "effect_text",
    "time_to_effect",
]

PERCENTILES = (50, 90, 99)
"""The percentiles stated for every change."""

MATRIX_PERCENTILES = (50, 90)
"""Those the feature matrix shows (P99 needs hundreds of runs before it has an upper bound:
it is in the report's table, open above)."""


@dataclass(frozen=True)
class Effect:
    """One timed change: its metric, its scenario, what it is in words and the condition
    parameter that sizes it."""

    metric: str
    scenario: str
    words: str
    size: str
    size_words: str

    def label(self, parameters: Mapping[str, object]) -> str:
        """``"policy takes effect (1000 rules)"``."""
        if self.size not in parameters:
            return self.words
        return f"{self.words} ({parameters[self.size]} {self.size_words})"


EFFECTS: Mapping[str, Effect] = {
    e.metric: e
    for e in (
        Effect("policy_enforcement_time", "policy", "policy takes effect", "rules", "rules"),
        Effect("policy_removal_time", "policy", "a removed policy lets through", "rules", "rules"),
        Effect("new_service_time", "baseline", "a new Service answers", "services", "Services"),
        Effect("egress_gateway_takeover_time", "egress", "the egress gateway takes over", "", ""),
    )
}
"""The time-to-effect metrics, by name."""

EFFECT_COLUMNS = (
    "scenario",
    "metric",
    "change",
    "cni",
    "percentile",
    "estimate",
    "low",
    "high",
    "level",
    "n",
    "runs_to_bound",
    "leaks_median",
    "leaks_max",
    "runs_with_leaks",
    "sessions",
)
"""Columns of :func:`time_to_effect`, one row per change, configuration and percentile."""


def _parameters(value: object) -> dict[str, object]:
    if isinstance(value, dict):
        return value
    try:
        parsed = json.loads(str(value))
    except ValueError:
        return {}
    return parsed if isinstance(parsed, dict) else {}


def time_to_effect(runs: pd.DataFrame, *, level: float = 0.95) -> pd.DataFrame:
    """Each timed change's percentiles per configuration (:data:`EFFECT_COLUMNS`).

    Parameters
    ----------
    runs:
        Tidy results (:func:`cnibench.results.load_results`); only successful runs with a
        finite value count, pooled over the sessions of each configuration (``sessions`` says
        how many).
    level:
        Each interval's confidence level (at least; the order statistics make it discrete).

    Returns
    -------
    pandas.DataFrame
        Rows in the order the results hold the changes. ``low``/``high`` are ``-inf``/``inf``
        where that end needs more runs than were made (``runs_to_bound``: how many close
        both ends). ``leaks_*``: the attempts that got through during the change, per run.
        Empty when no run timed a change.
    """
    if runs.empty or "metric" not in runs.columns:
        return pd.DataFrame(columns=list(EFFECT_COLUMNS))
    timed = ok_runs(runs[runs["metric"].isin(list(EFFECTS))])
    if timed.empty:
        return pd.DataFrame(columns=list(EFFECT_COLUMNS))
    leak_rows = ok_runs(runs[runs["metric"].isin([f"{m}_leaks" for m in EFFECTS])])
    timed["change"] = [
        EFFECTS[str(m)].label(_parameters(p))
        for m, p in zip(timed["metric"], timed["parameters"], strict=True)
    ]
    rows = []
    for (metric, change, cni), group in timed.groupby(["metric", "change", "cni"], sort=False):
        values = group["value"].to_numpy(dtype=np.float64)
        leaks = leak_rows[
            (leak_rows["metric"] == f"{metric}_leaks")
            & leak_rows["run_id"].isin(group["run_id"])
            & (leak_rows["cni"] == cni)
        ]["value"].to_numpy(dtype=np.float64)
        for percentile in PERCENTILES:
            interval = percentile_interval(values, percentile, level=level)
            rows.append(
                {
                    "scenario": EFFECTS[str(metric)].scenario,
                    "metric": metric,
                    "change": change,
                    "cni": cni,
                    "percentile": percentile,
                    "estimate": interval.estimate,
                    "low": interval.low,
                    "high": interval.high,
                    "level": level,
                    "n": interval.n,
                    "runs_to_bound": runs_to_bound(percentile, level=level),
                    "leaks_median": float(np.median(leaks)) if leaks.size else math.nan,
                    "leaks_max": float(leaks.max()) if leaks.size else math.nan,
                    "runs_with_leaks": int((leaks > 0).sum()),
                    "sessions": int(group["session_id"].nunique()),
                }
            )
    return pd.DataFrame(rows, columns=list(EFFECT_COLUMNS))


def _seconds(value: float) -> str:
    if value >= 10:
        return f"{value:.0f}"
    if value >= 1:
        return f"{value:.2f}"
    return f"{value:.3f}"


def effect_parts(row: Mapping[Any, Any]) -> tuple[str, str]:
    """A percentile and its interval, in seconds: ``("0.082", "0.071-0.093")``, or open
    above, ``("0.31", "≥ 0.12")``; open below too, ``("0.31", "")``."""
    estimate, low, high = (float(row[k]) for k in ("estimate", "low", "high"))
    if math.isfinite(low) and math.isfinite(high):
        return _seconds(estimate), f"{_seconds(low)}-{_seconds(high)}"
    if math.isfinite(low):
        return _seconds(estimate), f"≥ {_seconds(low)}"
    return _seconds(estimate), ""


def effect_text(row: Mapping[Any, Any]) -> str:
    """A percentile with its interval, in seconds: ``"0.082 (0.071-0.093)"``, or open above,
    ``"0.31 (≥ 0.12)"``; open below too: the estimate alone."""
    estimate, interval = effect_parts(row)
    return f"{estimate} ({interval})" if interval else estimate


EFFECT_FEATURE = "time to effect"
"""The ``feature`` of the matrix rows :func:`effect_cells` makes."""


def effect_cells(runs: pd.DataFrame) -> list[dict[str, str]]:
    """Rows of the feature matrix (:data:`cnibench.report.matrix.MATRIX_COLUMNS`) for the
    changes ``runs`` timed: one per change and :data:`MATRIX_PERCENTILES` percentile, each
    configuration's value with its interval in its column (state ``"time"``)."""
    table = time_to_effect(runs)
    table = table[table["percentile"].isin(MATRIX_PERCENTILES)]
    return [
        {
            "row": str(row["change"]),
            "scenario": str(row["scenario"]),
            "feature": EFFECT_FEATURE,
            "metric": f"P{int(row['percentile'])}",
            "unit": "s",
            "column": str(row["cni"]),
            "cell": effect_text(row),
            "runs": f"n{int(row['n'])}",
            "state": "time",
        }
        for row in table.to_dict("records")
    ]


def _leaks_text(group: pd.DataFrame) -> str:
    first = group.iloc[0]
    if not math.isfinite(float(first["leaks_median"])):
        return "not counted"
    if int(first["runs_with_leaks"]) == 0:
        return "none"
    return (
        f"median {float(first['leaks_median']):g}, at most {float(first['leaks_max']):g};"
        f" in {int(first['runs_with_leaks'])} of {int(first['n'])} runs"
    )


EFFECT_CAPTION = (
    "Seconds from the API server's acknowledgement of a change to the first of"
    f" {EFFECT_CONSECUTIVE} probes in a row ({PROBE_INTERVAL * 1000:g} ms apart, from the"
    " client pod) that show it; each percentile over the runs of"
    " that configuration with its distribution-free 95 % interval (≥: open above: P90 needs"
    f" {runs_to_bound(90)} runs to be bounded, P99 {runs_to_bound(99)}); leaked: probe"
    " attempts that got through during the change in a way it rules out (answered while"
    " denied, or by another backend)"
)
"""What the time-to-effect table says (its caption)."""


def effect_table(runs: pd.DataFrame) -> tuple[list[str], list[list[str]]]:
    """Header and rows of the report's time-to-effect table: each change on each
    configuration, its runs (and sessions), P50, P90 and P99 with their intervals, and the
    attempts that got through meanwhile. No rows when no run timed a change."""
    table = time_to_effect(runs)
    header = ["change", "configuration", "n", *(f"P{p} (s)" for p in PERCENTILES), "leaked"]
    rows = []
    for (change, cni), group in table.groupby(["change", "cni"], sort=False):
        first = group.iloc[0]
        sessions = int(first["sessions"])
        n = f"{int(first['n'])}" + (f" ({sessions} sessions)" if sessions > 1 else "")
        cells = {int(r["percentile"]): effect_text(r) for r in group.to_dict("records")}
        rows.append(
            [str(change), str(cni), n, *(cells[p] for p in PERCENTILES), _leaks_text(group)]
        )
    return header, rows
