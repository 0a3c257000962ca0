"""Issue 48, item 4: before the first measured run on a new cluster the runner waits, within a
bound, for the cluster's own CPU to settle, then makes one warm-up run that is recorded and
flagged (status ``warmup``) and never counted: not in a summary, a table's average, the
verdict or the gate.

Real: the runner, the results store, :func:`load_results`, the report's tables, the verdict
and the gate. Stand-ins, because nothing here can provision a cluster that is still starting:
a cluster whose CNI agent burns 2 cores for its first 10 s and then 0.01, a scenario that
reads the egress scenario's two conditions and makes up throughputs, and virtual time for the
settle wait (:mod:`cnibench.waiting` sleeps on it, as ``tests/unit/test_waiting.py`` does).
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

from cnibench import waiting
from cnibench.backends.base import ClusterSpec, ResourceUsage, WarmUp
from cnibench.errors import AgentRestartedError, ToolError
from cnibench.records import Environment, Measurement, RunStatus
from cnibench.report.data import bar_summary
from cnibench.report.gate.decision import compare_results
from cnibench.report.gate.loading import failed_candidate_runs
from cnibench.report.tables import AVG_ROW, table_runs
from cnibench.report.verdict import verdict
from cnibench.results import ResultsStore, load_results
from cnibench.scenarios import SCENARIOS
from cnibench.scenarios import warmup as warmup_module
from cnibench.scenarios.base import Prepared, RunOutput, Verification
from cnibench.scenarios.profiles import profile_named
from cnibench.scenarios.runner import ClusterPool, Runner
from cnibench.scenarios.warmup import busy_machines, settle

BUSY_UNTIL = 10.0
"""Virtual seconds the stand-in agent stays busy after the cluster is made."""
GBIT = 1e9


class _Clock:
    """Virtual time: ``sleep`` advances ``monotonic`` exactly (as in test_waiting.py)."""

    def __init__(self) -> None:
        self.now = 5000.0

    def monotonic(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        assert seconds >= 0
        self.now += seconds


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> _Clock:
    virtual = _Clock()
    monkeypatch.setattr(waiting, "time", virtual)
    monkeypatch.setattr(warmup_module, "time", virtual)
    return virtual


class _Agent:
    """A CNI agent's CPU seconds on virtual time: ``busy`` cores until ``until`` seconds after
    it started, then ``idle`` cores."""

    def __init__(
        self, clock: _Clock, *, busy: float = 2.0, idle: float = 0.01, until: float = BUSY_UNTIL
    ) -> None:
        self.clock, self.busy, self.idle, self.until = clock, busy, idle, until
        self.started = clock.now
        self.reads = 0

    def usage(self) -> dict[str, ResourceUsage]:
        self.reads += 1
        age = self.clock.now - self.started
        cpu = self.busy * min(age, self.until) + self.idle * max(0.0, age - self.until)
        # A role node without napi=threaded: memory only, so it cannot hold the wait up.
        return {"fake-agent": ResourceUsage(cpu), "client": ResourceUsage(None, 2**20)}


# -- the wait itself -------------------------------------------------------------------------


def test_the_wait_ends_once_the_agent_has_been_idle_for_the_quiet_time(clock: _Clock) -> None:
    agent = _Agent(clock)
    started = clock.now
    outcome = settle(agent.usage, bound=60.0)
    waited = clock.now - started
    assert outcome.settled
    # Busy for 10 s, then 5 s quiet (docs: "below a fifth of a core for 5 s"), read each 1 s.
    assert BUSY_UNTIL + 5.0 <= waited <= BUSY_UNTIL + 6.0
    assert outcome.seconds == pytest.approx(waited)
    assert "fake-agent" in outcome.detail
    reads = agent.reads
    assert reads == pytest.approx(waited + 1, abs=1)  # once a second, none after it settled


def test_the_wait_is_bounded_and_says_who_was_busy_and_how_long_it_waited(clock: _Clock) -> None:
    agent = _Agent(clock, busy=0.5, until=math.inf)
    started = clock.now
    outcome = settle(agent.usage, bound=30.0)
    assert not outcome.settled
    assert clock.now - started == pytest.approx(30.0)
    assert outcome.seconds == pytest.approx(30.0)
    assert outcome.detail == "fake-agent 0.50 cores"
    assert outcome.line() == "not settled after 30 s (bound 30 s): fake-agent 0.50 cores"


def test_nothing_to_read_ends_the_wait_at_once_unsettled(clock: _Clock) -> None:
    """The lab without napi=threaded, or a cluster not on this machine: no machine's CPU is
    its own, so there is nothing to wait for."""
    started = clock.now
    outcome = settle(lambda: {"client": ResourceUsage(None, 1)}, bound=60.0)
    assert clock.now == started
    assert (outcome.settled, outcome.seconds) == (False, 0.0)


def test_an_agent_replaced_meanwhile_starts_the_quiet_time_again(clock: _Clock) -> None:
    agent = _Agent(clock, busy=0.0, until=0.0)
    restarted_at = clock.now + 3.0

    def read() -> Mapping[str, ResourceUsage]:
        if restarted_at <= clock.now < restarted_at + 1.0:
            raise AgentRestartedError("pod fake-agent-x was replaced")
        return agent.usage()

    started = clock.now
    outcome = settle(read, bound=60.0)
    assert outcome.settled
    # Quiet from the start, but the reading at 3 s failed: 5 s counted again from 4 s.
    assert clock.now - started == pytest.approx(9.0)


def test_a_counter_that_went_back_is_busy_not_idle() -> None:
    before = {"agent": ResourceUsage(100.0), "node": ResourceUsage(None)}
    after = {"agent": ResourceUsage(0.5), "node": ResourceUsage(None)}
    assert busy_machines(before, after, 5.0) == {"agent": math.inf}


# -- the runner: recorded, flagged, never counted --------------------------------------------


@dataclass
class _Cluster:
    """A cluster just made: its agent busy starting, its warm-up asked for."""

    spec: ClusterSpec
    agent: _Agent
    warm_up: WarmUp
    backend: str = "kube"
    provider: str = "stand-in"
    cni_version: str = "1.0"
    capabilities: frozenset[Any] = frozenset()
    notes: tuple[str, ...] = ()
    policy_rule_limit: None = None
    usage_reads: list[bool] = field(default_factory=list)

    def capability_hint(self, capability: Any) -> str:
        return ""

    def environment(self) -> Environment:
        return Environment("k", "cpu", 2, 2**30, "3", "0", backend="kube", cni=self.spec.cni)

    def listen(self, listener: Any) -> None:
        pass

    def resource_usage(self, *, reset_peak: bool = False) -> dict[str, ResourceUsage]:
        self.usage_reads.append(reset_peak)
        return self.agent.usage()

    def teardown(self) -> None:
        pass


class _Backend:
    def __init__(self, cluster: _Cluster) -> None:
        self.cluster = cluster
        self.provisioned = 0

    def provision(self, spec: ClusterSpec) -> _Cluster:
        self.provisioned += 1
        return self.cluster


class _Egress:
    """The egress scenario's name, conditions and declarations (so the verdict reads its
    contrast), measuring made-up throughputs: the first call on the cluster, the warm-up,
    reads a third low (a cold cluster), the rest about 10 Gbit/s."""

    name = "egress"
    resource_metrics = False
    primary_metrics = ("throughput",)

    def __init__(self, *, warmup_fails: bool = False) -> None:
        self.calls: list[tuple[str, int, float]] = []
        self.warmup_fails = warmup_fails
        self.rng = np.random.default_rng(48)

    def cluster_spec(self, cni: ClusterSpec, condition: Any) -> ClusterSpec:
        return cni

    def required_capabilities(self, condition: Any) -> frozenset[Any]:
        return frozenset()

    def policy_rules(self, condition: Any) -> int:
        return 0

    def prepare(self, cluster: Any, condition: Any, profile: Any) -> Prepared:
        # What a set-up hands its first run, as the policy scenario its time to effect.
        return Prepared(expected={"handed": "0.25"})

    def verify(self, cluster: Any, prepared: Any, condition: Any) -> Verification:
        return Verification(True, "stand-in")

    def time_changes(self, cluster: Any, prepared: Any, condition: Any) -> RunOutput:
        return RunOutput(())

    def measure(
        self, cluster: Any, prepared: Any, condition: Any, profile: Any, repetition: int
    ) -> RunOutput:
        cold = not self.calls
        value = (6.5 if cold else 10.0 * math.exp(self.rng.normal(0, 0.01))) * GBIT
        self.calls.append((condition.id, repetition, value))
        if cold and self.warmup_fails:
            raise ToolError("iperf3: connection refused", tool="iperf3")
        handed = prepared.expected.pop("handed", "")
        once = [Measurement("setup_time", float(handed), "s")] if handed else []
        return RunOutput([Measurement("throughput", value, "bits/s"), *once])

    def cleanup(self, cluster: Any, prepared: Any) -> None:
        pass


@dataclass
class _Ran:
    results: list[Any]
    scenario: _Egress
    cluster: _Cluster
    backend: _Backend
    frame: pd.DataFrame
    session_dir: Path
    heard: list[str]


def _run_both_conditions(tmp_path: Path, clock: _Clock, *, warmup_fails: bool = False) -> _Ran:
    spec = ClusterSpec("stand-in")
    wanted = WarmUp(settle_seconds=60.0, runs=1, reason="warm-up of a new cluster")
    cluster = _Cluster(spec, _Agent(clock), wanted)
    backend = _Backend(cluster)
    pool = ClusterPool(backend)  # type: ignore[arg-type]
    heard: list[str] = []
    pool.notice = heard.append
    store = ResultsStore(tmp_path / "results")
    runner = Runner(pool, store, profile_named("quick"), resource_metrics=False)
    scenario = _Egress(warmup_fails=warmup_fails)
    off, on = SCENARIOS["egress"].conditions()[:2]
    results = [
        runner.run_condition(scenario, spec, condition)  # type: ignore[arg-type]
        for condition in (off, on)
    ]
    frame = load_results(store.session_dir)
    return _Ran(results, scenario, cluster, backend, frame, store.session_dir, heard)


def _measured(ran: _Ran, condition: str) -> list[float]:
    """The values the stand-in made for ``condition``'s measured runs (repetition >= 0)."""
    return [value for cid, rep, value in ran.scenario.calls if cid == condition and rep >= 0]


def test_one_warm_up_run_before_the_first_measured_run_recorded_as_warm_up(
    tmp_path: Path, clock: _Clock
) -> None:
    ran = _run_both_conditions(tmp_path, clock)
    # First the warm-up, on the first condition, then its five runs, then the other's five.
    order = [(cid, rep) for cid, rep, _ in ran.scenario.calls]
    assert order[0][0] == "gateway-off"
    measured = [("gateway-off", r) for r in range(5)] + [("gateway-on", r) for r in range(5)]
    assert order[1:] == measured
    assert ran.backend.provisioned == 1
    runs = ran.frame.drop_duplicates("run_id")
    warm = runs[runs["status"] == "warmup"]
    assert len(warm) == 1
    assert warm["condition"].tolist() == ["gateway-off"]
    assert warm["repetition"].tolist() == [-1]
    assert runs[runs["status"] == "ok"].groupby("condition").size().to_dict() == {
        "gateway-off": 5,
        "gateway-on": 5,
    }
    assert set(runs["status"]) == {"ok", "warmup"}  # nothing failed
    # The warm-up's own value is kept, as measured.
    rows = ran.frame[(ran.frame["status"] == "warmup") & (ran.frame["metric"] == "throughput")]
    assert rows["value"].tolist() == [ran.scenario.calls[0][2]]


def test_the_warm_up_records_say_how_long_the_settle_wait_took(
    tmp_path: Path, clock: _Clock
) -> None:
    ran = _run_both_conditions(tmp_path, clock)
    warm = ran.frame[ran.frame["status"] == "warmup"].set_index("metric")
    waited = float(warm.at["settle_wait", "value"])
    assert warm.at["settle_wait", "unit"] == "s"
    # The stand-in agent is busy 10 s, then 5 s must be quiet.
    assert BUSY_UNTIL + 5.0 <= waited <= BUSY_UNTIL + 6.0
    assert float(warm.at["settled", "value"]) == 1.0
    # The session says so too, beside its design: which cluster, what waited, which run.
    (note,) = ran.session_dir.glob("warmup-*.json")
    written = json.loads(note.read_text())
    assert written["settle"]["seconds"] == pytest.approx(waited)
    assert written["runs"] == warm["run_id"].unique().tolist()
    # And the session's listener heard it, as it hears the cluster's own lines.
    assert len(ran.heard) == 1
    assert ran.heard[0].startswith("stand-in: warm-up of a new cluster: settled after 1")
    assert "1 warm-up run(s) of gateway-off recorded, never counted" in ran.heard[0]
    # The wait read the usage with peaks reset, never the reading that fails a restarted agent.
    assert ran.cluster.usage_reads
    assert all(ran.cluster.usage_reads)


def test_what_the_set_up_hands_its_first_run_still_goes_to_the_first_measured_run(
    tmp_path: Path, clock: _Clock
) -> None:
    ran = _run_both_conditions(tmp_path, clock)
    measured = ran.frame[ran.frame["status"] == "ok"]
    timed = measured[measured["metric"] == "setup_time"]
    assert sorted(zip(timed["condition"], timed["repetition"], strict=True)) == [
        ("gateway-off", 0),
        ("gateway-on", 0),
    ]


def test_the_second_condition_on_the_same_cluster_has_no_warm_up(
    tmp_path: Path, clock: _Clock
) -> None:
    ran = _run_both_conditions(tmp_path, clock)
    first, second = ran.results
    assert [run.status for run in first.warmup] == [RunStatus.WARMUP]
    assert second.warmup == ()
    assert all(run.status is RunStatus.OK for result in ran.results for run in result.runs)


def test_summaries_count_only_the_measured_runs(tmp_path: Path, clock: _Clock) -> None:
    ran = _run_both_conditions(tmp_path, clock)
    first = ran.results[0]
    (summary,) = [s for s in first.summaries() if s.metric == "throughput"]
    values = _measured(ran, "gateway-off")
    assert summary.n == 5 == len(first.runs) == len(first.ok_runs)
    assert summary.estimate == pytest.approx(math.exp(np.mean(np.log(values))))
    bars = bar_summary(ran.frame, scenario="egress", metric="throughput").set_index("condition")
    assert int(bars.at["gateway-off", "n"]) == 5
    assert int(bars.at["gateway-off", "failed"]) == 0
    assert float(bars.at["gateway-off", "mean"]) == pytest.approx(summary.estimate)


def test_the_table_shows_the_warm_up_first_as_warm_up_outside_the_average(
    tmp_path: Path, clock: _Clock
) -> None:
    ran = _run_both_conditions(tmp_path, clock)
    table = table_runs(ran.frame, "egress", "gateway-off")
    labels = list(table.index)
    assert labels[0].startswith("Warm-up, not counted (settled in 1")
    assert labels[1:] == ["Run 1", "Run 2", "Run 3", "Run 4", "Run 5", "Avg", "Std Dev"]
    column = "throughput [bits/s]"
    assert table[column].iloc[0] == pytest.approx(ran.scenario.calls[0][2])
    assert table.at[AVG_ROW, column] == pytest.approx(np.mean(_measured(ran, "gateway-off")))
    warm_id = ran.frame[ran.frame["status"] == "warmup"]["run_id"].iloc[0]
    assert table.attrs["run_ids"][0] == warm_id
    # The other condition had none.
    other = table_runs(ran.frame, "egress", "gateway-on")
    assert not any("Warm-up" in label for label in other.index)


def test_the_verdict_ignores_the_warm_up(tmp_path: Path, clock: _Clock) -> None:
    ran = _run_both_conditions(tmp_path, clock)
    assert (ran.frame["status"] == "warmup").any()
    measured_only = ran.frame[ran.frame["status"] != "warmup"]
    with_warmup = verdict(ran.frame)
    without = verdict(measured_only)
    columns = ["contrast", "metric", "n_treatment", "n_control", "estimate", "ci_low", "ci_high"]
    assert not with_warmup.empty
    pd.testing.assert_frame_equal(with_warmup[columns], without[columns])
    row = with_warmup[with_warmup["metric"] == "throughput"].iloc[0]
    assert (row["n_treatment"], row["n_control"]) == (5, 5)


@pytest.mark.parametrize("warmup_fails", [False, True], ids=["warm-up-ok", "warm-up-failed"])
def test_the_gate_neither_counts_nor_fails_on_a_warm_up(
    tmp_path: Path, clock: _Clock, warmup_fails: bool
) -> None:
    ran = _run_both_conditions(tmp_path, clock, warmup_fails=warmup_fails)
    warm = ran.frame[ran.frame["status"] == "warmup"]
    assert len(warm["run_id"].unique()) == 1
    if warmup_fails:
        # Recorded with its reason, as warm-up, not as a failed run; not retried.
        assert warm["reason"].str.contains("connection refused").all()
        assert len([c for c in ran.scenario.calls if c[0] == "gateway-off"]) == 6
    assert failed_candidate_runs(ran.frame) == []
    measured_only = ran.frame[ran.frame["status"] != "warmup"]
    compared = compare_results(measured_only, ran.frame, session_sd=0.02)
    own = compare_results(measured_only, measured_only, session_sd=0.02)
    columns = ["condition", "metric", "n_baseline", "n_candidate", "ratio", "verdict"]
    pd.testing.assert_frame_equal(compared[columns], own[columns])
    assert not compared["regression"].any()


# -- what each backend asks ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("created", "asks"), [(True, True), (False, False)], ids=["made-now", "reused-or-existing"]
)
def test_a_kube_cluster_asks_for_a_warm_up_only_when_made_for_the_session(
    created: bool, asks: bool
) -> None:
    """The property as the cluster states it (a KubeCluster needs an API server to be made:
    tests/kind shows a new kind cluster warmed up and the kept one not)."""
    from types import SimpleNamespace

    from cnibench.backends.kube.cluster import KubeCluster

    wanted = KubeCluster.warm_up.fget(SimpleNamespace(_created=created))  # type: ignore[attr-defined]
    assert wanted.needed is asks
    if asks:
        assert wanted.runs == 1
        assert 0 < wanted.settle_seconds <= 120  # bounded: CI pays it on every new cluster
        assert wanted.reason


def test_the_lab_asks_for_no_warm_up() -> None:
    """Measured: a lab's run 0 reads as the runs after it (docs/verdict.md)."""
    from cnibench.backends.lab.cluster import LabCluster

    assert not LabCluster.warm_up.fget(None).needed  # type: ignore[attr-defined]
