"""A kind node's and the CNI agent's own usage, read from cgroup trees laid out as the host
shows them (fake /proc and cgroup files, and a fake Docker SDK client naming each node's
container; the kind tier reads the real ones)."""

from __future__ import annotations

from pathlib import Path

import pytest

from cnibench.backends.base import ResourceUsage
from cnibench.backends.cgroupfs import read_usage
from cnibench.backends.kube.node_usage import (
    AgentPod,
    KindNodeUsage,
    agent_changes,
    find_pod_cgroup,
    sum_usage,
)
from cnibench.engine.api import EngineReads
from cnibench.errors import ProvisioningError
from engine_stand_in import FakeEngineClient, fake_engine, node_containers

UID = "0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0"
SLICE = (
    "kubelet.slice/kubelet-kubepods.slice/kubelet-kubepods-burstable.slice/"
    f"kubelet-kubepods-burstable-pod{UID.replace('-', '_')}.slice"
)


def _v1_cgroup(root: Path, relative: str, *, nanos: int, usage: int, inactive: int) -> None:
    cpu = root / "cpuacct" / relative
    memory = root / "memory" / relative
    cpu.mkdir(parents=True, exist_ok=True)
    memory.mkdir(parents=True, exist_ok=True)
    (cpu / "cpuacct.usage").write_text(f"{nanos}\n")
    (memory / "memory.usage_in_bytes").write_text(f"{usage}\n")
    (memory / "memory.max_usage_in_bytes").write_text(f"{usage * 2}\n")
    (memory / "memory.stat").write_text(f"cache 1\ntotal_inactive_file {inactive}\n")


def _no_host_commands(argv: list[str]) -> str:
    raise AssertionError(f"a reading ran a host command: {argv}")


def _usage(
    pids: dict[str, int], proc: Path, client: FakeEngineClient | None = None
) -> KindNodeUsage:
    """Node usage whose engine is a fake client holding ``pids``' node containers (unit tests
    have no engine) and which runs no host command."""
    engine = fake_engine(client or node_containers(pids))
    return KindNodeUsage(_no_host_commands, engine=engine, proc=proc)


def _fake_host(tmp_path: Path) -> tuple[Path, dict[str, int]]:
    """A /proc with two node containers' init processes in cgroup v1 (cpuacct, memory)."""
    proc = tmp_path / "proc"
    (proc / "self").mkdir(parents=True)
    cg = tmp_path / "cg"
    (proc / "self" / "mountinfo").write_text(
        f"33 31 0:30 / {cg}/cpuacct rw - cgroup cgroup rw,cpuacct\n"
        f"35 31 0:32 / {cg}/memory rw - cgroup cgroup rw,memory\n"
    )
    pids = {"kr-worker": 4242, "kr-worker2": 4343}
    for index, (node, pid) in enumerate(pids.items()):
        (proc / str(pid)).mkdir()
        (proc / str(pid) / "cgroup").write_text(
            # systemd, the node's init, sits in init.scope in one hierarchy: the node's cgroup
            # is the container's, above it.
            f"6:memory:/docker/{node}id/init.scope\n4:cpuacct:/docker/{node}id\n0::/\n"
        )
        _v1_cgroup(cg, f"docker/{node}id", nanos=(index + 1) * 10**9, usage=500, inactive=100)
        _v1_cgroup(cg, f"docker/{node}id/init.scope", nanos=1, usage=7, inactive=0)
    _v1_cgroup(cg, f"docker/kr-workerid/{SLICE}", nanos=250_000_000, usage=90, inactive=10)
    return proc, pids


def test_read_usage_counts_the_working_set_as_the_kubelet_does(tmp_path: Path) -> None:
    _v1_cgroup(tmp_path, "n", nanos=3_500_000_000, usage=1000, inactive=300)
    usage = read_usage(tmp_path / "cpuacct/n", cpu_v2=False, memory_dir=tmp_path / "memory/n")
    assert usage == ResourceUsage(3.5, 700, 2000)


def test_read_usage_on_cgroup_v2(tmp_path: Path) -> None:
    (tmp_path / "cpu.stat").write_text("usage_usec 1500000\nuser_usec 1\n")
    (tmp_path / "memory.current").write_text("4096\n")
    (tmp_path / "memory.stat").write_text("anon 1\ninactive_file 1024\n")
    usage = read_usage(tmp_path, cpu_v2=True, memory_dir=None)
    assert usage == ResourceUsage(1.5, 3072, None)


def test_read_usage_of_a_missing_cgroup_is_none(tmp_path: Path) -> None:
    assert read_usage(tmp_path / "gone", cpu_v2=False, memory_dir=None) is None


@pytest.mark.parametrize("name", [f"pod{UID}", f"x-pod{UID.replace('-', '_')}.slice"])
def test_a_pod_cgroup_is_found_by_its_uid_in_either_driver_naming(
    tmp_path: Path, name: str
) -> None:
    target = tmp_path / "kubepods" / "burstable" / name
    target.mkdir(parents=True)
    (tmp_path / "kubepods" / "burstable" / "pod-other").mkdir()
    assert find_pod_cgroup(tmp_path, UID) == target
    assert find_pod_cgroup(tmp_path, "no-such-uid") is None


def test_each_node_and_the_agent_pods_are_read_from_the_node_containers(tmp_path: Path) -> None:
    proc, pids = _fake_host(tmp_path)
    engine = node_containers(pids)
    usage = _usage(pids, proc, engine).usage(
        {"kr-worker": "client", "kr-worker2": "server"},
        {"kube-router": [AgentPod("kr-worker", "kube-router-abcde", UID)], "traefik": []},
    )
    # Without threaded receive a node's CPU is not its own (the sender pays): memory only.
    assert usage["client"] == ResourceUsage(None, 400)
    assert usage["server"] == ResourceUsage(None, 400)
    assert usage["kube-router"] == ResourceUsage(0.25, 80)
    # One request per node: its ID and PID together; the pod's node is known by then.
    assert engine.asked == [("container", "kr-worker"), ("container", "kr-worker2")]


def test_nodes_sharing_a_role_are_summed(tmp_path: Path) -> None:
    proc, pids = _fake_host(tmp_path)
    usage = _usage(pids, proc).usage({"kr-worker": "client", "kr-worker2": "client"}, {})
    assert usage == {"client": ResourceUsage(None, 800)}


def test_threaded_napi_counts_the_receive_threads_as_the_nodes_cpu(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Both ends of the node's link are threaded (the node's in the node, the peer's on the
    host, TSO off and GRO on), and the node's pollers' CPU joins the container's."""
    proc, pids = _fake_host(tmp_path)
    (proc / "777").mkdir()
    (proc / "777" / "schedstat").write_text("500000000 12 34\n")
    sys_net = tmp_path / "sys-class-net"
    (sys_net / "lo").mkdir(parents=True)
    ran: list[list[str]] = []

    def run(argv: list[str]) -> str:
        ran.append(argv)
        if argv[0] == "nsenter":
            return "1\n"  # the peer's ifindex: lo's, which every host has
        return ""

    asked: list[tuple[str, list[str]]] = []

    def threads(netns: str, interfaces: list[str]) -> dict[str, list[int]]:
        asked.append((netns, interfaces))
        return {"eth0": [777]}

    monkeypatch.setattr("cnibench.backends.kube.node_usage.napi_thread_pids", threads)
    engine = fake_engine(node_containers(pids))
    usage = KindNodeUsage(run, engine=engine, proc=proc, sys_class_net=sys_net)
    assert usage.thread_napi("kr-worker") == [777]
    assert usage.threaded == {"kr-worker"}
    node_end = next(argv for argv in ran if argv[0] == "nsenter")
    assert node_end[1] == f"--net={proc / '4242' / 'ns' / 'net'}"
    assert "tso off gro on" in node_end[-1]
    assert "/sys/class/net/eth0/threaded" in node_end[-1]
    assert ["ethtool", "-K", "lo", "tso", "off", "gro", "on"] in ran
    assert (sys_net / "lo" / "threaded").read_text() == "1\n"
    assert asked == [(str(proc / "4242" / "ns" / "net"), ["eth0"])]
    read = usage.usage({"kr-worker": "egress-gw", "kr-worker2": "server"}, {})
    assert read["egress-gw"] == ResourceUsage(1.5, 400)  # 1.0 s container + 0.5 s threads
    assert read["server"] == ResourceUsage(None, 400)  # not threaded: memory only


def test_threading_a_node_whose_kernel_has_no_threads_says_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    proc, pids = _fake_host(tmp_path)
    (tmp_path / "net" / "lo").mkdir(parents=True)
    monkeypatch.setattr(
        "cnibench.backends.kube.node_usage.napi_thread_pids", lambda netns, names: {"eth0": []}
    )

    engine = fake_engine(node_containers(pids))
    usage = KindNodeUsage(
        lambda argv: "1", engine=engine, proc=proc, sys_class_net=tmp_path / "net"
    )
    with pytest.raises(ProvisioningError, match="kr-worker has no NAPI thread"):
        usage.thread_napi("kr-worker")
    stopped = _usage({"kr-worker": 0}, proc)
    with pytest.raises(ProvisioningError, match="not a container of an engine on this machine"):
        stopped.thread_napi("kr-worker")


def test_an_engine_elsewhere_gives_no_usage(tmp_path: Path) -> None:
    """A PID that is not a process here (remote engine), a node the engine does not have, or
    an engine that does not answer."""
    proc, _ = _fake_host(tmp_path)
    assert _usage({"n": 999999}, proc).usage({"n": "client"}, {}) == {}
    assert _usage({}, proc).usage({"n": "client"}, {}) == {}
    unreachable = KindNodeUsage(
        _no_host_commands,
        engine=EngineReads(f"unix://{tmp_path / 'none.sock'}", timeout=1),
        proc=proc,
    )
    assert unreachable.usage({"n": "client"}, {}) == {}


def test_an_agent_pod_that_cannot_be_found_leaves_the_agent_out(tmp_path: Path) -> None:
    proc, pids = _fake_host(tmp_path)
    usage = _usage(pids, proc).usage(
        {"kr-worker": "client"}, {"kube-router": [AgentPod("kr-worker", "p", "other-uid")]}
    )
    assert set(usage) == {"client"}


def test_sum_usage_keeps_unknown_memory_unknown() -> None:
    assert sum_usage([ResourceUsage(1.0, 5), ResourceUsage(2.0, None)]) == ResourceUsage(3.0)
    assert sum_usage([]) is None


def test_agent_changes_name_every_pod_gone_replaced_restarted_or_new() -> None:
    before = {"a": ("u1", 0), "b": ("u2", 3), "c": ("u3", 0)}
    after = {"a": ("u1", 0), "b": ("u2", 5), "c": ("u9", 0), "d": ("u4", 0)}
    assert agent_changes(before, after) == (
        "pod b restarted (2 restarts since the run began); pod c was replaced; pod d is new"
    )
    assert agent_changes(before, {"a": ("u1", 0)}) == "pod b is gone; pod c is gone"
    assert agent_changes(before, dict(before)) == ""
