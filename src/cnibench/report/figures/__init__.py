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

One module per kind of figure, all drawing with :mod:`~cnibench.report.figures.common` (canvas,
units of the value axes, colours, legends, layout):

- :mod:`~cnibench.report.figures.bars`: per-condition bars and per-run strips of one metric;
- :mod:`~cnibench.report.figures.scaling`: a metric against policy rules or client pods;
- :mod:`~cnibench.report.figures.split`: the traffic split's shares and distance to its weights;
- :mod:`~cnibench.report.figures.times`: request-response time histogram and ECDF;
- :mod:`~cnibench.report.figures.forest`: the verdict's forest plot.
"""

from __future__ import annotations

from cnibench.report.figures.bars import OFF_SCALE as OFF_SCALE
from cnibench.report.figures.bars import figure_bars, figure_runs
from cnibench.report.figures.common import LEGEND_LABEL_WIDTH as LEGEND_LABEL_WIDTH
from cnibench.report.figures.common import (
    MIN_AXES_FRACTION,
    NON_NEGATIVE_UNITS,
    AxisUnit,
    axis_unit,
    keep_axes_wide,
    new_figure,
)
from cnibench.report.figures.forest import FOREST_LABEL_WIDTH as FOREST_LABEL_WIDTH
from cnibench.report.figures.forest import figure_forest
from cnibench.report.figures.scaling import (
    POLICY_SCALING_METRICS,
    figure_pod_scaling,
    figure_policy_scaling,
)
from cnibench.report.figures.scaling import scaling_summary as scaling_summary
from cnibench.report.figures.split import figure_split_distance, figure_split_shares
from cnibench.report.figures.split import split_distance_summary as split_distance_summary
from cnibench.report.figures.times import figure_rr_ecdf, figure_rr_histogram

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
