"""Baseline: pod-to-pod throughput, latency and HTTP rate, same node vs cross node, idle vs loaded.

Seeds 001 (iperf3 throughput, sockperf ping-pong latency, CPU/RAM from Prometheus, idle and
loaded clusters) and 004 (ab 50000 requests at concurrency 10, wrk 8 threads x 1000
connections). A condition is (placement, load, tool), so each run's CPU and memory window covers
exactly one tool. "Loaded" runs a concurrent background HTTP load (wrk between two other pods)
for the whole measurement.
"""

from __future__ import annotations

import itertools
import threading

from cnibench.backends.base import (
    DEFAULT_PORTS,
    Cluster,
    CommandResult,
    Endpoint,
    NodeRole,
    WorkloadKind,
    WorkloadSpec,
)
from cnibench.errors import CnibenchError
from cnibench.records import Measurement
from cnibench.scenarios.base import Condition, Contrast, Prepared, RunOutput, Scenario, Verification
from cnibench.scenarios.profiles import Profile
from cnibench.tools import ab, iperf3, sockperf, wrk

__all__ = ["BaselineScenario"]

PLACEMENTS = ("same-node", "cross-node")
LOADS = ("idle", "loaded")
TOOLS = ("iperf3", "sockperf", "ab", "wrk")

SERVER_WORKLOADS = tuple(
    WorkloadSpec(kind, DEFAULT_PORTS[kind])
    for kind in (WorkloadKind.IPERF3_SERVER, WorkloadKind.SOCKPERF_SERVER, WorkloadKind.HTTP_ECHO)
)
_LOAD_CONNECTIONS = 50
_LOAD_THREADS = 2


class BaselineScenario(Scenario):
    """Pod-to-pod datapath cost without any feature switched on."""

    name = "baseline"
    primary_metrics = ("throughput", "latency_avg", "requests_per_second", "cpu", "ram")
    contrasts = (
        Contrast(
            "cross-node", treatment={"placement": "cross-node"}, control={"placement": "same-node"}
        ),
        Contrast("background load", treatment={"load": "loaded"}, control={"load": "idle"}),
    )

    def conditions(self) -> list[Condition]:
        """(placement, load, tool) combinations, e.g. ``cross-node-idle-iperf3``."""
        return [
            Condition(
                self.name,
                f"{placement}-{load}-{tool}",
                {"placement": placement, "load": load, "tool": tool},
            )
            for placement, load, tool in itertools.product(PLACEMENTS, LOADS, TOOLS)
        ]

    def prepare(self, cluster: Cluster, condition: Condition, profile: Profile) -> Prepared:
        """Server pod on the server node, client on the client node (or the server's)."""
        prepared = Prepared()
        same = condition.parameters["placement"] == "same-node"
        prepared.endpoints["server"] = cluster.place(
            "bl-srv", role=NodeRole.SERVER, workloads=SERVER_WORKLOADS
        )
        prepared.endpoints["client"] = cluster.place(
            "bl-cli", role=NodeRole.SERVER if same else NodeRole.CLIENT
        )
        if condition.parameters["load"] == "loaded":
            prepared.endpoints["load-server"] = cluster.place(
                "bl-lsrv",
                role=NodeRole.SERVER,
                workloads=(
                    WorkloadSpec(WorkloadKind.HTTP_ECHO, DEFAULT_PORTS[WorkloadKind.HTTP_ECHO]),
                ),
            )
            prepared.endpoints["load-client"] = cluster.place("bl-lcli", role=NodeRole.CLIENT)
        return prepared

    def verify(self, cluster: Cluster, prepared: Prepared, condition: Condition) -> Verification:
        """Pods run on the intended nodes and the client reaches the server."""
        server: Endpoint = prepared.endpoints["server"]
        client: Endpoint = prepared.endpoints["client"]
        want_same = condition.parameters["placement"] == "same-node"
        on_same = server.node.name == client.node.name
        evidence = {"server_node": server.node.name, "client_node": client.node.name}
        if server.node.role is not NodeRole.SERVER:
            return Verification(False, f"server pod landed on {server.node.name}", evidence)
        if want_same != on_same:
            where = "the same node" if on_same else "different nodes"
            return Verification(False, f"client and server are on {where}", evidence)
        probe = client.run(
            [
                "curl",
                "-sS",
                "-o",
                "/dev/null",
                "-w",
                "%{http_code}",
                "--max-time",
                "5",
                f"http://{server.ip}:{DEFAULT_PORTS[WorkloadKind.HTTP_ECHO]}/",
            ],
            timeout=10,
        )
        if probe.stdout.strip() != "200":
            return Verification(
                False, f"client cannot reach server: {probe.stderr.strip()}", evidence
            )
        return Verification(
            True, f"client on {client.node.name}, server on {server.node.name}", evidence
        )

    def measure(
        self,
        cluster: Cluster,
        prepared: Prepared,
        condition: Condition,
        profile: Profile,
        repetition: int,
    ) -> RunOutput:
        """Run the condition's tool once, under background load if the condition says so."""
        tool = str(condition.parameters["tool"])
        client: Endpoint = prepared.endpoints["client"]
        server: Endpoint = prepared.endpoints["server"]
        background = (
            _BackgroundLoad.start(prepared) if "load-client" in prepared.endpoints else None
        )
        try:
            measurements, raw = _MEASURE[tool](client, server, profile)
        finally:
            if background is not None:
                background.stop()
        if background is not None and background.result is not None:
            raw = {**raw, "background-wrk.txt": background.result.stdout}
        return RunOutput(measurements, raw)


def _iperf3(
    client: Endpoint, server: Endpoint, profile: Profile
) -> tuple[list[Measurement], dict[str, str]]:
    argv = iperf3.iperf3_client_argv(server.ip, duration=profile.duration)
    result = client.run(argv, timeout=profile.duration + 30)
    parsed = iperf3.parse_iperf3(result.stdout, stderr=result.stderr)
    out = [
        Measurement("throughput", parsed.received_bits_per_second, "bits/s"),
        Measurement("throughput_sender", parsed.sent_bits_per_second, "bits/s"),
    ]
    if parsed.retransmits is not None:
        out.append(Measurement("retransmits", float(parsed.retransmits), "count"))
    if parsed.mean_rtt_us is not None:
        out.append(Measurement("rtt_mean", parsed.mean_rtt_us, "us"))
    return out, {"iperf3.json": result.stdout}


def _sockperf(
    client: Endpoint, server: Endpoint, profile: Profile
) -> tuple[list[Measurement], dict[str, str]]:
    argv = sockperf.sockperf_pingpong_argv(server.ip, duration=profile.duration)
    result = client.run(argv, timeout=profile.duration + 30)
    parsed = sockperf.parse_sockperf(result.stdout, stderr=result.stderr)
    return [
        Measurement("latency_avg", parsed.avg_latency_us, "us"),
        Measurement("latency_p50", parsed.p50_us, "us"),
        Measurement("latency_p99", parsed.p99_us, "us"),
        Measurement("latency_p999", parsed.p999_us, "us"),
    ], {"sockperf.txt": result.stdout}


def _ab(
    client: Endpoint, server: Endpoint, profile: Profile
) -> tuple[list[Measurement], dict[str, str]]:
    argv = ab.ab_argv(_url(server), requests=profile.ab_requests, concurrency=10)
    result = client.run(argv, timeout=300)
    parsed = ab.parse_ab(result.stdout, stderr=result.stderr)
    return [
        Measurement("requests_per_second", parsed.requests_per_second, "requests/s"),
        Measurement("time_per_request", parsed.time_per_request_ms, "ms"),
        Measurement("failed_requests", float(parsed.failed_requests), "count"),
    ], {"ab.txt": result.stdout}


def _wrk(
    client: Endpoint, server: Endpoint, profile: Profile
) -> tuple[list[Measurement], dict[str, str]]:
    argv = wrk.wrk_argv(
        _url(server),
        threads=profile.wrk_threads,
        connections=profile.wrk_connections,
        duration=profile.duration,
    )
    result = client.run(argv, timeout=profile.duration + 30)
    parsed = wrk.parse_wrk(result.stdout, stderr=result.stderr)
    return [
        Measurement("requests_per_second", parsed.requests_per_second, "requests/s"),
        Measurement("latency_avg", parsed.latency_avg_us, "us"),
        Measurement("latency_p50", parsed.latency_percentiles_us[50], "us"),
        Measurement("latency_p99", parsed.latency_percentiles_us[99], "us"),
        Measurement("errors", float(parsed.errors.total), "count"),
    ], {"wrk.txt": result.stdout}


_MEASURE = {"iperf3": _iperf3, "sockperf": _sockperf, "ab": _ab, "wrk": _wrk}


def _url(server: Endpoint) -> str:
    return f"http://{server.ip}:{DEFAULT_PORTS[WorkloadKind.HTTP_ECHO]}/"


class _BackgroundLoad:
    """wrk between two other pods for the length of one measurement ("loaded" conditions).

    The load runs as a sequence of short wrk invocations so that it can stop within one chunk
    of the measurement ending; the number of chunks is bounded so it always ends by itself.
    """

    CHUNK_SECONDS = 2.0
    MAX_CHUNKS = 1000

    def __init__(self, client: Endpoint, url: str) -> None:
        self._client = client
        self._argv = wrk.wrk_argv(
            url, threads=_LOAD_THREADS, connections=_LOAD_CONNECTIONS, duration=self.CHUNK_SECONDS
        )
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self.result: CommandResult | None = None

    @classmethod
    def start(cls, prepared: Prepared) -> _BackgroundLoad:
        """Start loading the ``load-server`` pod from the ``load-client`` pod."""
        load = cls(prepared.endpoints["load-client"], _url(prepared.endpoints["load-server"]))
        load._thread.start()
        return load

    def _run(self) -> None:
        for _ in range(self.MAX_CHUNKS):
            if self._stop.is_set():
                return
            try:
                self.result = self._client.run(self._argv, timeout=self.CHUNK_SECONDS + 15)
            except CnibenchError:
                # Best effort: a failing background load must not hide the measurement's result.
                self._stop.wait(self.CHUNK_SECONDS)

    def stop(self) -> None:
        """Stop after the current chunk and wait for it."""
        self._stop.set()
        self._thread.join()
