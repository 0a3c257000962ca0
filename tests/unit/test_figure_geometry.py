"""The figures read at 1400 px: their geometry as matplotlib lays it out, not as guessed.

Each figure is drawn by the report's own functions, at the report's resolution, on the
committed kind study (docs/results/kind-2026-11-27), on its split contrasts as its committed
report stated them (the legend covered a section's title there), and on small synthetic
frames for what the study has no data for (request times, split records, a lab-sized context
that pushed a forest's labels off the figure); then the rendered extents are checked:

* every axes' plotting area spans at least half the figure's width;
* no legend box overlaps a title (the figure's, an axes') or another text of the figure;
* no tick label reaches outside the figure.
"""

from __future__ import annotations

import functools
import warnings
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from matplotlib.figure import Figure
from matplotlib.text import Text

import cnibench
from cnibench.report import figures
from cnibench.report.verdict import verdict

STUDY = Path(__file__).resolve().parents[2] / "docs" / "results" / "kind-2026-11-27"
REPORT_DPI = 80  # cnibench.report.document renders PNGs at 80 dpi
SEED = 20261127


@functools.cache
def _study() -> pd.DataFrame:
    return cnibench.load_results(STUDY, sessions="all")


@functools.cache
def _study_verdict() -> pd.DataFrame:
    return verdict(_study())


def _forest(scenario: str) -> Figure:
    table = _study_verdict()
    return figures.figure_forest(table[table["scenario"] == scenario])


@functools.cache
def _one_session_verdict() -> pd.DataFrame:
    """The study's verdict as if every record came from one session run in rounds (repetition
    k of every condition in hour k): its split contrasts compare CNIs measured in different
    sessions, which the verdict states without an interval (one session a side), and sides
    run one after the other may drift too much for one, so there would be no row to draw."""
    study = _study()
    order = study.groupby(["cni", "condition"]).ngroup()
    seconds = study["repetition"].astype(int) * 3600 + order
    start = pd.Timestamp("2026-11-26T16:00:00Z")
    return verdict(study.assign(session_id="one", time=start + pd.to_timedelta(seconds, unit="s")))


def _forest_one_session(scenario: str) -> Figure:
    table = _one_session_verdict()
    return figures.figure_forest(table[table["scenario"] == scenario])


def _split_verdict() -> pd.DataFrame:
    """The study's split contrasts as its committed verdict (report.html) states them: the
    section whose title the legend covered."""
    rows = []
    for metric, ratio, significant in (
        ("ram", 0.77, True),
        ("latency_mean", 0.66, False),
        ("requests_per_second", 1.55, False),
        ("cpu", 1.0, False),
    ):
        for users in (100, 10):
            context = f'load_engine=epoll, users={users}, weights={{"v1": 60, "v2": 40}}'
            cni, control = "kube-router:gateway=traefik", "cilium:gateway=traefik,mode=kube-proxy"
            rows.append(
                {
                    "scenario": "split",
                    "kind": "cni",
                    "feature": f"{cni} vs {control}",
                    "cni": cni,
                    "control_cni": control,
                    "context": context,
                    "contrast": f"split {cni} vs reference {control} ({context})",
                    "metric": metric,
                    "ratio": ratio,
                    "ci_low": ratio * 0.85,
                    "ci_high": ratio / 0.85,
                    "significant": significant,
                    "level": 0.95,
                }
            )
    return pd.DataFrame(rows)


def _long_context_verdict() -> pd.DataFrame:
    """CNI contrasts whose sides share ten parameters, as a lab session records them: each
    contrast's full text is about 265 characters, wider than the forest's 11 inches."""
    shared = (
        "duration=10, load=idle, mtu=1450, parallel=4, placement=cross-node, profile=standard,"
        " target=external, tool=iperf3, wireguard=on, zones=2"
    )
    control = "flannel:kube-proxy=nftables,napi=threaded"
    rows = []
    for clients, cni in enumerate(
        ("cilium:gateway=traefik,mode=kube-proxy,napi=threaded", "kube-router:napi=threaded"),
        start=1,
    ):
        context = f"clients={clients}, {shared}"
        rows.append(
            {
                "scenario": "egress",
                "kind": "cni",
                "feature": f"{cni} vs {control}",
                "cni": cni,
                "control_cni": control,
                "context": context,
                "contrast": f"egress {cni} vs reference {control} ({context})",
                "metric": "throughput",
                "ratio": 1.2,
                "ci_low": 1.0,
                "ci_high": 1.4,
                "significant": True,
                "level": 0.95,
            }
        )
    return pd.DataFrame(rows)


def _split_records() -> pd.DataFrame:
    rng = np.random.default_rng(SEED)
    parts = []
    for users in (10, 100):
        backends = rng.choice(["v1", "v2"], size=400, p=[0.6, 0.4])
        parts.append(
            pd.DataFrame(
                {
                    "time": np.sort(rng.uniform(0, 30, size=400)),
                    "backend": backends,
                    "users": users,
                    "weights": '{"v1": 60, "v2": 40}',
                    "run_id": f"split-{users}",
                }
            )
        )
    return pd.concat(parts, ignore_index=True)


def _request_times() -> pd.DataFrame:
    # The kind study's CNI labels, each with two conditions of lognormal request times.
    rng = np.random.default_rng(SEED)
    cnis = ["cilium:gateway=traefik,mode=kube-proxy", "cilium:napi=threaded", "flannel"]
    return pd.DataFrame(
        [
            {"cni": cni, "condition": condition, "time_us": value}
            for cni in cnis
            for condition, scale in (("wireguard-off-rr", 40.0), ("wireguard-on-rr", 55.0))
            for value in rng.lognormal(np.log(scale), 0.3, size=300)
        ]
    )


DRAWINGS: dict[str, Callable[[], Figure]] = {
    "forest-baseline": lambda: _forest("baseline"),
    "forest-egress": lambda: _forest("egress"),
    "forest-policy": lambda: _forest("policy"),
    "forest-split": lambda: _forest_one_session("split"),
    "forest-split-committed": lambda: figures.figure_forest(_split_verdict()),
    "forest-long-context": lambda: figures.figure_forest(_long_context_verdict()),
    "policy-scaling-rules": lambda: figures.figure_policy_scaling(_study(), x="rules"),
    "bars-baseline-cpu": lambda: figures.figure_bars(_study(), "baseline", "cpu"),
    "bars-baseline-latency": lambda: figures.figure_bars(_study(), "baseline", "latency_avg"),
    "bars-baseline-throughput": lambda: figures.figure_bars(_study(), "baseline", "throughput"),
    "bars-egress-throughput": lambda: figures.figure_bars(_study(), "egress", "throughput"),
    "bars-policy-connections": lambda: figures.figure_bars(
        _study(), "policy", "new_connections_per_second"
    ),
    "bars-split-requests": lambda: figures.figure_bars(_study(), "split", "requests_per_second"),
    "runs-baseline-cpu": lambda: figures.figure_runs(_study(), "baseline", "cpu"),
    "runs-split-requests": lambda: figures.figure_runs(_study(), "split", "requests_per_second"),
    "split-shares": lambda: figures.figure_split_shares(_split_records()),
    "split-distance": lambda: figures.figure_split_distance(_split_records()),
    "rr-ecdf": lambda: figures.figure_rr_ecdf(_request_times()),
    "rr-histogram": lambda: figures.figure_rr_histogram(_request_times()),
}


@functools.cache
def _drawn(name: str) -> Figure:
    """The figure, laid out and drawn as the report saves it (Agg, 80 dpi)."""
    with warnings.catch_warnings():
        # A layout that collapses must show up as a failed check, not only as a warning.
        warnings.simplefilter("ignore", UserWarning)
        figure = DRAWINGS[name]()
        figure.set_dpi(REPORT_DPI)
        figure.canvas.draw()
    return figure


def _renderer(figure: Figure):
    return figure.canvas.get_renderer()  # type: ignore[attr-defined]


def panel_fractions(figure: Figure) -> list[float]:
    """Width of each axes' plotting area over the figure's width, as rendered."""
    renderer = _renderer(figure)
    return [ax.get_window_extent(renderer).width / figure.bbox.width for ax in figure.axes]


def _titles(figure: Figure) -> list[Text]:
    texts = [t for t in figure.texts if t.get_visible() and t.get_text()]
    for ax in figure.axes:
        # An axes has three title slots: left, centre, right.
        texts += [
            title
            for title in (ax.title, ax._left_title, ax._right_title)
            if title.get_visible() and title.get_text()
        ]
    return texts


def legend_overlaps(figure: Figure) -> list[str]:
    """The titles and figure texts that a legend box overlaps, by their text."""
    renderer = _renderer(figure)
    legends = list(figure.legends) + [ax.get_legend() for ax in figure.axes if ax.get_legend()]
    return [
        title.get_text()
        for legend in legends
        for title in _titles(figure)
        if legend.get_window_extent(renderer).overlaps(title.get_window_extent(renderer))
    ]


def _drawn_tick_labels(figure: Figure) -> list[Text]:
    """The tick labels matplotlib draws: of shown axes, at ticks within the view limits
    (it keeps labels of ticks beyond them, and of axes turned off, without drawing them)."""
    labels = []
    for ax in figure.axes:
        if not ax.axison:
            continue
        for axis in (ax.xaxis, ax.yaxis):
            if not axis.get_visible():
                continue
            low, high = sorted(axis.get_view_interval())
            slack = 1e-9 * (high - low)
            for tick in axis.get_major_ticks() + axis.get_minor_ticks():
                loc = tick.get_loc()
                if loc is None or not low - slack <= loc <= high + slack:
                    continue
                labels += [
                    label
                    for label in (tick.label1, tick.label2)
                    if label.get_visible() and label.get_text()
                ]
    return labels


def clipped_tick_labels(figure: Figure) -> list[str]:
    """Tick labels that reach outside the figure (by more than half a pixel)."""
    renderer = _renderer(figure)
    inside = figure.bbox.padded(0.5)
    clipped = []
    for label in _drawn_tick_labels(figure):
        box = label.get_window_extent(renderer)
        if box.x0 < inside.x0 or box.x1 > inside.x1 or box.y0 < inside.y0 or box.y1 > inside.y1:
            clipped.append(label.get_text())
    return clipped


@pytest.mark.parametrize("name", list(DRAWINGS))
def test_every_panel_is_at_least_half_the_figure_wide(name):
    fractions = panel_fractions(_drawn(name))
    assert fractions
    assert min(fractions) >= 0.5, [round(f, 2) for f in fractions]


@pytest.mark.parametrize("name", list(DRAWINGS))
def test_no_legend_lies_over_a_title(name):
    figure = _drawn(name)
    assert figure.legends or any(ax.get_legend() for ax in figure.axes)
    assert legend_overlaps(figure) == []


@pytest.mark.parametrize("name", list(DRAWINGS))
def test_no_tick_label_is_cut_off_by_the_figure_edge(name):
    assert clipped_tick_labels(_drawn(name)) == []


def test_the_policy_figure_shows_new_connections_per_second():
    figure = _drawn("policy-scaling-rules")
    labels = [ax.get_ylabel() for ax in figure.axes]
    assert labels[0].startswith("new_connections_per_second")
    assert any(label.startswith("throughput") for label in labels)


def test_forest_rows_name_only_what_differs_and_the_title_says_the_rest():
    figure = _drawn("forest-split")
    rows = [label.get_text() for ax in figure.axes for label in ax.get_yticklabels()]
    # Every split contrast of the study ran with the same weights and load engine.
    assert rows
    assert not [row for row in rows if "weights=" in row or "load_engine" in row]
    assert "weights=" in figure.get_suptitle()
    lines = [line for row in rows for line in row.split("\n")]
    assert max(len(line) for line in lines) <= figures.FOREST_LABEL_WIDTH
