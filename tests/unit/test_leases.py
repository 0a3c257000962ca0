"""Leases: `cnibench clean` keeps what a live cnibench process holds (cnibench.leases).

The holders here are real processes (a Python child that takes a lease and waits); only kind's
cluster listing and the engine's stop are stand-ins, since no kind cluster runs in this tier
(tests/kind runs real ones)."""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
import textwrap
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest

from cnibench import engine as engine_module
from cnibench import leases
from cnibench.backends.kube import clean as kube_clean
from cnibench.backends.kube.providers import KIND_CLUSTER_LEASE
from cnibench.engine import ENGINE_LEASE
from cnibench.errors import ProvisioningError
from engine_stand_in import fake_engine, node_containers


@pytest.fixture
def root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv(leases.LEASES_VARIABLE, str(tmp_path / "leases"))
    return tmp_path / "leases"


def _holder(kind: str, name: str, root: Path) -> subprocess.Popen[str]:
    """Another shell's session: a process that holds ``name`` until its stdin closes."""
    code = textwrap.dedent(
        f"""
        import sys
        from pathlib import Path
        from cnibench import leases
        leases.hold({kind!r}, {name!r}, root=Path({str(root)!r}))
        print("held", flush=True)
        sys.stdin.read()
        """
    )
    child = subprocess.Popen(
        [sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    assert child.stdout is not None
    assert child.stdout.readline().strip() == "held"
    return child


@pytest.fixture
def other_session(root: Path) -> Iterator[subprocess.Popen[str]]:
    child = _holder(KIND_CLUSTER_LEASE, "cnibench-dev0123", root)
    yield child
    if child.poll() is None:
        child.kill()
        child.wait()


def test_a_live_holder_is_listed_and_a_dead_ones_lease_expires(root: Path) -> None:
    child = _holder(KIND_CLUSTER_LEASE, "cnibench-a", root)
    assert leases.live_holders(KIND_CLUSTER_LEASE, "cnibench-a") == (child.pid,)
    assert child.stdin is not None
    child.stdin.close()
    child.wait()
    assert leases.live_holders(KIND_CLUSTER_LEASE, "cnibench-a") == ()
    assert list((root / KIND_CLUSTER_LEASE / "cnibench-a").glob("*.json")) == []


def test_a_reused_pid_is_not_the_holder(root: Path) -> None:
    mine = leases.hold(KIND_CLUSTER_LEASE, "cnibench-b")
    # The same PID with another start time: a later process that reused it.
    text = mine.path.read_text().replace('"start_time": ', '"start_time": 1')
    mine.path.write_text(text)
    assert leases.live_holders(KIND_CLUSTER_LEASE, "cnibench-b", exclude_self=False) == ()


def test_own_lease_is_not_another_holder_and_release_ends_it(root: Path) -> None:
    with leases.hold(ENGINE_LEASE, "unix:///run/cnibench/engine/x/docker.sock") as lease:
        assert lease.path.parent.name.startswith("h-")  # an address becomes a digest
        assert leases.live_holders(ENGINE_LEASE, "unix:///run/cnibench/engine/x/docker.sock") == ()
        assert leases.live_holders(
            ENGINE_LEASE, "unix:///run/cnibench/engine/x/docker.sock", exclude_self=False
        )
    assert not lease.path.exists()


def test_clean_keeps_a_kind_cluster_another_live_session_holds(
    root: Path, other_session: subprocess.Popen[str]
) -> None:
    deleted: list[str] = []

    def kind(argv: Sequence[str]) -> str:
        if list(argv[:3]) == ["kind", "get", "clusters"]:
            return "cnibench-dev0123\ncnibench-left0456\nsomeone-elses\n"
        deleted.append(argv[-1])
        return ""

    items, notes = kube_clean._clean_kind(kind, dry_run=False)
    outcomes = {item.name: item.outcome for item in items}
    assert outcomes == {
        "cnibench-dev0123": f"kept: in use by pid {other_session.pid}",
        "cnibench-left0456": "removed",
    }
    assert deleted == ["cnibench-left0456"]
    assert notes == []
    # Once that session ends, its cluster is a leftover like any other.
    assert other_session.stdin is not None
    other_session.stdin.close()
    other_session.wait()
    items, _ = kube_clean._clean_kind(kind, dry_run=True)
    assert {item.name: item.outcome for item in items}["cnibench-dev0123"] == "would remove"


def test_clean_keeps_every_cluster_of_an_engine_a_live_process_holds(
    root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A test tier (or the study) holds its engine between runs, while its kept cluster is
    held by no session: another shell's `cnibench clean` keeps that cluster too."""
    monkeypatch.setattr(kube_clean, "add_offline_tools_to_path", lambda: None)
    monkeypatch.setattr(kube_clean.shutil, "which", lambda tool: f"/usr/bin/{tool}")
    deleted: list[tuple[str, str]] = []

    def run(argv: Sequence[str], *, docker_host: str = "") -> str:
        if list(argv[:3]) == ["kind", "get", "clusters"]:
            return {
                "unix:///busy.sock": "cnibench-kept01\n",
                "unix:///idle.sock": "cnibench-old02\n",
            }.get(docker_host, "")  # the shell's own engine ($DOCKER_HOST unset) has none
        deleted.append((docker_host, argv[-1]))
        return ""

    monkeypatch.setattr(kube_clean, "_run", run)
    monkeypatch.delenv("DOCKER_HOST", raising=False)
    tier = _holder(ENGINE_LEASE, "unix:///busy.sock", root)
    try:
        report = kube_clean.clean_kube_leftovers(
            docker_hosts=("unix:///busy.sock", "unix:///idle.sock")
        )
    finally:
        tier.kill()
        tier.wait()
    outcomes = {item.name: item.outcome for item in report.items}
    assert outcomes == {
        "cnibench-kept01": f"kept: its engine is in use by pid {tier.pid}",
        "cnibench-old02": "removed",
    }
    assert deleted == [("unix:///idle.sock", "cnibench-old02")]


def test_clean_keeps_an_engine_a_live_session_holds(
    root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    run_root = Path(tempfile.mkdtemp(prefix="cb-run-"))  # short: a socket path must fit
    monkeypatch.setenv(engine_module.ENGINE_RUN_VARIABLE, str(run_root))
    for name in ("busy", "idle"):
        (run_root / name).mkdir(parents=True)
    stopped: list[str] = []
    monkeypatch.setattr(engine_module, "engine_down", lambda name, **_: stopped.append(name))
    busy = engine_module.engine_status("busy").paths.docker_host
    child = _holder(ENGINE_LEASE, busy, root)
    try:
        report = engine_module.clean_engines()
    finally:
        child.kill()
        child.wait()
    assert dict(report.items) == {
        "busy": f"kept: in use by pid {child.pid}",
        "idle": "stopped",
    }
    assert stopped == ["idle"]
    assert "engine: busy: kept: in use by pid" in report.summary()
    shutil.rmtree(run_root)


def test_a_session_ending_leaves_a_cluster_another_live_session_holds(
    root: Path, tmp_path: Path
) -> None:
    from cnibench.backends.base import ClusterSpec
    from cnibench.backends.kube.cni import cni_definition
    from cnibench.backends.kube.providers import KindProvider, ProviderCluster

    spec = ClusterSpec(cni="flannel")
    calls: list[list[str]] = []
    planner = KindProvider(tmp_path, runner=lambda argv: "")
    name, _ = planner.plan(spec, cni_definition(spec))

    def kind(argv: Sequence[str]) -> str:
        calls.append(list(argv))
        return name if list(argv[:3]) == ["kind", "get", "clusters"] else ""

    # No image in the fake engine (unit tests have none): the stand-in kind "builds" them.
    provider = KindProvider(
        tmp_path, runner=kind, engine=fake_engine(), modules_dir=tmp_path / "lib-modules"
    )
    cluster = provider.ensure(spec, cni_definition(spec))
    assert leases.live_holders(KIND_CLUSTER_LEASE, name, exclude_self=False)
    child = _holder(KIND_CLUSTER_LEASE, name, root)
    try:
        # --recreate-cluster would delete it under the other session: refused in one line.
        again = KindProvider(tmp_path, runner=kind, recreate=True, modules_dir=tmp_path / "m")
        with pytest.raises(Exception, match=f"in use by cnibench process\\(es\\) {child.pid}"):
            again.ensure(spec, cni_definition(spec))
        provider.delete(ProviderCluster(name, cluster.kubeconfig, cluster.context))
        assert not any(c[:3] == ["kind", "delete", "cluster"] for c in calls)
    finally:
        child.kill()
        child.wait()
    provider.delete(ProviderCluster(name, cluster.kubeconfig, cluster.context))
    assert any(c[:3] == ["kind", "delete", "cluster"] for c in calls)


def test_a_cluster_left_with_a_stopped_node_is_made_again_unless_another_session_holds_it(
    root: Path, tmp_path: Path
) -> None:
    """A session killed with its private engine leaves its kept cluster behind, and the engine
    brings the nodes back stopped: reusing it failed at ``kind get kubeconfig`` ("container
    ... is not running", CI of 2026-12-06). ensure() deletes and creates it again; under
    another live session that holds it, it refuses in one line instead."""
    from cnibench.backends.base import ClusterSpec
    from cnibench.backends.kube.cni import cni_definition
    from cnibench.backends.kube.providers import KindProvider

    spec = ClusterSpec(cni="flannel")
    name, _ = KindProvider(tmp_path, runner=lambda argv: "").plan(spec, cni_definition(spec))
    nodes = {f"{name}-control-plane": 0, f"{name}-worker": 777}  # the control plane stopped
    calls: list[list[str]] = []

    def kind(argv: Sequence[str]) -> str:
        calls.append(list(argv))
        if list(argv[:3]) == ["kind", "get", "clusters"]:
            return name
        return "\n".join(nodes) if list(argv[:3]) == ["kind", "get", "nodes"] else ""

    def provider() -> KindProvider:
        return KindProvider(
            tmp_path,
            runner=kind,
            engine=fake_engine(node_containers(nodes)),
            modules_dir=tmp_path / "mods",
        )

    child = _holder(KIND_CLUSTER_LEASE, name, root)
    try:
        with pytest.raises(ProvisioningError, match=f"stopped node\\(s\\) {name}-control-plane "):
            provider().ensure(spec, cni_definition(spec))
        assert not any(c[:3] == ["kind", "delete", "cluster"] for c in calls)
    finally:
        child.kill()
        child.wait()
    made = provider().ensure(spec, cni_definition(spec))
    assert made.created is True
    verbs = [c[:3] for c in calls if c[1] in ("delete", "create")]
    assert verbs == [["kind", "delete", "cluster"], ["kind", "create", "cluster"]]
    # With every node running, the same cluster is reused as it is.
    nodes[f"{name}-control-plane"] = 778
    calls.clear()
    assert provider().ensure(spec, cni_definition(spec)).created is False
    assert not any(c[1] in ("delete", "create") for c in calls)


def test_a_kept_cluster_is_no_longer_held_once_its_session_forgets_it(
    root: Path, tmp_path: Path
) -> None:
    """--keep-cluster: the session ends, the cluster stays, and the process's claim ends with
    the session (not with the process), so `cnibench clean` from the same shell removes it."""
    from cnibench.backends.base import ClusterSpec
    from cnibench.backends.kube.cni import cni_definition
    from cnibench.backends.kube.providers import KindProvider

    spec = ClusterSpec(cni="flannel")
    provider = KindProvider(
        tmp_path, runner=lambda argv: "", engine=fake_engine(), modules_dir=tmp_path / "mods"
    )
    name, _ = provider.plan(spec, cni_definition(spec))
    cluster = provider.ensure(spec, cni_definition(spec))
    assert leases.live_holders(KIND_CLUSTER_LEASE, name, exclude_self=False)
    provider.forget(cluster)
    assert leases.live_holders(KIND_CLUSTER_LEASE, name, exclude_self=False) == ()
    provider.forget(cluster)  # safe to repeat


def test_lib_modules_stays_while_another_live_process_holds_a_kind_cluster(
    root: Path, tmp_path: Path
) -> None:
    """The /lib/modules cnibench made for kind outlived `cnibench clean` once: a removal ran
    while another process was about to create a cluster, and dockerd then made the directory
    again without cnibench's marker. A live holder of any kind cluster (or engine) keeps it."""
    from cnibench.backends.kube.providers import release_lib_modules

    state, modules = tmp_path / "state", tmp_path / "lib-modules"
    state.mkdir()
    modules.mkdir()
    (state / "created-lib-modules").write_text("made for kind\n")
    for kind in (KIND_CLUSTER_LEASE, ENGINE_LEASE):
        child = _holder(kind, "cnibench-other", root)
        try:
            assert not release_lib_modules(state, modules_dir=modules)
        finally:
            child.kill()
            child.wait()
        assert modules.is_dir()
        assert (state / "created-lib-modules").is_file()
    # Its holders gone (their lease files now name dead processes), it goes with its marker.
    assert release_lib_modules(state, modules_dir=modules)
    assert not modules.exists()
    assert not (state / "created-lib-modules").exists()


def test_lib_modules_marker_is_looked_up_in_the_environment_given(
    root: Path, tmp_path: Path
) -> None:
    """engine_down(environ=...) of a test's own engine must not reach the user's real marker:
    the state directory comes from the environment it is given."""
    from cnibench.backends.kube.providers import release_lib_modules

    home, modules = tmp_path / "home", tmp_path / "lib-modules"
    modules.mkdir()
    marker = home / ".cache" / "cnibench" / "kind" / "created-lib-modules"
    assert not release_lib_modules(modules_dir=modules, environ={"HOME": str(home)})
    marker.parent.mkdir(parents=True)
    marker.write_text("made for kind\n")
    assert release_lib_modules(modules_dir=modules, environ={"HOME": str(home)})
    assert not modules.exists()
    assert not marker.exists()


def test_kind_state_comes_from_its_variable_else_the_cache(tmp_path: Path) -> None:
    from cnibench.backends.kube.providers import kind_state_dir

    chosen = tmp_path / "state"
    assert kind_state_dir({"CNIBENCH_KIND_STATE": str(chosen)}) == chosen
    assert kind_state_dir({"HOME": str(tmp_path)}) == tmp_path / ".cache/cnibench/kind"
    assert kind_state_dir({"XDG_CACHE_HOME": str(chosen)}) == chosen / "cnibench/kind"


def test_stand_in_tiers_never_see_the_hosts_leases() -> None:
    """tests/conftest.py gives unit and integration tests a leases root and kind state of the
    run's own (the kind tier runs beside them)."""
    import os

    from cnibench.backends.kube.providers import kind_state_dir

    assert leases.leases_root() != leases.SYSTEM_ROOT
    assert "stand-in-leases" in str(leases.leases_root())
    assert "stand-in-kind-state" in os.environ["CNIBENCH_KIND_STATE"]
    assert kind_state_dir() == Path(os.environ["CNIBENCH_KIND_STATE"])


def test_a_clean_for_the_engine_s_holder_removes_its_cluster_and_keeps_another_s(
    root: Path, monkeypatch: pytest.MonkeyPatch, other_session: subprocess.Popen[str]
) -> None:
    """A test tier cleaning for itself (CNIBENCH_CLEAN_FOR) without first giving up its
    claim: its kept cluster goes, a cluster another live session holds stays, and each item
    names the engine it was found in."""
    monkeypatch.setattr(kube_clean, "add_offline_tools_to_path", lambda: None)
    monkeypatch.setattr(kube_clean.shutil, "which", lambda tool: f"/usr/bin/{tool}")
    deleted: list[str] = []

    def run(argv: Sequence[str], *, docker_host: str = "") -> str:
        if list(argv[:3]) == ["kind", "get", "clusters"]:
            return "cnibench-kept01\ncnibench-dev0123\n" if docker_host else ""
        deleted.append(argv[-1])
        return ""

    monkeypatch.setattr(kube_clean, "_run", run)
    monkeypatch.delenv("DOCKER_HOST", raising=False)
    tier = _holder(ENGINE_LEASE, "unix:///tier.sock", root)
    try:
        beside = kube_clean.clean_kube_leftovers(docker_hosts=("unix:///tier.sock",))
        assert deleted == []  # another shell's clean keeps all of it while the tier holds it
        monkeypatch.setenv(leases.CLEAN_FOR_VARIABLE, f"{tier.pid}")
        own = kube_clean.clean_kube_leftovers(
            docker_hosts=("unix:///tier.sock",), clean_for=leases.clean_for()
        )
    finally:
        tier.kill()
        tier.wait()
    assert {i.name: i.outcome for i in beside.items} == {
        "cnibench-kept01": f"kept: its engine is in use by pid {tier.pid}",
        "cnibench-dev0123": f"kept: in use by pid {other_session.pid}",
    }
    assert {i.name: (i.outcome, i.engine) for i in own.items} == {
        "cnibench-kept01": ("removed", "unix:///tier.sock"),
        "cnibench-dev0123": (f"kept: in use by pid {other_session.pid}", "unix:///tier.sock"),
    }
    assert deleted == ["cnibench-kept01"]


def test_clean_keeps_an_engine_a_cluster_is_left_in_and_stops_one_held_only_for_itself(
    root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An engine whose kind cluster this clean kept (or failed to remove) is not stopped
    under it; an engine held only by the process the clean runs for is."""
    run_root = Path(tempfile.mkdtemp(prefix="cb-run-"))  # short: a socket path must fit
    monkeypatch.setenv(engine_module.ENGINE_RUN_VARIABLE, str(run_root))
    for name in ("left", "held", "idle"):
        (run_root / name).mkdir(parents=True)
    stopped: list[str] = []
    monkeypatch.setattr(engine_module, "engine_down", lambda name, **_: stopped.append(name))
    left = engine_module.engine_status("left").paths.docker_host
    held = engine_module.engine_status("held").paths.docker_host
    child = _holder(ENGINE_LEASE, held, root)
    try:
        report = engine_module.clean_engines(
            clean_for={child.pid}, clusters_left={left: ["cnibench-a1", "cnibench-b2"]}
        )
    finally:
        child.kill()
        child.wait()
    shutil.rmtree(run_root)
    assert dict(report.items) == {
        "left": "kept: kind cluster(s) cnibench-a1, cnibench-b2 left in it",
        "held": "stopped",
        "idle": "stopped",
    }
    assert sorted(stopped) == ["held", "idle"]


def test_the_clean_command_keeps_the_engine_of_a_cluster_it_could_not_remove(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """`cnibench clean` hands what its kind part left, engine by engine, and the PIDs of
    CNIBENCH_CLEAN_FOR to the engine part (a cluster the kind part left, and its engine then
    stopped, took a CI run's engine from under the next tests, 2026-12-03).
    The lab, kind and engine parts are stand-ins here; the test above runs the engine part."""
    from cnibench import cli
    from cnibench.backends import kube, lab

    class Report:
        def summary(self) -> str:
            return "stand-in"

    left = kube_clean.KubeCleanReport(
        items=(
            kube_clean.CleanedItem("kind-cluster", "cnibench-a1", "failed: busy", "unix:///e1"),
            kube_clean.CleanedItem("kind-cluster", "cnibench-b2", "removed", "unix:///e2"),
            kube_clean.CleanedItem("namespace", "cnibench-x", "failed: busy"),
        )
    )
    seen: dict[str, object] = {}

    def kube_part(**kwargs: object) -> kube_clean.KubeCleanReport:
        seen["kube"] = kwargs["clean_for"]
        return left

    def engine_part(**kwargs: object) -> Report:
        seen.update(kwargs)
        return Report()

    monkeypatch.setattr(lab, "clean_leftovers", lambda **_: Report())
    monkeypatch.setattr(kube, "clean_kube_leftovers", kube_part)
    monkeypatch.setattr(engine_module, "clean_engines", engine_part)
    monkeypatch.setattr(engine_module, "running_engines", lambda **_: [])
    monkeypatch.setenv(leases.CLEAN_FOR_VARIABLE, "41,7")
    assert cli.main(["clean"]) == 0
    assert seen["clusters_left"] == {"unix:///e1": ["cnibench-a1"]}
    assert seen["clean_for"] == seen["kube"] == frozenset({7, 41})
    assert "failed: busy" in capsys.readouterr().out


def test_clean_forgets_the_config_and_kubeconfig_of_a_cluster_it_removed(
    root: Path,
    other_session: subprocess.Popen[str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A removed cluster's files in the kind state directory go with it (they piled up, one
    pair per cluster a CI run made); a kept cluster's stay, its kubeconfig still reaches it."""
    state = tmp_path / "kind-state"
    state.mkdir()
    monkeypatch.setenv("CNIBENCH_KIND_STATE", str(state))
    for name in ("cnibench-dev0123", "cnibench-left0456"):
        for suffix in (".yaml", ".kubeconfig"):
            (state / f"{name}{suffix}").write_text("x")

    def kind(argv: Sequence[str]) -> str:
        if list(argv[:3]) == ["kind", "get", "clusters"]:
            return "cnibench-dev0123\ncnibench-left0456\n"
        return ""

    items, _ = kube_clean._clean_kind(kind, dry_run=False)
    assert {item.name: item.outcome for item in items}["cnibench-left0456"] == "removed"
    assert sorted(path.name for path in state.iterdir()) == [
        "cnibench-dev0123.kubeconfig",
        "cnibench-dev0123.yaml",
    ]
