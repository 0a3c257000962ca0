"""Faults during measurement are recorded as failed runs, retried, and never averaged in
(SPEC section 9, third rule).

A real lab runs the egress scenario's ``gateway-off`` condition through the :class:`Runner` (the
engine of ``cnibench run``) on the smoke profile (2 runs, 1 retry). A subclass of the scenario
injects one fault into the first measurement only:

- the external iperf3 server is SIGKILLed by the PID the lab recorded, mid-transfer;
- the external host's ``eth0`` goes down before the client connects, and up again only when
  that measurement has returned (on a timer the link could come back in time under load);
- the client's iperf3 output is truncated to half: a wrapper around ``Endpoint.run`` runs the
  real tool and corrupts only what it returns (the server still gets a real test, and the lab's
  own ``ip netns exec`` path is untouched, which a fake binary early on PATH would not be, since
  ``ip netns exec`` resolves tools on the host's PATH for every namespace at once);
- the client "hangs": the wrapper replaces iperf3 by ``sleep 600`` but keeps the scenario's own
  timeout, so the lab's timeout enforcement (kill of the process group) is what ends it.

And Prometheus is SIGKILLed by its PID: every later attempt fails with a Prometheus reason.

Each time: the failed attempt is recorded (status failed, non-empty reason, also in
``load_results``), it is retried, its numbers are not in ``ok_runs`` or the summaries, and the
condition goes on with the other runs.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from rel_support import merge_summary, require_root_lab

from cnibench import load_results
from cnibench.backends.base import Cluster, ClusterSpec, CommandResult, Endpoint
from cnibench.backends.lab import LabBackend
from cnibench.errors import ProvisioningError, SetupError
from cnibench.records import RunStatus
from cnibench.results import ResultsStore
from cnibench.scenarios.base import Condition, Prepared, RunOutput
from cnibench.scenarios.egress import EgressScenario
from cnibench.scenarios.profiles import Profile, profile_named
from cnibench.scenarios.runner import ClusterPool, ConditionResult, Runner

Fault = Callable[[Any, Prepared], contextlib.AbstractContextManager[None]]


class FaultyEgress(EgressScenario):
    """Egress whose first measurement runs inside ``fault``."""

    def __init__(self, fault: Fault) -> None:
        super().__init__()
        self._fault = fault
        self.calls = 0

    def measure(
        self,
        cluster: Cluster,
        prepared: Prepared,
        condition: Condition,
        profile: Profile,
        repetition: int,
    ) -> RunOutput:
        self.calls += 1
        if self.calls > 1:
            return super().measure(cluster, prepared, condition, profile, repetition)
        with self._fault(cluster, prepared):
            return super().measure(cluster, prepared, condition, profile, repetition)


@dataclass
class Wrapped:
    """An Endpoint whose ``run`` goes through ``hook(real, argv, timeout)``."""

    real: Endpoint
    hook: Callable[[Endpoint, Sequence[str], float], CommandResult]

    def run(self, argv: Sequence[str], *, timeout: float) -> CommandResult:
        return self.hook(self.real, argv, timeout)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.real, name)


@contextlib.contextmanager
def _client_hook(
    prepared: Prepared, hook: Callable[[Endpoint, Sequence[str], float], CommandResult]
) -> Iterator[None]:
    real = prepared.endpoints["client"]
    prepared.endpoints["client"] = Wrapped(real, hook)  # type: ignore[assignment]
    try:
        yield
    finally:
        prepared.endpoints["client"] = real


def _truncated_output(prepared: Prepared) -> contextlib.AbstractContextManager[None]:
    def hook(real: Endpoint, argv: Sequence[str], timeout: float) -> CommandResult:
        done = real.run(argv, timeout=timeout)
        return CommandResult(
            done.argv, done.returncode, done.stdout[: len(done.stdout) // 2], "", done.duration
        )

    return _client_hook(prepared, hook)


HANG_LIMIT: list[float] = []


def _hanging_tool(prepared: Prepared) -> contextlib.AbstractContextManager[None]:
    def hook(real: Endpoint, argv: Sequence[str], timeout: float) -> CommandResult:
        HANG_LIMIT.append(timeout)
        return real.run(["sleep", "600"], timeout=timeout)

    return _client_hook(prepared, hook)


@contextlib.contextmanager
def _server_killed(cluster: Any) -> Iterator[None]:
    stop = threading.Event()
    killed: list[int] = []

    def killer() -> None:
        before = {p.pid for p in cluster._processes_named("ext/iperf3-server-5201")}
        while not stop.is_set():
            fresh = [
                p for p in cluster._processes_named("ext/iperf3-server-5201") if p.pid not in before
            ]
            if fresh:
                time.sleep(0.8)  # into the transfer
                os.kill(fresh[0].pid, signal.SIGKILL)
                killed.append(fresh[0].pid)
                return
            time.sleep(0.02)

    thread = threading.Thread(target=killer, daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join(timeout=5)
    assert killed, "the server was never killed: the fault was not injected"


@contextlib.contextmanager
def _link_down(cluster: Any) -> Iterator[None]:
    namespace = cluster.external.namespace
    subprocess.run(["ip", "-n", namespace, "link", "set", "eth0", "down"], check=True)
    try:
        yield
    finally:
        subprocess.run(["ip", "-n", namespace, "link", "set", "eth0", "up"], check=True)


FAULTS: dict[str, Fault] = {
    "server-killed": lambda cluster, prepared: _server_killed(cluster),
    "link-down": lambda cluster, prepared: _link_down(cluster),
    "truncated-json": lambda cluster, prepared: _truncated_output(prepared),
    "tool-hangs": lambda cluster, prepared: _hanging_tool(prepared),
}
REASON_WORDS = {
    "server-killed": ("iperf3",),
    "link-down": ("iperf3",),
    "truncated-json": ("ParseError",),
    "tool-hangs": ("did not finish within", "killed"),
}
ROUTED = ClusterSpec(cni="routed")
"""The CNI every fault runs on, as a session hands it to the runner (``--cni routed``)."""


@pytest.fixture(scope="module")
def pool() -> Iterator[ClusterPool]:
    require_root_lab()
    with ClusterPool(LabBackend()) as shared:
        yield shared


def _run(
    pool: ClusterPool, tmp_path: Path, scenario: EgressScenario
) -> tuple[ConditionResult, Path]:
    store = ResultsStore(tmp_path / "results")
    runner = Runner(pool, store, profile_named("smoke"))
    condition = next(c for c in scenario.conditions() if c.id == "gateway-off")
    result = runner.run_condition(scenario, ROUTED, condition)
    return result, tmp_path / "results"


@pytest.mark.parametrize("fault", list(FAULTS), ids=list(FAULTS))
def test_fault_fails_the_run_which_is_retried_and_not_averaged(
    pool: ClusterPool, tmp_path: Path, fault: str
) -> None:
    HANG_LIMIT.clear()
    started = time.monotonic()
    result, results = _run(pool, tmp_path, FaultyEgress(FAULTS[fault]))
    elapsed = time.monotonic() - started
    first = result.runs[0]
    assert (first.repetition, first.attempt, first.status) == (0, 0, RunStatus.FAILED)
    assert [w for w in REASON_WORDS[fault] if w not in first.reason] == [], first.reason
    # Retried, then the other repetition ran: the condition went on.
    assert [(r.repetition, r.attempt, r.status) for r in result.runs[1:]] == [
        (0, 1, RunStatus.OK),
        (1, 0, RunStatus.OK),
    ]
    assert first not in result.ok_runs
    throughput = next(s for s in result.summaries() if s.metric == "throughput")
    assert throughput.n == 2
    frame = load_results(results)
    failed = frame[frame.status == "failed"]
    assert list(failed.run_id) == [first.run_id]
    assert failed.reason.str.len().min() > 0
    if fault == "tool-hangs":
        # Cut off at the scenario's own timeout: the whole condition (set-up, the hang, the
        # retry and the second run) took that timeout plus a few seconds.
        assert f"within {HANG_LIMIT[0]:g} s" in first.reason
        assert elapsed < HANG_LIMIT[0] + 30
    _summary(fault, first.reason)


def _summary(fault: str, reason: str) -> None:
    path = os.environ.get("CNIBENCH_RELIABILITY_SUMMARY")
    if not path:
        return
    import json

    try:
        current = json.loads(Path(path).read_text()).get("faults", {})
    except (OSError, ValueError):
        current = {}
    current[fault] = reason[:300]
    merge_summary("faults", current)


def test_prometheus_killed_fails_every_later_run_with_the_reason(
    pool: ClusterPool, tmp_path: Path
) -> None:
    """Last in the file: it leaves the shared lab without Prometheus."""

    @contextlib.contextmanager
    def kill_prometheus(cluster: Any, prepared: Prepared) -> Iterator[None]:
        os.kill(cluster._prometheus.pid, signal.SIGKILL)
        yield

    result, results = _run(pool, tmp_path, FaultyEgress(kill_prometheus))
    profile = profile_named("smoke")
    assert len(result.runs) == profile.runs * (profile.retries + 1)
    assert all(r.status is RunStatus.FAILED for r in result.runs)
    assert all("Prometheus" in r.reason for r in result.runs), [r.reason for r in result.runs]
    assert (result.ok_runs, result.summaries()) == ((), [])
    frame = load_results(results)
    assert set(frame.status) == {"failed"}
    _summary("prometheus-killed", result.runs[0].reason)


class HalfSetUpEgress(EgressScenario):
    """Egress whose first set-up places its pods and then fails, as a pod that never becomes
    Ready makes it fail on Kubernetes."""

    def __init__(self) -> None:
        super().__init__()
        self.calls = 0

    def prepare(self, cluster: Cluster, condition: Condition, profile: Profile) -> Prepared:
        self.calls += 1
        prepared = super().prepare(cluster, condition, profile)
        if self.calls == 1:
            raise ProvisioningError("pod eg-extra not Ready after 1 s (phase Pending)")
        return prepared


def test_a_set_up_that_fails_half_way_fails_its_condition_and_the_next_one_runs(
    tmp_path: Path,
) -> None:
    require_root_lab()
    scenario = HalfSetUpEgress()
    store = ResultsStore(tmp_path / "results")
    condition = next(c for c in scenario.conditions() if c.id == "gateway-off")
    # A lab of its own: the module's shared one has its Prometheus killed by another test.
    with ClusterPool(LabBackend()) as own:
        runner = Runner(own, store, profile_named("smoke"))
        with pytest.raises(SetupError, match="set-up failed: pod eg-extra not Ready"):
            runner.run_condition(scenario, ROUTED, condition)
        # The pods the failed set-up placed are gone: the lab refuses a second pod of a name.
        again = runner.run_condition(scenario, ROUTED, condition)
    assert again.verified
    assert len(again.ok_runs) == 2
    frame = load_results(tmp_path / "results")
    failed = frame[frame.status == "failed"]
    assert len(failed) == 1
    assert failed.reason.iloc[0].startswith("set-up failed: pod eg-extra not Ready")
    assert not failed.verified.iloc[0]
