"""Per-condition figures of one scenario and metric: bars of each CNI's estimate
(:func:`figure_bars`) and every run as a point over that interval (:func:`figure_runs`).

The heights of the bars are the statistics themselves, in the recorded unit. A metric measured
by several tools (``tool`` parameter) gets one axes per tool; panels are stacked one above the
other, never side by side. Tick labels name only the parameters that vary between the
conditions drawn, wrapped, and the legend names each CNI only by what differs
(:mod:`cnibench.report.labels`).
"""

from __future__ import annotations

import math
import textwrap
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.layout_engine import ConstrainedLayoutEngine
from matplotlib.lines import Line2D
from matplotlib.patches import Rectangle

from cnibench.errors import InsufficientDataError
from cnibench.report.data import (
    LEVEL,
    bar_summary,
    group_label,
    metric_unit,
    ok_runs,
    scenario_title,
)
from cnibench.report.figures.common import (
    NON_NEGATIVE_UNITS,
    SMALL_PT,
    TITLE_PT,
    AxisUnit,
    _color,
    _declutter_ticks,
    _legend_names,
    _outside_legend,
    _param_value,
    _value_axis,
    fit_suptitle,
    keep_axes_wide,
    new_figure,
)

OFF_SCALE = 3.0
"""A bar chart's value axis ends at this many times its tallest bar: an interval from two
runs can reach a hundred times the mean, and would flatten every bar if the axis followed it."""


def _cap_value_axis(
    ax: Axes, heights: Any, uppers: Sequence[tuple[float, float]], shown: AxisUnit
) -> bool:
    """End ``ax``'s value axis at :data:`OFF_SCALE` times its tallest bar when an error bar
    reaches beyond; each such bar gets "↑ value" (in the axis' unit) at the top. Returns
    whether any bar was cut."""
    finite = np.asarray(heights, dtype=np.float64)
    finite = finite[np.isfinite(finite)]
    if not finite.size or float(finite.max()) <= 0:
        return False
    top = OFF_SCALE * float(finite.max())
    beyond = [(x, high) for x, high in uppers if high > top]
    if not beyond:
        return False
    ax.set_ylim(top=top)
    for x, high in beyond:
        ax.annotate(
            f"↑ {high * shown.factor:.3g}",
            (x, top),
            xytext=(2, -2),  # beside the error bar's line, reading upwards
            textcoords="offset points",
            ha="left",
            va="top",
            rotation=90,
            fontsize=SMALL_PT,
        )
    return True


def _wrap(text: str, width: int = 14) -> str:
    """Wrap a condition label at hyphens and spaces so long ids stay within their group."""
    return (
        "\n".join(textwrap.wrap(text, width=width, break_on_hyphens=True, break_long_words=False))
        or text
    )


@dataclass(frozen=True)
class _Panel:
    """One axes of a per-metric figure: the groups measured by one tool in one unit."""

    title: str
    unit: str
    rows: pd.DataFrame


def _panels(rows: pd.DataFrame, fallback_unit: str) -> list[_Panel]:
    """Split a metric's rows by tool (``param_tool``) and recorded unit, one axis each.

    Different tools measure the same metric at different magnitudes (sockperf's latency is
    tens of µs, wrk's is ms); on one axis the small bars vanish. Different units would be
    meaningless on one axis.
    """
    tool = rows["param_tool"].astype(str) if "param_tool" in rows.columns else None
    unit = rows["unit"].fillna("").astype(str) if "unit" in rows.columns else None
    keys = pd.Series("", index=rows.index)
    if tool is not None and rows["param_tool"].notna().any() and tool.nunique() > 1:
        keys = keys + "tool " + tool
    if unit is not None and unit.nunique() > 1:
        keys = keys + " [" + unit + "]"
    panels = []
    for key, group in rows.groupby(keys, sort=False):
        units = [str(u) for u in group["unit"].dropna().unique()] if "unit" in group.columns else []
        panel_unit = units[0] if len(units) == 1 else fallback_unit
        panels.append(_Panel(str(key).strip(), panel_unit, group))
    return panels


def _share_value_axis(panels: Sequence[_Panel], values: Sequence[Any]) -> bool:
    """Whether the panels can share one value axis: one unit, and no panel's values lost.

    Sharing keeps the panels comparable (CPU under iperf3 against CPU under wrk); it is given
    up when one panel's largest value is under a tenth of another's, where its bars would be
    too short to read (sockperf's latency against wrk's).
    """
    if len(panels) < 2 or len({panel.unit for panel in panels}) > 1:
        return False
    tops = []
    for part in values:
        finite = np.asarray(part, dtype=np.float64)
        finite = np.abs(finite[np.isfinite(finite)])
        if not finite.size:
            return False
        tops.append(float(finite.max()))
    return min(tops) > 0 and max(tops) <= 10 * min(tops)


def _condition_labels(rows: pd.DataFrame) -> tuple[dict[str, str], str]:
    """Short tick label per condition and the x axis label that explains them.

    A condition id repeats every parameter (``cross-node-idle-iperf3``); the label keeps only
    the parameters that vary within the axes, one per line, and the axis label names them.
    """
    conditions = [str(c) for c in dict.fromkeys(rows["condition"])]
    varying = [
        name
        for name in sorted(rows.columns)
        if name.startswith("param_")
        and rows[name].notna().any()
        and rows[name].astype(str).nunique() > 1
    ]
    if not varying:
        return {c: _wrap(c) for c in conditions}, "condition"
    firsts = rows.drop_duplicates("condition").set_index("condition")
    # In the order the condition id names them (placement before load in baseline).
    first = conditions[0]

    def position(name: str) -> int:
        index = first.find(_param_value(firsts.loc[first, name]))
        return index if index >= 0 else len(first)

    varying.sort(key=position)
    labels = {
        c: "\n".join(_wrap(_param_value(firsts.loc[c, name])) for name in varying)
        for c in conditions
    }
    if len(set(labels.values())) < len(conditions):
        return {c: _wrap(c) for c in conditions}, "condition"
    return labels, " / ".join(name[len("param_") :] for name in varying)


def _n_text(counts: Sequence[int]) -> str:
    low, high = min(counts), max(counts)
    return f"n={low}" if low == high else f"n={low}–{high}"


def figure_bars(
    df: pd.DataFrame,
    scenario: str,
    metric: str,
    *,
    level: float = LEVEL,
    title: str | None = None,
) -> Figure:
    """Bar chart of each condition's estimate with its confidence interval per CNI.

    Parameters
    ----------
    df:
        Tidy results (:func:`cnibench.results.load_results`).
    scenario, metric:
        E.g. ``"egress"`` and ``"throughput"`` (bits/s).
    level:
        Confidence level of the error bars (default 0.95).
    title:
        Figure title; default ``"<scenario>: <metric>, <estimator>"`` (e.g. geometric mean).

    Returns
    -------
    matplotlib.figure.Figure
        One axes per tool (``tool`` parameter) and recorded unit, one above the other, each
        with its own value axis in one unit and prefix (:func:`axis_unit`). In each, one group
        of bars per condition (in order of first appearance), one bar per CNI (coloured; the
        legend, outside the axes, names the CNI by its name and the options that differ among
        the CNIs drawn, :func:`cnibench.report.labels.shorten_cni_labels`, and its number of
        runs); tick labels are the parameters that vary on that axes. Bar height = the
        estimate of :func:`bar_summary` (geometric mean of the successful runs of a positive
        quantity, else their mean); error bar = its interval,
        cut at zero for a quantity that cannot be negative (:data:`NON_NEGATIVE_UNITS`; the
        legend says so when a bar was cut). Outlying runs (modified z-score above 3.5) are in
        the bar and named in an annotation under the axes; failed runs never enter.

    Raises
    ------
    InsufficientDataError
        If no successful run has the scenario and metric.
    """
    summary = bar_summary(df, scenario=scenario, metric=metric, level=level)
    rows = ok_runs(df, scenario=scenario, metric=metric)
    panels = _panels(rows, metric_unit(df, metric))
    cnis = [str(c) for c in dict.fromkeys(summary["cni"])]
    groups = {
        panel.title: [str(c) for c in dict.fromkeys(panel.rows["condition"])] for panel in panels
    }
    # Panels one above the other, each as wide as its groups need: side by side, the panel
    # of a tool with one condition was a sliver (the kind study's iperf3 CPU, 13 % wide).
    widths = [max(2.2, 0.35 * len(cnis) * len(groups[p.title]) + 1.2) for p in panels]
    figure = new_figure(min(24.0, max(widths) + 2.5), 1.4 + 3.4 * len(panels))
    tops = [
        summary[summary["condition"].isin(groups[p.title])][["mean", "ci_high"]].to_numpy(float)
        for p in panels
    ]
    shared = _share_value_axis(panels, tops)
    axes = figure.subplots(len(panels), 1, squeeze=False, sharey=shared)[:, 0]
    width = 0.8 / len(cnis)
    clipped = False
    has_any_ci = False
    off_scale = False
    for ax, panel in zip(axes, panels, strict=True):
        uppers: list[tuple[float, float]] = []  # (position, upper end) of each error bar
        conditions = groups[panel.title]
        part = summary[summary["condition"].isin(conditions)]
        labels, xlabel = _condition_labels(panel.rows)
        for offset, cni in enumerate(cnis):
            mine = part[part["cni"] == cni].set_index("condition")
            present = [c for c in conditions if c in mine.index]
            if not present:
                continue
            positions = np.array(
                [conditions.index(c) + (offset - (len(cnis) - 1) / 2) * width for c in present]
            )
            means = mine.loc[present, "mean"].to_numpy(dtype=float)
            low = mine.loc[present, "ci_low"].to_numpy(dtype=float)
            high = mine.loc[present, "ci_high"].to_numpy(dtype=float)
            ax.bar(positions, means, width=width * 0.9, color=_color(cnis.index(cni)))
            has_ci = np.isfinite(low) & np.isfinite(high)
            if panel.unit in NON_NEGATIVE_UNITS:
                clipped = clipped or bool((low[has_ci] < 0).any())
                low = np.where(has_ci, np.maximum(low, 0.0), low)
            if has_ci.any():
                has_any_ci = True
                uppers += zip(positions[has_ci].tolist(), high[has_ci].tolist(), strict=True)
                ax.errorbar(
                    positions[has_ci],
                    means[has_ci],
                    # Equal runs give an interval of zero width whose ends can miss the
                    # estimate by a rounding step (100.00000000000004 against 100.0).
                    yerr=np.maximum(
                        np.vstack([means[has_ci] - low[has_ci], high[has_ci] - means[has_ci]]),
                        0.0,
                    ),
                    fmt="none",
                    ecolor="black",
                    capsize=4,
                )
        ax.set_xticks(
            np.arange(len(conditions)), [labels[c] for c in conditions], fontsize=SMALL_PT
        )
        ax.set_xlim(-0.6, len(conditions) - 0.4)
        ax.set_xlabel(xlabel, fontsize=SMALL_PT)
        # The prefix follows the bars, not a wide interval from two runs.
        heights = summary["mean"] if shared else part["mean"]
        shown = _value_axis(ax, metric, panel.unit, heights)
        if panel.unit in NON_NEGATIVE_UNITS:
            ax.set_ylim(bottom=0.0)
        off_scale = _cap_value_axis(ax, heights, uppers, shown) or off_scale
        ax.set_title(panel.title, fontsize=TITLE_PT)
        ax.grid(axis="y", alpha=0.3)
    estimators = ", ".join(dict.fromkeys(str(e) for e in summary["estimator"]))
    figure.suptitle(title or f"{scenario_title(df, scenario)}: {metric}, {estimators}")
    handles: list[Any] = [Rectangle((0, 0), 1, 1, color=_color(i)) for i in range(len(cnis))]
    names = _legend_names(cnis)
    legend_labels = [
        f"{names[cni]} ({_n_text(summary[summary['cni'] == cni]['n'].astype(int).tolist())})"
        for cni in cnis
    ]
    if has_any_ci:
        handles.append(Line2D([], [], color="black", marker="_", markersize=10, linestyle="-"))
        legend_labels.append(
            f"{100 * level:g}% CI"
            + (", cut at 0" if clipped else "")
            + (";\n↑ upper end off the axis" if off_scale else "")
        )
    _outside_legend(figure, handles, legend_labels)
    notes = [
        f"outlying run {run_id} ({value:.4g} {metric_unit(df, metric)}, counted)"
        for flagged, values in zip(summary["flagged"], summary["flagged_values"], strict=True)
        for run_id, value in zip(flagged, values, strict=True)
    ]
    failed = int(summary["failed"].sum())
    if failed:
        notes.append(f"{failed} failed run(s) not shown")
    if notes:
        text = "; ".join(notes)
        figure.text(0.01, 0.005, text, fontsize=SMALL_PT, color="firebrick", wrap=True)
        engine = figure.get_layout_engine()
        if isinstance(engine, ConstrainedLayoutEngine):
            # Room under the axes for the wrapped note: about 11 characters per inch at 10 pt
            # (SMALL_PT), 1.2 times its size per line.
            lines = math.ceil(len(text) / (11 * figure.get_figwidth()))
            room = min(0.4, (0.1 + 1.2 * SMALL_PT / 72 * lines) / figure.get_figheight())
            engine.set(rect=(0, room, 1, 1 - room))
    keep_axes_wide(figure)
    fit_suptitle(figure)
    _declutter_ticks(figure, list(axes))
    return figure


def figure_runs(
    df: pd.DataFrame,
    scenario: str,
    metric: str,
    *,
    title: str | None = None,
) -> Figure:
    """Every successful run as a point (a seaborn strip plot) over cnibench's own interval.

    Parameters
    ----------
    df:
        Tidy results.
    scenario, metric:
        What to plot.
    title:
        Figure title; default ``"<scenario>: <metric> per run"``.

    Returns
    -------
    matplotlib.figure.Figure
        One axes per tool and recorded unit, one above the other (as :func:`figure_bars`).
        Per condition (x, the
        parameters that vary) one column per CNI, coloured as in :func:`figure_bars`: the
        runs' values as jittered points (one ``PathCollection`` per group, labelled
        ``"<cni> / <condition>"``), and over them a black bar of the group's estimate and
        interval from :func:`cnibench.report.bar_summary` (:func:`cnibench.stats.summarize_runs`:
        the geometric mean and its t interval on the logarithms for positive runs), never a
        seaborn bootstrap. Outlying runs get a red ring.

    Raises
    ------
    InsufficientDataError
        If no successful run has the scenario and metric.
    """
    import seaborn as sns

    rows = ok_runs(df, scenario=scenario, metric=metric)
    if rows.empty:
        raise InsufficientDataError(
            f"no successful run of scenario {scenario!r} has metric {metric!r}"
        )
    summary = bar_summary(df, scenario=scenario, metric=metric)
    outlying = {run_id for ids in summary["flagged"] for run_id in ids}
    # (CNI, condition) -> cnibench's estimate and interval ends, in the recorded unit.
    intervals = {
        (str(cni), str(condition)): (float(centre), float(low), float(high))
        for cni, condition, centre, low, high in zip(
            summary["cni"],
            summary["condition"],
            summary["mean"].to_numpy(dtype=np.float64),
            summary["ci_low"].to_numpy(dtype=np.float64),
            summary["ci_high"].to_numpy(dtype=np.float64),
            strict=True,
        )
    }
    panels = _panels(rows, metric_unit(df, metric))
    cnis = [str(c) for c in dict.fromkeys(rows["cni"])]
    # About 0.9 inch per condition, so that neighbouring tick labels (``iptables``,
    # ``nftables``) keep a gap between them.
    most = max(panel.rows["condition"].nunique() for panel in panels)
    figure = new_figure(min(24.0, max(8.0, 0.9 * most + 3.5)), 1.0 + 3.0 * len(panels))
    shared = _share_value_axis(panels, [p.rows["value"].to_numpy(float) for p in panels])
    axes = figure.subplots(len(panels), 1, squeeze=False, sharey=shared)[:, 0]
    width = 0.8 / len(cnis)
    ringed = False
    for ax, panel in zip(axes, panels, strict=True):
        labels, axis_label = _condition_labels(panel.rows)
        conditions = list(labels)
        for (cni, condition), group in panel.rows.groupby(["cni", "condition"], sort=False):
            x = conditions.index(str(condition)) - 0.4 + width * (cnis.index(str(cni)) + 0.5)
            values = group["value"].to_numpy(dtype=float)
            sns.stripplot(
                x=np.full(values.size, x),
                y=values,
                native_scale=True,
                orient="x",
                jitter=width / 4,
                color=_color(cnis.index(str(cni))),
                alpha=0.8,
                size=5,
                label=group_label(str(cni), str(condition)),
                legend=False,
                ax=ax,
            )
            points = ax.collections[-1].get_offsets()
            flagged = group["run_id"].isin(outlying).to_numpy()
            if flagged.any():
                ringed = True
                ax.scatter(
                    np.asarray(points)[flagged, 0],
                    values[flagged],
                    s=160,
                    facecolors="none",
                    edgecolors="red",
                )
            estimate, low, high = intervals[(str(cni), str(condition))]
            if math.isfinite(low) and math.isfinite(high):
                ax.vlines(x, low, high, color="black", linewidth=1.5, zorder=3, label="_interval")
            ax.hlines(
                estimate,
                x - width / 3,
                x + width / 3,
                color="black",
                linewidth=2,
                zorder=3,
                label="_estimate",
            )
        ax.set_xticks(range(len(conditions)), [labels[c] for c in conditions])
        ax.set_xlim(-0.6, len(conditions) - 0.4)
        ax.set_xlabel(axis_label)
        _value_axis(ax, metric, panel.unit, rows["value"] if shared else panel.rows["value"])
        ax.set_title(panel.title, fontsize=TITLE_PT)
        ax.grid(alpha=0.3, axis="y")
    figure.suptitle(title or f"{scenario_title(df, scenario)}: {metric} per run")
    handles: list[Any] = [
        Line2D([], [], color=_color(i), marker="o", linestyle="none") for i in range(len(cnis))
    ]
    short = _legend_names(cnis)
    names = [short[cni] for cni in cnis]
    handles.append(Line2D([], [], color="black", marker="_", markersize=12, linewidth=1.5))
    names.append(f"estimate and {100 * LEVEL:g}% CI")
    if ringed:
        handles.append(Line2D([], [], marker="o", markersize=10, fillstyle="none", color="red"))
        names.append("outlying run (counted)")
    _outside_legend(figure, handles, names)
    keep_axes_wide(figure)
    fit_suptitle(figure)
    _declutter_ticks(figure, list(axes))
    return figure
