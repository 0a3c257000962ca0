"""The verdict's forest plot (:func:`figure_forest`): each contrast's ratio with its interval
on a log axis, one section per scenario and metric; row labels name only what differs between
the contrasts (:mod:`cnibench.report.labels`), wrapped to :data:`FOREST_LABEL_WIDTH`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from functools import partial
from typing import Any

import numpy as np
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.layout_engine import ConstrainedLayoutEngine
from matplotlib.ticker import FuncFormatter

from cnibench.errors import ConfigError, InsufficientDataError
from cnibench.report.data import scenario_title
from cnibench.report.figures.common import (
    SMALL_PT,
    TITLE_PT,
    _color,
    _outside_legend,
    keep_axes_wide,
    new_figure,
)
from cnibench.report.labels import (
    common_parts,
    distinct_labels,
    feature_words,
    shorten_cni_labels,
    wrap_label,
)
from cnibench.report.verdict import CORRECTION, VERDICT_COLUMNS, verdict


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
        note under the axes. Where no contrast has an interval (each set aside for a
        saturated run, not compared, or untestable), a figure that says so and why.

    Raises
    ------
    InsufficientDataError
        The verdict holds no contrast at all.
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
        if table.empty:
            raise InsufficientDataError("no contrast has an interval to plot")
        return _no_interval_figure(table, title)
    rows = table[shown]
    scenarios = (
        rows["scenario"].astype(str) if "scenario" in rows.columns else pd.Series("", rows.index)
    )
    # One section per scenario and metric: the title says both, so each line only names the
    # contrast, and a long verdict reads as a few short lists.
    # Scenarios, and metrics within one, in the order of their largest effect.
    keys = scenarios + ": " + rows["metric"].astype(str)
    # A section is titled by what ran (the lab's wireguard is wireguard-go), keyed by scenario.
    titles = {
        str(s): scenario_title(rows, str(s)) if "backend" in rows.columns else str(s)
        for s in dict.fromkeys(scenarios)
    }
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
        scenario, _, metric = name.partition(": ")
        ax.set_title(
            f"{titles[scenario]}: {metric}", fontsize=TITLE_PT, loc="left", fontweight="bold"
        )
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
    figure.suptitle(heading, fontsize=TITLE_PT)
    _outside_legend(figure, list(handles.values()), list(handles))
    left_out = int((~shown).sum())
    if left_out:
        figure.text(
            0.01,
            0.005,
            f"{left_out} contrast(s) without a ratio interval (differences in a metric's unit,"
            " proportions, splits, or no interval) are not shown: see the verdict lines",
            fontsize=SMALL_PT,
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


FOREST_LABEL_WIDTH = 44
"""Most characters per line of a forest plot's row label (about 3.3 inches at 10 pt,
:data:`SMALL_PT`; under a third of the forest's 11 inches)."""


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
    # What ran, where the backend and what its sessions recorded say more than the feature's
    # name (the lab's WireGuard: the kernel's or wireguard-go).
    backends = rows["backend"].astype(str) if "backend" in rows.columns else [""] * len(rows)
    ran = rows["implementation"] if "implementation" in rows.columns else [""] * len(rows)
    named = scenarios if scenarios is not None else [""] * len(rows)
    labels = []
    for scenario, backend, implementation, kind, feature, cni, control, context, contrast in zip(
        named,
        backends,
        ran,
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
            words = feature_words(scenario, feature, backend, implementations=[implementation])
            head = f"{words or feature} on {short[cni]}"
        else:
            head, _, _ = contrast.partition(" (")
        labels.append(wrap_label(f"{head} ({context})" if context else head, FOREST_LABEL_WIDTH))
    return np.array(labels, dtype=object), shared


def _forest_row_heights(labels: Sequence[str]) -> np.ndarray[Any, Any]:
    """Height of each row in inches: a label line (1.2 times :data:`SMALL_PT`) per line of its
    label, and room between rows."""
    line = 1.2 * SMALL_PT / 72
    return np.array([line * (str(label).count("\n") + 1) + 0.1 for label in labels])


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
    ax.set_yticks(y, list(labels), fontsize=SMALL_PT)
    ax.set_ylim(-0.05, float(tops[-1]) + 0.05)


def _no_interval_figure(table: pd.DataFrame, title: str | None) -> Figure:
    """A verdict whose contrasts all lack an interval (every one set aside for a saturated
    run, not compared, or untestable): a figure that says so and why, rather than none, so a
    notebook on a busy machine gets an answer instead of an error."""
    counts = table["saturated"] if "saturated" in table.columns else pd.Series(0, table.index)
    saturated = int((pd.to_numeric(counts, errors="coerce").fillna(0) > 0).sum())
    words = (table["verdict"] if "verdict" in table.columns else pd.Series("", table.index)).astype(
        str
    )
    apart = int(words.str.contains(" not compared: ", regex=False).sum())
    reasons = [
        f"{saturated} set aside: a run saturated the host" if saturated else "",
        f"{apart} not compared" if apart else "",
    ]
    other = len(table) - saturated - apart
    if other > 0:
        reasons.append(f"{other} without an interval")
    text = f"No contrast has an interval to plot ({'; '.join(r for r in reasons if r)})."
    figure = new_figure(11.0, 1.6)
    figure.text(0.5, 0.5, text, ha="center", va="center", fontsize=SMALL_PT, wrap=True)
    if title:
        figure.suptitle(title)
    return figure
