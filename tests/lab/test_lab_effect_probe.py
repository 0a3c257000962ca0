"""Time to effect on the lab is read by the effect probe, not stepped by a 1 s poll.

The kind study's ``policy_enforcement_time`` and ``service_programming_time`` fell on the
verification probe's steps (0.07, 1.1-1.2, 2.2-2.3, 4.1 s). The lab loads its rules before its
call returns, so here every value must lie far below one such step, vary from set-up to set-up
at the probe's resolution, and come with the evidence that the probe was that fine: its median
spacing, recorded with each set-up's verification, at most 20 ms. Ten set-ups of each, through
the scenarios' own ``prepare``/``verify``/``cleanup`` (what ``cnibench run`` does per round,
without the load tools; ``test_lab_policy_enforcement_rounds.py`` runs the command itself).
And the probe, started once in the client's namespace, is gone by its PID when the change it
times is interrupted (Ctrl-C).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator

import pytest
from lab_support import provision_or_skip, spec_for

from cnibench.backends.base import NodeRole, WorkloadKind, WorkloadSpec
from cnibench.backends.lab import LabBackend, LabCluster
from cnibench.backends.lab.runner import StartedInNamespace, process_alive
from cnibench.records import ParamValue
from cnibench.scenarios.base import Condition, Scenario
from cnibench.scenarios.baseline import BaselineScenario
from cnibench.scenarios.effect import time_change
from cnibench.scenarios.options import DEFAULT_OPTIONS
from cnibench.scenarios.policy import PolicyScenario
from cnibench.scenarios.profiles import profile_named
from cnibench.tools.effect_probe import Effect

SET_UPS = 10
ONE_STEP = 1.0
"""Seconds between two attempts of the verification's probe, the old timer's resolution."""
FINEST_SPACING_MS = 20.0


@pytest.fixture(scope="module")
def routed(lab_backend: LabBackend) -> Iterator[LabCluster]:
    with provision_or_skip(lab_backend, spec_for("routed")) as cluster:
        yield cluster


def set_up_and_verify(
    scenario: Scenario, cluster: LabCluster, condition: Condition
) -> list[dict[str, ParamValue]]:
    """The verification evidence of :data:`SET_UPS` set-ups of ``condition``."""
    profile = profile_named("smoke")
    seen = []
    for _ in range(SET_UPS):
        prepared = scenario.prepare(cluster, condition, profile)
        try:
            verification = scenario.verify(cluster, prepared, condition)
        finally:
            scenario.cleanup(cluster, prepared)
        assert verification.ok, verification.detail
        seen.append(dict(verification.evidence))
    return seen


def assert_finer_than_a_step(evidence: list[dict[str, ParamValue]], key: str) -> list[float]:
    recorded = [e[f"{key}_seconds"] for e in evidence]
    values = [value for value in recorded if isinstance(value, float)]
    assert len(values) == SET_UPS, recorded
    assert all(0 <= value < ONE_STEP for value in values), values
    assert len(set(values)) > 1, values  # not one step repeated
    spacing = [e[f"{key}_probe_interval_ms"] for e in evidence]
    assert all(isinstance(ms, float) and ms <= FINEST_SPACING_MS for ms in spacing), spacing
    assert all(e[f"{key}_probe_clock"] == "shared" for e in evidence)
    assert all(e[f"{key}_consecutive"] == 3 for e in evidence)
    return values


@pytest.mark.measured
def test_policy_enforcement_is_timed_at_the_probes_resolution(
    lab_backend: LabBackend, routed: LabCluster
) -> None:
    scenario = PolicyScenario(dataclasses.replace(DEFAULT_OPTIONS, rules=(0,), clients=(1,)))
    scenario = scenario.on_backend(lab_backend)
    condition = next(
        c for c in scenario.conditions() if c.id == "on-cross-node-iptables-r0-c1-new-connections"
    )
    evidence = set_up_and_verify(scenario, routed, condition)
    values = assert_finer_than_a_step(evidence, "enforcement")
    # The lab's rules hold once loaded: within two probe intervals of the call returning.
    assert max(values) < 0.05, values
    for seen in evidence:
        # The probe ran before the policy and saw the denied pod get through: no upper bound.
        assert isinstance(seen["enforcement_probe_saw_old_state"], int)
        assert seen["enforcement_probe_saw_old_state"] >= 1, seen
        assert "enforcement_upper_bound" not in seen
        assert "enforcement_held_before_request" not in seen
        # An atomic rule load lets no new connection through after it returned.
        assert seen["enforcement_leaks"] == 0, seen
        assert seen["enforcement_relapses"] == 0, seen


@pytest.mark.measured
def test_service_programming_is_timed_at_the_probes_resolution(routed: LabCluster) -> None:
    options = dataclasses.replace(DEFAULT_OPTIONS, targets=("service",), services=(0,))
    scenario = BaselineScenario(options)
    condition = next(
        c for c in scenario.conditions() if c.id == "cross-node-idle-iperf3-service-nftables-0svc"
    )
    evidence = set_up_and_verify(scenario, routed, condition)
    assert_finer_than_a_step(evidence, "programming")
    for seen in evidence:
        # A Service's address comes with it, so the probe starts after the lab's synchronous
        # change: answered at once, and said to be an upper bound.
        assert seen["programming_upper_bound"] is True, seen
        assert seen["programming_probe_saw_old_state"] == 0
        assert seen["programming_leaks"] == 0, seen


def test_an_interrupted_change_leaves_no_probe_running(
    routed: LabCluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    server = routed.place(
        "ep-srv", role=NodeRole.SERVER, workloads=(WorkloadSpec(WorkloadKind.HTTP_ECHO, 80),)
    )
    client = routed.place("ep-cli", role=NodeRole.CLIENT)
    started: list[StartedInNamespace] = []
    start = client.start

    def kept(argv: list[str]) -> StartedInNamespace:
        started.append(start(argv))
        return started[-1]

    def interrupted() -> None:
        # The probe runs (it stops by itself only after two minutes): Ctrl-C lands now.
        assert process_alive(started[0].pid)
        raise KeyboardInterrupt

    monkeypatch.setattr(client, "start", kept)
    try:
        with pytest.raises(KeyboardInterrupt):
            time_change(
                client, server.ip, 80, effect=Effect.blocking(), change=interrupted, within=5
            )
        (probe,) = started
        assert not process_alive(probe.pid)
    finally:
        routed.remove(client)
        routed.remove(server)
