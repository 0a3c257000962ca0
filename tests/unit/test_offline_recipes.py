"""The offline image set's recipes: go.mod wrappers, mirrors, containerd config, image list."""

from __future__ import annotations

import dataclasses
import json

import pytest

from cnibench.backends.kube.images import OFFLINE_IMAGES, Images
from cnibench.backends.kube.offline.recipes import (
    ImageRecipe,
    OfflineVersions,
    containerd_config,
    debian_mirror,
    debootstrap_argv,
    etcd_go_mod,
    go_proxy,
    image_recipes,
    kubernetes_go_mod,
    not_offline_reason,
    pod_image_tags,
    recipe_digest,
    runtime_images,
    version_ldflags,
)

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


def test_debootstrap_argv_shares_one_package_cache() -> None:
    argv = debootstrap_argv(
        "/t", suite="bookworm", mirror="http://m", packages=("a", "b"), cache_dir="/c"
    )
    assert argv == [
        "debootstrap",
        "--variant=minbase",
        "--cache-dir=/c",
        "--include=a,b",
        "bookworm",
        "/t",
        "http://m",
    ]


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


def test_only_flannel_runs_offline_and_every_other_cni_says_why() -> None:
    from cnibench.backends.kube.cni import CNI_NAMES

    assert not_offline_reason("flannel") == ""
    for cni in set(CNI_NAMES) - {"flannel"}:
        reason = not_offline_reason(cni, loaded_modules=("openvswitch",))
        assert reason.startswith(f"no offline image of {cni}: "), reason
        assert reason.endswith("(the public images need a registry)")
    assert "not served by the Go module proxy" in not_offline_reason("calico")


def test_antrea_names_the_missing_kernel_module_first() -> None:
    assert not_offline_reason("antrea", loaded_modules=("bridge", "veth")) == (
        "antrea needs the openvswitch kernel module, which this kernel lacks"
    )
    assert "openvswitch" not in not_offline_reason("antrea", loaded_modules=("openvswitch",))
