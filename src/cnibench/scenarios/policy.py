"""Network policy: what enforcing "only these clients, only these ports" costs, by rule count.

Seed 003 grew policy complexity with extra port-range rules and loaded one server from many
client pods. Here a condition is (policy off/on, same/cross node, non-matching rules, concurrent
clients), plus the engine and which packets the rules see where the backend lets a condition
choose them (:attr:`~cnibench.backends.base.Backend.policy_choices`: the lab offers its three
engines; a Kubernetes CNI enforces with its own datapath whatever it is asked, so its
conditions name neither, and one measurement is never recorded twice under different labels).
Because real datapaths accept established flows through conntrack, the rule count mostly costs
*new* connections, so each run measures both:

* aggregate iperf3 throughput over long-lived connections (``throughput``, bits/s),
* ``ab`` without keep-alive, one TCP connection per request (``new_connections_per_second``,
  latency in ms, ``connection_success_rate``).

With the policy on, the set-up also times the CNI: ``policy_enforcement_time`` is the time from
the policy's apply call returning until the pod outside the policy was blocked, read by the
effect probe (:mod:`cnibench.scenarios.effect`: one command in that pod, started before the
policy is applied, connecting every 10 ms; the first of 3 blocked attempts in a row), and
``policy_enforcement_time_leaks`` counts its connections that still got through after the apply
call returned (kube-burner and ClusterLoader2 measure this latency; no data-path tool reports
it beside throughput). The way back is timed too: ``policy_removal_time``, from the policy's
delete call returning until that pod is answered again (the first of 3 answered attempts in a
row); the policy is then applied again for the runs. Both are measured once per set-up and
recorded with the condition's first run, with the probes' logs; the verification's evidence
states the probes' spacing.

Concurrent clients are ``clients`` TCP connections spread over at most :data:`MAX_CLIENT_PODS`
client pods (iperf3 ``-P`` streams and ``ab -c`` per pod), not one pod per client: creating 200
namespaces per condition would dominate the run on a small machine. Every client pod is an
allowed source of the policy. Before measuring, a probe matrix (as cyclonus does) checks that
every client pod connects to every allowed port and that a pod outside the policy is blocked.
"""

from __future__ import annotations

import functools
import itertools
import json
import math
import threading
from collections.abc import Callable, Sequence
from types import MappingProxyType
from typing import TypeVar

from cnibench.backends.base import (
    DEFAULT_PORTS,
    Backend,
    Capability,
    Cluster,
    Endpoint,
    NodeRole,
    PolicyChoices,
    WorkloadKind,
    WorkloadSpec,
)
from cnibench.errors import CnibenchError, ConfigError, ToolError
from cnibench.policy import PolicyEngine, PolicyPeer, PolicySpec, PortRange, RulesSee
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
from cnibench.scenarios.effect import effect_evidence, keep_effect, take_effect, time_change
from cnibench.scenarios.options import DEFAULT_OPTIONS, DEFAULT_POLICY_ENGINES, ScenarioOptions
from cnibench.scenarios.profiles import Profile
from cnibench.tools import ab, iperf3
from cnibench.tools.effect_probe import Effect
from cnibench.waiting import poll_until

__all__ = ["EVERY_CHOICE", "MAX_CLIENT_PODS", "PolicyScenario", "ProbeResult", "probe_matrix"]

EVERY_CHOICE = PolicyChoices(engines=tuple(PolicyEngine), rules_see=tuple(RulesSee))
"""What a policy condition may choose before the scenario is planned for a backend
(:meth:`PolicyScenario.on_backend`): every engine and every :class:`RulesSee`, as the lab
offers them."""
MAX_CLIENT_PODS = 4
"""Client pods per condition; ``clients`` connections are spread over them."""
HTTP_PORT = DEFAULT_PORTS[WorkloadKind.HTTP_ECHO]
IPERF3_BASE_PORT = DEFAULT_PORTS[WorkloadKind.IPERF3_SERVER]
PLACEMENTS = ("same-node", "cross-node")
PROBE_TIMEOUT = 1.0
"""Seconds a probe waits for a TCP handshake before calling the destination blocked."""
_PROBE_SCRIPT = r"""
for target in "$@"; do
    err=$(timeout "$PROBE_TIMEOUT" bash -c 'exec 3<>"/dev/tcp/${1%:*}/${1##*:}"' _ "$target" 2>&1)
    rc=$?
    if [ "$rc" -eq 0 ]; then echo "$target open"
    elif [ "$rc" -eq 124 ]; then echo "$target timeout"
    else case "$err" in
        *"onnection refused"*) echo "$target refused" ;;
        *) echo "$target error" ;;
    esac
    fi
done
"""
"""TCP connect to each ``host:port`` argument with bash's ``/dev/tcp`` under ``timeout``, one
``host:port outcome`` line each. Only bash and coreutils: present in a lab namespace (the host's)
and in cnibench's tools image, where there is no Python."""

_ENFORCEMENT = "enforcement"
"""Key under which the set-up keeps the policy's time to effect
(:func:`~cnibench.scenarios.effect.keep_effect`; its evidence is named ``enforcement_*``)."""
_REMOVAL = "removal"
"""Key under which the set-up keeps the time until the removed policy stopped blocking."""
ENFORCEMENT_MARGIN = 10.0
"""Seconds the effect probe goes on after the cluster's policy settle time before it gives up
on the policy coming into force (the verification then says whether it did)."""

_CHOSEN = ("rules_see", "engine")
"""Parameters a condition has only where the backend lets it choose them."""

_T = TypeVar("_T")


class ProbeResult:
    """One cell of the probe matrix: ``source -> destination``, expected and observed."""

    __slots__ = ("destination", "expected_open", "observed", "source")

    def __init__(self, source: str, destination: str, expected_open: bool, observed: str) -> None:
        self.source = source
        self.destination = destination
        self.expected_open = expected_open
        self.observed = observed

    @property
    def ok(self) -> bool:
        """Open when it should be; timed out or refused when it should be blocked."""
        is_open = self.observed == "open"
        return is_open if self.expected_open else self.observed in ("timeout", "refused")

    def __str__(self) -> str:
        want = "allow" if self.expected_open else "deny"
        mark = "ok" if self.ok else "WRONG"
        return f"{self.source}->{self.destination}={self.observed}/{want}/{mark}"


def _parallel(tasks: Sequence[Callable[[], _T]]) -> list[_T]:
    """Run ``tasks`` in threads (they mostly wait on child processes); re-raise the first error."""
    results: list[_T | None] = [None] * len(tasks)
    errors: list[BaseException] = []

    def run(i: int) -> None:
        try:
            results[i] = tasks[i]()
        except BaseException as exc:  # re-raised below in the caller's thread
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(i,), daemon=True) for i in range(len(tasks))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if errors:
        raise errors[0]
    return [r for r in results if r is not None]


def probe_matrix(
    probes: Sequence[tuple[Endpoint, Sequence[tuple[str, str, int, bool]]]],
    *,
    timeout: float = PROBE_TIMEOUT,
) -> list[ProbeResult]:
    """TCP-connect from each source pod to its destinations, all sources in parallel.

    Parameters
    ----------
    probes:
        Per source pod: ``(destination name, ip, port, expected open)`` tuples.
    timeout:
        Seconds per connection attempt.

    Raises
    ------
    cnibench.errors.ToolError
        When a probe process fails or prints no result.
    """

    def one(source: Endpoint, targets: Sequence[tuple[str, str, int, bool]]) -> list[ProbeResult]:
        script = f"PROBE_TIMEOUT={timeout:g}\n{_PROBE_SCRIPT}"
        argv = ["bash", "-c", script, "probe"]
        argv += [f"{ip}:{port}" for _, ip, port, _ in targets]
        result = source.run(argv, timeout=timeout * len(targets) + 15)
        seen = dict(line.split(" ", 1) for line in result.stdout.splitlines() if " " in line)
        missing = [f"{ip}:{port}" for _, ip, port, _ in targets if f"{ip}:{port}" not in seen]
        if missing:
            raise ToolError(
                f"probe from {source.name} printed no result for {', '.join(missing)}:"
                f" {result.stderr.strip()[:200]}",
                tool="probe",
                output=result.stdout + result.stderr,
            )
        return [
            ProbeResult(source.name, f"{name}:{port}", expected, str(seen[f"{ip}:{port}"]))
            for name, ip, port, expected in targets
        ]

    tasks = [functools.partial(one, source, targets) for source, targets in probes]
    return [cell for cells in _parallel(tasks) for cell in cells]


class PolicyScenario(Scenario):
    """Policy off/on x placement x rules x clients, x engine and rules_see where the backend
    offers them (see module docstring).

    Parameters
    ----------
    options:
        ``rules``, ``clients`` and ``engines`` (``None``: :data:`DEFAULT_POLICY_ENGINES` where
        the backend offers engines).
    rules_see:
        Which packets the rules see, one condition each; ``None``: only new connections, where
        the backend lets a condition choose.
    choices:
        What the backend lets a condition choose; :meth:`on_backend` sets it from the
        backend (default :data:`EVERY_CHOICE`).

    Raises
    ------
    cnibench.errors.ConfigError
        Engines or ``rules_see`` asked for that ``choices`` does not offer (one line).
    """

    name = "policy"
    # New connections first: through conntrack, the rules mostly cost new connections.
    primary_metrics = (
        "new_connections_per_second",
        "throughput",
        "latency_mean",
        "connection_success_rate",
        "cpu",
        "ram",
    )
    dependent_metrics = MappingProxyType({"latency_mean": "new_connections_per_second"})
    """ab's mean time per request is its concurrency over its rate (concurrency x wall time /
    requests), so at a given number of clients the latency is the connection rate's
    reciprocal times the clients: one measurement, stated once, as the rate."""
    contrasts = (
        # The cost of the rules in front of the matching one (per engine where there is one):
        # N rules vs 0.
        Contrast(
            "rules",
            treatment={"policy": "on", "rules": OTHER_THAN_CONTROL},
            control={"policy": "on", "rules": 0},
        ),
        # The cost of enforcing a policy at all: on with 0 extra rules vs off (which has no
        # engine and no rules_see).
        Contrast(
            "enforcement",
            treatment={"policy": "on", "rules": 0},
            control={"policy": "off"},
            varies=("engine", "rules_see"),
        ),
    )

    def __init__(
        self,
        options: ScenarioOptions | None = None,
        *,
        rules_see: Sequence[RulesSee] | None = None,
        choices: PolicyChoices = EVERY_CHOICE,
    ) -> None:
        self.options = options or DEFAULT_OPTIONS
        self._rules_see_asked = None if rules_see is None else tuple(RulesSee(r) for r in rules_see)
        self.choices = choices
        self.engines: tuple[PolicyEngine | None, ...] = _chosen(
            self.options.engines, DEFAULT_POLICY_ENGINES, choices.engines, what="--engine"
        )
        """The engines of the ``on`` conditions; ``(None,)``: the CNI's own, named by none."""
        self.rules_see: tuple[RulesSee | None, ...] = _chosen(
            self._rules_see_asked, (RulesSee.NEW_CONNECTIONS,), choices.rules_see, what="rules_see"
        )
        """Which packets the rules see, per ``on`` condition; ``(None,)``: the CNI decides."""

    def on_backend(self, backend: Backend) -> PolicyScenario:
        """This scenario with the engines and ``rules_see`` ``backend`` offers
        (:attr:`~cnibench.backends.base.Backend.policy_choices`): where it offers none, the
        ``on`` conditions name none (``on-cross-node-r0-c1``).

        Raises
        ------
        cnibench.errors.ConfigError
            ``--engine`` given for a backend that offers no engine (its CNIs enforce with their
            own datapath, so every engine would measure the same thing), or an engine it lacks.
        """
        try:
            return PolicyScenario(
                self.options, rules_see=self._rules_see_asked, choices=backend.policy_choices
            )
        except ConfigError as exc:
            raise ConfigError(f"{exc} (backend {backend.name})") from None

    def conditions(self) -> list[Condition]:
        """``off-<placement>-c<clients>`` and
        ``on-<placement>-<engine>-r<rules>-c<clients>-<rules_see>``, without ``<engine>`` and
        ``<rules_see>`` (and those parameters) where the backend offers no such choice."""
        out: list[Condition] = []
        for placement in PLACEMENTS:
            for clients in self.options.clients:
                out.append(
                    Condition(
                        self.name,
                        f"off-{placement}-c{clients}",
                        {"policy": "off", "placement": placement, "clients": clients},
                    )
                )
            for engine, rules, clients, see in itertools.product(
                self.engines, self.options.rules, self.options.clients, self.rules_see
            ):
                parameters: dict[str, ParamValue] = {"policy": "on", "placement": placement}
                parts = ["on", placement]
                if engine is not None:
                    parameters["engine"] = engine.value
                    parts.append(engine.value)
                parameters |= {"rules": rules, "clients": clients}
                parts += [f"r{rules}", f"c{clients}"]
                if see is not None:
                    parameters["rules_see"] = see.value
                    parts.append(see.value)
                out.append(Condition(self.name, "-".join(parts), parameters))
        return out

    def required_capabilities(self, condition: Condition) -> frozenset[Capability]:
        """Network policy when the policy is on."""
        if condition.parameters["policy"] == "on":
            return frozenset({Capability.NETWORK_POLICY})
        return frozenset()

    def policy_rules(self, condition: Condition) -> int:
        """The non-matching rules plus the matching one, when the policy is on."""
        if condition.parameters["policy"] != "on":
            return 0
        return int(condition.parameters["rules"]) + 1

    def prepare(self, cluster: Cluster, condition: Condition, profile: Profile) -> Prepared:
        """Server pod (HTTP echo + one iperf3 server per client pod), client pods, a pod the
        policy does not name, and the policy when on."""
        clients = int(condition.parameters["clients"])
        pods = min(clients, MAX_CLIENT_PODS)
        role = (
            NodeRole.SERVER
            if condition.parameters["placement"] == "same-node"
            else (NodeRole.CLIENT)
        )
        workloads = (
            WorkloadSpec(WorkloadKind.HTTP_ECHO, HTTP_PORT),
            *(WorkloadSpec(WorkloadKind.IPERF3_SERVER, IPERF3_BASE_PORT + i) for i in range(pods)),
        )
        prepared = Prepared()
        try:
            prepared.endpoints["server"] = cluster.place(
                "pol-srv", role=NodeRole.SERVER, workloads=workloads
            )
            for i in range(pods):
                prepared.endpoints[f"client{i}"] = cluster.place(f"pol-cli{i}", role=role)
            prepared.endpoints["denied"] = cluster.place("pol-deny", role=role)
            if condition.parameters["policy"] == "on":
                server: Endpoint = prepared.endpoints["server"]
                spec = PolicySpec(
                    target=PolicyPeer("pol-srv", server.ip),
                    allowed=tuple(
                        PolicyPeer(f"pol-cli{i}", prepared.endpoints[f"client{i}"].ip)
                        for i in range(pods)
                    ),
                    ports=(
                        PortRange.single(HTTP_PORT),
                        PortRange(IPERF3_BASE_PORT, IPERF3_BASE_PORT + pods - 1),
                    ),
                    extra_rules=int(condition.parameters["rules"]),
                    # Where the condition names none, the CNI decides (the spec's default is
                    # not used by a backend that offers no choice).
                    rules_see=RulesSee(
                        str(condition.parameters.get("rules_see", RulesSee.NEW_CONNECTIONS))
                    ),
                )
                engine = condition.parameters.get("engine")

                def apply() -> None:
                    cluster.apply_policy(
                        spec, engine=None if engine is None else PolicyEngine(str(engine))
                    )
                    prepared.expected["policy"] = "on"

                def remove() -> None:
                    cluster.remove_policy()
                    prepared.expected["policy"] = "off"

                # The pod outside the policy probes the server from before the policy is
                # applied until it is blocked: the CNI's enforcement, to the probe's 10 ms.
                within = cluster.policy_settle_seconds + ENFORCEMENT_MARGIN
                denied = prepared.endpoints["denied"]
                timed = time_change(
                    denied, server.ip, HTTP_PORT, effect=Effect.blocking(), change=apply,
                    within=within,
                )  # fmt: skip
                keep_effect(prepared, _ENFORCEMENT, timed)
                # And back: from the delete call until the server answers that pod again;
                # then the policy goes on again for the runs (the verification proves it).
                removed = time_change(
                    denied, server.ip, HTTP_PORT, effect=Effect.answering(server.name),
                    change=remove, within=within,
                )  # fmt: skip
                keep_effect(prepared, _REMOVAL, removed)
                apply()
        except BaseException:
            self.cleanup(cluster, prepared)
            raise
        return prepared

    def verify(self, cluster: Cluster, prepared: Prepared, condition: Condition) -> Verification:
        """Probe matrix: every client pod reaches HTTP and its iperf3 port; the pod outside the
        policy is blocked (timeout or refusal) when the policy is on, and open when off. A
        wrong matrix is probed again for up to the cluster's
        :attr:`~cnibench.backends.base.Policies.policy_settle_seconds`."""
        server: Endpoint = prepared.endpoints["server"]
        on = condition.parameters["policy"] == "on"
        probes: list[tuple[Endpoint, list[tuple[str, str, int, bool]]]] = []
        for i, client in enumerate(_clients(prepared)):
            probes.append(
                (
                    client,
                    [
                        (server.name, server.ip, HTTP_PORT, True),
                        (server.name, server.ip, IPERF3_BASE_PORT + i, True),
                    ],
                )
            )
        probes.append((prepared.endpoints["denied"], [(server.name, server.ip, HTTP_PORT, not on)]))
        # A Kubernetes CNI programs a policy after the API server stored it; where the load is
        # synchronous (the lab's nftables) the settle time is 0 and the first matrix is the answer.
        cells, attempts = poll_until(
            lambda: probe_matrix(probes),
            lambda cells: all(cell.ok for cell in cells),
            seconds=cluster.policy_settle_seconds,
        )
        wrong = [str(cell) for cell in cells if not cell.ok]
        matrix = ";".join(str(cell) for cell in cells)
        evidence: dict[str, ParamValue] = {
            "probe_matrix": matrix,
            "probes": len(cells),
            "probes_ok": sum(cell.ok for cell in cells),
            "attempts": attempts,
            # Only what the condition chose: without a policy, or on a CNI that enforces with
            # its own datapath, there is no engine to name.
            **{
                key: str(condition.parameters[key])
                for key in _CHOSEN
                if key in condition.parameters
            },
        }
        # How the set-up timed the enforcement: the value, the probe's spacing, the leaks.
        evidence.update(effect_evidence(prepared, _ENFORCEMENT))
        evidence.update(effect_evidence(prepared, _REMOVAL))
        if wrong:
            return Verification(False, f"{condition.id}: probe matrix wrong: {wrong}", evidence)
        return Verification(
            True, f"{condition.id}: {len(cells)} probes as expected ({matrix})", evidence
        )

    def measure(
        self,
        cluster: Cluster,
        prepared: Prepared,
        condition: Condition,
        profile: Profile,
        repetition: int,
    ) -> RunOutput:
        """Aggregate iperf3 throughput, then ab without keep-alive, from every client pod."""
        server: Endpoint = prepared.endpoints["server"]
        clients = _clients(prepared)
        total = int(condition.parameters["clients"])
        shares = _spread(total, len(clients))
        seconds = profile.duration

        def throughput(i: int) -> iperf3.Iperf3Result:
            argv = iperf3.iperf3_client_argv(
                server.ip, port=IPERF3_BASE_PORT + i, duration=seconds, parallel=shares[i]
            )
            result = clients[i].run(argv, timeout=seconds + 30)
            return iperf3.parse_iperf3(result.stdout, stderr=result.stderr)

        def connections(i: int) -> ab.AbResult:
            argv = ab.ab_argv(
                f"http://{server.ip}:{HTTP_PORT}/",
                concurrency=shares[i],
                timelimit=math.ceil(seconds),
                timeout=5,
            )
            result = clients[i].run(argv, timeout=seconds + 40)
            return ab.parse_ab(result.stdout, stderr=result.stderr)

        streams = _parallel([functools.partial(throughput, i) for i in range(len(clients))])
        runs = _parallel([functools.partial(connections, i) for i in range(len(clients))])
        complete = sum(r.complete_requests for r in runs)
        failed = sum(r.failed_requests for r in runs)
        if complete == 0:
            raise CnibenchError(f"{condition.id}: ab completed no request")
        weighted_latency = sum(r.time_per_request_ms * r.complete_requests for r in runs)
        measurements = [
            Measurement("throughput", sum(s.received_bits_per_second for s in streams), "bits/s"),
            Measurement(
                "new_connections_per_second", sum(r.requests_per_second for r in runs), "1/s"
            ),
            Measurement("latency_mean", weighted_latency / complete, "ms"),
            Measurement("latency_p99", max(r.percentiles_ms.get(99, math.nan) for r in runs), "ms"),
            Measurement("connection_success_rate", (complete - failed) / complete, "ratio"),
            Measurement("failed_connections", float(failed), "count"),
        ]
        # Once per set-up, whichever repetition comes first after it (every round of an
        # interleaved session applies the policy again, and each round's CNI is timed).
        timed, probe_log = take_effect(prepared, _ENFORCEMENT, "policy_enforcement_time")
        measurements += timed
        timed, removal_log = take_effect(prepared, _REMOVAL, "policy_removal_time")
        measurements += timed
        probe_log = {**probe_log, **removal_log}
        retransmits = [s.retransmits for s in streams if s.retransmits is not None]
        if retransmits:
            measurements.append(Measurement("retransmits", float(sum(retransmits)), "count"))
        rate = _retransmit_rate(streams)
        if rate is not None:
            measurements.append(Measurement("retransmit_rate", rate, "ratio"))
        raw = {
            **probe_log,
            "summary.json": json.dumps(
                {
                    "client_pods": len(clients),
                    "connections_per_pod": shares,
                    **{
                        key: condition.parameters[key]
                        for key in _CHOSEN
                        if key in condition.parameters
                    },
                }
            ),
        }
        return RunOutput(measurements, raw)

    def cleanup(self, cluster: Cluster, prepared: Prepared) -> None:
        """Remove the policy (if on) and every pod."""
        if prepared.expected.get("policy") == "on":
            cluster.remove_policy()
        super().cleanup(cluster, prepared)


_Choice = TypeVar("_Choice", PolicyEngine, RulesSee)


def _chosen(
    asked: tuple[_Choice, ...] | None,
    default: tuple[_Choice, ...],
    offered: tuple[_Choice, ...],
    *,
    what: str,
) -> tuple[_Choice | None, ...]:
    """The values of one policy parameter the conditions take: ``asked`` (``None``: the
    ``default`` ones offered), or ``(None,)`` when nothing is ``offered`` (the CNI decides and
    no condition names it).

    Raises
    ------
    cnibench.errors.ConfigError
        ``asked`` names a value not offered, or anything at all where nothing is.
    """
    if not offered:
        if asked is not None:
            raise ConfigError(
                f"{what} {','.join(a.value for a in asked)}: each CNI here enforces a policy"
                " with its own datapath whatever is named, so every choice would measure the"
                f" same thing; leave {what} out"
            )
        return (None,)
    if asked is None:
        return tuple(d for d in default if d in offered) or offered[:1]
    missing = [a.value for a in asked if a not in offered]
    if missing:
        raise ConfigError(
            f"{what} {','.join(missing)}: this backend offers {', '.join(o.value for o in offered)}"
        )
    return asked


def _retransmit_rate(streams: Sequence[iperf3.Iperf3Result]) -> float | None:
    """Retransmitted over sent segments of all client pods together (a ratio); ``None`` when
    no pod sent TCP segments."""
    sent = [(s.retransmits, s.segments_sent) for s in streams]
    tcp = [(r, n) for r, n in sent if r is not None and n]
    if not tcp:
        return None
    return sum(r for r, _ in tcp) / sum(n for _, n in tcp)


def _clients(prepared: Prepared) -> list[Endpoint]:
    return [
        prepared.endpoints[key]
        for key in sorted(prepared.endpoints, key=lambda k: (len(k), k))
        if key.startswith("client")
    ]


def _spread(total: int, parts: int) -> list[int]:
    """``total`` connections over ``parts`` pods, as evenly as possible (each at least 1)."""
    base, extra = divmod(total, parts)
    return [base + (1 if i < extra else 0) for i in range(parts)]
