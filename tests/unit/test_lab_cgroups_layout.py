"""Where a lab's per-node cgroups go, read from /proc texts (no root needed)."""

from __future__ import annotations

from pathlib import Path

from cnibench.backends.lab.cgroups import (
    CgroupLayout,
    enter_argv,
    layout_from,
    member_of_namespace,
)

HYBRID_CGROUP = "4:memory:/process_api/abc\n2:cpuacct:/\n1:cpu:/\n0::/\n"
HYBRID_MOUNTS = (
    "31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755\n"
    "32 31 0:29 / {root}/cpu rw,relatime - cgroup cgroup rw,cpu\n"
    "33 31 0:30 / {root}/cpuacct rw,relatime - cgroup cgroup rw,cpuacct\n"
    "35 31 0:32 / {root}/memory rw,relatime - cgroup cgroup rw,memory\n"
    "40 31 0:37 / {root}/unified rw,relatime - cgroup2 cgroup2 rw\n"
)


def _tree(tmp_path: Path, *dirs: str) -> Path:
    for d in dirs:
        (tmp_path / d).mkdir(parents=True)
    return tmp_path


def test_hybrid_v1_counts_cpu_in_cpuacct_and_memory_below_our_own_memory_cgroup(
    tmp_path: Path,
) -> None:
    root = _tree(tmp_path, "cpu", "cpuacct", "memory/process_api/abc", "unified")
    layout = layout_from(HYBRID_CGROUP, HYBRID_MOUNTS.format(root=root))
    assert layout == CgroupLayout(
        cpu=root / "cpuacct", cpu_v2=False, memory=root / "memory/process_api/abc"
    )


def test_pure_v2_counts_cpu_in_cpu_stat_of_our_own_cgroup(tmp_path: Path) -> None:
    root = _tree(tmp_path, "user.slice/session-1.scope")
    mounts = f"30 23 0:26 / {root} rw,nosuid - cgroup2 cgroup2 rw,nsdelegate\n"
    layout = layout_from("0::/user.slice/session-1.scope\n", mounts)
    assert layout == CgroupLayout(cpu=root / "user.slice/session-1.scope", cpu_v2=True, memory=None)


def test_a_container_bind_mount_of_its_own_cgroup_is_followed(tmp_path: Path) -> None:
    # Inside a container the mount's root is the container's cgroup, mounted as /.
    root = _tree(tmp_path, "job")
    mounts = f"30 23 0:26 /docker/c0ffee {root} rw - cgroup2 cgroup2 rw\n"
    layout = layout_from("0::/docker/c0ffee/job\n", mounts)
    assert layout.cpu == root / "job"
    assert layout_from("0::/elsewhere\n", mounts).cpu is None


def test_machines_of_a_lab_and_only_they_are_members() -> None:
    assert member_of_namespace("cb0a1b2c-n1") == ("cb0a1b2c", "n1")
    assert member_of_namespace("cb0a1b2c-n12p3") == ("cb0a1b2c", "n12")
    assert member_of_namespace("cb0a1b2c-ext") == ("cb0a1b2c", "ext")
    assert member_of_namespace("cb0a1b2c-mon") == ("cb0a1b2c", "mon")
    assert member_of_namespace("cb0a1b2c-ul") is None
    assert member_of_namespace("other-n1") is None


def test_a_command_enters_its_machines_cgroups_only_once_they_exist(tmp_path: Path) -> None:
    layout = CgroupLayout(cpu=tmp_path / "cpuacct", cpu_v2=False, memory=tmp_path / "memory")
    argv = ["iperf3", "-s"]
    assert enter_argv("cb0a1b2c-n2p1", argv, layout=layout) == argv
    for root in ("cpuacct", "memory"):
        member = tmp_path / root / "cnibench-cb0a1b2c" / "n2"
        member.mkdir(parents=True)
        (member / "cgroup.procs").touch()
    wrapped = enter_argv("cb0a1b2c-n2p1", argv, layout=layout)
    assert wrapped[:2] == ["sh", "-c"]
    assert wrapped[-3:] == ["--", "iperf3", "-s"]
    assert str(tmp_path / "cpuacct/cnibench-cb0a1b2c/n2/cgroup.procs") in wrapped
    assert str(tmp_path / "memory/cnibench-cb0a1b2c/n2/cgroup.procs") in wrapped
    assert enter_argv("cb0a1b2c-ul", argv, layout=layout) == argv
