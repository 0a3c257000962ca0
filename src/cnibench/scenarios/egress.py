"""Egress gateway: does traffic to an external host leave through the gateway, at what cost?

Seed 000 compared four cases (gateway on/off, per CNI) with iperf3 from a client pod to an iperf3
server outside the cluster. Here the proof is in every run: the external server reports the
source address it saw, which must be the gateway's address with the gateway on and the client
node's address with it off (each node masquerades its own pods).

With the gateway on, the set-up also times its takeover: ``egress_gateway_takeover_time`` is
the time from the gateway's set-up call returning until the client's requests reach the
external host from another address than the client node's, read by the effect probe
(:mod:`cnibench.scenarios.effect`, every 10 ms from before the call, against the external
host's :mod:`~cnibench.tools.source_echo`); ``egress_gateway_takeover_time_leaks`` counts the
requests that still arrived from the client node's own address after the call returned. Once
per set-up, with the set-up's first run, as the policy scenario times its enforcement.
"""

from __future__ import annotations

from cnibench.backends.base import Capability, Cluster, Endpoint, NodeRole, Placement
from cnibench.errors import CnibenchError, ToolError
from cnibench.records import Measurement
from cnibench.scenarios.base import (
    Condition,
    Contrast,
    Prepared,
    RunOutput,
    Scenario,
    Verification,
)
from cnibench.scenarios.effect import effect_evidence, keep_effect, take_effect, time_change
from cnibench.scenarios.profiles import Profile
from cnibench.tools import iperf3
from cnibench.tools.effect_probe import Effect
from cnibench.waiting import poll_until

__all__ = ["EgressScenario"]

EXTERNAL_PORT = 5201
_VERIFY_SECONDS = 1.0
GATEWAY_SETTLE = 90.0
"""Seconds a gateway may take to come into effect (see :meth:`EgressScenario.verify`). Cilium
usually needs a few seconds, but a client pod recreated under the name the previous condition
used can wait about a minute (cilium/cilium#26503); 30 s once failed the kind tier."""

INSTRUMENTED_PACE = 2_000_000_000
"""Bits/s an instrumented configuration's runs send (``napi=threaded``, which counts each
node's CPU): the gateway's CPU is compared at one fixed load, gateway on and off, and the host
keeps CPU to spare. Unpaced, those runs took the 2-core machine to 84-96 % host CPU
(2026-12-06, lab) and a kind host to 99-100 % in 6 of 10 runs (2026-11-27), where the gateway
node's CPU fell as the host saturated. Well under the 4.5-6.8 Gbit/s they reach unpaced on the
lab. Recorded with each run as :data:`OFFERED_LOAD`."""

ECHO_PORT = 8089
"""Port of the external host's source echo while the gateway's takeover is timed."""
_TAKEOVER = "takeover"
"""Key under which the set-up keeps the gateway's time to effect (its evidence ``takeover_*``)."""
_TIMING_BOUND = 60.0
"""Seconds the gateway's set-up call itself may take while the probe runs."""
OFFERED_LOAD = "offered_load"
"""The record of a paced run's pace (bits/s): its throughput is the pace, so the verdict
compares it only with runs paced alike."""


class EgressScenario(Scenario):
    """Client pod to external iperf3 server, with and without an egress gateway."""

    name = "egress"
    primary_metrics = ("throughput", "cpu@egress-gw", "cpu", "ram")
    """``cpu@egress-gw``: the gateway node's own CPU (cores), which the lab measures with
    ``napi=threaded``; ``cpu``/``ram``: host-wide (the lab) or mean over nodes (Kubernetes).

    Not ``rtt_mean``: every run records it, but iperf3's smoothed RTT of one saturating bulk
    flow is the sender's queue, not the path's latency (the lab demo of 2026-12-06 read it
    with intervals of ±52-217 % at 5 rounds, where throughput's were ±5-9 %). As a member of
    the question's family it decided nothing and lowered the level of the throughput test
    beside it."""
    contrasts = (Contrast("gateway", treatment={"gateway": "on"}, control={"gateway": "off"}),)

    def conditions(self) -> list[Condition]:
        """``gateway-off`` and ``gateway-on``."""
        return [
            Condition(self.name, f"gateway-{state}", {"gateway": state}) for state in ("off", "on")
        ]

    def required_capabilities(self, condition: Condition) -> frozenset[Capability]:
        """An external host always; the gateway also needs the egress-gateway feature."""
        if condition.parameters["gateway"] == "on":
            return frozenset({Capability.EXTERNAL_HOST, Capability.EGRESS_GATEWAY})
        return frozenset({Capability.EXTERNAL_HOST})

    def prepare(self, cluster: Cluster, condition: Condition, profile: Profile) -> Prepared:
        """Client pod on the client node; the gateway policy selects it when on."""
        prepared = Prepared()
        client = cluster.place("eg-cli", role=NodeRole.CLIENT)
        prepared.endpoints["client"] = client
        if condition.parameters["gateway"] == "on":

            def enable() -> None:
                prepared.expected["gateway"] = "on"
                prepared.expected["source"] = cluster.enable_egress_gateway(
                    [client], destination=f"{cluster.external.ip}/32"
                )

            try:
                echo = cluster.external.start_source_echo(
                    port=ECHO_PORT, seconds=GATEWAY_SETTLE + 2 * _TIMING_BOUND
                )
            except ToolError as exc:
                enable()  # untimed: the probe's error goes with the evidence
                keep_effect(prepared, _TAKEOVER, exc)
                return prepared
            try:
                # Before the change the echo names the client node; in force once it names
                # anyone else (the verification then checks that it is the gateway).
                timed = time_change(
                    client,
                    cluster.external.ip,
                    ECHO_PORT,
                    effect=Effect.answering_other_than(client.node.ip),
                    change=enable,
                    within=GATEWAY_SETTLE,
                    bound=_TIMING_BOUND,
                )
            finally:
                echo.stop()
            keep_effect(prepared, _TAKEOVER, timed)
        else:
            prepared.expected["source"] = client.node.ip
        return prepared

    def verify(self, cluster: Cluster, prepared: Prepared, condition: Condition) -> Verification:
        """A one-second test must arrive from the expected source address.

        A Kubernetes CNI programs its gateway a few seconds after the policy and the pod's
        label are stored (Cilium: a new identity for the pod, then the egress map), so while
        the source seen is still the client node's own address the test is repeated, for at
        most :data:`GATEWAY_SETTLE` seconds; any other source fails at once. A test that the
        switch-over cuts (the gateway's SNAT takes over a running connection, which is then
        reset) is repeated too, within the same time.
        """
        client = prepared.endpoints["client"]
        expected = prepared.expected["source"]
        gateway_on = prepared.expected.get("gateway") == "on"

        def seen_source() -> str:
            return _run_once(cluster, client, _VERIFY_SECONDS)[1]

        def final(seen: str) -> bool:  # right, or wrong in a way waiting cannot mend
            return seen == expected or not (gateway_on and seen == client.node.ip)

        seen, attempts = poll_until(
            seen_source,
            final,
            seconds=GATEWAY_SETTLE,
            retry=(ToolError,) if gateway_on else (),
        )
        check = _source_check(seen, expected, condition)
        evidence = {**check.evidence, "attempts": attempts, **effect_evidence(prepared, _TAKEOVER)}
        return Verification(check.ok, check.detail, evidence)

    def measure(
        self,
        cluster: Cluster,
        prepared: Prepared,
        condition: Condition,
        profile: Profile,
        repetition: int,
    ) -> RunOutput:
        """One iperf3 run to the external server; its source address is checked again. On an
        instrumented configuration the run is paced at :data:`INSTRUMENTED_PACE`, recorded as
        :data:`OFFERED_LOAD`."""
        paced = cluster.spec.options.get("napi") == "threaded"
        bitrate = INSTRUMENTED_PACE if paced else None
        parsed, seen, raw = _run_once(
            cluster, prepared.endpoints["client"], profile.egress_duration, bitrate=bitrate
        )
        # Throughput, retransmits and their rate, RTT: what every iperf3 run records.
        measurements = iperf3.iperf3_result_measurements(parsed)
        if bitrate is not None:
            measurements.append(Measurement(OFFERED_LOAD, bitrate, "bits/s"))
        # Once per set-up, with its first run (every round sets the gateway up again).
        timed, probe_log = take_effect(prepared, _TAKEOVER, "egress_gateway_takeover_time")
        measurements += timed
        verification = _source_check(seen, prepared.expected["source"], condition)
        return RunOutput(measurements, {**raw, **probe_log}, verification)

    def cleanup(self, cluster: Cluster, prepared: Prepared) -> None:
        """Switch the gateway off (if it was on) and remove the client pod."""
        if prepared.expected.get("gateway") == "on":
            cluster.disable_egress_gateway()
        super().cleanup(cluster, prepared)


def _run_once(
    cluster: Placement, client: Endpoint, seconds: float, *, bitrate: int | None = None
) -> tuple[iperf3.Iperf3Result, str, dict[str, str]]:
    server = cluster.external.iperf3_server_once(port=EXTERNAL_PORT, timeout=seconds + 60)
    argv = iperf3.iperf3_client_argv(
        cluster.external.ip, port=EXTERNAL_PORT, duration=seconds, bitrate=bitrate
    )
    try:
        result = client.run(argv, timeout=seconds + 30)
        parsed = iperf3.parse_iperf3(result.stdout, stderr=result.stderr)
    except CnibenchError:
        server.cancel()  # no test to wait for; its port is free for the next attempt
        raise
    seen = server.result()
    return (
        parsed,
        seen.remote_host,
        {"iperf3-client.json": result.stdout, "iperf3-server.json": seen.raw},
    )


def _source_check(seen: str, expected: str, condition: Condition) -> Verification:
    evidence = {"source_seen": seen, "source_expected": expected}
    if seen != expected:
        return Verification(
            False,
            f"{condition.id}: external server saw source {seen}, expected {expected}",
            evidence,
        )
    return Verification(True, f"{condition.id}: external server saw source {seen}", evidence)
