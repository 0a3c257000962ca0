"""What a CNI driver declares about its offline build (:class:`OfflineRecipe`), and the image
recipe type the offline image set is made of (:class:`ImageRecipe`).

Pure data, low in the kube backend (it imports none of it): driver modules import it to declare
their Go build, root filesystem and image; :mod:`cnibench.backends.kube.offline` reads what
the registered drivers declared and builds it.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["PATH_ENV", "GoBuild", "ImageRecipe", "OfflineRecipe"]

PATH_ENV: Mapping[str, str] = {
    "PATH": "/usr/local/bin:/usr/local/sbin:/usr/bin:/usr/sbin:/bin:/sbin"
}
"""The ``PATH`` of every image with a root filesystem."""


@dataclass(frozen=True)
class ImageRecipe:
    """One image made from a root filesystem (or nothing) plus files.

    Attributes
    ----------
    tag:
        Reference to tag, exactly as pods and kubeadm ask for it.
    rootfs:
        Name of a root filesystem (the shared
        :data:`~cnibench.backends.kube.offline.recipes.ROOTFS_PACKAGES` or a CNI's own
        :attr:`OfflineRecipe.rootfs`), or ``""`` for an image holding only ``files``.
    files:
        Path in the image -> name of a built artefact (see :mod:`~cnibench.backends.kube.
        offline.builder`).
    entrypoint, cmd:
        Exec-form entrypoint and command; empty for none.
    env:
        Environment of the image.
    user:
        ``uid:gid`` to run as, ``""`` for root.
    remove:
        Paths deleted from the root filesystem copy (e.g. nginx's default site).
    trees:
        Directory in the image -> name of a built (or module) directory copied in whole.
    links:
        Symbolic link in the image -> its target.
    """

    tag: str
    rootfs: str = ""
    files: Mapping[str, str] = field(default_factory=dict)
    entrypoint: tuple[str, ...] = ()
    cmd: tuple[str, ...] = ()
    env: Mapping[str, str] = field(default_factory=dict)
    user: str = ""
    remove: tuple[str, ...] = ()
    trees: Mapping[str, str] = field(default_factory=dict)
    links: Mapping[str, str] = field(default_factory=dict)

    def changes(self) -> list[str]:
        """``docker import --change`` instructions of this image."""
        out = [f"ENV {key}={value}" for key, value in sorted(self.env.items())]
        if self.entrypoint:
            out.append(f"ENTRYPOINT {json.dumps(list(self.entrypoint))}")
        if self.cmd:
            out.append(f"CMD {json.dumps(list(self.cmd))}")
        if self.user:
            out.append(f"USER {self.user}")
        return out


@dataclass(frozen=True)
class GoBuild:
    """A CNI's commands, built in one ``go build`` inside a wrapper module.

    Attributes
    ----------
    module:
        The Go module the commands are in (e.g. ``github.com/cilium/cilium``).
    packages:
        Import paths of the commands; each binary is named after its package's last element.
    flags:
        ``go build`` flags (``-tags``, ``-trimpath``, ``-ldflags ...``).
    wrapper:
        ``(version, module directory) -> {relative path: text}``: the files of the wrapper
        module (``go.mod`` first); the module directory (in the Go module cache) is given only
        when :attr:`reads_module` is set, else ``None``.
    digest_inputs:
        What the build's stamp digests (a changed input rebuilds it; a changed stamp rebuilds
        it cold): everything above that can change, and a recipe number bumped when the way
        it builds changes.
    reads_module:
        Whether :attr:`wrapper` needs the module's own files (Cilium's go.mod and go.sum).
    env:
        Environment of the build on top of the Go environment (e.g. ``CGO_ENABLED=1``).
    binary:
        For a build in the shared Go step: the one output file's name (``flanneld``).
    """

    module: str
    packages: tuple[str, ...]
    flags: tuple[str, ...]
    wrapper: Callable[[str, Path | None], Mapping[str, str]]
    digest_inputs: tuple[object, ...] = ()
    reads_module: bool = False
    env: Mapping[str, str] = field(default_factory=dict)
    binary: str = ""


@dataclass(frozen=True)
class OfflineRecipe:
    """How ``cnibench images build`` makes a CNI's image from Go modules and Debian packages.

    Attributes
    ----------
    version:
        The release the offline image set builds (may differ from the driver's pinned
        ``version`` when the Go module proxy serves only another one).
    build:
        The CNI's Go build.
    image:
        ``tag -> recipe`` of the CNI's image.
    image_name:
        Name of the driver's own :class:`~cnibench.backends.kube.images.CniImage` this builds:
        its offline reference is the tag (``CNIBENCH_IMAGE_<NAME>`` overrides it).
    rootfs:
        Root filesystems of the CNI's own (name -> Debian packages), built only when the CNI is
        asked for; an image may also use a shared one (``netfilter``).
    always:
        Built with every offline image set, in the shared Go step (flannel, the set's default
        CNI); otherwise built in a step of its own, only when asked for
        (``cnibench images build --cni <name>``).
    needs_helm:
        Whether installing the CNI needs helm (built beside it).
    kernel_wireguard:
        Whether the CNI's WireGuard encryption is the kernel's (it then needs the host's
        ``wireguard`` module: kind's nodes share this kernel).
    source_prefix:
        Prefix of artefact names that are paths inside :attr:`GoBuild.module` (used in place
        from the Go module cache, never copied into cnibench), ``""`` for none.
    artefact_prefix:
        Prefix of the names the image's files use for the built commands (``cilium/``).
    recipe:
        Step and cache directory name (``<cache>/offline/<recipe>/<version>/bin``).
    build_minutes:
        About how long :attr:`build` takes cold on 2 cores (as measured in CI's background
        prepare: docs/testing.md gives the seconds). A build of
        several CNIs runs the shortest first, so what needs only short builds (CI's
        kube-router module) can start while a long one (Cilium's) goes on. Not part of any
        digest.
    """

    version: str
    build: GoBuild
    image: Callable[[str], ImageRecipe]
    image_name: str
    rootfs: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    always: bool = False
    needs_helm: bool = False
    kernel_wireguard: bool = False
    source_prefix: str = ""
    artefact_prefix: str = ""
    recipe: str = ""
    build_minutes: float = 5.0
