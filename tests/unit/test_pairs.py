"""``--pairs N``: the option, the baseline's paired conditions, the aggregate of a run's pairs,
the overlap check, and per-pair records kept out of every statistic.

The endpoints here are stand-ins that hand back captured real iperf3 and sockperf output
(fixtures/): pods cannot run in a unit test (the lab tier runs real ones,
tests/lab/test_lab_pairs.py).
"""

from __future__ import annotations

import json
import math
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd
import pytest

from cnibench import report
from cnibench.backends.base import CommandResult, Node, NodeRole
from cnibench.errors import ConfigError
from cnibench.records import Measurement, RunRecord, RunStatus
from cnibench.report.data import ok_runs, pair_rows, run_values
from cnibench.results import ResultsStore, load_results
from cnibench.scenarios import build_scenarios
from cnibench.scenarios.base import Condition, Prepared, Verification
from cnibench.scenarios.baseline import PROBE_LEAD, BaselineScenario
from cnibench.scenarios.options import MAX_PAIRS, parse_pairs, parse_scenario_options
from cnibench.scenarios.pairs import StreamJob, StreamRun, overlap_problem, run_together
from cnibench.scenarios.profiles import profile_named
from cnibench.scenarios.runner import ConditionResult, RunResult, precision_reached
from cnibench.session import plan_conditions, session_config
from cnibench.tools.iperf3 import iperf3_measurements, iperf3_pairs_measurements, parse_iperf3
from cnibench.tools.sockperf import (
    parse_sockperf,
    sockperf_measurements,
    sockperf_pairs_measurements,
)

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"
IPERF3_TCP = (FIXTURES / "iperf3" / "tcp.json").read_text()
IPERF3_TWO = (FIXTURES / "iperf3" / "tcp_reverse_parallel2.json").read_text()
SOCKPERF_UDP = (FIXTURES / "sockperf" / "udp_pingpong.txt").read_text()
SOCKPERF_TCP = (FIXTURES / "sockperf" / "tcp_pingpong.txt").read_text()


# --- the option ---------------------------------------------------------------------------


@pytest.mark.parametrize("text", ["1", "4", str(MAX_PAIRS), " 8 "], ids=["1", "4", "max", "spaces"])
def test_pairs_accepts_whole_numbers_up_to_the_bound(text: str) -> None:
    assert parse_pairs(text) == int(text)


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ("0", "outside 1..64"),
        (str(MAX_PAIRS + 1), "outside 1..64"),
        ("-2", "outside 1..64"),
        ("two", "not a whole number"),
        ("2.5", "not a whole number"),
    ],
    ids=["zero", "above-max", "negative", "word", "fraction"],
)
def test_bad_pairs_is_one_line_naming_the_option(text: str, said: str) -> None:
    with pytest.raises(ConfigError) as caught:
        session_config({"cluster": "lab", "profile": "smoke", "pairs": text})
    message = str(caught.value)
    assert message.startswith("--pairs")
    assert said in message
    assert "\n" not in message


def test_pairs_reaches_the_scenario_options() -> None:
    config = session_config({"cluster": "lab", "profile": "smoke", "pairs": "3"})
    assert config.scenario_options.pairs == 3
    assert session_config({"cluster": "lab", "profile": "smoke"}).scenario_options.pairs is None


def test_pairs_with_a_service_target_is_refused() -> None:
    with pytest.raises(ConfigError, match="--pairs 2 measures pod to pod"):
        parse_scenario_options(pairs="2", target="pod,service")


def test_cli_refuses_bad_pairs_in_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    from cnibench.cli import main

    code = main(["run", "--cluster", "lab", "--scenario", "baseline", "--pairs", "0"])
    err = capsys.readouterr().err.strip()
    assert code == 2, err
    assert len(err.splitlines()) == 1
    assert "--pairs: 0 is outside 1..64" in err


def test_plugin_offers_pairs_with_the_same_help() -> None:
    import argparse

    from cnibench.session import add_session_options

    parser = argparse.ArgumentParser()
    add_session_options(parser.add_argument)
    assert parser.parse_args(["--pairs", "4"]).pairs == "4"


# --- planning -----------------------------------------------------------------------------


def test_other_scenarios_refuse_more_than_one_pair() -> None:
    registry = build_scenarios(parse_scenario_options(pairs="2"))
    with pytest.raises(ConfigError) as caught:
        plan_conditions(registry, ["baseline,egress"], pairs=2)
    message = str(caught.value)
    assert "--pairs 2: egress" in message
    assert "only baseline" in message
    assert "\n" not in message


def test_one_pair_is_accepted_everywhere() -> None:
    registry = build_scenarios(parse_scenario_options(pairs="1"))
    assert plan_conditions(registry, ["egress"], pairs=1)


def test_paired_conditions_are_iperf3_and_sockperf_only() -> None:
    scenario = BaselineScenario(parse_scenario_options(pairs="4"))
    paired = {c.id: c.parameters for c in scenario.conditions() if "pairs" in c.parameters}
    assert set(paired) == {
        f"{placement}-{load}-{tool}-4pairs"
        for placement in ("same-node", "cross-node")
        for load in ("idle", "loaded")
        for tool in ("iperf3", "sockperf")
    }
    assert {p["pairs"] for p in paired.values()} == {4}
    others = [c for c in scenario.conditions() if "pairs" not in c.parameters]
    assert others
    assert {c.parameters["tool"] for c in others} == {"wrk", "ab"}


def test_without_pairs_the_conditions_are_unchanged() -> None:
    ids = [c.id for c in BaselineScenario().conditions()]
    assert "cross-node-idle-iperf3" in ids
    assert not any("pair" in i for i in ids)


# --- the aggregate ------------------------------------------------------------------------


def _by_metric(measurements: Sequence[Measurement]) -> dict[str, float]:
    return {m.metric: m.value for m in measurements}


def test_iperf3_aggregate_sums_the_pairs() -> None:
    outputs = [(IPERF3_TCP, ""), (IPERF3_TWO, ""), (IPERF3_TCP, "")]
    each = [_by_metric(iperf3_measurements(out, err)) for out, err in outputs]
    total = _by_metric(iperf3_pairs_measurements(outputs))
    assert total["throughput"] == pytest.approx(sum(p["throughput"] for p in each))
    assert total["throughput_sender"] == pytest.approx(sum(p["throughput_sender"] for p in each))
    assert total["retransmits"] == sum(p["retransmits"] for p in each)
    parsed = [parse_iperf3(out) for out, _ in outputs]
    segments = sum(p.segments_sent or 0.0 for p in parsed)
    assert total["retransmit_rate"] == pytest.approx(total["retransmits"] / segments)


def test_sockperf_aggregate_weights_each_pair_by_its_round_trips() -> None:
    outputs = [(SOCKPERF_UDP, ""), (SOCKPERF_TCP, "")]
    parsed = [parse_sockperf(out) for out, _ in outputs]
    total = _by_metric(sockperf_pairs_measurements(outputs))
    n = sum(p.observations for p in parsed)
    assert total["latency_avg"] == pytest.approx(
        sum(p.avg_latency_us * p.observations for p in parsed) / n
    )
    each = [_by_metric(sockperf_measurements(out, err)) for out, err in outputs]
    assert total["latency_p99"] == max(p["latency_p99"] for p in each)
    assert min(p["latency_avg"] for p in each) <= total["latency_avg"]
    assert total["latency_avg"] <= max(p["latency_avg"] for p in each)


# --- overlap ------------------------------------------------------------------------------


def _stream(name: str, start: float, end: float) -> StreamRun:
    return StreamRun(name, 1000.0 + start, 1000.0 + end, None)


def test_streams_that_ran_together_overlap() -> None:
    runs = [_stream("pair 0", 0.0, 10.0), _stream("pair 1", 0.3, 10.2), _stream("probe", 0.1, 9.9)]
    problem, shared = overlap_problem(runs)
    assert problem == ""
    assert shared == pytest.approx(9.6)


def test_a_stream_after_the_others_is_named() -> None:
    runs = [_stream("pair 0", 0.0, 10.0), _stream("pair 1", 0.2, 10.1), _stream("pair 2", 10.5, 20)]
    problem, shared = overlap_problem(runs)
    assert problem.startswith("pair 0") or problem.startswith("pair 2")
    assert "shared 0 %" in problem
    assert shared == 0.0


def test_a_stream_that_overlapped_too_little_fails() -> None:
    runs = [_stream("pair 0", 0.0, 10.0), _stream("pair 1", 7.0, 17.0)]
    problem, _ = overlap_problem(runs)
    assert "shared 30 %" in problem
    assert "at least 50 % needed" in problem


def test_a_probe_that_outlasts_the_streams_fails() -> None:
    """sockperf measures from 2 s after it starts: a probe ending after the streams measured
    part of its latency without their load."""
    probe = StreamRun("latency probe", 1000.0, 1004.3, None, inside=True)
    runs = [_stream("pair 0", 0.0, 2.0), _stream("pair 1", 0.0, 2.0), probe]
    problem, _ = overlap_problem(runs, min_share=0.4)
    assert problem.startswith("latency probe ended at 4.30 s, after the others' common end")
    inside = StreamRun("latency probe", 1000.0, 1004.3, None, inside=True)
    longer = [_stream("pair 0", 0.0, 5.0), _stream("pair 1", 0.0, 5.1), inside]
    assert overlap_problem(longer)[0] == ""


def test_streams_outlast_the_probe_by_its_lead() -> None:
    scenario = BaselineScenario(parse_scenario_options(pairs="2"))
    condition = next(c for c in scenario.conditions() if c.id == "cross-node-idle-iperf3-2pairs")
    prepared = _paired(2, concurrent=3)
    profile = profile_named("smoke")
    scenario.measure(None, prepared, condition, profile, 0)  # type: ignore[arg-type]
    iperf3 = prepared.endpoints["client-1"].calls[0]
    sockperf = next(c for c in prepared.endpoints["client"].calls if _tool(c) == "sockperf")
    stream_seconds = float(iperf3[iperf3.index("-t") + 1])
    probe_seconds = float(sockperf[sockperf.index("-t") + 1])
    assert stream_seconds == profile.duration + PROBE_LEAD
    assert probe_seconds == profile.duration


def test_one_stream_has_nothing_to_overlap() -> None:
    assert overlap_problem([_stream("pair 0", 0.0, 2.0)]) == ("", pytest.approx(2.0))


# --- running pairs together -----------------------------------------------------------------


_STREAM_SECONDS = 1.6
_PROBE_SECONDS = 1.2


def _tool(argv: Sequence[str]) -> str:
    """The tool ``argv`` runs, after any ``taskset -c CPU`` (sockperf runs pinned)."""
    return argv[3] if argv[0] == "taskset" else argv[0]


@dataclass
class _CannedPod:
    """An endpoint whose commands give captured output, each held until every pod of the
    run is inside its command (so the run really is concurrent) and then
    :data:`_STREAM_SECONDS` (iperf3) or :data:`_PROBE_SECONDS` (the others) more."""

    name: str
    node: Node
    ip: str
    gate: threading.Barrier
    names: dict[str, str]
    calls: list[tuple[str, ...]] = field(default_factory=list)

    def run(self, argv: Sequence[str], *, timeout: float) -> CommandResult:
        self.calls.append(tuple(argv))
        self.gate.wait(timeout)
        # Streams outlast the probe, as PROBE_LEAD makes them on a real cluster, and the probe
        # covers most of them, as there: each stream then shares 75 % of its time with all the
        # others. With 0.4 s and 0.2 s it shared exactly the check's 50 %, and a thread woken
        # late on a loaded machine made it fail.
        tool = _tool(argv)
        threading.Event().wait(_STREAM_SECONDS if tool == "iperf3" else _PROBE_SECONDS)
        if tool == "iperf3":
            out = IPERF3_TCP
        elif tool == "sockperf":
            out = SOCKPERF_TCP
        else:
            address = argv[-1].split("//")[1].split(":")[0]
            out = f"{self.names[address]}\n200"  # the echo names its pod, curl adds the code
        return CommandResult(tuple(argv), 0, out, "", 0.2)


def _paired(pairs: int, *, concurrent: int) -> Prepared:
    gate = threading.Barrier(concurrent)
    server_node = Node("node-b", NodeRole.SERVER, "198.18.0.2")
    client_node = Node("node-a", NodeRole.CLIENT, "198.18.0.1")
    prepared = Prepared()
    names: dict[str, str] = {}
    for pair in range(pairs):
        suffix = "" if pair == 0 else f"-{pair}"
        address = f"198.19.1.{10 + pair}"
        names[address] = f"bl-srv-p{pair}"
        prepared.endpoints[f"server{suffix}"] = _CannedPod(
            f"bl-srv-p{pair}", server_node, address, gate, names
        )
        prepared.endpoints[f"client{suffix}"] = _CannedPod(
            f"bl-cli-p{pair}", client_node, f"198.19.0.{10 + pair}", gate, names
        )
    prepared.expected["address"] = "198.19.1.10"  # what prepare() sets: the first server's
    return prepared


def test_a_run_of_pairs_records_each_pair_and_their_sum() -> None:
    scenario = BaselineScenario(parse_scenario_options(pairs="3"))
    condition = next(c for c in scenario.conditions() if c.id == "cross-node-idle-iperf3-3pairs")
    prepared = _paired(3, concurrent=4)  # three pairs and the latency probe
    output = scenario.measure(None, prepared, condition, profile_named("smoke"), 0)  # type: ignore[arg-type]
    per_pair = [m for m in output.measurements if m.pair is not None]
    aggregate = {m.metric: m.value for m in output.measurements if m.pair is None}
    throughputs = [m.value for m in per_pair if m.metric == "throughput"]
    assert sorted({m.pair for m in per_pair if m.pair is not None}) == [0, 1, 2]
    assert len(throughputs) == 3
    assert aggregate["throughput"] == pytest.approx(sum(throughputs))
    assert {"latency_under_load_avg", "latency_under_load_p99"} <= set(aggregate)
    assert "latency_avg" not in aggregate  # the probe's numbers are its own metric
    starts = [m.value for m in per_pair if m.metric == "pair_start"]
    ends = [m.value for m in per_pair if m.metric == "pair_end"]
    assert max(starts) < min(ends)
    assert output.verification is not None
    assert output.verification.ok
    assert set(output.raw) == {
        "pair0-iperf3.json",
        "pair1-iperf3.json",
        "pair2-iperf3.json",
        "latency-under-load-sockperf.txt",
    }


def test_latency_pairs_have_no_probe() -> None:
    scenario = BaselineScenario(parse_scenario_options(pairs="2"))
    condition = next(c for c in scenario.conditions() if c.id == "same-node-idle-sockperf-2pairs")
    output = scenario.measure(None, _paired(2, concurrent=2), condition, profile_named("smoke"), 0)  # type: ignore[arg-type]
    metrics = {m.metric for m in output.measurements if m.pair is None}
    assert "latency_avg" in metrics
    assert not any(m.startswith("latency_under_load_") for m in metrics)


def test_run_together_starts_every_job_before_any_ends() -> None:
    prepared = _paired(2, concurrent=2)
    jobs = [
        StreamJob(f"pair {i}", prepared.endpoints[key], ["iperf3", "-c", "x"], 10.0)
        for i, key in enumerate(("client", "client-1"))
    ]
    done = run_together(jobs)
    assert [d.name for d in done] == ["pair 0", "pair 1"]
    assert max(d.started for d in done) < min(d.ended for d in done)
    assert overlap_problem(done)[0] == ""


def test_pairs_are_verified_on_their_nodes() -> None:
    scenario = BaselineScenario(parse_scenario_options(pairs="2"))
    condition = next(c for c in scenario.conditions() if c.id == "cross-node-idle-iperf3-2pairs")
    prepared = _paired(2, concurrent=1)
    verdict = scenario.verify(None, prepared, condition)  # type: ignore[arg-type]
    assert verdict.ok, verdict.detail
    assert verdict.evidence["pair1_client_node"] == "node-a"
    assert verdict.evidence["pair1_server_node"] == "node-b"
    same = next(c for c in scenario.conditions() if c.id == "same-node-idle-iperf3-2pairs")
    refused = scenario.verify(None, prepared, same)  # type: ignore[arg-type]
    assert not refused.ok
    assert "pair 0" in refused.detail


# --- per-pair values never count as runs ----------------------------------------------------


def _paired_result(throughputs: Sequence[Sequence[float]]) -> ConditionResult:
    runs = []
    for repetition, pairs in enumerate(throughputs):
        measurements = [Measurement("throughput", sum(pairs), "bits/s")]
        measurements += [
            Measurement("throughput", value, "bits/s", pair=i) for i, value in enumerate(pairs)
        ]
        runs.append(
            RunResult(f"r{repetition}", repetition, 0, RunStatus.OK, "", tuple(measurements))
        )
    condition = Condition("baseline", "cross-node-idle-iperf3-2pairs", {"pairs": 2})
    return ConditionResult(
        "baseline", "vxlan", condition, Verification(True, "ok"), tuple(runs), "/tmp"
    )


def test_condition_summary_counts_runs_not_pairs() -> None:
    result = _paired_result([[1e9, 3e9], [2e9, 2e9], [1.5e9, 2.5e9]])
    (summary,) = result.summaries()
    assert summary.n == 3
    assert result.values("throughput") == [4e9, 4e9, 4e9]
    assert sorted(result.pair_values("throughput")) == [1e9, 1.5e9, 2e9, 2e9, 2.5e9, 3e9]
    reached, widths = precision_reached(result.runs, ["throughput"], 0.05)
    assert reached
    assert widths["throughput"] == pytest.approx(0.0, abs=1e-12)


def _write_paired_runs(
    store: ResultsStore,
    condition: str,
    parameters: dict[str, object],
    pairs: Sequence[Sequence[float]],
) -> None:
    for repetition, values in enumerate(pairs):
        run_id = f"baseline-vxlan-{condition}-r{repetition}a0"
        base = RunRecord(
            session_id=store.session_id,
            run_id=run_id,
            time=f"2026-11-24T10:{repetition:02d}:{len(condition):02d}+00:00",
            backend="lab",
            provider="lab",
            cni="vxlan",
            cni_version="6.18",
            scenario="baseline",
            condition=condition,
            parameters=parameters,  # type: ignore[arg-type]
            repetition=repetition,
            metric="throughput",
            value=sum(values),
            unit="bits/s",
            verified=True,
        )
        records = [base] + [
            RunRecord(**{**base.__dict__, "value": value, "pair": pair})
            for pair, value in enumerate(values)
        ]
        store.write_run(run_id, records)


@pytest.fixture
def paired_results(tmp_path: Path) -> Path:
    store = ResultsStore(tmp_path / "results", session_id="20261124T100000Z-abcdef")
    store.create()
    common = {"load": "idle", "tool": "iperf3", "pairs": 2}
    # Pairs far apart within each run: as samples they would widen every interval.
    _write_paired_runs(
        store,
        "cross-node-idle-iperf3-2pairs",
        {**common, "placement": "cross-node"},
        [[1e9, 7e9], [7.2e9, 0.9e9], [1.1e9, 6.8e9]],
    )
    _write_paired_runs(
        store,
        "same-node-idle-iperf3-2pairs",
        {**common, "placement": "same-node"},
        [[5e9, 15e9], [14e9, 6e9], [5.5e9, 14.8e9]],
    )
    return store.results_dir


def test_pair_column_loads_and_old_records_have_none(paired_results: Path) -> None:
    df = load_results(paired_results)
    assert str(df["pair"].dtype) == "Int64"
    assert sorted(df["pair"].dropna().astype(int).unique()) == [0, 1]
    old = RunRecord.from_json_dict(
        {
            k: v
            for k, v in json.loads(json.dumps(_any_record().to_json_dict())).items()
            if k != "pair"
        }
    )
    assert old.pair is None


def _any_record() -> RunRecord:
    return RunRecord(
        "s",
        "r",
        "2026-11-24T10:00:00+00:00",
        "lab",
        "lab",
        "vxlan",
        "6",
        "egress",
        "gateway-on",
        {},
        0,
        "throughput",
        1.0,
        "bits/s",
        True,
    )


def test_aggregate_rows_equal_the_sum_of_their_pairs(paired_results: Path) -> None:
    df = load_results(paired_results)
    pairs = pair_rows(df).groupby("run_id")["value"].sum()
    aggregate = run_values(df).set_index("run_id")["value"]
    assert pairs.to_dict() == pytest.approx(aggregate.reindex(pairs.index).to_dict())


def test_ok_runs_hold_one_row_per_run(paired_results: Path) -> None:
    df = load_results(paired_results)
    rows = ok_runs(df, scenario="baseline", metric="throughput")
    assert len(rows) == 6
    assert rows["pair"].isna().all()


def test_verdict_ignores_per_pair_rows(paired_results: Path) -> None:
    df = load_results(paired_results)
    with_pairs = report.verdict(df)
    without = report.verdict(run_values(df))
    line = with_pairs[
        (with_pairs["metric"] == "throughput") & (with_pairs["feature"] == "cross-node")
    ]
    assert len(line) == 1
    assert int(line["n_treatment"].iloc[0]) == 3
    assert int(line["n_control"].iloc[0]) == 3
    pd.testing.assert_frame_equal(with_pairs, without)
    # The ratio is that of the aggregates: (8/8.0/7.9 G) over (20/20/20.3 G).
    cross = run_values(df)[run_values(df)["condition"].str.startswith("cross")]["value"]
    same = run_values(df)[run_values(df)["condition"].str.startswith("same")]["value"]
    expected = math.exp(
        pd.Series(cross).map(math.log).mean() - pd.Series(same).map(math.log).mean()
    )
    assert float(line["ratio"].iloc[0]) == pytest.approx(expected)


def test_run_table_shows_the_pairs_spread_beside_the_aggregate(paired_results: Path) -> None:
    df = load_results(paired_results)
    table = report.table_runs(df, "baseline", "cross-node-idle-iperf3-2pairs")
    assert list(table.columns) == ["throughput [bits/s]", "throughput CV across pairs"]
    first = pair_rows(df)
    first = first[first["run_id"] == table.attrs["run_ids"][0]]["value"]
    assert table.iloc[0, 0] == pytest.approx(first.sum())
    assert table.iloc[0, 1] == pytest.approx(first.std(ddof=1) / first.mean())
