"""The feature × CNI matrix as a reader meets it: the features a platform team switches on
first, and a feature measured only with threaded receive (``napi=threaded``, for per-node CPU)
still showing that its throughput was left out on purpose."""

from __future__ import annotations

import json

import pandas as pd

from cnibench import report
from cnibench.report.matrix import (
    INSTRUMENTED_CELL,
    LOSSY,
    feature_matrix,
    matrix_rows,
    matrix_text,
)

_UNITS = {"throughput": "bits/s", "rtt_mean": "us", "new_connections_per_second": "1/s"}


def _rows(scenario, cni, condition, parameters, values, start):
    """Five runs of one condition, one hour apart from ``start``, in the tidy layout."""
    _, _, rest = cni.partition(":")
    options = dict(item.split("=", 1) for item in rest.split(",") if item)
    out = []
    for repetition in range(5):
        for metric, centre in values.items():
            out.append(
                {
                    "session_id": "s1",
                    "run_id": f"{scenario}-{cni}-{condition}-r{repetition}",
                    "time": f"2026-11-27T{start + repetition:02d}:00:00Z",
                    "backend": "kube",
                    "cni": cni,
                    "scenario": scenario,
                    "condition": condition,
                    "parameters": json.dumps(parameters, sort_keys=True),
                    "repetition": repetition,
                    "metric": metric,
                    "value": centre * (1 + 0.01 * (repetition - 2)),
                    "unit": _UNITS.get(metric, "cores"),
                    "verified": True,
                    "status": "ok",
                    "options": json.dumps({"encryption": "", **options}),
                }
            )
    return out


def _baseline_and_egress(egress_cni: str) -> pd.DataFrame:
    """The baseline's cross-node contrast (the verdict lists the baseline first) and the egress
    gateway."""
    rows = []
    for placement, factor in (("same-node", 1.0), ("cross-node", 0.5)):
        rows += _rows(
            "baseline",
            "flannel",
            placement,
            {"placement": placement, "load": "idle"},
            {"throughput": 20e9 * factor},
            start=0,
        )
    for gateway, factor in (("off", 1.0), ("on", 0.7)):
        rows += _rows(
            "egress",
            egress_cni,
            f"gateway-{gateway}",
            {"gateway": gateway},
            {"throughput": 9e9 * factor, "cpu@egress-gw": 0.5 - 0.4 * factor},
            start=6,
        )
    return pd.DataFrame(rows)


def test_the_egress_gateway_leads_the_matrix_whatever_order_the_runs_were_taken():
    table = report.verdict(_baseline_and_egress("flannel"))
    assert table["scenario"].iloc[0] == "baseline"
    _, rows = matrix_rows(feature_matrix(table))
    labels = [row[0] for row in rows]
    assert labels[0] == "egress gateway"
    assert "cross-node" in labels


def test_a_feature_measured_only_with_the_instrument_shows_why_its_throughput_is_missing():
    matrix = feature_matrix(report.verdict(_baseline_and_egress("flannel:napi=threaded")))
    egress = matrix[matrix["row"] == "egress gateway"]
    cells = dict(zip(egress["metric"], egress["cell"], strict=True))
    assert cells["throughput"] == INSTRUMENTED_CELL
    assert cells["cpu@egress-gw"].startswith("×")


def _egress_with_retransmits(rate_on: float) -> pd.DataFrame:
    rows = []
    for gateway, factor, rate in (("off", 1.0, 0.0005), ("on", 0.7, rate_on)):
        rows += _rows(
            "egress",
            "flannel",
            f"gateway-{gateway}",
            {"gateway": gateway},
            {"throughput": 9e9 * factor, "retransmit_rate": rate},
            start=0,
        )
    frame = pd.DataFrame(rows)
    frame.loc[frame["metric"] == "retransmit_rate", "unit"] = "ratio"
    return frame


def test_a_throughput_cell_with_lossy_runs_is_marked_and_the_legend_says_why():
    runs = _egress_with_retransmits(0.13)
    matrix = feature_matrix(report.verdict(runs), runs=runs)
    cell = matrix[(matrix["row"] == "egress gateway") & (matrix["metric"] == "throughput")]
    assert cell["cell"].item().endswith(LOSSY)
    assert "retransmitted more than 1 %" in _words(matrix)
    # Without the loss, and without the runs, no mark and no legend entry.
    for quiet, given in ((_egress_with_retransmits(0.001), True), (runs, False)):
        plain = feature_matrix(report.verdict(quiet), runs=quiet if given else None)
        assert not plain["cell"].str.contains(LOSSY).any()
        assert "retransmitted" not in _words(plain)


def _words(matrix: pd.DataFrame) -> str:
    """The terminal matrix as one line of words (the legend wraps anywhere)."""
    return " ".join(" ".join(matrix_text(matrix, title="t")).split())


def test_the_legend_explains_only_what_the_matrix_shows():
    plain = _words(feature_matrix(report.verdict(_baseline_and_egress("flannel"))))
    assert "● a cost, ≈ same within ±5 %, ?N undecided" in plain
    assert INSTRUMENTED_CELL not in plain
    assert "different sessions" not in plain
    napi = _words(feature_matrix(report.verdict(_baseline_and_egress("flannel:napi=threaded"))))
    # Plain words for what napi=threaded does (issue 49), not a name a reader must look up.
    assert f"{INSTRUMENTED_CELL}: run with napi=threaded (each node receives packets in" in napi
    assert "instrument" not in napi
