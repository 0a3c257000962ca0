"""Tables of a report: one row per run, metrics as columns, then the average and std rows."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import pandas as pd

from cnibench.errors import ConfigError, InsufficientDataError
from cnibench.report.data import ok_runs

__all__ = [
    "AVG_ROW",
    "STD_ROW",
    "format_number",
    "markdown_table",
    "priority_outcomes",
    "table_runs",
]

AVG_ROW = "Avg"
STD_ROW = "Std Dev"


def table_runs(
    df: pd.DataFrame,
    scenario: str,
    condition: str,
    *,
    cni: str | None = None,
    metrics: Sequence[str] | None = None,
) -> pd.DataFrame:
    """Per-run table of one scenario and condition, then the mean and sample std of each metric.

    Parameters
    ----------
    df:
        Tidy results (:func:`cnibench.results.load_results`).
    scenario, condition:
        E.g. ``"egress"`` and ``"gateway-on"``.
    cni:
        The CNI; required when the selection holds several.
    metrics:
        Columns, in this order; default every metric in order of first appearance.

    Returns
    -------
    pandas.DataFrame
        Index ``"Run 1"`` ... ``"Run n"`` (successful runs by run time), then ``"Avg"`` and
        ``"Std Dev"`` (sample std, ddof=1; NaN with one run); columns ``"<metric> [<unit>]"``,
        values in the recorded unit. ``df.attrs["run_ids"]`` lists the run ids of the rows.
        Failed runs are not rows: they have no values (see the report's failed-runs section).

    Raises
    ------
    ConfigError
        If several CNIs match and ``cni`` is not given.
    InsufficientDataError
        If no successful run matches.
    """
    rows = ok_runs(df, scenario=scenario)
    rows = rows[rows["condition"] == condition]
    if cni is not None:
        rows = rows[rows["cni"] == cni]
    cnis = sorted(rows["cni"].unique())
    if len(cnis) > 1:
        raise ConfigError(
            f"scenario {scenario!r} condition {condition!r} has runs of several CNIs {cnis}: "
            "pass cni="
        )
    if rows.empty:
        raise InsufficientDataError(
            f"no successful run of scenario {scenario!r}, condition {condition!r}"
            + (f", CNI {cni!r}" if cni else "")
        )
    chosen = list(dict.fromkeys(rows["metric"])) if metrics is None else list(metrics)
    units = rows.drop_duplicates("metric").set_index("metric")["unit"].to_dict()
    order = rows.drop_duplicates("run_id").sort_values(["time", "run_id"])["run_id"].tolist()
    wide = rows.pivot_table(index="run_id", columns="metric", values="value", aggfunc="mean")
    wide = wide.reindex(index=order, columns=chosen)
    values = wide.to_numpy(dtype=np.float64)
    mean = np.nanmean(values, axis=0) if len(order) else np.full(len(chosen), math.nan)
    counts = np.sum(np.isfinite(values), axis=0)
    std = np.array(
        [
            float(np.nanstd(values[:, j], ddof=1)) if counts[j] > 1 else math.nan
            for j in range(len(chosen))
        ]
    )
    table = pd.DataFrame(
        np.vstack([values, mean, std]),
        index=[f"Run {i}" for i in range(1, len(order) + 1)] + [AVG_ROW, STD_ROW],
        columns=[
            f"{metric} [{units[metric]}]" if units.get(metric) else metric for metric in chosen
        ],
    )
    table.attrs["run_ids"] = order
    return table


PRIORITY_COLUMNS = (
    "cni",
    "case",
    "policies",
    "reference",
    "reference_winner",
    "observed",
    "runs_matching",
    "finding",
)


def _verdict(values: Sequence[float]) -> str:
    seen = {"allow" if v >= 0.5 else "deny" for v in values}
    return seen.pop() if len(seen) == 1 else "mixed"


def priority_outcomes(df: pd.DataFrame, *, scenario: str = "priority") -> pd.DataFrame:
    """ "Which policy won": per CNI and priority case, the reference and the observed outcome.

    Parameters
    ----------
    df:
        Tidy results holding the ``priority`` scenario's ``reachable`` and ``reference``
        metrics and its ``param_*`` columns.
    scenario:
        Scenario name.

    Returns
    -------
    pandas.DataFrame
        One row per (CNI, case) in order of first appearance, columns
        :data:`PRIORITY_COLUMNS`: the stacked policies (``"k8s-deny + securityops@5:deny"``),
        the reference outcome (``allow``/``deny``) and what decides it under the reference
        order, the observed outcome over the successful runs (``allow``, ``deny`` or
        ``mixed``), ``"k/n"`` runs matching the reference, and whether the CNI differs from
        the reference (a finding, such as seed 003's Calico blocking under a Kubernetes deny).
        Empty when there is no successful run.
    """
    rows = ok_runs(df, scenario=scenario)
    rows = rows[rows["metric"].isin(["reachable", "reference"])]
    if rows.empty:
        return pd.DataFrame(columns=list(PRIORITY_COLUMNS))
    out = []
    for (cni, condition), group in rows.groupby(["cni", "condition"], sort=False):
        observed = group[group["metric"] == "reachable"]["value"].tolist()
        reference = group[group["metric"] == "reference"]["value"].tolist()
        first = group.iloc[0]
        layers = str(first.get("param_layers", "none"))
        # Parameters read back from CSV may be strings.
        k8s_deny = str(first.get("param_kubernetes_deny", False)).lower() == "true"
        parts = ["k8s-deny"] if k8s_deny else []
        parts += [] if layers in ("", "none", "nan") else layers.split(",")
        matching = sum((o >= 0.5) == (r >= 0.5) for o, r in zip(observed, reference, strict=False))
        verdict = _verdict(observed) if observed else "–"
        expected = _verdict(reference) if reference else "–"
        out.append(
            {
                "cni": str(cni),
                "case": str(condition),
                "policies": " + ".join(parts) or "none",
                "reference": expected,
                "reference_winner": str(first.get("param_reference_winner", "")),
                "observed": verdict,
                "runs_matching": f"{matching}/{len(observed)}",
                "finding": verdict != expected,
            }
        )
    return pd.DataFrame(out, columns=list(PRIORITY_COLUMNS))


def format_number(value: float) -> str:
    """A table cell: 4 significant digits in plain or scientific notation, ``"–"`` for NaN."""
    if not math.isfinite(value):
        return "–"
    if value != 0 and (abs(value) >= 1e6 or abs(value) < 1e-3):
        return f"{value:.4g}"
    return f"{value:,.4g}" if abs(value) >= 1e4 else f"{value:.4g}"


def markdown_table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """A GitHub-flavoured Markdown table; ``|`` in cells is escaped."""

    def cell(text: str) -> str:
        return text.replace("|", "\\|").replace("\n", " ")

    lines = [
        "| " + " | ".join(cell(h) for h in headers) + " |",
        "|" + "|".join("---" for _ in headers) + "|",
    ]
    lines += ["| " + " | ".join(cell(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)
