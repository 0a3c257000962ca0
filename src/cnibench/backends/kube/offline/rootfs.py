"""The root filesystems of the offline image set: Debian packages (``mmdebstrap``) from the
mirror this machine already uses, one tree per package list, stamped with its digest."""

from __future__ import annotations

import shutil
from pathlib import Path

from cnibench.backends.kube.offline.core import BuildContext, is_current, stamp
from cnibench.backends.kube.offline.plan import rootfs_packages
from cnibench.backends.kube.offline.recipes import debian_mirror, mmdebstrap_argv, recipe_digest
from cnibench.errors import ProvisioningError

__all__ = ["RootFilesystems"]

_ROOTFS_RECIPE = "rootfs-2"
"""Bumped when the way a root filesystem is made changes without its packages changing
(``rootfs-2``: mmdebstrap, with ``usr-is-merged`` where debootstrap put ``usrmerge``)."""


class RootFilesystems:
    """The root filesystems of :class:`~.builder.OfflineBuilder`.

    Parameters
    ----------
    context:
        The build's cache, versions and commands.
    """

    def __init__(self, context: BuildContext) -> None:
        self.context = context
        self._commands = context.commands

    def rootfs(self, name: str) -> Path:
        """A Debian root filesystem with the packages :func:`~.plan.rootfs_packages` lists
        for ``name`` (shared, or a CNI's own)."""
        packages = rootfs_packages()[name]
        digest = recipe_digest(_ROOTFS_RECIPE, self.context.versions.debian, packages)
        target = self.context.offline / "rootfs" / f"{name}-{digest}"
        if is_current(target, digest):
            return target
        with self.context.step(f"root filesystem {name!r} ({len(packages)} Debian packages)"):
            mirror = self._mirror()
            shutil.rmtree(target, ignore_errors=True)
            # mmdebstrap makes the target directory but not its parent (it refuses a path it
            # cannot resolve: "unable to get absolute path of target directory").
            target.parent.mkdir(parents=True, exist_ok=True)
            debcache = self.context.offline / "debcache"
            debcache.mkdir(parents=True, exist_ok=True)
            self._commands.run(
                mmdebstrap_argv(
                    str(target),
                    suite=self.context.versions.debian,
                    mirror=mirror,
                    packages=packages,
                    cache_dir=str(debcache),
                ),
                step=f"rootfs-{name}",
            )
            for leftover in ("var/cache/apt/archives", "var/lib/apt/lists"):
                for entry in (target / leftover).glob("*"):
                    if entry.is_file():
                        entry.unlink()
            for docs in ("usr/share/doc", "usr/share/man", "usr/share/locale"):
                shutil.rmtree(target / docs, ignore_errors=True)
            stamp(target, digest)
        return target

    def _mirror(self) -> str:
        texts = []
        for path in [
            Path("/etc/apt/sources.list"),
            *sorted(Path("/etc/apt/sources.list.d").glob("*")),
        ]:
            if path.is_file() and path.suffix in (".list", ".sources"):
                texts.append(path.read_text())
        mirror = debian_mirror("\n\n".join(texts))
        if not mirror:
            raise ProvisioningError(
                "no Debian archive in /etc/apt/sources.list{,.d}: mmdebstrap needs one"
            )
        return mirror
