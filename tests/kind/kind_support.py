"""Helpers of the kind tier (imported by its conftest and test modules)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Iterable, Mapping
from pathlib import Path

import pandas as pd
import pytest
import yaml
from kubernetes import client, config

from cnibench.engine import ENGINE_LEASE
from cnibench.leases import CLEAN_FOR_VARIABLE, Lease, hold
from suite_support import KIND_TIER_LEASE

ENGINE_NAME = "cnibench-kind-tier"
"""The tier's own engine: a developer's default engine (``cnibench``) is left alone."""

TIER_LEASE = KIND_TIER_LEASE
"""The lease the tier holds while it runs (see :data:`suite_support.KIND_TIER_LEASE`)."""

_ENGINE_LEASES: list[Lease] = []


def hold_engine(docker_host: str) -> None:
    """Hold the tier's engine, as a session holds the engine its cluster runs in: a
    `cnibench clean` beside the tier (the reliability tier's) keeps the engine and the
    clusters the tier keeps in it between tests."""
    _ENGINE_LEASES.append(hold(ENGINE_LEASE, docker_host))


def release_engine() -> None:
    """Give the engine up, once the tier's own clean-up is over (that clean runs for the tier,
    ``CNIBENCH_CLEAN_FOR``, so the claim keeps nothing from it but keeps everything from the
    cleans of other tiers until then)."""
    while _ENGINE_LEASES:
        _ENGINE_LEASES.pop().release()


def for_the_tier(env: Mapping[str, str]) -> dict[str, str]:
    """``env`` for a `cnibench clean` that cleans for this tier (``CNIBENCH_CLEAN_FOR``): the
    tier's claim on its engine keeps nothing from it, while every other clean beside the tier
    (the reliability tier's) still keeps what the tier holds, also while this one runs."""
    return {**env, CLEAN_FOR_VARIABLE: str(os.getpid())}


def cnibench(
    *args: str, env: Mapping[str, str], timeout: float = 1800.0, check: bool = True
) -> subprocess.CompletedProcess[str]:
    """Run the real CLI (this interpreter's installation) and return what it printed."""
    done = subprocess.run(
        [sys.executable, "-m", "cnibench.cli", *args],
        env=dict(env),
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    if check and done.returncode != 0:
        pytest.fail(
            f"cnibench {' '.join(args)} exited {done.returncode}\n"
            f"--- stdout\n{done.stdout[-4000:]}\n--- stderr\n{done.stderr[-4000:]}"
        )
    return done


BASELINE_CONDITIONS = tuple(
    f"{placement}-idle-{tool}"
    for placement in ("same-node", "cross-node")
    for tool in ("iperf3", "sockperf", "ab", "wrk")
)
"""All four tools on the same node and across nodes (idle cluster)."""


def run_args(cni: str, results: Path, *extra: str, profile: str = "smoke") -> list[str]:
    """``cnibench run`` on kind (the smoke profile unless told), keeping the cluster for the next
    test."""
    return [
        "run",
        "--cluster",
        "kind",
        "--cni",
        cni,
        "--profile",
        profile,
        "--keep-cluster",
        "--results-dir",
        str(results),
        *extra,
    ]


def condition_args(conditions: Iterable[str]) -> list[str]:
    """``--condition C`` for each condition."""
    return [arg for condition in conditions for arg in ("--condition", condition)]


def retried_to_ok(frame: pd.DataFrame) -> pd.DataFrame:
    """The rows of the attempts that succeeded, once every repetition is shown to have one.

    A tool that fails marks its attempt failed and the profile may retry it (SPEC section 9):
    a failed attempt is kept, with its reason, and never averaged in. This checks exactly
    that: each failed attempt names why, its repetition (same condition and CNI) ended with
    an ``ok`` attempt, and failed attempts stay a minority of all attempts, so a path that
    fails as a rule still fails the test. The reasons are printed,
    so a retried failure is seen in the test's output. The warm-up run a new cluster starts
    with (status ``warmup``, never counted) is neither: it is left out here, and
    ``test_kind_flannel.py`` checks it.
    """
    frame = frame[frame["status"] != "warmup"]
    runs = frame.drop_duplicates("run_id")
    failed = runs[runs["status"] == "failed"]
    for row in failed.itertuples():
        print(f"retried: {row.run_id}: {row.reason}")
    assert set(runs["status"]) <= {"ok", "failed"}
    assert failed["reason"].str.strip().astype(bool).all(), failed["run_id"].tolist()
    assert 2 * len(failed) < len(runs), failed["reason"].tolist()
    key = ["cni", "condition", "repetition"]
    ok = runs[runs["status"] == "ok"]
    assert ok.duplicated(key).sum() == 0, "a repetition has two ok attempts"
    ended_ok = set(ok[key].itertuples(index=False, name=None))
    unretried = [
        row.run_id
        for row in failed.itertuples()
        if (row.cni, row.condition, row.repetition) not in ended_ok
    ]
    assert not unretried, f"failed and never retried to ok: {unretried} {failed['reason'].tolist()}"
    return frame[frame["status"] == "ok"]


def check_baseline(
    df: pd.DataFrame, cni: str, conditions: Iterable[str] = BASELINE_CONDITIONS
) -> None:
    """The baseline runs of ``cni`` are exactly ``conditions``, all verified, and each
    measurement is plausible in its unit: iperf3 in Gbit/s, sockperf in µs, CPU and memory
    from the cluster's Prometheus."""
    conditions = set(conditions)
    df = retried_to_ok(df[(df["cni"] == cni) & (df["scenario"] == "baseline")])
    assert set(df["provider"]) == {"kind"}
    assert bool(df["verified"].all())
    assert set(df["condition"]) == conditions
    throughput = df[(df["metric"] == "throughput") & (df["unit"] == "bits/s")]
    assert len(throughput) >= 2 * sum(c.endswith("iperf3") for c in conditions)  # >= 2 runs each
    gbits = throughput["value"] / 1e9
    # A veth/tunnel path on one host: well above 0.05 Gbit/s, far below 400 Gbit/s.
    assert gbits.between(0.05, 400).all(), gbits.tolist()
    latency = df[(df["metric"] == "latency_avg") & (df["unit"] == "us")]
    sockperf = latency[latency["condition"].str.endswith("sockperf")]
    assert len(sockperf) >= 2 * sum(c.endswith("sockperf") for c in conditions)
    assert sockperf["value"].between(1, 100_000).all(), sockperf["value"].tolist()
    runs = df["run_id"].nunique()
    for metric, unit, low, high in (("cpu", "%", 0.0, 100.0), ("ram", "MB", 10.0, 1e6)):
        values = df[(df["metric"] == metric) & (df["unit"] == unit)]
        assert values["run_id"].nunique() == runs, f"{metric} missing for some runs"
        assert values["value"].between(low, high).all(), values["value"].tolist()
        assert not values["value"].isna().any()


def kind(*args: str, env: Mapping[str, str]) -> str:
    """Output of the ``kind`` command (the offline set's own when none is on PATH)."""
    from cnibench.backends.kube.offline import offline_bin_dir

    program = shutil.which("kind") or str(offline_bin_dir() / "kind")
    return subprocess.run(
        [program, *args], env=dict(env), capture_output=True, text=True, check=True, timeout=120
    ).stdout


def cnibench_clusters(env: Mapping[str, str]) -> list[str]:
    """The kind clusters cnibench made in the tier's engine."""
    return [c for c in kind("get", "clusters", env=env).split() if c.startswith("cnibench-")]


def core_api(env: Mapping[str, str], cluster: str) -> client.CoreV1Api:
    """The core API of a kind cluster of the tier's engine."""
    kubeconfig = kind("get", "kubeconfig", "--name", cluster, env=env)
    return client.CoreV1Api(config.new_client_from_config_dict(yaml.safe_load(kubeconfig)))


def session_namespaces(env: Mapping[str, str], cluster: str) -> list[str]:
    """The cnibench session namespaces in a kind cluster of the tier's engine."""
    from cnibench.backends.kube.render import SESSION_LABEL

    found = core_api(env, cluster).list_namespace(label_selector=SESSION_LABEL).items
    return [ns.metadata.name for ns in found]
