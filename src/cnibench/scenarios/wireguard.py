"""WireGuard: what node-to-node encryption costs in request-response time and throughput.

Seed 002 timed 10000 sequential HTTP requests per network scenario (histogram, ECDF, count/mean/
min/max/std); seed 003 measured throughput with encryption. The set-up is proven twice: the
datapath reports a tunnel with a peer per other node, and a marker string sent in an HTTP request
is visible in a capture on the underlay without encryption and absent with it.
"""

from __future__ import annotations

import dataclasses
import itertools
import secrets

from cnibench import stats
from cnibench.backends.base import (
    DEFAULT_PORTS,
    Capability,
    Cluster,
    ClusterSpec,
    Endpoint,
    NodeRole,
    WorkloadKind,
    WorkloadSpec,
)
from cnibench.errors import ToolError
from cnibench.records import Measurement, ParamValue
from cnibench.scenarios.base import Condition, Contrast, Prepared, RunOutput, Scenario, Verification
from cnibench.scenarios.profiles import Profile
from cnibench.tools import http_timing, iperf3

__all__ = ["WireguardScenario"]

ENCRYPTION = ("off", "on")
MEASUREMENTS = ("rr", "iperf3")
_HTTP_PORT = DEFAULT_PORTS[WorkloadKind.HTTP_ECHO]


class WireguardScenario(Scenario):
    """Encryption off vs on: sequential request-response times and throughput."""

    name = "wireguard"
    primary_metrics = ("throughput", "rr_mean", "rr_p99", "cpu", "ram")
    contrasts = (
        Contrast("encryption", treatment={"encryption": "on"}, control={"encryption": "off"}),
    )

    def conditions(self) -> list[Condition]:
        """``off-rr``, ``off-iperf3``, ``on-rr``, ``on-iperf3``."""
        return [
            Condition(self.name, f"{enc}-{what}", {"encryption": enc, "measurement": what})
            for enc, what in itertools.product(ENCRYPTION, MEASUREMENTS)
        ]

    def required_capabilities(self, condition: Condition) -> frozenset[Capability]:
        """Encryption needs WireGuard; both need an underlay capture for the marker proof."""
        needed = {Capability.UNDERLAY_CAPTURE}
        if condition.parameters["encryption"] == "on":
            needed.add(Capability.WIREGUARD)
        return frozenset(needed)

    def cluster_spec(self, cni: ClusterSpec, condition: Condition) -> ClusterSpec:
        """A separate cluster with encryption for the ``on`` conditions."""
        encryption = "wireguard" if condition.parameters["encryption"] == "on" else ""
        return dataclasses.replace(cni, encryption=encryption)

    def prepare(self, cluster: Cluster, condition: Condition, profile: Profile) -> Prepared:
        """HTTP echo + iperf3 server on the server node, client on the client node."""
        prepared = Prepared()
        prepared.endpoints["server"] = cluster.place(
            "wg-srv",
            role=NodeRole.SERVER,
            workloads=(
                WorkloadSpec(WorkloadKind.HTTP_ECHO, _HTTP_PORT),
                WorkloadSpec(WorkloadKind.IPERF3_SERVER, DEFAULT_PORTS[WorkloadKind.IPERF3_SERVER]),
            ),
        )
        prepared.endpoints["client"] = cluster.place("wg-cli", role=NodeRole.CLIENT)
        return prepared

    def verify(self, cluster: Cluster, prepared: Prepared, condition: Condition) -> Verification:
        """Tunnel status from the datapath, then the marker test on the underlay."""
        want = condition.parameters["encryption"] == "on"
        client: Endpoint = prepared.endpoints["client"]
        server: Endpoint = prepared.endpoints["server"]
        marker = f"cnibench-marker-{secrets.token_hex(8)}"
        send = [
            "curl",
            "-sS",
            "-o",
            "/dev/null",
            "--max-time",
            "5",
            f"http://{server.ip}:{_HTTP_PORT}/{marker}",
        ]
        seen = cluster.capture_underlay(marker.encode(), send, source=client)
        status = cluster.encryption_status()
        peers_needed = len(cluster.nodes) - 1
        evidence: dict[str, ParamValue] = {
            "encryption_enabled": status.enabled,
            "peers": ",".join(f"{node}={count}" for node, count in sorted(status.peers.items())),
            "marker_seen_on_underlay": seen,
        }
        if want:
            if not status.enabled:
                return Verification(False, "encryption is not enabled", evidence)
            short = {node: n for node, n in status.peers.items() if n < peers_needed}
            if short or len(status.peers) < len(cluster.nodes):
                return Verification(
                    False, f"tunnel peers missing (need {peers_needed} per node): {short}", evidence
                )
            if seen:
                return Verification(
                    False, "marker visible on the underlay despite encryption", evidence
                )
            return Verification(
                True, f"tunnel up with {peers_needed} peers per node, marker not visible", evidence
            )
        if status.enabled:
            return Verification(False, "encryption is on in the unencrypted cluster", evidence)
        if not seen:
            return Verification(
                False,
                "marker not visible on the underlay without encryption: capture broken",
                evidence,
            )
        return Verification(True, "no encryption, marker visible on the underlay", evidence)

    def measure(
        self,
        cluster: Cluster,
        prepared: Prepared,
        condition: Condition,
        profile: Profile,
        repetition: int,
    ) -> RunOutput:
        """Sequential request-response times, or one iperf3 run."""
        client: Endpoint = prepared.endpoints["client"]
        server: Endpoint = prepared.endpoints["server"]
        if condition.parameters["measurement"] == "iperf3":
            argv = iperf3.iperf3_client_argv(server.ip, duration=profile.duration)
            result = client.run(argv, timeout=profile.duration + 30)
            parsed = iperf3.parse_iperf3(result.stdout, stderr=result.stderr)
            # Retransmits beside throughput: a lossy tunnel would otherwise read as a slow one.
            return RunOutput(
                iperf3.iperf3_result_measurements(parsed), {"iperf3.json": result.stdout}
            )
        count = profile.sequential_requests
        argv = http_timing.http_timing_argv(f"http://{server.ip}:{_HTTP_PORT}/", count=count)
        result = client.run(argv, timeout=max(120.0, count * 0.05))
        # curl's exit status only reflects the last request: judge each request by its line.
        timing = http_timing.parse_http_timing(result.stdout, stderr=result.stderr)
        failures = len(timing.samples) - len(timing.total_times_us())
        if failures > len(timing.samples) // 100:
            raise ToolError(
                f"{failures} of {len(timing.samples)} sequential requests failed",
                tool="curl",
                output=result.stdout + result.stderr,
            )
        summary = stats.describe(timing.total_times_us())
        return RunOutput(
            [
                Measurement("rr_mean", summary.mean, "us"),
                Measurement("rr_std", summary.std, "us"),
                Measurement("rr_min", summary.min, "us"),
                Measurement("rr_max", summary.max, "us"),
                Measurement("rr_p50", summary.median, "us"),
                Measurement("rr_p99", summary.p99, "us"),
                Measurement("rr_count", float(summary.n), "count"),
                Measurement("rr_failures", float(failures), "count"),
            ],
            {"http-timing.txt": result.stdout},
        )
