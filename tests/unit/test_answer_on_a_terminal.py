"""The answer as a platform engineer reads it in a terminal (issues 48 and 49): the matrix cuts
no number and no name at 80 or 100 columns, the verdict's heading is lines of a terminal's
width, a reason is said once, an undecided cell says what would decide it, and labels say what
ran (the lab's WireGuard is wireguard-go in the committed study, as its fingerprint records;
kind's nodes share one host's CPUs).

The matrix and the verdict are those of the committed kind study, the numbers the issues
quote; what the text must hold is read from the verdict's numbers (estimate, interval, runs
that decide), not from the matrix code.
"""

from __future__ import annotations

import functools
import json
import math
import re
from pathlib import Path

import pandas as pd
import pytest

from cnibench import report
from cnibench.cli import run as cli_run
from cnibench.report.matrix import cni_matrix, cpu_scope, feature_matrix, matrix_text
from cnibench.results import load_environments, load_results
from cnibench.scenarios import SCENARIOS

ROOT = Path(__file__).resolve().parents[2]
KIND = ROOT / "docs" / "results" / "kind-2026-11-27"
LAB_WIREGUARD = ROOT / "docs" / "results" / "lab-wireguard-2026-11-27"


@functools.cache
def _kind() -> tuple[pd.DataFrame, pd.DataFrame]:
    """The kind study's runs and verdict (about 20 s: computed once)."""
    runs = load_results(KIND, sessions="all")
    return runs, report.verdict(runs)


def _answer(width: int) -> list[str]:
    runs, table = _kind()
    lines = matrix_text(
        feature_matrix(table, runs=runs), title="What each feature costs", width=width
    )
    lines += matrix_text(cni_matrix(table, runs=runs), title="Each CNI", width=width)
    return lines


def _tokens(lines: list[str]) -> set[str]:
    return {word.strip(";,:()") for line in lines for word in line.split()}


_SHOWN_RESOURCES = {"cpu@agent", "cpu@nodes", "cpu@egress-gw"}
"""Per-node and per-agent CPU: what the matrix shows besides each scenario's own metrics."""


def _matrix_rows(table: pd.DataFrame) -> pd.DataFrame:
    """The verdict's rows a matrix shows: feature, option and CNI contrasts of a scenario's
    primary metrics or of per-node/per-agent CPU, never a host-wide figure."""
    shown = [
        kind in ("feature", "option", "cni")
        and metric not in ("cpu", "ram")
        and (metric in _SHOWN_RESOURCES or metric in SCENARIOS[scenario].primary_metrics)
        for kind, metric, scenario in zip(
            table["kind"], table["metric"], table["scenario"], strict=True
        )
    ]
    return table[shown]


def _close(printed: float, value: float) -> bool:
    """A bound printed in full: within 1 % (or 0.01) of the verdict's (rounded outwards)."""
    return abs(printed - value) <= max(0.01 * abs(value), 0.01)


@pytest.mark.parametrize("width", [80, 100], ids=lambda w: f"{w} columns")
def test_the_matrix_cuts_no_number_and_no_name(width: int) -> None:
    lines = _answer(width)
    assert max(len(line) for line in lines) <= width
    assert not any("…" in line for line in lines), [line for line in lines if "…" in line]
    tokens = _tokens(lines)
    intervals = [
        tuple(float(x) for x in match.groups())
        for token in tokens
        if (match := re.fullmatch(r"(\d+(?:\.\d+)?)-(\d+(?:\.\d+)?)", token))
    ]
    estimates = [float(t[1:]) for t in tokens if re.fullmatch(r"×\d+\.\d+", t)]
    _, table = _kind()
    rows = _matrix_rows(table)
    ratios = rows[(rows["scale"] == "ratio") & rows["ci_low"].map(math.isfinite)]
    assert len(ratios) > 50
    for row in ratios.itertuples():
        assert any(abs(e - row.estimate) <= 0.005 for e in estimates), row.verdict
        assert any(_close(lo, row.ci_low) and _close(hi, row.ci_high) for lo, hi in intervals), (
            row.verdict
        )
        needed = int(row.runs_needed)
        if not row.significant and not row.equivalent and 0 < needed < 1000:
            assert f"?{needed}" in tokens, row.verdict
    # Every metric the matrix shows is named whole somewhere: its row or the key.
    for metric in set(rows["metric"]):
        assert metric in tokens, metric


def _words(text: str) -> str:
    """``text``'s words, without the separators a line or a paragraph break replaces."""
    plain = text.replace(";", " ").replace(":", " ").replace("references", "reference")
    return " ".join(plain.split())


@pytest.mark.parametrize("width", [80, 100], ids=lambda w: f"{w} columns")
def test_the_verdicts_heading_is_lines_of_the_terminals_width(width: int) -> None:
    _, table = _kind()
    one_line = report.verdict_summary(table)
    lines = report.verdict_summary(table, width=width)
    contrast_lines = one_line[1:]
    heading = lines[: len(lines) - len(contrast_lines)]
    assert len(heading) >= 5
    assert max(len(line) for line in heading) <= width
    assert re.match(r"verdict: \d+ tested contrast\(s\) in \d+ question\(s\)", heading[0])
    assert heading[-1].endswith(":")
    # The same words as the one line, nothing lost; each group's reference on its own line.
    assert _words(" ".join(heading)) == _words(one_line[0])
    assert any(line.strip().startswith("flannel for baseline:") for line in heading)
    # The contrast lines stay one each: people grep them.
    assert lines[len(heading) :] == contrast_lines


def test_a_drift_too_strong_for_an_interval_is_said_once_per_line() -> None:
    _, table = _kind()
    drifting = [line for line in table["verdict"] if "drift too strong" in line]
    assert len(drifting) >= 10
    for line in drifting:
        assert line.count("drift too strong for an interval") == 1, line
        assert "AR(1) up to" in line  # with the why and what to do


def test_the_cli_lays_the_answer_out_in_the_terminals_width(monkeypatch) -> None:
    monkeypatch.setenv("COLUMNS", "80")
    assert cli_run.answer_width() == 80
    monkeypatch.setenv("COLUMNS", "250")  # a wide terminal: still at most 100
    assert cli_run.answer_width() == 100


# --------------------------------------------------------------------------------------------
# An undecided cell says what would decide it
# --------------------------------------------------------------------------------------------


def _egress_frame(on: list[float], off: list[float], *, backend: str = "lab") -> pd.DataFrame:
    """Interleaved egress runs of throughput (bits/s; a 0 makes it a difference)."""
    rows = []
    for state, values in (("off", off), ("on", on)):
        for k, value in enumerate(values):
            rows.append(
                {
                    "session_id": "s1",
                    "run_id": f"egress-vxlan-gateway-{state}-r{k}",
                    "time": f"2026-11-27T{k:02d}:{0 if state == 'off' else 30}:00Z",
                    "backend": backend,
                    "provider": backend,
                    "cni": "vxlan",
                    "scenario": "egress",
                    "condition": f"gateway-{state}",
                    "parameters": json.dumps({"gateway": state}),
                    "repetition": k,
                    "metric": "throughput",
                    "value": value,
                    "unit": "bits/s",
                    "verified": True,
                    "status": "ok",
                    "options": json.dumps({"encryption": ""}),
                }
            )
    return pd.DataFrame(rows)


def test_an_undecided_cell_without_a_margin_shows_what_this_design_detects() -> None:
    # A throughput that fell to 0 in some runs is a difference in bits/s, for which no
    # margin is set: no count of runs decides it. The cell once read "?" alone.
    on = [0.0, 4e9, 8e9, 1e9, 9e9]
    off = [9e9, 2e9, 9.1e9, 8.8e9, 3e9]
    table = report.verdict(_egress_frame(on, off))
    (row,) = table.itertuples()
    assert row.scale == "difference"
    assert not row.significant
    assert not row.equivalent
    assert math.isfinite(row.detectable)
    assert row.runs_needed <= 0
    matrix = feature_matrix(table)
    cell = matrix.loc[matrix["metric"] == "throughput", "cell"].item()
    mark = cell.split()[-1]
    assert mark != "?", cell
    assert mark.startswith("?±"), cell
    # The number is the effect this design detects, in the row's unit (G = 1e9).
    shown = float(mark.removeprefix("?±").removesuffix("G")) * 1e9
    assert shown == pytest.approx(row.detectable, rel=0.01)
    words = " ".join(" ".join(matrix_text(matrix, title="t")).split())
    assert "?±D undecided, and no margin is set in the row's unit" in words


# --------------------------------------------------------------------------------------------
# Labels say what ran
# --------------------------------------------------------------------------------------------


def test_the_labs_wireguard_reads_userspace_wireguard_go_in_the_matrix_and_lines() -> None:
    runs = load_results(LAB_WIREGUARD, sessions="all")
    environments = list((LAB_WIREGUARD).glob("*/environments/*.json"))
    recorded = {
        json.loads(p.read_text())["cni_values"].get("wireguard_implementation")
        for p in environments
    }
    assert "wireguard-go" in recorded  # what the lab ran, as its fingerprint says
    table = report.verdict(runs, environments=load_environments(LAB_WIREGUARD))
    assert all(
        line.startswith("WireGuard (userspace wireguard-go) on vxlan") for line in table["verdict"]
    )
    text = "\n".join(matrix_text(feature_matrix(table, runs=runs), title="t"))
    assert "\nWireGuard (userspace wireguard-go)\n" in text
    # A Kubernetes CNI's WireGuard is the kernel's: not said to be wireguard-go.
    kube = runs.assign(backend="kube", provider="kind")
    assert not any("wireguard-go" in line for line in report.verdict(kube)["verdict"])


def test_the_labs_wireguard_reads_userspace_wireguard_go_in_the_html_report(tmp_path) -> None:
    paths = report.write_report(LAB_WIREGUARD, html=tmp_path / "r.html")
    html = paths.html.read_text()
    assert "Scenario: wireguard: WireGuard (userspace wireguard-go)" in html
    alts = re.findall(r'alt="([^"]*)"', html)
    scenario_figures = [a for a in alts if "rr_mean" in a or "request times" in a]
    assert scenario_figures
    assert all(a.startswith("WireGuard (userspace wireguard-go): ") for a in scenario_figures)


def test_kinds_per_node_cpu_says_it_is_a_share_of_one_host() -> None:
    runs, table = _kind()
    scope = cpu_scope(runs)
    text = " ".join(
        " ".join(matrix_text(feature_matrix(table, runs=runs), title="t", cpu_scope=scope)).split()
    )
    assert "the one host that every kind node shares" in text
    assert cpu_scope(_egress_frame([1e9] * 3, [1e9] * 3)) == ""  # the lab: not kind
