"""A user's own pytest suite measures on the lab through the plugin (``pytester``, subprocess,
the plugin loaded from its entry point): one egress condition, verified, in the results, and the
session's report with ``--cnibench-report --cnibench-all-metrics``."""

from __future__ import annotations

from pathlib import Path

import pytest

from cnibench import load_results
from cnibench.report import write_report

pytest_plugins = ["pytester"]

USER_SUITE = """
import pytest

@pytest.mark.egress
def test_my_egress(bench, condition):
    result = bench.run("egress", condition)
    assert result.verified
    assert all(value > 0 for value in result.values("throughput"))
"""


def test_a_users_marked_test_measures_and_records_verified_runs(
    pytester: pytest.Pytester, tmp_path: Path
) -> None:
    pytester.makepyfile(test_user=USER_SUITE)
    results = tmp_path / "results"
    report = tmp_path / "report.html"
    outcome = pytester.runpytest_subprocess(
        "--cluster=lab",
        "--cni=routed",
        "--cnibench-profile=smoke",
        f"--cnibench-results-dir={results}",
        "-k",
        "gateway-off",
        "-rA",
        f"--cnibench-report={report}",
        "--cnibench-all-metrics",
        timeout=600,
    )
    outcome.assert_outcomes(passed=1, deselected=1)
    # The plugin's report section names the condition and where its results went.
    assert "egress routed gateway-off: verified" in outcome.stdout.str()
    frame = load_results(results)
    assert set(frame["scenario"]) == {"egress"}
    assert set(frame["cni"]) == {"routed"}
    assert set(frame["condition"]) == {"gateway-off"}
    assert bool(frame["verified"].all())
    throughput = frame[(frame["metric"] == "throughput") & (frame["status"] == "ok")]
    assert len(throughput) == 2  # the smoke profile's runs
    assert (throughput["value"] > 0).all()
    # --cnibench-all-metrics reached the report: it draws more than the primary metrics' figures.
    assert f"cnibench: report written to {report}" in outcome.stdout.str()
    primary = write_report(results, html=tmp_path / "primary.html").html
    assert primary is not None
    figures = report.read_text().count("data:image/png")
    assert figures > primary.read_text().count("data:image/png") > 0
