"""What the offline image set holds for the registered CNI drivers: their recipes, the images
of a run, and why a CNI cannot run offline.

Above the driver registry (:data:`~cnibench.backends.kube.cnis.DRIVERS`): a CNI whose driver
declares an :class:`~cnibench.backends.kube.build_recipes.OfflineRecipe` is built by
``cnibench images build --cni <name>`` with nothing here changed. Pure: nothing is built.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import fields

from cnibench.backends.kube.build_recipes import ImageRecipe, OfflineRecipe
from cnibench.backends.kube.cnis import DRIVERS
from cnibench.backends.kube.images import OFFLINE_IMAGES, Images
from cnibench.backends.kube.offline.recipes import (
    OFFLINE_GATEWAYS,
    ROOTFS_PACKAGES,
    shared_image_recipes,
)
from cnibench.tools.registry import debian_packages

__all__ = [
    "cni_image_fields",
    "cni_recipes",
    "image_recipes",
    "not_offline_reason",
    "offline_cnis",
    "pod_image_tags",
    "rootfs_packages",
    "wanted_recipes",
]


def cni_recipes() -> dict[str, OfflineRecipe]:
    """The offline recipe of every registered CNI that has one, by ``--cni`` name, in
    registration order."""
    return {name: driver.offline for name, driver in DRIVERS.items() if driver.offline}


def offline_cnis() -> tuple[str, ...]:
    """CNIs the offline image set builds (from Go modules) and installs: those marked
    ``always`` (flannel) with every build, the others only when asked
    (``cnibench images build --cni <name>``)."""
    return tuple(cni_recipes())


def cni_image_fields() -> dict[str, str]:
    """Image fields only a cluster of one CNI or gateway needs (field -> its name): built and
    loaded only when that CNI is asked for (Cilium's image is 1.1 GB)."""
    found = {
        recipe.image_field: name
        for name, recipe in cni_recipes().items()
        if recipe.image_field and not recipe.always
    }
    return {**found, **{gateway: gateway for gateway in OFFLINE_GATEWAYS}}


def rootfs_packages() -> dict[str, tuple[str, ...]]:
    """Debian packages of every root filesystem: the shared ones (the tools image's first from
    :func:`cnibench.tools.registry.debian_packages`, in registration order: that order is part
    of the image's digest), then each CNI's own."""
    packages = dict(ROOTFS_PACKAGES)
    # The tools image: every registered measurement tool's package, then the shared rest.
    packages["tools"] = (*debian_packages(), *packages["tools"])
    for recipe in cni_recipes().values():
        packages.update(recipe.rootfs)
    return packages


def not_offline_reason(
    cni: str, *, loaded_modules: Iterable[str] = (), encryption: str = ""
) -> str:
    """Why ``cni`` (with ``encryption``, e.g. ``"wireguard"``) cannot run with the offline
    image set (``""`` if it can): the kernel module it needs and this host lacks
    (``loaded_modules``: names under ``/sys/module``; kind's nodes share this kernel), else
    why it is not built."""
    modules = set(loaded_modules)
    driver = DRIVERS.get(cni)
    recipe = driver.offline if driver is not None else None
    if recipe is None:
        module = driver.kernel_module if driver is not None else ""
        if module and module not in modules:
            return f"{cni} needs the {module} kernel module, which this kernel lacks"
        why = (driver.not_offline if driver is not None else "") or f"{cni} has no offline build"
        return f"no offline image of {cni}: {why} (the public images need a registry)"
    if encryption == "wireguard" and recipe.kernel_wireguard and "wireguard" not in modules:
        return (
            f"{cni} encryption with WireGuard needs the wireguard kernel module, which this"
            " kernel lacks"
        )
    return ""


def image_recipes(
    images: Images = OFFLINE_IMAGES, *, cnis: Iterable[str] | None = None
) -> tuple[ImageRecipe, ...]:
    """The images cnibench's pods run (loaded with ``kind load``), one per distinct tag of
    ``images`` except the node image (built by :mod:`.builder` from the runtime images), then
    the images of CNIs whose tag is not an :class:`~cnibench.backends.kube.images.Images`
    field.

    Parameters
    ----------
    images:
        The tags; an empty field (e.g. the public set's ``cilium``: the chart's own images) has
        no recipe.
    cnis:
        CNIs (and gateways) the images are for: an image of :func:`cni_image_fields` or of a
        CNI not built ``always`` is left out unless its CNI is one of them; ``None`` keeps
        every one.
    """
    wanted = None if cnis is None else set(cnis)
    recipes = cni_recipes()
    only_for = cni_image_fields()
    by_field: dict[str, ImageRecipe] = shared_image_recipes(images)
    for recipe in recipes.values():
        if recipe.image_field and getattr(images, recipe.image_field):
            by_field[recipe.image_field] = recipe.image(getattr(images, recipe.image_field))
    seen: dict[str, ImageRecipe] = {}
    for f in fields(images):
        tag = getattr(images, f.name)
        if f.name == "kind_node" or not tag or tag in seen:
            continue
        owner = only_for.get(f.name)
        if owner and wanted is not None and owner not in wanted:
            continue
        found = by_field.get(f.name)
        if found is None:
            # sockperf and http_echo share the tools image in the offline set.
            found = next((r for r in by_field.values() if r.tag == tag), None)
        if found is None:
            raise ValueError(f"no offline recipe for image field {f.name!r} ({tag})")
        seen[tag] = found
    for name, recipe in recipes.items():
        if recipe.image_field or not recipe.image_tag or recipe.image_tag in seen:
            continue
        if recipe.always or wanted is None or name in wanted:
            seen[recipe.image_tag] = recipe.image(recipe.image_tag)
    return tuple(seen.values())


def pod_image_tags(
    images: Images = OFFLINE_IMAGES, *, cnis: Iterable[str] | None = None
) -> tuple[str, ...]:
    """Tags ``kind load`` puts into an offline cluster (every pod image, not the node; see
    :func:`image_recipes` for ``cnis``)."""
    return tuple(recipe.tag for recipe in image_recipes(images, cnis=cnis))


def wanted_recipes(images: Images, cnis: Iterable[str]) -> Mapping[str, OfflineRecipe]:
    """The CNI recipes a build of ``cnis`` makes: every one whose image is among
    :func:`image_recipes` of ``cnis`` (flannel's always; the others when asked for and their
    image has a tag)."""
    tags = set(pod_image_tags(images, cnis=cnis))
    found: dict[str, OfflineRecipe] = {}
    for name, recipe in cni_recipes().items():
        tag = getattr(images, recipe.image_field) if recipe.image_field else recipe.image_tag
        if tag and tag in tags:
            found[name] = recipe
    return found
