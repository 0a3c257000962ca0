"""Policy precedence: which of several policies on the same traffic wins (seed 003).

Seed 003 applied a Kubernetes default-deny together with a CNI allow, and Antrea policies in
different tiers at different priorities, then checked whether an HTTP GET got through. Here each
condition is one :class:`~cnibench.policy.PriorityCase`; the outcome itself is the result.

Procedure per repetition: the allowed client must reach the server *before* the case is applied
(else a broken set-up would read as "blocked"); the case is applied; the allowed client and a
second client that no CNI layer names each try one bounded HTTP GET; the case is removed and
the allowed client must reach the server again. Measurements: ``reachable`` (1 or 0) of the
allowed client, ``reference`` (what the documented reference order decides,
:func:`cnibench.policy.reference_outcome`), ``matches_reference`` and ``other_reachable``. A CNI
that differs from the reference is a finding, recorded as such, not a failed run.
"""

from __future__ import annotations

import json

from cnibench.backends.base import (
    DEFAULT_PORTS,
    Capability,
    Cluster,
    Endpoint,
    NodeRole,
    WorkloadKind,
    WorkloadSpec,
)
from cnibench.errors import ToolError
from cnibench.policy import (
    PRIORITY_CASES,
    PolicyPeer,
    PolicySpec,
    PortRange,
    PriorityCase,
    priority_case_named,
    reference_decision,
)
from cnibench.records import Measurement, ParamValue
from cnibench.scenarios.base import Condition, Prepared, RunOutput, Scenario, Verification
from cnibench.scenarios.profiles import Profile
from cnibench.waiting import settle

__all__ = ["PROBE_TIMEOUT", "PriorityScenario", "http_probe"]

HTTP_PORT = DEFAULT_PORTS[WorkloadKind.HTTP_ECHO]
PROBE_TIMEOUT = 2.0
"""Seconds a probe waits for the TCP handshake before calling the server blocked."""
_CURL_OUTCOMES = {7: "refused", 28: "timeout"}
"""curl exit codes that are answers about the network (7: connect failed, 28: timed out);
any other failure means the probe itself did not run."""
SERVER, CLIENT, OTHER = "prio-srv", "prio-cli", "prio-other"


def http_probe(source: Endpoint, server: Endpoint, *, port: int = HTTP_PORT) -> str:
    """One HTTP GET from ``source`` to ``server:port`` with a :data:`PROBE_TIMEOUT` connect
    timeout.

    Returns
    -------
    str
        ``"http-<status>"`` when the server answered, ``"timeout"`` or ``"refused"`` when the
        connection did not get through.

    Raises
    ------
    cnibench.errors.ToolError
        When curl failed for any other reason (the probe did not run).
    """
    argv = [
        "curl",
        "-sS",
        "-o",
        "/dev/null",
        "-w",
        "%{http_code}",
        "--connect-timeout",
        f"{PROBE_TIMEOUT:g}",
        "--max-time",
        f"{PROBE_TIMEOUT + 2:g}",
        f"http://{server.ip}:{port}/",
    ]
    result = source.run(argv, timeout=PROBE_TIMEOUT + 15)
    if result.returncode == 0:
        return f"http-{result.stdout.strip()}"
    outcome = _CURL_OUTCOMES.get(result.returncode)
    if outcome is None:
        raise ToolError(
            f"probe {source.name}->{server.name} did not run (curl exit {result.returncode}):"
            f" {result.stderr.strip()[:200]}",
            tool="curl",
            output=result.stdout + result.stderr,
        )
    return outcome


def _reached(outcome: str) -> bool:
    return outcome == "http-200"


class PriorityScenario(Scenario):
    """One condition per priority case; the reachability matrix is the result."""

    name = "priority"
    resource_metrics = False  # a probe's CPU and memory say nothing about the CNI
    # The reachability matrix is the verdict (which policy won), not a ratio.
    primary_metrics = ()
    compares_cnis = False

    def __init__(self, cases: tuple[PriorityCase, ...] = PRIORITY_CASES) -> None:
        self.cases = {case.name: case for case in cases}

    def headline_metrics(self, condition: Condition) -> tuple[str, ...]:
        """Whether the target was reached, and whether that matches the reference order."""
        return ("reachable", "matches_reference")

    def _case(self, condition: Condition) -> PriorityCase:
        name = str(condition.parameters["case"])
        return self.cases.get(name) or priority_case_named(name)

    def conditions(self) -> list[Condition]:
        """One condition per case, id = case name; parameters hold the case and the
        reference outcome."""
        out = []
        for case in self.cases.values():
            decision = reference_decision(case)
            out.append(
                Condition(
                    self.name,
                    case.name,
                    {
                        "case": case.name,
                        "kubernetes_deny": case.kubernetes_deny,
                        "layers": ",".join(str(layer) for layer in case.ordered_layers) or "none",
                        "reference": "allow" if decision.reachable else "deny",
                        "reference_winner": decision.winner,
                    },
                )
            )
        return out

    def required_capabilities(self, condition: Condition) -> frozenset[Capability]:
        """Network policy, plus policy tiers for cases using tiers or ``pass``."""
        if self._case(condition).needs_tiers:
            return frozenset({Capability.NETWORK_POLICY, Capability.POLICY_TIERS})
        return frozenset({Capability.NETWORK_POLICY})

    def prepare(self, cluster: Cluster, condition: Condition, profile: Profile) -> Prepared:
        """HTTP echo server on the server node, the allowed client and a second client on the
        client node; the case itself is applied per run."""
        prepared = Prepared()
        try:
            prepared.endpoints["server"] = cluster.place(
                SERVER,
                role=NodeRole.SERVER,
                workloads=(WorkloadSpec(WorkloadKind.HTTP_ECHO, HTTP_PORT),),
            )
            prepared.endpoints["client"] = cluster.place(CLIENT, role=NodeRole.CLIENT)
            prepared.endpoints["other"] = cluster.place(OTHER, role=NodeRole.CLIENT)
        except BaseException:
            self.cleanup(cluster, prepared)
            raise
        return prepared

    def verify(self, cluster: Cluster, prepared: Prepared, condition: Condition) -> Verification:
        """Both clients reach the server with no policy applied, and the server and clients
        run on the nodes the case claims (server node vs client node)."""
        server: Endpoint = prepared.endpoints["server"]
        seen = {key: http_probe(prepared.endpoints[key], server) for key in ("client", "other")}
        placement = {
            key: prepared.endpoints[key].node.role.value for key in ("server", "client", "other")
        }
        matrix = ";".join(
            f"{prepared.endpoints[key].name}->{server.name}:{HTTP_PORT}={outcome}"
            for key, outcome in seen.items()
        )
        evidence: dict[str, ParamValue] = {
            "probe_matrix_before": matrix,
            "placement": json.dumps(placement, sort_keys=True),
        }
        wrong_nodes = placement != {"server": "server", "client": "client", "other": "client"}
        if wrong_nodes:
            return Verification(False, f"{condition.id}: pods on wrong nodes {placement}", evidence)
        if not all(_reached(outcome) for outcome in seen.values()):
            return Verification(
                False,
                f"{condition.id}: server unreachable before any policy is applied ({matrix})",
                evidence,
            )
        return Verification(True, f"{condition.id}: open before the case ({matrix})", evidence)

    def measure(
        self,
        cluster: Cluster,
        prepared: Prepared,
        condition: Condition,
        profile: Profile,
        repetition: int,
    ) -> RunOutput:
        """Probe before, apply the case, probe both clients, remove it, probe again."""
        case = self._case(condition)
        server: Endpoint = prepared.endpoints["server"]
        client: Endpoint = prepared.endpoints["client"]
        other: Endpoint = prepared.endpoints["other"]
        # A Kubernetes CNI programs (and unprograms) policies some time after the API server
        # stored them; the lab's nftables load is synchronous (0 s).
        settle_time = cluster.priority_settle_seconds
        spec = PolicySpec(
            # Kubernetes selects pods by their name label, the lab by address: give both.
            target=PolicyPeer(server.name, server.ip),
            allowed=(PolicyPeer(client.name, client.ip),),
            ports=(PortRange.single(HTTP_PORT),),
        )
        before = http_probe(client, server)
        cluster.apply_priority_case(case, spec)
        # A fixed pause, not a wait for the probe to change: "reachable" is the stale answer
        # and may also be the right one, so only the time can say the case is in force.
        try:
            settle(settle_time, why="the CNI to program the priority case")
            allowed_seen = http_probe(client, server)
            other_seen = http_probe(other, server)
        finally:
            cluster.remove_priority_case()
        # Nor a wait for `after` to answer: it probes one client, and the next run's probes
        # (both clients) must not meet this case half removed.
        settle(settle_time, why="the CNI to remove the priority case")
        after = http_probe(client, server)

        decision = reference_decision(case)
        other_reference = reference_decision(case, matched=False)
        reachable = _reached(allowed_seen)
        other_reachable = _reached(other_seen)
        matrix = (
            f"{client.name}->{server.name}:{HTTP_PORT}={allowed_seen}"
            f"/{'allow' if decision.reachable else 'deny'};"
            f"{other.name}->{server.name}:{HTTP_PORT}={other_seen}"
            f"/{'allow' if other_reference.reachable else 'deny'}"
        )
        evidence: dict[str, ParamValue] = {
            "before": before,
            "after": after,
            "probe_matrix": matrix,
            "reference_winner": decision.winner,
            "outcome": "allow" if reachable else "deny",
        }
        ok = _reached(before) and _reached(after)
        detail = (
            f"{condition.id}: {matrix}; before={before} after={after}"
            if ok
            else f"{condition.id}: server not reachable before ({before}) or after ({after})"
            " the case, so its outcome says nothing"
        )
        measurements = [
            Measurement("reachable", float(reachable), "bool"),
            Measurement("reference", float(decision.reachable), "bool"),
            Measurement("matches_reference", float(reachable == decision.reachable), "bool"),
            Measurement("other_reachable", float(other_reachable), "bool"),
            Measurement("other_reference", float(other_reference.reachable), "bool"),
        ]
        raw = {"probes.json": json.dumps({**evidence, "case": case.summary}, indent=2)}
        return RunOutput(measurements, raw, Verification(ok, detail, evidence))

    def cleanup(self, cluster: Cluster, prepared: Prepared) -> None:
        """Remove any case left applied, then the pods."""
        try:
            cluster.remove_priority_case()
        finally:
            super().cleanup(cluster, prepared)
