"""Each lab machine's own CPU and memory: its processes, its pods' and, with ``napi=threaded``,
the kernel threads that receive its packets, counted in cgroups of its own.

The proof that the numbers mean something is the egress gateway: while a client pod sends to the
external host through the gateway, the gateway node forwards every packet, and with threaded
NAPI that work runs in the gateway's own receive thread. Its CPU must then stand clearly above
an idle node's, and above its own CPU while the gateway is off.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pandas as pd
import pytest
from lab_support import provision_or_skip

from cnibench import load_results
from cnibench.backends.base import ClusterSpec, NodeRole, WorkloadKind, WorkloadSpec
from cnibench.backends.lab import LabBackend, LabCluster
from cnibench.backends.lab.cgroups import LabCgroups
from cnibench.scenarios.egress import INSTRUMENTED_PACE
from suite_support import run_cnibench

EXTERNAL_PORT = 5201
SECONDS = 3


@pytest.fixture(scope="module")
def threaded(lab_backend: LabBackend) -> Iterator[LabCluster]:
    """A routed lab whose machines receive in threaded NAPI pollers."""
    cluster = provision_or_skip(
        lab_backend, ClusterSpec(cni="routed", options={"napi": "threaded"})
    )
    try:
        yield cluster
    finally:
        cluster.teardown()


def _member(cluster: LabCluster, role: NodeRole) -> str:
    return cluster.node(role).name.removeprefix(f"{cluster.lab_id}-")


def _cgroup_lines(text: str) -> dict[str, str]:
    """``/proc/<pid>/cgroup`` as controller list -> path."""
    return {line.split(":", 2)[1]: line.split(":", 2)[2] for line in text.splitlines() if line}


def test_a_pods_command_and_its_children_run_in_their_nodes_cgroups(
    threaded: LabCluster,
) -> None:
    pod = threaded.place("cg-probe", role=NodeRole.SERVER)
    try:
        # The second cat is a grandchild: sh forks it.
        result = pod.run(["sh", "-c", "cat /proc/self/cgroup; (cat /proc/self/cgroup)"], timeout=10)
    finally:
        threaded.remove(pod)
    assert result.returncode == 0, result.stderr
    halves = result.stdout.strip().split("\n")
    first, second = halves[: len(halves) // 2], halves[len(halves) // 2 :]
    wanted = f"/cnibench-{threaded.lab_id}/{_member(threaded, NodeRole.SERVER)}"
    for lines in (first, second):
        paths = _cgroup_lines("\n".join(lines))
        counted = [p for c, p in paths.items() if "cpuacct" in c.split(",") or c == ""]
        assert any(p.endswith(wanted) for p in counted), lines


def test_every_machine_has_its_receive_thread_in_its_own_cgroup(threaded: LabCluster) -> None:
    (root, *_) = LabCgroups(threaded.lab_id).directories()
    members = threaded.plan.machines
    threads: dict[str, list[str]] = {}
    for member in members:
        tasks = (root / member / "cgroup.procs").read_text().split()
        threads[member] = [
            Path(f"/proc/{pid}/comm").read_text().strip()
            for pid in tasks
            if Path(f"/proc/{pid}/comm").exists()
        ]
    napi = {m: [c for c in comms if c.startswith("napi/eth0-")] for m, comms in threads.items()}
    assert {m: len(found) for m, found in napi.items()} == dict.fromkeys(members, 1)


def _usage_during(cluster: LabCluster, client_pod: object, seconds: int) -> dict[str, float]:
    """CPU seconds per second of each machine while ``client_pod`` sends to the external host."""
    external = cluster.external
    before = cluster.resource_usage()
    future = external.iperf3_server_once(port=EXTERNAL_PORT, timeout=seconds + 20)
    result = client_pod.run(  # type: ignore[attr-defined]
        ["iperf3", "-c", external.ip, "-p", str(EXTERNAL_PORT), "-t", str(seconds)],
        timeout=seconds + 20,
    )
    assert result.returncode == 0, result.stderr
    assert future.result().received_bits_per_second > 0
    after = cluster.resource_usage()
    spent: dict[str, float] = {}
    for name, end in after.items():
        start = before[name]
        assert start.cpu_seconds is not None
        assert end.cpu_seconds is not None
        spent[name] = (end.cpu_seconds - start.cpu_seconds) / seconds
    return spent


def test_the_gateway_node_pays_for_forwarding_and_an_idle_node_does_not(
    threaded: LabCluster,
) -> None:
    client = threaded.place("cg-client", role=NodeRole.CLIENT)
    try:
        off = _usage_during(threaded, client, SECONDS)
        threaded.enable_egress_gateway([client], destination=f"{threaded.external.ip}/32")
        try:
            on = _usage_during(threaded, client, SECONDS)
        finally:
            threaded.disable_egress_gateway()
    finally:
        threaded.remove(client)
    assert set(on) == {"client", "server", "egress-gw", "external", "monitoring"}
    # Forwarding a few Gbit/s takes a good part of a core; an idle node runs node-exporter.
    assert on["egress-gw"] > 0.1, on
    assert on["egress-gw"] > 5 * on["server"], on
    assert on["egress-gw"] > 5 * off["egress-gw"], (on, off)
    # The sender and the receiver pay in both cases.
    assert min(on["client"], on["external"], off["client"], off["external"]) > 0.1, (on, off)


def test_memory_is_counted_per_machine_and_its_peak_restarts_on_request(
    threaded: LabCluster,
) -> None:
    pod = threaded.place(
        "cg-mem",
        role=NodeRole.SERVER,
        workloads=(WorkloadSpec(WorkloadKind.HTTP_ECHO, 80),),
    )
    try:
        usage = threaded.resource_usage(reset_peak=True)
        server = usage["server"]
        if server.memory_bytes is None:
            pytest.skip("this host has no memory cgroup for the lab's machines")
        assert server.memory_bytes > 0
        # Fill 64 MiB of page-cache-free memory in the server's cgroup, then let it go.
        done = pod.run(
            ["python3", "-c", "b = bytearray(64 << 20); b[::4096] = b'x' * len(b[::4096])"],
            timeout=30,
        )
        assert done.returncode == 0, done.stderr
        peak = threaded.resource_usage(reset_peak=True)["server"].memory_peak_bytes
        assert peak is not None
        assert peak >= server.memory_bytes + (60 << 20)
        after_reset = threaded.resource_usage()["server"].memory_peak_bytes
        assert after_reset is not None
        assert after_reset < peak - (32 << 20)
    finally:
        threaded.remove(pod)


def test_an_inline_lab_counts_processes_per_machine_but_threads_nothing(
    lab_backend: LabBackend,
) -> None:
    spec = ClusterSpec(cni="routed", roles=(NodeRole.CLIENT, NodeRole.SERVER))
    with provision_or_skip(lab_backend, spec) as cluster:
        usage = cluster.resource_usage()
        assert set(usage) == {"client", "server", "external", "monitoring"}
        # Receive work is counted by the sender here, so no machine's CPU is its own.
        assert [u.cpu_seconds for u in usage.values()] == [None] * 4
        (root, *_) = LabCgroups(cluster.lab_id).directories()
        comms = [
            Path(f"/proc/{pid}/comm").read_text().strip()
            for member in cluster.plan.machines
            for pid in (root / member / "cgroup.procs").read_text().split()
            if Path(f"/proc/{pid}/comm").exists()
        ]
        assert "prometheus-node" in " ".join(comms) or "node_exporter" in " ".join(comms), comms
        assert not [c for c in comms if c.startswith("napi/")]


def test_a_run_records_each_nodes_cpu_beside_the_host_wide_cpu(tmp_path: Path) -> None:
    results = tmp_path / "results"
    done = run_cnibench(
        "run",
        "--cluster",
        "lab",
        "--cni",
        "routed:napi=threaded",
        "--scenario",
        "egress",
        "--profile",
        "smoke",
        "--results-dir",
        results,
        timeout=600,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    frame = load_results(results)
    ok = frame[frame["status"] == "ok"]
    cpu = ok[ok["metric"].str.startswith("cpu")]
    units = dict(zip(cpu["metric"], cpu["unit"], strict=False))
    assert units["cpu"] == "%"
    assert units["cpu@egress-gw"] == "cores"
    wide = cpu.pivot_table(index=["condition", "run_id"], columns="metric", values="value")
    on = wide.loc["gateway-on"]
    off = wide.loc["gateway-off"]
    assert isinstance(on, pd.DataFrame)
    assert len(on) == 2
    assert (on["cpu@egress-gw"] > 5 * on["cpu@server"]).all(), on
    assert on["cpu@egress-gw"].min() > 5 * off["cpu@egress-gw"].max(), (on, off)
    assert (on["cpu"] > 0).all()
    # Instrumented runs are paced, so the gateway's CPU is compared at one load, on and off.
    offered = ok[ok["metric"] == "offered_load"]
    assert len(offered) == 4
    assert (offered["value"] == INSTRUMENTED_PACE).all()
    sent = ok[ok["metric"] == "throughput"]["value"]
    assert sent.between(0.8 * INSTRUMENTED_PACE, 1.05 * INSTRUMENTED_PACE).all(), sent
