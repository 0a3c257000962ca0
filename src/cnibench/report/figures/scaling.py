"""Scaling figures: a metric's estimate and interval against a swept parameter, the number of
policy rules (:func:`figure_policy_scaling`) or of client pods (:func:`figure_pod_scaling`), one
line per CNI and other varying parameter (:func:`scaling_summary`), one panel per metric.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from cnibench import stats
from cnibench.errors import ConfigError, InsufficientDataError
from cnibench.report.data import LEVEL, metric_unit, ok_runs
from cnibench.report.figures.common import (
    LEGEND_LABEL_WIDTH,
    _color,
    _outside_legend,
    _param_value,
    _value_axis,
    keep_axes_wide,
    new_figure,
)
from cnibench.report.labels import shorten_cni_labels, wrap_label


def scaling_summary(
    df: pd.DataFrame,
    *,
    x: str,
    metric: str,
    scenario: str = "policy",
    level: float = LEVEL,
) -> pd.DataFrame:
    """Estimate and interval of ``metric`` per line and x level, for a scaling figure: the
    same :func:`cnibench.stats.summarize_runs` as the bars, table and verdict.

    Parameters
    ----------
    df:
        Tidy results.
    x:
        Parameter on the x axis, e.g. ``"rules"`` or ``"clients"`` (column ``param_<x>``).
    metric:
        E.g. ``"throughput"`` (bits/s) or ``"latency_mean"`` (ms).
    scenario:
        Scenario to take the rows from.
    level:
        Confidence level.

    Returns
    -------
    pandas.DataFrame
        Columns ``line`` (CNI plus every other parameter that varies, e.g. ``"vxlan
        engine=nftables"``), ``x``, ``n``, ``mean``, ``ci_low``, ``ci_high``; sorted by line and x.

    Raises
    ------
    ConfigError
        If ``param_<x>`` is not a column.
    InsufficientDataError
        If no successful run has the scenario and metric.
    """
    column = f"param_{x}"
    if column not in df.columns:
        raise ConfigError(f"no parameter {x!r} in the results (no column {column})")
    rows = ok_runs(df, scenario=scenario, metric=metric)
    rows = rows[rows[column].notna()]
    if rows.empty:
        raise InsufficientDataError(
            f"no successful run of scenario {scenario!r} has metric {metric!r} and {x!r}"
        )
    others = [
        name
        for name in sorted(rows.columns)
        if name.startswith("param_")
        and name != column
        and rows[name].astype(str).nunique(dropna=False) > 1
    ]
    keys = rows["cni"].astype(str)
    for name in others:
        keys = keys + " " + name[len("param_") :] + "=" + rows[name].map(_param_value)
    rows = rows.assign(_line=keys, _x=rows[column].astype(float))
    result = []
    for (line, level_x), group in rows.groupby(["_line", "_x"], sort=True):
        values = group["value"].to_numpy(dtype=np.float64)
        summary = stats.summarize_runs(values, level=level)
        result.append(
            {
                "line": str(line),
                "x": float(level_x),
                "n": int(values.size),
                "mean": summary.mean,
                "ci_low": summary.low,
                "ci_high": summary.high,
            }
        )
    return pd.DataFrame(result)


POLICY_SCALING_METRICS: tuple[str, ...] = (
    "new_connections_per_second",
    "throughput",
    "latency_mean",
)
"""Panels of a scaling figure by default, those the results hold: the connection rate first,
as the policy scenario states it (rules cost mostly new connections, through conntrack)."""


def figure_policy_scaling(
    df: pd.DataFrame,
    *,
    x: str = "rules",
    metrics: Sequence[str] | None = None,
    scenario: str = "policy",
    title: str | None = None,
) -> Figure:
    """New connections/s, throughput and latency versus the number of policy rules, one line
    per CNI and other varying parameter.

    Parameters
    ----------
    df:
        Tidy results with a ``param_<x>`` column.
    x:
        ``"rules"`` (network-policy rules) or ``"clients"`` (pod scaling, see
        :func:`figure_pod_scaling`).
    metrics:
        One panel per metric, one above the other; default those of
        :data:`POLICY_SCALING_METRICS` that the scenario's successful runs recorded
        (``new_connections_per_second`` in 1/s, ``throughput`` in bits/s, ``latency_mean``
        in ms).
    scenario:
        Scenario to plot.
    title:
        Figure title.

    Returns
    -------
    matplotlib.figure.Figure
        Per panel, one line with markers and 95 % error bars per line key of
        :func:`scaling_summary` (CNI plus the other varying parameters such as the engine),
        coloured alike in every panel; y = geometric mean of the successful runs at each x
        (their mean if one is not positive). The legend names each line by the CNI's name and
        the options that differ among the lines (:func:`cnibench.report.labels.shorten_cni_labels`).

    Raises
    ------
    ConfigError
        If ``param_<x>`` is not a column.
    InsufficientDataError
        If a metric asked for, or every default one, has no successful run.
    """
    if f"param_{x}" not in df.columns:
        raise ConfigError(f"no parameter {x!r} in the results (no column param_{x})")
    if metrics is None:
        recorded = set(ok_runs(df, scenario=scenario)["metric"])
        metrics = [metric for metric in POLICY_SCALING_METRICS if metric in recorded]
        if not metrics:
            raise InsufficientDataError(
                f"no successful run of scenario {scenario!r} has any of {POLICY_SCALING_METRICS}"
            )
    panels = [
        (metric, scaling_summary(df, x=x, metric=metric, scenario=scenario)) for metric in metrics
    ]
    lines = sorted({str(line) for _, summary in panels for line in summary["line"]})
    cnis = [line.split(" ", 1)[0] for line in lines]
    short = shorten_cni_labels(cnis)
    names = {
        line: wrap_label(" ".join([short[cni], *line.split(" ")[1:]]), LEGEND_LABEL_WIDTH)
        for line, cni in zip(lines, cnis, strict=True)
    }
    figure = new_figure(8.0, 1.0 + 2.8 * len(panels))
    axes = figure.subplots(len(panels), 1, squeeze=False, sharex=True)[:, 0]
    handles: dict[str, Any] = {}
    for ax, (metric, summary) in zip(axes, panels, strict=True):
        unit = metric_unit(df, metric)
        for line, group in summary.groupby("line", sort=True):
            means = group["mean"].to_numpy(dtype=float)
            low = group["ci_low"].to_numpy(dtype=float)
            high = group["ci_high"].to_numpy(dtype=float)
            yerr = np.vstack([np.nan_to_num(means - low), np.nan_to_num(high - means)])
            handles[str(line)] = ax.errorbar(
                group["x"],
                means,
                yerr=yerr,
                marker="o",
                capsize=3,
                color=_color(lines.index(str(line))),
                label=str(line),
            )
        _value_axis(ax, metric, unit, summary[["mean", "ci_high"]].to_numpy(dtype=float))
        ax.grid(alpha=0.3)
    axes[-1].set_xlabel(f"number of {x}")
    # Every panel has the same lines (CNI and parameters), so one legend names them all.
    _outside_legend(
        figure,
        [handles[line] for line in lines if line in handles],
        [names[line] for line in lines if line in handles],
    )
    figure.suptitle(title or f"{scenario}: scaling with the number of {x}")
    return keep_axes_wide(figure)


def figure_pod_scaling(
    df: pd.DataFrame,
    *,
    metrics: Sequence[str] | None = None,
    scenario: str = "policy",
    title: str | None = None,
) -> Figure:
    """New connections/s, throughput and latency versus the number of client pods
    (``param_clients``).

    Same as :func:`figure_policy_scaling` with ``x="clients"``.
    """
    return figure_policy_scaling(df, x="clients", metrics=metrics, scenario=scenario, title=title)
