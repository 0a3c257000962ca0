"""A CNI's version pin, images and offline recipe are one module plus one registration.

The toy CNI below is the whole module: a driver declaring its pinned ``version`` (written once),
its image (a :class:`~cnibench.backends.kube.images.CniImage`: public and offline reference,
both from that version) and an :class:`~cnibench.backends.kube.build_recipes.OfflineRecipe` (Go
module, wrapper go.mod, flags, root filesystem, image). Registered with one
:func:`~cnibench.backends.kube.cnis.register` line, its version is what a cluster records (the
definition's ``version``, the cluster's ``cni_version``), its objects run its image from the
public or offline set, ``CNIBENCH_IMAGE_TOY`` overrides that image, and its recipe is in the
offline build plan that ``cnibench images build`` and ``images status`` use, with no other file
edited.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

from cnibench.backends.base import ClusterSpec
from cnibench.backends.kube.build_recipes import GoBuild, ImageRecipe, OfflineRecipe
from cnibench.backends.kube.cni import (
    CniDefinition,
    CniVersions,
    Readiness,
    check_options,
    cni_definition,
    pinned_versions,
    refuse_wireguard,
)
from cnibench.backends.kube.cnis import DRIVERS, register, unregister
from cnibench.backends.kube.cnis.base import DriverBase
from cnibench.backends.kube.images import CNI_IMAGES, OFFLINE_IMAGES, CniImage, Images
from cnibench.backends.kube.offline import OfflineBuilder
from cnibench.backends.kube.offline.plan import (
    image_recipes,
    not_offline_reason,
    offline_cnis,
    pod_image_tags,
    rootfs_packages,
)
from cnibench.backends.kube.offline.recipes import recipe_digest
from cnibench.backends.kube.offline.status import build_command

# -- the toy CNI's module --------------------------------------------------------------------

TOY_MODULE = "example.com/toy"
VERSION = "0.0.7"
OFFLINE_VERSION = f"v{VERSION}"
TOY_IMAGE = CniImage(
    "toy",
    public=f"registry.example/toy:{VERSION}",
    offline=f"localhost/cnibench-toy:{OFFLINE_VERSION}-offline-1",
)


def _toy_wrapper(version: str, module: Path | None) -> dict[str, str]:
    return {"go.mod": f"module cnibench.local/toy\n\ngo 1.24.0\n\nrequire {TOY_MODULE} {version}\n"}


def _toy_image(tag: str) -> ImageRecipe:
    return ImageRecipe(tag=tag, rootfs="toy", files={"/usr/local/bin/toy-agent": "toy/toy-agent"})


class ToyDriver(DriverBase):
    """A CNI with a pinned release and an offline build of its own."""

    name = "toy"
    version = VERSION
    own_images = (TOY_IMAGE,)
    offline = OfflineRecipe(
        version=OFFLINE_VERSION,
        build=GoBuild(
            module=TOY_MODULE,
            packages=(f"{TOY_MODULE}/cmd/toy-agent",),
            flags=("-trimpath", "-ldflags", "-s -w"),
            wrapper=_toy_wrapper,
            digest_inputs=("toy-1", OFFLINE_VERSION),
        ),
        image=_toy_image,
        image_name=TOY_IMAGE.name,
        rootfs={"toy": ("iproute2", "iptables")},
        artefact_prefix="toy/",
        recipe="toy",
    )

    def definition(
        self, spec: ClusterSpec, *, versions: CniVersions, images: Images, k8s_service_host: str
    ) -> CniDefinition:
        """No capabilities; its agent DaemonSet, running the toy's image, is awaited."""
        check_options(spec)
        refuse_wireguard(spec)
        agent = {
            "apiVersion": "apps/v1",
            "kind": "DaemonSet",
            "metadata": {"name": "toy-agent", "namespace": "toy-system"},
            "spec": {"template": {"spec": {"containers": [_container(images)]}}},
        }
        return CniDefinition(
            name=self.name,
            version=versions.version(self.name, self.version),
            capabilities=frozenset(),
            readiness=(Readiness("DaemonSet", "toy-system", "toy-agent"),),
            manifests=(agent,),
        )


def _container(images: Images) -> dict[str, Any]:
    return {"name": "toy-agent", "image": images.cni_image(TOY_IMAGE)}


def _agent_image(definition: CniDefinition) -> str:
    (agent,) = definition.manifests
    (container,) = agent["spec"]["template"]["spec"]["containers"]
    image: str = container["image"]
    return image


# -- the tests -------------------------------------------------------------------------------


@pytest.fixture
def toy() -> Iterator[ToyDriver]:
    driver = ToyDriver()
    register(driver)  # the one line a new CNI adds to cnis/__init__.py
    try:
        yield driver
    finally:
        unregister(driver.name)


def test_the_pinned_version_is_what_a_cluster_records(toy: ToyDriver) -> None:
    assert cni_definition(ClusterSpec(cni="toy")).version == "0.0.7"
    assert pinned_versions()["toy"] == "0.0.7"
    overridden = CniVersions({"toy": "0.0.8"})
    assert cni_definition(ClusterSpec(cni="toy"), versions=overridden).version == "0.0.8"


@pytest.mark.parametrize(
    ("environ", "image"),
    [
        ({}, TOY_IMAGE.public),
        ({"CNIBENCH_IMAGES": "offline"}, TOY_IMAGE.offline),
        ({"CNIBENCH_IMAGE_TOY": "registry.example/toy:mine"}, "registry.example/toy:mine"),
    ],
    ids=["public", "offline", "overridden"],
)
def test_the_toy_objects_run_its_own_image(
    toy: ToyDriver, environ: dict[str, str], image: str
) -> None:
    images = Images.from_environment(environ)
    assert _agent_image(cni_definition(ClusterSpec(cni="toy"), images=images)) == image
    assert CNI_IMAGES["toy"] is TOY_IMAGE


def test_an_override_of_the_toy_image_leaves_the_offline_set_only_if_it_differs(
    toy: ToyDriver,
) -> None:
    """As for a built-in CNI: another image is one the offline build does not make."""
    offline = {"CNIBENCH_IMAGES": "offline"}
    assert Images.from_environment({**offline, "CNIBENCH_IMAGE_TOY": TOY_IMAGE.offline}).offline
    assert not Images.from_environment({**offline, "CNIBENCH_IMAGE_TOY": "x:1"}).offline


@pytest.mark.parametrize(
    ("driver_name", "image_name"),
    [("clash", "flannel"), ("clash", "tools"), ("flannel", "clash")],
    ids=["a-cni-image-s-name", "a-shared-image-s-name", "a-driver-s-name"],
)
def test_a_driver_whose_name_or_image_name_is_taken_registers_nothing(
    driver_name: str, image_name: str
) -> None:
    class ClashDriver(ToyDriver):
        name = driver_name
        own_images = (CniImage(image_name, public="registry.example/clash:1"),)

    known = (dict(DRIVERS), dict(CNI_IMAGES))
    with pytest.raises(ValueError, match=r"'(flannel|tools)'"):
        register(ClashDriver())
    assert (dict(DRIVERS), dict(CNI_IMAGES)) == known


def test_the_offline_plan_has_the_toy_recipe(toy: ToyDriver) -> None:
    assert "toy" in offline_cnis()
    assert not_offline_reason("toy", loaded_modules=("veth",)) == ""
    assert build_command(["toy"]) == "cnibench images build --cni toy"
    assert rootfs_packages()["toy"] == ("iproute2", "iptables")
    recipes = {recipe.tag: recipe for recipe in image_recipes(OFFLINE_IMAGES, cnis=["toy"])}
    assert recipes[TOY_IMAGE.offline] == _toy_image(TOY_IMAGE.offline)
    # Built only when asked for, like Cilium's and kube-router's.
    assert TOY_IMAGE.offline not in pod_image_tags(OFFLINE_IMAGES, cnis=["flannel"])


def test_a_build_of_the_toy_runs_its_own_steps(toy: ToyDriver, tmp_path: Path) -> None:
    """``prepared`` asks every long step of a build of ``--cni toy``: the toy's Go build and
    root filesystem are among them (the others are stubbed to answer "current")."""
    builder = OfflineBuilder(root=tmp_path, environ={"PATH": "/nonexistent"}, log=lambda _: None)
    asked: list[str] = []
    for name in ("build_kubernetes", "build_go_binaries", "build_cni", "build_helm", "rootfs"):
        setattr(builder, name, lambda *args, _n=name: asked.append(":".join([_n, *args])))
    assert builder.prepared(frozenset({"toy"})) is True
    assert {"build_cni:toy", "rootfs:toy"} <= set(asked)
    assert "build_cni:cilium" not in asked


def test_the_toy_go_build_follows_its_recipe(toy: ToyDriver, tmp_path: Path) -> None:
    """The toy's Go build with ``go`` itself replaced by a recorder (the toy's module does not
    exist): the wrapper go.mod, the argv and the stamp all come from the recipe."""
    builder = OfflineBuilder(
        root=tmp_path,
        environ={"PATH": "/nonexistent", "GOPROXY": "https://proxy.example", "GOFLAGS": "-x"},
        log=lambda _: None,
    )
    ran: list[list[str]] = []

    def fake_run(
        argv: Sequence[str], *, step: str, cwd: Path, env: Mapping[str, str], timeout: float
    ) -> str:
        ran.append(list(argv))
        out = Path(argv[argv.index("-o") + 1])
        (out / "toy-agent").write_text("binary")
        return ""

    fake: Any = fake_run
    builder.context.commands.run = fake  # the one seam every command of a build goes through
    out = builder.build_cni("toy")
    assert out == tmp_path / "offline" / "toy" / "v0.0.7" / "bin"
    assert (out / "toy-agent").read_text() == "binary"
    assert builder.artefacts()["toy/toy-agent"] == out / "toy-agent"
    assert (tmp_path / "offline" / "src" / "toy-v0.0.7" / "go.mod").read_text() == _toy_wrapper(
        "v0.0.7", None
    )["go.mod"]
    [argv] = ran
    assert argv[:5] == ["go", "build", "-trimpath", "-ldflags", "-s -w"]
    assert argv[-1] == f"{TOY_MODULE}/cmd/toy-agent"
    assert (out / ".cnibench-recipe").read_text().strip() == recipe_digest("toy-1", "v0.0.7")


def test_unregistered_the_toy_has_no_offline_build_nor_image() -> None:
    assert "toy" not in CNI_IMAGES
    assert Images.from_environment({"CNIBENCH_IMAGE_TOY": "x:1"}) == Images()
    assert "toy" not in offline_cnis()
    assert not_offline_reason("toy") == (
        "no offline image of toy: toy has no offline build (the public images need a registry)"
    )
    assert TOY_IMAGE.offline not in pod_image_tags(OFFLINE_IMAGES)
