"""A feature a configuration's cluster cannot run reads "not possible here" in the matrix, with
the reason under it, in the terminal and in the report, rather than a blank that looks like
"not measured" (issue 31).

The CLI, the session, the results and the report are real. Faked: :meth:`Runner.run_condition`
(a real one provisions a lab, which needs root; tests/lab runs it): on ``routed`` it returns
five runs per condition with the gateway costing 30 %, on ``vxlan`` it raises the
:class:`UnsupportedError` a cluster lacking the egress gateway raises.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cnibench import cli, report
from cnibench.backends.base import ClusterSpec
from cnibench.errors import UnsupportedError
from cnibench.records import Measurement, RunRecord, RunStatus
from cnibench.report.matrix import NOT_POSSIBLE_CELL
from cnibench.scenarios import Condition, Scenario
from cnibench.scenarios.base import Verification
from cnibench.scenarios.runner import ConditionResult, Runner, RunResult

REASON = "lab/vxlan lacks egress-gateway (faked for this test)"


def _fake(monkeypatch: pytest.MonkeyPatch) -> None:
    def run_condition(
        self: Runner,
        scenario: Scenario,
        cni: ClusterSpec,
        condition: Condition,
        *,
        repetitions: range | None = None,
    ) -> ConditionResult:
        if cni.label == "vxlan":
            raise UnsupportedError(REASON)
        self.store.write_json(f"verification-{scenario.name}-{condition.id}", {"ok": True})
        level = 9e9 * (0.7 if condition.parameters["gateway"] == "on" else 1.0)
        numbers = range(self.profile.runs) if repetitions is None else repetitions
        runs = []
        for n in numbers:
            value = level * (1 + 0.01 * (n % 3 - 1))
            run_id = f"{scenario.name}-{cni.label}-{condition.id}-r{n}"
            # As the real runner does: each run's records on disk, for the verdict to read.
            record = RunRecord(
                session_id=self.store.session_id,
                run_id=run_id,
                time=f"2026-11-27T12:{n:02d}:{int(level > 8e9):02d}+00:00",
                backend="lab",
                provider="lab",
                cni=cni.label,
                cni_version="1",
                scenario=scenario.name,
                condition=condition.id,
                parameters=dict(condition.parameters),
                repetition=n,
                metric="throughput",
                value=value,
                unit="bits/s",
                verified=True,
                status=RunStatus.OK,
                reason="",
            )
            self.store.write_run(run_id, [record])
            measured = (Measurement("throughput", value, "bits/s"),)
            runs.append(RunResult(run_id, n, 0, RunStatus.OK, "", measured))
        return ConditionResult(
            scenario.name,
            cni.label,
            condition,
            Verification(True, "faked"),
            tuple(runs),
            str(self.store.session_dir),
        )

    monkeypatch.setattr(Runner, "run_condition", run_condition)


def test_a_feature_the_cluster_cannot_run_says_so_in_its_cell_with_the_reason(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    _fake(monkeypatch)
    results = tmp_path / "results"
    argv = ["run", "--cluster", "lab", "--cni", "routed", "--cni", "vxlan", "--scenario"]
    code = cli.main([*argv, "egress", "--runs", "5", "--results-dir", str(results)])
    captured = capsys.readouterr()
    printed = captured.out + captured.err
    assert code == cli.EXIT_OK, printed
    (recorded,) = results.glob("*/skipped.json")
    (entry,) = json.loads(recorded.read_text())["skipped"]
    assert (entry["scenario"], entry["cni"], entry["reason"]) == ("egress", "vxlan", REASON)

    # The terminal: routed's cost beside vxlan's "not possible here", and why.
    matrix = printed.split("What each feature costs:", 1)[1].split("verdict:", 1)[0]
    throughput = next(line for line in matrix.splitlines() if line.startswith("  throughput "))
    assert "×0.70" in throughput
    assert NOT_POSSIBLE_CELL in throughput
    assert f"{NOT_POSSIBLE_CELL}: egress on vxlan: {REASON}" in matrix

    # The report says the same under its matrix.
    paths = report.write_report(results, markdown=tmp_path / "r.md")
    section = paths.markdown.read_text().split("## What each feature costs", 1)[1]
    section = section.split("\n## ", 1)[0]
    assert NOT_POSSIBLE_CELL in section.split(f"- {NOT_POSSIBLE_CELL}:", 1)[0]
    assert f"- {NOT_POSSIBLE_CELL}: egress on vxlan: {REASON}" in section
