"""Saturated runs (issue 48): the host's idle CPU share of each run, the flag below 5 %, and
what the tables, the matrix and the verdict make of a flagged run.

The ``/proc/stat`` lines are captured from this 2-CPU machine; the frames are built by hand in
the layout of :func:`cnibench.results.load_results`.
"""

from __future__ import annotations

import json
import math

import pandas as pd
import pytest

from cnibench import report
from cnibench.errors import CnibenchError, InsufficientDataError
from cnibench.metrics.host_cpu import CpuTimes, idle_share, parse_cpu_times, read_cpu_times
from cnibench.records import Measurement
from cnibench.report.data import SATURATION_IDLE_BOUND, saturated_runs
from cnibench.report.matrix import SATURATED, feature_matrix, matrix_legend, matrix_text
from cnibench.report.tables import table_runs
from cnibench.report.verdict import verdict_summary
from cnibench.scenarios.runner import host_idle

# Captured on this machine (2 CPUs, a VM: steal is counted), one second apart.
PROC_STAT_BEFORE = """cpu  766173 0 34859 184523 1283 0 2240 18020 0 0
cpu0 385834 0 17303 89478 747 0 945 9110 0 0
cpu1 380339 0 17555 95045 536 0 1295 8909 0 0
intr 1 2 3
"""
PROC_STAT_AFTER = """cpu  766263 0 34869 184613 1283 0 2240 18020 0 0
cpu0 385879 0 17308 89523 747 0 945 9110 0 0
cpu1 380384 0 17560 95090 536 0 1295 8909 0 0
intr 1 2 3
"""


def test_the_aggregate_cpu_line_counts_idle_and_iowait_as_idle_and_steal_as_busy():
    times = parse_cpu_times(PROC_STAT_BEFORE)
    assert times == CpuTimes(
        idle=184523 + 1283, total=766173 + 34859 + 184523 + 1283 + 2240 + 18020
    )


def test_niced_time_counts_as_idle_it_yields_to_the_run():
    # A nice-19 build using every spare tick (user 0, nice 180 of 190 ticks): the run had the
    # CPU it wanted, so the host is not saturated.
    before = parse_cpu_times("cpu  1000 5000 100 800 0 0 0 0 0 0\n")
    after = parse_cpu_times("cpu  1005 5180 105 800 0 0 0 0 0 0\n")
    assert idle_share(before, after) == pytest.approx(180 / 190)


def test_idle_share_is_the_idle_ticks_over_all_ticks_between_two_readings():
    share = idle_share(parse_cpu_times(PROC_STAT_BEFORE), parse_cpu_times(PROC_STAT_AFTER))
    assert share == pytest.approx(90 / 190)


def test_no_tick_between_readings_says_nothing_rather_than_a_share():
    same = parse_cpu_times(PROC_STAT_BEFORE)
    assert math.isnan(idle_share(same, same))
    assert host_idle(same, same) == []


def test_a_line_without_counters_is_an_error():
    with pytest.raises(CnibenchError, match="aggregate 'cpu' line"):
        parse_cpu_times("cpu0 1 2 3 4\nintr 5\n")


def test_this_hosts_proc_stat_reads():
    times = read_cpu_times()
    assert 0 < times.idle <= times.total


def test_a_run_records_host_idle_as_a_ratio_only_with_both_readings():
    before, after = CpuTimes(idle=800, total=1000), CpuTimes(idle=802, total=1100)
    assert host_idle(before, after) == [Measurement("host_idle", 0.02, "ratio")]
    assert host_idle(None, after) == []
    assert host_idle(before, None) == []


# --------------------------------------------------------------------------------------------


def _rows(condition, values, idle, *, noise=(0.0, 0.01, -0.01, 0.005, -0.005), start=0):
    """Five runs of one egress condition, one hour apart, each with its ``host_idle``."""
    out = []
    for repetition in range(5):
        run = {
            "session_id": "s1",
            "run_id": f"egress-vxlan-{condition}-r{repetition}",
            "time": f"2026-11-27T{start + repetition:02d}:00:00Z",
            "backend": "lab",
            "cni": "vxlan",
            "scenario": "egress",
            "condition": condition,
            "parameters": json.dumps({"gateway": condition.split("-")[1]}),
            "repetition": repetition,
            "verified": True,
            "status": "ok",
            "options": json.dumps({"encryption": ""}),
        }
        for metric, centre in values.items():
            value = centre * (1 + noise[repetition])
            out.append({**run, "metric": metric, "value": value, "unit": "bits/s"})
        if idle is not None:
            out.append({**run, "metric": "host_idle", "value": idle[repetition], "unit": "ratio"})
    return out


def _egress(on_factor: float, idle_on: list[float] | None, idle_off: list[float] | None):
    rows = _rows("gateway-off", {"throughput": 9e9}, idle_off)
    rows += _rows(
        "gateway-on",
        {"throughput": 9e9 * on_factor},
        idle_on,
        noise=(0.004, 0.0, -0.006, 0.01, -0.003),
    )
    return pd.DataFrame(rows)


CALM = [0.4, 0.45, 0.5, 0.42, 0.38]


@pytest.mark.parametrize(
    ("idle", "flagged"),
    [(0.049, True), (0.0, True), (0.05, False), (0.051, False), (0.9, False)],
    ids=["4.9 % flagged", "0 % flagged", "exactly 5 % not", "5.1 % not", "90 % not"],
)
def test_a_run_is_saturated_below_five_percent_idle(idle, flagged):
    runs = _egress(0.7, [idle, *CALM[1:]], CALM)
    found = saturated_runs(runs)
    assert SATURATION_IDLE_BOUND == 0.05
    assert found["run_id"].tolist() == (["egress-vxlan-gateway-on-r0"] if flagged else [])
    if flagged:
        assert found["host_idle"].item() == idle


def test_runs_without_the_record_are_never_guessed_saturated():
    runs = _egress(0.7, None, None)
    # A host-wide CPU of 100 % is the mean over nodes' exporters, not this host's idle time.
    cpu = runs[runs["metric"] == "throughput"].assign(metric="cpu", value=100.0, unit="%")
    assert saturated_runs(pd.concat([runs, cpu], ignore_index=True)).empty


def test_the_bound_must_be_a_share():
    with pytest.raises(ValueError, match="idle share"):
        saturated_runs(_egress(0.7, CALM, CALM), bound=5.0)


# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("on_factor", "call"),
    [(0.7, "significant"), (1.0, "equivalent")],
    ids=["a clear cost", "the same within 5 %"],
)
def test_a_contrast_with_a_saturated_run_is_no_finding_and_says_why(on_factor, call):
    calm = report.verdict(_egress(on_factor, CALM, CALM)).iloc[0]
    assert calm[call]  # the same runs decide it when the host had CPU to spare
    assert calm["saturated"] == 0
    table = report.verdict(_egress(on_factor, [0.01, 0.02, *CALM[2:]], CALM))
    row = table.iloc[0]
    assert row["saturated"] == 2
    assert not row["significant"]
    assert not row["equivalent"]
    assert math.isnan(row["p_value"])
    assert math.isnan(row["ci_low"])
    assert math.isnan(row["ci_high"])
    assert row["verdict"].startswith(
        "egress gateway on vxlan: throughput not decided: 2 run(s) saturated the host"
        " (< 5 % CPU idle) (×"
    )
    assert " CI " not in row["verdict"]
    assert "same within" not in row["verdict"]


def test_the_summary_heading_counts_the_contrasts_set_aside():
    table = report.verdict(_egress(0.7, CALM, [0.03, *CALM[1:]]))
    heading, *lines = verdict_summary(table)
    assert heading.startswith("verdict: 0 tested contrast(s) in 0 question(s); 1 more stated")
    assert heading.endswith("; 1 not decided: a run on a side saturated the host (< 5 % CPU idle):")
    assert lines == [f"  {table['verdict'].item()}"]
    calm = verdict_summary(report.verdict(_egress(0.7, CALM, CALM)))
    assert not any("not decided" in line for line in calm)


def test_host_idle_is_neither_a_contrast_nor_a_matrix_row():
    table = report.verdict(_egress(0.7, CALM, CALM))
    assert "host_idle" not in set(table["metric"])
    assert "host_idle" not in set(feature_matrix(table)["metric"])


def _words(matrix: pd.DataFrame) -> str:
    return " ".join(" ".join(matrix_text(matrix, title="t")).split())


def test_the_matrix_marks_a_saturated_cell_and_its_legend_says_why():
    matrix = feature_matrix(report.verdict(_egress(0.7, CALM, [0.03, *CALM[1:]])))
    cell = matrix.loc[matrix["metric"] == "throughput", "cell"].item()
    assert cell.startswith("×0.7")
    assert cell.endswith(f" {SATURATED}")
    legend = matrix_legend(matrix)
    assert f"{SATURATED} a run on a side left less than 5 % of the host's CPU idle" in legend
    assert f"{SATURATED} a run on a side left less than 5 %" in _words(matrix)
    # Calm runs: the cell is called, and neither the mark nor the legend entry appears.
    calm = feature_matrix(report.verdict(_egress(0.7, CALM, CALM)))
    assert not calm["cell"].str.contains(SATURATED).any()
    assert "host's CPU idle" not in matrix_legend(calm)


def test_the_run_table_marks_each_saturated_run():
    table = table_runs(_egress(0.7, CALM, [0.03, 0.012, *CALM[2:]]), "egress", "gateway-off")
    assert list(table.index[:3]) == [
        "Run 1 ⊘ saturated, 3.0 % CPU idle",
        "Run 2 ⊘ saturated, 1.2 % CPU idle",
        "Run 3",
    ]
    assert "host_idle [ratio]" in table.columns


def test_a_forest_of_saturated_contrasts_says_why_it_has_no_interval():
    # Every contrast set aside (a notebook on a busy machine): a figure that says so, not an
    # error (the docs' notebook example draws the forest of whatever its session gave).
    table = report.verdict(_egress(0.7, [0.01] * 5, CALM))
    assert (table["saturated"] > 0).all()
    figure = report.figure_forest(table)
    texts = [text.get_text() for text in figure.texts]
    assert texts == [
        f"No contrast has an interval to plot ({len(table)} set aside: a run saturated the host)."
    ]
    with pytest.raises(InsufficientDataError):
        report.figure_forest(table.iloc[0:0])
