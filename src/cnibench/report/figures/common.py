"""What every figure of the report shares: the canvas, the value axes' units, colours, legends.

Figures are built with Matplotlib's object API on the Agg canvas (no display, no global
``pyplot`` state, :func:`new_figure`): a figure is garbage once the caller drops it, and
rendering is thread-safe per figure. Values are plotted in the unit they were recorded in
(bits/s, µs, %, MB); each value axis prints plain numbers in one unit with one prefix, named in
its label (``throughput [Gbit/s]``, :func:`axis_unit`), never ``500 µs`` next to ``1 ms``.
Legends sit outside the axes, right of the figure, so they never cover data.

Every figure is meant to read in a 1400 px page: a figure is made wider when its labels and
legend would leave a panel less than :data:`MIN_AXES_FRACTION` of its width
(:func:`keep_axes_wide`).
"""

from __future__ import annotations

import itertools
import math
import textwrap
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
import pandas as pd
from matplotlib import rcParams
from matplotlib.axes import Axes
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.font_manager import FontProperties
from matplotlib.ticker import FuncFormatter

from cnibench.report.labels import shorten_cni_labels, wrap_label

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


SMALL_PT = 10.0
"""Size of a figure's smallest text (ticks, legends, value labels, notes), in points: 10 pt
is 11 px at the report's 80 dpi, the least a reader reads without zooming."""

TITLE_PT = 11.0
"""Size of a panel's or section's title, in points (one step above :data:`SMALL_PT`)."""


def fit_suptitle(figure: Figure) -> Figure:
    """Wrap ``figure``'s title (at matplotlib's default title size) at spaces to its width
    (about 0.6 of the font size per character), so that a long title (a scenario named by
    what ran, a metric, its estimator) is never clipped at the figure's edges; call it once
    the figure has its final width."""
    text = " ".join(figure.get_suptitle().split())
    if not text:
        return figure
    size = float(FontProperties(size=rcParams["figure.titlesize"]).get_size_in_points())
    per_line = max(20, int(figure.get_figwidth() * 72 / (0.6 * size)))
    figure.suptitle(textwrap.fill(text, per_line, break_long_words=False, break_on_hyphens=False))
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


def _outside_legend(figure: Figure, handles: Sequence[Any], labels: Sequence[str]) -> None:
    """One legend for the whole figure, right of every axes, so it never covers data, and
    centred on that side, so that a long label never runs into the figure's title above."""
    if handles:
        figure.legend(handles, labels, loc="outside right center", fontsize=SMALL_PT, frameon=False)


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


def _param_value(value: Any) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)) or value is pd.NA:
        return "-"
    return str(value)
