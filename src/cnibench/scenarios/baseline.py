"""Baseline: pod-to-pod throughput, latency and HTTP rate, same node vs cross node, idle vs loaded.

Seeds 001 (iperf3 throughput, sockperf ping-pong latency, CPU/RAM from Prometheus, idle and
loaded clusters) and 004 (ab 50000 requests at concurrency 10, wrk 8 threads x 1000
connections). A condition is (placement, load, tool), so each run's CPU and memory window covers
exactly one tool. The tools are the client tools of :data:`cnibench.tools.registry.TOOLS` (iperf3,
sockperf, wrk, ab and any tool registered since): each says which server it talks to, its argv,
and the measurements and raw file its output gives. "Loaded" runs a concurrent background HTTP
load (wrk between two other pods) for the whole measurement.

The client reaches the server at its pod address (``target`` ``pod``, the default and the only
target without a ``target`` parameter), or, with ``--target service,nodeport``, through a
Service: its virtual IP, or a NodePort on the server's node (seed 001's comparison of
kube-proxy's iptables with an eBPF replacement lies on this path; seed 004 measured through
ClusterIP Services). The Service comes from the cluster's proxy (on the lab ``--proxy``:
kube-proxy's iptables chains or an nftables verdict map; on Kubernetes the proxy the cluster
runs, kube-proxy's mode or a CNI's eBPF replacement, and conditions of another proxy are
skipped naming it) with ``--services`` further Services in its tables. Verification proves the
translation: the answer through the Service's address names the server pod, and without the
Service's rules the address leads nowhere (tested). The further Services are created first, in
bulk, and the measured one last, so the time from the measured Service stored (its pod a ready
endpoint) until it answers is how long the proxy took to program the batch:
``service_programming_time``, beside ``service_creation_time`` (the API calls), once per set-up,
with the first run. The effect probe times it (:mod:`cnibench.scenarios.effect`: one command in
the client, connecting to the Service every 10 ms from the moment its address is known; the
first of 3 answers in a row by the server pod), with ``service_programming_time_leaks`` (answers
by anything else meanwhile) and the probe's log; a Service already answering at the probe's
first attempt gives an upper bound, which the verification's evidence says
(``programming_upper_bound``), with the probe's spacing. After every such run, outside its
resource window, one more Service is added among those in the tables and timed from its
request until it answers (``new_service_time``, ``new_service_time_leaks``; the probe runs
from before the request, at an address chosen free beforehand): a sequential session of 1000
further Services, set up once, times its proxy once per run, not once.

With ``--pairs N`` (:attr:`ScenarioOptions.pairs`) the conditions of every tool that can
combine clients (:attr:`ClientMeasurement.combine`: iperf3, sockperf) run N client/server
pairs at once, e.g. ``cross-node-idle-iperf3-4pairs`` with the parameter ``pairs`` 4: N server
pods on the server node, N client pods on the client node (or the server's), all clients
started together (:mod:`cnibench.scenarios.pairs`). A run records each pair's values (the
records' ``pair``), their aggregate as the run's value (``pair`` ``None``: the sum of the
throughputs; what statistics use) and each pair's ``pair_start``/``pair_end``; a run whose
streams did not overlap fails with the reason. Under iperf3 a sockperf ping-pong probe runs
from the first pair's client during the streams, recorded as ``latency_under_load_avg``,
``_p50``, ``_p99`` and ``_p999``; the streams then last :data:`PROBE_LEAD` seconds more than
the profile's duration, so the probe's measurement lies within them. The other tools (wrk, ab,
curl: many connections of their own) keep one client.
"""

from __future__ import annotations

import dataclasses
import itertools
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from cnibench.backends.base import (
    DEFAULT_PORTS,
    Capability,
    Cluster,
    CommandResult,
    Endpoint,
    NodeRole,
    WorkloadKind,
    WorkloadSpec,
)
from cnibench.errors import CnibenchError, ConfigError, ToolError
from cnibench.records import Measurement, ParamValue
from cnibench.scenarios.base import (
    OTHER_THAN_CONTROL,
    Condition,
    Contrast,
    Prepared,
    RunOutput,
    Scenario,
    Verification,
)
from cnibench.scenarios.effect import (
    change_measurements,
    effect_evidence,
    keep_effect,
    take_effect,
    time_change,
    time_effect,
)
from cnibench.scenarios.options import DEFAULT_OPTIONS, INTERLEAVED_SERVICES_MAX, ScenarioOptions
from cnibench.scenarios.pairs import StreamJob, StreamRun, overlap_problem, run_together
from cnibench.scenarios.profiles import Profile
from cnibench.tools import sockperf, wrk
from cnibench.tools.effect_probe import Effect
from cnibench.tools.registry import ClientMeasurement, ToolTarget, client_tools
from cnibench.waiting import poll_until

__all__ = ["INTERLEAVED_SERVICES_MAX", "BaselineScenario"]

PLACEMENTS = ("same-node", "cross-node")
LOADS = ("idle", "loaded")


def _server_kind(tool: str, run: ClientMeasurement) -> WorkloadKind:
    """The workload kind ``tool``'s client talks to."""
    try:
        return WorkloadKind(run.server)
    except ValueError:
        raise ConfigError(
            f"tool {tool!r} talks to a server {run.server!r} that no backend runs;"
            f" the servers are {', '.join(WorkloadKind)}"
        ) from None


def _client_runs() -> dict[str, ClientMeasurement]:
    """Each registered client tool's measurement by tool name, in registration order."""
    return {tool.name: tool.client for tool in client_tools() if tool.client is not None}


def _server_workloads() -> tuple[WorkloadSpec, ...]:
    """The servers of every client tool, each once (iperf3, sockperf, HTTP echo)."""
    kinds = dict.fromkeys(_server_kind(name, run) for name, run in _client_runs().items())
    return tuple(WorkloadSpec(kind, DEFAULT_PORTS[kind]) for kind in kinds)


SERVICE_SETTLE = 15.0
"""Seconds a Service target may take to answer after :meth:`Cluster.expose` returned (a proxy's
next sync); a check through a Service that still gets no answer then fails."""
SERVICE_SETTLE_PER_SERVICE = 0.02
"""Further seconds of settle time per further Service (5000: 100 s more)."""
NEW_SERVICE = "new_service_time"
"""Seconds from one more Service's request until it answers, among those already in the tables
(:meth:`BaselineScenario.time_changes`, every run through a Service)."""
_CREATED = "service_creation_seconds"
_PROGRAMMING = "programming"
"""Keys of :attr:`Prepared.expected`: how long storing the Services took (reported with the
first run), and the key the measured one's time to effect is kept under
(:func:`~cnibench.scenarios.effect.keep_effect`; its evidence is named ``programming_*``)."""
_LOAD_CONNECTIONS = 50
_LOAD_THREADS = 2
PROBE = "latency probe"
PROBE_LEAD = 3.0
"""Seconds a ``--pairs`` iperf3 run's streams last beyond the profile's duration when a
latency probe runs beside them: sockperf waits 2 s after it connects before it starts
measuring (seen on the lab: "Starting test" 2.0 s after its warm-up line), so streams of the
probe's own length would end as its measurement began. With the lead, the probe's whole
measurement lies within the streams, which :func:`overlap_problem` checks (the probe must end
first)."""


class BaselineScenario(Scenario):
    """Pod-to-pod datapath cost without any feature switched on, to the pod or a Service."""

    name = "baseline"
    primary_metrics = (
        "throughput",
        "latency_avg",
        "latency_under_load_avg",
        "requests_per_second",
        "new_service_time",
        "cpu",
        "ram",
    )
    contrasts = (
        Contrast(
            "cross-node", treatment={"placement": "cross-node"}, control={"placement": "same-node"}
        ),
        Contrast("background load", treatment={"load": "loaded"}, control={"load": "idle"}),
        *(
            Contrast(
                f"{target} path",
                treatment={"target": target},
                control={},
                varies=("proxy", "services"),
                control_lacks=("target",),
            )
            for target in ("service", "nodeport")
        ),
        Contrast(
            "other Services in the tables",
            treatment={"services": OTHER_THAN_CONTROL},
            control={"services": 0},
        ),
    )

    runs_pairs = True
    proxy_parameter = "proxy"

    def __init__(self, options: ScenarioOptions | None = None) -> None:
        self.options = options or DEFAULT_OPTIONS

    def through_service(self, parameters: Mapping[str, ParamValue]) -> bool:
        """A condition with a ``target`` (``service`` or ``nodeport``): its client reaches the
        server through the Service's address, and the answer naming the server pod proves the
        proxy translated it."""
        return "target" in parameters

    def conditions(self) -> list[Condition]:
        """(placement, load, tool) combinations, e.g. ``cross-node-idle-iperf3``, each to the
        pod and through every Service target, proxy and table size asked for, e.g.
        ``cross-node-idle-iperf3-service-nftables-5000svc``; with ``--pairs N`` a tool that
        combines clients runs N pairs to the pod, e.g. ``cross-node-idle-iperf3-4pairs``."""
        out = []
        runs = _client_runs()
        for placement, load, tool in itertools.product(PLACEMENTS, LOADS, runs):
            base = f"{placement}-{load}-{tool}"
            parameters: dict[str, ParamValue] = {
                "placement": placement,
                "load": load,
                "tool": tool,
            }
            pairs = self.options.pairs
            if pairs is not None and runs[tool].combine is not None:
                # --pairs measures pod to pod only (parse_scenario_options).
                out.append(
                    Condition(
                        self.name,
                        f"{base}-{pairs}pair{'s' if pairs != 1 else ''}",
                        {**parameters, "pairs": pairs},
                    )
                )
                continue
            for target in self.options.targets:
                if target == "pod":
                    out.append(Condition(self.name, base, parameters))
                    continue
                for proxy, services in itertools.product(
                    self.options.proxies, self.options.services
                ):
                    out.append(
                        Condition(
                            self.name,
                            f"{base}-{target}-{proxy}-{services}svc",
                            {
                                **parameters,
                                "target": target,
                                "proxy": str(proxy),
                                "services": services,
                            },
                        )
                    )
        return out

    def required_capabilities(self, condition: Condition) -> frozenset[Capability]:
        """A Service target needs the cluster to build Services with the condition's proxy."""
        if "target" in condition.parameters:
            proxy = str(condition.parameters["proxy"])
            return frozenset({Capability.SERVICE_PROXY, Capability.service_proxy(proxy)})
        return frozenset()

    def sequential_reason(self, condition: Condition) -> str:
        """More than :data:`INTERLEAVED_SERVICES_MAX` further Services: set up once, not every
        round."""
        services = int(condition.parameters.get("services", 0))
        if services <= INTERLEAVED_SERVICES_MAX:
            return ""
        return (
            f"more than {INTERLEAVED_SERVICES_MAX} further Services would be created and"
            " deleted again every round (minutes each way on kind)"
        )

    def prepare(self, cluster: Cluster, condition: Condition, profile: Profile) -> Prepared:
        """Server pod on the server node, client on the client node (or the server's)."""
        prepared = Prepared()
        same = condition.parameters["placement"] == "same-node"
        servers = _server_workloads()
        pairs = _pairs(condition)
        if pairs is None:
            prepared.endpoints["server"] = cluster.place(
                "bl-srv", role=NodeRole.SERVER, workloads=servers
            )
            prepared.endpoints["client"] = cluster.place(
                "bl-cli", role=NodeRole.SERVER if same else NodeRole.CLIENT
            )
        else:
            # Every server first (each listening once placed), then every client.
            for pair in range(pairs):
                prepared.endpoints[_role("server", pair)] = cluster.place(
                    f"bl-srv-p{pair}", role=NodeRole.SERVER, workloads=servers
                )
            for pair in range(pairs):
                prepared.endpoints[_role("client", pair)] = cluster.place(
                    f"bl-cli-p{pair}", role=NodeRole.SERVER if same else NodeRole.CLIENT
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
        target = condition.parameters.get("target")
        server: Endpoint = prepared.endpoints["server"]
        prepared.expected["address"] = server.ip
        if target is not None:
            started = time.monotonic()
            service = cluster.expose(
                server,
                [spec.port for spec in servers],
                proxy=str(condition.parameters["proxy"]),
                others=int(condition.parameters["services"]),
            )
            exposed = time.monotonic()
            prepared.expected[_CREATED] = repr(exposed - started)
            prepared.expected["service"] = "yes"
            if target == "service":
                address, ports = service.cluster_ip, service.ports
            else:
                address, ports = service.node_ip, service.node_ports
            prepared.expected["address"] = address
            for pod_port, port in ports.items():
                prepared.expected[f"port:{pod_port}"] = str(port)
            if pairs is None:
                # From every Service stored (the measured one last, its pod a ready endpoint)
                # until it answers: the proxy programming the whole batch, to the probe's 10 ms.
                http = _Target.of(prepared).port(WorkloadKind.HTTP_ECHO)
                timed = time_effect(
                    prepared.endpoints["client"],
                    address,
                    http,
                    effect=Effect.answering(server.name),
                    since=exposed,
                    within=_service_settle(condition),
                )
                keep_effect(prepared, _PROGRAMMING, timed)
        return prepared

    def time_changes(self, cluster: Cluster, prepared: Prepared, condition: Condition) -> RunOutput:
        """Through a Service (one client): one more Service in front of the server among those
        already in the proxy's tables, timed from its request until it answers
        (``new_service_time``, with ``new_service_time_leaks``): the effect probe in the client
        connects to its address, chosen free beforehand, every 10 ms from before the request.
        Once per run, so a sequential session of 1000 further Services, set up once, still
        times its proxy n times; the added Services stay until the set-up's cleanup."""
        if "target" not in condition.parameters or _pairs(condition) is not None:
            return RunOutput(())
        server: Endpoint = prepared.endpoints["server"]
        port = DEFAULT_PORTS[WorkloadKind.HTTP_ECHO]
        address = cluster.free_service_address()
        timed = time_change(
            prepared.endpoints["client"],
            address,
            port,
            effect=Effect.answering(server.name),
            change=lambda: cluster.add_service(server, port, address=address),
            within=_service_settle(condition),
        )
        measurements, raw = change_measurements(timed, NEW_SERVICE)
        return RunOutput(measurements, raw)

    def cleanup(self, cluster: Cluster, prepared: Prepared) -> None:
        """Remove the Service (if any), then the pods."""
        if prepared.expected.get("service"):
            cluster.remove_service()
        super().cleanup(cluster, prepared)

    def verify(self, cluster: Cluster, prepared: Prepared, condition: Condition) -> Verification:
        """Pods run on the intended nodes and the client reaches the server (every pair's,
        with ``--pairs``)."""
        pairs = _pairs(condition)
        if pairs is not None:
            return _verify_pairs(prepared, condition, pairs)
        server: Endpoint = prepared.endpoints["server"]
        client: Endpoint = prepared.endpoints["client"]
        want_same = condition.parameters["placement"] == "same-node"
        on_same = server.node.name == client.node.name
        evidence: dict[str, ParamValue] = {
            "server_node": server.node.name,
            "client_node": client.node.name,
        }
        if server.node.role is not NodeRole.SERVER:
            return Verification(False, f"server pod landed on {server.node.name}", evidence)
        if want_same != on_same:
            where = "the same node" if on_same else "different nodes"
            return Verification(False, f"client and server are on {where}", evidence)
        target = _Target.of(prepared)
        url = target.url()
        through_service = "target" in condition.parameters
        # A proxy programs a new Service a moment after its endpoint is listed (kube-proxy's
        # next sync): a Service is probed until it answers or the settle time has passed (more
        # with thousands of further Services in the tables).
        settle = _service_settle(condition)
        probe, _ = poll_until(
            lambda: client.run(
                ["curl", "-sS", "-w", "\n%{http_code}", "--max-time", "3", url], timeout=10
            ),
            lambda answer: answer.stdout.strip().rpartition("\n")[2] == "200",
            seconds=settle if through_service else 0.0,
        )
        body, _, code = probe.stdout.strip().rpartition("\n")
        evidence.update(url=url, status=code, answered_by=body.strip())
        if code != "200":
            return Verification(
                False, f"client cannot reach server at {url}: {probe.stderr.strip()}", evidence
            )
        where = f"client on {client.node.name}, server on {server.node.name}"
        if "target" not in condition.parameters:
            return Verification(True, where, evidence)
        # The Service's address is no interface's: an answer naming the server pod proves the
        # proxy translated it to that pod.
        if body.strip() != server.name:
            return Verification(
                False, f"{url} was answered by {body.strip()!r}, not by {server.name}", evidence
            )
        created = prepared.expected.get(_CREATED)
        if created is not None:
            evidence["creation_seconds"] = round(float(created), 3)
        # How the set-up timed the programming: the value, the probe's spacing, the leaks.
        evidence.update(effect_evidence(prepared, _PROGRAMMING))
        return Verification(True, f"{where}; {url} answered by {server.name}", evidence)

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
        server = _Target.of(prepared)
        pairs = _pairs(condition)
        background = (
            _BackgroundLoad.start(prepared) if "load-client" in prepared.endpoints else None
        )
        verification: Verification | None = None
        try:
            if pairs is None:
                measurements, raw = _measure(tool, client, server, profile)
            else:
                measurements, raw, verification = _measure_pairs(tool, prepared, pairs, profile)
        finally:
            if background is not None:
                background.stop()
        if background is not None and background.result is not None:
            raw = {**raw, "background-wrk.txt": background.result.stdout}
        # Once per set-up, whichever repetition comes first after it (every round of an
        # interleaved session sets the Services up again, and each round's proxy is timed).
        created = prepared.expected.pop(_CREATED, "")
        if created:
            programming, probe_log = take_effect(prepared, _PROGRAMMING, "service_programming_time")
            measurements = [
                *measurements,
                Measurement("service_creation_time", float(created), "s"),
                *programming,
            ]
            raw = {**raw, **probe_log}
        return RunOutput(measurements, raw, verification)


def _service_settle(condition: Condition) -> float:
    """Seconds a Service may take to answer (:data:`SERVICE_SETTLE`, more with thousands of
    further Services in the proxy's tables)."""
    services = int(condition.parameters.get("services", 0))
    return SERVICE_SETTLE + services * SERVICE_SETTLE_PER_SERVICE


def _pairs(condition: Condition) -> int | None:
    """The condition's number of client/server pairs, ``None`` for one client without
    ``--pairs``."""
    pairs = condition.parameters.get("pairs")
    return None if pairs is None else int(pairs)


def _role(role: str, pair: int) -> str:
    """The key of ``pair``'s ``role`` endpoint in :attr:`Prepared.endpoints`: the first pair's
    are ``server`` and ``client`` (what a single-client condition names them), the others'
    ``server-1``, ``client-1``, ..."""
    return role if pair == 0 else f"{role}-{pair}"


def _verify_pairs(prepared: Prepared, condition: Condition, pairs: int) -> Verification:
    """Every pair's server on a server node, its client on the node the placement asks for,
    and each client reaching its own server's HTTP echo, which names that server pod."""
    want_same = condition.parameters["placement"] == "same-node"
    evidence: dict[str, ParamValue] = {"pairs": pairs}
    for pair in range(pairs):
        server: Endpoint = prepared.endpoints[_role("server", pair)]
        client: Endpoint = prepared.endpoints[_role("client", pair)]
        evidence[f"pair{pair}_server_node"] = server.node.name
        evidence[f"pair{pair}_client_node"] = client.node.name
        evidence[f"pair{pair}_server_pod"] = server.name
        evidence[f"pair{pair}_client_pod"] = client.name
        if pair == 0:
            evidence.update(server_node=server.node.name, client_node=client.node.name)
        if server.node.role is not NodeRole.SERVER:
            return Verification(
                False, f"pair {pair}: server pod landed on {server.node.name}", evidence
            )
        if want_same != (server.node.name == client.node.name):
            where = "different nodes" if want_same else "the same node"
            return Verification(False, f"pair {pair}: client and server are on {where}", evidence)
        url = _url(server)
        probe = client.run(
            ["curl", "-sS", "-w", "\n%{http_code}", "--max-time", "3", url], timeout=10
        )
        body, _, code = probe.stdout.strip().rpartition("\n")
        if code != "200" or body.strip() != server.name:
            return Verification(
                False,
                f"pair {pair}: client {client.name} did not get {server.name}'s answer at {url}:"
                f" status {code or '-'}, {body.strip()[:80]!r} {probe.stderr.strip()[:120]}",
                evidence,
            )
    first: Endpoint = prepared.endpoints["client"]
    server0: Endpoint = prepared.endpoints["server"]
    return Verification(
        True,
        f"{pairs} pair(s): clients on {first.node.name}, servers on {server0.node.name},"
        " each answered by its own server",
        evidence,
    )


def _measure_pairs(
    tool: str, prepared: Prepared, pairs: int, profile: Profile
) -> tuple[list[Measurement], dict[str, str], Verification]:
    """One run of ``pairs`` clients of ``tool`` at once, each against its own server, plus,
    for a tool other than sockperf, a sockperf probe from the first client to the first
    server during the streams.

    Returns the aggregate (``pair`` ``None``), the probe's ``latency_under_load_*``, each
    pair's measurements and ``pair_start``/``pair_end`` (s since the epoch; ``pair`` set), the
    raw outputs, and the proof that every stream overlapped the others
    (:func:`~cnibench.scenarios.pairs.overlap_problem`).

    Raises
    ------
    cnibench.errors.ConfigError
        ``tool`` is no registered client tool, or it cannot combine pairs.
    cnibench.errors.ToolError
        A client failed (the pair named); its output is kept.
    """
    runs = _client_runs()
    run = runs.get(tool)
    if run is None or run.combine is None:
        raise ConfigError(f"baseline tool {tool!r} does not run client/server pairs")
    kind = _server_kind(tool, run)
    probe = tool != sockperf.TOOL
    streams = dataclasses.replace(profile, duration=profile.duration + PROBE_LEAD)
    jobs = []
    for pair in range(pairs):
        server: Endpoint = prepared.endpoints[_role("server", pair)]
        target = ToolTarget(server.ip, DEFAULT_PORTS[kind])
        jobs.append(
            StreamJob(
                f"pair {pair}",
                prepared.endpoints[_role("client", pair)],
                run.argv(target, streams if probe else profile),
                run.timeout(streams if probe else profile),
            )
        )
    if probe:
        server0: Endpoint = prepared.endpoints["server"]
        target = ToolTarget(server0.ip, DEFAULT_PORTS[WorkloadKind.SOCKPERF_SERVER])
        probe_run = sockperf.SOCKPERF.client
        assert probe_run is not None
        jobs.append(
            StreamJob(
                PROBE,
                prepared.endpoints["client"],
                probe_run.argv(target, profile),
                probe_run.timeout(profile),
                inside=True,
            )
        )
    done = run_together(jobs)
    raw = {
        f"pair{i}-{run.raw_file}": stream.result.stdout
        for i, stream in enumerate(done[:pairs])
        if stream.result is not None
    }
    _raise_first_failure(done, tool)
    outputs = [_output(stream) for stream in done[:pairs]]
    measurements = list(run.combine(outputs))
    if probe:
        probe_out = _output(done[pairs])
        raw["latency-under-load-sockperf.txt"] = probe_out[0]
        seen = {m.metric: m.value for m in sockperf.sockperf_measurements(*probe_out)}
        measurements += [
            Measurement("latency_under_load_avg", seen["latency_avg"], "us"),
            Measurement("latency_under_load_p50", seen["latency_p50"], "us"),
            Measurement("latency_under_load_p99", seen["latency_p99"], "us"),
            Measurement("latency_under_load_p999", seen["latency_p999"], "us"),
        ]
    for pair, (stream, output) in enumerate(zip(done, outputs, strict=False)):
        measurements += [
            Measurement(m.metric, m.value, m.unit, pair=pair) for m in run.measurements(*output)
        ]
        measurements += [
            Measurement("pair_start", stream.started, "s", pair=pair),
            Measurement("pair_end", stream.ended, "s", pair=pair),
        ]
    problem, shared = overlap_problem(done)
    evidence: dict[str, ParamValue] = {"pairs": pairs, "shared_seconds": round(shared, 3)}
    if problem:
        return (
            measurements,
            raw,
            Verification(False, f"streams did not overlap: {problem}", evidence),
        )
    return measurements, raw, Verification(True, f"{len(done)} streams overlapped", evidence)


def _output(stream: StreamRun) -> tuple[str, str]:
    """A stream's ``(stdout, stderr)`` (it ran: :func:`_raise_first_failure` checked)."""
    assert stream.result is not None
    return stream.result.stdout, stream.result.stderr


def _raise_first_failure(done: Sequence[StreamRun], tool: str) -> None:
    """Raise the first stream's error, naming the stream, its output kept."""
    for stream in done:
        if stream.error is not None:
            output = getattr(stream.error, "output", "")
            raise ToolError(f"{stream.name}: {stream.error}", tool=tool, output=output)


@dataclass(frozen=True)
class _Target:
    """Where the client sends: the pod's address, or a Service's address and ports."""

    address: str
    ports: Mapping[int, int]

    @classmethod
    def of(cls, prepared: Prepared) -> _Target:
        ports = {
            int(key.removeprefix("port:")): int(value)
            for key, value in prepared.expected.items()
            if key.startswith("port:")
        }
        return cls(prepared.expected["address"], ports)

    def port(self, kind: WorkloadKind) -> int:
        """The port that reaches the server's ``kind`` workload at :attr:`address`."""
        pod_port = DEFAULT_PORTS[kind]
        return self.ports.get(pod_port, pod_port)

    def url(self) -> str:
        return ToolTarget(self.address, self.port(WorkloadKind.HTTP_ECHO)).url


def _measure(
    tool: str, client: Endpoint, server: _Target, profile: Profile
) -> tuple[list[Measurement], dict[str, str]]:
    """One run of registered client tool ``tool`` from ``client`` against its server."""
    runs = _client_runs()
    if tool not in runs:
        raise ConfigError(
            f"baseline tool {tool!r} is not a registered client tool: {', '.join(runs)}"
        )
    run = runs[tool]
    target = ToolTarget(server.address, server.port(_server_kind(tool, run)))
    result = client.run(run.argv(target, profile), timeout=run.timeout(profile))
    return list(run.measurements(result.stdout, result.stderr)), {run.raw_file: result.stdout}


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
