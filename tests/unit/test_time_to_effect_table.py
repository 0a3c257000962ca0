"""How fast changes take effect, per configuration (``report.effects``): P50, P90 and P99 over
the runs with distribution-free intervals, the leaked attempts beside them, as rows of the
feature matrix (P50, P90) and as the report's table (all three). Checked on synthetic runs
(what enters and how it is labelled) and on the committed kind timings
(docs/results/policy-kind-2026-12-06, services-kind-2026-12-06)."""

from __future__ import annotations

import json
import math
import statistics
import warnings
from pathlib import Path

import pandas as pd
import pytest

from cnibench import load_results, report
from cnibench.report.effects import effect_table, time_to_effect
from cnibench.report.matrix import feature_matrix, matrix_legend, matrix_rows, matrix_text

RESULTS = Path(__file__).resolve().parents[2] / "docs" / "results"


def _rows(cni: str, rules: int, times: list[float], leaks: list[int], status: str = "ok"):
    rows = []
    for i, (seconds, leaked) in enumerate(zip(times, leaks, strict=True)):
        run = f"policy-{cni}-r{rules}-{i}-{status}"
        common = {
            "session_id": f"s-{cni}",
            "run_id": run,
            "cni": cni,
            "scenario": "policy",
            "condition": f"on-cross-node-r{rules}-c1",
            "status": status,
            "verified": True,
            "pair": None,
            "parameters": json.dumps({"policy": "on", "rules": rules}),
        }
        rows.append({**common, "metric": "policy_enforcement_time", "value": seconds, "unit": "s"})
        rows.append(
            {**common, "metric": "policy_enforcement_time_leaks", "value": leaked, "unit": "count"}
        )
    return rows


FAST = [0.07, 0.08, 0.09, 0.1, 0.11, 0.08, 0.09, 0.12, 0.1, 0.095]
SLOW = [0.5, 0.7, 0.6, 0.65, 0.55, 0.8, 0.62, 0.58, 0.71, 0.66, 0.6, 0.9]


def _runs() -> pd.DataFrame:
    return pd.DataFrame(
        [
            *_rows("a", 0, FAST, [0] * 10),
            *_rows("a", 1000, SLOW, [3, 0, 5, 1, 0, 0, 2, 0, 0, 7, 0, 0]),
            *_rows("a", 1000, [40.0], [0], status="failed"),  # never enters
        ]
    )


def test_each_change_gets_its_percentiles_per_configuration_from_its_ok_runs() -> None:
    table = time_to_effect(_runs())
    assert set(table["change"]) == {
        "policy takes effect (0 rules)",
        "policy takes effect (1000 rules)",
    }
    slow = table[table["change"] == "policy takes effect (1000 rules)"].set_index("percentile")
    assert list(slow.index) == [50, 90, 99]
    assert slow.loc[50, "estimate"] == pytest.approx(statistics.median(SLOW))
    assert slow.loc[50, "low"] <= slow.loc[50, "estimate"] <= slow.loc[50, "high"]
    assert (slow["n"] == len(SLOW)).all()  # the failed run is not one of them
    assert math.isinf(slow.loc[90, "high"])
    assert math.isfinite(slow.loc[90, "low"])
    assert slow.loc[50, "leaks_median"] == 0
    assert slow.loc[50, "leaks_max"] == 7
    assert slow.loc[50, "runs_with_leaks"] == 5
    fast = table[table["change"] == "policy takes effect (0 rules)"]
    assert (fast["runs_with_leaks"] == 0).all()


def test_the_report_table_states_every_percentile_and_the_leaks() -> None:
    header, rows = effect_table(_runs())
    assert header[-4:] == ["P50 (s)", "P90 (s)", "P99 (s)", "leaked"]
    by_change = {row[0]: row for row in rows}
    slow = by_change["policy takes effect (1000 rules)"]
    assert slow[1] == "a"
    assert slow[2] == str(len(SLOW))
    assert slow[3].startswith(f"{statistics.median(SLOW):.3f} (")
    assert "≥" in slow[4]
    assert "≥" in slow[5]
    assert slow[6] == "median 0, at most 7; in 5 of 12 runs"
    assert by_change["policy takes effect (0 rules)"][6] == "none"


def test_no_timed_change_gives_no_rows() -> None:
    runs = _runs()
    _header, rows = effect_table(runs[~runs["metric"].str.startswith("policy_enforcement")])
    assert rows == []
    assert time_to_effect(runs.iloc[0:0]).empty


@pytest.fixture(scope="module")
def policy_kind() -> tuple[pd.DataFrame, pd.DataFrame]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        runs = load_results(RESULTS / "policy-kind-2026-12-06", sessions="all")
        return runs, report.verdict(runs)


def test_the_matrix_has_a_row_per_percentile_in_each_configuration_s_column(
    policy_kind: tuple[pd.DataFrame, pd.DataFrame],
) -> None:
    runs, table = policy_kind
    matrix = feature_matrix(table, runs=runs)
    timed = matrix[matrix["state"] == "time"]
    assert set(timed["row"]) == {"policy takes effect (0 rules)"}
    assert sorted(timed["metric"]) == ["P50", "P50", "P90", "P90"]
    assert set(timed["column"]) == {"kube-router", "cilium"}
    values = runs[(runs["metric"] == "policy_enforcement_time") & (runs["status"] == "ok")]
    for cni, group in values.groupby("cni"):
        cell = timed[(timed["column"] == cni) & (timed["metric"] == "P50")]["cell"].item()
        assert cell.startswith(f"{group['value'].median():.3f} (")
    _header, rows = matrix_rows(matrix)
    assert rows[-2][:2] == ["policy takes effect (0 rules)", "P50 (s)"]
    text = "\n".join(matrix_text(matrix, title="What each feature costs"))
    assert "policy takes effect (0 rules)" in text
    assert "P90" in text
    assert "distribution-free 95 % interval" in matrix_legend(matrix)
    assert not (feature_matrix(table)["state"] == "time").any()  # without runs: none


def test_the_committed_service_timings_fill_the_report_table() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        runs = load_results(RESULTS / "services-kind-2026-12-06", sessions="all")
    _header, rows = effect_table(runs)
    cells = {(row[0], row[1]) for row in rows}
    for cni in ("flannel", "flannel:kube-proxy=nftables", "cilium"):
        for n in (100, 1000):
            assert (f"a new Service answers ({n} Services)", cni) in cells
    assert all(int(row[2].split()[0]) >= 10 for row in rows)
    leaked = runs[runs["metric"] == "new_service_time_leaks"]["value"]
    said = [row[-1] for row in rows]
    if leaked.max() == 0:
        assert set(said) == {"none"}
    else:
        assert any(s.startswith("median") for s in said)
