"""report.html as a reader meets it (issue 49): in a real browser at 1400 px the page never
scrolls sideways (a table wider than the page, as a run table with a column per metric,
scrolls inside its own box), and no figure's text is below 11 px as saved.

Uses the committed results (the lab WireGuard set: run tables about 2000 px wide, request-time
figures; the kind study: forest, scaling and split figures) and the Debian package
``chromium``; skips without it (a failure in a required tier, see tests/conftest.py).
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest
from matplotlib.figure import Figure
from matplotlib.text import Text

from cnibench import report

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "docs" / "results" / "lab-wireguard-2026-11-27"
KIND = ROOT / "docs" / "results" / "kind-2026-11-27"
LEAST_TEXT_PX = 11
WINDOW_PX = 1400
CHROMIUM_TIMEOUT_S = 120

# Written into the page's title once it has laid out: what the test reads back from the DOM.
_PROBE = (
    "<script>window.addEventListener('load', () => {"
    " document.title = 'scrollWidth=' + document.documentElement.scrollWidth"
    " + ' widest=' + Math.max(...[...document.querySelectorAll('table')]"
    ".map(t => t.scrollWidth))"
    " + ' matrix=' + Math.max(0, ...[...document.querySelectorAll('table.matrix')]"
    ".map(t => t.scrollWidth - t.parentElement.clientWidth)); });</script>"
)


def _chromium() -> str:
    for name in ("chromium", "chromium-browser", "google-chrome"):
        path = shutil.which(name)
        if path:
            return path
    pytest.skip("Chromium is not installed (Debian package: chromium)")


def _laid_out(page: Path, profile: Path) -> tuple[int, int, int]:
    """The page's ``document.documentElement.scrollWidth``, its widest table's, and how far the
    widest matrix reaches beyond its box (0 when every matrix fits), in px, in a window
    ``WINDOW_PX`` wide."""
    completed = subprocess.run(
        [
            _chromium(),
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            f"--user-data-dir={profile}",
            f"--window-size={WINDOW_PX},900",
            "--virtual-time-budget=5000",
            "--dump-dom",
            page.as_uri(),
        ],
        capture_output=True,
        text=True,
        timeout=CHROMIUM_TIMEOUT_S,
        check=False,
    )
    assert completed.returncode == 0, completed.stderr[-2000:]
    found = re.search(
        r"<title>scrollWidth=(\d+) widest=(\d+) matrix=(-?\d+)</title>", completed.stdout
    )
    assert found is not None, completed.stdout[:2000]
    return int(found.group(1)), int(found.group(2)), int(found.group(3))


def test_the_report_never_scrolls_sideways_at_1400_px(tmp_path: Path) -> None:
    paths = report.write_report(RESULTS, html=tmp_path / "report.html")
    assert paths.html is not None
    probed = tmp_path / "probed.html"
    probed.write_text(paths.html.read_text().replace("</body>", f"{_PROBE}</body>"))
    page, widest, _ = _laid_out(probed, tmp_path / "profile")
    assert widest > WINDOW_PX  # the case that matters: a table wider than the window
    assert page <= WINDOW_PX


def test_the_study_s_matrix_fits_the_page_with_every_configuration(tmp_path: Path) -> None:
    """The kind study's matrix has seven configurations: each cell breaks between its
    estimate with its interval and its marks, so every column is on screen (before: the
    matrix scrolled inside its box and its napi column was off-screen)."""
    paths = report.write_report(KIND, html=tmp_path / "report.html")
    assert paths.html is not None
    html = paths.html.read_text()
    assert html.count('<table class="matrix">') >= 1
    probed = tmp_path / "probed.html"
    probed.write_text(html.replace("</body>", f"{_PROBE}</body>"))
    page, _, beyond = _laid_out(probed, tmp_path / "profile")
    assert page <= WINDOW_PX
    assert beyond <= 0


@pytest.mark.parametrize("results", [RESULTS, KIND], ids=lambda p: p.name)
def test_no_figure_text_is_below_11_px_as_saved(
    results: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A spy, not a stand-in: every figure the report saves is saved as before, and its texts
    # and the dpi it was saved at are kept to be measured (points x dpi / 72 = pixels).
    saved: list[tuple[Figure, float]] = []
    save = Figure.savefig

    def spy(figure: Figure, *args: object, **kwargs: object) -> None:
        saved.append((figure, float(kwargs.get("dpi") or figure.dpi)))  # type: ignore[arg-type]
        save(figure, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(Figure, "savefig", spy)
    report.write_report(results, html=tmp_path / "report.html")
    assert len(saved) >= 5
    small = [
        f"{text.get_text()!r}: {text.get_fontsize() * dpi / 72:.1f} px"
        for figure, dpi in saved
        for text in figure.findobj(Text)
        if text.get_visible()
        and text.get_text().strip()
        and text.get_fontsize() * dpi / 72 < LEAST_TEXT_PX
    ]
    assert small == []
