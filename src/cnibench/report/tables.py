"""Tables of a report: one row per run, metrics as columns, then the average and std rows."""

from __future__ import annotations

import math
from collections.abc import Collection, Sequence

import numpy as np
import pandas as pd
from rich import box
from rich.console import Console
from rich.table import Table
from rich.text import Text

from cnibench.errors import ConfigError, InsufficientDataError
from cnibench.records import RunStatus
from cnibench.report.data import (
    HOST_IDLE_METRIC,
    high_retransmit_runs,
    ok_runs,
    pair_rows,
    saturated_runs,
)
from cnibench.scenarios.base import with_companions
from cnibench.scenarios.warmup import SETTLE_WAIT, SETTLED

__all__ = [
    "AVG_ROW",
    "STD_ROW",
    "format_number",
    "markdown_table",
    "priority_outcomes",
    "retransmit_mark",
    "saturated_mark",
    "table_runs",
    "text_table",
    "warmup_label",
]

AVG_ROW = "Avg"
STD_ROW = "Std Dev"
PAIR_SPREAD_METRICS = ("throughput", "latency_avg")
"""Metrics of a ``--pairs`` run whose spread across its pairs :func:`table_runs` shows beside
the run's aggregate (``"throughput CV across pairs"``)."""
PAIR_SPREAD_SUFFIX = " CV across pairs"


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
        Columns, in this order; default every metric in order of first appearance, with
        ``retransmits`` and ``retransmit_rate`` right after ``throughput``
        (:data:`~cnibench.scenarios.base.THROUGHPUT_COMPANIONS`).

    Returns
    -------
    pandas.DataFrame
        Index ``"Run 1"`` ... ``"Run n"`` (successful runs by run time), then ``"Avg"`` and
        ``"Std Dev"`` (sample std, ddof=1; NaN with one run); columns ``"<metric> [<unit>]"``,
        values in the recorded unit. A run of several client/server pairs (``--pairs``) is
        one row with its aggregate; beside each of :data:`PAIR_SPREAD_METRICS` a column
        ``"<metric> CV across pairs"`` gives the spread of its pairs (sample std over mean,
        ddof=1; NaN with one pair). A run whose retransmit rate exceeds
        :data:`~cnibench.report.data.RETRANSMIT_RATE_BOUND` is marked in its label
        (``"Run 3 ⚠ retransmits 13 %"``, :func:`retransmit_mark`), and a run that left less
        than :data:`~cnibench.report.data.SATURATION_IDLE_BOUND` of the host's CPU idle too
        (``"Run 2 ⊘ saturated, 1.2 % CPU idle"``, :func:`saturated_mark`). A warm-up run
        of the condition (status ``warmup``: measured first on a new cluster) comes first,
        labelled as such (:func:`warmup_label`), and is in neither ``"Avg"`` nor
        ``"Std Dev"``. ``df.attrs["run_ids"]`` lists the run ids of the rows. Failed runs
        are not rows: they have no values (see the report's failed-runs section).

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
    recorded = list(dict.fromkeys(rows["metric"]))
    chosen = (
        [m for m in with_companions(recorded) if m in recorded]
        if metrics is None
        else list(metrics)
    )
    units = rows.drop_duplicates("metric").set_index("metric")["unit"].to_dict()
    order = rows.drop_duplicates("run_id").sort_values(["time", "run_id"])["run_id"].tolist()
    wide = rows.pivot_table(index="run_id", columns="metric", values="value", aggfunc="mean")
    wide = wide.reindex(index=order, columns=chosen)
    chosen, wide = _with_pair_spread(df, rows, chosen, wide, scenario, condition)
    values = wide.to_numpy(dtype=np.float64)
    mean = np.nanmean(values, axis=0) if len(order) else np.full(len(chosen), math.nan)
    counts = np.sum(np.isfinite(values), axis=0)
    std = np.array(
        [
            float(np.nanstd(values[:, j], ddof=1)) if counts[j] > 1 else math.nan
            for j in range(len(chosen))
        ]
    )
    high = (
        high_retransmit_runs(rows).set_index("run_id")["retransmit_rate"].to_dict()
        if "retransmit_rate" in recorded
        else {}
    )
    busy = (
        saturated_runs(rows).set_index("run_id")[HOST_IDLE_METRIC].to_dict()
        if HOST_IDLE_METRIC in recorded
        else {}
    )
    labels = [
        " ".join(
            [
                f"Run {i}",
                *([retransmit_mark(high[run])] if run in high else []),
                *([saturated_mark(busy[run])] if run in busy else []),
            ]
        )
        for i, run in enumerate(order, start=1)
    ]
    warm_ids, warm_labels, warm_values = _warmup_rows(df, scenario, condition, cni, chosen)
    table = pd.DataFrame(
        np.vstack([warm_values, values, mean, std]),
        index=[*warm_labels, *labels, AVG_ROW, STD_ROW],
        columns=[
            f"{metric} [{units[metric]}]" if units.get(metric) else metric for metric in chosen
        ],
    )
    table.attrs["run_ids"] = [*warm_ids, *order]
    return table


def warmup_label(settle_wait: float | None = None, settled: bool | None = None) -> str:
    """The row label of a warm-up run in :func:`table_runs`, with the settle wait before it
    when there was one (s).

    Examples
    --------
    >>> warmup_label()
    'Warm-up, not counted'
    >>> warmup_label(7.2, True), warmup_label(60.4, False)
    ('Warm-up, not counted (settled in 7 s)', 'Warm-up, not counted (not settled in 60 s)')
    """
    label = "Warm-up, not counted"
    if settle_wait is None or not math.isfinite(settle_wait):
        return label
    how = "settled" if settled else "not settled"
    return f"{label} ({how} in {settle_wait:.0f} s)"


def _warmup_rows(
    df: pd.DataFrame, scenario: str, condition: str, cni: str | None, chosen: Sequence[str]
) -> tuple[list[str], list[str], np.ndarray]:
    """The warm-up runs of one condition for :func:`table_runs`: their ids, labels and values
    of ``chosen`` (NaN where a failed warm-up has none)."""
    mask = (
        (df["status"] == RunStatus.WARMUP)
        & (df["scenario"] == scenario)
        & (df["condition"] == condition)
    )
    if cni is not None:
        mask &= df["cni"] == cni
    if "pair" in df.columns:
        mask &= df["pair"].isna().to_numpy(dtype=bool)
    rows = df[mask]
    if rows.empty:
        return [], [], np.empty((0, len(chosen)))
    ids = rows.drop_duplicates("run_id").sort_values(["time", "run_id"])["run_id"].tolist()
    wide = rows.pivot_table(index="run_id", columns="metric", values="value", aggfunc="mean")
    wide = wide.reindex(index=ids)  # a failed warm-up has no value but is a row

    def cell(run: str, metric: str) -> float:
        return float(wide[metric].get(run, math.nan)) if metric in wide.columns else math.nan

    labels = [warmup_label(cell(run, SETTLE_WAIT), cell(run, SETTLED) >= 0.5) for run in ids]
    values = wide.reindex(columns=list(chosen)).to_numpy(dtype=np.float64)
    return ids, labels, values


def _with_pair_spread(
    df: pd.DataFrame,
    rows: pd.DataFrame,
    chosen: list[str],
    wide: pd.DataFrame,
    scenario: str,
    condition: str,
) -> tuple[list[str], pd.DataFrame]:
    """``chosen`` and ``wide`` with a ``"<metric> CV across pairs"`` column after each of
    :data:`PAIR_SPREAD_METRICS` whose runs (``rows``' run ids) recorded per-pair values."""
    pairs = pair_rows(df)
    if pairs.empty:
        return chosen, wide
    pairs = pairs[
        (pairs["status"] == "ok")
        & (pairs["scenario"] == scenario)
        & (pairs["condition"] == condition)
        & pairs["run_id"].isin(rows["run_id"])
    ]
    out_columns: list[str] = []
    for metric in chosen:
        out_columns.append(metric)
        per_pair = pairs[pairs["metric"] == metric]
        if metric not in PAIR_SPREAD_METRICS or per_pair.empty:
            continue
        spread = per_pair.groupby("run_id")["value"].agg(_coefficient_of_variation)
        name = metric + PAIR_SPREAD_SUFFIX
        wide = wide.assign(**{name: spread.reindex(wide.index)})
        out_columns.append(name)
    return out_columns, wide[out_columns]


def _coefficient_of_variation(values: pd.Series) -> float:
    """Sample std (ddof=1) over the mean; NaN for one value or a mean of 0."""
    array = values.to_numpy(dtype=np.float64)
    mean = float(np.mean(array)) if len(array) else math.nan
    if len(array) < 2 or mean == 0:
        return math.nan
    return float(np.std(array, ddof=1)) / mean


def retransmit_mark(rate: float) -> str:
    """The mark of a run whose retransmit ``rate`` (a ratio) exceeds
    :data:`~cnibench.report.data.RETRANSMIT_RATE_BOUND`: ``"⚠ retransmits 13 %"``
    (``"⚠ retransmits 1.4 %"`` below 10 %).

    Examples
    --------
    >>> retransmit_mark(0.1304), retransmit_mark(0.0142)
    ('⚠ retransmits 13 %', '⚠ retransmits 1.4 %')
    """
    percent = 100.0 * rate
    return f"⚠ retransmits {percent:.0f} %" if percent >= 10 else f"⚠ retransmits {percent:.1f} %"


def saturated_mark(idle: float) -> str:
    """The mark of a run whose host had less than
    :data:`~cnibench.report.data.SATURATION_IDLE_BOUND` of its CPU idle (``idle`` a ratio):
    ``"⊘ saturated, 1.2 % CPU idle"``.

    Examples
    --------
    >>> saturated_mark(0.012), saturated_mark(0.0)
    ('⊘ saturated, 1.2 % CPU idle', '⊘ saturated, 0.0 % CPU idle')
    """
    return f"⊘ saturated, {100.0 * idle:.1f} % CPU idle"


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


_PREFIXES = ((1e12, "T"), (1e9, "G"), (1e6, "M"), (1e4, "k"))
"""SI prefixes of a table cell, largest first; below 10,000 a number is written whole."""


def format_number(value: float) -> str:
    """The one way cnibench writes a number in a table or a summary line.

    Four significant digits, with an SI prefix from 10,000 up (``16.43G``, ``12.35k``), so a
    column of bits/s or requests/s reads without counting digits; a whole number without
    decimals (``62``, ``7786``); a fraction with its trailing zeros kept, so a column of shares
    or ratios lines up (``0.6000``, ``1.000``); ``"–"`` for NaN or infinity. The unit is the
    caller's (a column header or a suffix).

    Examples
    --------
    >>> [format_number(v) for v in (1.643e10, 12345.0, 7786.0, 0.6, 1.0004, float("nan"))]
    ['16.43G', '12.35k', '7786', '0.6000', '1.000', '–']
    """
    if not math.isfinite(value):
        return "–"
    # The prefix follows the number as printed: 9999.5 is written 10.00k, not 1.000e+04.
    magnitude = abs(float(f"{value:.4g}"))
    if magnitude >= 1e15:
        return _significant(value)
    for threshold, prefix in _PREFIXES:
        if magnitude >= threshold:
            return _significant(value / (1e3 if prefix == "k" else threshold)) + prefix
    # Whole up to floating-point noise: the geometric mean of equal runs of 900 is 900.0000000001.
    if abs(value - round(value)) <= 1e-9 * max(1.0, abs(value)):
        return str(round(value))
    return _significant(value)


def _significant(value: float) -> str:
    """Four significant digits, trailing zeros kept, never a trailing point."""
    return f"{value:#.4g}".rstrip(".").replace(".e", "e")


def markdown_table(
    headers: Sequence[str], rows: Sequence[Sequence[str]], *, right: Collection[int] = ()
) -> str:
    """A GitHub-flavoured Markdown table, laid out by rich; ``|`` in a cell is escaped.

    Cells are taken as text (no rich markup), whatever brackets they hold. Columns ``right``
    (indexes) are right-aligned, in the raw text and, by ``---:``, where the Markdown is shown.
    """
    table = Table(box=box.MARKDOWN, show_edge=True, pad_edge=True)
    for index, header in enumerate(headers):
        table.add_column(
            Text(_markdown_cell(header)), justify="right" if index in right else "left"
        )
    for row in rows:
        table.add_row(*(Text(_markdown_cell(cell)) for cell in row))
    header, separator, *body = _rendered(table).split("\n")
    dashes = separator.split("|")
    for index in right:
        dashes[index + 1] = dashes[index + 1][:-1] + ":"
    return "\n".join([header, "|".join(dashes), *body])


def text_table(
    headers: Sequence[str], rows: Sequence[Sequence[str]], *, right: Collection[int] = ()
) -> str:
    """A plain-text table for a terminal or a log, laid out by rich: a header line, then one
    line per row, columns ``right`` (indexes) right-aligned; nothing is cut or wrapped."""
    table = Table(box=None, show_edge=False, pad_edge=False, padding=(0, 2, 0, 0))
    for index, header in enumerate(headers):
        table.add_column(Text(header), justify="right" if index in right else "left", no_wrap=True)
    for row in rows:
        table.add_row(*(Text(cell) for cell in row))
    return _rendered(table)


def _markdown_cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _rendered(table: Table) -> str:
    """The table as plain text, as wide as it needs (no terminal width, colour or markup)."""
    console = Console(width=100_000, color_system=None, highlight=False, soft_wrap=True)
    with console.capture() as captured:
        console.print(table)
    lines = [line.rstrip() for line in captured.get().splitlines()]
    return "\n".join(line for line in lines if line)
