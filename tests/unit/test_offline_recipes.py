"""The offline image set's recipes: go.mod wrappers, mirrors, containerd config, image list."""

from __future__ import annotations

import dataclasses
import json
import os
import re
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from cnibench.backends.kube.cnis.cilium import (
    CILIUM_OFFLINE,
    CILIUM_PACKAGES,
    CILIUM_SOURCE,
    CILIUM_UNSERVED_FORKS,
    cilium_go_mod,
    cilium_image,
    cilium_ldflags,
)
from cnibench.backends.kube.cnis.cilium import IMAGE as CILIUM_IMAGE
from cnibench.backends.kube.cnis.flannel import IMAGE as FLANNEL_IMAGE
from cnibench.backends.kube.cnis.kube_router import IMAGE as KUBE_ROUTER_IMAGE
from cnibench.backends.kube.cnis.kube_router import (
    KUBE_ROUTER_MODULE,
    KUBE_ROUTER_OFFLINE,
    kube_router_go_mod,
)
from cnibench.backends.kube.images import OFFLINE_IMAGES, CniImage, Images
from cnibench.backends.kube.offline import OfflineBuilder
from cnibench.backends.kube.offline.core import NO_DWARF, is_current
from cnibench.backends.kube.offline.plan import (
    image_recipes,
    not_offline_reason,
    offline_cnis,
    pod_image_tags,
    recipe_image,
    rootfs_packages,
)
from cnibench.backends.kube.offline.recipes import (
    ImageRecipe,
    OfflineVersions,
    containerd_config,
    debian_mirror,
    etcd_go_mod,
    go_proxy,
    kubernetes_go_mod,
    mmdebstrap_argv,
    recipe_digest,
    runtime_images,
    version_ldflags,
)
from cnibench.backends.kube.offline.rootfs import _ROOTFS_RECIPE, RootFilesystems

UPSTREAM_GO_MOD = """module k8s.io/kubernetes

go 1.24.0

require (
\tgithub.com/spf13/cobra v1.9.1
\tk8s.io/api v0.0.0
\tk8s.io/client-go v0.0.0
)

replace (
\tk8s.io/api => ./staging/src/k8s.io/api
\tk8s.io/client-go => ./staging/src/k8s.io/client-go
\tk8s.io/kube-proxy => ./staging/src/k8s.io/kube-proxy
)
"""


def test_kubernetes_wrapper_replaces_each_staging_module_with_its_release() -> None:
    text = kubernetes_go_mod(OfflineVersions(kubernetes="v1.34.4"), UPSTREAM_GO_MOD)
    assert "require k8s.io/kubernetes v1.34.4" in text
    replaced = [line.strip() for line in text.splitlines() if "=>" in line]
    assert replaced == [
        "k8s.io/api => k8s.io/api v0.34.4",
        "k8s.io/client-go => k8s.io/client-go v0.34.4",
        "k8s.io/kube-proxy => k8s.io/kube-proxy v0.34.4",
    ]
    assert "cobra" not in text  # the rest is left to go mod tidy


def test_kubernetes_wrapper_refuses_a_go_mod_without_staging_modules() -> None:
    with pytest.raises(ValueError, match="staging"):
        kubernetes_go_mod(OfflineVersions(), "module example.com/x\n\ngo 1.24\n")


def test_etcd_siblings_follow_the_server_release() -> None:
    text = etcd_go_mod(OfflineVersions(etcd="3.6.5"))
    pinned = [line.split()[-1] for line in text.splitlines() if "=>" in line]
    assert pinned
    assert set(pinned) == {"v3.6.5"}
    assert "require go.etcd.io/etcd/server/v3 v3.6.5" in text


@pytest.mark.parametrize(
    ("version", "minor"), [("v1.34.4", "34"), ("v1.9.0", "9")], ids=["1.34", "1.9"]
)
def test_version_ldflags_stamp_both_version_packages(version: str, minor: str) -> None:
    flags = version_ldflags(version)
    for package in ("k8s.io/component-base/version", "k8s.io/client-go/pkg/version"):
        assert f"-X {package}.gitVersion={version}" in flags
        assert f"-X {package}.gitMinor={minor}" in flags


@pytest.mark.parametrize(
    ("configured", "expected"),
    [
        ("https://proxy.example,direct", "https://proxy.example"),
        ("https://a.example|https://b.example,off", "https://a.example,https://b.example"),
        ("direct", ""),
    ],
    ids=["drop-direct", "keep-two", "nothing-left"],
)
def test_go_proxy_keeps_only_proxies(configured: str, expected: str) -> None:
    assert go_proxy(configured) == expected


DEB822 = """Types: deb
# a comment
URIs: http://mirror.example/debian
Suites: bookworm bookworm-updates
Components: main

Types: deb
URIs: http://mirror.example/debian-security
Suites: bookworm-security
Components: main
"""


@pytest.mark.parametrize(
    ("sources", "expected"),
    [
        (DEB822, "http://mirror.example/debian"),
        (
            "deb http://sec.example/debian-security bookworm-security main\n"
            "deb [arch=amd64] http://one.example/debian bookworm main\n",
            "http://one.example/debian",
        ),
        ("# nothing here\n", ""),
    ],
    ids=["deb822", "one-line-with-options", "none"],
)
def test_debian_mirror_is_the_main_archive(sources: str, expected: str) -> None:
    assert debian_mirror(sources) == expected


KIND_CONTAINERD = """version = 2

[plugins."io.containerd.grpc.v1.cri"]
  restrict_oom_score_adj = false
  sandbox_image = "registry.k8s.io/pause:3.10"

[proxy_plugins]
  [proxy_plugins."fuse-overlayfs"]
    type = "snapshot"
    address = "/run/containerd-fuse-overlayfs.sock"

[plugins."io.containerd.grpc.v1.cri".containerd]
  default_runtime_name = "runc"
"""


def test_containerd_config_for_machines_without_cap_sys_resource() -> None:
    text = containerd_config(KIND_CONTAINERD, pause_tag="3.10.1")
    assert "restrict_oom_score_adj = true" in text
    assert 'sandbox_image = "registry.k8s.io/pause:3.10.1"' in text
    assert "fuse-overlayfs" not in text
    assert 'default_runtime_name = "runc"' in text  # what follows the removed section stays


def test_containerd_config_refuses_an_unexpected_layout() -> None:
    with pytest.raises(ValueError, match="restrict_oom_score_adj"):
        containerd_config("version = 2\n", pause_tag="3.10.1")


def test_runtime_images_are_tagged_as_kubeadm_asks() -> None:
    versions = OfflineVersions()
    tags = {recipe.tag for recipe in runtime_images(versions)}
    assert f"registry.k8s.io/kube-apiserver:{versions.kubernetes}" in tags
    assert f"registry.k8s.io/etcd:{versions.etcd}-0" in tags
    assert f"registry.k8s.io/pause:{versions.pause}" in tags
    assert f"registry.k8s.io/coredns/coredns:{versions.coredns}" in tags
    proxy = next(r for r in runtime_images(versions) if "kube-proxy" in r.tag)
    assert proxy.rootfs == "netfilter"  # kube-proxy programs iptables: needs a userland


def test_pod_images_are_built_once_per_tag() -> None:
    tags = pod_image_tags(OFFLINE_IMAGES)
    assert len(tags) == len(set(tags))
    assert OFFLINE_IMAGES.tools in tags
    assert OFFLINE_IMAGES.http_echo in tags
    assert OFFLINE_IMAGES.kind_node not in tags


def test_an_image_field_without_a_recipe_is_refused() -> None:
    odd = dataclasses.replace(OFFLINE_IMAGES, sockperf="localhost/something-else:1")
    with pytest.raises(ValueError, match="sockperf"):
        image_recipes(odd)


def test_image_changes_are_docker_import_instructions() -> None:
    recipe = ImageRecipe(
        tag="t", entrypoint=("/pause",), cmd=("a b",), env={"PATH": "/bin"}, user="65535:65535"
    )
    assert recipe.changes() == [
        "ENV PATH=/bin",
        'ENTRYPOINT ["/pause"]',
        f"CMD {json.dumps(['a b'])}",
        "USER 65535:65535",
    ]


def test_mmdebstrap_argv_shares_one_package_cache_and_merges_usr() -> None:
    argv = mmdebstrap_argv(
        "/t", suite="bookworm", mirror="http://m", packages=("a", "b"), cache_dir="/c"
    )
    assert argv[0] == "mmdebstrap"
    assert argv[-4:] == ["--include=a,b", "bookworm", "/t", "http://m"]
    assert {"--variant=minbase", "--mode=root", "--format=directory"} <= set(argv)
    assert "--hook-dir=/usr/share/mmdebstrap/hooks/merged-usr" in argv
    # The cache is synced in before the download and out after the install; the download
    # step does not empty what was synced in.
    hooks = [a for a in argv if a.startswith(("--setup-hook=", "--customize-hook="))]
    assert hooks[-2:] == [
        "--setup-hook=sync-in /c /var/cache/apt/archives",
        "--customize-hook=sync-out /var/cache/apt/archives /c",
    ]
    assert "--skip=download/empty" in argv


def test_recipe_digest_changes_with_any_version() -> None:
    base = recipe_digest("x", OfflineVersions())
    assert base == recipe_digest("x", OfflineVersions())
    assert base != recipe_digest("x", OfflineVersions(flannel="v0.28.4"))


def test_offline_set_is_selected_by_environment() -> None:
    assert Images.from_environment({"CNIBENCH_IMAGES": "offline"}).offline
    assert not Images.from_environment({}).offline
    custom = Images.from_environment({"CNIBENCH_IMAGES": "offline", "CNIBENCH_IMAGE_TOOLS": "x:1"})
    assert custom.tools == "x:1"
    assert custom.prometheus == OFFLINE_IMAGES.prometheus


@pytest.mark.parametrize(
    ("variable", "image"),
    [
        ("CNIBENCH_IMAGE_FLANNEL", FLANNEL_IMAGE),
        ("CNIBENCH_IMAGE_CILIUM", CILIUM_IMAGE),
        ("CNIBENCH_IMAGE_KUBE_ROUTER", KUBE_ROUTER_IMAGE),
    ],
    ids=["flannel", "cilium", "kube-router"],
)
def test_a_cni_image_keeps_its_variable(variable: str, image: CniImage) -> None:
    """The names the images had as fields of ``Images``, now derived from the registry."""
    assert image.variable == variable
    mine = {variable: "registry.example/mine:1"}
    assert Images.from_environment(mine).cni_image(image) == "registry.example/mine:1"
    assert not Images.from_environment({"CNIBENCH_IMAGES": "offline", **mine}).offline


def test_importing_the_images_module_alone_registers_the_cni_images() -> None:
    """``from_environment`` reads ``CNIBENCH_IMAGE_<NAME>`` of registered CNI images only;
    importing ``images`` runs the kube package, whose registry registers them, so no caller
    reads the environment before they are known."""
    code = "from cnibench.backends.kube.images import CNI_IMAGES; print(*CNI_IMAGES)"
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    assert done.stdout.split() == ["cilium", "flannel", "kube_router"]


def test_an_image_set_is_a_value() -> None:
    """Equal and hashable by what it holds, CNI overrides in any order (it was hashable when
    the CNI images were fields)."""
    one = Images(cni_overrides={"flannel": "f:1", "cilium": "c:1"})
    other = Images(cni_overrides={"cilium": "c:1", "flannel": "f:1"})
    assert one == other
    assert hash(one) == hash(other)
    assert len({Images(), one, other, OFFLINE_IMAGES}) == 3


def test_flannel_cilium_and_kube_router_run_offline_and_every_other_cni_says_why() -> None:
    from cnibench.backends.kube.cnis import cni_names

    for cni in ("flannel", "cilium", "kube-router"):
        assert not_offline_reason(cni) == ""
    for cni in set(cni_names()) - {"flannel", "cilium", "kube-router"}:
        reason = not_offline_reason(cni, loaded_modules=("openvswitch",))
        assert reason.startswith(f"no offline image of {cni}: "), reason
        assert reason.endswith("(the public images need a registry)")
    assert "not served by the Go module proxy" in not_offline_reason("calico")


def test_antrea_names_the_missing_kernel_module_first() -> None:
    assert not_offline_reason("antrea", loaded_modules=("bridge", "veth")) == (
        "antrea needs the openvswitch kernel module, which this kernel lacks"
    )
    assert "openvswitch" not in not_offline_reason("antrea", loaded_modules=("openvswitch",))


def test_wireguard_encryption_needs_the_kernel_module_on_this_host() -> None:
    """kind's nodes share this kernel: Cilium's WireGuard without the module would leave its
    agents crash-looping instead of a skip with the reason (seen on a real kind cluster)."""
    for cni in ("cilium", "flannel"):
        reason = not_offline_reason(cni, loaded_modules=("veth",), encryption="wireguard")
        assert reason == (
            f"{cni} encryption with WireGuard needs the wireguard kernel module, which this"
            " kernel lacks"
        )
        assert not_offline_reason(cni, loaded_modules=("wireguard",), encryption="wireguard") == ""
        assert not_offline_reason(cni, loaded_modules=("veth",)) == ""
    # A CNI that cannot encrypt at all says so itself (its driver), not "no kernel module".
    assert not_offline_reason("kube-router", loaded_modules=("veth",), encryption="wireguard") == ""
    # A CNI that cannot run at all says that first.
    assert "openvswitch" in not_offline_reason("antrea", encryption="wireguard")


# -- Cilium ----------------------------------------------------------------------------------


def _cilium_module() -> Path:
    """The real Cilium module in the Go module cache (where ``cnibench images build --cni
    cilium`` and the kube tier put it)."""
    root = os.environ.get("GOMODCACHE") or str(Path.home() / "go" / "pkg" / "mod")
    module = Path(root) / f"github.com/cilium/cilium@{CILIUM_OFFLINE.version}"
    if not (module / "go.mod").is_file():
        pytest.skip(f"Cilium's module is not in the Go module cache ({module})")
    return module


def _cilium_upstream_go_mod() -> str:
    return (_cilium_module() / "go.mod").read_text()


def test_cilium_wrapper_repeats_every_replace_of_the_real_upstream_go_mod() -> None:
    upstream = _cilium_upstream_go_mod()
    upstream_replaces = re.findall(r"^replace\s+(\S+.*=>.*\S)\s*$", upstream, re.M)
    assert upstream_replaces, "the upstream go.mod should have one-line replace directives"
    text = cilium_go_mod(CILIUM_OFFLINE.version, upstream)
    assert f"require github.com/cilium/cilium {CILIUM_OFFLINE.version}" in text
    wrapper = {line.strip() for line in text.splitlines() if "=>" in line}
    for directive in upstream_replaces:
        module = directive.split()[0]
        if module in CILIUM_UNSERVED_FORKS:
            assert f"{module} => {module} {CILIUM_UNSERVED_FORKS[module]}" in wrapper
        else:
            assert " ".join(directive.split()) in wrapper
    assert len(wrapper) == len(upstream_replaces)


def test_cilium_wrapper_reads_replace_blocks_and_ignores_comments() -> None:
    upstream = (
        "module github.com/cilium/cilium\n\n"
        "// replace example.com/commented => example.com/other v1.0.0\n"
        "replace (\n"
        "\texample.com/a => example.com/a-fork v1.2.3 // why\n"
        "\texample.com/b v0.1.0 => ./local/b\n"
        ")\n"
    )
    text = cilium_go_mod(CILIUM_OFFLINE.version, upstream)
    replaced = [line.strip() for line in text.splitlines() if "=>" in line]
    assert replaced == [
        "example.com/a => example.com/a-fork v1.2.3",
        "example.com/b v0.1.0 => ./local/b",
    ]


def test_cilium_wrapper_refuses_a_go_mod_without_replaces() -> None:
    with pytest.raises(ValueError, match="replaces nothing"):
        cilium_go_mod(CILIUM_OFFLINE.version, "module example.com/x\n\ngo 1.24\n")


def test_cilium_ldflags_stamp_the_version_without_v() -> None:
    flags = cilium_ldflags("v1.18.4").split()
    assert flags[:2] == ["-s", "-w"]
    assert "github.com/cilium/cilium/pkg/version.ciliumVersion=1.18.4" in flags


@pytest.mark.parametrize(
    ("step", "digest"),
    [
        ("go", "2113ed397fb1"),
        ("cilium", "5838f67932a7"),
        ("kube-router", "6c2346fbe2c8"),
        ("rootfs:node", "414ca0476e07"),
        ("rootfs:netfilter", "dab004034743"),
        ("rootfs:tools", "0471726524a5"),
        ("rootfs:monitoring", "3a5e83af4c9e"),
        ("rootfs:cilium", "736e287157b9"),
        ("rootfs:kube-router", "c17061d97d6f"),
    ],
)
def test_build_digests_are_those_the_caches_were_stamped_with(
    step: str, digest: str, tmp_path: Path
) -> None:
    """A changed digest rebuilds that step cold (CI's cache would be of no use: tens of
    minutes): these are the stamps of the existing caches, made before the CNI recipes moved
    into the drivers. Change one only on purpose, with the recipe (the root filesystems':
    ``rootfs-2``, mmdebstrap in place of debootstrap)."""
    builder = OfflineBuilder(root=tmp_path, environ={}, log=lambda _: None)
    recipes = {"cilium": CILIUM_OFFLINE, "kube-router": KUBE_ROUTER_OFFLINE}
    if step == "go":
        found = builder.go_bin.name
    elif step.startswith("rootfs:"):
        packages = rootfs_packages()[step.removeprefix("rootfs:")]
        found = recipe_digest(_ROOTFS_RECIPE, builder.versions.debian, packages)
    else:
        found = recipe_digest(*recipes[step].build.digest_inputs)
    assert found == digest


def test_cilium_image_has_the_official_layout() -> None:
    recipe = cilium_image("localhost/c:1")
    assert recipe.rootfs == "cilium"
    for inside in ("/usr/bin/cilium-agent", "/usr/bin/cilium-dbg", "/opt/cni/bin/cilium-cni"):
        assert inside in recipe.files
    # every built binary lands somewhere, and each output name is a built package's last part
    built = {name for name in recipe.files.values() if not name.startswith(CILIUM_SOURCE)}
    assert built == {f"cilium/{p.rsplit('/', 1)[-1]}" for p in CILIUM_PACKAGES}
    for script in ("/init-container.sh", "/install-plugin.sh", "/cni-uninstall.sh"):
        assert recipe.files[script].startswith(CILIUM_SOURCE)
        assert recipe.files[script].endswith(script)
    assert recipe.trees == {"/var/lib/cilium/bpf": CILIUM_SOURCE + "bpf"}
    assert recipe.links["/usr/local/bin/clang"] == "/usr/bin/clang-16"
    assert recipe.links["/usr/local/bin/llc"] == "/usr/bin/llc-16"
    assert recipe.links["/usr/bin/cilium-operator"] == "cilium-operator-generic"
    assert "/usr/local/bin" in recipe.env["PATH"].split(":")
    assert {"clang-16", "llvm-16", "bpftool", "ipset"} <= set(rootfs_packages()["cilium"])


def test_cilium_module_files_the_image_uses_exist_in_the_module() -> None:
    module = _cilium_module()
    recipe = cilium_image("localhost/c:1")
    sources = [*recipe.files.values(), *recipe.trees.values()]
    for name in sources:
        if name.startswith(CILIUM_SOURCE):
            assert (module / name.removeprefix(CILIUM_SOURCE)).exists(), name
    for package in CILIUM_PACKAGES:
        assert (module / package).is_dir(), package


@pytest.mark.parametrize(
    ("cnis", "has_cilium"),
    [(None, True), (["cilium"], True), (["flannel"], False), ([], False)],
    ids=["all", "cilium", "flannel", "none"],
)
def test_cilium_image_only_for_cilium(cnis: list[str] | None, has_cilium: bool) -> None:
    tags = pod_image_tags(OFFLINE_IMAGES, cnis=cnis)
    assert (CILIUM_IMAGE.offline in tags) is has_cilium
    assert FLANNEL_IMAGE.offline in tags


def test_an_empty_image_has_no_recipe() -> None:
    assert Images().cni_image(CILIUM_IMAGE) == ""  # the chart's own images
    tags = pod_image_tags(dataclasses.replace(OFFLINE_IMAGES, cni_overrides={"cilium": ""}))
    assert "" not in tags
    assert len(tags) == len(pod_image_tags(OFFLINE_IMAGES)) - 1


def test_kube_router_wrapper_requires_the_served_release() -> None:
    text = kube_router_go_mod(KUBE_ROUTER_OFFLINE.version)
    assert "module cnibench.local/kube-router" in text
    assert f"require {KUBE_ROUTER_MODULE} v2.1.0" in text
    assert "replace" not in text  # kube-router's go.mod replaces nothing


@pytest.mark.parametrize(
    ("cnis", "has_kube_router"),
    [(None, True), (["kube-router"], True), (["cilium"], False), ([], False)],
    ids=["all", "kube-router", "cilium", "none"],
)
def test_kube_router_image_only_for_kube_router(
    cnis: list[str] | None, has_kube_router: bool
) -> None:
    recipes = {r.tag: r for r in image_recipes(OFFLINE_IMAGES, cnis=cnis)}
    assert (KUBE_ROUTER_IMAGE.offline in recipes) is has_kube_router
    if has_kube_router:
        recipe = recipes[KUBE_ROUTER_IMAGE.offline]
        assert recipe.files == {"/usr/local/bin/kube-router": "kube-router"}
        # NetworkPolicy is iptables + ipsets: the userland must be in the image.
        assert {"iptables", "ipset", "iproute2"} <= set(rootfs_packages()[recipe.rootfs])


@pytest.mark.parametrize("driver_name", offline_cnis())
def test_each_recipe_builds_an_image_its_driver_declares(driver_name: str) -> None:
    """A CNI's image tags are its driver's own (``own_images``, overridable one by one with
    ``CNIBENCH_IMAGE_<NAME>``): the offline one names the release its recipe builds, the
    public one the release the driver pins."""
    from cnibench.backends.kube.cnis import DRIVERS

    driver = DRIVERS[driver_name]
    recipe = driver.offline
    assert recipe is not None
    image = recipe_image(driver_name)
    assert image in driver.own_images
    assert f":{recipe.version}-offline-" in OFFLINE_IMAGES.cni_image(image)
    public = Images().cni_image(image)
    if public:  # the public set's Cilium image is the chart's own
        assert public.endswith(f":{driver.version}")


@pytest.mark.parametrize(
    ("image", "tag"),
    [
        (FLANNEL_IMAGE, "localhost/cnibench-flannel:v0.28.10-offline-1"),
        (CILIUM_IMAGE, "localhost/cnibench-cilium:v1.18.4-offline-1"),
        (KUBE_ROUTER_IMAGE, "localhost/cnibench-kube-router:v2.1.0-offline-1"),
    ],
    ids=["flannel", "cilium", "kube-router"],
)
def test_offline_cni_image_tags_are_those_the_engines_hold(image: CniImage, tag: str) -> None:
    """Images are found in the engine by tag: a changed tag rebuilds and reloads the image, as
    a changed digest rebuilds its step. Change one only on purpose, with the recipe."""
    assert OFFLINE_IMAGES.cni_image(image) == tag


def _compile_commands(tmp_path: Path, environ: dict[str, str]) -> list[str]:
    """The compiler command lines ``go build -n -a`` prints for a one-file module (its own
    package and the standard library's it imports), in ``environ`` (a Go proxy is named but
    never asked: the module has no requirement)."""
    (tmp_path / "go.mod").write_text("module example.test/hello\n\ngo 1.22\n")
    main = 'package main\n\nimport "fmt"\n\nfunc main() { fmt.Println() }\n'
    (tmp_path / "main.go").write_text(main)
    done = subprocess.run(
        ["go", "build", "-n", "-a", "."],
        cwd=tmp_path,
        env=environ,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return [line for line in done.stderr.splitlines() if "/compile " in line]


def test_every_go_build_of_the_offline_set_compiles_without_debug_information(
    tmp_path: Path,
) -> None:
    """``go`` itself reads the builder's environment: every package it would compile, the
    standard library's too, gets ``-dwarf=false``; and without that flag, none does."""
    builder = OfflineBuilder(
        root=tmp_path / "cache",
        environ={**os.environ, "GOPROXY": "https://proxy.example", "GOFLAGS": "-p=2"},
        log=lambda _: None,
    )
    env = builder.context.commands.go_env()
    assert "-p=2" in env["GOFLAGS"].split()  # the user's flags are kept beside it
    (tmp_path / "with").mkdir()
    compiled = _compile_commands(tmp_path / "with", env)
    assert len(compiled) > 10, compiled  # main and fmt's closure
    assert all("-dwarf=false" in line for line in compiled), compiled
    plain = dict(env, GOFLAGS=env["GOFLAGS"].replace(NO_DWARF, ""))
    (tmp_path / "without").mkdir()
    without = _compile_commands(tmp_path / "without", plain)
    assert without
    assert not any("-dwarf=false" in line for line in without)
    # The rest of the builds (kwok and helm for the kube tier) pass the same flag.
    script = (Path(__file__).parents[2] / "scripts" / "kube-tier.sh").read_text()
    assert f"install -trimpath {NO_DWARF} " in script


def test_a_root_filesystem_is_made_in_a_cache_that_has_no_rootfs_directory_yet(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """On a new machine ``<cache>/offline/rootfs`` does not exist, and mmdebstrap resolves its
    target's parent (cold CI, 2026-12-04: "unable to get absolute path of target directory"):
    the builder makes it first, then stamps the tree and drops apt's downloads and the docs."""
    builder = OfflineBuilder(root=tmp_path, environ={}, log=lambda _: None)
    monkeypatch.setattr(RootFilesystems, "_mirror", lambda self: "http://mirror.example/debian")
    ran: list[list[str]] = []

    def fake_run(argv: Sequence[str], *, step: str, **_: object) -> str:
        ran.append(list(argv))
        target = Path(argv[-2])
        assert target.parent.is_dir(), f"{target.parent} missing when {argv[0]} ran"
        (target / "var/cache/apt/archives").mkdir(parents=True)
        (target / "var/cache/apt/archives/x.deb").write_text("deb")
        (target / "usr/share/doc/x").mkdir(parents=True)
        return ""

    fake: Any = fake_run
    builder.context.commands.run = fake
    out = builder.rootfs("netfilter")
    [argv] = ran
    assert argv[0] == "mmdebstrap"
    assert argv[-3:] == ["bookworm", str(out), "http://mirror.example/debian"]
    assert out.parent == tmp_path / "offline" / "rootfs"
    assert is_current(out, out.name.rsplit("-", 1)[1])
    assert not (out / "var/cache/apt/archives/x.deb").exists()
    assert not (out / "usr/share/doc").exists()


def test_a_failed_go_build_leaves_no_staging_directory_and_the_old_commands(
    tmp_path: Path,
) -> None:
    """go_build_into builds into ``bin.new`` beside ``out``: a build that fails (here a stand-in
    for go that writes half its output, then fails) removes it, and ``out`` keeps what it
    held."""
    from cnibench.backends.kube.offline.core import BuildCommands
    from cnibench.errors import ProvisioningError

    class FailingGo(BuildCommands):
        def run(self, argv: Sequence[str], **kwargs: object) -> str:  # type: ignore[override]
            staging = Path(argv[argv.index("-o") + 1])
            (staging / "cilium-agent").write_text("half")
            raise ProvisioningError("go-build: go build failed (exit 1)")

    out = tmp_path / "bin"
    out.mkdir()
    (out / "cilium-agent").write_text("the previous build")
    commands = FailingGo(environ={}, docker_host="", logs=tmp_path / "logs")
    with pytest.raises(ProvisioningError, match="go build failed"):
        commands.go_build_into(
            out, ["github.com/cilium/cilium/daemon/cilium-agent"], [], digest="d", step="go-build",
            cwd=tmp_path, env={},
        )  # fmt: skip
    assert not (tmp_path / "bin.new").exists()
    assert (out / "cilium-agent").read_text() == "the previous build"
