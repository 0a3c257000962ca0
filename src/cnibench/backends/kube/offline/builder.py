"""Build the offline image set: Go modules and Debian packages in, images in a Docker engine out.

:class:`OfflineBuilder` is the façade over the image families, one module each:
:mod:`.gobuilds` (Kubernetes' commands, the shared Go step, each CNI's build as its driver
declares it, Traefik, helm), :mod:`.rootfs` (Debian root filesystems) and :mod:`.assembly`
(pod images, kind's base and node images), on :mod:`.core` (cache, stamps, commands). What
goes in is in :mod:`.recipes` (shared) and in the CNI drivers' offline recipes
(:mod:`.plan` gathers them).

Every artefact is cached by version outside the repository next to a stamp holding the digest
of its recipe, so a second run rebuilds nothing and a changed recipe rebuilds only what it
changes. Images live in the engine's data root (``cnibench engine up`` keeps it between runs)
and are looked up by tag; their tags end in a recipe number (:data:`~cnibench.backends.kube.
images.OFFLINE_IMAGES`).
"""

from __future__ import annotations

import fcntl
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from functools import partial
from pathlib import Path

from cnibench.backends.kube.build_recipes import ImageRecipe, OfflineRecipe
from cnibench.backends.kube.gomodules import module_cache_dir
from cnibench.backends.kube.offline.assembly import ImageAssembly
from cnibench.backends.kube.offline.core import (
    BuildReport,
    WouldBuildError,
    cache_root,
    offline_bin_dir,
)
from cnibench.backends.kube.offline.gobuilds import (
    HELM_BUILD_MINUTES,
    TRAEFIK_BUILD_MINUTES,
    GoBuilds,
)
from cnibench.backends.kube.offline.plan import (
    cni_recipes,
    image_recipes,
    rootfs_packages,
    wanted_recipes,
)
from cnibench.backends.kube.offline.recipes import ROOTFS_PACKAGES
from cnibench.backends.kube.offline.rootfs import RootFilesystems

__all__ = ["BuildReport", "OfflineBuilder", "cache_root", "module_cache_dir", "offline_bin_dir"]


@dataclass(frozen=True)
class _Plan:
    """What a build of some CNIs makes: pod images, root filesystems, and the optional Go
    builds (each CNI's own, Traefik, helm)."""

    images: tuple[ImageRecipe, ...]
    rootfs: tuple[str, ...]
    cnis: tuple[str, ...]
    traefik: bool
    helm: bool


class OfflineBuilder(GoBuilds, RootFilesystems, ImageAssembly):
    """Builds :data:`~cnibench.backends.kube.images.OFFLINE_IMAGES` (and the images of every
    registered CNI with an offline recipe) into a Docker engine.

    Parameters
    ----------
    docker_host:
        The engine (``unix://...``); ``$DOCKER_HOST`` when ``None``.
    versions:
        What to build.
    images:
        Tags to produce (the offline set by default).
    root:
        Cache root (see :func:`cache_root`).
    log:
        Receives one line per step (stderr by default).
    environ:
        Environment of the Go and Docker commands.
    """

    # -- everything -------------------------------------------------------------------------

    def link_tools(self) -> Path:
        """Link ``kind``, ``kubectl`` and (once built, with Cilium or by the kube tier)
        ``helm`` into :func:`offline_bin_dir` (the front ends look there when they are not on
        ``$PATH``)."""
        target = self.offline / "bin"
        target.mkdir(parents=True, exist_ok=True)
        tools = [("kind", self.go_bin / "kind"), ("kubectl", self.kubernetes_bin / "kubectl")]
        if (self.helm_bin / "helm").is_file():
            tools.append(("helm", self.helm_bin / "helm"))
        for name, source in tools:
            link = target / name
            if link.is_symlink() or link.exists():
                link.unlink()
            link.symlink_to(source)
        return target

    def build(self, *, cnis: Iterable[str] = (), images: bool = True) -> BuildReport:
        """Everything: Go builds and root filesystems side by side, then the images.

        Parameters
        ----------
        cnis:
            CNIs whose own images are built too (``"cilium"``: its Go build, root filesystem
            and image); flannel's is always built.
        images:
            Also make the node image and import the images into the engine. ``False``
            prepares everything that needs no engine (the long part: Go builds and root
            filesystems), so a later build only assembles the images.

        Raises
        ------
        cnibench.errors.ProvisioningError
            A step failed (the message names it, its last error line and its log file).
        """
        self.offline.mkdir(parents=True, exist_ok=True)
        wanted = frozenset(cnis)
        if self.prepared(wanted):
            # Every long step is current: making the images needs no lock, so this build does
            # not wait for another one preparing other CNIs on the same cache (CI's background
            # prepare of Cilium while the kind tier starts with flannel and kube-router).
            return self._build_all(wanted, images=images)
        with _exclusive(self.offline / ".build.lock", self._log):
            return self._build_all(wanted, images=images)

    def prepared(self, cnis: frozenset[str]) -> bool:
        """Whether every Go build and root filesystem the images of ``cnis`` need is current
        (nothing would be built: each step is asked and refuses instead of starting). Reads
        recipe stamps only; builds and downloads nothing."""
        self._checking = True
        try:
            self._prepare(cnis)
        except WouldBuildError:
            return False
        finally:
            self._checking = False
        return True

    def _plan(self, cnis: frozenset[str]) -> _Plan:
        recipes = image_recipes(self.images, cnis=cnis)
        wanted_rootfs = {recipe.rootfs for recipe in recipes}
        own: dict[str, OfflineRecipe] = {
            name: recipe
            for name, recipe in wanted_recipes(self.images, cnis).items()
            if not recipe.always
        }
        return _Plan(
            images=recipes,
            rootfs=tuple(
                name
                for name in rootfs_packages()
                if name in ROOTFS_PACKAGES or name in wanted_rootfs
            ),
            cnis=tuple(own),
            traefik=any(recipe.tag == self.images.traefik for recipe in recipes),
            helm=any(recipe.needs_helm for recipe in own.values()),
        )

    def _go_builds(self, plan: _Plan) -> None:
        """Kubernetes and the shared step, then the optional builds shortest first: CI's
        background prepare thus has kube-router's and Traefik's ready for the kind tier's
        kube-router module (whose own build then needs no lock) while Cilium's, the longest,
        still runs."""
        self.build_kubernetes()
        self.build_go_binaries()
        recipes = cni_recipes()
        optional: list[tuple[float, Callable[[], Path]]] = [
            (recipes[cni].build_minutes, partial(self.build_cni, cni)) for cni in plan.cnis
        ]
        if plan.traefik:
            optional.append((TRAEFIK_BUILD_MINUTES, self.build_traefik))
        if plan.helm:
            optional.append((HELM_BUILD_MINUTES, self.build_helm))
        for _, step in sorted(optional, key=lambda item: item[0]):
            step()

    def _prepare(self, cnis: frozenset[str]) -> None:
        """The long steps for ``cnis``, one after another (a check: see :meth:`prepared`)."""
        plan = self._plan(cnis)
        for name in plan.rootfs:
            self.rootfs(name)
        self._go_builds(plan)

    def _build_all(self, cnis: frozenset[str], *, images: bool) -> BuildReport:
        plan = self._plan(cnis)
        with ThreadPoolExecutor(max_workers=2) as pool:
            go = pool.submit(self._go_builds, plan)
            rootfs = pool.submit(lambda: [self.rootfs(name) for name in plan.rootfs])
            go.result()
            rootfs.result()
        self.link_tools()
        if not images:
            return self.report
        self.node_image()
        for recipe in plan.images:
            self.import_image(recipe)
        return self.report


@contextmanager
def _exclusive(lock_path: Path, log: Callable[[str], None]) -> Iterator[None]:
    """One build at a time per cache: two builders sharing work directories would import
    each other's half-copied root filesystems."""
    with lock_path.open("w") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            log("another cnibench images build is running on this cache; waiting for it")
            fcntl.flock(handle, fcntl.LOCK_EX)
        yield
