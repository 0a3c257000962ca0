"""``cnibench run --load-engine locust`` drives the split scenario on the lab with locust, and the
records, the raw load summary and the report name locust as the engine that made the requests."""

from __future__ import annotations

import base64
import gzip
import json
import subprocess
import sys
from pathlib import Path

from lab_support import unavailable

from cnibench import load_results
from cnibench.backends.lab import LabBackend
from cnibench.report import load_split_records, write_report


def test_load_engine_locust_runs_the_split_scenario_on_the_lab(tmp_path: Path) -> None:
    ok, reason = LabBackend().available()
    if not ok:
        unavailable(reason)
    results = tmp_path / "results"
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "cnibench.cli",
            "run",
            "--cluster=lab",
            "--cni=routed",
            "--scenario=split",
            "--profile=smoke",
            "--weights=v1=60,v2=40",
            "--users=4",
            "--load-engine=locust",
            f"--results-dir={results}",
        ],
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    frame = load_results(results)
    runs = frame[frame["status"] == "ok"].drop_duplicates("run_id")
    assert len(runs) == 2  # the smoke profile's runs
    assert bool(runs["verified"].all())
    assert set(runs["param_load_engine"]) == {"locust"}
    # The load generator itself says locust drove it, in each run's raw summary.
    for session in results.iterdir():
        for run_id in runs["run_id"]:
            raw = session / "raw" / str(run_id)
            if raw.is_dir():
                summary = json.loads((raw / "load-summary.json").read_text())
                assert summary["engine"] == "locust"
                records = gzip.decompress(
                    base64.b64decode((raw / "load-records.csv.gz.b64").read_text())
                )
                assert records.startswith(b"time,backend,latency_ms,status,error\n")
    # Plausible shares: the 60/40 route gives v1 more than v2, both near their weights.
    ok = frame[frame["status"] == "ok"]
    for backend, weight in (("v1", 0.6), ("v2", 0.4)):
        shares = ok[ok["metric"] == f"share@{backend}"]["value"]
        assert len(shares) == 2
        assert ((shares - weight).abs() < 0.1).all(), shares.tolist()
    requests = ok[ok["metric"] == "requests"]["value"]
    assert (requests > 50).all(), requests.tolist()
    # The report reads the records and names the engine that made them.
    split = load_split_records(results)
    assert set(split["load_engine"]) == {"locust"}
    report = write_report(results, html=tmp_path / "report.html").html
    assert report is not None
    assert "load by locust" in report.read_text()
