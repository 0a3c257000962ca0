"""flannel on a real kind cluster, built offline: the baseline scenario measured on real pods.

The cluster (control plane + client, server and egress-gw workers) is created by the first run
with ``--keep-cluster`` and reused by the runs after it; the last test removes it with
``cnibench clean``, as a person would.
"""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from cnibench.backends.kube.providers import KIND_CLUSTER_LEASE
from cnibench.engine import ENGINE_LEASE
from cnibench.errors import SetupError
from cnibench.report.gate.loading import failed_candidate_runs
from cnibench.report.tables import table_runs
from cnibench.results import load_environments, load_results
from cnibench.session import BenchSession, SessionConfig

from .kind_support import (
    BASELINE_CONDITIONS,
    ENGINE_NAME,
    check_baseline,
    cnibench,
    cnibench_clusters,
    condition_args,
    for_the_tier,
    retried_to_ok,
    run_args,
)


def _run_args(results: Path, *extra: str, profile: str = "smoke") -> list[str]:
    return run_args("flannel", results, *extra, profile=profile)


@pytest.fixture(scope="module")
def flannel_baseline(offline_images: dict[str, str], kind_results: Path) -> pd.DataFrame:
    """The README's ``cnibench run --cluster kind --cni flannel --scenario baseline --profile
    quick`` on real pods."""
    results = kind_results / "flannel-baseline"
    conditions = condition_args(BASELINE_CONDITIONS)
    # --sequential: these tests check the records, not the order, and interleaving 8
    # conditions x 5 runs would set each pod pair up 40 times, not 8 (about 3 s each on kind:
    # 2 minutes of CI). flannel_services and the Cilium kube-proxy run interleave on kind.
    done = cnibench(
        *_run_args(results, "--scenario", "baseline", *conditions, "--sequential", profile="quick"),
        env=offline_images,
        timeout=2400,
    )
    print(done.stdout)
    return load_results(results)


def test_every_baseline_record_is_verified_and_plausible(flannel_baseline: pd.DataFrame) -> None:
    assert set(flannel_baseline["cni"]) == {"flannel"}
    check_baseline(flannel_baseline, "flannel")
    # The quick profile's five runs per condition, every one successful.
    ok = flannel_baseline[flannel_baseline["status"] == "ok"].drop_duplicates("run_id")
    assert ok.groupby("condition").size().to_dict() == dict.fromkeys(BASELINE_CONDITIONS, 5)


def test_the_new_cluster_settled_then_warmed_up_and_the_warm_up_is_never_counted(
    flannel_baseline: pd.DataFrame, kind_results: Path
) -> None:
    """Issue 48, item 4: the run that made the cluster waited for flanneld's own CPU to settle
    (at most its bound), then measured one warm-up run of the first condition, recorded as
    warm-up: before every measured run, not among them (each condition still has the
    profile's five, above), and shown as warm-up in the report's table, not as failed."""
    runs = flannel_baseline.drop_duplicates("run_id")
    warm = runs[runs["status"] == "warmup"]
    assert len(warm) == 1, runs["status"].value_counts().to_dict()
    (warm_id,) = warm["run_id"]
    first = runs[runs["status"] == "ok"].sort_values(["time", "run_id"]).iloc[0]
    assert warm["condition"].iloc[0] == first["condition"]
    assert warm["repetition"].iloc[0] == -1
    assert pd.Timestamp(warm["time"].iloc[0]) < pd.Timestamp(first["time"])
    assert set(runs["status"]) <= {"ok", "failed", "warmup"}
    rows = flannel_baseline[flannel_baseline["run_id"] == warm_id].set_index("metric")
    assert rows.at["throughput", "value"] > 0  # measured like any run (iperf3 first)
    waited = float(rows.at["settle_wait", "value"])
    (note,) = (kind_results / "flannel-baseline").glob("*/warmup-*.json")
    written = json.loads(note.read_text())
    assert written["runs"] == [warm_id]
    assert written["settle"]["seconds"] == pytest.approx(waited)
    assert 0.0 <= waited <= written["settle"]["bound"] + 5.0
    assert "flanneld" in written["settle"]["detail"], written  # the agent's own CPU was read
    table = table_runs(flannel_baseline, "baseline", str(first["condition"]), cni="flannel")
    assert str(table.index[0]).startswith("Warm-up, not counted"), list(table.index)
    assert table.attrs["run_ids"][0] == warm_id
    assert failed_candidate_runs(flannel_baseline) == []


SERVICE_CONDITIONS = (
    "cross-node-idle-iperf3-service-iptables-0svc",
    "cross-node-idle-sockperf-service-iptables-0svc",
    "cross-node-idle-iperf3-service-iptables-100svc",
    "cross-node-idle-iperf3-nodeport-iptables-0svc",
    "cross-node-idle-sockperf-nodeport-iptables-0svc",
)
"""Through kube-proxy (kind's iptables mode): a ClusterIP, with and without 100 further
Services in its chains, and a NodePort on the server's node."""
NOT_THIS_PROXY = "cross-node-idle-iperf3-service-nftables-0svc"


@pytest.fixture(scope="module")
def flannel_services(
    flannel_baseline: pd.DataFrame, offline_images: dict[str, str], kind_results: Path
) -> tuple[pd.DataFrame, str, Path]:
    """Seed 001's Service path on the kept cluster, as a person types it."""
    results = kind_results / "flannel-services"
    done = cnibench(
        *_run_args(
            results, "--scenario", "baseline", "--target", "service,nodeport",
            "--proxy", "iptables,nftables", "--services", "0,100",
            *condition_args((*SERVICE_CONDITIONS, NOT_THIS_PROXY)),
        ),
        env=offline_images,
        timeout=1800,
    )  # fmt: skip
    return load_results(results), done.stdout + done.stderr, results


@pytest.mark.kind_extended
def test_service_targets_are_measured_through_kube_proxy(
    flannel_services: tuple[pd.DataFrame, str, Path],
) -> None:
    frame, output, results = flannel_services
    check_baseline(frame, "flannel", SERVICE_CONDITIONS)
    for condition in SERVICE_CONDITIONS:
        (proof,) = results.glob(f"*/verification-baseline-*-{condition}.json")
        evidence = json.loads(proof.read_text())
        # The Service's address is no pod's: the answer names the server pod, so kube-proxy
        # translated it; a ClusterIP from kind's service range, a NodePort on the node.
        assert evidence["answered_by"] == "bl-srv", evidence
        host, port = evidence["url"].removeprefix("http://").rstrip("/").rsplit(":", 1)
        if "-service-" in condition:
            assert host.startswith("10.96."), evidence
        else:
            assert int(port) >= 30000, evidence
            assert not host.startswith(("10.96.", "10.244.")), evidence
    skip = next(line for line in output.splitlines() if line.startswith("skipped baseline/"))
    assert NOT_THIS_PROXY in skip
    assert "this cluster's Services go through iptables" in skip
    assert "choose --proxy iptables" in skip


@pytest.mark.kind_extended
def test_a_pod_never_ready_fails_its_condition_with_the_reason_and_the_session_goes_on(
    flannel_baseline: pd.DataFrame,
    offline_images: dict[str, str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The kept cluster, through the library: the first condition's server pod names an image
    that is not in the cluster, so the real kubelet reports ErrImageNeverPull."""
    for key in ("DOCKER_HOST", "CNIBENCH_IMAGES"):
        monkeypatch.setenv(key, offline_images[key])
    config = SessionConfig(
        cluster="kind", cnis=("flannel",), keep_cluster=True, results_dir=tmp_path / "results"
    )
    with BenchSession(config) as session:
        baseline = session.scenarios["baseline"]
        first, second = (
            next(c for c in baseline.conditions() if c.id == f"{placement}-idle-iperf3")
            for placement in ("cross-node", "same-node")
        )
        cluster = session.runner.pool.get(baseline.cluster_spec(session.spec("flannel"), first))
        good = cluster.images  # type: ignore[attr-defined]
        cluster.images = dataclasses.replace(good, sockperf="localhost/cnibench-absent:never")  # type: ignore[attr-defined]
        with pytest.raises(SetupError) as failed:
            session.run_condition(baseline, session.spec("flannel"), first)
        cluster.images = good  # type: ignore[attr-defined]
        went_on = session.run_condition(baseline, session.spec("flannel"), second)
    message = str(failed.value)
    assert "set-up failed: pod bl-srv cannot start" in message
    assert "ErrImageNeverPull" in message
    assert "localhost/cnibench-absent:never" in message
    assert went_on.verified
    assert went_on.ok_runs
    frame = load_results(tmp_path / "results")
    failed_rows = frame[frame.status == "failed"]
    assert set(failed_rows.condition) == {first.id}
    assert failed_rows.reason.str.contains("ErrImageNeverPull").all()
    assert set(frame[frame.status == "ok"].condition) == {second.id}


PAIRED = ("cross-node-idle-iperf3", "cross-node-idle-sockperf")
"""The conditions ``--pairs`` runs as N client/server pairs (iperf3's throughput and the
latency condition), across nodes."""


@pytest.fixture(scope="module", params=[1, 4], ids=["1pair", "4pairs"])
def flannel_pairs(
    request: pytest.FixtureRequest,
    flannel_baseline: pd.DataFrame,
    offline_images: dict[str, str],
    kind_results: Path,
) -> tuple[int, pd.DataFrame, Path]:
    """``cnibench run --pairs N`` of the paired cross-node conditions on the kept cluster."""
    pairs: int = request.param
    suffix = f"-{pairs}pair{'s' if pairs != 1 else ''}"
    results = kind_results / f"flannel-pairs-{pairs}"
    cnibench(
        *_run_args(
            results, "--scenario", "baseline", "--pairs", str(pairs),
            *condition_args(c + suffix for c in PAIRED),
        ),
        env=offline_images,
        timeout=1800,
    )  # fmt: skip
    return pairs, load_results(results), results


def test_pairs_record_each_pair_beside_their_sum(
    flannel_pairs: tuple[int, pd.DataFrame, Path],
) -> None:
    pairs, everything, _ = flannel_pairs
    frame = retried_to_ok(everything)
    assert bool(frame["verified"].all())
    iperf3 = frame[frame["condition"].str.contains("iperf3")]
    assert set(iperf3["param_pairs"].astype(int)) == {pairs}
    for run_id, run in iperf3.groupby("run_id"):
        throughput = run[run["metric"] == "throughput"]
        per_pair = throughput[throughput["pair"].notna()]
        (aggregate,) = throughput[throughput["pair"].isna()]["value"]
        assert sorted(per_pair["pair"].astype(int)) == list(range(pairs)), run_id
        assert aggregate == pytest.approx(per_pair["value"].sum(), rel=1e-9), run_id
        assert (per_pair["value"] / 1e9).between(0.01, 400).all(), per_pair["value"].tolist()
        probe = run[(run["metric"] == "latency_under_load_avg") & run["pair"].isna()]
        assert probe["value"].between(1, 1_000_000).all()
        assert len(probe) == 1
    sockperf = frame[frame["condition"].str.contains("sockperf")]
    for run_id, run in sockperf.groupby("run_id"):
        latency = run[run["metric"] == "latency_avg"]
        assert sorted(latency["pair"].dropna().astype(int)) == list(range(pairs)), run_id
        assert latency["pair"].isna().sum() == 1


def test_the_kept_cluster_asks_no_warm_up_when_reused(
    flannel_pairs: tuple[int, pd.DataFrame, Path],
) -> None:
    _, everything, _ = flannel_pairs
    assert "warmup" not in set(everything["status"])


def test_pairs_ran_at_the_same_time(flannel_pairs: tuple[int, pd.DataFrame, Path]) -> None:
    pairs, everything, _ = flannel_pairs
    frame = retried_to_ok(everything)
    for run_id, run in frame.groupby("run_id"):
        starts = run[run["metric"] == "pair_start"].set_index("pair")["value"]
        ends = run[run["metric"] == "pair_end"].set_index("pair")["value"]
        assert len(starts) == len(ends) == pairs, run_id
        assert starts.max() < ends.min(), run_id


def test_each_pair_s_pods_sit_on_the_nodes_the_placement_names(
    flannel_pairs: tuple[int, pd.DataFrame, Path],
) -> None:
    """The environment file names each node's role (placement.py's choice); every pair's
    client pod ran on the client node and its server pod on the server node, as the
    verification observed them (the node a pod runs on, read back, not assumed)."""
    pairs, _, results = flannel_pairs
    (environment,) = load_environments(results).itertuples()
    roles = {name: node["role"] for name, node in json.loads(environment.nodes).items()}
    client_nodes = [name for name, role in roles.items() if "client" in role.split("+")]
    server_nodes = [name for name, role in roles.items() if "server" in role.split("+")]
    assert len(client_nodes) == 1
    assert len(server_nodes) == 1
    assert client_nodes != server_nodes
    for condition in PAIRED:
        suffix = f"-{pairs}pair{'s' if pairs != 1 else ''}"
        (proof,) = results.glob(f"*/verification-baseline-*-{condition}{suffix}.json")
        evidence = json.loads(proof.read_text())
        assert evidence["ok"] is True, evidence
        assert evidence["pairs"] == pairs
        for pair in range(pairs):
            assert evidence[f"pair{pair}_client_node"] == client_nodes[0], evidence
            assert evidence[f"pair{pair}_server_node"] == server_nodes[0], evidence
            assert evidence[f"pair{pair}_client_pod"] == f"bl-cli-p{pair}"
            assert evidence[f"pair{pair}_server_pod"] == f"bl-srv-p{pair}"


SKIPPED_HERE = {
    ("wireguard", "flannel"): "the wireguard kernel module, which this kernel lacks",
    ("l7", "flannel"): "needs Envoy",
    ("split", "flannel"): "add one with --cni flannel:gateway=traefik",
    ("wireguard", "antrea"): "antrea needs the openvswitch kernel module, which this kernel lacks",
    ("wireguard", "calico"): "Calico is not served by the Go module proxy",
}
"""What cannot run on this machine, and the words its skip line must give as the reason."""


def test_what_cannot_run_here_is_skipped_with_the_reason(
    flannel_baseline: pd.DataFrame, offline_images: dict[str, str], tmp_path: Path
) -> None:
    # kube-router now runs offline: its skips are checked on its own cluster
    # (test_kind_kube_router.py).
    others = [arg for cni in ("antrea", "calico") for arg in ("--cni", cni)]
    scenarios = [arg for s in ("wireguard", "l7", "split") for arg in ("--scenario", s)]
    conditions = [
        arg for c in ("on-iperf3", "policy-on", "v1-95-v2-5-u1") for arg in ("--condition", c)
    ]
    done = cnibench(
        *_run_args(tmp_path / "skipped", *scenarios, *conditions, *others),
        env=offline_images,
        check=False,
        timeout=900,
    )
    output = done.stdout + done.stderr
    assert done.returncode == 1, output[-3000:]  # nothing measured: every condition skipped
    assert "Traceback" not in output
    skips = {
        tuple(line.split()[1].split("/")): line
        for line in output.splitlines()
        if line.startswith("skipped ")
    }
    for (scenario, cni), words in SKIPPED_HERE.items():
        assert words in skips.get((scenario, cni), ""), (scenario, cni, skips)
    assert len(skips) == 3 * 3  # three scenarios on each of three CNIs, one line each


def test_clean_keeps_a_cluster_another_shell_is_using(
    flannel_baseline: pd.DataFrame, offline_images: dict[str, str]
) -> None:
    """A developer's kind run in another shell survives `cnibench clean` (the reliability
    tier's, or anyone's): that shell's live session holds its cluster (cnibench.leases). The
    other shell here is a real process holding the kept cluster and its engine, as a running
    session does."""
    (kept,) = cnibench_clusters(offline_images)
    other = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys; from cnibench import leases;"
            f" leases.hold({KIND_CLUSTER_LEASE!r}, {kept!r});"
            f" leases.hold({ENGINE_LEASE!r}, {offline_images['DOCKER_HOST']!r});"
            " print('held', flush=True); sys.stdin.read()",
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert other.stdout is not None
        assert other.stdout.readline().strip() == "held"
        # A clean for the tier (its own claim keeps nothing): only the other shell's is left.
        done = cnibench("clean", env=for_the_tier(offline_images), timeout=600)
        assert f"kube: kind-cluster {kept}: kept: in use by pid {other.pid}" in done.stdout, (
            done.stdout
        )
        assert f"engine: {ENGINE_NAME}: kept: in use by pid {other.pid}" in done.stdout, done.stdout
        assert cnibench_clusters(offline_images) == [kept]
    finally:
        other.kill()
        other.wait()


def test_clean_removes_the_kept_cluster(
    flannel_baseline: pd.DataFrame,
    offline_images: dict[str, str],
    host_before: dict[str, object],
) -> None:
    (kept,) = cnibench_clusters(offline_images)  # the baseline run kept its cluster
    done = cnibench("clean", env=for_the_tier(offline_images), timeout=600)
    assert f"kube: kind-cluster {kept}: removed" in done.stdout, done.stdout
    # clean stops leftover engines too
    assert f"engine: {ENGINE_NAME}: stopped" in done.stdout, done.stdout
    if not host_before["/lib/modules"]:  # made for kind, gone with the last engine
        assert not Path("/lib/modules").exists()
    # The engine keeps its containers across restarts: a cluster clean missed would be back.
    cnibench("engine", "up", "--name", ENGINE_NAME, env=offline_images, timeout=180)
    assert cnibench_clusters(offline_images) == []
