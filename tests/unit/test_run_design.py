"""Issue 32, item 1: ``cnibench run`` interleaves the conditions of a scenario by default,
runs sequentially only where a set-up cannot be repeated cheaply (thousands of Services) or
when ``--sequential`` asks, and then records it (``design.json``) and says so in one line.

The CLI, the option parsing, the lab backend's choice, the session and its order are real.
Faked: :meth:`Runner.run_condition` (a real one provisions a lab, which needs root; tests/lab
runs it), which records what it was asked to run and returns one made-up run per repetition.
"""

from __future__ import annotations

import json
import math
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
import pytest

from cnibench import cli, load_results, report
from cnibench.backends.base import ClusterSpec
from cnibench.errors import UnsupportedError
from cnibench.records import Measurement, RunRecord, RunStatus
from cnibench.scenarios import SCENARIOS, Condition, Scenario, build_scenarios
from cnibench.scenarios.base import Verification
from cnibench.scenarios.runner import ConditionResult, Runner, RunResult
from cnibench.session import (
    LONE_CONDITION,
    PlannedRun,
    RunOrder,
    plan_conditions,
    run_design,
    select_backend,
    session_config,
)
from cnibench.study import STUDY, commands

OFF, ON = "gateway-off", "gateway-on"
START = datetime(2026, 12, 6, 8, tzinfo=UTC)
SVC = "cross-node-idle-sockperf-service-nftables-{}svc"
EGRESS = [
    "run",
    "--cluster",
    "lab",
    "--cni",
    "routed",
    "--scenario",
    "egress",
    "--profile",
    "smoke",
]


class _Calls:
    """What the faked runner was asked: (condition id, first repetition or None for all)."""

    def __init__(
        self, values: dict[str, float] | None = None, seed: int = 3, *, records: bool = False
    ) -> None:
        self.made: list[tuple[str, int | None]] = []
        self.on: list[str] = []
        self.values = values or {}
        self.rng = np.random.default_rng(seed)
        self.records = records
        """Also write each run's records, as the real runner does (time: the call's order)."""

    def install(self, monkeypatch: pytest.MonkeyPatch) -> None:
        calls = self

        def run_condition(
            self: Runner,
            scenario: Scenario,
            cni: ClusterSpec,
            condition: Condition,
            *,
            repetitions: range | None = None,
        ) -> ConditionResult:
            calls.made.append((condition.id, None if repetitions is None else repetitions[0]))
            calls.on.append(cni.label)
            # As the real runner does once a set-up is verified (so the session has a directory).
            self.store.write_json(f"verification-{scenario.name}-{condition.id}", {"ok": True})
            numbers = range(self.profile.runs) if repetitions is None else repetitions
            spread = calls.values.get(condition.id, 0.0)
            runs = tuple(
                RunResult(
                    f"{condition.id}-r{n}",
                    n,
                    0,
                    RunStatus.OK,
                    "",
                    (
                        Measurement(
                            "throughput", 9e9 * math.exp(calls.rng.normal(0, spread)), "bits/s"
                        ),
                    ),
                )
                for n in numbers
            )
            for run in runs if calls.records else ():
                (measurement,) = run.measurements
                record = RunRecord(
                    session_id=self.store.session_id,
                    run_id=f"{cni.slug}-{run.run_id}",
                    time=(
                        START + timedelta(seconds=len(calls.made) * 60 + run.repetition)
                    ).isoformat(),
                    backend="lab",
                    provider="lab",
                    cni=cni.label,
                    cni_version="",
                    scenario=scenario.name,
                    condition=condition.id,
                    parameters=dict(condition.parameters),
                    repetition=run.repetition,
                    metric=measurement.metric,
                    value=measurement.value,
                    unit=measurement.unit,
                    verified=True,
                    status=RunStatus.OK,
                    looks=self.looks,
                )
                self.store.write_run(record.run_id, [record])
            return ConditionResult(
                scenario.name,
                cni.label,
                condition,
                Verification(True, "faked"),
                runs,
                str(self.store.session_dir),
            )

        monkeypatch.setattr(Runner, "run_condition", run_condition)


def _run(argv: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    """``cnibench run ARGV``'s exit code and everything it printed (the table with the
    precision notes on stdout, the session's lines on stderr)."""
    code = cli.main([*argv, "--results-dir", str(tmp_path / "results")])
    printed = capsys.readouterr()
    return code, printed.out + printed.err


def _design(tmp_path: Path) -> dict[str, list[dict[str, object]]]:
    (path,) = (tmp_path / "results").glob("*/design.json")
    return json.loads(path.read_text())  # type: ignore[no-any-return]


@pytest.mark.parametrize("asked", [[], ["--interleave"]], ids=["default", "interleave-given"])
def test_the_default_run_interleaves_the_conditions_of_an_interleavable_scenario(
    asked: list[str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    calls = _Calls()
    calls.install(monkeypatch)
    code, err = _run([*EGRESS, *asked], tmp_path, capsys)
    assert code == cli.EXIT_OK, err
    assert calls.made == [(OFF, 0), (ON, 0), (ON, 1), (OFF, 1)]
    design = _design(tmp_path)
    assert design["groups"] == [
        {
            "scenario": "egress",
            "cni": "routed",
            "order": "interleaved",
            "conditions": [OFF, ON],
            "reason": "",
            "rounds_shared_with": [],
        }
    ]
    assert [(r["condition"], r["round"]) for r in design["rounds"]] == calls.made
    assert "sequential" not in err


def test_services_beyond_the_limit_run_sequentially_recorded_and_said_in_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    calls = _Calls()
    calls.install(monkeypatch)
    ids = [SVC.format(n) for n in (0, 100, 1000)]
    argv = ["run", "--cluster", "lab", "--cni", "routed", "--scenario", "baseline"]
    argv += ["--target", "service", "--proxy", "nftables", "--services", "0,100,1000"]
    argv += ["--profile", "smoke", *(arg for cid in ids for arg in ("--condition", cid))]
    code, err = _run(argv, tmp_path, capsys)
    assert code == cli.EXIT_OK, err
    # The two cheap ones take turns; the 1000 Services are set up once, for both runs.
    assert calls.made == [(ids[0], 0), (ids[1], 0), (ids[1], 1), (ids[0], 1), (ids[2], None)]
    interleaved, sequential = _design(tmp_path)["groups"]
    assert (interleaved["order"], interleaved["conditions"]) == ("interleaved", ids[:2])
    assert (sequential["order"], sequential["conditions"]) == ("sequential", ids[2:])
    reason = str(sequential["reason"])
    assert reason.startswith("more than 100 further Services would be created and deleted")
    (line,) = [line for line in err.splitlines() if "sequential" in line]
    assert line == f"sequential, not interleaved: baseline on routed ({ids[2]}): {reason}"


def test_sequential_gives_the_old_order_and_says_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    calls = _Calls()
    calls.install(monkeypatch)
    code, err = _run([*EGRESS, "--sequential"], tmp_path, capsys)
    assert code == cli.EXIT_OK, err
    assert calls.made == [(OFF, None), (ON, None)]
    design = _design(tmp_path)
    assert [(r["condition"], r["round"]) for r in design["rounds"]] == calls.made
    (group,) = design["groups"]
    assert (group["order"], group["reason"]) == ("sequential", "--sequential was given")
    assert f"sequential, not interleaved: egress on routed ({OFF}, {ON}): --sequential" in err


def test_precision_adds_rounds_among_the_conditions_not_yet_precise_enough(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """gateway-off's runs agree (its 2 runs do), gateway-on's scatter by 30 %: it alone goes
    on, to the maximum of 4, still taking its turn in rounds."""
    calls = _Calls({OFF: 0.0001, ON: 0.3})
    calls.install(monkeypatch)
    argv = [*EGRESS, "--precision", "5%", "--precision-on", "throughput", "--max-runs", "4"]
    code, printed = _run(argv, tmp_path, capsys)
    assert code == cli.EXIT_OK, printed
    assert calls.made == [(OFF, 0), (ON, 0), (ON, 1), (OFF, 1), (ON, 2), (ON, 3)]
    flat = " ".join(printed.split())
    assert f"egress/routed/{OFF}: precision ±5 % per contrast" in flat
    assert "reached after 2 runs" in flat
    assert f"egress/routed/{ON}: precision" in flat
    assert "NOT reached: stopped at the maximum of 4 runs" in flat
    notes = sorted((tmp_path / "results").glob("*/precision-egress-*.json"))
    assert [path.name.rsplit("-", 1)[-1] for path in notes] == ["off.json", "on.json"]


def _plan(scenario: Scenario, ids: list[str], cni: str = "routed") -> list[PlannedRun]:
    by_id = {condition.id: condition for condition in scenario.conditions()}
    return [PlannedRun(scenario, ClusterSpec(cni=cni), by_id[cid]) for cid in ids]


def test_a_lone_condition_is_sequential_it_has_nothing_to_alternate_with() -> None:
    egress = SCENARIOS["egress"]
    design = run_design([*_plan(egress, [OFF, ON]), *_plan(egress, [ON], "vxlan")], 3)
    assert [(g.cni, g.order, g.reason) for g in design.groups] == [
        ("routed", RunOrder.INTERLEAVED, ""),
        ("vxlan", RunOrder.SEQUENTIAL, LONE_CONDITION),
    ]
    assert [(n, p.cni, p.condition.id) for n, p in design.order][-2:] == [
        (2, "routed", ON),
        (-1, "vxlan", ON),
    ]
    assert design.sequential_line() == (
        f"sequential, not interleaved: egress on vxlan ({ON}): {LONE_CONDITION}"
    )


def test_the_study_interleaves_and_only_the_scenario_s_own_word_makes_its_sweep_sequential() -> (
    None
):
    """The study's commands leave ``--sequential`` out: each interleaves, and the only
    conditions that run one after the other are those the baseline declares so itself (the
    sweep to 1000 further Services). Planned as tests/unit/test_study.py plans them (kind,
    chosen without asking an engine)."""
    parts = [part for configuration in STUDY for part in configuration.parts]
    lines = commands(Path("out"))
    assert len(parts) == len(lines)
    swept = 0
    for part, line in zip(parts, lines, strict=True):
        assert "--sequential" not in line
        args = cli._build_parser().parse_args(line[1:])
        config = session_config(vars(args))
        backend, _ = select_backend(config.cluster, config.cnis)
        registry = {
            name: scenario.on_backend(backend)
            for name, scenario in build_scenarios(config.scenario_options).items()
        }
        planned = plan_conditions(registry, args.scenario, args.condition)
        declared = {p.condition.id for p in planned if p.scenario.sequential_reason(p.condition)}
        assert declared == {c for c in part.conditions if c.endswith("-1000svc")}, part.why
        swept += len(declared)
    assert swept >= 3  # one sweep on each proxy


def test_a_run_whose_every_condition_is_skipped_writes_no_design(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Nothing measured, nothing written: the design alone makes no session directory (a
    ``--report`` of it would have no runs to show)."""

    def lacking(
        self: Runner, scenario: Scenario, cni: ClusterSpec, condition: Condition, **_: object
    ):
        raise UnsupportedError(f"lab/{cni.label} lacks everything (faked)")

    monkeypatch.setattr(Runner, "run_condition", lacking)
    code, printed = _run(EGRESS, tmp_path, capsys)
    assert code == cli.EXIT_FAILED, printed
    assert "nothing was measured: every condition was skipped" in printed
    assert list((tmp_path / "results").glob("*/design.json")) == []


def test_lab_clusters_take_turns_in_the_same_rounds_so_a_cni_against_its_reference_is_paired(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Two CNIs on the lab: the egress groups of routed and vxlan share their rounds, the
    groups' order rotating every round as the conditions' does, and the verdict pairs
    vxlan against its reference routed by round."""
    calls = _Calls({OFF: 0.03, ON: 0.03}, records=True)
    calls.install(monkeypatch)
    argv = [*EGRESS, "--cni", "vxlan", "--profile", "quick"]
    code, err = _run(argv, tmp_path, capsys)
    assert code == cli.EXIT_OK, err
    made = list(zip(calls.on, calls.made, strict=True))
    assert made[:8] == [
        ("routed", (OFF, 0)),
        ("routed", (ON, 0)),
        ("vxlan", (OFF, 0)),
        ("vxlan", (ON, 0)),
        ("vxlan", (ON, 1)),
        ("vxlan", (OFF, 1)),
        ("routed", (ON, 1)),
        ("routed", (OFF, 1)),
    ]
    assert len(made) == 4 * 5
    groups = _design(tmp_path)["groups"]
    assert [(g["cni"], g["rounds_shared_with"]) for g in groups] == [
        ("routed", ["vxlan"]),
        ("vxlan", ["routed"]),
    ]
    flat = " ".join(err.split())
    assert "rounds shared across clusters: egress on routed, vxlan" in flat
    df = load_results(tmp_path / "results")
    table = report.verdict(df)
    cni = table[table["kind"] == "cni"]
    assert len(cni) == 2
    assert (cni["pairing"] == f"{len(set(df['repetition']))} rounds, paired").all(), cni.verdict
    assert cni["verdict"].str.contains("n = 5 rounds, paired").all()


def test_kubernetes_clusters_keep_their_own_rounds() -> None:
    """Where a cluster per CNI costs minutes (``across_clusters`` False, the kube backend),
    each CNI's group runs all its rounds before the next CNI's cluster is used."""
    egress = SCENARIOS["egress"]
    plan = [*_plan(egress, [OFF, ON]), *_plan(egress, [OFF, ON], "vxlan")]
    alone = run_design(plan, 2)
    assert [p.cni for _, p in alone.order] == ["routed"] * 4 + ["vxlan"] * 4
    assert alone.shared_line() == ""
    shared = run_design(plan, 2, across_clusters=True)
    assert [p.cni for _, p in shared.order] == ["routed"] * 2 + ["vxlan"] * 4 + ["routed"] * 2
    assert sorted(step[0] for step in shared.order) == sorted(step[0] for step in alone.order)


def test_until_decided_adds_shared_rounds_for_an_undecided_cni_contrast(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--until-decided`` on two lab CNIs: a look finds the block's undecided contrasts,
    CNI against reference among them, and the next rounds run the open conditions of both
    CNIs in shared rounds, so the CNI contrast stays paired."""
    calls = _Calls({OFF: 0.05, ON: 0.05}, seed=11, records=True)
    calls.install(monkeypatch)
    argv = [*EGRESS, "--cni", "vxlan", "--until-decided", "--max-runs", "4"]
    code, err = _run(argv, tmp_path, capsys)
    assert code == cli.EXIT_OK, err
    (block,) = _design(tmp_path)["looks"]
    assert block["cni"] == "routed, vxlan"
    first = block["looks"][0]
    assert first["rounds"] == 2
    # Two rounds at 5 %/2 decide nothing: every condition of both CNIs is still open.
    assert first["undecided"] == sorted(f"{c}/{g}" for c in ("routed", "vxlan") for g in (OFF, ON))
    assert any("vs reference" in contrast for contrast in first["contrasts"]), first
    later = [(cni, made) for cni, made in zip(calls.on, calls.made, strict=True) if made[1] == 2]
    assert {cni for cni, _ in later} == {"routed", "vxlan"}
    df = load_results(tmp_path / "results")
    cni = report.verdict(df)
    cni = cni[cni["kind"] == "cni"]
    assert (cni["pairing"] == f"{len(set(df['repetition']))} rounds, paired").all(), cni.verdict
    assert (cni["n_treatment"] == 4).all()
