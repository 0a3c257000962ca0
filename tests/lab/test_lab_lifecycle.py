"""A lab leaves nothing behind: teardown, failed provisioning, and cleaning after a SIGKILL."""

from __future__ import annotations

import json
import os
import selectors
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from lab_support import Lab, provision_or_skip, spec_for

from cnibench.backends.base import NodeRole, WorkloadKind, WorkloadSpec
from cnibench.backends.lab import CleanReport, LabBackend, LabCluster, clean_leftovers
from cnibench.backends.lab import cluster as cluster_module
from cnibench.backends.lab.cgroups import LabCgroups
from cnibench.backends.lab.plan import LabPlan, Step
from cnibench.errors import ProvisioningError

NETNS = Path("/run/netns")
WG_SOCKETS = Path("/var/run/wireguard")
TWO_NODES = (NodeRole.CLIENT, NodeRole.SERVER)


def namespaces_of(lab_id: str) -> list[str]:
    return sorted(name for name in os.listdir(NETNS) if name.startswith(f"{lab_id}-"))


def sockets_of(lab_id: str) -> list[str]:
    if not WG_SOCKETS.is_dir():
        return []
    return sorted(name for name in os.listdir(WG_SOCKETS) if name.startswith(f"{lab_id}-"))


def cgroups_of(lab_id: str) -> list[Path]:
    """The lab's cgroup directories that exist (one per hierarchy this host counts with)."""
    return [d for d in LabCgroups(lab_id).directories() if d.is_dir()]


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"


@dataclass(frozen=True)
class Leftovers:
    """What existed of a lab before it was removed, and the lab's state directory."""

    lab_id: str
    namespaces: list[str]
    pids: list[int]
    sockets: list[str]
    state_dir: Path
    prometheus_url: str = ""
    cgroups: tuple[Path, ...] = ()


@pytest.fixture(scope="module")
def torn_down(lab_backend: LabBackend) -> tuple[Leftovers, LabCluster]:
    """A WireGuard lab with a pod and a port-forward, used and left by its context manager."""
    spec = spec_for("routed+wireguard", roles=TWO_NODES)
    with provision_or_skip(lab_backend, spec) as cluster:
        cluster.place(
            "srv",
            role=NodeRole.SERVER,
            workloads=(WorkloadSpec(WorkloadKind.HTTP_ECHO, 80),),
        )
        before = Leftovers(
            cluster.lab_id,
            namespaces_of(cluster.lab_id),
            sorted(cluster.recorded_pids),
            sockets_of(cluster.lab_id),
            cluster.state_dir,
            cluster.prometheus_url(),
            tuple(cgroups_of(cluster.lab_id)),
        )
    return before, cluster


def test_lab_had_namespaces_processes_and_sockets_before_teardown(
    torn_down: tuple[Leftovers, LabCluster],
) -> None:
    before, cluster = torn_down
    # underlay, 2 nodes, external, monitoring, 1 pod; a wireguard-go socket per node.
    sockets = 2 if cluster.wireguard_implementation == "wireguard-go" else 0
    assert (len(before.namespaces), len(before.pids) > 0, len(before.sockets)) == (6, True, sockets)


def test_teardown_deletes_every_namespace(torn_down: tuple[Leftovers, LabCluster]) -> None:
    before, _ = torn_down
    assert namespaces_of(before.lab_id) == []


def test_teardown_stops_every_recorded_process(torn_down: tuple[Leftovers, LabCluster]) -> None:
    before, _ = torn_down
    assert [pid for pid in before.pids if alive(pid)] == []


def test_teardown_removes_the_state_directory(torn_down: tuple[Leftovers, LabCluster]) -> None:
    before, _ = torn_down
    assert not before.state_dir.exists()


def test_teardown_removes_wireguard_sockets(torn_down: tuple[Leftovers, LabCluster]) -> None:
    before, _ = torn_down
    assert sockets_of(before.lab_id) == []


def test_teardown_removes_the_machines_cgroups(torn_down: tuple[Leftovers, LabCluster]) -> None:
    before, _ = torn_down
    assert (len(before.cgroups) > 0, cgroups_of(before.lab_id)) == (True, [])


def test_second_teardown_is_harmless(torn_down: tuple[Leftovers, LabCluster]) -> None:
    _, cluster = torn_down
    cluster.teardown()
    assert not cluster.state_dir.exists()


def test_torn_down_lab_refuses_new_pods(torn_down: tuple[Leftovers, LabCluster]) -> None:
    _, cluster = torn_down
    with pytest.raises(ProvisioningError, match="torn down"):
        cluster.place("late", role=NodeRole.CLIENT)


def test_failed_provisioning_names_the_step_and_removes_the_half_made_lab(
    lab_backend: LabBackend, monkeypatch: pytest.MonkeyPatch
) -> None:
    planned: list[LabPlan] = []

    def failing_vxlan_steps(plan: LabPlan) -> list[Step]:
        # Runs inside the lab's own underlay namespace, like every real step.
        planned.append(plan)
        return [
            Step(
                "create a link of an unknown kind",
                ("ip", "-n", plan.underlay_namespace, "link", "add", "x0", "type", "nosuchkind"),
            )
        ]

    monkeypatch.setattr(cluster_module, "vxlan_steps", failing_vxlan_steps)
    with pytest.raises(ProvisioningError) as info:
        lab_backend.provision(spec_for("routed", roles=TWO_NODES))
    (plan,) = planned
    leftovers = (namespaces_of(plan.lab_id), plan.state_dir.exists(), cgroups_of(plan.lab_id))
    assert ("create a link of an unknown kind failed" in str(info.value), leftovers) == (
        True,
        ([], False, []),
    )


def test_failed_provisioning_quotes_the_command_stderr(
    lab_backend: LabBackend, monkeypatch: pytest.MonkeyPatch
) -> None:
    def failing_route_steps(plan: LabPlan) -> list[Step]:
        return [Step("bad", ("ip", "-n", plan.underlay_namespace, "route", "add", "nonsense"))]

    monkeypatch.setattr(cluster_module, "route_steps", failing_route_steps)
    with pytest.raises(ProvisioningError, match="Error"):
        lab_backend.provision(spec_for("routed", roles=(NodeRole.CLIENT,)))


@pytest.mark.parametrize("lab", ["routed"], indirect=True)
def test_clean_leftovers_leaves_a_lab_in_use_alone(lab: Lab) -> None:
    report = clean_leftovers(lab_id=lab.cluster.lab_id)
    assert (report.skipped, len(namespaces_of(lab.cluster.lab_id)) > 0) == (
        (lab.cluster.lab_id,),
        True,
    )


@pytest.mark.parametrize("lab", ["routed"], indirect=True)
def test_clean_leftovers_dry_run_removes_nothing(lab: Lab) -> None:
    before = namespaces_of(lab.cluster.lab_id)
    report = clean_leftovers(lab_id=lab.cluster.lab_id, dry_run=True, include_active=True)
    assert (sorted(report.namespaces), namespaces_of(lab.cluster.lab_id)) == (before, before)


CHILD = """
import sys, time
from cnibench.backends.base import ClusterSpec, NodeRole, WorkloadKind, WorkloadSpec
from cnibench.backends.lab import LabBackend
spec = ClusterSpec(cni="routed", encryption=sys.argv[1], roles=(NodeRole.CLIENT, NodeRole.SERVER))
cluster = LabBackend().provision(spec)
cluster.place("srv", role=NodeRole.SERVER,
              workloads=[WorkloadSpec(WorkloadKind.IPERF3_SERVER, 5201)])
print(cluster.lab_id, flush=True)
time.sleep(120)
"""


def _read_line(proc: subprocess.Popen[str], timeout: float) -> str:
    assert proc.stdout is not None
    with selectors.DefaultSelector() as selector:
        selector.register(proc.stdout, selectors.EVENT_READ)
        if not selector.select(timeout=timeout):
            return ""
    return proc.stdout.readline().strip()


@pytest.fixture(scope="module")
def killed_then_cleaned(lab_backend: LabBackend) -> Iterator[tuple[Leftovers, CleanReport]]:
    """A child process provisions a lab and is SIGKILLed; then clean_leftovers runs."""
    encryption = "wireguard" if os.path.exists("/dev/net/tun") else ""
    child = subprocess.Popen(
        [sys.executable, "-c", CHILD, encryption],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    lab_id = ""
    try:
        lab_id = _read_line(child, timeout=60)
        assert lab_id, f"the child did not provision a lab: {child.stderr}"
        state_dir = Path("/run/cnibench") / lab_id
        lab_json = json.loads((state_dir / "lab.json").read_text())
        recorded = lab_json["processes"]
        child.send_signal(signal.SIGKILL)
        child.wait(timeout=10)
        before = Leftovers(
            lab_id,
            namespaces_of(lab_id),
            sorted(entry["pid"] for entry in recorded),
            sockets_of(lab_id),
            state_dir,
            cgroups=tuple(Path(d) for d in lab_json["cgroups"]),
        )
        report = clean_leftovers(lab_id=lab_id)
        yield before, report
    finally:
        if child.poll() is None:
            child.kill()
            child.wait(timeout=10)
        for pipe in (child.stdout, child.stderr):
            if pipe is not None:
                pipe.close()
        if lab_id:
            clean_leftovers(lab_id=lab_id, include_active=True)


def test_killed_lab_left_namespaces_and_processes(
    killed_then_cleaned: tuple[Leftovers, CleanReport],
) -> None:
    before, _ = killed_then_cleaned
    assert (len(before.namespaces) > 0, len(before.pids) > 0) == (True, True)


def test_clean_leftovers_deletes_the_killed_labs_namespaces(
    killed_then_cleaned: tuple[Leftovers, CleanReport],
) -> None:
    before, _ = killed_then_cleaned
    assert namespaces_of(before.lab_id) == []


def test_clean_leftovers_stops_the_killed_labs_processes(
    killed_then_cleaned: tuple[Leftovers, CleanReport],
) -> None:
    before, _ = killed_then_cleaned
    deadline = time.monotonic() + 5
    while any(alive(pid) for pid in before.pids) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert [pid for pid in before.pids if alive(pid)] == []


def test_clean_leftovers_removes_state_and_sockets(
    killed_then_cleaned: tuple[Leftovers, CleanReport],
) -> None:
    before, _ = killed_then_cleaned
    assert (before.state_dir.exists(), sockets_of(before.lab_id)) == (False, [])


def test_clean_leftovers_removes_the_killed_labs_cgroups(
    killed_then_cleaned: tuple[Leftovers, CleanReport],
) -> None:
    before, report = killed_then_cleaned
    assert len(before.cgroups) > 0
    assert (sorted(report.cgroups), [d for d in before.cgroups if d.exists()]) == (
        sorted(before.cgroups),
        [],
    )


def test_clean_report_names_the_lab(killed_then_cleaned: tuple[Leftovers, CleanReport]) -> None:
    before, report = killed_then_cleaned
    assert report.lab_ids == (before.lab_id,)


def test_port_forward_refuses_connections_after_teardown(
    torn_down: tuple[Leftovers, LabCluster],
) -> None:
    # The forward listened on 127.0.0.1 while the lab lived; nothing listens there now.
    before, _ = torn_down
    port = int(before.prometheus_url.rsplit(":", 1)[1])
    with socket.socket() as probe, pytest.raises(ConnectionRefusedError):
        probe.connect(("127.0.0.1", port))
