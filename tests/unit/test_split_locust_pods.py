"""The split scenario's run of locust's own distribution in pods: the master's CSVs become the
same measurements the host-side engine gives, and a run fewer workers made fails. The pods
are stand-ins answering exec with output shaped as locust 2.12's (no cluster can run here;
tests/kind/test_kind_kube_router.py runs the real thing)."""

from __future__ import annotations

from collections.abc import Sequence

import pytest
from test_locust_dist import HISTORY_HEADER, STATS_HEADER

from cnibench.backends.base import CommandResult, Node, NodeRole
from cnibench.errors import ToolError
from cnibench.scenarios import build_scenarios
from cnibench.scenarios.base import Prepared
from cnibench.scenarios.options import parse_scenario_options
from cnibench.scenarios.profiles import profile_named
from cnibench.scenarios.split import (
    LOAD_RECORDS_FILE,
    LOCUST_HISTORY_FILE,
    LOCUST_STATS_FILE,
    SplitScenario,
)
from cnibench.tools.locust_dist import WORKERS_MARKER

STATS = STATS_HEADER + (
    "\nGET,v1,6000,0,2,2.0,1,40,13,300.0,0.0,2,2,3,3,4,5,8,12,40,40,40"
    "\nGET,v2,4000,0,2,3.0,1,35,13,200.0,0.0,2,2,3,3,4,5,8,12,35,35,35"
    "\n,Aggregated,10000,0,2,2.4,1,40,13,500.0,0.0,2,2,3,3,4,5,8,12,40,40,40\n"
)
HISTORY = HISTORY_HEADER + "".join(
    f"\n{1700000000 + t},10,GET,{name},0,0,{',' * 11}{total},0,2,2.0,1,40,13"
    for t in range(0, 21, 3)
    for name, total in (("v1", 300 * t), ("v2", 200 * t))
)


class _Pod:
    def __init__(self, name: str, ip: str, workers: Sequence[str]) -> None:
        self.name = name
        self.ip = ip
        self.node = Node("client-node", NodeRole.CLIENT, "172.18.0.3")
        self.argvs: list[list[str]] = []
        self._workers = workers

    def run(self, argv: Sequence[str], *, timeout: float) -> CommandResult:
        self.argvs.append(list(argv))
        out = ""
        if argv[:2] == ["cat", "/tmp/cnibench-locust/run_stats.csv"]:
            out = STATS
        elif argv[:2] == ["cat", "/tmp/cnibench-locust/run_stats_history.csv"]:
            out = HISTORY
        elif "--master" in argv:
            out = WORKERS_MARKER + '["' + '", "'.join(self._workers) + '"]\n'
        return CommandResult(tuple(argv), 0, out, "", 0.1)


def _split() -> tuple[SplitScenario, object]:
    options = parse_scenario_options(
        load_engine="locust", users="100", weights=["v1=60,v2=40"], load_workers="2"
    )
    scenario = build_scenarios(options)["split"]
    assert isinstance(scenario, SplitScenario)

    class Kube:
        name = "kube"
        load_in_pods = True

    planned = scenario.on_backend(Kube())  # type: ignore[arg-type]
    return planned, planned.conditions()[0]


def _prepared(workers: Sequence[str]) -> Prepared:
    prepared = Prepared(expected={"url": "http://172.18.0.200/"})
    prepared.endpoints["load-master"] = _Pod("load-master", "10.244.1.5", workers)
    for i in range(2):
        prepared.endpoints[f"load-worker-{i}"] = _Pod(f"load-worker-{i}", f"10.244.1.{6 + i}", ())
    return prepared


def test_the_masters_statistics_become_the_host_side_measurements() -> None:
    scenario, condition = _split()
    prepared = _prepared(["load-worker-0_ab", "load-worker-1_cd"])
    output = scenario.measure(None, prepared, condition, profile_named("quick"), 0)  # type: ignore[arg-type]
    values = {m.metric: m.value for m in output.measurements}
    assert values["requests"] == 10000
    assert values["requests@v1"] == 6000
    assert values["share@v1"] == pytest.approx(0.6)
    assert values["requests_per_second"] == 500.0
    assert values["latency_mean"] == 2.4
    assert values["window_distance_max"] == pytest.approx(0.0)
    assert {"max_abs_error", "p_value", "share_low@v2", "window_distance_mean"} <= set(values)
    assert output.verification.ok
    assert LOCUST_STATS_FILE in output.raw
    assert LOCUST_HISTORY_FILE in output.raw
    assert LOAD_RECORDS_FILE not in output.raw  # the master keeps no per-request records
    worker = prepared.endpoints["load-worker-1"].argvs[0]
    assert worker[worker.index("--master-host") + 1] == "10.244.1.5"
    master = prepared.endpoints["load-master"].argvs[0]
    assert master[master.index("--expect-workers") + 1] == "2"


def test_a_run_fewer_workers_made_fails_in_one_line() -> None:
    scenario, condition = _split()
    prepared = _prepared(["load-worker-0_ab"])
    with pytest.raises(ToolError, match=r"^only 1 of 2 locust workers reported to the master"):
        scenario.measure(None, prepared, condition, profile_named("quick"), 0)  # type: ignore[arg-type]


class _SilentWorker(_Pod):
    """A worker that never reached its master: its exec runs into the timeout, and what it
    printed before is on the error (as :meth:`KubePod.run` raises it)."""

    def run(self, argv: Sequence[str], *, timeout: float) -> CommandResult:
        if "--worker" in argv:
            raise ToolError(
                f"locust in pod {self.name} did not finish within {timeout:g} s",
                tool="locust",
                output="Starting Locust 2.12.1\nFailed to connect to master 10.244.1.5:5557\n",
            )
        return super().run(argv, timeout=timeout)


def test_a_worker_that_never_connected_says_why_in_the_error() -> None:
    scenario, condition = _split()
    prepared = _prepared([])
    for i in range(2):
        prepared.endpoints[f"load-worker-{i}"] = _SilentWorker(
            f"load-worker-{i}", f"10.244.1.{6 + i}", ()
        )
    with pytest.raises(ToolError) as raised:
        scenario.measure(None, prepared, condition, profile_named("quick"), 0)  # type: ignore[arg-type]
    message = str(raised.value)
    assert message.startswith("only 0 of 2 locust workers reported to the master"), message
    assert message.endswith("; load-worker-0 said: Failed to connect to master 10.244.1.5:5557"), (
        message
    )
    assert "\n" not in message
    assert "did not finish within" in (raised.value.output or "")
