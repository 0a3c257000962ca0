"""CNI drivers: one module per CNI, registered in :data:`DRIVERS`.

A driver (:class:`~cnibench.backends.kube.cnis.base.CniDriver`) turns a
:class:`~cnibench.backends.base.ClusterSpec` into a
:class:`~cnibench.backends.kube.cni.CniDefinition`, renders the CNI's own objects when cnibench
installs it itself, and renders what a running cluster needs per CNI: egress gateway objects,
priority-case policies, the L7 rule, and the CNI's account of its encryption.
:class:`~cnibench.backends.kube.cluster.KubeCluster` applies what drivers render and never
branches on a CNI's name.

To add a CNI: one module in this package with a driver object (subclass
:class:`~cnibench.backends.kube.cnis.base.DriverBase`, pin its ``version``, declare the images
it references itself as ``own_images`` and its ``offline`` recipe if it has one, and override
what the CNI offers), and one line in the registration below, which also registers its images
(so ``CNIBENCH_IMAGE_<NAME>`` overrides each). ``tests/kube/test_kube_toy_driver.py`` and
``tests/unit/test_kube_toy_cni_pins.py`` do exactly that with a driver defined in the test.

Driver modules import only what is below the registry (:mod:`~cnibench.backends.kube.cni_types`,
:mod:`~cnibench.backends.kube.build_recipes`, :mod:`~cnibench.backends.kube.render`, ...);
:mod:`cnibench.backends.kube.cni` and :mod:`cnibench.backends.kube.offline` read the registry
from above.
"""

from __future__ import annotations

from collections.abc import Mapping

from cnibench.backends.kube.cnis.antrea import ANTREA
from cnibench.backends.kube.cnis.base import CniDriver
from cnibench.backends.kube.cnis.calico import CALICO
from cnibench.backends.kube.cnis.cilium import CILIUM
from cnibench.backends.kube.cnis.flannel import FLANNEL
from cnibench.backends.kube.cnis.kindnet import KINDNET
from cnibench.backends.kube.cnis.kube_router import KUBE_ROUTER
from cnibench.backends.kube.images import register_cni_image, unregister_cni_image
from cnibench.registry import Registry

__all__ = ["DRIVERS", "CniDriver", "cni_names", "register", "unregister"]

_DRIVERS: Registry[CniDriver] = Registry("CNI driver")

DRIVERS: Mapping[str, CniDriver] = _DRIVERS.view
"""CNI drivers by ``--cni`` name, in registration order (the first is the default of a kind
cluster)."""


def register(driver: CniDriver) -> CniDriver:
    """Add a driver under its name, and its ``own_images`` to
    :data:`~cnibench.backends.kube.images.CNI_IMAGES`; returns it.

    Raises
    ------
    ValueError
        A driver of that name is already registered, or an image's name is taken (nothing
        is then registered).
    """
    added: list[str] = []
    try:
        for image in driver.own_images:
            added.append(register_cni_image(image).name)
        return _DRIVERS.register(driver)
    except ValueError:
        for name in added:
            unregister_cni_image(name)
        raise


def unregister(name: str) -> None:
    """Remove the driver registered under ``name`` and its images (nothing when there is
    none)."""
    driver = DRIVERS.get(name)
    if driver is None:
        return
    for image in driver.own_images:
        unregister_cni_image(image.name)
    _DRIVERS.unregister(name)


cni_names = _DRIVERS.names
"""Every ``--cni`` name the kube backend knows, in registration order."""


for _driver in (KINDNET, CILIUM, ANTREA, CALICO, FLANNEL, KUBE_ROUTER):
    register(_driver)
