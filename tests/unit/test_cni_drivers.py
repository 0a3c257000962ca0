"""The CNI registry: one driver module per CNI, found by its --cni name, and the only place its
versions are written."""

from __future__ import annotations

import ast
import importlib
import inspect
import re
from pathlib import Path

import pytest

import cnibench
from cnibench.backends.base import ClusterSpec
from cnibench.backends.kube.cni import cni_definition
from cnibench.backends.kube.cnis import DRIVERS, CniDriver, cni_names
from cnibench.backends.kube.images import CNI_IMAGES
from cnibench.errors import ConfigError, UnsupportedError
from suite_support import code_strings

SRC = Path(cnibench.__file__).parent


def test_every_cni_name_has_a_driver_under_its_own_name() -> None:
    assert list(DRIVERS) == list(cni_names())
    assert cni_names()[0] == "kindnet"  # kind's own CNI: the default of a kind cluster
    for name, driver in DRIVERS.items():
        assert driver.name == name
        module = importlib.import_module(type(driver).__module__)
        assert module.__name__ == f"cnibench.backends.kube.cnis.{name.replace('-', '_')}"


@pytest.mark.parametrize("name", cni_names())
def test_each_driver_defines_its_own_cni_and_refuses_an_unknown_option(name: str) -> None:
    definition = cni_definition(ClusterSpec(cni=name))
    assert definition.name == name
    assert definition.readiness, f"{name}: nothing to wait for"
    with pytest.raises(ConfigError, match=f"--cni {name} takes no option colour"):
        cni_definition(ClusterSpec(cni=name, options={"colour": "blue"}))


ENCRYPTS = {"cilium": True, "antrea": True, "calico": True, "kindnet": False}


@pytest.mark.parametrize(("name", "encrypts"), ENCRYPTS.items())
def test_wireguard_is_offered_only_by_cnis_that_encrypt(name: str, encrypts: bool) -> None:
    spec = ClusterSpec(cni=name, encryption="wireguard")
    if encrypts:
        assert cni_definition(spec).encryption == "wireguard"
    else:
        with pytest.raises(ConfigError, match=f"--cni {name} cannot encrypt with WireGuard"):
            cni_definition(spec)


def test_kube_router_skips_wireguard_since_it_has_no_encryption() -> None:
    """Not a usage error: a wireguard condition on kube-router is skipped with the reason."""
    with pytest.raises(UnsupportedError, match="kube-router cannot encrypt with WireGuard"):
        cni_definition(ClusterSpec(cni="kube-router", encryption="wireguard"))


def _versions(driver: CniDriver) -> list[str]:
    """The driver's releases that look like versions (kindnet's ``kind`` does not): its pin,
    the releases pinned with it and what its offline recipe builds."""
    found = [driver.version, *driver.related_versions.values()]
    if driver.offline is not None:
        found.append(driver.offline.version)
    return sorted({v for v in found if re.fullmatch(r"v?\d+\.\d+\.\d+", v)})


def _mentions(version: str) -> re.Pattern[str]:
    """``1.18.4`` or ``v1.18.4`` as a whole version (not in ``11.18.4`` or ``1.18.40``)."""
    core = re.escape(version.removeprefix("v"))
    return re.compile(rf"(?<![\w.])v?{core}(?!\.?\d)")


SOURCES = {path: path.read_text() for path in sorted(SRC.rglob("*.py"))}


@pytest.mark.parametrize("name", cni_names())
def test_a_driver_s_versions_are_written_once_in_its_own_module(name: str) -> None:
    """Each version a driver pins (public, offline, releases pinned with it) is one string
    constant in the driver's module and is named by no other file of ``src/``, not even in a
    comment: its image references are derived from it (``own_images``), so bumping a CNI is
    one edit in one file."""
    driver = DRIVERS[name]
    own = Path(inspect.getfile(type(driver))).resolve()
    for version in _versions(driver):
        mentions = _mentions(version)
        elsewhere = [
            f"{path.relative_to(SRC)}:{number}"
            for path, text in SOURCES.items()
            if path.resolve() != own
            for number, line in enumerate(text.splitlines(), start=1)
            if mentions.search(line)
        ]
        assert elsewhere == [], f"{name} {version} is also written in {elsewhere}"
        constants = [s for s in code_strings(ast.parse(SOURCES[own])) if mentions.search(s)]
        assert len(constants) == 1, f"{name} {version} in {own.name}: {constants}"


def test_the_scan_sees_a_version_written_elsewhere() -> None:
    """The check above would catch what it was written for: images.py's copies."""
    old_images_field = 'kube_router: str = "docker.io/cloudnativelabs/kube-router:v2.6.1"'
    assert _mentions("v2.6.1").search(old_images_field)
    assert _mentions("2.6.1").search("kube-router:v2.6.1-offline-1")
    assert not _mentions("2.1.0").search("v12.1.0 v2.1.01 v2.1.0.1")


def test_every_driver_image_is_registered_under_its_own_name() -> None:
    images = [image for driver in DRIVERS.values() for image in driver.own_images]
    assert list(CNI_IMAGES.values()) == images
    assert {"flannel", "cilium", "kube_router"} <= set(CNI_IMAGES)
