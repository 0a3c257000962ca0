"""``cnibench images prune``: remove the image tags no recipe names any more.

Every offline image carries its recipe's version in its tag
(``...:<release>-offline-<recipe>``), and the kind base image its recipe's digest; a version
bump builds a new tag and leaves the old one, so an engine's data grows with every release
(12 GB seen). Pruning removes only tags in
cnibench's own namespace (:data:`CNIBENCH_REPOSITORY_PREFIX`) that no current recipe names
(:func:`current_tags`), through the Docker SDK; a tag a container still uses (a kept kind
cluster's node) is kept and said so. The engine deletes a removed tag's layers when no other
image shares them.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from cnibench.backends.kube.images import LOCAL_BUILDS, Images
from cnibench.backends.kube.offline.assembly import base_image_tag
from cnibench.backends.kube.offline.plan import offline_cnis, pod_image_tags
from cnibench.backends.kube.offline.recipes import (
    OFFLINE_GATEWAYS,
    OFFLINE_LOAD_ENGINES,
    OfflineVersions,
)
from cnibench.engine.api import engine_client, engine_failures
from cnibench.errors import ProvisioningError

__all__ = [
    "CNIBENCH_REPOSITORY_PREFIX",
    "PruneReport",
    "current_tags",
    "prune_images",
    "stale_tags",
]

CNIBENCH_REPOSITORY_PREFIX = "localhost/cnibench-"
"""Repositories cnibench names its images in; no tag outside them is ever removed."""


def current_tags(images: Images, versions: OfflineVersions) -> frozenset[str]:
    """Every tag a current recipe names: the node image, every pod image of every CNI and
    gateway with an offline recipe, the kind base image kept to rebuild the node, and the
    images built from ``images/`` folders."""
    every = (*offline_cnis(), *OFFLINE_GATEWAYS, *OFFLINE_LOAD_ENGINES)
    return frozenset(
        (
            images.kind_node,
            *pod_image_tags(images, cnis=every),
            base_image_tag(versions),
            *LOCAL_BUILDS,
        )
    )


def stale_tags(present: Iterable[str], current: frozenset[str]) -> tuple[str, ...]:
    """The tags of ``present`` in cnibench's repositories that ``current`` does not name,
    sorted."""
    return tuple(
        sorted(
            tag
            for tag in set(present)
            if tag.startswith(CNIBENCH_REPOSITORY_PREFIX) and tag not in current
        )
    )


@dataclass(frozen=True)
class PruneReport:
    """What :func:`prune_images` did to each stale tag: ``(tag, outcome)``.

    Attributes
    ----------
    items:
        One entry per stale tag: ``removed``, ``would remove``, ``kept: ...`` or
        ``failed: ...``.
    kept_current:
        How many tags current recipes name were found and kept.
    """

    items: tuple[tuple[str, str], ...]
    kept_current: int

    @property
    def failed(self) -> tuple[tuple[str, str], ...]:
        """The tags whose removal failed."""
        return tuple(item for item in self.items if item[1].startswith("failed"))

    def summary(self) -> str:
        """One line per stale tag, then a count."""
        lines = [f"{tag}: {outcome}" for tag, outcome in self.items]
        removed = sum(outcome in ("removed", "would remove") for _, outcome in self.items)
        verb = "would remove" if any(o == "would remove" for _, o in self.items) else "removed"
        lines.append(
            f"{verb} {removed} stale tag(s); kept {self.kept_current} that current recipes name"
        )
        return "\n".join(lines)


def prune_images(
    docker_host: str, current: frozenset[str], *, dry_run: bool = False
) -> PruneReport:
    """Remove the stale tags (:func:`stale_tags`) from the engine at ``docker_host``.

    Raises
    ------
    cnibench.errors.ProvisioningError
        The engine does not answer.
    """
    from docker.errors import APIError, ImageNotFound

    with engine_client(docker_host, timeout=120) as client:
        try:
            present = [tag for image in client.images.list() for tag in image.tags]
            # A tag a container was made from (a kept kind cluster's node) stays, even where
            # the engine would only untag it because the image has other tags.
            used = {
                c.attrs.get("Config", {}).get("Image", "") for c in client.containers.list(all=True)
            }
        except engine_failures() as exc:
            raise ProvisioningError(f"engine at {docker_host} does not answer: {exc}") from exc
        items: list[tuple[str, str]] = []
        for tag in stale_tags(present, current):
            if tag in used:
                items.append((tag, "kept: a container uses it"))
                continue
            if dry_run:
                items.append((tag, "would remove"))
                continue
            try:
                client.images.remove(tag)
            except ImageNotFound:
                items.append((tag, "removed"))  # gone with another tag of the same image
            except APIError as exc:
                if exc.status_code == 409:
                    items.append((tag, "kept: a container uses it"))
                else:
                    items.append((tag, f"failed: {exc.explanation or exc}"))
            else:
                items.append((tag, "removed"))
    return PruneReport(tuple(items), kept_current=len(current.intersection(present)))
