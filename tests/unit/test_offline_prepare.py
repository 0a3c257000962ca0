"""``cnibench images build --prepare``: the long steps without an engine, the images later.

The steps themselves (Go builds, mmdebstrap, docker import) run for real in the kind tier;
here they are replaced by recorders, to check which ones each kind of build runs.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from cnibench import cli
from cnibench.backends.kube.offline import OfflineBuilder
from cnibench.backends.kube.offline.plan import rootfs_packages
from cnibench.backends.kube.offline.recipes import LOAD_ENGINE_ROOTFS

STEPS = (
    "build_kubernetes",
    "build_go_binaries",
    "build_cni",
    "build_helm",
    "build_traefik",
    "link_tools",
)
ENGINE_STEPS = ("node_image", "import_image")


@pytest.fixture
def calls(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> list[str]:
    made: list[str] = []

    def recorder(name: str) -> Any:
        def step(self: OfflineBuilder, *args: object) -> None:
            made.append(name if not args else f"{name}:{getattr(args[0], 'rootfs', args[0])}")

        return step

    for name in (*STEPS, *ENGINE_STEPS, "rootfs"):
        monkeypatch.setattr(OfflineBuilder, name, recorder(name))
    monkeypatch.setenv("CNIBENCH_CACHE", str(tmp_path))
    monkeypatch.delenv("DOCKER_HOST", raising=False)
    return made


def test_prepare_runs_every_long_step_and_touches_no_engine(calls: list[str]) -> None:
    argv = ["images", "build", "--cni", "cilium", "--cni", "kube-router", "--gateway", "traefik"]
    argv.append("--prepare")
    assert cli.main(argv) == 0
    assert set(STEPS) <= {c.split(":")[0] for c in calls}
    asked = {name for name in rootfs_packages() if name not in LOAD_ENGINE_ROOTFS}
    assert {f"rootfs:{name}" for name in asked} <= set(calls)
    assert {"build_cni:cilium", "build_cni:kube-router"} <= set(calls)
    assert not [c for c in calls if c.split(":")[0] in ENGINE_STEPS]
    assert "rootfs:locust" not in calls  # only with --load-engine locust


def test_locusts_image_is_built_only_when_asked(calls: list[str]) -> None:
    assert cli.main(["images", "build", "--load-engine", "locust", "--prepare"]) == 0
    assert "rootfs:locust" in calls


def test_a_prepare_runs_the_optional_go_builds_shortest_first(calls: list[str]) -> None:
    """CI's background prepare asks for Cilium, kube-router and Traefik; the kind tier's
    kube-router module needs only the two short builds, so they come before Cilium's long one
    (in whatever order the CNIs are named or registered)."""
    for order in (["cilium", "kube-router"], ["kube-router", "cilium"]):
        calls.clear()
        argv = ["images", "build", *[f"--cni={cni}" for cni in order], "--gateway", "traefik"]
        assert cli.main([*argv, "--prepare"]) == 0
        go = [c for c in calls if c.startswith(("build_cni", "build_traefik", "build_helm"))]
        # (the recorders also answer the lock-free check, which asks the steps in this order)
        first = ["build_helm", "build_cni:kube-router", "build_traefik", "build_cni:cilium"]
        assert list(dict.fromkeys(go)) == first
        assert calls.index("build_go_binaries") < calls.index("build_helm")


def test_a_full_build_also_makes_the_images(calls: list[str]) -> None:
    assert cli.main(["images", "build"]) == 0
    assert "node_image" in calls
    assert any(c.startswith("import_image") for c in calls)
    assert not [c for c in calls if c.startswith("build_cni")]  # opt-in
    assert "rootfs:cilium" not in calls
    assert "rootfs:kube-router" not in calls
    assert "build_traefik" not in calls


def test_a_build_whose_long_steps_are_current_takes_no_lock(tmp_path: Path) -> None:
    """Asked whether it is prepared, an empty cache says no without starting any step (no
    mmdebstrap, no go command); a cache whose every step is stamped says yes, so its build
    makes the images without waiting for another build holding the cache's lock."""
    builder = OfflineBuilder(root=tmp_path, environ={"PATH": "/nonexistent"}, log=lambda _: None)
    assert builder.prepared(frozenset()) is False
    assert builder.report.seconds == {}
    assert not (tmp_path / "offline" / "rootfs").exists()

    asked: list[str] = []
    for name in (*STEPS, "rootfs"):
        setattr(builder, name, lambda *args, _n=name: asked.append(_n))
    assert builder.prepared(frozenset({"cilium", "kube-router", "traefik"})) is True
    assert {"build_kubernetes", "build_cni", "build_traefik"} <= set(asked)


def test_single_steps_under_the_lock_wait_for_a_build_of_the_same_cache(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """scripts/kube-tier.sh builds Kubernetes' commands under :meth:`OfflineBuilder.exclusive`;
    an `images build` of the same cache (the kind tier's, beside it in CI) waits for it instead
    of building the same commands into the same staging directory (seen on a cold cache,
    2026-11-28: one build moved the other's kubeadm away). The steps are recorders here."""
    import threading

    from cnibench.backends.kube.offline import builder as builder_module

    monkeypatch.setenv("CNIBENCH_CACHE", str(tmp_path))
    monkeypatch.setattr(builder_module, "LOCK_POLL_SECONDS", 0.01)
    order: list[str] = []
    logged: list[str] = []
    for name in ("build_kubernetes", "build_go_binaries"):
        monkeypatch.setattr(OfflineBuilder, name, lambda self, name=name: order.append(name))
    monkeypatch.setattr(OfflineBuilder, "prepared", lambda self, cnis: False)
    monkeypatch.setattr(
        OfflineBuilder, "_build_all", lambda self, cnis, images: order.append("images build")
    )
    script = OfflineBuilder(log=lambda line: None)
    other = OfflineBuilder(log=logged.append)
    holding = threading.Event()
    release = threading.Event()

    def kube_tier() -> None:
        with script.exclusive():
            holding.set()
            release.wait(10)
            script.build_kubernetes()
            script.build_go_binaries()

    thread = threading.Thread(target=kube_tier)
    build = threading.Thread(target=lambda: other.build(images=False))
    thread.start()
    try:
        assert holding.wait(10)
        build.start()
        for _ in range(100):  # until the build has said that it waits
            if logged:
                break
            threading.Event().wait(0.05)
        assert logged == ["another cnibench images build is running on this cache; waiting for it"]
        assert order == []  # it waits: nothing of it ran while the lock is held
    finally:
        # Both threads end before the recorders are undone (never a real build).
        release.set()
        thread.join(10)
        if build.is_alive() or build.ident is not None:
            build.join(10)
    assert order == ["build_kubernetes", "build_go_binaries", "images build"]


def test_a_build_waiting_for_the_lock_goes_on_once_the_other_has_made_what_it_needs(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """CI's background prepare holds the lock through Cilium's long build; the kind tier's
    kube-router module, waiting for it, needs only the shorter builds before it. Once those
    are current (the lock-free check says so) the waiting build makes its images beside the
    other, which still holds the lock; until then it runs nothing."""
    import threading

    from cnibench.backends.kube.offline import builder as builder_module

    monkeypatch.setenv("CNIBENCH_CACHE", str(tmp_path))
    monkeypatch.setattr(builder_module, "LOCK_POLL_SECONDS", 0.01)
    ran: list[str] = []
    logged: list[str] = []
    made = threading.Event()  # the other build has made what this one needs
    monkeypatch.setattr(OfflineBuilder, "prepared", lambda self, cnis: made.is_set())
    monkeypatch.setattr(
        OfflineBuilder, "_build_all", lambda self, cnis, images: ran.append("images build")
    )
    prepare = OfflineBuilder(log=lambda line: None)
    kind_tier = OfflineBuilder(log=logged.append)
    holding = threading.Event()
    release = threading.Event()

    def background_prepare() -> None:
        with prepare.exclusive():
            holding.set()
            release.wait(10)

    holder = threading.Thread(target=background_prepare)
    build = threading.Thread(target=lambda: kind_tier.build(cnis=["kube-router"]))
    holder.start()
    try:
        assert holding.wait(10)
        build.start()
        threading.Event().wait(0.2)  # twenty polls of the lock and of the check
        assert logged == ["another cnibench images build is running on this cache; waiting for it"]
        assert ran == []
        made.set()
        build.join(10)
        assert not build.is_alive()
        assert ran == ["images build"]
        assert holder.is_alive()  # the other build still holds the lock
        going_on = "the other build has made everything this one needs; going on beside it"
        assert logged[-1] == going_on
    finally:
        release.set()
        holder.join(10)
        build.join(10)


def test_link_tools_replaces_an_old_link_and_leaves_none_aside(tmp_path: Path) -> None:
    """Two builds of one cache may link the tools at once: each link is made aside and
    renamed over the old one, so an existing link (or one the other build just made) is
    replaced, never an error, and nothing is left beside it."""
    builder = OfflineBuilder(root=tmp_path, environ={"PATH": "/nonexistent"}, log=lambda _: None)
    first = builder.link_tools()
    before = {p.name: p.readlink() for p in first.iterdir()}
    again = builder.link_tools()
    assert again == first
    assert {p.name: p.readlink() for p in again.iterdir()} == before
    assert {"kind", "kubectl"} <= set(before)
