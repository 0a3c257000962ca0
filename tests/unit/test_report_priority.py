"""The report's "which policy won" table from tidy priority records."""

from __future__ import annotations

import pandas as pd

from cnibench.report.tables import priority_outcomes


def records(cni: str, case: str, *, k8s, layers: str, winner: str, pairs, status="ok"):
    """One row per (run, metric) as load_results() gives them; ``pairs`` = (reachable, ref)."""
    rows = []
    for i, (reachable, reference) in enumerate(pairs):
        for metric, value in (("reachable", reachable), ("reference", reference)):
            rows.append(
                {
                    "run_id": f"{cni}-{case}-r{i}",
                    "scenario": "priority",
                    "cni": cni,
                    "condition": case,
                    "metric": metric,
                    "value": value,
                    "status": status,
                    "param_kubernetes_deny": k8s,
                    "param_layers": layers,
                    "param_reference_winner": winner,
                }
            )
    return rows


def frame() -> pd.DataFrame:
    rows = records(
        "antrea",
        "k8s-deny-and-cni-allow",
        k8s=True,
        layers="application@5:allow",
        winner="application@5:allow",
        pairs=[(1.0, 1.0), (1.0, 1.0)],
    )
    # Seed 003 Fig. 8 C on Calico: blocked, where the reference admits.
    rows += records(
        "calico",
        "k8s-deny-and-cni-allow",
        k8s="True",
        layers="application@5:allow",
        winner="application@5:allow",
        pairs=[(0.0, 1.0), (0.0, 1.0), (0.0, 1.0)],
    )
    rows += records(
        "calico",
        "k8s-deny",
        k8s=True,
        layers="none",
        winner="kubernetes deny-all",
        pairs=[(0.0, 0.0), (1.0, 0.0)],
    )
    # A failed run carries no value and must not count.
    rows += records("calico", "k8s-deny", k8s=True, layers="none",
                    winner="kubernetes deny-all", pairs=[(float("nan"), float("nan"))],
                    status="failed")  # fmt: skip
    return pd.DataFrame(rows)


def test_one_row_per_cni_and_case() -> None:
    table = priority_outcomes(frame())
    assert list(zip(table.cni, table.case, strict=True)) == [
        ("antrea", "k8s-deny-and-cni-allow"),
        ("calico", "k8s-deny-and-cni-allow"),
        ("calico", "k8s-deny"),
    ]


def test_agreeing_cni_is_no_finding() -> None:
    row = priority_outcomes(frame()).iloc[0]
    assert (row.policies, row.reference, row.observed, row.runs_matching, row.finding) == (
        "k8s-deny + application@5:allow", "allow", "allow", "2/2", False,
    )  # fmt: skip


def test_cni_blocking_where_the_reference_admits_is_a_finding() -> None:
    row = priority_outcomes(frame()).iloc[1]
    assert (row.policies, row.observed, row.runs_matching, row.finding) == (
        "k8s-deny + application@5:allow", "deny", "0/3", True,
    )  # fmt: skip


def test_runs_that_disagree_are_mixed_and_failed_runs_do_not_count() -> None:
    row = priority_outcomes(frame()).iloc[2]
    assert (row.policies, row.observed, row.runs_matching, row.reference_winner) == (
        "k8s-deny", "mixed", "1/2", "kubernetes deny-all",
    )  # fmt: skip


def test_no_priority_run_gives_an_empty_table() -> None:
    other = frame().assign(scenario="policy")
    assert priority_outcomes(other).empty
