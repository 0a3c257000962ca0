"""``cnibench run``'s table shows each scenario's headline metrics, not only CPU and RAM."""

from __future__ import annotations

import io
import json

import pytest
from rich.console import Console
from scipy import stats as sps

from cnibench import cli
from cnibench.records import Measurement, RunStatus
from cnibench.scenarios import SCENARIOS
from cnibench.scenarios.base import Condition, Verification
from cnibench.scenarios.runner import ConditionResult, RunResult


def _unit(metric: str) -> str:
    # As the scenarios record them: shares and errors are ratios.
    if metric.startswith(("share", "error", "max_abs")):
        return "ratio"
    if metric in ("reachable", "matches_reference", "other_reachable"):
        return "bool"
    return "1/s" if metric.endswith("per_second") else "x"


def _result(scenario: str, condition: Condition, runs: list[dict[str, float]]) -> ConditionResult:
    out = tuple(
        RunResult(
            f"r{i}",
            i,
            0,
            RunStatus.OK,
            "",
            tuple(Measurement(metric, value, _unit(metric)) for metric, value in values.items()),
        )
        for i, values in enumerate(runs)
    )
    return ConditionResult(scenario, "vxlan", condition, Verification(True, "ok"), out, "")


def _rows(results: list[ConditionResult], width: int = 200) -> dict[tuple[str, str], list[str]]:
    """(condition, metric) -> the cells of its row, read back from the rendered text."""
    buffer = io.StringIO()
    cli._print_table(results, SCENARIOS, Console(file=buffer, width=width))
    rows = {}
    for line in buffer.getvalue().splitlines():
        cells = [cell.strip() for cell in line.split("│")[1:-1]]
        if len(cells) == 9 and cells[0]:
            rows[(cells[2], cells[3])] = cells
    return rows


SPLIT = Condition("split", "v1-60-v2-40-u100", {"weights": json.dumps({"v1": 60, "v2": 40})})
# What a split run records besides its headline (see SplitScenario.measure).
SPLIT_RUNS = [
    {
        "requests_per_second": rps,
        "requests": 1000.0,
        "share@v1": v1,
        "share@v2": 1 - v1,
        "error@v1": v1 - 0.6,
        "error@v2": 0.6 - v1,
        "requests@v1": 1000 * v1,
        "max_abs_error": abs(v1 - 0.6),
        "p_value": 0.5,
        "cpu": 40.0,
        "ram": 900.0,
    }
    for rps, v1 in ((3900.0, 0.61), (4000.0, 0.63), (4100.0, 0.62))
]


def test_split_shows_each_backends_share_and_the_splitting_error() -> None:
    rows = _rows([_result("split", SPLIT, SPLIT_RUNS)])
    metrics = [metric for condition, metric in rows if condition == SPLIT.id]
    assert {"share@v1", "share@v2", "max_abs_error", "requests_per_second"} <= set(metrics)
    # Shares are fractions: the geometric mean of 0.61, 0.63, 0.62 (the one estimator of every
    # positive quantity) must not print as "0.62" of 2 digits only, nor the 0.02 error as
    # "0.00": four significant digits.
    assert sps.gmean([0.61, 0.63, 0.62]) == pytest.approx(0.619946, abs=1e-6)
    assert rows[(SPLIT.id, "share@v1")][5] == "0.6199"
    assert sps.gmean([0.01, 0.03, 0.02]) == pytest.approx(0.018171, abs=1e-6)
    assert rows[(SPLIT.id, "max_abs_error")][5] == "0.01817"
    # The counts behind the shares are raw material, not a headline.
    assert "requests@v1" not in metrics
    assert "p_value" not in metrics


POLICY = Condition(
    "policy",
    "on-cross-node-nftables-set-r1000-c50-new-connections",
    {"policy": "on", "rules": 1000, "rules_see": "new-connections"},
)


def test_policy_shows_new_connections_per_second() -> None:
    runs = [
        {"new_connections_per_second": v, "throughput": 2e10, "cpu": 70.0, "ram": 1e3}
        for v in (8400.0, 8500.0, 8600.0)
    ]
    rows = _rows([_result("policy", POLICY, runs)])
    assert sps.gmean([8400.0, 8500.0, 8600.0]) == pytest.approx(8499.61, abs=0.01)
    assert rows[(POLICY.id, "new_connections_per_second")][5] == "8500"


def test_priority_shows_whether_the_reference_policy_won() -> None:
    condition = Condition("priority", "k8s-deny", {"case": "k8s-deny"})
    runs = [{"reachable": 0.0, "matches_reference": 1.0, "other_reachable": 1.0}] * 2
    rows = _rows([_result("priority", condition, runs)])
    metrics = [metric for _, metric in rows]
    assert metrics == ["reachable", "matches_reference"]
    # Yes/no outcomes are counts of yes with their Clopper-Pearson interval.
    assert rows[("k8s-deny", "matches_reference")][5] == "2/2 = 1"
    exact = sps.binomtest(2, 2).proportion_ci(0.95, method="exact")
    assert exact.low == pytest.approx(0.15811, abs=1e-5)
    assert rows[("k8s-deny", "matches_reference")][6] == "[0.1581, 1]"


def test_a_long_condition_id_is_wrapped_not_cut() -> None:
    buffer = io.StringIO()
    cli._print_table(
        [_result("policy", POLICY, [{"new_connections_per_second": 1.0}] * 2)],
        SCENARIOS,
        Console(file=buffer, width=100),
    )
    column = "".join(
        line.split("│")[3].strip() for line in buffer.getvalue().splitlines() if line.count("│") > 3
    )
    assert POLICY.id in column
    assert "…" not in buffer.getvalue()


@pytest.mark.parametrize("name", sorted(SCENARIOS), ids=str)
def test_every_primary_metric_is_a_headline(name: str) -> None:
    # The verdict compares primary_metrics; the table must not hide what the verdict is about.
    scenario = SCENARIOS[name]
    for condition in scenario.conditions():
        assert set(scenario.primary_metrics) <= set(scenario.headline_metrics(condition))


EGRESS_ON = Condition("egress", "gateway-on", {"gateway": "on"})


def _egress_runs(idle: list[float]) -> list[dict[str, float]]:
    """Egress runs with the host's idle CPU share each left (``host_idle``, a ratio)."""
    return [
        {"throughput": 9e9 + 1e7 * i, "cpu": 50.0, "host_idle": share}
        for i, share in enumerate(idle)
    ]


def _printed(results: list[ConditionResult], width: int = 200) -> str:
    buffer = io.StringIO()
    cli._print_table(results, SCENARIOS, Console(file=buffer, width=width))
    return buffer.getvalue()


def test_a_condition_with_saturated_runs_is_marked_and_the_mark_explained() -> None:
    # Two of five runs left 3 % and 1 % of the host's CPU idle: below the 5 % the matrix
    # marks with ⊘ (issue 48). The table says how many, on every headline row of the
    # condition, and one line under it says what the mark means.
    hot = [_result("egress", EGRESS_ON, _egress_runs([0.03, 0.30, 0.01, 0.4, 0.5]))]
    text, rows = _printed(hot), _rows(hot)
    assert rows[(EGRESS_ON.id, "throughput")][8] == "verified, ⊘ 2 of 5 saturated"
    assert rows[(EGRESS_ON.id, "cpu")][8] == "verified, ⊘ 2 of 5 saturated"
    legend = " ".join(line for line in text.splitlines() if "│" not in line)
    assert "⊘ N of M saturated" in legend
    assert "less than 5 % of the host's CPU idle" in legend
    # Calm runs, and a run at exactly 5 % (the bound is strict), are not marked.
    calm = _printed([_result("egress", EGRESS_ON, _egress_runs([0.05, 0.30, 0.2]))])
    assert "⊘" not in calm
    assert "saturated" not in calm
