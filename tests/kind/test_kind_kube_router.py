"""kube-router built from its Go module on a real kind cluster: seed 003's rule scaling on an
iptables + ipset engine, its proof and negative control, the agent's own CPU and memory, and
faults on a real cluster (the agent pod or the server pod deleted mid-run, Ctrl-C at random
points). kube-proxy runs in its nftables mode and Traefik is the Gateway API implementation
(``--cni kube-router:gateway=traefik,kube-proxy=nftables``), so the same cluster measures a
ClusterIP with 1000 further Services in nftables' verdict maps (the flannel cluster measures
kube-proxy's iptables mode) and a real 60/40 split through a Gateway, its load from this host
and from locust's own master and workers in client pods (``--load-engine locust``).

One cluster for the module: the policy run creates it with ``--keep-cluster``, every later test
reuses it, and the last one removes it with ``cnibench clean``-equivalent ``kind delete``.
kube-router v2.1.0 is the only release the Go module proxy serves and has reported security
flaws: the cluster is throwaway, on the private engine's own bridge.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from cnibench.backends.base import ClusterSpec, NodeRole
from cnibench.backends.kube.filters import PRIORITY_SETTLE
from cnibench.records import RunStatus
from cnibench.results import load_results
from cnibench.scenarios.base import Condition, Prepared, RunOutput, Scenario
from cnibench.scenarios.profiles import Profile
from cnibench.scenarios.split import LOAD_SUMMARY_FILE, LOCUST_STATS_FILE
from cnibench.session import BenchSession, SessionConfig
from cnibench.tools.effect_probe import parse_effect_probe

from .conftest import BUILD_TIMEOUT
from .kind_support import (
    cnibench,
    cnibench_clusters,
    condition_args,
    kind,
    retried_to_ok,
    run_args,
    session_namespaces,
)

CNI = "kube-router:gateway=traefik,kube-proxy=nftables"
SLUG = ClusterSpec.from_label(CNI).slug
"""How file names spell the label."""
AGENT = "kube-router"
SERVICE_1000 = "cross-node-idle-iperf3-service-nftables-1000svc"
SPLIT = "v1-60-v2-40-u10"
POLICY_OFF = "off-cross-node-c1"
POLICY_R0 = "on-cross-node-r0-c1"
POLICY_R100 = "on-cross-node-r100-c1"
POLICY_CONDITIONS = (POLICY_OFF, POLICY_R0, POLICY_R100)
BASELINE = "cross-node-idle-iperf3"
NOT_HERE = {
    "wireguard": "kube-router cannot encrypt with WireGuard: it has no encryption",
    "l7": "kube-router enforces NetworkPolicy at L3/L4 only",
}
"""What kube-router does not offer, and the words its skip line gives."""
NOT_HERE_IDS = ("on-iperf3", "policy-on")
"""One condition of each (wireguard's, l7's)."""


@pytest.fixture(scope="module")
def kube_router_images(offline_images: dict[str, str]) -> dict[str, str]:
    """The offline set with kube-router's image (its Go build and root filesystem), Traefik's,
    and locust's (Debian's python3-locust) for the split run of locust's own distribution."""
    cnibench(
        "images", "build", "--cni", AGENT, "--gateway", "traefik", "--load-engine", "locust",
        env=offline_images, timeout=BUILD_TIMEOUT,
    )  # fmt: skip
    return offline_images


@pytest.fixture(scope="module", autouse=True)
def _no_cluster_outlives_the_module(offline_images: dict[str, str]) -> Iterator[None]:
    """The modules after this one count the tier's clusters."""
    yield
    for name in cnibench_clusters(offline_images):
        kind("delete", "cluster", "--name", name, env=offline_images)


@pytest.fixture(scope="module")
def policy_run(
    kube_router_images: dict[str, str], kind_results: Path
) -> tuple[pd.DataFrame, str, Path]:
    """``cnibench run --cluster kind --cni kube-router:gateway=traefik,kube-proxy=nftables
    --scenario policy --rules 0,100``, the pod-to-pod baseline, a ClusterIP behind 1000 further
    Services, a 60/40 split, and WireGuard and L7 (skipped), as a person types it; the cluster
    is kept for the tests after it."""
    assert cnibench_clusters(kube_router_images) == []  # one cluster at a time on 2 cores
    results = kind_results / "kube-router"
    args = run_args(CNI, results, "--scenario", "policy", "--scenario", "baseline")
    args += ["--scenario", "split", "--weights", "v1=60,v2=40", "--users", "10"]
    args += ["--rules", "0,100", "--clients", "1"]
    args += ["--target", "pod,service", "--proxy", "nftables", "--services", "1000"]
    # What kube-router does not offer, in the same run: skipped with the reason, not failed.
    args += ["--scenario", "wireguard", "--scenario", "l7"]
    args += condition_args((*POLICY_CONDITIONS, BASELINE, SERVICE_1000, SPLIT, *NOT_HERE_IDS))
    # --sequential: the tests below count one enforcement time per policy set-up, and each
    # round of an interleaved run applies the policy again (tests/lab's
    # test_lab_policy_enforcement_rounds checks those rounds); the 1000 Services would run
    # sequentially anyway.
    args.append("--sequential")
    done = cnibench(*args, env=kube_router_images, check=False, timeout=2400)
    output = done.stdout + done.stderr
    assert done.returncode == 0, output[-6000:]
    assert "Traceback" not in output
    print(done.stdout)
    return load_results(results), output, results


def test_kube_router_enforces_the_policy_at_0_and_100_rules(
    policy_run: tuple[pd.DataFrame, str, Path],
) -> None:
    frame, _, results = policy_run
    assert set(frame["cni"]) == {CNI}
    assert set(frame["cni_version"]) == {"v2.1.0"}  # the release the offline image runs
    policy = frame[frame["scenario"] == "policy"]
    assert set(policy["condition"]) == set(POLICY_CONDITIONS)
    assert bool(policy["verified"].all())
    # The policy runs first on the new cluster: its first condition's warm-up is not counted.
    assert set(policy[policy["status"] != "warmup"]["status"]) == {"ok"}
    for condition in POLICY_CONDITIONS:
        (path,) = results.glob(f"*/verification-policy-{SLUG}-{condition}.json")
        proof = json.loads(path.read_text())
        assert proof["ok"], proof
        assert proof["probes_ok"] == proof["probes"] >= 3, proof
        (denied,) = (c for c in proof["probe_matrix"].split(";") if c.startswith("pol-deny->"))
        want = "deny" if condition.startswith("on-") else "allow"
        assert denied.endswith(f"/{want}/ok"), proof
    rate = policy[policy["metric"] == "new_connections_per_second"]
    assert (rate["value"] > 0).all(), rate["value"].tolist()
    assert set(rate["condition"]) == set(POLICY_CONDITIONS)
    throughput = policy[policy["metric"] == "throughput"]
    assert (throughput["value"] / 1e9).between(0.01, 400).all(), throughput["value"].tolist()


def test_the_time_until_kube_router_enforces_is_recorded(
    policy_run: tuple[pd.DataFrame, str, Path],
) -> None:
    """From the apply call until the pod outside the policy was blocked: once per set-up,
    with the policy on."""
    frame, _, _ = policy_run
    enforcement = frame[frame["metric"] == "policy_enforcement_time"]
    assert sorted(enforcement["condition"]) == sorted((POLICY_R0, POLICY_R100))
    assert (enforcement["unit"] == "s").all()
    assert enforcement["value"].between(0.0, 60.0).all(), enforcement["value"].tolist()
    leaks = frame[frame["metric"] == "policy_enforcement_time_leaks"]
    assert sorted(leaks["run_id"]) == sorted(enforcement["run_id"])
    assert (leaks["value"] >= 0).all(), leaks["value"].tolist()
    # And back: from the delete call until the pod outside it is answered again.
    removal = frame[frame["metric"] == "policy_removal_time"]
    assert sorted(removal["run_id"]) == sorted(enforcement["run_id"])
    assert removal["value"].between(0.0, 60.0).all(), removal["value"].tolist()


def test_enforcement_and_programming_are_read_by_the_effect_probe_in_the_pod(
    policy_run: tuple[pd.DataFrame, str, Path],
) -> None:
    """One exec starts the probe in the client pod (perl from the tools image), which connects
    every 10 ms: its spacing, recorded with each set-up's proof and computed again here from
    its log among the run's raw files, is far finer than the 1 s of the old probe; its stamps
    are the node's monotonic clock, which is this host's on kind."""
    frame, _, results = policy_run
    timed = (
        ("policy", POLICY_R0, "enforcement", "policy_enforcement_time"),
        ("policy", POLICY_R100, "enforcement", "policy_enforcement_time"),
        ("policy", POLICY_R0, "removal", "policy_removal_time"),
        ("baseline", SERVICE_1000, "programming", "service_programming_time"),
    )
    for scenario, condition, key, metric in timed:
        (path,) = results.glob(f"*/verification-{scenario}-{SLUG}-{condition}.json")
        proof = json.loads(path.read_text())
        assert proof[f"{key}_probe_interval_ms"] <= 20, proof
        assert proof[f"{key}_probe_clock"] == "shared", proof
        assert proof[f"{key}_consecutive"] == 3, proof
        (value,) = frame[(frame["condition"] == condition) & (frame["metric"] == metric)]["value"]
        assert proof[f"{key}_seconds"] == pytest.approx(value, abs=1e-3), proof
        if scenario == "policy":
            # Started before the change: it saw the state it replaces first (the pod outside
            # the policy getting through; blocked, before the delete).
            assert proof[f"{key}_probe_saw_old_state"] >= 1, proof
        (log,) = results.glob(f"*/raw/*{condition}*/{metric}-probe.txt")
        spacing = sorted(parse_effect_probe(log.read_text()).intervals())
        assert spacing[len(spacing) // 2] <= 0.020


def test_each_node_and_the_agent_have_their_own_cpu_and_memory(
    policy_run: tuple[pd.DataFrame, str, Path],
) -> None:
    """Read from the node containers' cgroups: the agent (kube-router's pods on every node)
    used CPU and holds memory, each node holds memory; the host-wide figures stay. A node's CPU
    is its own only with napi=threaded (the Cilium module checks that): not recorded here."""
    frame, _, _ = policy_run
    ok = frame[frame["status"] == "ok"]
    runs = ok["run_id"].nunique()
    for metric, unit in (
        ("cpu@kube-router", "cores"),
        ("ram@kube-router", "MB"),
        ("ram@client", "MB"),
        ("ram@server", "MB"),
        ("cpu", "%"),
    ):
        values = ok[ok["metric"] == metric]
        assert values["run_id"].nunique() == runs, f"{metric} missing for some runs"
        assert (values["unit"] == unit).all(), (metric, set(values["unit"]))
        assert (values["value"] > 0).all(), (metric, values["value"].tolist())
    assert ok[ok["metric"].isin(["cpu@client", "cpu@server"])].empty
    # Two cores: the agent cannot use more.
    cores = ok[ok["unit"] == "cores"]
    assert cores["value"].le(2.5).all(), cores[["metric", "value"]].to_dict("records")
    agent_ram = ok[ok["metric"] == "ram@kube-router"]["value"]
    assert agent_ram.between(5, 2000).all(), agent_ram.tolist()


def test_the_pod_path_and_a_service_among_1000_in_nftables_are_measured(
    policy_run: tuple[pd.DataFrame, str, Path],
) -> None:
    frame, _, results = policy_run
    base = frame[(frame["scenario"] == "baseline") & (frame["metric"] == "throughput")]
    assert base.groupby("condition").size().to_dict() == {BASELINE: 2, SERVICE_1000: 2}
    assert bool(base["verified"].all())
    assert (base["value"] / 1e9).between(0.05, 400).all(), base["value"].tolist()
    (proof,) = results.glob(f"*/verification-baseline-*-{SERVICE_1000}.json")
    evidence = json.loads(proof.read_text())
    # The ClusterIP is no pod's: the answer names the server pod, so kube-proxy's nftables
    # rules translated it, with 1000 further Services in its maps.
    assert evidence["answered_by"] == "bl-srv", evidence
    assert evidence["url"].removeprefix("http://").startswith("10.96."), evidence
    programmed = frame[frame["metric"] == "service_programming_time"]
    assert list(programmed["condition"]) == [SERVICE_1000]  # once per set-up
    assert programmed["value"].between(0.0, 600).all(), programmed["value"].tolist()
    created = frame[frame["metric"] == "service_creation_time"]
    assert list(created["condition"]) == [SERVICE_1000]
    assert created["value"].between(0.1, 600).all(), created["value"].tolist()
    assert evidence["programming_seconds"] == pytest.approx(programmed["value"].iloc[0], abs=1e-3)
    # Once per run, not per set-up: one more ClusterIP Service among the 1000, at an address
    # of the static band, timed from its request by the probe that ran before it.
    added = frame[(frame["metric"] == "new_service_time") & (frame["condition"] == SERVICE_1000)]
    assert len(added) == 2, added
    assert added["value"].between(0.001, 120).all(), added["value"].tolist()
    for path in results.glob(f"*/raw/*{SERVICE_1000}*/new_service_time.json"):
        probe = json.loads(path.read_text())
        assert probe["new_service_time_probe_saw_old_state"] >= 1, probe
        assert probe["new_service_time_probe_interval_ms"] <= 20, probe
        assert probe.get("new_service_time_held_before_request") is None, probe
    leaks = frame[frame["metric"] == "new_service_time_leaks"]
    assert sorted(leaks["run_id"]) == sorted(added["run_id"])


def test_a_60_40_split_through_traefik_keeps_its_weights(
    policy_run: tuple[pd.DataFrame, str, Path],
) -> None:
    """The load generator on this host, through Traefik's Gateway on the egress-gw node: both
    backends answered, and each run's simultaneous interval for v1's share covers 0.60
    (Traefik's weighted round robin is deterministic, so its error is near zero)."""
    frame, _, results = policy_run
    split = retried_to_ok(frame[frame["scenario"] == "split"])
    assert set(split["condition"]) == {SPLIT}
    assert bool(split["verified"].all())
    by_run = _two_runs_covering_60_40(split)
    # The gateway's own pods, like the CNI's agent: Traefik worked for every request.
    assert (by_run["cpu@traefik"] > 0).all(), by_run["cpu@traefik"].tolist()
    assert by_run["ram@traefik"].between(5, 2000).all(), by_run["ram@traefik"].tolist()
    (proof,) = results.glob(f"*/verification-split-{SLUG}-{SPLIT}.json")
    evidence = json.loads(proof.read_text())
    assert evidence["ok"], evidence
    assert evidence["verify_v1"] > evidence["verify_v2"] > 0, evidence


WORKER_PODS = ("load-worker-0", "load-worker-1")
"""The pods of ``--load-workers 2`` (the scenario's names)."""


@pytest.fixture(scope="module")
def locust_run(
    policy_run: tuple[pd.DataFrame, str, Path],
    kube_router_images: dict[str, str],
    kind_results: Path,
) -> tuple[pd.DataFrame, Path]:
    """On the kept cluster: ``cnibench run ... --scenario split --weights v1=60,v2=40 --users
    10 --load-engine locust --load-workers 2``, locust's own master and two workers in client
    pods instead of load from this host."""
    results = kind_results / "kube-router-locust"
    args = run_args(CNI, results, "--scenario", "split", "--weights", "v1=60,v2=40")
    args += ["--users", "10", "--load-engine", "locust", "--load-workers", "2"]
    args += condition_args([SPLIT])
    done = cnibench(*args, env=kube_router_images, check=False, timeout=1800)
    output = done.stdout + done.stderr
    assert done.returncode == 0, output[-6000:]
    assert "Traceback" not in output
    return load_results(results), results


def test_locust_s_own_workers_in_client_pods_split_60_40(
    locust_run: tuple[pd.DataFrame, Path],
) -> None:
    """The records are verified; the two workers the master heard from were the two worker
    pods (a worker's id at the master starts with its pod's name, its hostname); both
    backends answered, and each run's simultaneous interval covers the configured 60/40."""
    frame, results = locust_run
    split = retried_to_ok(frame[frame["scenario"] == "split"])
    assert set(split["condition"]) == {SPLIT}
    assert bool(split["verified"].all())
    assert set(split["param_load_engine"]) == {"locust"}
    assert set(split["param_load_workers"].astype(int)) == {2}
    _two_runs_covering_60_40(split)
    summaries = list(results.glob(f"*/raw/split-{SLUG}-{SPLIT}-*/{LOAD_SUMMARY_FILE}"))
    assert len(summaries) >= 2, sorted(str(p) for p in results.rglob("*"))[:50]
    for path in summaries:
        summary = json.loads(path.read_text())
        pods = sorted(worker.rsplit("_", 1)[0] for worker in summary["workers"])
        assert pods == sorted(WORKER_PODS), summary
        assert summary["master"] == "load-master"
        assert ",Aggregated," in (path.parent / LOCUST_STATS_FILE).read_text()


def test_what_kube_router_does_not_offer_is_skipped_with_the_reason(
    policy_run: tuple[pd.DataFrame, str, Path], kube_router_images: dict[str, str]
) -> None:
    frame, output, _ = policy_run
    assert not set(frame["scenario"]) & set(NOT_HERE)  # nothing recorded for them
    skips = {
        line.split()[1].split("/")[0]: line
        for line in output.splitlines()
        if line.startswith("skipped ")
    }
    for scenario, words in NOT_HERE.items():
        assert words in skips.get(scenario, ""), (scenario, skips)
    assert len(cnibench_clusters(kube_router_images)) == 1  # the kept one, no other made


def _library_session(env: dict[str, str], monkeypatch: pytest.MonkeyPatch, results: Path) -> Any:
    for key in ("DOCKER_HOST", "CNIBENCH_IMAGES"):
        monkeypatch.setenv(key, env[key])
    config = SessionConfig(cluster="kind", cnis=(CNI,), keep_cluster=True, results_dir=results)
    return BenchSession(config)


@pytest.mark.kind_extended
def test_the_policy_check_fails_on_kube_router_when_the_policy_is_not_applied(
    policy_run: tuple[pd.DataFrame, str, Path],
    kube_router_images: dict[str, str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Negative control on the real engine: the condition set up and proven, then its policy
    removed: the probe matrix must now see the pod outside the policy get through."""
    with _library_session(kube_router_images, monkeypatch, tmp_path / "results") as session:
        policy = session.scenarios["policy"]
        (condition,) = (c for c in policy.conditions() if c.id == POLICY_R0)
        cluster = session.runner.pool.get(policy.cluster_spec(session.spec(CNI), condition))
        prepared = policy.prepare(cluster, condition, session.config.profile)
        try:
            applied = policy.verify(cluster, prepared, condition)
            cluster.remove_policy()
            for _ in range(10):  # until kube-router has synced its chains (a held check passes)
                time.sleep(PRIORITY_SETTLE)
                removed = policy.verify(cluster, prepared, condition)
                if not removed.ok:
                    break
        finally:
            policy.cleanup(cluster, prepared)
    assert applied.ok, applied.detail
    assert not removed.ok
    assert "probe matrix wrong" in removed.detail
    assert "pol-deny" in removed.detail


def _disturbing(
    scenario: Scenario,
    disturb: Callable[[Any, Prepared], None],
    measure: Callable[..., RunOutput] | None = None,
) -> Callable[..., RunOutput]:
    """``scenario.measure`` that first calls ``disturb(cluster, prepared)`` once, in the first
    run: its first resource reading is taken, the tool has not started yet (later attempts and
    runs are left alone)."""
    measure = measure or scenario.measure
    done: list[bool] = []

    def wrapped(
        cluster: Any, prepared: Prepared, condition: Condition, profile: Profile, repetition: int
    ) -> RunOutput:
        if not done:
            done.append(True)
            disturb(cluster, prepared)
        return measure(cluster, prepared, condition, profile, repetition)

    return wrapped


def _agent_on(core: Any, node: str) -> str:
    pods = core.list_namespaced_pod("kube-system", label_selector=f"k8s-app={AGENT}").items
    (name,) = (p.metadata.name for p in pods if p.spec.node_name == node)
    return str(name)


def _conditions(session: Any, scenario: str, *ids: str) -> list[Condition]:
    found = {c.id: c for c in session.scenarios[scenario].conditions()}
    return [found[i] for i in ids]


FAULTED = (BASELINE, "same-node-idle-iperf3", "same-node-idle-sockperf")
"""Conditions of the fault test: the agent deleted in the first's run, the server pod in the
second's, the third undisturbed."""


@pytest.mark.kind_extended
def test_an_agent_or_server_deleted_mid_run_fails_that_run_with_the_reason_and_the_next_runs(
    policy_run: tuple[pd.DataFrame, str, Path],
    kube_router_images: dict[str, str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Through the library, on the kept cluster: the kube-router pod on the client's node is
    deleted while the first condition's first run measures (the DaemonSet replaces it: the run
    cannot count, its datapath was not the one set up), then the server pod while the second's
    does; each ends in failed runs with the reason, and the conditions after them still run."""
    deleted: list[str] = []
    with _library_session(kube_router_images, monkeypatch, tmp_path / "results") as session:
        baseline = session.scenarios["baseline"]

        def delete_agent(cluster: Any, prepared: Prepared) -> None:
            core = cluster._runtime.core
            (node,) = (n.name for n in cluster.nodes if n.role is NodeRole.CLIENT)
            name = _agent_on(core, node)
            core.delete_namespaced_pod(name, "kube-system", grace_period_seconds=0)
            deleted.append(name)

        def delete_server(cluster: Any, prepared: Prepared) -> None:
            server = prepared.endpoints["server"]
            cluster._runtime.core.delete_namespaced_pod(
                server.name, server.namespace, grace_period_seconds=0
            )
            deleted.append(server.name)

        agent_first, server_second, undisturbed = _conditions(session, "baseline", *FAULTED)
        measure = baseline.measure
        monkeypatch.setattr(baseline, "measure", _disturbing(baseline, delete_agent))
        session.run_condition(baseline, session.spec(CNI), agent_first)
        monkeypatch.setattr(baseline, "measure", _disturbing(baseline, delete_server, measure))
        session.run_condition(baseline, session.spec(CNI), server_second)
        monkeypatch.setattr(baseline, "measure", measure)
        went_on = session.run_condition(baseline, session.spec(CNI), undisturbed)
    frame = load_results(tmp_path / "results")
    runs = frame.drop_duplicates("run_id").set_index("run_id")
    failed = runs[runs["status"] == RunStatus.FAILED.value]
    assert len(deleted) == 2, deleted
    agent_reasons = " ".join(failed[failed["condition"] == agent_first.id]["reason"])
    assert "the CNI agent restarted during the run" in agent_reasons, failed.to_dict("records")
    assert deleted[0] in agent_reasons
    server_failed = failed[failed["condition"] == server_second.id]
    assert len(server_failed) >= 1, runs.to_dict("records")
    assert server_failed["reason"].str.len().gt(0).all()
    assert went_on.verified
    assert went_on.ok_runs
    assert set(runs[runs["condition"] == undisturbed.id]["status"]) == {"ok"}


INTERRUPTS = int(os.environ.get("CNIBENCH_INTERRUPTS", "1"))
"""Ctrl-C points per tier run (``CNIBENCH_INTERRUPTS``; one in CI, about two minutes each):
drawn at random, the seed printed, so every CI run tries another point from set-up to
measuring."""


@pytest.mark.kind_extended
def test_ctrl_c_at_random_points_of_a_kind_run_leaves_nothing_half_done(
    policy_run: tuple[pd.DataFrame, str, Path],
    kube_router_images: dict[str, str],
    tmp_path: Path,
) -> None:
    """Each time: exit 130, no traceback, no session namespace left in the cluster, and every
    result file that was written is whole."""
    (cluster,) = cnibench_clusters(kube_router_images)  # kept by the policy run
    seed = int(os.environ.get("CNIBENCH_INTERRUPT_SEED", time.time_ns() % 10**6))
    print(f"interrupt seed {seed} (CNIBENCH_INTERRUPT_SEED reproduces it)")
    rng = random.Random(seed)
    for point in range(INTERRUPTS):
        delay = rng.uniform(0.0, 25.0)  # after the namespace exists: pods, proof, runs
        results = tmp_path / f"interrupted-{point}"
        argv = [
            sys.executable,
            "-m",
            "cnibench.cli",
            *run_args(CNI, results, "--scenario", "policy", "--rules", "100", "--clients", "1"),
            *condition_args((POLICY_R100,)),
            "--runs",
            "10",
        ]
        process = subprocess.Popen(
            argv,
            env=kube_router_images,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        try:
            deadline = time.monotonic() + 600
            while not session_namespaces(kube_router_images, cluster):
                assert process.poll() is None, process.communicate()[0][-3000:]
                assert time.monotonic() < deadline, "the run never created its namespace"
                time.sleep(0.5)
            time.sleep(delay)
            process.send_signal(signal.SIGINT)
            output, _ = process.communicate(timeout=300)
        finally:
            if process.poll() is None:
                process.kill()
                process.wait()
        where = f"point {point} ({delay:.1f} s after the namespace appeared)"
        assert process.returncode in (0, 130), (where, output[-3000:])
        assert "Traceback" not in output, where
        assert session_namespaces(kube_router_images, cluster) == [], where
        for path in results.rglob("*"):
            assert not path.name.endswith(".tmp"), (where, path)
            if path.suffix == ".json":
                json.loads(path.read_text())  # whole, or not there at all


def test_the_cluster_is_removed_with_nothing_of_the_module_left(
    policy_run: tuple[pd.DataFrame, str, Path], kube_router_images: dict[str, str]
) -> None:
    (kept,) = cnibench_clusters(kube_router_images)
    kind("delete", "cluster", "--name", kept, env=kube_router_images)
    assert cnibench_clusters(kube_router_images) == []
    nodes = subprocess.run(
        ["docker", "ps", "-a", "--filter", f"label=io.x-k8s.kind.cluster={kept}", "-q"],
        env=kube_router_images,
        capture_output=True,
        text=True,
        check=True,
    )
    assert nodes.stdout.strip() == ""


def _two_runs_covering_60_40(split: pd.DataFrame) -> pd.DataFrame:
    """The split's two runs, one row each (metrics as columns), after checking that each made
    over 100 requests and that its simultaneous intervals cover the configured 60/40."""
    by_run = split.pivot_table(index="run_id", columns="metric", values="value")
    assert len(by_run) == 2
    assert (by_run["requests"] > 100).all(), by_run["requests"].tolist()
    assert (by_run["share_low@v1"] <= 0.60).all(), by_run["share_low@v1"].tolist()
    assert (by_run["share_high@v1"] >= 0.60).all(), by_run["share_high@v1"].tolist()
    assert (by_run["share_low@v2"] <= 0.40).all()
    assert (by_run["share_high@v2"] >= 0.40).all()
    return by_run
