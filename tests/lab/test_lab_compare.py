"""``cnibench compare`` and the plugin's ``--cnibench-fail-on-regression`` on real lab result
sets.

Three real sessions, all on the ``smoke`` profile and the ``routed`` datapath, the two compared
ones with 4 runs: the gate calls a regression only when it is significant at 1 % after Holm's
correction over the compared metrics (issue 23), which 2 runs per side (1-2 degrees of
freedom) cannot show even for a five-fold slowdown whose runs vary:

* baseline: ``cnibench run`` of ``baseline/same-node-idle-iperf3``;
* candidate: the same condition through the benchmark suite (``pytest tests/bench ...
  --cnibench-compare-to BASELINE --cnibench-fail-on-regression 5%``), made slower for real: the
  whole run, and so every iperf3, namespace and Prometheus process it starts, is confined to a
  CPU cgroup with a quota of a fifth of one CPU. No scenario parameter caps the rate without
  also changing the condition (the policy scenario's rule count is part of its condition id, so
  it would not match, which is right), so the slowdown comes from outside cnibench, where a
  regression of a real datapath would come from too;
* another condition (``same-node-idle-sockperf``, one run), which matches nothing.

Each side is one session, which cannot bound the gate's false alarms: without a session SD
(``--session-sd``; the plugin's ``--cnibench-session-sd``) the gate answers undecided (exit 3);
with one it decides.
"""

from __future__ import annotations

import math
import os
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import pytest
import scipy.stats
from lab_support import unavailable

from cnibench import load_results
from suite_support import run_cnibench

# A five-fold slowdown must be significant at 1 %: judged on the runs' variance, which the
# kind tier's load beside it would inflate (CI runs these alone).
pytestmark = pytest.mark.measured

ROOT = Path(__file__).resolve().parents[2]
CONDITION = "same-node-idle-iperf3"
LABEL = f"baseline/routed/{CONDITION}"
CPU_QUOTA = 0.2
"""Share of one CPU the slowed-down candidate gets."""
_CGROUP_V1_CPU = Path("/sys/fs/cgroup/cpu")
_CGROUP_V2 = Path("/sys/fs/cgroup")


RUNS = "4"
"""Runs per side of the compared sessions."""
SESSION_SD = "5%"
"""The session-to-session SD the gate is given (one session a side does not estimate it)."""


def _run(results: Path, condition: str, *extra: str) -> None:
    done = run_cnibench(
        "run",
        "--cluster",
        "lab",
        "--cni",
        "routed",
        "--scenario",
        "baseline",
        "--condition",
        condition,
        "--profile",
        "smoke",
        "--results-dir",
        results,
        *extra,
    )
    assert done.returncode == 0, done.stdout + done.stderr


@contextmanager
def _cpu_capped_cgroup(name: str, share: float) -> Iterator[Path]:
    """A CPU cgroup limited to ``share`` of one CPU; yields its ``cgroup.procs`` file."""
    period = 100_000
    if (_CGROUP_V1_CPU / "cpu.cfs_quota_us").is_file():
        group = _CGROUP_V1_CPU / name
        settings = {"cpu.cfs_period_us": str(period), "cpu.cfs_quota_us": str(int(share * period))}
    elif "cpu" in (_CGROUP_V2 / "cgroup.controllers").read_text(errors="replace").split():
        group = _CGROUP_V2 / name
        (_CGROUP_V2 / "cgroup.subtree_control").write_text("+cpu")
        settings = {"cpu.max": f"{int(share * period)} {period}"}
    else:
        unavailable("no cgroup CPU controller to slow a candidate run down with")
    try:
        group.mkdir()
        for file, value in settings.items():
            (group / file).write_text(value)
    except OSError as exc:
        unavailable(f"cannot make a CPU-limited cgroup at {group}: {exc}")
    try:
        yield group / "cgroup.procs"
    finally:
        # Every process of the run has exited (cnibench stops what it started); the kernel
        # may need a moment to let go of the group.
        for _ in range(50):
            try:
                group.rmdir()
                break
            except OSError:
                time.sleep(0.1)


@pytest.fixture(scope="module")
def sets(tmp_path_factory: pytest.TempPathFactory, lab_backend: object) -> dict[str, object]:
    """The three real result sets, and the slowed-down pytest session's outcome."""
    root = tmp_path_factory.mktemp("compare")
    base, slow, other = root / "base", root / "slow", root / "other"
    _run(base, CONDITION, "--runs", RUNS)
    with _cpu_capped_cgroup(f"cnibench-compare-test-{os.getpid()}", CPU_QUOTA) as procs:
        suite = subprocess.run(
            [
                "sh",
                "-c",
                'echo $$ > "$0" && exec "$@"',
                str(procs),
                sys.executable,
                "-m",
                "pytest",
                "-p",
                "no:cacheprovider",
                f"tests/bench/test_baseline.py::test_baseline[routed-{CONDITION}]",
                "--cluster=lab",
                "--cni=routed",
                "--cnibench-profile=smoke",
                f"--cnibench-runs={RUNS}",
                f"--cnibench-results-dir={slow}",
                f"--cnibench-compare-to={base}",
                "--cnibench-fail-on-regression=5%",
                f"--cnibench-session-sd={SESSION_SD}",
            ],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=600,
            check=False,
        )
    _run(other, "same-node-idle-sockperf", "--runs", "1")
    empty = root / "empty"
    empty.mkdir()
    return {"base": base, "slow": slow, "other": other, "empty": empty, "suite": suite}


def _log_interval(baseline: np.ndarray, candidate: np.ndarray) -> tuple[float, float, float]:
    """Ratio of geometric means and the 95 % Welch interval of the log difference (scipy)."""
    ci = scipy.stats.ttest_ind(
        np.log(candidate), np.log(baseline), equal_var=False
    ).confidence_interval(0.95)
    ratio = scipy.stats.gmean(candidate) / scipy.stats.gmean(baseline)
    return ratio, math.exp(ci.low), math.exp(ci.high)


def _throughput(results: object) -> np.ndarray:
    frame = load_results(str(results))
    rows = frame[
        (frame.metric == "throughput") & (frame.status == "ok") & frame.verified.astype(bool)
    ]
    return rows.value.to_numpy(dtype=float)


def test_same_directory_against_itself_is_undecided_without_a_session_sd(sets):
    done = run_cnibench("compare", sets["base"], sets["base"])
    assert done.returncode == 3, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].startswith("UNDECIDED: ")
    assert "false-alarm rate not bounded: one session a side" in lines[0]
    assert "no regression" not in done.stdout.lower()
    undecided = [line for line in done.stderr.splitlines() if line.startswith("cnibench: ")]
    assert undecided, done.stderr
    assert all(line.startswith("cnibench: UNDECIDED ") for line in undecided), done.stderr
    throughput = [line for line in lines[2:] if re.search(r"\bthroughput\b", line)]
    assert len(throughput) == 1
    assert throughput[0].startswith("no detectable change")
    assert LABEL in throughput[0]


def test_same_directory_against_itself_never_regresses_with_a_session_sd(sets):
    """Within threshold (exit 0) where the lab's runs are steady enough, else undecided (3):
    never a regression, and never "no regression" while a comparison is undecided."""
    done = run_cnibench("compare", sets["base"], sets["base"], "--session-sd", SESSION_SD)
    assert done.returncode in (0, 3), done.stdout + done.stderr
    headline = done.stdout.splitlines()[0]
    assert headline.startswith("WITHIN THRESHOLD" if done.returncode == 0 else "UNDECIDED")
    assert f"session SD {SESSION_SD} as given by --session-sd" in headline


def test_slower_candidate_exits_1_naming_metric_and_condition(sets, tmp_path):
    # Without a session SD the runs alone show the regression, but cannot decide it.
    alone = run_cnibench("compare", sets["base"], sets["slow"])
    assert alone.returncode == 3, alone.stdout + alone.stderr
    (undecided,) = [line for line in alone.stderr.splitlines() if "UNDECIDED throughput" in line]
    assert "regressed at the runs' noise alone" in undecided
    # Its ratio and interval are scipy's Welch interval on the logs of the real runs.
    baseline, candidate = _throughput(sets["base"]), _throughput(sets["slow"])
    assert candidate.mean() < 0.5 * baseline.mean(), (baseline, candidate)
    ratio, low, high = _log_interval(baseline, candidate)
    shown = re.search(
        r"ratio ([0-9.]+) \(95% CI ([0-9.]+)-([0-9.]+), n = (\d) vs (\d)\)", undecided
    )
    assert shown is not None, undecided
    assert [float(x) for x in shown.groups()[:3]] == pytest.approx([ratio, low, high], abs=6e-4)
    assert (int(shown.group(4)), int(shown.group(5))) == (baseline.size, candidate.size)
    assert high < 0.95

    markdown = tmp_path / "comment.md"
    done = run_cnibench(
        "compare", sets["base"], sets["slow"], "--session-sd", SESSION_SD, "--markdown", markdown
    )
    assert done.returncode == 1, done.stdout + done.stderr
    lines = [line for line in done.stderr.splitlines() if "REGRESSION throughput" in line]
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith(f"cnibench: REGRESSION throughput of {LABEL}: ratio ")
    assert done.stdout.startswith("REGRESSED: ")
    assert re.match(r"REGRESSED: \d+ regressions? beyond 5%", done.stdout)
    # Compare the Markdown table's cells themselves, whatever their padding.
    rows = [
        [cell.strip() for cell in line.strip().strip("|").split("|")]
        for line in markdown.read_text().splitlines()
        if line.startswith("|")
    ]
    assert ["**REGRESSION**", "throughput", LABEL] in [row[:3] for row in rows], rows


def test_pytest_gate_fails_the_slowed_session(sets):
    suite = sets["suite"]
    output = suite.stdout + suite.stderr
    assert re.search(r"\b1 passed\b", output), output
    assert suite.returncode == 1, output
    assert f"cnibench: REGRESSION throughput of {LABEL}: ratio " in output


def test_mismatched_result_sets_exit_2_with_one_line(sets):
    done = run_cnibench("compare", sets["base"], sets["other"])
    assert done.returncode == 2, done.stdout + done.stderr
    (line,) = done.stderr.splitlines()
    assert line.startswith("cnibench: error: no condition is in both result sets")
    assert "baseline/routed/same-node-idle-sockperf" in line


def test_empty_result_set_exits_2_with_one_line(sets):
    done = run_cnibench("compare", sets["empty"], sets["base"])
    assert done.returncode == 2, done.stdout + done.stderr
    (line,) = done.stderr.splitlines()
    assert line == f"cnibench: error: baseline results in {sets['empty']} hold no run records"
