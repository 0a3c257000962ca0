"""Report figures and the HTML report from a REAL lab run, rendered by headless Chromium.

A session fixture runs ``cnibench run --cluster lab --scenario egress --scenario wireguard
--profile smoke --cni vxlan`` (about 1.5 minutes, needs root) once; every test reads its results.
The Chromium test installs nothing itself: it needs the Debian package ``chromium`` and skips
without it (a failure when ``CNIBENCH_REQUIRE=lab``, see tests/conftest.py).
"""

from __future__ import annotations

import base64
import io
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from matplotlib.collections import LineCollection
from matplotlib.patches import Rectangle
from scipy import stats as sps

from cnibench import report
from cnibench.results import load_results
from cnibench.tools.http_timing import parse_http_timing

pytestmark = [pytest.mark.lab, pytest.mark.slow]

RUN_TIMEOUT_S = 900
CHROMIUM_TIMEOUT_S = 120


@pytest.fixture(scope="session")
def lab_results(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Results of one real smoke lab run of egress and wireguard on the vxlan CNI."""
    if os.geteuid() != 0:
        pytest.skip("the lab backend needs root")
    cli = shutil.which("cnibench")
    command = [cli] if cli else [sys.executable, "-m", "cnibench.cli"]
    results = tmp_path_factory.mktemp("report-lab") / "results"
    completed = subprocess.run(
        [
            *command,
            "run",
            "--cluster",
            "lab",
            "--scenario",
            "egress",
            "--scenario",
            "wireguard",
            "--profile",
            "smoke",
            "--cni",
            "vxlan",
            "--results-dir",
            str(results),
        ],
        capture_output=True,
        text=True,
        timeout=RUN_TIMEOUT_S,
        check=False,
    )
    assert completed.returncode == 0, completed.stdout[-3000:] + completed.stderr[-3000:]
    (results.parent / "stdout.txt").write_text(completed.stdout)
    return results


@pytest.fixture(scope="session")
def lab_frame(lab_results: Path):
    return load_results(lab_results)


def test_lab_run_table_explains_its_wide_two_run_intervals(lab_results):
    stdout = (lab_results.parent / "stdout.txt").read_text()
    # t(0.975, 1 degree of freedom) = 12.706: the multiplier behind every n = 2 interval.
    assert "note: with n = 2 runs an interval is the mean ± 12.7 standard errors" in stdout


def test_lab_bar_heights_and_error_bars_match_the_statistics(lab_frame):
    figure = report.figure_bars(lab_frame, "egress", "throughput")
    ax = figure.axes[0]
    rows = lab_frame[
        (lab_frame["scenario"] == "egress")
        & (lab_frame["metric"] == "throughput")
        & (lab_frame["status"] == "ok")
    ]
    expected_heights, expected_spans = [], []
    for _, group in rows.groupby(["cni", "condition"], sort=False):
        values = group.sort_values("time")["value"].to_numpy()
        # Every run counts: the geometric mean and the t interval of the logs, by scipy.
        expected_heights.append(sps.gmean(values))
        logs = np.log(values)
        low, high = sps.t.interval(0.95, logs.size - 1, loc=logs.mean(), scale=sps.sem(logs))
        expected_spans += [np.exp(low), np.exp(high)]
    heights = [p.get_height() for p in ax.patches if isinstance(p, Rectangle)]
    assert sorted(heights) == pytest.approx(sorted(expected_heights), rel=1e-12)
    segments = [
        seg for c in ax.collections if isinstance(c, LineCollection) for seg in c.get_segments()
    ]
    spans = sorted(v for seg in segments for v in (seg[0][1], seg[1][1]))
    assert spans == pytest.approx(sorted(expected_spans), rel=1e-9)


def test_lab_runs_figure_shows_every_run(lab_frame):
    figure = report.figure_runs(lab_frame, "wireguard", "rr_mean")
    # One seaborn strip (a labelled point collection) per CNI and condition.
    plotted = sorted(
        float(y)
        for collection in figure.axes[0].collections
        if not collection.get_label().startswith("_")
        for _x, y in collection.get_offsets()
    )
    rows = lab_frame[(lab_frame["metric"] == "rr_mean") & (lab_frame["status"] == "ok")]
    assert plotted == pytest.approx(sorted(rows["value"]))


def _raw_request_times(results: Path) -> dict[str, np.ndarray]:
    found = {}
    for raw in results.glob("*/raw/*/http-timing.txt"):
        found[raw.parent.name] = parse_http_timing(raw.read_text()).total_times_us()
    return found


def test_lab_request_times_are_the_raw_curl_times(lab_results):
    times = report.load_request_times(lab_results)
    raw = _raw_request_times(lab_results)
    assert raw, "the wireguard rr runs kept no http-timing.txt"
    for run_id, values in raw.items():
        loaded = times[times["run_id"] == run_id]["time_us"].to_numpy()
        assert list(loaded) == list(values)


def test_lab_ecdf_is_sorted_request_times_ending_at_one(lab_results):
    times = report.load_request_times(lab_results)
    figure = report.figure_rr_ecdf(times)
    raw = _raw_request_times(lab_results)
    for line in figure.axes[0].get_lines():
        _cni, condition = line.get_label().split(" / ")
        run_ids = [r for r in raw if f"-{condition}-" in r]
        expected = np.sort(np.concatenate([raw[r] for r in run_ids]))
        # seaborn's ecdfplot starts each step line at -inf, proportion 0.
        assert list(line.get_xdata()[1:]) == list(expected)
        assert line.get_ydata()[-1] == 1.0


def test_lab_histogram_counts_every_request(lab_results):
    times = report.load_request_times(lab_results)
    figure = report.figure_rr_histogram(times)
    counts = sorted(int(step.get_data().values.sum()) for step in figure.axes[0].patches)
    assert counts == sorted(times.groupby(["cni", "condition"]).size().tolist())


def test_lab_tables_have_runs_then_avg_and_std(lab_frame):
    table = report.table_runs(lab_frame, "egress", "gateway-on", cni="vxlan")
    values = table["throughput [bits/s]"]
    runs = values.drop(["Avg", "Std Dev"]).to_numpy()
    assert values["Avg"] == pytest.approx(runs.mean())
    assert values["Std Dev"] == pytest.approx(np.std(runs, ddof=1))


# --- the HTML report in a real browser -------------------------------------------------------


def _chromium() -> str:
    for name in ("chromium", "chromium-browser", "google-chrome"):
        path = shutil.which(name)
        if path:
            return path
    pytest.skip("Chromium is not installed (Debian package: chromium)")


@pytest.fixture(scope="session")
def lab_report(lab_results: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("report-out")
    paths = report.write_report(
        lab_results, html=out / "report.html", markdown=out / "report.md", png_dir=out / "png"
    )
    assert paths.html is not None
    return paths.html


@pytest.fixture
def browser_profile() -> Iterator[Path]:
    directory = Path(tempfile.mkdtemp(prefix="cnibench-chromium-"))
    try:
        yield directory
    finally:
        shutil.rmtree(directory, ignore_errors=True)


def _run_chromium(args: list[str], profile: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            _chromium(),
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            f"--user-data-dir={profile}",
            *args,
        ],
        capture_output=True,
        text=True,
        timeout=CHROMIUM_TIMEOUT_S,
        check=False,
    )


def test_lab_report_images_decode_in_chromium(lab_report, browser_profile):
    completed = _run_chromium(["--dump-dom", lab_report.as_uri()], browser_profile)
    assert completed.returncode == 0, completed.stderr[-2000:]
    dom = completed.stdout
    images = re.findall(r'<img[^>]*src="data:image/png;base64,([A-Za-z0-9+/=]+)"', dom)
    assert len(images) >= 6  # egress + wireguard bars/runs and the two request-time figures
    from PIL import Image

    for data in images:
        with Image.open(io.BytesIO(base64.b64decode(data))) as image:
            image.verify()


def test_lab_report_screenshot_shows_the_figures(lab_report, browser_profile, tmp_path):
    from PIL import Image, ImageStat

    screenshot = tmp_path / "report.png"
    completed = _run_chromium(
        ["--window-size=1400,4000", f"--screenshot={screenshot}", lab_report.as_uri()],
        browser_profile,
    )
    assert completed.returncode == 0, completed.stderr[-2000:]
    blank_html = tmp_path / "blank.html"
    blank_html.write_text("<!DOCTYPE html><html><body></body></html>")
    blank_png = tmp_path / "blank.png"
    _run_chromium(
        ["--window-size=1400,4000", f"--screenshot={blank_png}", blank_html.as_uri()],
        browser_profile,
    )
    with Image.open(screenshot) as shot, Image.open(blank_png) as blank:
        shot_rgb, blank_rgb = shot.convert("RGB"), blank.convert("RGB")
        # Figures are colourful bars and lines: many distinct colours and real variance,
        # where the blank page is a single white.
        small, blank_small = (
            np.asarray(image.resize((350, 1000))).reshape(-1, 3) for image in (shot_rgb, blank_rgb)
        )
        colours = len(np.unique(small, axis=0))
        blank_colours = len(np.unique(blank_small, axis=0))
        variance = sum(ImageStat.Stat(shot_rgb).var)
        blank_variance = sum(ImageStat.Stat(blank_rgb).var)
        # The bar colour of the first CNI (#4c72b0) is on the page.
        pixels = np.asarray(shot_rgb).reshape(-1, 3).astype(int)
        bar_pixels = int(np.all(np.abs(pixels - [0x4C, 0x72, 0xB0]) < 12, axis=1).sum())
    assert colours > 50 > blank_colours
    assert variance > 100 * max(blank_variance, 1.0)
    assert bar_pixels > 5000
