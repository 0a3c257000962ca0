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
from pathlib import Path

import numpy as np
import pytest

from cnibench import cli
from cnibench.backends.base import ClusterSpec
from cnibench.errors import UnsupportedError
from cnibench.records import Measurement, RunStatus
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

    def __init__(self, values: dict[str, float] | None = None, seed: int = 3) -> None:
        self.made: list[tuple[str, int | None]] = []
        self.values = values or {}
        self.rng = np.random.default_rng(seed)

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
