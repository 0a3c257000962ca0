"""The verdict from a REAL lab session: ``cnibench run`` prints it, the report opens with the
feature matrix and then the verdict.

A module fixture runs ``cnibench run --cluster lab --cni vxlan --scenario egress --profile smoke
--report ...`` (egress gateway on/off on one datapath, 2 runs each; under a minute, needs
root), then ``cnibench report`` for the Markdown. Every ratio and interval is recomputed here
from :func:`cnibench.load_results` with scipy (``gmean``, Welch's t-test on the logarithms),
never with the code under test.
"""

from __future__ import annotations

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
    r"^egress gateway on vxlan: (?P<metric>\w+)(?P<host> \(host-wide\))?"
    r" (?P<inconclusive>inconclusive )?"
    r"×(?P<ratio>\d+(?:\.\d+)?) \((?:95 % CI (?P<low>\d+(?:\.\d+)?)-(?P<high>\d+(?:\.\d+)?)"
    r"|(?P<identical>identical runs on each side, no interval)),"
    r" n = (?P<n_t>\d+) vs (?P<n_c>\d+)\)(?P<holm>, but no detectable difference after Holm's"
    r" correction \(adjusted p = [\d.e-]+\))?"
    r"(?P<power>: this n detects about ±\d+ %; ±5 % needs about \d+ runs per side)?$"
)


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


def _expected(df: pd.DataFrame, metric: str) -> tuple[float, float, float, int, int]:
    """Ratio of geometric means and the Welch interval on logs, by scipy alone."""
    on, off = _runs(df, "gateway-on", metric), _runs(df, "gateway-off", metric)
    # smoke = 2 runs per condition, every one of them counted.
    assert on.size == off.size == 2
    ratio = sps.gmean(on) / sps.gmean(off)
    ci = sps.ttest_ind(np.log(on), np.log(off), equal_var=False).confidence_interval(0.95)
    return ratio, math.exp(ci.low), math.exp(ci.high), on.size, off.size


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
    assert "Verdict, egress: ratio and 95% CI per contrast" in verdict_html


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
    where = lines[1].strip()
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
    """Each side's runs gave one value (a loaded machine's host-wide CPU can: saturated):
    no interval exists, and the line must say so instead of stating one."""
    on, off = _runs(df, "gateway-on", metric), _runs(df, "gateway-off", metric)
    return bool(np.ptp(on) == 0 and np.ptp(off) == 0)


def test_every_ratio_and_interval_matches_scipy_on_the_raw_records(lab_session):
    df = cnibench.load_results(lab_session["results"])
    table = report.verdict(df)
    for row in table.itertuples():
        ratio, low, high, n_t, n_c = _expected(df, row.metric)
        assert row.ratio == pytest.approx(ratio, rel=1e-9), row.metric
        assert (row.n_treatment, row.n_control) == (n_t, n_c)
        if _identical_within_sides(df, row.metric):
            assert math.isnan(row.ci_low), row.metric
            assert math.isnan(row.ci_high), row.metric
            continue
        assert row.ci_low == pytest.approx(low, rel=1e-9), row.metric
        assert row.ci_high == pytest.approx(high, rel=1e-9), row.metric


def test_rendered_lines_state_the_same_numbers(lab_session):
    df = cnibench.load_results(lab_session["results"])
    lines = _verdict_lines(lab_session["markdown"].read_text())
    assert lines
    for line in lines:
        match = _LINE.match(line)
        assert match is not None, line
        ratio, low, high, n_t, n_c = _expected(df, match["metric"])
        assert bool(match["identical"]) == _identical_within_sides(df, match["metric"]), line
        if match["identical"]:
            assert float(match["ratio"]) == pytest.approx(ratio, rel=0.005, abs=0.01), line
            assert (int(match["n_t"]), int(match["n_c"])) == (n_t, n_c)
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
        assert (int(match["n_t"]), int(match["n_c"])) == (n_t, n_c)
        if match["inconclusive"]:
            assert low <= 1.0 <= high, line
        else:
            assert not (low <= 1.0 <= high), line


def test_html_has_no_inf_nan_or_negative_bound(lab_session):
    html = _visible_html(lab_session["html"])
    assert not re.search(r"\b(inf|-inf|nan|NaN|Infinity)\b", html)
    verdict_html = html.split('id="verdict"', 1)[1].split("<h2", 1)[0]
    bounds = re.findall(r"CI (-?[\d.]+)-(-?[\d.]+)", verdict_html)
    assert bounds
    assert all(float(low) > 0 and float(high) > 0 for low, high in bounds)


def test_cnibench_run_prints_the_same_verdict_lines(lab_session):
    stdout = lab_session["stdout"].splitlines()
    heading = next(i for i, line in enumerate(stdout) if line.startswith("verdict: "))
    after = stdout[heading + 1 :]
    end = next((i for i, line in enumerate(after) if not line.startswith("  ")), len(after))
    printed = [line.strip() for line in after[:end]]
    assert printed == _verdict_lines(lab_session["markdown"].read_text())
