"""Runs taken beside busy loops are named saturated, and the verdict claims nothing from them.

Issue 48: the lab egress demo run beside two busy loops gave a report that never said the
machine was busy. Here a REAL lab session (``cnibench run --cluster lab --cni vxlan --scenario
egress --profile smoke``, under a minute, needs root) runs while busy loops hold every CPU of
this machine (one per CPU, each a Python ``while`` loop bounded in time and killed by PID
however the test ends). Every run must record the host's idle CPU share below 5 %, the report
must say the runs saturated the host, mark them in the run tables and the matrix, and no
verdict line may claim a cost or "same within" from them.
"""

from __future__ import annotations

import itertools
import os
import subprocess
import sys
from pathlib import Path

import pytest
from lab_support import unavailable

from cnibench import load_results, report
from cnibench.report.data import SATURATION_IDLE_BOUND, saturated_runs
from cnibench.report.matrix import SATURATED
from suite_support import run_cnibench

pytestmark = [pytest.mark.slow, pytest.mark.measured]

RUN_TIMEOUT_S = 900
LOOP_SECONDS = RUN_TIMEOUT_S + 60
"""The busy loops end by themselves after this long, should the test's own kill not happen."""
BUSY_LOOP = (
    "import time\n"
    f"end = time.monotonic() + {LOOP_SECONDS}\n"
    "while time.monotonic() < end:\n"
    "    pass\n"
)


@pytest.fixture(scope="module")
def busy_session(tmp_path_factory: pytest.TempPathFactory) -> dict[str, object]:
    """A lab egress session run while one busy loop per CPU holds the machine."""
    if os.geteuid() != 0:
        unavailable("the lab backend needs root")
    root = tmp_path_factory.mktemp("saturated-lab")
    results, html, markdown = root / "results", root / "report.html", root / "report.md"
    loops = [
        subprocess.Popen([sys.executable, "-c", BUSY_LOOP]) for _ in range(os.cpu_count() or 2)
    ]
    try:
        run = run_cnibench(
            "run",
            "--cluster",
            "lab",
            "--cni",
            "vxlan",
            "--scenario",
            "egress",
            "--profile",
            "smoke",
            "--results-dir",
            results,
            "--report",
            html,
            timeout=RUN_TIMEOUT_S,
        )
    finally:
        for loop in loops:
            loop.kill()
        for loop in loops:
            loop.wait(timeout=30)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    rendered = run_cnibench("report", results, "--markdown", markdown, "--html", html)
    assert rendered.returncode == 0, rendered.stderr
    return {"results": results, "markdown": markdown.read_text(), "stdout": run.stdout}


def _idle_shares(results: object) -> list[float]:
    df = load_results(Path(str(results)))
    rows = df[(df["status"] == "ok") & (df["metric"] == "host_idle")]
    return sorted(float(v) for v in rows["value"])


def test_every_run_records_the_host_idle_share_below_the_bound(busy_session):
    df = load_results(Path(str(busy_session["results"])))
    ok = df[df["status"] == "ok"]
    shares = _idle_shares(busy_session["results"])
    print(f"host idle shares of the runs beside the busy loops: {shares}")
    assert len(shares) == ok["run_id"].nunique() >= 4
    assert all(0.0 <= share < SATURATION_IDLE_BOUND for share in shares), shares
    saturated = saturated_runs(df)
    assert len(saturated) == len(shares)


def test_the_report_says_the_runs_saturated_the_host(busy_session):
    markdown = str(busy_session["markdown"])
    verdict_section = markdown.split("## Verdict", 1)[1].split("\n## ", 1)[0]
    n = len(_idle_shares(busy_session["results"]))
    assert f"{n} of {n} runs saturated the host (less than 5 % of its CPU idle" in (verdict_section)
    # The run tables mark each run, the matrix its cells with the legend entry.
    assert markdown.count("⊘ saturated, ") >= n
    matrix_section = markdown.split("## What each feature costs", 1)[1].split("\n## ", 1)[0]
    assert f" {SATURATED}" in matrix_section
    assert f"{SATURATED} a run on a side left less than 5 % of the host's CPU idle" in (
        matrix_section
    )


def test_no_verdict_line_claims_anything_from_saturated_runs(busy_session):
    df = load_results(Path(str(busy_session["results"])))
    table = report.verdict(df)
    assert not table.empty
    assert (table["saturated"] > 0).all()
    assert not table["significant"].any()
    assert not table["equivalent"].any()
    markdown = str(busy_session["markdown"])
    section = markdown.split("## Verdict", 1)[1].split("\n## ", 1)[0]
    lines = [line[2:] for line in section.splitlines() if line.startswith("- ")]
    assert len(lines) == len(table)
    for line in lines:
        assert "not decided: " in line, line
        assert "run(s) saturated the host (< 5 % CPU idle)" in line, line
        assert " CI " not in line, line
        assert "same within" not in line, line
    # ``cnibench run`` says it too, at the end of its verdict.
    stdout = str(busy_session["stdout"]).splitlines()
    first = next(i for i, line in enumerate(stdout) if line.startswith("verdict: "))
    # The heading wraps: its further lines are indented by four.
    more = itertools.takewhile(lambda line: line.startswith("    "), stdout[first + 1 :])
    heading = " ".join(line.strip() for line in (stdout[first], *more))
    assert f"{len(table)} not decided: a run on a side saturated the host" in heading
