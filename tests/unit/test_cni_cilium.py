"""Cilium's driver with the offline image set: the chart from the Go module, one image for
everything, no Envoy, and the chart's capabilities without SYS_RESOURCE where the host lacks it.

The chart-defaults test reads the real chart in the Go module cache (skipped when the module
is not there); the rest checks the driver's own output, with the host checks (module cache
path, bounding set) passed in as functions so both answers are exercised on any machine."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
import yaml

from cnibench.backends.base import Capability, ClusterSpec
from cnibench.backends.kube.cni import CniVersions
from cnibench.backends.kube.cnis.cilium import (
    CHART_CAPABILITIES,
    CILIUM,
    CILIUM_OFFLINE,
    CiliumDriver,
    cilium_values,
    module_chart_dir,
)
from cnibench.backends.kube.cnis.cilium import IMAGE as CILIUM_IMAGE
from cnibench.backends.kube.helm import helm_install_argv
from cnibench.backends.kube.images import OFFLINE_IMAGES, Images
from cnibench.errors import ConfigError

CHART = Path("/modcache/github.com/cilium/cilium@v1.18.4/install/kubernetes/cilium")
IMAGE = "localhost/cilium-test:1"


def _driver(*, lacks_sys_resource: bool = False) -> CiliumDriver:
    return CiliumDriver(
        chart_dir=lambda version: CHART, lacks_sys_resource=lambda: lacks_sys_resource
    )


def _values(**options: Any) -> dict[str, Any]:
    return cilium_values(
        mode="kpr", features=frozenset({"egress-gateway"}), wireguard=False, **options
    )


# -- values --------------------------------------------------------------------------------------


def test_offline_values_use_the_one_image_never_pulled() -> None:
    values = _values(image=IMAGE)
    for image in (values["image"], values["operator"]["image"]):
        assert image == {"override": IMAGE, "pullPolicy": "Never", "useDigest": False}
    assert values["certgen"]["image"]["override"] == IMAGE
    assert values["certgen"]["image"]["pullPolicy"] == "Never"
    assert values["operator"]["replicas"] == 1  # the operator's other values stay


def test_offline_values_turn_off_everything_needing_another_image() -> None:
    values = _values(image=IMAGE)
    assert values["envoy"] == {"enabled": False}
    assert values["l7Proxy"] is False
    assert values["hubble"]["enabled"] is False
    assert values["hubble"]["relay"]["enabled"] is False
    assert values["hubble"]["ui"]["enabled"] is False
    assert values["nodeinit"]["enabled"] is False
    assert values["preflight"]["enabled"] is False
    assert values["clustermesh"]["useAPIServer"] is False
    assert values["authentication"]["mutual"]["spire"]["enabled"] is False


def test_public_values_name_no_image() -> None:
    values = _values()
    assert "image" not in values
    assert "image" not in values["operator"]
    assert "envoy" not in values


@pytest.mark.parametrize("drop", [True, False], ids=["dropped", "kept"])
def test_sys_resource_is_dropped_only_when_told(drop: bool) -> None:
    values = _values(image=IMAGE, drop_sys_resource=drop)
    if not drop:
        assert "securityContext" not in values
        return
    caps = values["securityContext"]["capabilities"]
    assert set(caps) == set(CHART_CAPABILITIES)
    for container, defaults in CHART_CAPABILITIES.items():
        assert "SYS_RESOURCE" not in caps[container]
        assert caps[container] == [c for c in defaults if c != "SYS_RESOURCE"]


def test_capability_defaults_are_the_charts() -> None:
    root = os.environ.get("GOMODCACHE") or str(Path.home() / "go" / "pkg" / "mod")
    version = CILIUM.version.removeprefix("v")
    values_yaml = (
        Path(root) / f"github.com/cilium/cilium@v{version}/install/kubernetes/cilium/values.yaml"
    )
    if not values_yaml.is_file():
        pytest.skip(f"Cilium's chart is not in the Go module cache ({values_yaml})")
    chart_caps = yaml.safe_load(values_yaml.read_text())["securityContext"]["capabilities"]
    asking = {name for name, caps in chart_caps.items() if "SYS_RESOURCE" in caps}
    assert asking == set(CHART_CAPABILITIES)
    for container, caps in CHART_CAPABILITIES.items():
        assert list(caps) == chart_caps[container]


# -- the definition --------------------------------------------------------------------------


def test_offline_definition_installs_the_module_chart() -> None:
    cni = _driver().definition(
        ClusterSpec(cni="cilium"), versions=CniVersions(), images=OFFLINE_IMAGES
    )
    assert cni.chart is not None
    assert cni.chart.path == str(CHART)
    assert cni.chart.values["image"]["override"] == OFFLINE_IMAGES.cni_image(CILIUM_IMAGE)


def test_an_own_cilium_image_alone_selects_the_offline_install() -> None:
    images = Images(cni_overrides={"cilium": IMAGE})
    cni = _driver().definition(ClusterSpec(cni="cilium"), versions=CniVersions(), images=images)
    assert cni.chart is not None
    assert cni.chart.path == str(CHART)
    assert cni.chart.values["operator"]["image"]["override"] == IMAGE


def test_public_definition_uses_the_repository_even_without_sys_resource() -> None:
    cni = _driver(lacks_sys_resource=True).definition(
        ClusterSpec(cni="cilium"), versions=CniVersions(), images=Images()
    )
    assert cni.chart is not None
    assert cni.chart.path == ""
    assert "securityContext" not in cni.chart.values
    assert Capability.L7_POLICY in cni.capabilities


@pytest.mark.parametrize("mode", ["kpr", "kube-proxy"])
def test_offline_definition_offers_nothing_that_needs_envoy(mode: str) -> None:
    cni = _driver().definition(
        ClusterSpec(cni="cilium", options={"mode": mode}),
        versions=CniVersions(),
        images=OFFLINE_IMAGES,
    )
    assert Capability.L7_POLICY not in cni.capabilities
    assert Capability.TRAFFIC_SPLIT not in cni.capabilities
    assert Capability.NETWORK_POLICY in cni.capabilities
    assert "cilium-envoy" not in {r.name for r in cni.readiness}
    assert cni.chart is not None
    assert cni.chart.values["l7Proxy"] is False


@pytest.mark.parametrize("features", ["l7", "gateway-api"])
def test_offline_definition_refuses_a_feature_that_needs_envoy(features: str) -> None:
    spec = ClusterSpec(cni="cilium", options={"features": features})
    with pytest.raises(ConfigError, match="Envoy"):
        _driver().definition(spec, versions=CniVersions(), images=OFFLINE_IMAGES)


@pytest.mark.parametrize("lacks", [True, False], ids=["lacking", "having"])
def test_offline_definition_drops_sys_resource_where_the_host_lacks_it(lacks: bool) -> None:
    cni = _driver(lacks_sys_resource=lacks).definition(
        ClusterSpec(cni="cilium"), versions=CniVersions(), images=OFFLINE_IMAGES
    )
    assert cni.chart is not None
    assert ("securityContext" in cni.chart.values) is lacks


def test_local_chart_is_installed_from_its_directory(tmp_path: Path) -> None:
    cni = _driver().definition(
        ClusterSpec(cni="cilium"), versions=CniVersions(), images=OFFLINE_IMAGES
    )
    assert cni.chart is not None
    argv = helm_install_argv(cni.chart, tmp_path / "v.yaml", kubeconfig=tmp_path / "kubeconfig")
    assert argv[3:5] == ["cilium", str(CHART)]
    assert "--repo" not in argv
    assert "--version" not in argv


@pytest.mark.parametrize("version", ["1.18.4", "v1.18.4"], ids=["chart-version", "module-tag"])
def test_module_chart_dir_is_under_the_module_tag(
    version: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("GOMODCACHE", str(tmp_path))
    assert module_chart_dir(version) == (
        tmp_path / "github.com/cilium/cilium@v1.18.4/install/kubernetes/cilium"
    )


def test_the_chart_version_is_the_built_module_release() -> None:
    assert "v" + CILIUM.version == CILIUM_OFFLINE.version
    # The offline image's tag (the driver's own, CNIBENCH_IMAGE_CILIUM overrides it) names the
    # built release.
    assert f":{CILIUM_OFFLINE.version}-offline-" in OFFLINE_IMAGES.cni_image(CILIUM_IMAGE)


def test_a_version_override_reaches_the_definition_and_the_chart() -> None:
    definition = _driver().definition(
        ClusterSpec(cni="cilium"), versions=CniVersions({"cilium": "1.19.0"}), images=Images()
    )
    assert definition.version == "1.19.0"
    assert definition.chart is not None
    assert definition.chart.version == "1.19.0"
