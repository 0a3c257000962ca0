"""Figures of request-response times: a histogram on a logarithmic time axis with a summary
table (:func:`figure_rr_histogram`) and the empirical CDF per CNI (:func:`figure_rr_ecdf`).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd
from matplotlib.figure import Figure
from matplotlib.lines import Line2D

from cnibench import stats
from cnibench.errors import ConfigError, InsufficientDataError
from cnibench.report.data import group_label, request_time_summary
from cnibench.report.figures.common import (
    SMALL_PT,
    TITLE_PT,
    _color,
    _outside_legend,
    keep_axes_wide,
    new_figure,
)
from cnibench.report.labels import shorten_cni_labels


def _time_groups(times: pd.DataFrame) -> list[tuple[str, np.ndarray[Any, Any]]]:
    for column in ("cni", "condition", "time_us"):
        if column not in times.columns:
            raise ConfigError(f"request times need a {column!r} column (load_request_times)")
    if times.empty:
        raise InsufficientDataError("no request times to plot")
    return [
        (group_label(str(cni), str(condition)), group["time_us"].to_numpy(dtype=np.float64))
        for (cni, condition), group in times.groupby(["cni", "condition"], sort=False)
    ]


def figure_rr_histogram(times: pd.DataFrame, *, bins: int = 60, title: str | None = None) -> Figure:
    """Histogram of request-response times on a logarithmic time axis, with summary table.

    Parameters
    ----------
    times:
        From :func:`cnibench.report.load_request_times` (``cni``, ``condition``, ``time_us``).
    bins:
        Number of log-spaced bins over the range of all groups.
    title:
        Figure title.

    Returns
    -------
    matplotlib.figure.Figure
        One step outline (``StepPatch``) of request counts per (CNI, condition) over shared
        log-spaced bins (:func:`cnibench.stats.histogram`), and under it a table of count, mean,
        min, max and std in µs (:func:`cnibench.stats.describe`).
    """
    groups = _time_groups(times)
    every = np.concatenate([values for _, values in groups])
    edges = stats.histogram(every, bins=bins, log=True).edges
    figure = new_figure(8.0, 4.8 + 0.3 * len(groups))
    ax, table_ax = figure.subplots(
        2, 1, gridspec_kw={"height_ratios": [4.0, 0.6 + 0.3 * len(groups)]}
    )
    for index, (label, values) in enumerate(groups):
        histogram = stats.histogram(values, bins=edges.tolist())
        ax.stairs(
            histogram.counts, histogram.edges, color=_color(index), label=label, linewidth=1.5
        )
    ax.set_xscale("log")
    ax.set_xlabel("request time [µs]")
    ax.set_ylabel("requests per bin")
    ax.grid(alpha=0.3)
    _outside_legend(figure, *ax.get_legend_handles_labels())
    ax.set_title(title or "Request-response time histogram")
    summary = request_time_summary(times)
    cell_text = [
        [
            group_label(str(row.cni), str(row.condition)),
            f"{int(str(row.count)):d}",
            f"{float(str(row.mean)):.1f}",
            f"{float(str(row.min)):.1f}",
            f"{float(str(row.max)):.1f}",
            "n/a" if math.isnan(float(str(row.std))) else f"{float(str(row.std)):.1f}",
        ]
        for row in summary.itertuples()
    ]
    table_ax.axis("off")
    table = table_ax.table(
        cellText=cell_text,
        colLabels=["group", "count", "mean µs", "min µs", "max µs", "std µs"],
        loc="center",
        bbox=(0.0, 0.0, 1.0, 1.0),
    )
    table.set_fontsize(SMALL_PT)
    return keep_axes_wide(figure)


def figure_rr_ecdf(times: pd.DataFrame, *, title: str | None = None) -> Figure:
    """Empirical CDF of request-response times on a logarithmic time axis.

    Parameters
    ----------
    times:
        From :func:`cnibench.report.load_request_times`.
    title:
        Figure title.

    Returns
    -------
    matplotlib.figure.Figure
        One axes per CNI (a facet, one above the other in order of first appearance, sharing
        both axes, titled with the CNI's name and the options that differ), and in
        it one post-step line per condition drawn by seaborn's ``ecdfplot``, labelled
        ``"<cni> / <condition>"`` and coloured by condition alike in every facet: x = the
        request times sorted (µs), y = the proportion of requests at most that long, ending
        at 1.
    """
    import seaborn as sns

    groups = _time_groups(times)
    pairs = list(
        dict.fromkeys(zip(times["cni"].astype(str), times["condition"].astype(str), strict=True))
    )
    cnis = list(dict.fromkeys(cni for cni, _ in pairs))
    conditions = list(dict.fromkeys(condition for _, condition in pairs))
    figure = new_figure(8.0, 1.2 + 3.0 * len(cnis))
    axes = figure.subplots(len(cnis), 1, squeeze=False, sharex=True, sharey=True)[:, 0]
    short = shorten_cni_labels(cnis)
    for (cni, condition), (label, values) in zip(pairs, groups, strict=True):
        ax = axes[cnis.index(cni)]
        color = _color(conditions.index(condition))
        sns.ecdfplot(x=values, color=color, label=label, ax=ax)
    for ax, cni in zip(axes, cnis, strict=True):
        ax.set_xscale("log")
        ax.set_xlabel("request time [µs]" if ax is axes[-1] else "")
        ax.set_ylabel("proportion of requests ≤ x")
        ax.set_ylim(0.0, 1.02)
        ax.grid(alpha=0.3, which="both")
        if len(cnis) > 1:
            ax.set_title(short[cni], fontsize=TITLE_PT)
    handles = [Line2D([], [], color=_color(i)) for i in range(len(conditions))]
    _outside_legend(figure, handles, conditions if len(cnis) > 1 else [g for g, _ in groups])
    figure.suptitle(title or "Request-response time ECDF")
    return keep_axes_wide(figure)
