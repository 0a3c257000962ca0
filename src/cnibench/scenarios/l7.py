"""L7 policy: HTTP rate and latency with and without a method/path filter in the path.

Seed 003 measured ab at concurrency 100 for 20 s against a server protected by an HTTP-aware
policy. Here the policy allows one method on one path; verification proves that an allowed
request gets 200 and a different method or path is refused: 403 from a proxy, or no HTTP answer
when the CNI resets the connection (with the policy off, all get 200).
"""

from __future__ import annotations

import math
from types import MappingProxyType

from cnibench.backends.base import (
    DEFAULT_PORTS,
    Capability,
    Cluster,
    Endpoint,
    NodeRole,
    WorkloadKind,
    WorkloadSpec,
)
from cnibench.records import Measurement
from cnibench.scenarios.base import Condition, Contrast, Prepared, RunOutput, Scenario, Verification
from cnibench.scenarios.options import DEFAULT_OPTIONS, ScenarioOptions
from cnibench.scenarios.profiles import Profile
from cnibench.tools import ab

__all__ = ["ALLOWED_METHOD", "ALLOWED_PATH", "REFUSED_STATUSES", "L7Scenario", "refused"]

ALLOWED_METHOD = "GET"
ALLOWED_PATH = "/api/allowed"
HTTP_PORT = DEFAULT_PORTS[WorkloadKind.HTTP_ECHO]
CONCURRENCY = 100
"""ab concurrency (seed 003)."""


class L7Scenario(Scenario):
    """ab -c 100 from a client pod to a server pod, L7 policy off or on, cross node."""

    name = "l7"
    primary_metrics = ("requests_per_second", "latency_mean", "cpu", "ram")
    dependent_metrics = MappingProxyType({"latency_mean": "requests_per_second"})
    """ab's mean time per request is its concurrency (100) over its rate: stated once, as
    the rate."""
    contrasts = (Contrast("policy", treatment={"policy": "on"}, control={"policy": "off"}),)

    def __init__(self, options: ScenarioOptions | None = None) -> None:
        self.options = options or DEFAULT_OPTIONS

    def conditions(self) -> list[Condition]:
        """``policy-off`` and ``policy-on``."""
        return [
            Condition(
                self.name,
                f"policy-{state}",
                {"policy": state, "method": ALLOWED_METHOD, "path": ALLOWED_PATH},
            )
            for state in ("off", "on")
        ]

    def required_capabilities(self, condition: Condition) -> frozenset[Capability]:
        """The L7 policy capability when on."""
        if condition.parameters["policy"] == "on":
            return frozenset({Capability.L7_POLICY})
        return frozenset()

    def prepare(self, cluster: Cluster, condition: Condition, profile: Profile) -> Prepared:
        """Server (HTTP echo) on the server node, client on the client node, policy if on."""
        prepared = Prepared()
        try:
            prepared.endpoints["server"] = cluster.place(
                "l7-srv",
                role=NodeRole.SERVER,
                workloads=(WorkloadSpec(WorkloadKind.HTTP_ECHO, HTTP_PORT),),
            )
            prepared.endpoints["client"] = cluster.place("l7-cli", role=NodeRole.CLIENT)
            if condition.parameters["policy"] == "on":
                cluster.apply_l7_policy(
                    prepared.endpoints["server"],
                    port=HTTP_PORT,
                    method=ALLOWED_METHOD,
                    path=ALLOWED_PATH,
                )
                prepared.expected["policy"] = "on"
        except BaseException:
            self.cleanup(cluster, prepared)
            raise
        return prepared

    def verify(self, cluster: Cluster, prepared: Prepared, condition: Condition) -> Verification:
        """Allowed request -> 200; other method and other path refused (200 when off).

        Refused means a 403 from the enforcing proxy (the lab's, Cilium's Envoy) or a request
        that got no HTTP answer at all (Antrea's L7 engine rejects it by resetting the
        connection): :func:`refused`. The allowed request must still get 200, so a policy that
        blocks everything does not pass.
        """
        on = condition.parameters["policy"] == "on"
        denied = "refused" if on else "200"
        cases = [
            (ALLOWED_METHOD, ALLOWED_PATH, "200"),
            ("POST", ALLOWED_PATH, denied),
            (ALLOWED_METHOD, "/api/other", denied),
        ]
        seen = {
            f"{method} {path}": _status(prepared.endpoints["client"], prepared, method, path)
            for method, path, _ in cases
        }
        matrix = ";".join(
            f"{method} {path}={seen[f'{method} {path}']}/{want}" for method, path, want in cases
        )
        ok = all(
            refused(seen[f"{method} {path}"])
            if want == "refused"
            else seen[f"{method} {path}"] == want
            for method, path, want in cases
        )
        detail = f"{condition.id}: {'as expected' if ok else 'WRONG'}: {matrix}"
        return Verification(ok, detail, {"http_matrix": matrix})

    def measure(
        self,
        cluster: Cluster,
        prepared: Prepared,
        condition: Condition,
        profile: Profile,
        repetition: int,
    ) -> RunOutput:
        """ab -c 100 on the allowed method/path for ``2 x profile.duration`` seconds (20 s on
        the standard profile)."""
        server: Endpoint = prepared.endpoints["server"]
        client: Endpoint = prepared.endpoints["client"]
        seconds = math.ceil(profile.duration * 2)
        argv = ab.ab_argv(
            f"http://{server.ip}:{HTTP_PORT}{ALLOWED_PATH}",
            concurrency=CONCURRENCY,
            timelimit=seconds,
            timeout=5,
        )
        result = client.run(argv, timeout=seconds + 60)
        parsed = ab.parse_ab(result.stdout, stderr=result.stderr)
        measurements = [
            Measurement("requests_per_second", parsed.requests_per_second, "requests/s"),
            Measurement("latency_mean", parsed.time_per_request_ms, "ms"),
            Measurement("latency_p50", parsed.percentiles_ms.get(50, math.nan), "ms"),
            Measurement("latency_p99", parsed.percentiles_ms.get(99, math.nan), "ms"),
            Measurement("failed_requests", float(parsed.failed_requests), "count"),
            Measurement("non_2xx", float(parsed.non_2xx), "count"),
        ]
        return RunOutput(measurements, {"ab.txt": result.stdout})

    def cleanup(self, cluster: Cluster, prepared: Prepared) -> None:
        """Remove the L7 policy (if on) and the pods."""
        if prepared.expected.get("policy") == "on":
            cluster.remove_l7_policy()
        super().cleanup(cluster, prepared)


REFUSED_STATUSES = frozenset({"403", "000"})
"""What a refused request looks like to curl's ``%{http_code}``: a proxy's 403, or ``000`` when
the connection was reset or closed before any HTTP response."""


def refused(status: str) -> bool:
    """Whether an HTTP status seen by curl means the policy refused the request."""
    return status in REFUSED_STATUSES


def _status(client: Endpoint, prepared: Prepared, method: str, path: str) -> str:
    server: Endpoint = prepared.endpoints["server"]
    result = client.run(
        [
            "curl",
            "-sS",
            "-o",
            "/dev/null",
            "-w",
            "%{http_code}",
            "-X",
            method,
            "--max-time",
            "5",
            f"http://{server.ip}:{HTTP_PORT}{path}",
        ],
        timeout=15,
    )
    return result.stdout.strip() or "none"
