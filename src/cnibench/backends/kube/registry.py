"""Images for clusters that pull: ``cnibench images push REGISTRY`` and ``--image-registry``.

kind gets cnibench's own images with ``kind load``; an AKS or existing cluster (or a kind
cluster set up to pull) takes them from a registry. :func:`push_images` tags every image
cnibench built itself (``localhost/...``) as ``REGISTRY/...`` in the engine that holds it and
pushes it, through the Docker SDK; :meth:`Images.in_registry
<cnibench.backends.kube.images.Images.in_registry>` names the same references, so a run with
``--image-registry REGISTRY`` (or the ``CNIBENCH_IMAGE_*`` lines ``images push`` prints) makes
its pods pull exactly what was pushed. Public references (``docker.io/...``) are left as they
are: the cluster pulls those from where they live.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

from cnibench.backends.kube.images import (
    CNI_IMAGES,
    LOCAL_BUILDS,
    LOCAL_PREFIX,
    OFFLINE_IMAGES,
    Images,
    registry_reference,
)
from cnibench.backends.kube.offline.plan import pod_image_tags
from cnibench.engine.api import engine_client, engine_failures
from cnibench.errors import ConfigError, ProvisioningError

__all__ = ["PushReport", "check_registry", "image_variables", "push_images", "pushable_tags"]

_REGISTRY = re.compile(r"^[A-Za-z0-9]([A-Za-z0-9.-]*[A-Za-z0-9])?(:[0-9]{1,5})?(/[a-z0-9._/-]+)?$")
"""A registry host with an optional port and path: ``localhost:5000``, ``reg.example/team``."""


def check_registry(registry: str) -> str:
    """``registry`` without a trailing ``/``, checked to be a host[:port][/path].

    Raises
    ------
    cnibench.errors.ConfigError
        One line naming the value and the form expected.
    """
    value = registry.rstrip("/")
    if not value or "://" in value or not _REGISTRY.match(value) or value.endswith("/"):
        raise ConfigError(
            f"image registry {registry!r}: give HOST[:PORT][/PATH], e.g. localhost:5000 or"
            " registry.example.com/team (no scheme)"
        )
    return value


def image_variables(images: Images) -> dict[str, str]:
    """``CNIBENCH_IMAGE_<NAME>`` for every pod image of ``images``, shared and each
    registered CNI's own, by variable: what a shell exports so that a later run takes the
    same references (:meth:`Images.from_environment`). The kind node image is left out (a
    cluster that pulls is not made from it)."""
    found = {
        f"CNIBENCH_IMAGE_{name.upper()}": ref
        for name, ref in images.shared().items()
        if name != "kind_node"
    }
    for image in CNI_IMAGES.values():
        ref = images.cni_image(image)
        if ref:
            found[image.variable] = ref
    return found


def pushable_tags(images: Images, cnis: Iterable[str] = ()) -> tuple[str, ...]:
    """The local tags behind ``images`` (a set, or one :meth:`Images.in_registry` moved):
    with the offline set, every pod image of a cluster of ``cnis`` (:func:`pod_image_tags`),
    else the images cnibench builds from ``images/`` that the set uses."""
    if images.offline:
        return pod_image_tags(OFFLINE_IMAGES, cnis=cnis)
    used = set(images.shared().values())
    moved = {local: registry_reference(local, images.registry) for local in LOCAL_BUILDS}
    return tuple(local for local, ref in moved.items() if ref in used or local in used)


@dataclass(frozen=True)
class PushReport:
    """What :func:`push_images` pushed: ``(local tag, registry reference)`` pairs."""

    pushed: tuple[tuple[str, str], ...]

    def summary(self) -> str:
        """One line per image, then a count."""
        lines = [f"pushed {local} as {remote}" for local, remote in self.pushed]
        lines.append(f"pushed {len(self.pushed)} image(s)")
        return "\n".join(lines)


def push_images(
    docker_host: str,
    tags: Iterable[str],
    registry: str,
    *,
    log: Callable[[str], None] = lambda line: None,
) -> PushReport:
    """Tag each of ``tags`` (``localhost/...`` images of the engine at ``docker_host``) as
    ``registry/...`` and push it. A tag pushed before costs one manifest check: the registry
    already holds its layers.

    Raises
    ------
    cnibench.errors.ConfigError
        A tag is not in the engine (the line names ``cnibench images build``), or is not one
        cnibench built (not ``localhost/...``).
    cnibench.errors.ProvisioningError
        The engine does not answer, or the registry refused a push (its message).
    """
    from docker.errors import ImageNotFound

    registry = check_registry(registry)
    wanted = list(dict.fromkeys(tags))
    foreign = [tag for tag in wanted if not tag.startswith(LOCAL_PREFIX)]
    if foreign:
        raise ConfigError(
            f"images push: {foreign[0]} is not an image cnibench built ({LOCAL_PREFIX}...)"
        )
    pushed: list[tuple[str, str]] = []
    with engine_client(docker_host, timeout=600) as client:
        try:
            for tag in wanted:
                remote = registry_reference(tag, registry)
                repository, _, version = remote.rpartition(":")
                try:
                    client.images.get(tag).tag(repository, version)
                except ImageNotFound:
                    raise ConfigError(
                        f"images push: {tag} is not in the engine at {docker_host}: run"
                        " cnibench images build first"
                    ) from None
                log(f"pushing {remote}")
                for event in client.api.push(repository, tag=version, stream=True, decode=True):
                    if isinstance(event, Mapping) and event.get("error"):
                        raise ProvisioningError(f"push of {remote} refused: {event['error']}")
                pushed.append((tag, remote))
        except engine_failures() as exc:
            raise ProvisioningError(f"images push to {registry}: {exc}") from exc
    return PushReport(tuple(pushed))
