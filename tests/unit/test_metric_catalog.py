"""Each metric is declared once (``cnibench.metric_catalog.CATALOG``), and the gate and the
feature matrix read it: change a metric's direction there and both follow (issue 50)."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from cnibench import report
from cnibench.metric_catalog import CATALOG, Direction, Metric, direction_of
from cnibench.report.gate.directions import (
    METRIC_DIRECTIONS,
    gated_direction,
    zero_is_impossible,
)
from cnibench.report.matrix import DETECTABLE, GAIN, SHORT_METRICS, feature_matrix

START = pd.Timestamp("2026-12-06T08:00:00Z")
OFF = [9.0e9, 9.2e9, 8.8e9, 9.1e9, 8.9e9, 9.05e9, 8.95e9, 9.0e9, 9.1e9, 8.9e9]


def _egress(ratio: float) -> pd.DataFrame:
    rows = []
    for state, values in (("off", OFF), ("on", [v * ratio for v in OFF[::-1]])):
        for k, value in enumerate(values):
            rows.append(
                {
                    "session_id": "A",
                    "run_id": f"{state}-{k}",
                    "time": START + pd.Timedelta(seconds=4 * k + (state == "on")),
                    "scenario": "egress",
                    "cni": "cilium",
                    "condition": f"gateway-{state}",
                    "parameters": json.dumps({"gateway": state}),
                    "repetition": k,
                    "metric": "throughput",
                    "value": value,
                    "unit": "bits/s",
                    "verified": True,
                    "status": "ok",
                }
            )
    return pd.DataFrame(rows)


def _throughput_cell(ratio: float) -> str:
    matrix = feature_matrix(report.verdict(_egress(ratio)))
    return str(matrix[matrix["metric"] == "throughput"]["cell"].item())


def test_a_detectable_fall_is_a_cost_and_a_rise_a_gain() -> None:
    assert _throughput_cell(0.5).endswith(DETECTABLE)
    assert _throughput_cell(1.6).endswith(GAIN)


def test_a_direction_changed_in_the_catalog_is_followed_by_the_gate_and_the_matrix(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert gated_direction("throughput") is Direction.HIGHER_IS_BETTER
    flipped = Metric("throughput", Direction.LOWER_IS_BETTER, gated=True)
    monkeypatch.setitem(CATALOG, "throughput", flipped)
    assert gated_direction("throughput") is Direction.LOWER_IS_BETTER
    assert METRIC_DIRECTIONS["throughput"] is Direction.LOWER_IS_BETTER
    assert _throughput_cell(1.6).endswith(DETECTABLE)  # more is now worse: a cost
    assert _throughput_cell(0.5).endswith(GAIN)


def test_a_metric_declared_gated_is_gated_and_one_declared_not_is_not(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert gated_direction("policy_enforcement_time") is None
    assert direction_of("policy_enforcement_time") is Direction.LOWER_IS_BETTER
    monkeypatch.setitem(
        CATALOG,
        "policy_enforcement_time",
        Metric("policy_enforcement_time", Direction.LOWER_IS_BETTER, gated=True),
    )
    assert gated_direction("policy_enforcement_time") is Direction.LOWER_IS_BETTER
    assert "policy_enforcement_time" in METRIC_DIRECTIONS
    assert zero_is_impossible("policy_enforcement_time")  # a time of 0 is a failed probe


def test_per_node_resources_are_one_entry_by_their_prefix() -> None:
    for metric in ("cpu@egress-gw", "cpu@agent", "ram@agent"):
        assert direction_of(metric) is Direction.LOWER_IS_BETTER
    assert gated_direction("cpu@egress-gw") is Direction.LOWER_IS_BETTER
    assert gated_direction("ram@agent") is None
    assert not zero_is_impossible("cpu@agent")
    assert "cpu@" not in METRIC_DIRECTIONS  # the prefix is no metric a run records


def test_the_matrix_s_short_names_are_the_catalog_s(monkeypatch: pytest.MonkeyPatch) -> None:
    assert SHORT_METRICS["requests_per_second"] == "req/s"
    monkeypatch.setitem(
        CATALOG,
        "requests_per_second",
        Metric("requests_per_second", Direction.HIGHER_IS_BETTER, gated=True, short="rps"),
    )
    assert SHORT_METRICS["requests_per_second"] == "rps"
