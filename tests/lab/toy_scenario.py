"""A toy scenario, written as a user would write their own: one module with a
:class:`~cnibench.scenarios.base.Scenario` subclass. It places an HTTP server and a client on
two nodes, proves the client reaches it, and times curl's TCP connect. Nothing in cnibench
names it: one :func:`cnibench.scenarios.register_scenario` line makes it a scenario."""

from __future__ import annotations

from cnibench.backends.base import (
    DEFAULT_PORTS,
    Cluster,
    Endpoint,
    NodeRole,
    WorkloadKind,
    WorkloadSpec,
)
from cnibench.errors import ToolError
from cnibench.records import Measurement
from cnibench.scenarios.base import Condition, Prepared, RunOutput, Scenario, Verification
from cnibench.scenarios.profiles import Profile

PORT = DEFAULT_PORTS[WorkloadKind.HTTP_ECHO]
MARKER = "a toy: curl's TCP connect time across nodes"


class ToyScenario(Scenario):
    name = "toy"
    primary_metrics = ("connect_time",)

    def conditions(self) -> list[Condition]:
        return [Condition("toy", "cross-node-connect", {"placement": "cross-node"})]

    def prepare(self, cluster: Cluster, condition: Condition, profile: Profile) -> Prepared:
        prepared = Prepared()
        try:
            prepared.endpoints["server"] = cluster.place(
                "toy-srv",
                role=NodeRole.SERVER,
                workloads=(WorkloadSpec(WorkloadKind.HTTP_ECHO, PORT),),
            )
            prepared.endpoints["client"] = cluster.place("toy-cli", role=NodeRole.CLIENT)
        except BaseException:
            self.cleanup(cluster, prepared)
            raise
        return prepared

    def _curl(self, prepared: Prepared, write_out: str) -> str:
        server: Endpoint = prepared.endpoints["server"]
        client: Endpoint = prepared.endpoints["client"]
        url = f"http://{server.ip}:{PORT}/"
        done = client.run(["curl", "-sS", "-o", "/dev/null", "-w", write_out, url], timeout=10)
        if done.returncode != 0:
            raise ToolError(f"toy: curl {url} exited {done.returncode}: {done.stderr.strip()}")
        return done.stdout.strip()

    def verify(self, cluster: Cluster, prepared: Prepared, condition: Condition) -> Verification:
        status = self._curl(prepared, "%{http_code}")
        return Verification(status == "200", f"the client got HTTP {status}", {"status": status})

    def measure(
        self, cluster: Cluster, prepared: Prepared, condition: Condition, profile: Profile,
        repetition: int,
    ) -> RunOutput:  # fmt: skip
        seconds = float(self._curl(prepared, "%{time_connect}"))
        return RunOutput((Measurement("connect_time", 1000.0 * seconds, "ms"),))
