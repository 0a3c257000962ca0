"""Named PromQL queries: the text sent to Prometheus, written out by hand here."""

from __future__ import annotations

import pytest

from cnibench.errors import ConfigError
from cnibench.metrics import (
    CPU_PERCENT,
    NAMED_QUERIES,
    RAM_MB,
    RECEIVE_RATE,
    RECEIVE_RATE_BITS,
    label_selector,
    promql_string,
    validate_duration,
)


def test_cpu_percent_is_seed_formula_with_window() -> None:
    assert CPU_PERCENT.render(window="7s") == (
        '100 - 100 * avg by (instance) (irate(node_cpu_seconds_total{mode="idle"}[7s]))'
    )


def test_cpu_percent_default_window_is_five_seconds() -> None:
    assert "[5s]" in CPU_PERCENT.render()


def test_ram_mb_without_matchers_has_empty_selectors() -> None:
    assert RAM_MB.render() == (
        "(node_memory_MemTotal_bytes{} - node_memory_MemAvailable_bytes{}) / 1024 / 1024"
    )


def test_ram_mb_filters_both_operands_by_instance() -> None:
    assert RAM_MB.render(instances=["node-a"]) == (
        '(node_memory_MemTotal_bytes{instance=~"^(?:node\\\\-a)$"}'
        ' - node_memory_MemAvailable_bytes{instance=~"^(?:node\\\\-a)$"}) / 1024 / 1024'
    )


def test_receive_rate_uses_device_regex_and_sums_per_instance() -> None:
    assert RECEIVE_RATE.render(device_regex="^cb[0-9a-f]+-.*$", window="10s") == (
        "sum by (instance) (irate(node_network_receive_bytes_total"
        '{device=~"^cb[0-9a-f]+-.*$"}[10s]))'
    )


def test_receive_rate_default_device_regex_is_seed_regex() -> None:
    assert 'device=~"(?i)^(ens|eth).+$"' in RECEIVE_RATE.render()


def test_receive_rate_bits_is_eight_times_the_bytes_query() -> None:
    assert RECEIVE_RATE_BITS.render() == "8 * " + RECEIVE_RATE.render()


@pytest.mark.parametrize(
    ("name", "unit"),
    [
        ("cpu_percent", "%"),
        ("ram_mb", "MB"),
        ("receive_rate", "bytes/s"),
        ("receive_rate_bits", "bits/s"),
    ],
    ids=["cpu", "ram", "receive-bytes", "receive-bits"],
)
def test_registry_holds_query_with_unit(name: str, unit: str) -> None:
    assert NAMED_QUERIES[name].unit == unit


def test_registry_is_read_only() -> None:
    with pytest.raises(TypeError):
        NAMED_QUERIES["cpu_percent"] = RAM_MB  # type: ignore[index]


def test_extra_label_matchers_follow_instance_matcher() -> None:
    assert label_selector(instances=["a", "b"], labels={"job": "node"}) == (
        'instance=~"^(?:a|b)$", job="node"'
    )


def test_instance_matcher_escapes_regex_characters() -> None:
    # The dots of an address must not match any character (10.0.0.1 vs 10.0.0.11 / 10a0b0c1).
    assert label_selector(instances=["10.0.0.1:9100"]) == (
        'instance=~"^(?:10\\\\.0\\\\.0\\\\.1:9100)$"'
    )


def test_empty_instances_is_an_error() -> None:
    with pytest.raises(ConfigError, match="instances must not be empty"):
        label_selector(instances=[])


def test_invalid_label_name_is_an_error() -> None:
    with pytest.raises(ConfigError, match="'bad-name'"):
        label_selector(labels={"bad-name": "x"})


@pytest.mark.parametrize(
    ("text", "literal"),
    [
        ("plain", '"plain"'),
        ('say "hi"', '"say \\"hi\\""'),
        ("a\\.b", '"a\\\\.b"'),
        ("line\nbreak", '"line\\nbreak"'),
    ],
    ids=["plain", "quotes", "backslash", "newline"],
)
def test_promql_string_escapes_like_go(text: str, literal: str) -> None:
    assert promql_string(text) == literal


@pytest.mark.parametrize("value", ["5s", "250ms", "1m30s", "2h", "1d"])
def test_valid_durations_pass(value: str) -> None:
    assert validate_duration(value) == value


@pytest.mark.parametrize(
    "value",
    ["5", "", "0s", "5 s", "-5s", "1.5s", "5S", "5sec"],
    ids=["no-unit", "empty", "zero", "space", "negative", "fraction", "upper-case", "word"],
)
def test_invalid_durations_raise_config_error(value: str) -> None:
    with pytest.raises(ConfigError, match="invalid irate window"):
        CPU_PERCENT.render(window=value)
