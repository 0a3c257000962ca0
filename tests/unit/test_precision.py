"""``--precision``: repeat runs until each primary metric's interval is narrow enough, or the
maximum, and say which; the rule reads interval widths only (never a difference or a p)."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest
from scipy import stats as sps

from cnibench.records import Measurement, RunStatus
from cnibench.results import ResultsStore
from cnibench.scenarios.profiles import profile_named
from cnibench.scenarios.runner import (
    Runner,
    RunResult,
    precision_reached,
    precision_words,
)


def _run(i: int, **values: float) -> RunResult:
    measurements = tuple(Measurement(m, v, "bits/s") for m, v in values.items())
    return RunResult(f"r{i}", i, 0, RunStatus.OK, "", measurements)


def test_the_width_is_the_log_t_half_width_against_the_target_over_root_two():
    values = [9.4e9, 9.5e9, 9.3e9, 9.6e9, 9.45e9]
    runs = [_run(i, throughput=v, cpu=0.0) for i, v in enumerate(values)]
    reached, widths = precision_reached(runs, ("throughput", "cpu", "rtt_mean"), 0.05)
    logs = np.log(values)
    half = sps.t.ppf(0.975, 4) * sps.sem(logs)
    # cpu at 0 has no relative width, rtt_mean was not measured: only throughput judges.
    assert set(widths) == {"throughput"}
    assert widths["throughput"] == pytest.approx(math.expm1(half))
    assert reached == (math.expm1(half) <= 0.05 / math.sqrt(2))
    assert reached


def test_a_wide_interval_is_not_reached_and_the_words_say_the_maximum_stopped_it():
    runs = [_run(i, throughput=v) for i, v in enumerate([5e9, 9e9, 7e9])]
    reached, widths = precision_reached(runs, ("throughput",), 0.05)
    assert not reached
    words = precision_words(reached, widths, 0.05, 3)
    assert words.startswith("precision ±5 % per contrast (±3.5 % per condition) NOT reached:")
    assert "stopped at the maximum of 3 runs: throughput ±" in words


class _Scenario:
    name = "egress"
    primary_metrics = ("throughput",)


@pytest.mark.parametrize(
    ("spread", "stops_at", "reached"),
    [(0.001, 5, True), (0.3, 12, False)],
    ids=["tight-runs-stop-at-the-profile", "noisy-runs-stop-at-the-maximum"],
)
def test_runs_repeat_until_the_target_or_the_maximum(spread, stops_at, reached, tmp_path):
    rng = np.random.default_rng(5)
    profile = profile_named("quick")  # 5 runs
    runner = Runner(
        pool=None,  # type: ignore[arg-type]  # _measured_runs needs no cluster here
        store=ResultsStore(tmp_path),
        profile=profile,
        precision=0.05,
        max_runs=12,
    )
    made: list[int] = []

    def one(scenario: Any, cluster: Any, prepared: Any, condition: Any, repetition: int):
        made.append(repetition)
        return [_run(repetition, throughput=9e9 * math.exp(rng.normal(0, spread)))]

    runner._repetition = one  # type: ignore[method-assign]
    runs, note = runner._measured_runs(_Scenario(), None, None, None)  # type: ignore[arg-type]
    assert made == list(range(stops_at))
    assert len(runs) == stops_at
    assert ("NOT reached" not in note) == reached
    assert f"after {stops_at} runs" in note if reached else f"maximum of {stops_at} runs" in note


def test_without_precision_exactly_the_profiles_runs(tmp_path):
    runner = Runner(
        pool=None,  # type: ignore[arg-type]
        store=ResultsStore(tmp_path),
        profile=profile_named("quick"),
    )
    runner._repetition = lambda *a: [_run(a[4], throughput=1e9 * (1 + a[4]))]  # type: ignore[method-assign]
    runs, note = runner._measured_runs(_Scenario(), None, None, None)  # type: ignore[arg-type]
    assert (len(runs), note) == (5, "")


def test_interleaved_rounds_alternate_control_and_treatment_per_cluster():
    from cnibench.backends.base import ClusterSpec
    from cnibench.scenarios import SCENARIOS
    from cnibench.session import PlannedRun, interleaved_rounds

    egress = SCENARIOS["egress"]
    off, on = egress.conditions()[:2]
    plan = [
        PlannedRun(egress, ClusterSpec(cni="routed"), off),
        PlannedRun(egress, ClusterSpec(cni="routed"), on),
        PlannedRun(egress, ClusterSpec(cni="vxlan"), off),
    ]
    order = [(r, p.cni, p.condition.id) for r, p in interleaved_rounds(plan, 3)]
    assert order == [
        (0, "routed", off.id),
        (0, "routed", on.id),
        (1, "routed", on.id),
        (1, "routed", off.id),
        (2, "routed", off.id),
        (2, "routed", on.id),
        (0, "vxlan", off.id),
        (1, "vxlan", off.id),
        (2, "vxlan", off.id),
    ]


def test_precision_on_judges_only_the_named_metrics(tmp_path):
    # Throughput tight, RTT wild: with --precision-on throughput the profile's 5 runs do.
    rng = np.random.default_rng(9)
    runner = Runner(
        pool=None,  # type: ignore[arg-type]
        store=ResultsStore(tmp_path),
        profile=profile_named("quick"),
        precision=0.05,
        max_runs=8,
        precision_metrics=("throughput",),
    )

    def one(*args: Any) -> list[RunResult]:
        repetition = args[4]
        tight = 9e9 * math.exp(rng.normal(0, 0.001))
        return [_run(repetition, throughput=tight, rtt_mean=100 * math.exp(rng.normal(0, 1)))]

    runner._repetition = one  # type: ignore[method-assign]

    class Both:
        name = "egress"
        primary_metrics = ("throughput", "rtt_mean")

    runs, note = runner._measured_runs(Both(), None, None, None)  # type: ignore[arg-type]
    assert len(runs) == 5
    assert note.startswith("precision ±5 % per contrast (±3.5 % per condition) reached after 5")
    assert "rtt_mean" not in note


def test_precision_on_without_precision_is_a_one_line_error():
    from cnibench.errors import ConfigError
    from cnibench.session import session_config

    with pytest.raises(ConfigError, match=r"^--precision-on needs --precision$"):
        session_config({"cluster": "lab", "profile": "quick", "precision_on": "throughput"})
    config = session_config(
        {"cluster": "lab", "profile": "quick", "precision": "5%", "precision_on": "throughput"}
    )
    assert (config.precision, config.precision_metrics) == (0.05, ("throughput",))
