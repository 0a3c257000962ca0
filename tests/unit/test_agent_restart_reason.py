"""A run whose tool fails while the CNI agent restarts is failed for the restart: the tool's
lost connection is its consequence (seen on kind: iperf3's "Connection reset by peer" hid a
deleted kube-router pod)."""

from __future__ import annotations

from typing import Any, cast

from cnibench.errors import AgentRestartedError, MetricsError
from cnibench.scenarios.runner import Runner


class _Cluster:
    """Only what the runner asks after a failed tool: one more resource reading."""

    def __init__(self, error: Exception | None) -> None:
        self.error = error
        self.readings = 0

    def resource_usage(self, *, reset_peak: bool = False) -> dict[str, Any]:
        self.readings += 1
        if self.error is not None:
            raise self.error
        return {}


TOOL = "ToolError: iperf3 failed: unable to receive control message: Connection reset by peer"


def test_a_restart_during_the_run_leads_the_reason_and_keeps_the_tools_words() -> None:
    cluster = _Cluster(AgentRestartedError("the CNI agent restarted during the run: pod x is gone"))
    reason = Runner._agent_first(cast(Any, cluster), TOOL)
    assert reason.startswith("AgentRestartedError: the CNI agent restarted during the run")
    assert "pod x is gone" in reason
    assert reason.endswith(TOOL)
    assert cluster.readings == 1


def test_without_a_restart_the_tools_reason_stands() -> None:
    cluster = _Cluster(None)
    assert Runner._agent_first(cast(Any, cluster), TOOL) == TOOL
    assert cluster.readings == 1


def test_a_reading_that_fails_otherwise_leaves_the_tools_reason() -> None:
    cluster = _Cluster(MetricsError("node usage unreadable"))
    assert Runner._agent_first(cast(Any, cluster), TOOL) == TOOL
