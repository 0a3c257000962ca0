"""The verdict from a REAL lab session: ``cnibench run`` prints it, the report opens with the
feature matrix and then the verdict.

A module fixture runs ``cnibench run --cluster lab --cni vxlan --scenario egress --profile smoke
--report ...`` (egress gateway on/off on one datapath, 2 runs each; under a minute, needs
root), then ``cnibench report`` for the Markdown. Every ratio and interval is recomputed here
from :func:`cnibench.load_results` with scipy (``gmean``, Welch's t-test on the logarithms),
never with the code under test.
"""

from __future__ import annotations

import itertools
import math
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from scipy import stats as sps

import cnibench
from cnibench import report
from cnibench.scenarios.egress import EgressScenario

pytestmark = [pytest.mark.lab, pytest.mark.slow, pytest.mark.measured]

RUN_TIMEOUT_S = 900
_LINE = re.compile(
    r"^egress gateway on vxlan: (?P<metric>[\w@-]+)(?P<host> \(host-wide\))?"
    r" (?P<call>undecided |same within ±5 % )?"
    r"×(?P<ratio>\d+(?:\.\d+)?) \((?:(?P<level>\d+(?:\.\d+)?) % CI"
    r" (?P<low>\d+(?:\.\d+)?)-(?P<high>\d+(?:\.\d+)?)"
    r"|(?P<identical>the same difference in every round, no interval)),"
    r" n = (?P<n>\d+) rounds, paired\)"
    r"(?P<power>: this design detects [^;]+; ±5 % needs (?:about|more than) \d+ rounds per side)?$"
)

_SATURATED_LINE = re.compile(
    r"^egress gateway on vxlan: (?P<metric>[\w@-]+)(?: \(host-wide\))?"
    r" not decided: (?P<runs>\d+) run\(s\) saturated the host \(< 5 % CPU idle\)"
    r" \(×(?P<ratio>\d+(?:\.\d+)?), n = (?P<n>\d+) rounds, paired\)$"
)
"""A line whose contrast has a run that left less than 5 % of the host's CPU idle (issue 48:
this 2-CPU machine under other work): its estimate and runs, no interval, no call."""


def _cnibench() -> list[str]:
    cli = shutil.which("cnibench")
    return [cli] if cli else [sys.executable, "-m", "cnibench.cli"]


@pytest.fixture(scope="module")
def lab_session(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path | str]:
    if os.geteuid() != 0:
        pytest.skip("the lab backend needs root")
    root = tmp_path_factory.mktemp("verdict-lab")
    results, html, markdown = root / "results", root / "report.html", root / "report.md"
    run = subprocess.run(
        [
            *_cnibench(),
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
            str(results),
            "--report",
            str(html),
        ],
        capture_output=True,
        text=True,
        timeout=RUN_TIMEOUT_S,
        check=False,
    )
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    rendered = subprocess.run(
        [*_cnibench(), "report", str(results), "--markdown", str(markdown), "--html", str(html)],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert rendered.returncode == 0, rendered.stderr
    return {"results": results, "html": html, "markdown": markdown, "stdout": run.stdout}


def _visible_html(path: Path) -> str:
    return re.sub(r"data:image/png;base64,[A-Za-z0-9+/=]+", "", path.read_text())


def _runs(df: pd.DataFrame, condition: str, metric: str) -> np.ndarray:
    rows = df[
        (df.status == "ok")
        & df.verified.astype(bool)
        & (df.scenario == "egress")
        & (df.condition == condition)
        & (df.metric == metric)
        & np.isfinite(df.value)
    ]
    return rows["value"].to_numpy(dtype=float)


def _logs_by_round(df: pd.DataFrame, condition: str, metric: str) -> np.ndarray:
    rows = df[
        (df.status == "ok")
        & df.verified.astype(bool)
        & (df.scenario == "egress")
        & (df.condition == condition)
        & (df.metric == metric)
        & np.isfinite(df.value)
    ].sort_values("repetition")
    return np.log(rows["value"].to_numpy(dtype=float))


def _expected(df: pd.DataFrame, metrics: list[str]) -> dict[str, tuple[float, float, float, int]]:
    """Per metric: the ratio of geometric means and the paired t interval of the within-round
    log ratios at the level that carries the call, Holm over the metrics (one question: the
    gateway on vxlan), by scipy and by hand alone."""
    tests = {}
    for metric in metrics:
        on, off = (
            _logs_by_round(df, "gateway-on", metric),
            _logs_by_round(df, "gateway-off", metric),
        )
        # smoke = 2 runs per condition in 2 rounds, every one of them counted.
        assert on.size == off.size == 2
        tests[metric] = (on, off, sps.ttest_rel(on, off))
    p = {m: t[2].pvalue for m, t in tests.items() if math.isfinite(t[2].pvalue)}
    order = sorted(p, key=p.__getitem__)
    adjusted, running = {}, 0.0
    for rank, metric in enumerate(order):
        running = max(running, min(1.0, (len(order) - rank) * p[metric]))
        adjusted[metric] = running
    out = {}
    for metric, (on, off, test) in tests.items():
        ratio = math.exp(float(np.mean(on - off)))
        if metric not in p:
            out[metric] = (ratio, math.nan, math.nan, on.size)
            continue
        level = 1.0 - 0.05 * p[metric] / adjusted[metric] if adjusted[metric] > 0 else 0.95
        ci = test.confidence_interval(level)
        out[metric] = (ratio, math.exp(ci.low), math.exp(ci.high), on.size)
    return out


def _verdict_lines(markdown: str) -> list[str]:
    section = markdown.split("## Verdict", 1)[1].split("\n## ", 1)[0]
    return [line[2:] for line in section.splitlines() if line.startswith("- ")]


def test_report_opens_with_the_matrix_then_the_verdict(lab_session):
    html = _visible_html(lab_session["html"])
    first = ["What each feature costs", "Verdict"]
    assert re.findall(r"<h2[^>]*>([^<]+)</h2>", html)[:2] == first
    markdown = lab_session["markdown"].read_text()
    assert re.findall(r"^## (.+)$", markdown, flags=re.MULTILINE)[:2] == first
    # The forest plot is in the verdict section, before the first scenario section.
    verdict_html = html.split('id="verdict"', 1)[1].split("<h2", 1)[0]
    # One forest per scenario, captioned with its scenario (here only egress ran).
    assert "Verdict, egress: ratio and CI per contrast, at the level that carries its call" in (
        verdict_html
    )


def test_run_printed_into_a_file_opens_with_the_answer(lab_session):
    """Captured (not a terminal), ``cnibench run``'s first lines are the feature matrix, then
    the verdict; the per-condition table, the detail, comes after both."""
    stdout = lab_session["stdout"]
    first = next(line for line in stdout.splitlines() if line.strip())
    assert first.startswith("What each feature costs"), stdout[:2000]
    table = stdout.index("95 % confidence interval per condition")
    assert stdout.index("What each feature costs") < stdout.index("\nverdict: ") < table


def test_the_answer_says_when_and_on_what_machine_it_was_measured(lab_session):
    """The line under the matrix's title: the first and last run's UTC date and time, and this
    machine (its logical CPUs and kernel, read here from the OS), with the backend."""
    lines = [line for line in lab_session["stdout"].splitlines() if line.strip()]
    # The line wraps within the terminal's width: its continuation lines are indented further.
    more = itertools.takewhile(lambda line: line.startswith("    "), lines[2:])
    where = " ".join(line.strip() for line in (lines[1], *more))
    df = cnibench.load_results(lab_session["results"])
    first = pd.to_datetime(df["time"], utc=True).min()
    last = pd.to_datetime(df["time"], utc=True).max()
    assert where.startswith(f"measured {first:%Y-%m-%d %H:%M}-{last:%H:%M} UTC on "), where
    assert f"{os.cpu_count()} CPUs " in where, where
    assert f"kernel {os.uname().release} (lab)" in where, where


def test_number_of_contrasts_is_what_egress_declares(lab_session):
    df = cnibench.load_results(lab_session["results"])
    declared = [
        m
        for m in EgressScenario.primary_metrics
        if _runs(df, "gateway-on", m).size and _runs(df, "gateway-off", m).size
    ]
    assert {"throughput", "cpu", "ram"} <= set(declared)
    # A host-wide figure is stated only where the records hold no per-machine figure of the
    # same resource (the lab records each machine's RAM, so the host's is left out).
    recorded = set(df["metric"])
    stated = [
        m
        for m in declared
        if m not in ("cpu", "ram") or not any(r.startswith(f"{m}@") for r in recorded)
    ]
    assert "ram" not in stated
    # One CNI: no CNI contrast; one feature pair (gateway on vs off) per stated metric.
    lines = _verdict_lines(lab_session["markdown"].read_text())
    assert len(lines) == len(stated)
    assert len(report.verdict(df)) == len(stated)


def _identical_within_sides(df: pd.DataFrame, metric: str) -> bool:
    """Every round's runs differ alike (a loaded machine's host-wide CPU can: saturated on
    both sides): no interval exists, and the line must say so instead of stating one."""
    on, off = _logs_by_round(df, "gateway-on", metric), _logs_by_round(df, "gateway-off", metric)
    return bool(np.ptp(on - off) == 0)


def test_every_ratio_and_interval_matches_scipy_on_the_raw_records(lab_session):
    df = cnibench.load_results(lab_session["results"])
    table = report.verdict(df)
    expected = _expected(df, table["metric"].tolist())
    for row in table.itertuples():
        ratio, low, high, n = expected[row.metric]
        assert row.ratio == pytest.approx(ratio, rel=1e-9), row.metric
        assert (row.n_treatment, row.n_control) == (n, n)
        if row.saturated or _identical_within_sides(df, row.metric):
            assert math.isnan(row.ci_low), row.metric
            assert math.isnan(row.ci_high), row.metric
            continue
        assert row.ci_low == pytest.approx(low, rel=1e-9), row.metric
        assert row.ci_high == pytest.approx(high, rel=1e-9), row.metric


def test_rendered_lines_state_the_same_numbers(lab_session):
    df = cnibench.load_results(lab_session["results"])
    lines = _verdict_lines(lab_session["markdown"].read_text())
    assert lines
    saturated = {str(r.metric): int(r.saturated) for r in report.verdict(df).itertuples()}
    for line in lines:
        aside = _SATURATED_LINE.match(line)
        if aside is None:
            continue
        ratio, _, _, n = _expected(df, [aside["metric"]])[aside["metric"]]
        assert int(aside["runs"]) == saturated[aside["metric"]] > 0, line
        assert float(aside["ratio"]) == pytest.approx(ratio, rel=0.005, abs=0.01), line
        assert int(aside["n"]) == n
    lines = [line for line in lines if _SATURATED_LINE.match(line) is None]
    matches = [_LINE.match(line) for line in lines]
    assert all(matches), [line for line, m in zip(lines, matches, strict=True) if m is None]
    expected = _expected(df, [m["metric"] for m in matches if m is not None])
    for line, match in zip(lines, matches, strict=True):
        assert match is not None
        ratio, low, high, n = expected[match["metric"]]
        assert bool(match["identical"]) == _identical_within_sides(df, match["metric"]), line
        if match["identical"]:
            assert float(match["ratio"]) == pytest.approx(ratio, rel=0.005, abs=0.01), line
            assert int(match["n"]) == n
            continue
        assert float(match["ratio"]) == pytest.approx(ratio, rel=0.005, abs=0.01), line
        # Bounds are rounded outwards (never narrower than the interval), by less than one
        # unit of their last printed digit, and a ratio's bound stays positive.
        for text, value in ((match["low"], low), (match["high"], high)):
            unit = 10.0 ** -len(text.partition(".")[2])
            assert abs(float(text) - value) < unit, line
            assert float(text) > 0, line
        assert float(match["low"]) <= low, line
        assert high <= float(match["high"]), line
        assert int(match["n"]) == n
        # The interval carries the call: a cost excludes 1, "same within ±5 %" lies inside
        # 0.95-1.05, and an undecided line's includes 1 and reaches past ±5 %.
        if match["call"] == "undecided ":
            assert low <= 1.0 <= high, line
            assert low < 0.95 or high > 1.05, line
        elif match["call"]:
            assert 0.95 <= low <= 1.0 <= high <= 1.05, line
        else:
            assert not (low <= 1.0 <= high), line


def test_html_has_no_inf_nan_or_negative_bound(lab_session):
    html = _visible_html(lab_session["html"])
    assert not re.search(r"\b(inf|-inf|nan|NaN|Infinity)\b", html)
    verdict_html = html.split('id="verdict"', 1)[1].split("<h2", 1)[0]
    bounds = re.findall(r"CI (-?[\d.]+)-(-?[\d.]+)", verdict_html)
    # Every contrast with a saturated run states no interval (issue 48).
    table = report.verdict(cnibench.load_results(lab_session["results"]))
    assert bool(bounds) == bool((table["saturated"] == 0).any())
    assert all(float(low) > 0 and float(high) > 0 for low, high in bounds)


def test_cnibench_run_prints_the_same_verdict_lines(lab_session):
    stdout = lab_session["stdout"].splitlines()
    heading = next(i for i, line in enumerate(stdout) if line.startswith("verdict: "))
    # The heading's own lines are indented by four, the verdict's lines by two.
    after = list(itertools.dropwhile(lambda line: line.startswith("    "), stdout[heading + 1 :]))
    end = next((i for i, line in enumerate(after) if not line.startswith("  ")), len(after))
    printed = [line.strip() for line in after[:end]]
    assert printed == _verdict_lines(lab_session["markdown"].read_text())
