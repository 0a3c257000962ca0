"""Images for clusters that pull (issue 33 item 3): ``--image-registry`` names cnibench's own
images in a registry, and ``cnibench images push`` pushes them there.

The push itself against a real registry in the private engine is in tests/kind
(test_kind_existing.py); here, what needs no engine: which references move, what is refused,
and that kind loads nothing when its nodes pull."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from cnibench.backends.base import ClusterSpec
from cnibench.backends.choose import make_backend
from cnibench.backends.kube.cni import cni_definition
from cnibench.backends.kube.images import (
    CNI_IMAGES,
    LOCAL_PREFIX,
    OFFLINE_IMAGES,
    Images,
    require_pullable,
)
from cnibench.backends.kube.offline.plan import (
    cluster_image_tags,
    offline_cnis,
    pod_image_tags,
    recipe_image,
)
from cnibench.backends.kube.providers import KindProvider
from cnibench.backends.kube.registry import (
    check_registry,
    image_variables,
    push_images,
    pushable_tags,
)
from cnibench.errors import ConfigError
from cnibench.session import SessionConfig, session_config
from engine_stand_in import FakeEngineClient, fake_engine

REGISTRY = "localhost:5000"


def test_every_local_image_moves_into_the_registry_and_nothing_else() -> None:
    moved = OFFLINE_IMAGES.in_registry(REGISTRY)
    for name, ref in OFFLINE_IMAGES.shared().items():
        if name == "kind_node":
            assert moved.kind_node == ref  # a cluster is made from it, not pulled
        else:
            assert getattr(moved, name) == f"{REGISTRY}/{ref.removeprefix(LOCAL_PREFIX)}"
    for image in CNI_IMAGES.values():
        before = OFFLINE_IMAGES.cni_image(image)
        after = moved.cni_image(image)
        assert after == (f"{REGISTRY}/{before.removeprefix(LOCAL_PREFIX)}" if before else "")
    assert moved.registry == REGISTRY
    assert moved.offline  # the same builds, pulled instead of loaded
    public = Images().in_registry(REGISTRY)
    assert public.http_echo == Images().http_echo  # public references stay where they live
    assert public.tools.startswith(f"{REGISTRY}/cnibench-tools:")
    assert not public.offline


def test_clusters_that_pull_refuse_local_images_and_take_the_registry_ones() -> None:
    for provider in ("existing", "aks"):
        with pytest.raises(ConfigError, match="cnibench images push REGISTRY"):
            require_pullable(Images(), provider)
        require_pullable(Images().in_registry(REGISTRY), provider)


@pytest.mark.parametrize(
    "value", ["localhost:5000", "registry.example.com/team", "10.0.0.1:5000/a/b", "r.io/"]
)
def test_registry_names_are_host_port_path(value: str) -> None:
    assert check_registry(value) == value.rstrip("/")


@pytest.mark.parametrize(
    "value", ["", "http://localhost:5000", "localhost:5000/UPPER", "-bad", "a b", "host:port"]
)
def test_bad_registry_names_are_refused_in_one_line(value: str) -> None:
    with pytest.raises(ConfigError, match="HOST\\[:PORT\\]\\[/PATH\\]") as caught:
        check_registry(value)
    assert "\n" not in str(caught.value)


def test_the_exports_name_every_pod_image_in_the_registry() -> None:
    moved = OFFLINE_IMAGES.in_registry(REGISTRY)
    exported = image_variables(moved)
    assert "CNIBENCH_IMAGE_KIND_NODE" not in exported
    assert exported["CNIBENCH_IMAGE_TOOLS"] == moved.tools
    # What a shell that evaluated them gets back is the moved set's every pod image.
    again = Images.from_environment(exported)
    assert {k: v for k, v in again.shared().items() if k != "kind_node"} == {
        k: v for k, v in moved.shared().items() if k != "kind_node"
    }
    for image in CNI_IMAGES.values():
        assert again.cni_image(image) == moved.cni_image(image)


def test_what_is_pushed_is_what_the_moved_set_names() -> None:
    moved = OFFLINE_IMAGES.in_registry(REGISTRY)
    tags = pushable_tags(moved, ["flannel"])
    assert tags
    assert all(t.startswith(LOCAL_PREFIX) for t in tags)
    names = set(moved.shared().values()) | {moved.cni_image(i) for i in CNI_IMAGES.values()}
    for tag in tags:
        assert f"{REGISTRY}/{tag.removeprefix(LOCAL_PREFIX)}" in names
    assert pushable_tags(Images().in_registry(REGISTRY)) == (Images().tools,)


def test_push_refuses_a_tag_cnibench_did_not_build_before_asking_any_engine() -> None:
    with pytest.raises(ConfigError, match="not an image cnibench built"):
        push_images("unix:///nonexistent.sock", ["docker.io/library/nginx:1"], REGISTRY)


def test_a_kind_cluster_that_pulls_gets_nothing_loaded(tmp_path: Path) -> None:
    calls: list[list[str]] = []
    provider = KindProvider(
        tmp_path,
        images=OFFLINE_IMAGES.in_registry(REGISTRY),
        runner=lambda argv: calls.append(list(argv)) or "",
        modules_dir=tmp_path / "m",
    )
    spec = ClusterSpec(cni="flannel")
    assert cni_definition(spec).name == "flannel"
    provider.load_local_images("cnibench-x", cni="flannel")
    assert calls == []
    built = {tag: "sha256:0" for tag in pod_image_tags(OFFLINE_IMAGES, cnis=["flannel"])}
    loading = _offline_kind(tmp_path, built, calls)
    loading.load_local_images("cnibench-x", cni="flannel")
    assert any(c[:2] == ["kind", "load"] for c in calls)  # without a registry kind loads


def test_image_registry_reaches_the_backend_and_the_lab_refuses_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text("apiVersion: v1\nkind: Config\n")
    monkeypatch.setenv("KUBECONFIG", str(kubeconfig))
    monkeypatch.delenv("DOCKER_HOST", raising=False)
    backend = make_backend("existing", image_registry=REGISTRY)
    images = backend.images  # type: ignore[attr-defined]
    assert images.registry == REGISTRY
    assert images.tools.startswith(f"{REGISTRY}/")
    with pytest.raises(ConfigError, match=r"--image-registry .*the lab runs no pods"):
        make_backend("lab", image_registry=REGISTRY)
    config = session_config({"cluster": "existing", "profile": "smoke", "image_registry": REGISTRY})
    assert isinstance(config, SessionConfig)
    assert config.image_registry == REGISTRY


def test_images_push_with_a_bad_registry_is_one_line_and_exit_2(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k != "DOCKER_HOST"}
    done = subprocess.run(
        [sys.executable, "-m", "cnibench.cli", "images", "push", "http://x"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env=env,
    )
    assert done.returncode == 2, done.stderr
    assert "HOST[:PORT][/PATH]" in done.stderr
    assert "Traceback" not in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize("built_locust", [False, True], ids=["not-built", "built"])
def test_the_locust_image_is_loaded_into_kind_only_when_it_was_built(
    tmp_path: Path, built_locust: bool
) -> None:
    """``images build --load-engine locust`` is optional: a kind cluster gets locust's image
    when the engine holds it, and is made without it (not refused) when it does not."""
    calls: list[list[str]] = []
    built = {tag: "sha256:0" for tag in pod_image_tags(OFFLINE_IMAGES, cnis=["flannel"])}
    if built_locust:
        built[OFFLINE_IMAGES.locust] = "sha256:1"
    provider = _offline_kind(tmp_path, built, calls)
    provider.load_local_images("cnibench-x", cni="flannel")
    loaded = [c for c in calls if c[:3] == ["kind", "load", "docker-image"]]
    assert loaded
    named = {arg for call in loaded for arg in call}
    assert (OFFLINE_IMAGES.locust in named) is built_locust


def _offline_kind(tmp_path: Path, built: dict[str, str], calls: list[list[str]]) -> KindProvider:
    """kind with the offline set, its engine (a stand-in) holding ``built`` (tag -> id), its
    commands recorded into ``calls`` instead of run."""
    return KindProvider(
        tmp_path,
        images=OFFLINE_IMAGES,
        runner=lambda argv: calls.append(list(argv)) or "",
        engine=fake_engine(FakeEngineClient(images=built)),
        modules_dir=tmp_path / "m",
    )


@pytest.mark.parametrize("driver", ["flannel", "kube-router", "cilium"])
def test_a_kind_cluster_gets_its_images_in_one_load_and_no_other_cnis(
    tmp_path: Path, driver: str
) -> None:
    """One ``kind load`` per cluster (one archive: the monitoring root filesystem that
    Prometheus' and node-exporter's images share travels once), holding this CNI's own image
    and no other CNI's, also not flannel's, which every offline set builds."""
    calls: list[list[str]] = []
    every = pod_image_tags(OFFLINE_IMAGES, cnis=offline_cnis())
    provider = _offline_kind(tmp_path, dict.fromkeys(every, "sha256:0"), calls)
    provider.load_local_images("cnibench-x", cni=driver)
    loads = [c for c in calls if c[:3] == ["kind", "load", "docker-image"]]
    assert len(loads) == 1
    loaded = set(loads[0][3:-2])
    assert loads[0][-2:] == ["--name", "cnibench-x"]
    cni_tags = {name: OFFLINE_IMAGES.cni_image(recipe_image(name)) for name in offline_cnis()}
    assert cni_tags[driver] in loaded
    assert not loaded & {tag for name, tag in cni_tags.items() if name != driver}
    assert {OFFLINE_IMAGES.prometheus, OFFLINE_IMAGES.node_exporter, OFFLINE_IMAGES.tools} <= loaded
    assert loaded == set(cluster_image_tags(OFFLINE_IMAGES, cni=driver))
