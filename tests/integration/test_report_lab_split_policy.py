"""Split and policy figures drawn from a real lab run (smoke profile), their data checked.

One short session runs seed 000's 60/40 split at 10 virtual users and the policy scenario at
0 and 100 rules with the nftables-set engine; the figures must show exactly what the recorded
requests and runs say.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from scipy import stats as sps

from cnibench import load_results, report

pytestmark = [pytest.mark.lab, pytest.mark.slow]


@pytest.fixture(scope="module")
def results(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if os.geteuid() != 0:
        pytest.skip("the lab needs root")
    out = tmp_path_factory.mktemp("split-policy") / "results"
    argv = [
        sys.executable, "-m", "cnibench.cli", "run", "--cluster", "lab", "--cni", "vxlan",
        "--profile", "smoke", "--runs", "2", "--results-dir", str(out),
        "--scenario", "split", "--weights", "v1=60,v2=40", "--users", "10",
        "--scenario", "policy", "--rules", "0,100", "--clients", "1", "--engine", "nftables-set",
        "--condition", "v1-60-v2-40-u10",
        "--condition", "on-cross-node-nftables-set-r0-c1-new-connections",
        "--condition", "on-cross-node-nftables-set-r100-c1-new-connections",
    ]  # fmt: skip
    done = subprocess.run(argv, capture_output=True, text=True, timeout=900, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    return out


def test_split_figure_reference_is_the_configured_weight_and_shares_are_the_requests(results):
    records = report.load_split_records(results)
    assert len(records) > 0
    figure = report.figure_split_shares(records)
    lines = {line.get_label(): line for line in figure.axes[0].get_lines()}
    assert list(lines["v1 weight"].get_ydata()) == pytest.approx([0.6, 0.6])
    assert list(lines["v2 weight"].get_ydata()) == pytest.approx([0.4, 0.4])
    # Shares per 5 s window, recomputed here from the raw requests of one run.
    run = records[records["run_id"] == records["run_id"].iloc[0]]
    shares_figure = report.figure_split_shares(run)
    v1 = next(x for x in shares_figure.axes[0].get_lines() if x.get_label() == "v1 share")
    t = run["time"].to_numpy(dtype=float)
    window = np.floor((t - t.min()) / 5.0)
    expected = [float(np.mean(run["backend"].to_numpy()[window == w] == "v1"))
                for w in np.unique(window)]  # fmt: skip
    assert list(v1.get_ydata()) == pytest.approx(expected)


def test_split_requests_in_records_match_the_recorded_counts(results):
    frame = load_results(results)
    ok = frame[(frame.scenario == "split") & (frame.status == "ok")]
    records = report.load_split_records(results)
    for run_id, run in ok.groupby("run_id"):
        counted = run.set_index("metric").value
        seen = records[records["run_id"] == run_id]["backend"].value_counts()
        assert counted["requests@v1"] == seen.get("v1", 0)
        assert counted["requests@v2"] == seen.get("v2", 0)


def test_policy_scaling_figure_plots_the_geometric_means_per_rule_count(results):
    frame = load_results(results)
    policy = frame[(frame.scenario == "policy") & (frame.status == "ok")]
    figure = report.figure_policy_scaling(policy, x="rules", metrics=["throughput"])
    lines = [container.lines[0] for container in figure.axes[0].containers]
    assert len(lines) == 1
    assert list(lines[0].get_xdata()) == [0, 100]
    throughput = policy[policy.metric == "throughput"]
    # The one estimator of every table and figure: the geometric mean of every run.
    expected = [sps.gmean(throughput[throughput.param_rules == rules].value) for rules in (0, 100)]
    assert list(lines[0].get_ydata()) == pytest.approx(expected)
