"""Figures of a benchmark report, each a function of the tidy results returning a Figure.

Figures are built with Matplotlib's object API on the Agg canvas (no display, no global
``pyplot`` state): a figure is garbage once the caller drops it, and rendering is thread-safe
per figure. Values are plotted in the unit they were recorded in (bits/s, µs, %, MB), so the
heights of the bars are the statistics themselves; each value axis prints plain numbers in one
unit with one prefix, named in its label (``throughput [Gbit/s]``, :func:`axis_unit`), never
``500 µs`` next to ``1 ms``. A metric measured by several tools (``tool`` parameter) gets one
axes per tool. Legends sit outside the axes, right of the figure, so they never cover data.

Every figure is meant to read in a 1400 px page: panels are stacked one above the other, never
side by side, and a figure is made wider when its labels and legend would leave a panel less
than :data:`MIN_AXES_FRACTION` of its width (:func:`keep_axes_wide`). Labels name only what
differs between the things drawn (:mod:`cnibench.report.labels`), wrapped.
"""

from __future__ import annotations

import itertools
import math
import textwrap
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any, Literal

import numpy as np
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.layout_engine import ConstrainedLayoutEngine
from matplotlib.lines import Line2D
from matplotlib.patches import Rectangle
from matplotlib.ticker import FuncFormatter

from cnibench import stats
from cnibench.errors import ConfigError, InsufficientDataError
from cnibench.report.data import (
    LEVEL,
    bar_summary,
    group_label,
    metric_unit,
    ok_runs,
    parse_weights,
    request_time_summary,
)
from cnibench.report.labels import common_parts, distinct_labels, shorten_cni_labels, wrap_label
from cnibench.report.verdict import CORRECTION, VERDICT_COLUMNS, verdict

__all__ = [
    "MIN_AXES_FRACTION",
    "NON_NEGATIVE_UNITS",
    "POLICY_SCALING_METRICS",
    "AxisUnit",
    "axis_unit",
    "figure_bars",
    "figure_forest",
    "figure_pod_scaling",
    "figure_policy_scaling",
    "figure_rr_ecdf",
    "figure_rr_histogram",
    "figure_runs",
    "figure_split_distance",
    "figure_split_shares",
    "keep_axes_wide",
    "new_figure",
]

_BASE_UNITS: dict[str, tuple[str, float, tuple[str, ...]]] = {
    # recorded unit: (unit on the axis without prefix, factor to it, prefixes allowed)
    "us": ("s", 1e-6, ("n", "µ", "m", "")),
    "ms": ("s", 1e-3, ("n", "µ", "m", "")),
    "s": ("s", 1.0, ("n", "µ", "m", "")),
    "bits/s": ("bit/s", 1.0, ("", "k", "M", "G", "T")),
    "bytes/s": ("B/s", 1.0, ("", "k", "M", "G", "T")),
    "bytes": ("B", 1.0, ("", "k", "M", "G", "T")),
    "B": ("B", 1.0, ("", "k", "M", "G", "T")),
    "requests/s": ("req/s", 1.0, ("", "k", "M")),
}
_PREFIX_SCALE = {"n": 1e-9, "µ": 1e-6, "m": 1e-3, "": 1.0, "k": 1e3, "M": 1e6, "G": 1e9, "T": 1e12}
NON_NEGATIVE_UNITS: frozenset[str] = frozenset(
    {"bits/s", "bytes/s", "bytes", "B", "us", "ms", "s", "requests/s", "%", "MB", "count", "cores"}
)
"""Units of quantities that cannot be negative: their error bars are cut at zero."""
_MARKERS = ("o", "s", "^", "D", "v", "P", "X", "*")
_DASHES: tuple[Literal["-", "--", ":", "-."], ...] = ("-", "--", ":", "-.")
_PALETTE = (
    "#4c72b0",
    "#dd8452",
    "#55a868",
    "#c44e52",
    "#8172b3",
    "#937860",
    "#da8bc3",
    "#8c8c8c",
    "#ccb974",
    "#64b5cd",
)


def new_figure(width: float = 8.0, height: float = 4.5) -> Figure:
    """An empty figure on an Agg canvas, size in inches (rendered at 100 dpi by reports)."""
    figure = Figure(figsize=(width, height), layout="constrained")
    FigureCanvasAgg(figure)
    return figure


MIN_AXES_FRACTION = 0.5
"""Least width of a panel's plotting area, as a fraction of its figure's width."""

LEGEND_LABEL_WIDTH = 28
"""Most characters per line of a legend entry (a CNI configuration, a line of a scaling
figure): longer entries wrap after their ``,`` and ``;``."""


def keep_axes_wide(figure: Figure, *, fraction: float = MIN_AXES_FRACTION) -> Figure:
    """Widen ``figure`` until its narrowest axes spans at least ``fraction`` of its width.

    Labels, legends and notes keep their size in inches when a figure grows, so the room the
    axes lose to them is fixed: a figure whose decorations take ``d`` inches needs a width of
    ``d / (1 - fraction)`` to leave the axes ``fraction`` of it. Measured on a drawn layout
    (``draw_without_rendering``), aiming 0.03 above ``fraction`` so that it still holds when
    the figure is saved at another dpi (the report's 80).

    Parameters
    ----------
    figure:
        A figure with its layout engine (constrained layout, :func:`new_figure`).
    fraction:
        Least width of each axes over the figure's width, in (0, 1).

    Returns
    -------
    matplotlib.figure.Figure
        ``figure``, possibly wider; its height is unchanged.
    """
    if not 0 < fraction < 1:
        raise ValueError(f"fraction must be in (0, 1); got {fraction}")
    # Text extents round to whole pixels and hinting differs by dpi: a layout measured at
    # 100 dpi can lose a percent of axes width when saved at 80. Aim a little higher.
    wanted = min(0.95, fraction + 0.03)
    for _attempt in range(3):  # wrapped notes can change the decorations once more
        figure.draw_without_rendering()
        widths = [ax.get_position().width for ax in figure.axes if ax.get_visible()]
        if not widths or min(widths) >= wanted:
            return figure
        width = figure.get_figwidth()
        decorations = width * (1 - min(widths))
        figure.set_figwidth(max(width, decorations / (1 - wanted)) * 1.01)
    return figure


def _legend_names(cnis: Sequence[str]) -> dict[str, str]:
    """Each CNI's legend entry: its name and the options that differ, wrapped."""
    return {
        cni: wrap_label(short, LEGEND_LABEL_WIDTH)
        for cni, short in shorten_cni_labels(cnis).items()
    }


def _color(index: int) -> str:
    return _PALETTE[index % len(_PALETTE)]


@dataclass(frozen=True)
class AxisUnit:
    """How one value axis shows a metric: a single unit, prefix included, for every tick.

    Attributes
    ----------
    label:
        The unit named in the axis label, e.g. ``"ms"``, ``"Gbit/s"``, ``"%"``.
    factor:
        Multiply a recorded value by this to get the number printed on a tick.
    """

    label: str
    factor: float


def axis_unit(unit: str, largest: float) -> AxisUnit:
    """The one prefix an axis uses for values up to ``largest`` (in the recorded ``unit``).

    Ticks are plain numbers and the unit sits once in the axis label, so an axis never mixes
    ``500 µs`` with ``1 ms``: the prefix is the largest one that keeps ``largest`` at 1 or
    more (``0.9 ms`` → µs, ``2.5e9 bits/s`` → Gbit/s). Units without a prefix scheme (``%``,
    ``MB``, ``count``) are shown as recorded.
    """
    base = _BASE_UNITS.get(unit)
    if base is None:
        return AxisUnit(unit, 1.0)
    name, to_base, prefixes = base
    magnitude = abs(largest) * to_base
    chosen = "" if "" in prefixes else prefixes[0]
    if math.isfinite(magnitude) and magnitude > 0:
        fitting = [p for p in prefixes if magnitude >= _PREFIX_SCALE[p]]
        chosen = fitting[-1] if fitting else prefixes[0]
    return AxisUnit(chosen + name, to_base / _PREFIX_SCALE[chosen])


def _value_axis(ax: Axes, metric: str, unit: str, values: Any, *, axis: str = "y") -> AxisUnit:
    """Label ``ax``'s value axis ``metric [unit]`` with one prefix for all its ticks."""
    finite = np.asarray(values, dtype=np.float64)
    finite = finite[np.isfinite(finite)]
    shown = axis_unit(unit, float(np.max(np.abs(finite))) if finite.size else math.nan)
    target = ax.yaxis if axis == "y" else ax.xaxis
    factor = shown.factor
    target.set_major_formatter(FuncFormatter(lambda value, _pos: f"{value * factor:.4g}"))
    label = f"{metric} [{shown.label}]" if shown.label else metric
    target.set_label_text(label)
    return shown


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
            fontsize=6,
        )
    return True


def _outside_legend(figure: Figure, handles: Sequence[Any], labels: Sequence[str]) -> None:
    """One legend for the whole figure, right of every axes, so it never covers data, and
    centred on that side, so that a long label never runs into the figure's title above."""
    if handles:
        figure.legend(handles, labels, loc="outside right center", fontsize=7, frameon=False)


def _overlaps(boxes: Sequence[Any]) -> bool:
    ordered = sorted(boxes, key=lambda box: box.x0)
    return any(a.x1 > b.x0 + 0.5 for a, b in itertools.pairwise(ordered))


def _declutter_ticks(figure: Figure, axes: Sequence[Axes]) -> None:
    """Rotate x tick labels of ``axes`` (30°, then 90°) until no two of them overlap.

    Labels are wrapped beforehand; rotating is the fallback when many groups share an axis.
    """
    for rotation in (30, 90):
        figure.draw_without_rendering()
        renderer = figure.canvas.get_renderer()  # type: ignore[attr-defined]
        crowded = [
            ax
            for ax in axes
            if _overlaps(
                [
                    label.get_window_extent(renderer)
                    for label in ax.get_xticklabels()
                    if label.get_visible() and label.get_text()
                ]
            )
        ]
        if not crowded:
            return
        for ax in crowded:
            for label in ax.get_xticklabels():
                label.set_rotation(rotation)
                label.set_horizontalalignment("right" if rotation < 90 else "center")
                label.set_rotation_mode("anchor" if rotation < 90 else "default")


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
        ax.set_xticks(np.arange(len(conditions)), [labels[c] for c in conditions], fontsize=8)
        ax.set_xlim(-0.6, len(conditions) - 0.4)
        ax.set_xlabel(xlabel, fontsize=8)
        # The prefix follows the bars, not a wide interval from two runs.
        heights = summary["mean"] if shared else part["mean"]
        shown = _value_axis(ax, metric, panel.unit, heights)
        if panel.unit in NON_NEGATIVE_UNITS:
            ax.set_ylim(bottom=0.0)
        off_scale = _cap_value_axis(ax, heights, uppers, shown) or off_scale
        ax.set_title(panel.title, fontsize=9)
        ax.grid(axis="y", alpha=0.3)
    estimators = ", ".join(dict.fromkeys(str(e) for e in summary["estimator"]))
    figure.suptitle(title or f"{scenario}: {metric}, {estimators}")
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
        figure.text(0.01, 0.005, text, fontsize=7, color="firebrick", wrap=True)
        engine = figure.get_layout_engine()
        if isinstance(engine, ConstrainedLayoutEngine):
            # Room under the axes for the wrapped note: about 16 characters per inch at 7 pt,
            # 0.14 inch per line.
            lines = math.ceil(len(text) / (16 * figure.get_figwidth()))
            room = min(0.4, (0.1 + 0.14 * lines) / figure.get_figheight())
            engine.set(rect=(0, room, 1, 1 - room))
    keep_axes_wide(figure)
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
        ax.set_title(panel.title, fontsize=9)
        ax.grid(alpha=0.3, axis="y")
    figure.suptitle(title or f"{scenario}: {metric} per run")
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
    _declutter_ticks(figure, list(axes))
    return figure


# --------------------------------------------------------------------------------------------
# Traffic split
# --------------------------------------------------------------------------------------------


def _split_weights(records: pd.DataFrame, weights: Mapping[str, float] | str | None) -> Any:
    if weights is not None:
        return parse_weights(weights)
    if "weights" not in records.columns or records.empty:
        raise ConfigError("split figures need weights: pass weights= or a 'weights' column")
    distinct = records["weights"].dropna().unique()
    if len(distinct) != 1:
        raise ConfigError(
            f"split records carry {len(distinct)} different weights; pass weights= or select one"
        )
    return parse_weights(distinct[0])


def _require_records(records: pd.DataFrame) -> None:
    missing = [column for column in ("time", "backend") if column not in records.columns]
    if missing:
        raise ConfigError(f"split records need columns time and backend; missing {missing}")
    if records.empty:
        raise InsufficientDataError("no split request records to plot")


def figure_split_shares(
    records: pd.DataFrame,
    *,
    weights: Mapping[str, float] | str | None = None,
    window: float = 5.0,
    users_column: str = "users",
    title: str | None = None,
) -> Figure:
    """Share of requests per backend in consecutive time windows, against the configured weight.

    Parameters
    ----------
    records:
        One row per answered request: ``time`` (seconds, any origin) and ``backend``; with a
        ``users`` column holding several levels, one panel per level.
    weights:
        Configured weight per backend (any scale; normalised), or its JSON text; default the
        single value of a ``weights`` column.
    window:
        Window length in seconds (default 5 s).
    users_column:
        Column with the number of virtual users.
    title:
        Figure title.

    Returns
    -------
    matplotlib.figure.Figure
        Per panel: one line with markers per backend (x = window start in s, y = share in
        [0, 1]) from :func:`cnibench.stats.windowed_shares`, and a dashed horizontal reference
        line per backend at its normalised weight (labelled ``"<backend> weight"``).

    Raises
    ------
    InsufficientDataError
        No records.
    ConfigError
        Missing columns, weights or a backend without a weight.
    """
    _require_records(records)
    reference = _split_weights(records, weights)
    if users_column in records.columns and records[users_column].notna().any():
        levels = sorted(records[users_column].dropna().unique().tolist())
        panels = [(f"{level:g} users", records[records[users_column] == level]) for level in levels]
    else:
        panels = [("", records)]
    figure = new_figure(8.0, 2.8 * len(panels) + 0.6)
    axes = figure.subplots(len(panels), 1, squeeze=False, sharex=True)[:, 0]
    total = sum(reference.values())
    names = sorted(reference)
    for ax, (label, panel) in zip(axes, panels, strict=True):
        shares = stats.windowed_shares(
            panel["time"].to_numpy(dtype=float),
            panel["backend"].astype(str).to_numpy(),
            window=window,
            weights=reference,
        )
        for index, name in enumerate(names):
            rows = shares[shares["backend"] == name]
            ax.plot(
                rows["window_start"],
                rows["share"],
                marker="o",
                markersize=3,
                color=_color(index),
                label=f"{name} share",
            )
            ax.axhline(
                reference[name] / total,
                color=_color(index),
                linestyle="--",
                linewidth=1,
                label=f"{name} weight",
            )
        ax.set_ylim(-0.02, 1.02)
        ax.set_ylabel("share of requests")
        ax.set_title(label, fontsize=9, loc="left")
        ax.grid(alpha=0.3)
    axes[-1].set_xlabel(f"time since first request [s] ({window:g} s windows)")
    _outside_legend(figure, *axes[0].get_legend_handles_labels())
    figure.suptitle(title or "Traffic split: share per backend over time")
    return keep_axes_wide(figure)


def split_distance_summary(
    records: pd.DataFrame,
    *,
    weights: Mapping[str, float] | str | None = None,
    window: float = 5.0,
    users_column: str = "users",
) -> pd.DataFrame:
    """Distance of the observed split to the configured weights per virtual-user level.

    Parameters
    ----------
    records, weights, window, users_column:
        As for :func:`figure_split_shares`; a ``users`` column is required.

    Returns
    -------
    pandas.DataFrame
        One row per users level: ``users``, ``requests``, ``window_mean`` and ``window_max``
        (mean and largest total-variation distance over the windows) and ``overall`` (total
        variation of the whole level, :func:`cnibench.stats.splitting_error`), as fractions
        of requests in [0, 1].
    """
    _require_records(records)
    if users_column not in records.columns:
        raise ConfigError(f"split distance needs a {users_column!r} column (virtual users)")
    reference = _split_weights(records, weights)
    rows = []
    for users, level in records.groupby(users_column, sort=True):
        shares = stats.windowed_shares(
            level["time"].to_numpy(dtype=float),
            level["backend"].astype(str).to_numpy(),
            window=window,
            weights=reference,
        )
        per_window = shares.drop_duplicates("window_start")["total_variation"]
        counts = {name: 0 for name in reference}
        counts.update(level["backend"].astype(str).value_counts().to_dict())
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", stats.DegenerateDataWarning)
            overall = stats.splitting_error(counts, reference).total_variation
        rows.append(
            {
                "users": float(str(users)),
                "requests": len(level),
                "window_mean": float(per_window.mean()),
                "window_max": float(per_window.max()),
                "overall": overall,
            }
        )
    return pd.DataFrame(rows)


def figure_split_distance(
    records: pd.DataFrame,
    *,
    weights: Mapping[str, float] | str | None = None,
    window: float = 5.0,
    users_column: str = "users",
    title: str | None = None,
) -> Figure:
    """Distance between the observed split and the configured weights per virtual-user level.

    Parameters
    ----------
    records, weights, window, users_column:
        As for :func:`figure_split_shares`; a ``users`` column is required.
    title:
        Figure title.

    Returns
    -------
    matplotlib.figure.Figure
        x = virtual users; three lines (data from :func:`split_distance_summary`): the mean
        and the largest total-variation distance over ``window``-second windows, and the
        distance of the whole run. The distance is half the sum over backends of
        ``|share - weight|``: the fraction of requests sent to the "wrong" backend.
    """
    summary = split_distance_summary(
        records, weights=weights, window=window, users_column=users_column
    )
    figure = new_figure(7.0, 4.0)
    ax = figure.add_subplot()
    ax.plot(
        summary["users"], summary["window_mean"], marker="o", label=f"mean of {window:g} s windows"
    )
    ax.plot(
        summary["users"], summary["window_max"], marker="^", linestyle=":", label="worst window"
    )
    ax.plot(summary["users"], summary["overall"], marker="s", linestyle="--", label="whole run")
    ax.set_xlabel("virtual users")
    ax.set_ylabel("distance to reference (total variation)")
    ax.set_ylim(bottom=0.0)
    ax.grid(alpha=0.3)
    _outside_legend(figure, *ax.get_legend_handles_labels())
    ax.set_title(title or "Traffic split: distance to the configured weights")
    return keep_axes_wide(figure)


# --------------------------------------------------------------------------------------------
# Request-response times
# --------------------------------------------------------------------------------------------


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
    table.set_fontsize(8)
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
            ax.set_title(short[cni], fontsize=9)
    handles = [Line2D([], [], color=_color(i)) for i in range(len(conditions))]
    _outside_legend(figure, handles, conditions if len(cnis) > 1 else [g for g, _ in groups])
    figure.suptitle(title or "Request-response time ECDF")
    return keep_axes_wide(figure)


# --------------------------------------------------------------------------------------------
# Policy scaling
# --------------------------------------------------------------------------------------------


def _param_value(value: Any) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)) or value is pd.NA:
        return "-"
    return str(value)


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


def figure_forest(
    frame: pd.DataFrame, *, reference: str | None = None, title: str | None = None
) -> Figure:
    """Forest plot of the verdict: each contrast's ratio with its interval on a log axis.

    Parameters
    ----------
    frame:
        The verdict (:func:`cnibench.report.verdict`), or tidy results
        (:func:`cnibench.results.load_results`), whose verdict is then computed with
        ``reference``.
    reference:
        Reference CNI when ``frame`` holds results (default: the first measured).
    title:
        Figure title; default names the level and the correction.

    Returns
    -------
    matplotlib.figure.Figure
        One axes (section) per scenario and metric, titled ``"<scenario>: <metric>"``, all on
        one shared log x axis; scenarios, and metrics within one, in the order of their
        largest effect. In each, one row per contrast with an interval, in the verdict's order
        (largest effect on top), labelled with the contrast without the scenario's name:
        a dot at the ratio (treatment / control, dimensionless), a line over its interval,
        filled when the difference holds after the multiplicity correction and hollow
        otherwise; a vertical line at 1 (no difference). Contrasts without a ratio interval
        (differences in the metric's unit, proportions, splits, or none) are counted in a
        note under the axes.

    Raises
    ------
    InsufficientDataError
        No contrast has an interval.
    ConfigError
        ``frame`` is neither a verdict nor results.
    """
    if {"ratio", "ci_low", "ci_high"} <= set(frame.columns):
        table = frame
    elif {"metric", "value", "scenario"} <= set(frame.columns):
        table = verdict(frame, reference=reference)
    else:
        raise ConfigError(
            "figure_forest needs the verdict (report.verdict(df)) or results (load_results);"
            f" got columns {list(frame.columns)[:8]}"
        )
    missing = [c for c in ("contrast", "metric", "significant", "level") if c not in table]
    if missing:
        raise ConfigError(
            f"figure_forest: the verdict lacks column(s) {missing} of {VERDICT_COLUMNS}"
        )
    low = table["ci_low"].to_numpy(dtype=np.float64)
    high = table["ci_high"].to_numpy(dtype=np.float64)
    ratio = table["ratio"].to_numpy(dtype=np.float64)
    shown = np.isfinite(low) & np.isfinite(high) & np.isfinite(ratio) & (low > 0)
    if not shown.any():
        raise InsufficientDataError("no contrast has an interval to plot")
    rows = table[shown]
    scenarios = (
        rows["scenario"].astype(str) if "scenario" in rows.columns else pd.Series("", rows.index)
    )
    # One section per scenario and metric: the title says both, so each line only names the
    # contrast, and a long verdict reads as a few short lists.
    # Scenarios, and metrics within one, in the order of their largest effect.
    keys = scenarios + ": " + rows["metric"].astype(str)
    order = {name: index for index, name in enumerate(dict.fromkeys(scenarios))}
    names = sorted(dict.fromkeys(keys), key=lambda key: order[key.split(": ", 1)[0]])
    labels, shared = _forest_labels(rows)
    sections = [(name, rows[keys == name], labels[(keys == name).to_numpy()]) for name in names]
    # Each row as tall as its label's lines, so wrapped labels never run into each other.
    heights = [_forest_row_heights(section_labels) for _, _, section_labels in sections]
    # Room around the outermost bounds (and 1) so no dot sits on the frame; one x range for
    # every section, so their ratios line up.
    lowest = min(float(rows["ci_low"].min()), float(rows["ratio"].min()), 1.0)
    highest = max(float(rows["ci_high"].max()), float(rows["ratio"].max()), 1.0)
    figure = new_figure(11.0, 1.6 + sum(float(h.sum()) + 0.55 for h in heights))
    axes = figure.subplots(
        len(sections),
        1,
        squeeze=False,
        sharex=True,
        gridspec_kw={"height_ratios": [float(h.sum()) + 0.2 for h in heights]},
    )[:, 0]
    handles: dict[str, Any] = {}
    for ax, (name, section, section_labels), row_heights in zip(
        axes, sections, heights, strict=True
    ):
        _forest_section(ax, section, section_labels, row_heights, handles)
        ax.set_xscale("log")
        ax.set_xlim(lowest / 1.25, highest * 1.25)
        ax.xaxis.set_major_formatter(FuncFormatter(lambda value, _: f"{value:g}"))
        ax.xaxis.set_minor_formatter(FuncFormatter(partial(_forest_minor_label, ax)))
        ax.grid(axis="x", which="both", alpha=0.3)
        ax.set_title(name, fontsize=9, loc="left", fontweight="bold")
    axes[-1].set_xlabel("ratio treatment / control (log scale; 1 = no difference)")
    level = float(rows["level"].iloc[0])
    heading = (
        title
        or f"Verdict: ratio with the CI that carries its call ({100 * level:g}% or more,"
        f" {CORRECTION} within each question)"
    )
    if shared:
        # What every line leaves out, said once.
        heading += "\n" + wrap_label("every contrast at " + ", ".join(shared), 120)
    figure.suptitle(heading, fontsize=10)
    _outside_legend(figure, list(handles.values()), list(handles))
    left_out = int((~shown).sum())
    if left_out:
        figure.text(
            0.01,
            0.005,
            f"{left_out} contrast(s) without a ratio interval (differences in a metric's unit,"
            " proportions, splits, or no interval) are not shown: see the verdict lines",
            fontsize=7,
        )
        engine = figure.get_layout_engine()
        if isinstance(engine, ConstrainedLayoutEngine):
            # A fixed 0.3 inch under the axes for the note, however tall the figure.
            note = 0.3 / figure.get_figheight()
            engine.set(rect=(0, note, 1, 1 - note))
    return keep_axes_wide(figure)


def _forest_minor_label(ax: Axes, value: float, _pos: float | None = None) -> str:
    """Plain labels at 2, 3 and 5 x 10^k when the axis spans little more than a decade."""
    low, high = ax.get_xlim()
    if value <= 0 or low <= 0 or high / low > 30:
        return ""
    mantissa = value / 10 ** math.floor(math.log10(value))
    return f"{value:g}" if round(mantissa, 6) in (2.0, 3.0, 5.0) else ""


FOREST_LABEL_WIDTH = 56
"""Most characters per line of a forest plot's row label (about 3 inches at 7 pt, under a
third of the forest's 11 inches)."""


def _forest_labels(rows: pd.DataFrame) -> tuple[np.ndarray[Any, Any], list[str]]:
    """Each contrast's row label, naming only what differs between the rows, wrapped; and the
    context every row shares (said once in the title).

    From the verdict's own columns where it has them: ``"<cni> vs <control cni>"`` for a CNI
    contrast, ``"<feature> on <cni>"`` for a feature, with CNI labels cut to the options that
    differ (:func:`shorten_cni_labels`), then the ``context`` without its shared parts
    (:func:`distinct_labels`). Otherwise the ``contrast`` text without the scenario's name.
    """
    scenarios = rows["scenario"].astype(str) if "scenario" in rows.columns else None
    contrasts = [
        str(contrast).removeprefix(f"{scenario} ") if scenarios is not None else str(contrast)
        for contrast, scenario in zip(
            rows["contrast"],
            scenarios if scenarios is not None else [""] * len(rows),
            strict=True,
        )
    ]
    if not {"kind", "cni", "control_cni", "feature", "context"} <= set(rows.columns):
        labels = [wrap_label(label, FOREST_LABEL_WIDTH) for label in contrasts]
        return np.array(labels, dtype=object), []
    cnis = [str(c) for c in rows["cni"]] + [str(c) for c in rows["control_cni"]]
    short = shorten_cni_labels(cnis)
    contexts = [str(c) if isinstance(c, str) else "" for c in rows["context"]]
    shared = common_parts(contexts) if all(contexts) else []
    distinct = distinct_labels(contexts) if shared else contexts
    labels = []
    for kind, feature, cni, control, context, contrast in zip(
        rows["kind"].astype(str),
        rows["feature"].astype(str),
        rows["cni"].astype(str),
        rows["control_cni"].astype(str),
        distinct,
        contrasts,
        strict=True,
    ):
        if kind == "cni":
            head = f"{short[cni]} vs {short[control]}"
        elif kind == "feature":
            head = f"{feature} on {short[cni]}"
        else:
            head, _, _ = contrast.partition(" (")
        labels.append(wrap_label(f"{head} ({context})" if context else head, FOREST_LABEL_WIDTH))
    return np.array(labels, dtype=object), shared


def _forest_row_heights(labels: Sequence[str]) -> np.ndarray[Any, Any]:
    """Height of each row in inches: 0.12 per label line (7 pt) and room between rows."""
    return np.array([0.12 * (str(label).count("\n") + 1) + 0.1 for label in labels])


def _forest_section(
    ax: Axes,
    rows: pd.DataFrame,
    labels: Sequence[str],
    heights: np.ndarray[Any, Any],
    handles: dict[str, Any],
) -> None:
    """One section's contrasts on ``ax``, in the verdict's order (largest effect on top); the
    y axis counts inches, so each row is as tall as its label (``heights``)."""
    tops = np.cumsum(heights)
    y = tops[-1] - (tops - heights / 2)
    low = rows["ci_low"].to_numpy(dtype=np.float64)
    high = rows["ci_high"].to_numpy(dtype=np.float64)
    ratio = rows["ratio"].to_numpy(dtype=np.float64)
    significant = rows["significant"].to_numpy(dtype=bool)
    colors = [_color(0) if s else "#777777" for s in significant]
    ax.hlines(y, low, high, colors=colors, linewidth=2)
    same = (
        rows["equivalent"].to_numpy(dtype=bool)
        if "equivalent" in rows.columns
        else np.zeros(len(rows), dtype=bool)
    ) & ~significant
    undecided = ~significant & ~same
    if significant.any():
        handles["cost"] = ax.scatter(ratio[significant], y[significant], color=_color(0), zorder=3)
    if same.any():
        handles["same within ±margin"] = ax.scatter(
            ratio[same], y[same], color="#777777", marker="D", zorder=3
        )
    if undecided.any():
        handles["undecided"] = ax.scatter(
            ratio[undecided],
            y[undecided],
            facecolors="white",
            edgecolors="#777777",
            zorder=3,
        )
    ax.axvline(1.0, color="black", linewidth=1, linestyle="--")
    ax.set_yticks(y, list(labels), fontsize=7)
    ax.set_ylim(-0.05, float(tops[-1]) + 0.05)
