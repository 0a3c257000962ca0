"""locust's own master/worker distribution in the client pods of a real kind cluster:
``cnibench run --scenario split --load-engine locust --load-workers 2`` on kube-router with
Traefik as the Gateway (the cluster of test_kind_kube_router.py), with the offline locust image
built from Debian's python3-locust (``cnibench images build --load-engine locust``).

One module fixture run (CI time is scarce): one condition, the smoke profile's runs. It checks
that the records are verified, that the two workers that made the load were the two worker pods
(each worker's id at the master starts with its pod's name), that both backends answered, and
that each run's simultaneous interval covers the configured 60/40 as the host-side split test
checks. The cluster is deleted at the end of the module.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pandas as pd
import pytest

from cnibench.backends.base import ClusterSpec
from cnibench.results import load_results
from cnibench.scenarios.split import LOAD_SUMMARY_FILE, LOCUST_STATS_FILE

from .conftest import BUILD_TIMEOUT
from .kind_support import (
    cnibench,
    cnibench_clusters,
    condition_args,
    kind,
    retried_to_ok,
    run_args,
)

CNI = "kube-router:gateway=traefik,kube-proxy=nftables"
SLUG = ClusterSpec.from_label(CNI).slug
SPLIT = "v1-60-v2-40-u10"
WORKER_PODS = ("load-worker-0", "load-worker-1")


@pytest.fixture(scope="module")
def locust_images(offline_images: dict[str, str]) -> dict[str, str]:
    """The offline set with kube-router's, Traefik's and locust's images."""
    cnibench(
        "images", "build", "--cni", "kube-router", "--gateway", "traefik",
        "--load-engine", "locust", env=offline_images, timeout=BUILD_TIMEOUT,
    )  # fmt: skip
    return offline_images


@pytest.fixture(scope="module", autouse=True)
def _no_cluster_outlives_the_module(offline_images: dict[str, str]) -> Iterator[None]:
    yield
    for name in cnibench_clusters(offline_images):
        kind("delete", "cluster", "--name", name, env=offline_images)


@pytest.fixture(scope="module")
def locust_run(locust_images: dict[str, str], kind_results: Path) -> tuple[pd.DataFrame, Path]:
    """``cnibench run --cluster kind --cni kube-router:gateway=traefik,kube-proxy=nftables
    --scenario split --weights v1=60,v2=40 --users 10 --load-engine locust --load-workers 2``."""
    results = kind_results / "locust"
    args = run_args(CNI, results, "--scenario", "split", "--weights", "v1=60,v2=40")
    args += ["--users", "10", "--load-engine", "locust", "--load-workers", "2"]
    args += condition_args([SPLIT])
    done = cnibench(*args, env=locust_images, check=False, timeout=2400)
    output = done.stdout + done.stderr
    assert done.returncode == 0, output[-6000:]
    assert "Traceback" not in output
    return load_results(results), results


def test_locusts_workers_in_the_client_pods_split_60_40(
    locust_run: tuple[pd.DataFrame, Path],
) -> None:
    frame, results = locust_run
    split = retried_to_ok(frame[frame["scenario"] == "split"])
    assert set(split["condition"]) == {SPLIT}
    assert bool(split["verified"].all())
    assert set(split["param_load_engine"]) == {"locust"}
    assert set(split["param_load_workers"]) == {2}
    by_run = split.pivot_table(index="run_id", columns="metric", values="value")
    assert (by_run["requests"] > 100).all(), by_run["requests"].tolist()
    assert (by_run["requests@v1"] > 0).all()
    assert (by_run["requests@v2"] > 0).all()
    assert (by_run["share_low@v1"] <= 0.60).all(), by_run["share_low@v1"].tolist()
    assert (by_run["share_high@v1"] >= 0.60).all(), by_run["share_high@v1"].tolist()
    assert (by_run["share_low@v2"] <= 0.40).all()
    assert (by_run["share_high@v2"] >= 0.40).all()
    summaries = list(results.glob(f"*/raw/split-{SLUG}-{SPLIT}-*/{LOAD_SUMMARY_FILE}"))
    assert summaries, sorted(str(p) for p in results.rglob("*"))[:50]
    for path in summaries:
        summary = json.loads(path.read_text())
        pods = sorted(worker.rsplit("_", 1)[0] for worker in summary["workers"])
        assert pods == sorted(WORKER_PODS), summary
        assert summary["master"] == "load-master"
        stats = (path.parent / LOCUST_STATS_FILE).read_text()
        assert ",Aggregated," in stats
