"""``--pairs 2`` on a real lab: ``cnibench run`` as a person types it runs two iperf3 and two
sockperf client/server pairs at once, and the records hold each pair's values beside the run's
aggregate, which is their sum, with start and end times that overlap."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
from lab_support import unavailable

from cnibench.backends.lab import LabBackend
from cnibench.report.data import pair_rows, run_values
from cnibench.results import load_results

ROOT = Path(__file__).resolve().parents[2]
IPERF3 = "cross-node-idle-iperf3-2pairs"
SOCKPERF = "cross-node-idle-sockperf-2pairs"


@pytest.fixture(scope="module")
def paired_session(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """One ``cnibench run --pairs 2`` of the two paired cross-node conditions (smoke)."""
    ok, reason = LabBackend().available()
    if not ok:
        unavailable(reason)
    results = tmp_path_factory.mktemp("pairs") / "results"
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    done = subprocess.run(
        [sys.executable, "-m", "cnibench.cli", "run", "--cluster", "lab", "--cni", "routed",
         "--scenario", "baseline", "--condition", IPERF3, "--condition", SOCKPERF,
         "--pairs", "2", "--profile", "smoke", "--results-dir", str(results)],
        capture_output=True, text=True, timeout=900, check=False, env=env,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    (session,) = results.iterdir()
    return session, done.stdout + done.stderr


def _ok(df: pd.DataFrame, condition: str) -> pd.DataFrame:
    rows = df[(df["condition"] == condition) & (df["status"] == "ok")]
    assert not rows.empty, f"no successful run of {condition}"
    return rows


def test_each_run_records_both_pairs_and_their_sum(paired_session: tuple[Path, str]) -> None:
    session, _ = paired_session
    df = load_results(session)
    rows = _ok(df, IPERF3)
    assert set(json.loads(rows["parameters"].iloc[0]).items()) >= {("pairs", 2)}
    for run_id, run in rows.groupby("run_id"):
        pairs = pair_rows(run)
        throughput = pairs[pairs["metric"] == "throughput"]
        assert sorted(throughput["pair"].astype(int)) == [0, 1], run_id
        (aggregate,) = run_values(run)[run_values(run)["metric"] == "throughput"]["value"]
        assert aggregate == pytest.approx(throughput["value"].sum(), rel=1e-9), run_id
        assert (throughput["value"] > 0).all()


def test_the_pairs_ran_at_the_same_time(paired_session: tuple[Path, str]) -> None:
    session, _ = paired_session
    df = load_results(session)
    for condition in (IPERF3, SOCKPERF):
        for run_id, run in _ok(df, condition).groupby("run_id"):
            pairs = pair_rows(run)
            starts = pairs[pairs["metric"] == "pair_start"].set_index("pair")["value"]
            ends = pairs[pairs["metric"] == "pair_end"].set_index("pair")["value"]
            assert sorted(starts.index.astype(int)) == [0, 1], run_id
            # Every pair started before any ended, and each ran most of its time beside the other.
            assert starts.max() < ends.min(), run_id
            shared = ends.min() - starts.max()
            assert (shared >= 0.5 * (ends - starts)).all(), run_id


def test_a_latency_probe_ran_under_the_streams(paired_session: tuple[Path, str]) -> None:
    session, _ = paired_session
    df = load_results(session)
    values = run_values(_ok(df, IPERF3))
    probe = values[values["metric"] == "latency_under_load_avg"]
    assert len(probe) == values["run_id"].nunique()
    assert (probe["value"] > 0).all()
    latency = run_values(_ok(df, SOCKPERF))
    assert (latency[latency["metric"] == "latency_avg"]["value"] > 0).all()
    assert latency[latency["metric"].str.startswith("latency_under_load")].empty


def test_each_pair_has_its_own_pods_on_the_placed_nodes(
    paired_session: tuple[Path, str],
) -> None:
    session, _ = paired_session
    (verification,) = session.glob(f"verification-baseline-*-{IPERF3}.json")
    evidence = json.loads(verification.read_text())
    assert evidence["ok"] is True
    clients = {evidence[f"pair{p}_client_node"] for p in (0, 1)}
    servers = {evidence[f"pair{p}_server_node"] for p in (0, 1)}
    assert len(clients) == 1
    assert len(servers) == 1
    assert clients != servers  # cross-node
    pods = {evidence[f"pair{p}_{role}_pod"] for p in (0, 1) for role in ("client", "server")}
    assert len(pods) == 4
