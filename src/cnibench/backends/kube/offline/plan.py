"""What the offline image set holds for the registered CNI drivers: their recipes, the images
of a run, and why a CNI cannot run offline.

Above the driver registry (:data:`~cnibench.backends.kube.cnis.DRIVERS`): a CNI whose driver
declares an :class:`~cnibench.backends.kube.build_recipes.OfflineRecipe` is built by
``cnibench images build --cni <name>`` with nothing here changed. Pure: nothing is built.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from cnibench.backends.kube.build_recipes import ImageRecipe, OfflineRecipe
from cnibench.backends.kube.cnis import DRIVERS
from cnibench.backends.kube.images import OFFLINE_IMAGES, CniImage, Images
from cnibench.backends.kube.offline.recipes import (
    LOAD_ENGINE_ROOTFS,
    OFFLINE_GATEWAYS,
    OFFLINE_LOAD_ENGINES,
    ROOTFS_PACKAGES,
    shared_image_recipes,
)
from cnibench.tools.registry import debian_packages

__all__ = [
    "cluster_image_tags",
    "cni_recipes",
    "image_recipes",
    "images_only_for",
    "not_offline_reason",
    "offline_cnis",
    "pod_image_tags",
    "recipe_image",
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


def recipe_image(cni: str) -> CniImage:
    """The image of ``cni``'s driver that its offline recipe builds (the recipe's
    ``image_name``).

    Raises
    ------
    ValueError
        The driver declares no image of that name.
    """
    recipe = cni_recipes()[cni]
    for image in DRIVERS[cni].own_images:
        if image.name == recipe.image_name:
            return image
    raise ValueError(
        f"{cni}'s offline recipe builds image {recipe.image_name!r}, which its driver does not"
        " declare in own_images"
    )


def images_only_for() -> dict[str, str]:
    """Images only a cluster of one CNI or gateway needs (image name -> CNI or gateway): built
    and loaded only when that CNI is asked for (Cilium's image is 1.1 GB)."""
    found = {recipe.image_name: name for name, recipe in cni_recipes().items() if not recipe.always}
    extras = (*OFFLINE_GATEWAYS, *OFFLINE_LOAD_ENGINES)
    return {**found, **{name: name for name in extras}}


def rootfs_packages() -> dict[str, tuple[str, ...]]:
    """Debian packages of every root filesystem: the shared ones (the tools image's first from
    :func:`cnibench.tools.registry.debian_packages`, in registration order: that order is part
    of the image's digest), then each CNI's own."""
    packages = dict(ROOTFS_PACKAGES)
    # The tools image: every registered measurement tool's package, then the shared rest.
    packages["tools"] = (*debian_packages(), *packages["tools"])
    for recipe in cni_recipes().values():
        packages.update(recipe.rootfs)
    packages.update(LOAD_ENGINE_ROOTFS)
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
    ``images``: the shared ones except the node image (built by :mod:`.builder` from the
    runtime images) and the gateways, then each CNI recipe's image (those built ``always``
    first, then in registration order), then the gateways.

    Parameters
    ----------
    images:
        The tags; an empty one (e.g. the public set's Cilium image: the chart's own images)
        has no recipe.
    cnis:
        CNIs (and gateways) the images are for: an image of :func:`images_only_for` is left
        out unless its CNI is one of them; ``None`` keeps every one.
    """
    wanted = None if cnis is None else set(cnis)
    only_for = images_only_for()
    by_name: dict[str, ImageRecipe] = shared_image_recipes(images)
    shared = images.shared()
    del shared["kind_node"]
    gateways = {name: shared.pop(name) for name in (*OFFLINE_GATEWAYS, *OFFLINE_LOAD_ENGINES)}
    tags = dict(shared)
    always_first = sorted(cni_recipes().items(), key=lambda item: not item[1].always)
    for cni, recipe in always_first:
        image = recipe_image(cni)
        tags[image.name] = images.cni_image(image)
        if tags[image.name]:
            by_name[image.name] = recipe.image(tags[image.name])
    tags.update(gateways)
    seen: dict[str, ImageRecipe] = {}
    for name, tag in tags.items():
        if not tag or tag in seen:
            continue
        owner = only_for.get(name)
        if owner and wanted is not None and owner not in wanted:
            continue
        found = by_name.get(name)
        if found is None:
            # sockperf and http_echo share the tools image in the offline set.
            found = next((r for r in by_name.values() if r.tag == tag), None)
        if found is None:
            raise ValueError(f"no offline recipe for image field {name!r} ({tag})")
        seen[tag] = found
    return tuple(seen.values())


def pod_image_tags(
    images: Images = OFFLINE_IMAGES, *, cnis: Iterable[str] | None = None
) -> tuple[str, ...]:
    """Tags ``kind load`` puts into an offline cluster (every pod image, not the node; see
    :func:`image_recipes` for ``cnis``)."""
    return tuple(recipe.tag for recipe in image_recipes(images, cnis=cnis))


def cluster_image_tags(
    images: Images = OFFLINE_IMAGES, *, cni: str, extras: Iterable[str] = ()
) -> tuple[str, ...]:
    """Tags ``kind load`` puts into a cluster of ``cni`` with ``extras`` (its gateway, the
    load engine): :func:`pod_image_tags` of them, less every other CNI's own image, also
    those built with every set (flannel's is not loaded into a Cilium cluster)."""
    asked = [name for name in (cni, *extras) if name]
    recipes = cni_recipes()
    own = images.cni_image(recipe_image(cni)) if cni in recipes else ""
    others = {images.cni_image(recipe_image(name)) for name in recipes if name != cni}
    others -= {own, *images.shared().values()}
    return tuple(tag for tag in pod_image_tags(images, cnis=asked) if tag not in others)


def wanted_recipes(images: Images, cnis: Iterable[str]) -> Mapping[str, OfflineRecipe]:
    """The CNI recipes a build of ``cnis`` makes: every one whose image is among
    :func:`image_recipes` of ``cnis`` (flannel's always; the others when asked for and their
    image has a tag)."""
    tags = set(pod_image_tags(images, cnis=cnis))
    found: dict[str, OfflineRecipe] = {}
    for name, recipe in cni_recipes().items():
        tag = images.cni_image(recipe_image(name))
        if tag and tag in tags:
            found[name] = recipe
    return found
