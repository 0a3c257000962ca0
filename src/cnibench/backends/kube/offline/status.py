"""Whether the offline image set a kind run needs is built, asked without building anything.

A kind cluster made from offline images that are not there fails deep inside ``kind create
cluster`` (``Get "http://localhost/v2/": ... connection refused``: kind tries to pull the node
image). The session asks :func:`missing_build` first and refuses with the command to run.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from cnibench.backends.kube.images import Images
from cnibench.backends.kube.offline.builder import OfflineBuilder
from cnibench.backends.kube.offline.plan import cni_recipes, pod_image_tags
from cnibench.backends.kube.offline.recipes import OFFLINE_GATEWAYS, OFFLINE_LOAD_ENGINES

__all__ = ["build_command", "missing_build"]


def build_command(cnis: Iterable[str] = ()) -> str:
    """The ``cnibench images build`` command that makes the images of ``cnis`` (CNI and
    gateway names; the shared images and those of CNIs built ``always``, flannel's, are always
    built)."""
    words = ["cnibench images build"]
    recipes = cni_recipes()
    for name in dict.fromkeys(cnis):
        if name in OFFLINE_GATEWAYS:
            words.append(f"--gateway {name}")
        elif name in OFFLINE_LOAD_ENGINES:
            words.append(f"--load-engine {name}")
        elif name in recipes and not recipes[name].always:
            words.append(f"--cni {name}")
    return " ".join(words)


def missing_build(
    images: Images, cnis: Iterable[str], *, environ: Mapping[str, str] | None = None
) -> str:
    """``""`` when every offline image a kind cluster of ``cnis`` needs is built, else the
    ``cnibench images build`` command that builds them.

    Cheap and read-only: first the recipe stamps of the build cache (the Go builds and root
    filesystems, :func:`~cnibench.backends.kube.offline.builder.cache_root` of ``environ``;
    ``kind`` itself is one of them), then ``docker image inspect`` of the node image and each
    pod image in the engine of ``environ``'s ``DOCKER_HOST``. Nothing is built or downloaded.

    Parameters
    ----------
    images:
        The offline tags (``Images.offline``).
    cnis:
        CNIs and gateways of the run (e.g. ``("flannel",)``, ``("cilium", "traefik")``); names
        with no offline build are left out (the session skips them with their reason).
    environ:
        Environment naming the cache and the engine (default: ``os.environ``).
    """
    recipes = cni_recipes()
    wanted = frozenset(c for c in cnis if c in recipes or c in OFFLINE_GATEWAYS)
    builder = OfflineBuilder(images=images, environ=environ, log=lambda _line: None)
    command = build_command(sorted(wanted))
    if not builder.prepared(wanted):
        return command
    tags = (images.kind_node, *pod_image_tags(images, cnis=wanted))
    if not all(builder.image_exists(tag) for tag in dict.fromkeys(tags)):
        return command
    return ""
