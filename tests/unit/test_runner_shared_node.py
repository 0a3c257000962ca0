"""A node holding several roles (same-node placement, e.g. a one-worker cluster) is one
machine to Prometheus: its exporter is waited for once and its CPU is named after every role it
holds, not after whichever role came last."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from cnibench.backends.base import NodeRole
from cnibench.records import Measurement
from cnibench.scenarios import runner as runner_module
from cnibench.scenarios.profiles import profile_named
from cnibench.scenarios.runner import Runner


@dataclass(frozen=True)
class _Node:
    name: str
    role: NodeRole


class _Cluster:
    nodes = (
        _Node("worker", NodeRole.CLIENT),
        _Node("worker", NodeRole.SERVER),
        _Node("worker2", NodeRole.EGRESS_GW),
    )

    def prometheus_url(self) -> str:
        return "http://127.0.0.1:9"  # never asked: the client below is a stand-in


class _Metrics:
    """Stand-in for MetricsClient (no Prometheus is needed to see which names are asked)."""

    asked: ClassVar[dict[str, Any]] = {}

    def __init__(self, url: str) -> None:
        self.url = url

    def wait_until_ready(self, timeout: float, *, expected_targets: int) -> None:
        _Metrics.asked["targets"] = expected_targets

    def wait_for_rates(self, names: list[str], *, timeout: float) -> None:
        _Metrics.asked["rates"] = list(names)

    def run_metrics(self, start: float, end: float, *, instances: dict[str, str]) -> list[Any]:
        _Metrics.asked["instances"] = dict(instances)
        return [Measurement(f"cpu@{role}", 10.0, "%") for role in instances.values()]


def test_a_shared_node_is_waited_for_once_and_named_after_all_its_roles(
    tmp_path: Path, monkeypatch: Any
) -> None:
    monkeypatch.setattr(runner_module, "MetricsClient", _Metrics)
    runner = Runner(pool=None, store=None, profile=profile_named("smoke"))  # type: ignore[arg-type]
    cluster = _Cluster()
    runner._metrics_ready(cluster)  # type: ignore[arg-type]
    assert _Metrics.asked["targets"] == 2
    assert _Metrics.asked["rates"] == ["worker", "worker2"]
    runner._per_node_resources(_Metrics("x"), cluster, 0.0, 5.0)  # type: ignore[arg-type]
    assert _Metrics.asked["instances"] == {"worker": "client+server", "worker2": "egress-gw"}
