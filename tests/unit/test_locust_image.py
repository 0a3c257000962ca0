"""locust's image for load in pods: its own container in a load pod, overridable like every
shared image, and an offline recipe from Debian's python3-locust that is built only when asked
and leaves every existing recipe's digest as it was (CI's caches stay valid)."""

from __future__ import annotations

from pathlib import Path

import pytest

from cnibench.backends.base import NodeRole, WorkloadKind, WorkloadSpec
from cnibench.backends.kube import render
from cnibench.backends.kube.images import OFFLINE_IMAGES, Images
from cnibench.backends.kube.offline import OfflineBuilder
from cnibench.backends.kube.offline.plan import image_recipes, rootfs_packages
from cnibench.backends.kube.offline.recipes import (
    LOAD_ENGINE_ROOTFS,
    ROOTFS_PACKAGES,
    recipe_digest,
)
from cnibench.backends.kube.offline.rootfs import _ROOTFS_RECIPE
from cnibench.backends.kube.offline.status import build_command

LOAD = (WorkloadSpec(WorkloadKind.LOAD_GENERATOR, 5557),)


def test_a_load_pod_runs_locust_in_a_container_of_its_own() -> None:
    manifest = render.pod(
        "load-worker-0", namespace="ns", session="s", role=NodeRole.CLIENT, workloads=LOAD
    )
    containers = {c["name"]: c for c in manifest["spec"]["containers"]}
    assert set(containers) == {render.TOOLS_CONTAINER, render.LOAD_CONTAINER}
    locust = containers[render.LOAD_CONTAINER]
    assert locust["image"] == Images().locust
    assert locust["command"] == ["sleep", "infinity"]
    assert locust["ports"] == [{"containerPort": 5557, "protocol": "TCP"}]
    assert render.command_container(LOAD) == render.LOAD_CONTAINER


def test_other_pods_run_their_commands_in_the_tools_container() -> None:
    echo = (WorkloadSpec(WorkloadKind.HTTP_ECHO, 80),)
    assert render.command_container(echo) == render.TOOLS_CONTAINER
    assert render.command_container(()) == render.TOOLS_CONTAINER


def test_the_locust_image_is_overridden_by_its_variable() -> None:
    images = Images.from_environment({"CNIBENCH_IMAGE_LOCUST": "registry.example/locust:2"})
    assert images.locust == "registry.example/locust:2"
    manifest = render.pod(
        "load-master",
        namespace="ns",
        session="s",
        role=NodeRole.CLIENT,
        workloads=LOAD,
        images=images,
    )
    assert "registry.example/locust:2" in {c["image"] for c in manifest["spec"]["containers"]}


def test_the_offline_locust_image_is_debians_python3_locust() -> None:
    (recipe,) = [
        r for r in image_recipes(OFFLINE_IMAGES, cnis=["locust"]) if r.tag == OFFLINE_IMAGES.locust
    ]
    assert recipe.rootfs == "locust"
    packages = rootfs_packages()["locust"]
    assert packages[0] == "python3-locust"
    # debootstrap resolved no virtual package: python3-zmq's cffi API range needs its provider
    # (CI's first build failed configuring python3-zmq without it); it stays named.
    assert "python3-cffi-backend" in packages
    assert "locust" not in ROOTFS_PACKAGES  # those are built with every offline set


@pytest.mark.parametrize("cnis", [[], ["cilium", "kube-router", "traefik"]], ids=["shared", "all"])
def test_the_locust_image_is_built_only_when_asked(cnis: list[str]) -> None:
    without = image_recipes(OFFLINE_IMAGES, cnis=cnis)
    with_locust = image_recipes(OFFLINE_IMAGES, cnis=[*cnis, "locust"])
    assert OFFLINE_IMAGES.locust not in {r.tag for r in without}
    assert with_locust[:-1] == without
    assert with_locust[-1].tag == OFFLINE_IMAGES.locust
    assert build_command(["locust"]) == "cnibench images build --load-engine locust"


def test_no_existing_recipe_digest_changed(tmp_path: Path) -> None:
    """The stamps CI's caches were made with (also pinned one by one in
    test_offline_recipes.py): locust's root filesystem is one of its own and no version of
    the shared Go step's version set names it."""
    builder = OfflineBuilder(root=tmp_path, environ={}, log=lambda _: None)
    assert builder.go_bin.name == "2113ed397fb1"
    pinned = {
        "node": "414ca0476e07",
        "netfilter": "dab004034743",
        "tools": "0471726524a5",
        "monitoring": "3a5e83af4c9e",
    }
    for name, digest in pinned.items():
        found = recipe_digest(_ROOTFS_RECIPE, builder.versions.debian, rootfs_packages()[name])
        assert found == digest, name
    assert set(LOAD_ENGINE_ROOTFS).isdisjoint(ROOTFS_PACKAGES)
