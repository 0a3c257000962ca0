"""poll_until: how egress and policy checks wait for a Kubernetes CNI to catch up."""

from __future__ import annotations

import pytest

from cnibench.errors import ToolError
from cnibench.scenarios.base import poll_until


def test_it_stops_at_the_first_final_result_and_counts_attempts() -> None:
    answers = iter(["client", "client", "gateway", "never"])
    result, attempts = poll_until(lambda: next(answers), lambda s: s == "gateway", seconds=10)
    assert (result, attempts) == ("gateway", 3)


def test_without_time_the_first_result_counts() -> None:
    result, attempts = poll_until(lambda: "wrong", lambda s: s == "right", seconds=0)
    assert (result, attempts) == ("wrong", 1)


def test_a_retried_error_is_raised_once_the_time_is_up_and_others_at_once() -> None:
    calls: list[int] = []

    def failing() -> str:
        calls.append(1)
        raise ToolError("reset", tool="iperf3")

    with pytest.raises(ToolError):
        poll_until(failing, bool, seconds=0.5, retry=(ToolError,))
    assert len(calls) == 2
    calls.clear()
    with pytest.raises(ToolError):
        poll_until(failing, bool, seconds=10)
    assert len(calls) == 1
