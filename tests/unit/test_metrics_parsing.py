"""Parsing and reducing real Prometheus answers (fixtures/prometheus), without a server."""

from __future__ import annotations

import json
import math
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from cnibench.errors import ConfigError, MetricsError
from cnibench.metrics import (
    MetricsClient,
    MetricsSettings,
    Series,
    matrix_from_response,
    parse_matrix,
    reduce_series,
    series_by_instance,
)

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "prometheus"


def _body(name: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((FIXTURES / f"{name}.json").read_text())
    return data


def _raw_values(name: str, instance: str) -> list[float]:
    """Sample values of one instance, read straight from the JSON (independent of the parser)."""
    for item in _body(name)["data"]["result"]:
        if item["metric"].get("instance") == instance:
            return [float(value) for _, value in item["values"]]
    raise AssertionError(f"{instance} not in fixture {name}")


def test_every_fixture_records_its_command() -> None:
    bodies = sorted(path.stem for path in FIXTURES.glob("*.json"))
    commands = sorted(path.stem for path in FIXTURES.glob("*.cmd"))
    assert bodies
    assert bodies == commands


def test_cpu_fixture_has_one_series_per_instance() -> None:
    series = series_by_instance(matrix_from_response(_body("cpu_percent_two_nodes")))
    assert sorted(series) == ["127.0.0.1:19101", "node-a"]


def test_parsed_values_and_times_match_the_json() -> None:
    series = series_by_instance(matrix_from_response(_body("ram_mb_two_nodes")))["node-a"]
    raw = next(
        item
        for item in _body("ram_mb_two_nodes")["data"]["result"]
        if item["metric"]["instance"] == "node-a"
    )
    assert series.timestamps == tuple(float(stamp) for stamp, _ in raw["values"])
    assert series.values == tuple(float(value) for _, value in raw["values"])


def test_labels_are_kept() -> None:
    series = matrix_from_response(_body("ram_mb_two_nodes"))
    assert all(item.labels["job"] == "node" for item in series)


def test_mean_reduction_of_cpu_fixture() -> None:
    values = _raw_values("cpu_percent_two_nodes", "node-a")
    series = series_by_instance(matrix_from_response(_body("cpu_percent_two_nodes")))["node-a"]
    assert reduce_series(series) == pytest.approx(sum(values) / len(values))


@pytest.mark.parametrize(
    ("reducer", "pick"),
    [
        ("min", lambda v: sorted(v)[0]),
        ("max", lambda v: sorted(v)[-1]),
        ("last", lambda v: v[-1]),
        ("median", lambda v: sorted(v)[len(v) // 2] if len(v) % 2 else None),
    ],
    ids=["min", "max", "last", "median"],
)
def test_other_reducers_of_receive_fixture(reducer: Any, pick: Any) -> None:
    values = _raw_values("receive_rate_lo_node_a", "node-a")
    expected = pick(values)
    if expected is None:  # even count: mean of the two middle values
        ordered = sorted(values)
        expected = (ordered[len(values) // 2 - 1] + ordered[len(values) // 2]) / 2
    series = matrix_from_response(_body("receive_rate_lo_node_a"))[0]
    assert reduce_series(series, reducer) == pytest.approx(expected)


def test_nan_samples_are_ignored() -> None:
    series = Series(
        labels={"instance": "n"}, timestamps=(1.0, 2.0, 3.0), values=(1.0, math.nan, 5.0)
    )
    assert reduce_series(series) == 3.0


def test_all_nan_series_cannot_be_reduced() -> None:
    series = matrix_from_response(_body("nan_values"))[0]
    with pytest.raises(MetricsError, match="no numeric sample"):
        reduce_series(series)


def test_unknown_reducer_is_a_config_error() -> None:
    series = Series(labels={}, timestamps=(1.0,), values=(1.0,))
    with pytest.raises(ConfigError, match="'average'"):
        reduce_series(series, "average")  # type: ignore[arg-type]


def test_unaggregated_query_is_ambiguous_per_instance() -> None:
    series = matrix_from_response(_body("cpu_idle_per_core_unaggregated"))
    assert len(series) == 2
    with pytest.raises(MetricsError, match=r"by \(instance\)"):
        series_by_instance(series)


def test_empty_result_parses_to_no_series() -> None:
    assert matrix_from_response(_body("empty_result")) == []


def test_error_body_raises_with_server_message() -> None:
    with pytest.raises(MetricsError, match=r"bad_data.*unclosed left parenthesis"):
        matrix_from_response(_body("bad_query_error"))


def test_instant_vector_is_not_a_matrix() -> None:
    body = {"status": "success", "data": {"resultType": "vector", "result": []}}
    with pytest.raises(MetricsError, match="'vector'"):
        matrix_from_response(body)


@pytest.mark.parametrize(
    "item",
    [
        {"metric": {"instance": "a"}},
        {"metric": {"instance": "a"}, "values": [[1, "not-a-number"]]},
        {"values": [[1, "1"]]},
        {"metric": {}, "values": [[1]]},
    ],
    ids=["no-values", "bad-number", "no-labels", "short-pair"],
)
def test_malformed_series_raise_metrics_error(item: dict[str, Any]) -> None:
    with pytest.raises(MetricsError, match="malformed Prometheus matrix series #0"):
        parse_matrix([item])


def test_settings_reject_bad_window() -> None:
    with pytest.raises(ConfigError, match="'1 minute'"):
        MetricsSettings(window="1 minute")


@pytest.mark.parametrize("step", [0.0, -1.0, math.inf], ids=["zero", "negative", "infinite"])
def test_settings_reject_bad_step(step: float) -> None:
    with pytest.raises(ConfigError, match="invalid query step"):
        MetricsSettings(step=step)


def test_client_rejects_url_without_scheme() -> None:
    with pytest.raises(ConfigError, match=r"'127\.0\.0\.1:9090'"):
        MetricsClient("127.0.0.1:9090")


def test_client_rejects_naive_datetime_before_any_request() -> None:
    # Port 9 (discard) is never contacted: validation fails first.
    with (
        MetricsClient("http://127.0.0.1:9") as client,
        pytest.raises(ConfigError, match="time zone"),
    ):
        client.query_window("up", datetime(2026, 1, 1), datetime(2026, 1, 1, 0, 1))


def test_client_rejects_reversed_window_before_any_request() -> None:
    start = datetime(2026, 1, 1, 0, 1, tzinfo=UTC)
    with MetricsClient("http://127.0.0.1:9") as client, pytest.raises(ConfigError, match="empty"):
        client.query_window("up", start, start.timestamp() - 60)
