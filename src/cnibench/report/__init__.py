"""Reports of benchmark results: figures, tables, one self-contained HTML file, Markdown, PNGs.

This is the only layer of cnibench that imports Matplotlib (always on the Agg canvas, without
``pyplot``). In a notebook::

    from cnibench.results import load_results
    from cnibench import report

    df = load_results("results")
    report.verdict(df)                  # one row per planned contrast: ratio, CI, Holm p, line
    report.figure_forest(report.verdict(df))
    report.figure_bars(df, "egress", "throughput")
    report.table_runs(df, "egress", "gateway-on", cni="vxlan")
    report.write_report("results", html="report.html", markdown="report.md", png_dir="png")
    report.compare_results(load_results("main"), load_results("branch"), threshold=0.05)
"""

from __future__ import annotations

from cnibench.report.compare import compare_results
from cnibench.report.data import (
    bar_summary,
    load_request_times,
    load_split_records,
    request_time_summary,
)
from cnibench.report.document import ReportPaths, write_report
from cnibench.report.figures import (
    AxisUnit,
    axis_unit,
    figure_bars,
    figure_forest,
    figure_pod_scaling,
    figure_policy_scaling,
    figure_rr_ecdf,
    figure_rr_histogram,
    figure_runs,
    figure_split_distance,
    figure_split_shares,
    scaling_summary,
    split_distance_summary,
)
from cnibench.report.scrub import scrub_mapping, scrub_text
from cnibench.report.tables import table_runs
from cnibench.report.verdict import (
    interval_text,
    plan_contrasts,
    verdict,
    verdict_lines,
    verdict_summary,
)

__all__ = [
    "AxisUnit",
    "ReportPaths",
    "axis_unit",
    "bar_summary",
    "compare_results",
    "figure_bars",
    "figure_forest",
    "figure_pod_scaling",
    "figure_policy_scaling",
    "figure_rr_ecdf",
    "figure_rr_histogram",
    "figure_runs",
    "figure_split_distance",
    "figure_split_shares",
    "interval_text",
    "load_request_times",
    "load_split_records",
    "plan_contrasts",
    "request_time_summary",
    "scaling_summary",
    "scrub_mapping",
    "scrub_text",
    "split_distance_summary",
    "table_runs",
    "verdict",
    "verdict_lines",
    "verdict_summary",
    "write_report",
]
