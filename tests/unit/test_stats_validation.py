"""cnibench.stats rejects bad input with the right cnibench error and a message naming it."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from cnibench import stats
from cnibench.errors import ConfigError, InsufficientDataError

ONE_SAMPLE: dict[str, Callable[[Any], object]] = {
    "describe": stats.describe,
    "truncated_mean": stats.truncated_mean,
    "outlier_runs": stats.outlier_runs,
    "confidence_interval": stats.confidence_interval,
    "compare-baseline": lambda values: stats.compare(values, [1.0, 2.0]),
    "compare-treatment": lambda values: stats.compare([1.0, 2.0], values),
    "histogram": stats.histogram,
    "windowed_shares": lambda values: stats.windowed_shares(values, ["a"] * len(values)),
}


@pytest.mark.parametrize("function", list(ONE_SAMPLE))
def test_empty_input_is_insufficient_data(function: str) -> None:
    with pytest.raises(InsufficientDataError, match="is empty"):
        ONE_SAMPLE[function]([])


@pytest.mark.parametrize("function", list(ONE_SAMPLE))
def test_nan_input_is_insufficient_data(function: str) -> None:
    with pytest.raises(InsufficientDataError, match=r"1 NaN or infinite value\(s\).*index 1"):
        ONE_SAMPLE[function]([1.0, math.nan, 3.0])


@pytest.mark.parametrize("function", list(ONE_SAMPLE))
def test_infinite_input_is_insufficient_data(function: str) -> None:
    with pytest.raises(InsufficientDataError, match=r"NaN or infinite.*index 2 \(inf\)"):
        ONE_SAMPLE[function]([1.0, 2.0, math.inf])


def test_two_dimensional_input_is_insufficient_data() -> None:
    with pytest.raises(InsufficientDataError, match=r"one-dimensional.*\(2, 2\)"):
        stats.describe([[1.0, 2.0], [3.0, 4.0]])


def test_non_numeric_input_is_insufficient_data() -> None:
    with pytest.raises(InsufficientDataError, match="must be numbers"):
        stats.describe(["fast", "slow"])


BAD_LEVELS = [0, 1, 1.5, -0.1, math.nan]
WITH_LEVEL: dict[str, Callable[[float], object]] = {
    "confidence_interval": lambda level: stats.confidence_interval([1.0, 2.0], level=level),
    "compare": lambda level: stats.compare([1.0, 2.0], [2.0, 3.0], level=level),
    "splitting_error": lambda level: stats.splitting_error({"v1": 1}, {"v1": 1}, level=level),
    "requests_needed": lambda level: stats.requests_needed([1, 1], tolerance=0.1, level=level),
}


@pytest.mark.parametrize("level", BAD_LEVELS, ids=lambda level: f"level={level}")
@pytest.mark.parametrize("function", list(WITH_LEVEL))
def test_level_outside_open_unit_interval_is_config_error(function: str, level: float) -> None:
    with pytest.raises(ConfigError, match=r"level must be strictly between 0 and 1.*got"):
        WITH_LEVEL[function](level)


def test_negative_weight_is_config_error_naming_backend() -> None:
    with pytest.raises(ConfigError, match=r"weight of backend 'v2' must be a finite number >= 0"):
        stats.splitting_error({"v1": 5, "v2": 5}, {"v1": 60, "v2": -40})


def test_all_zero_weights_are_config_error() -> None:
    with pytest.raises(ConfigError, match="weights are all zero"):
        stats.splitting_error({"v1": 5, "v2": 5}, {"v1": 0, "v2": 0})


def test_counted_backend_without_weight_is_config_error_naming_it() -> None:
    with pytest.raises(ConfigError, match=r"backend 'v3' has requests but no weight"):
        stats.splitting_error({"v1": 5, "v2": 5, "v3": 1}, {"v1": 60, "v2": 40})


def test_weighted_backend_without_count_is_config_error_naming_it() -> None:
    with pytest.raises(ConfigError, match=r"backend 'v2' has a weight but no count"):
        stats.splitting_error({"v1": 5}, {"v1": 60, "v2": 40})


def test_windowed_backend_without_weight_is_config_error_naming_it() -> None:
    with pytest.raises(ConfigError, match=r"backend 'rogue' answered requests but has no weight"):
        stats.windowed_shares([0.0, 1.0], ["v1", "rogue"], weights={"v1": 1})


@pytest.mark.parametrize("count", [-1, 2.5, math.nan], ids=["negative", "fraction", "nan"])
def test_bad_count_is_insufficient_data_naming_backend(count: float) -> None:
    with pytest.raises(InsufficientDataError, match=r"count of backend 'v2' must be a whole"):
        stats.splitting_error({"v1": 5, "v2": count}, {"v1": 1, "v2": 1})


def test_no_requests_at_all_is_insufficient_data() -> None:
    with pytest.raises(InsufficientDataError, match="no requests were counted"):
        stats.splitting_error({"v1": 0, "v2": 0}, {"v1": 1, "v2": 1})


def test_unknown_method_is_config_error() -> None:
    with pytest.raises(ConfigError, match=r"method must be one of 't', 'bootstrap', got 'z'"):
        stats.confidence_interval([1.0, 2.0], method="z")


@pytest.mark.parametrize("proportion", [0.5, -0.1, 0.9])
def test_truncation_proportion_outside_range_is_config_error(proportion: float) -> None:
    with pytest.raises(ConfigError, match=r"proportion must be in \[0, 0.5\)"):
        stats.truncated_mean([1.0, 2.0, 3.0], proportion=proportion)


@pytest.mark.parametrize("window", [0.0, -5.0, math.inf], ids=["zero", "negative", "inf"])
def test_non_positive_window_is_config_error(window: float) -> None:
    with pytest.raises(ConfigError, match="window must be a positive finite number"):
        stats.windowed_shares([0.0], ["a"], window=window)


def test_windowed_lengths_must_agree() -> None:
    with pytest.raises(InsufficientDataError, match="backends has 1 labels but timestamps has 2"):
        stats.windowed_shares([0.0, 1.0], ["a"])


def test_missing_backend_label_is_insufficient_data() -> None:
    with pytest.raises(InsufficientDataError, match=r"missing label.*index 1"):
        stats.windowed_shares([0.0, 1.0], np.array(["a", None], dtype=object))


@pytest.mark.parametrize("tolerance", [0.0, -0.01, 1.0], ids=["zero", "negative", "one"])
def test_bad_tolerance_is_config_error(tolerance: float) -> None:
    with pytest.raises(ConfigError, match="tolerance"):
        stats.requests_needed({"v1": 1, "v2": 1}, tolerance=tolerance)


def test_log_histogram_of_non_positive_values_is_insufficient_data() -> None:
    with pytest.raises(InsufficientDataError, match=r"positive values.*minimum of 0\.0"):
        stats.histogram([0.0, 1.0, 2.0], log=True)


def test_unknown_bin_rule_is_config_error() -> None:
    with pytest.raises(ConfigError, match="bins='magic' cannot be used"):
        stats.histogram([1.0, 2.0], bins="magic")


@pytest.mark.parametrize("rng", ["seed", 1.5, -3], ids=["string", "float", "negative"])
def test_bad_rng_is_config_error(rng: Any) -> None:
    with pytest.raises(ConfigError, match=r"rng must be a numpy\.random\.Generator"):
        stats.confidence_interval([1.0, 2.0, 4.0], method="bootstrap", rng=rng)


def test_errors_are_value_errors() -> None:
    assert issubclass(ConfigError, ValueError)
    assert issubclass(InsufficientDataError, ValueError)
