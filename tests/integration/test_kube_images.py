"""The tools image cnibench builds for kind: its contents, its build and its use in pods.

kind cannot run here (no container engine), so the build/load steps are checked through a
fake runner that records argv and answers like docker and kind; the Dockerfile's packages are
checked against this machine's real apt sources (the same Debian release as the image).
"""

from __future__ import annotations

import re
import subprocess
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from cnibench.backends.base import ClusterSpec, NodeRole, WorkloadKind, WorkloadSpec
from cnibench.backends.kube import render
from cnibench.backends.kube.backend import KubeBackend
from cnibench.backends.kube.cni import cni_definition
from cnibench.backends.kube.images import (
    LOCAL_TOOLS_IMAGE,
    Images,
    build_context,
    require_pullable,
)
from cnibench.backends.kube.providers import ExistingProvider, KindProvider, check_kind_version
from cnibench.engine.api import EngineReads
from cnibench.errors import ConfigError, ProvisioningError
from cnibench.system import SYSTEM_TOOLS
from engine_stand_in import FAKE_DOCKER_HOST, FakeEngineClient

POD_TOOLS = ("iperf3", "sockperf", "wrk", "ab", "curl", "tcpdump")
"""Commands the scenarios execute inside pods (clients, sockperf/iperf3 servers, captures)."""


def _dockerfile_packages() -> list[str]:
    text = (build_context(LOCAL_TOOLS_IMAGE) / "Dockerfile").read_text()
    install = re.search(
        r"apt-get install -y --no-install-recommends\s*\\?\s*(.*?)\s*\\\n", text, re.S
    )
    assert install is not None, "no apt-get install line in the Dockerfile"
    return install.group(1).split()


def _kind(tmp_path: Path, **options: Any) -> KindProvider:
    """A provider on a fake runner that keeps /lib/modules in ``tmp_path`` too."""
    return KindProvider(tmp_path, modules_dir=tmp_path / "lib-modules", **options)


@pytest.mark.parametrize("tool", POD_TOOLS)
def test_tools_image_installs_the_lab_package_of(tool: str) -> None:
    package = next(t.package for t in SYSTEM_TOOLS if t.binary == tool)
    assert package in _dockerfile_packages()


def test_tools_image_packages_exist_in_this_debian_release() -> None:
    base = (build_context(LOCAL_TOOLS_IMAGE) / "Dockerfile").read_text()
    codename = re.search(r"^FROM \S+:(\w+)-slim$", base, re.M)
    release = dict(
        line.split("=", 1)
        for line in Path("/etc/os-release").read_text().splitlines()
        if "=" in line
    )
    assert codename is not None
    assert release.get("VERSION_CODENAME") == codename.group(1), (
        "machine is not the image's release"
    )
    for package in _dockerfile_packages():
        shown = subprocess.run(
            ["apt-cache", "show", "--no-all-versions", package],
            capture_output=True,
            text=True,
            check=False,
            timeout=60,
        )
        assert shown.returncode == 0, package
        assert f"Package: {package}" in shown.stdout


def test_pods_use_the_tools_image_without_pulling_it() -> None:
    manifest = render.pod(
        "srv",
        namespace="ns",
        session="s1",
        role=NodeRole.SERVER,
        workloads=[WorkloadSpec(WorkloadKind.SOCKPERF_SERVER, 11111)],
        images=Images(),
    )
    containers = manifest["spec"]["containers"]
    assert {c["image"] for c in containers} == {LOCAL_TOOLS_IMAGE}
    # A loaded image must never be pulled: policy Never (a missing one fails at once with
    # ErrImageNeverPull), and no ":latest" tag.
    assert {c["imagePullPolicy"] for c in containers} == {"Never"}
    assert not LOCAL_TOOLS_IMAGE.endswith(":latest")
    assert ":" in LOCAL_TOOLS_IMAGE.rsplit("/", 1)[1]


class _FakeHost:
    """docker + kind as seen through KindProvider's runner (records argv) and its engine (a
    fake Docker SDK client holding the images built so far)."""

    def __init__(self, images: set[str], clusters: Sequence[str] = ()) -> None:
        self.images = images
        self.clusters = list(clusters)
        self.calls: list[list[str]] = []
        self.engine = EngineReads(
            FAKE_DOCKER_HOST,
            connect=lambda host: FakeEngineClient(images=dict.fromkeys(self.images, "sha256:a")),
        )

    def __call__(self, argv: Sequence[str]) -> str:
        self.calls.append(list(argv))
        if argv[:2] == ["docker", "build"]:
            self.images.add(argv[argv.index("--tag") + 1])
        if argv[:3] == ["kind", "get", "clusters"]:
            return "\n".join(self.clusters)
        return ""


def test_kind_builds_the_tools_image_once_then_loads_it(tmp_path: Path) -> None:
    host = _FakeHost(images=set())
    spec = ClusterSpec(cni="cilium")
    made = _kind(tmp_path, runner=host, engine=host.engine).ensure(spec, cni_definition(spec))
    builds = [c for c in host.calls if c[:2] == ["docker", "build"]]
    assert len(builds) == 1
    context = Path(builds[0][-1])
    assert (context / "Dockerfile").is_file()
    loads = [c for c in host.calls if c[:3] == ["kind", "load", "docker-image"]]
    assert loads == [["kind", "load", "docker-image", LOCAL_TOOLS_IMAGE, "--name", made.name]]
    # The load happens after the cluster exists.
    create = next(i for i, c in enumerate(host.calls) if c[:3] == ["kind", "create", "cluster"])
    assert host.calls.index(loads[0]) > create

    host.calls.clear()
    host.clusters = [made.name]
    _kind(tmp_path, runner=host, engine=host.engine).ensure(spec, cni_definition(spec))
    assert not [c for c in host.calls if c[:2] == ["docker", "build"]]
    assert [c for c in host.calls if c[:3] == ["kind", "load", "docker-image"]] == loads


def test_kind_loads_nothing_when_every_image_is_overridden(tmp_path: Path) -> None:
    host = _FakeHost(images=set())
    spec = ClusterSpec(cni="kindnet")
    images = Images(tools="registry.example/tools:1", sockperf="registry.example/tools:1")
    _kind(tmp_path, images=images, runner=host, engine=host.engine).ensure(
        spec, cni_definition(spec)
    )
    assert not [c for c in host.calls if c[0] == "docker" or c[:2] == ["kind", "load"]]


FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "kind"


def test_kind_version_of_the_node_image_release_is_accepted() -> None:
    check_kind_version((FIXTURES / "version.txt").read_text())


@pytest.mark.parametrize("older", ["v0.29.0", "v0.9.99"], ids=["previous-minor", "ancient"])
def test_older_kind_is_refused_before_anything_is_created(tmp_path: Path, older: str) -> None:
    real = (FIXTURES / "version.txt").read_text()
    text = re.sub(r"kind v\d+\.\d+\.\d+", f"kind {older}", real)
    host = _FakeHost(images=set())
    host_call = host.__call__

    def runner(argv: Sequence[str]) -> str:
        return text if list(argv) == ["kind", "version"] else host_call(argv)

    spec = ClusterSpec(cni="kindnet")
    with pytest.raises(ProvisioningError, match=f"kind {older} is older than v0.30.0"):
        _kind(tmp_path, runner=runner, engine=host.engine).ensure(spec, cni_definition(spec))
    assert not [c for c in host.calls if c[:2] in (["kind", "create"], ["docker", "build"])]


@pytest.mark.parametrize("provider", ["aks", "existing"])
def test_registry_clusters_refuse_the_local_image_naming_the_variables(provider: str) -> None:
    with pytest.raises(ConfigError, match="CNIBENCH_IMAGE_TOOLS, CNIBENCH_IMAGE_SOCKPERF"):
        require_pullable(Images(), provider)


def test_registry_images_and_kind_are_accepted() -> None:
    require_pullable(Images(), "kind")
    pushed = Images(tools="registry.example/t:1", sockperf="registry.example/t:1")
    require_pullable(pushed, "aks")


def test_existing_cluster_with_the_local_image_fails_before_touching_the_cluster(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for variable in ("CNIBENCH_IMAGE_TOOLS", "CNIBENCH_IMAGE_SOCKPERF"):
        monkeypatch.delenv(variable, raising=False)
    ensured: list[str] = []

    class Recording(ExistingProvider):
        def ensure(self, spec: ClusterSpec, cni: Any) -> Any:
            ensured.append(spec.cni)
            return super().ensure(spec, cni)

    backend = KubeBackend(Recording(tmp_path / "kubeconfig"))
    with pytest.raises(ConfigError, match="CNIBENCH_IMAGE_TOOLS"):
        backend.provision(ClusterSpec(cni="kindnet"))
    assert ensured == []
