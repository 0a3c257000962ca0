"""The CNI registry: one driver module per CNI, found by its --cni name."""

from __future__ import annotations

import importlib

import pytest

from cnibench.backends.base import ClusterSpec
from cnibench.backends.kube.cni import cni_definition
from cnibench.backends.kube.cnis import DRIVERS, cni_names
from cnibench.errors import ConfigError, UnsupportedError


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
