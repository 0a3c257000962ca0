"""Figures of the traffic-split scenario: each backend's share of requests over time windows
against its configured weight (:func:`figure_split_shares`), and the distance of the split to
the weights per virtual-user level (:func:`figure_split_distance`,
:func:`split_distance_summary`).
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping
from typing import Any

import pandas as pd
from matplotlib.figure import Figure

from cnibench import stats
from cnibench.errors import ConfigError, InsufficientDataError
from cnibench.report.data import parse_weights
from cnibench.report.figures.common import (
    TITLE_PT,
    _color,
    _outside_legend,
    keep_axes_wide,
    new_figure,
)


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
        ax.set_title(label, fontsize=TITLE_PT, loc="left")
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
