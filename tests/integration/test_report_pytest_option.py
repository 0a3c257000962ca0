"""``pytest --cnibench-report=FILE`` writes the HTML report of the benchmark session at its end
and prints the verdict lines."""

from __future__ import annotations

import os
import re

import pytest

from suite_support import run_pytest


@pytest.mark.lab
def test_pytest_report_option_writes_the_session_report(tmp_path):
    if os.geteuid() != 0:
        pytest.skip("the benchmark session needs root for the lab")
    report = tmp_path / "bench.html"
    done = run_pytest(
        "-q",
        "tests/bench",
        "-k",
        "egress",
        "--cluster=lab",
        "--cni=routed",
        "--cnibench-profile=smoke",
        "--cnibench-runs=2",
        f"--cnibench-results-dir={tmp_path / 'results'}",
        f"--cnibench-report={report}",
        timeout=600,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert f"cnibench: report written to {report}" in done.stdout
    # Gateway on vs off on one CNI: one contrast per primary metric, each on its own line.
    assert "cnibench: verdict: " in done.stdout
    assert re.search(
        r"^cnibench:   egress gateway on routed: throughput"
        # A cost, the same within ±5 %, undecided, or (on a machine busy with other work)
        # not decided because a run saturated the host.
        r" (×|undecided ×|same within ±5 % ×|not decided: \d+ run\(s\) saturated)",
        done.stdout,
        flags=re.MULTILINE,
    ), done.stdout[-3000:]
    html = report.read_text()
    assert "gateway-off" in html
    assert '<h2 id="verdict">Verdict</h2>' in html
    assert "data:image/png;base64," in html
    assert "<script" not in html
