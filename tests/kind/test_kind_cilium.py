"""Cilium built from its Go module on real kind clusters: seed 001's two modes, the egress
gateway with each node's own CPU, network policy and policy precedence, measured on real pods.

Two clusters, one after the other: kube-proxy replacement with the egress gateway (``--cni
cilium:egress-gateway,napi=threaded``: the default mode, kind's ``kubeProxyMode: none``, the
egress gateway asked for by name, which also switches on BPF masquerading, each node receiving
in NAPI threads of its own)
runs every scenario the offline build offers and is kept for the negative control, which then
removes it; kube-proxy (iptables) mode with Traefik as its Gateway
(``--cni cilium:gateway=traefik,mode=kube-proxy``) runs the baseline and a 60/40 split. The
image set has no Envoy, so L7 and Cilium's own traffic splitting are skipped, with that reason.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import pandas as pd
import pytest

from cnibench.backends.base import ClusterSpec, NodeRole
from cnibench.backends.kube.external import inspect_docker_network
from cnibench.backends.kube.filters import PRIORITY_SETTLE
from cnibench.backends.kube.render import ROLE_LABEL
from cnibench.engine.api import EngineReads
from cnibench.results import load_results
from cnibench.session import BenchSession, SessionConfig
from cnibench.tools.effect_probe import parse_effect_probe

from .conftest import BUILD_TIMEOUT
from .kind_support import (
    check_baseline,
    cnibench,
    cnibench_clusters,
    condition_args,
    core_api,
    kind,
    retried_to_ok,
    run_args,
)

KPR, KUBE_PROXY = "cilium:egress-gateway,napi=threaded", "cilium:gateway=traefik,mode=kube-proxy"
"""Seed 001's two modes. Kube-proxy replacement asks for the egress gateway by name (no
default of either mode has it since the two modes differ in the Service proxy alone) and
receives in NAPI threads of each node's own, so that each node's CPU is its own (the egress
gateway's forwarding counted to the gateway node);
kube-proxy mode also runs Traefik as its Gateway API implementation, the second CNI a split
goes through (kube-router's module has the first)."""
KPR_SLUG = ClusterSpec.from_label(KPR).slug
SPLIT = "v1-60-v2-40-u10"
KPR_SERVICE = "cross-node-idle-iperf3-service-ebpf-0svc"
KUBE_PROXY_SERVICE = "cross-node-idle-iperf3-service-iptables-0svc"
"""Seed 001's comparison where it lies: through a ClusterIP, Cilium's eBPF against kube-proxy."""
MODE_BASELINE = ("cross-node-idle-iperf3", "cross-node-idle-sockperf", "same-node-idle-iperf3")
"""Seed 001's comparison of the two modes where it lies: iperf3 and sockperf across nodes,
iperf3 on one node (the four tools on both placements run on flannel; CI's time is short)."""
KPR_BASELINE = (*MODE_BASELINE, KPR_SERVICE)
KUBE_PROXY_BASELINE = (*MODE_BASELINE, KUBE_PROXY_SERVICE)
"""The same conditions in both modes, and iperf3 through a ClusterIP, each mode's own proxy."""
SERVICE_ARGS = (
    "--target", "pod,service", "--proxy", "ebpf,iptables", "--weights", "v1=60,v2=40",
    "--users", "10",
)  # fmt: skip
"""Both proxies asked for in both modes: each cluster measures the one it runs; a 60/40 split
at 10 users where a Gateway is offered."""
EGRESS_CONDITIONS = ("gateway-off", "gateway-on")
POLICY_ON = "on-cross-node-r0-c1"
POLICY_CONDITIONS = ("off-cross-node-c1", POLICY_ON)
PRIORITY_CONDITIONS = ("k8s-deny", "k8s-deny-and-cni-allow")
NOT_HERE = {
    ("l7", KPR): "needs Envoy",
    ("split", KPR): "needs Envoy",
    ("wireguard", KPR): "the wireguard kernel module, which this kernel lacks",
}
"""What the offline Cilium cannot run on this machine, and the words its skip line gives."""


@pytest.fixture(scope="module")
def cilium_images(offline_images: dict[str, str]) -> dict[str, str]:
    """The offline set with Cilium's images (its Go build, root filesystem and chart)."""
    cnibench(
        "images", "build", "--cni", "cilium", "--gateway", "traefik",
        env=offline_images, timeout=BUILD_TIMEOUT,
    )  # fmt: skip
    return offline_images


@pytest.fixture(scope="module", autouse=True)
def _no_cilium_cluster_outlives_the_module(offline_images: dict[str, str]) -> Iterator[None]:
    """The flannel tests after this module count the tier's clusters: a Cilium cluster a
    failed test kept must not make them fail too."""
    yield
    for name in cnibench_clusters(offline_images):
        kind("delete", "cluster", "--name", name, env=offline_images)


def _run(
    env: dict[str, str],
    cni: str,
    results: Path,
    conditions: tuple[str, ...],
    *scenarios: str,
    keep: bool,
    sequential: bool = False,
) -> str:
    args = run_args(cni, results, *SERVICE_ARGS, *condition_args(conditions))
    if not keep:
        args.remove("--keep-cluster")
    for scenario in scenarios:
        args += ["--scenario", scenario]
    if sequential:
        args.append("--sequential")
    done = cnibench(*args, env=env, check=False, timeout=3600)
    output = done.stdout + done.stderr
    # 0: all measured; 1 would mean a failed or unverified condition (skips alone do not count).
    assert done.returncode == 0, output[-6000:]
    assert "Traceback" not in output
    print(done.stdout)
    return output


@pytest.fixture(scope="module")
def kpr_run(cilium_images: dict[str, str], kind_results: Path) -> tuple[pd.DataFrame, str, Path]:
    """Every scenario on Cilium with kube-proxy replacement; the cluster is kept."""
    results = kind_results / "cilium-kpr"
    conditions = (
        KPR_BASELINE
        + EGRESS_CONDITIONS
        + POLICY_CONDITIONS
        + PRIORITY_CONDITIONS
        + ("on-iperf3", "policy-on", SPLIT)  # wireguard, l7, split: skipped here
    )
    output = _run(
        cilium_images,
        KPR,
        results,
        conditions,
        "baseline",
        "egress",
        "policy",
        "priority",
        "wireguard",
        "l7",
        "split",
        keep=True,
        # These tests check what each scenario measured, not the order; interleaved, the
        # baseline's, egress', policy's and priority's conditions would each be set up again
        # every round (10 more set-ups, priority's with its settle time: about a minute of CI).
        # The kube-proxy-mode run below interleaves its baseline on Cilium.
        sequential=True,
    )
    return load_results(results), output, results


def test_kpr_baseline_is_verified_and_plausible(kpr_run: tuple[pd.DataFrame, str, Path]) -> None:
    frame, _, _ = kpr_run
    assert set(frame["cni"]) == {KPR}
    assert frame["cni_version"].str.contains("1.18").all()
    check_baseline(frame, KPR, KPR_BASELINE)


def _evidence(results: Path, frame: pd.DataFrame, condition: str) -> list[dict[str, object]]:
    run_ids = frame[frame["condition"] == condition]["run_id"].unique()
    assert len(run_ids) >= 2, (condition, run_ids)
    # results/<session>/raw/<run>/evidence.json: what the run's own check saw
    return [
        json.loads(next(results.glob(f"*/raw/{run_id}/evidence.json")).read_text())
        for run_id in run_ids
    ]


def _node_ip(env: dict[str, str], role: NodeRole) -> str:
    (cluster,) = cnibench_clusters(env)
    (node,) = core_api(env, cluster).list_node(label_selector=f"{ROLE_LABEL}={role}").items
    return next(a.address for a in node.status.addresses if a.type == "InternalIP")


def test_the_external_server_sees_the_client_node_then_the_gateway_node(
    kpr_run: tuple[pd.DataFrame, str, Path], cilium_images: dict[str, str]
) -> None:
    """Seed 000's check on a real Cilium: the iperf3 server on the kind network's host side
    sees the client node's address without the gateway and the gateway node's with it."""
    frame, _, results = kpr_run
    egress = retried_to_ok(frame[frame["scenario"] == "egress"])
    assert set(egress["condition"]) == set(EGRESS_CONDITIONS)
    assert bool(egress["verified"].all())
    client_ip = _node_ip(cilium_images, NodeRole.CLIENT)
    gateway_ip = _node_ip(cilium_images, NodeRole.EGRESS_GW)
    assert client_ip != gateway_ip
    for condition, expected in (("gateway-off", client_ip), ("gateway-on", gateway_ip)):
        seen = {str(e["source_seen"]) for e in _evidence(results, egress, condition)}
        assert seen == {expected}, (condition, seen)
    throughput = egress[egress["metric"] == "throughput"]
    assert (throughput["value"] / 1e9).between(0.01, 400).all(), throughput["value"].tolist()


def test_the_gateway_s_takeover_is_timed_by_the_probe_against_the_source_echo(
    kpr_run: tuple[pd.DataFrame, str, Path], cilium_images: dict[str, str]
) -> None:
    """From the egress policy's apply call until the host-side source echo names the gateway
    node instead of the client node, every 10 ms from a probe in the client pod: once per
    set-up of gateway-on, with what still left from the client node's address meanwhile."""
    frame, _, results = kpr_run
    egress = retried_to_ok(frame[frame["scenario"] == "egress"])
    timed = egress[egress["metric"] == "egress_gateway_takeover_time"]
    assert set(timed["condition"]) == {"gateway-on"}
    assert timed["value"].between(0.0, 90.0).all(), timed["value"].tolist()
    leaks = egress[egress["metric"] == "egress_gateway_takeover_time_leaks"]
    assert sorted(leaks["run_id"]) == sorted(timed["run_id"])
    client_ip = _node_ip(cilium_images, NodeRole.CLIENT)
    gateway_ip = _node_ip(cilium_images, NodeRole.EGRESS_GW)
    logs = sorted(results.glob("*/raw/*gateway-on*/egress_gateway_takeover_time-probe.txt"))
    assert len(logs) >= len(timed) > 0
    for log_path in logs:
        log = parse_effect_probe(log_path.read_text())
        answered = {a.answered_by for a in log.attempts if a.status == 200}
        assert answered <= {client_ip, gateway_ip}, answered
        assert gateway_ip in answered, answered
        spacing = sorted(log.intervals())
        assert spacing[len(spacing) // 2] <= 0.020


def test_the_cilium_agents_own_cpu_and_memory_are_recorded(
    kpr_run: tuple[pd.DataFrame, str, Path],
) -> None:
    """Read from the node containers' cgroups, every measured run (priority's probes record no
    resources): the agents (one per node) used CPU and hold memory, and each node's working set
    is its own."""
    frame, _, _ = kpr_run
    ok = frame[(frame["status"] == "ok") & (frame["scenario"] != "priority")]
    runs = ok["run_id"].nunique()
    for metric in ("cpu@cilium-agent", "ram@cilium-agent", "ram@egress-gw", "ram@server"):
        values = ok[ok["metric"] == metric]
        assert values["run_id"].nunique() == runs, f"{metric} missing for some runs"
        assert (values["value"] > 0).all(), (metric, values["value"].tolist())
    assert ok[ok["metric"] == "ram@cilium-agent"]["value"].between(20, 4000).all()


def test_the_egress_gateway_node_s_own_cpu_is_above_an_idle_node_s(
    kpr_run: tuple[pd.DataFrame, str, Path],
) -> None:
    """Seed 000's point, on real nodes: with napi=threaded each kind node receives in kernel
    threads counted to its container, so the gateway's forwarding is the gateway node's CPU.
    With the gateway on, the gateway node works harder than the server node (idle in this
    scenario: the server is outside the cluster) in every run, and harder than it does itself
    with the gateway off."""
    frame, _, _ = kpr_run
    egress = frame[(frame["scenario"] == "egress") & (frame["status"] == "ok")]
    cpu = egress.pivot_table(index=["condition", "run_id"], columns="metric", values="value")
    on, off = cpu.loc["gateway-on"], cpu.loc["gateway-off"]
    assert min(len(on), len(off)) >= 2, cpu
    assert (on["cpu@egress-gw"] > on["cpu@server"]).all(), cpu.to_string()
    assert on["cpu@egress-gw"].mean() > off["cpu@egress-gw"].mean(), cpu.to_string()
    assert (cpu[["cpu@egress-gw", "cpu@server", "cpu@client"]] > 0).all().all(), cpu.to_string()


def test_policy_probe_matrix_holds_on_cilium(kpr_run: tuple[pd.DataFrame, str, Path]) -> None:
    frame, _, results = kpr_run
    policy = frame[frame["scenario"] == "policy"]
    assert set(policy["condition"]) == set(POLICY_CONDITIONS)
    assert bool(policy["verified"].all())
    assert set(policy["status"]) == {"ok"}
    for condition in POLICY_CONDITIONS:
        # results/<session>/verification-<scenario>-<cni>-<condition>.json: the set-up's proof
        (path,) = results.glob(f"*/verification-policy-{KPR_SLUG}-{condition}.json")
        proof = json.loads(path.read_text())
        assert proof["ok"], proof
        assert proof["probes_ok"] == proof["probes"] >= 3, proof
        (denied,) = (c for c in proof["probe_matrix"].split(";") if c.startswith("pol-deny->"))
        want = "deny" if condition.startswith("on-") else "allow"  # the pod outside the policy
        assert denied.endswith(f"/{want}/ok"), proof
    rate = policy[policy["metric"] == "new_connections_per_second"]
    assert (rate["value"] > 0).all(), rate["value"].tolist()


def test_priority_cases_match_the_reference_order(
    kpr_run: tuple[pd.DataFrame, str, Path],
) -> None:
    """A Kubernetes deny alone blocks the client; with a Cilium allow beside it, Cilium's
    union of allows lets the client through (both what the reference order decides)."""
    frame, _, _ = kpr_run
    priority = frame[frame["scenario"] == "priority"]
    assert set(priority["condition"]) == set(PRIORITY_CONDITIONS)
    reachable = priority[priority["metric"] == "reachable"].groupby("condition")["value"]
    assert set(reachable.min()) <= {0.0, 1.0}
    assert reachable.max()["k8s-deny"] == 0.0
    assert reachable.min()["k8s-deny-and-cni-allow"] == 1.0
    matches = priority[priority["metric"] == "matches_reference"]
    assert (matches["value"] == 1.0).all(), matches[["condition", "value"]].to_dict("records")


def test_what_offline_cilium_cannot_run_is_skipped_with_the_reason(
    kpr_run: tuple[pd.DataFrame, str, Path],
) -> None:
    _, output, _ = kpr_run
    skips = {
        tuple(line.split()[1].split("/")): line
        for line in output.splitlines()
        if line.startswith("skipped ")
    }
    for key, words in NOT_HERE.items():
        assert words in skips.get(key, ""), (key, skips)


def test_the_kept_cilium_cluster_reached_by_its_kubeconfig_runs_egress_and_policy(
    kpr_run: tuple[pd.DataFrame, str, Path],
    cilium_images: dict[str, str],
    tmp_path: Path,
) -> None:
    """The same cluster as a platform team has it: only its kubeconfig, --cluster existing.
    Cilium is found and named; a --cni that disagrees is refused in one line; egress (to an
    external server on this host, at the kind network's gateway) and policy are verified."""
    (kept,) = cnibench_clusters(cilium_images)
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(kind("get", "kubeconfig", "--name", kept, env=cilium_images))
    # The tier's engine is passed explicitly: the test process has no DOCKER_HOST of its own.
    gateway = inspect_docker_network(reads=EngineReads(cilium_images["DOCKER_HOST"])).gateway
    env = {**cilium_images, "KUBECONFIG": str(kubeconfig), "CNIBENCH_EXTERNAL_ADDRESS": gateway}
    results = tmp_path / "results"
    common = ["run", "--cluster", "existing", "--profile", "smoke", "--results-dir", str(results)]
    wrong = cnibench(*common, "--cni", "flannel", env=env, check=False, timeout=600)
    assert wrong.returncode == 2, wrong.stdout + wrong.stderr
    refusals = [line for line in wrong.stderr.splitlines() if "this cluster runs" in line]
    assert len(refusals) == 1, wrong.stderr
    assert "--cni flannel: this cluster runs cilium" in refusals[0]
    assert "Traceback" not in wrong.stderr
    assert not results.exists() or not list(results.rglob("*.jsonl"))
    # The egress gateway is a feature asked for by name (no mode has it by default).
    args = [*common, "--cni", "cilium:egress-gateway", "--scenario", "egress"]
    args += ["--scenario", "policy"]
    args += condition_args(EGRESS_CONDITIONS + POLICY_CONDITIONS)
    done = cnibench(*args, env=env, check=False, timeout=1800)
    output = done.stdout + done.stderr
    assert done.returncode == 0, output[-6000:]
    assert "CNI: this cluster runs cilium" in output
    df = retried_to_ok(load_results(results))
    assert set(df["scenario"]) == {"egress", "policy"}
    assert set(df["condition"]) == set(EGRESS_CONDITIONS + POLICY_CONDITIONS)
    assert bool(df["verified"].all())
    assert cnibench_clusters(cilium_images) == [kept]  # an existing cluster is never removed


@pytest.mark.kind_extended
def test_the_policy_check_fails_on_cilium_when_the_policy_is_not_applied(
    kpr_run: tuple[pd.DataFrame, str, Path],
    cilium_images: dict[str, str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Negative control on the real CNI: the kept cluster, the policy condition set up, then its
    policy removed: the probe matrix must now see the pod outside the policy get through. The
    session does not keep the cluster, so it removes it at the end."""
    for key in ("DOCKER_HOST", "CNIBENCH_IMAGES"):
        monkeypatch.setenv(key, cilium_images[key])
    config = SessionConfig(cluster="kind", cnis=(KPR,), results_dir=tmp_path / "results")
    with BenchSession(config) as session:
        policy = session.scenarios["policy"]
        (condition,) = (c for c in policy.conditions() if c.id == POLICY_ON)
        cluster = session.runner.pool.get(policy.cluster_spec(session.spec(KPR), condition))
        prepared = policy.prepare(cluster, condition, config.profile)
        try:
            applied = policy.verify(cluster, prepared, condition)
            cluster.remove_policy()
            for _ in range(6):  # until Cilium has unloaded it (a still-enforced check passes)
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
    assert cnibench_clusters(cilium_images) == []


@pytest.fixture(scope="module")
def kube_proxy_run(
    cilium_images: dict[str, str], kind_results: Path
) -> tuple[pd.DataFrame, str, Path]:
    """The baseline on Cilium with iperf3 kube-proxy kept (a cluster of its own, removed at
    the end of the run), and the egress gateway, which needs kube-proxy replacement."""
    assert cnibench_clusters(cilium_images) == []  # one Cilium cluster at a time
    results = kind_results / "cilium-kube-proxy"
    conditions = (*KUBE_PROXY_BASELINE, *EGRESS_CONDITIONS, SPLIT)
    output = _run(
        cilium_images, KUBE_PROXY, results, conditions, "baseline", "egress", "split", keep=False
    )
    return load_results(results), output, results


@pytest.mark.kind_extended
def test_kube_proxy_mode_baseline_is_verified_and_plausible(
    kube_proxy_run: tuple[pd.DataFrame, str, Path], cilium_images: dict[str, str]
) -> None:
    frame, output, _ = kube_proxy_run
    assert set(frame["cni"]) == {KUBE_PROXY}
    check_baseline(frame, KUBE_PROXY, KUBE_PROXY_BASELINE)
    egress_skip = next(
        line for line in output.splitlines() if line.startswith(f"skipped egress/{KUBE_PROXY}")
    )
    assert "--cni cilium:egress-gateway" in egress_skip
    assert cnibench_clusters(cilium_images) == []  # not kept: the run removed it


@pytest.mark.kind_extended
def test_a_60_40_split_through_traefik_on_cilium_keeps_its_weights(
    kube_proxy_run: tuple[pd.DataFrame, str, Path],
) -> None:
    """The second CNI under Traefik's Gateway: each run's interval for v1's share covers
    0.60."""
    frame, _, _ = kube_proxy_run
    split = frame[(frame["scenario"] == "split") & (frame["status"] == "ok")]
    by_run = split.pivot_table(index="run_id", columns="metric", values="value")
    assert len(by_run) == 2
    assert bool(split["verified"].all())
    assert (by_run["share_low@v1"] <= 0.60).all(), by_run["share_low@v1"].tolist()
    assert (by_run["share_high@v1"] >= 0.60).all(), by_run["share_high@v1"].tolist()


@pytest.mark.kind_extended
def test_both_modes_load_as_one_comparison(
    kpr_run: tuple[pd.DataFrame, str, Path],
    kube_proxy_run: tuple[pd.DataFrame, str, Path],
) -> None:
    """Seed 001's comparison from the tier's artefacts: ``cnibench.load_results`` of both
    result directories gives both modes, side by side, under their own labels."""
    frames = [load_results(results) for _, _, results in (kpr_run, kube_proxy_run)]
    both = pd.concat(frames)
    cross = both[(both["condition"] == "cross-node-idle-iperf3") & (both["metric"] == "throughput")]
    per_mode = cross.groupby("cni")["value"].count()
    assert set(per_mode.index) == {KPR, KUBE_PROXY}
    assert (per_mode >= 2).all()
    # The Service path, each mode through its own proxy, verified like the pod path.
    service = both[both["condition"].isin([KPR_SERVICE, KUBE_PROXY_SERVICE])]
    service = service[service["metric"] == "throughput"]
    assert service.groupby(["cni", "condition"])["value"].count().to_dict() == {
        (KPR, KPR_SERVICE): 2,
        (KUBE_PROXY, KUBE_PROXY_SERVICE): 2,
    }
    assert bool(service["verified"].all())
