"""``pytest --report=FILE`` writes the HTML report of the benchmark session at its end."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.lab
def test_pytest_report_option_writes_the_session_report(tmp_path):
    if os.geteuid() != 0:
        pytest.skip("the benchmark session needs root for the lab")
    report = tmp_path / "bench.html"
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-p",
            "no:cacheprovider",
            "-q",
            "tests/bench",
            "-k",
            "egress and gateway-off",
            "--cluster=lab",
            "--cni=routed",
            "--profile=quick",
            "--runs=1",
            f"--results-dir={tmp_path / 'results'}",
            f"--report={report}",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert f"cnibench: report written to {report}" in done.stdout
    html = report.read_text()
    assert "gateway-off" in html
    assert "data:image/png;base64," in html
    assert "<script" not in html
