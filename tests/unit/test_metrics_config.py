"""prometheus_config: the YAML the lab backend and the integration tests start Prometheus with."""

from __future__ import annotations

import re
from typing import Any

import pytest
import yaml

from cnibench.errors import ConfigError
from cnibench.metrics import prometheus_config


def _load(text: str) -> dict[str, Any]:
    data: dict[str, Any] = yaml.safe_load(text)
    return data


def test_global_intervals_follow_scrape_interval() -> None:
    config = _load(prometheus_config({"node": ["127.0.0.1:9100"]}, scrape_interval="2s"))
    assert config["global"] == {
        "scrape_interval": "2s",
        "scrape_timeout": "2s",
        "evaluation_interval": "2s",
    }


def test_default_scrape_interval_is_one_second() -> None:
    config = _load(prometheus_config({"node": ["127.0.0.1:9100"]}))
    assert config["global"]["scrape_interval"] == "1s"


def test_one_scrape_config_per_job_with_its_targets() -> None:
    config = _load(
        prometheus_config({"node": ["127.0.0.1:9100", "127.0.0.1:9101"], "app": ["[::1]:8080"]})
    )
    assert config["scrape_configs"] == [
        {"job_name": "node", "static_configs": [{"targets": ["127.0.0.1:9100", "127.0.0.1:9101"]}]},
        {"job_name": "app", "static_configs": [{"targets": ["[::1]:8080"]}]},
    ]


def test_instance_names_relabel_their_target_only() -> None:
    config = _load(
        prometheus_config(
            {"node": ["198.18.0.2:9100", "198.18.0.3:9100"]},
            instance_names={"198.18.0.3:9100": "node-2"},
        )
    )
    assert config["scrape_configs"][0]["static_configs"] == [
        {"targets": ["198.18.0.2:9100"]},
        {"targets": ["198.18.0.3:9100"], "labels": {"instance": "node-2"}},
    ]


@pytest.mark.parametrize(
    ("targets", "kwargs", "message"),
    [
        ({}, {}, "at least one scrape job"),
        ({"node": []}, {}, "'node' has no scrape targets"),
        ({"node": ["localhost"]}, {}, "'localhost'"),
        ({"node": ["127.0.0.1:70000"]}, {}, "'127.0.0.1:70000'"),
        ({"bad job": ["127.0.0.1:9100"]}, {}, "'bad job'"),
        ({"node": ["127.0.0.1:9100"]}, {"scrape_interval": "1"}, "invalid scrape_interval '1'"),
        (
            {"node": ["127.0.0.1:9100"]},
            {"instance_names": {"127.0.0.1:9999": "x"}},
            "127.0.0.1:9999",
        ),
    ],
    ids=[
        "no-job",
        "job-without-targets",
        "no-port",
        "port-out-of-range",
        "job-name-with-space",
        "interval-without-unit",
        "name-for-unknown-target",
    ],
)
def test_bad_input_raises_config_error(
    targets: dict[str, list[str]], kwargs: dict[str, Any], message: str
) -> None:
    with pytest.raises(ConfigError, match=re.escape(message)):
        prometheus_config(targets, **kwargs)
