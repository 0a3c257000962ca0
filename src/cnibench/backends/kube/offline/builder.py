"""Build the offline image set: Go modules and Debian packages in, images in a Docker engine out.

:class:`OfflineBuilder` is a thin façade: it plans and sequences the steps, and delegates each
to a feature object of its own module, all sharing one :class:`~.core.BuildContext` (cache,
versions, commands, step log) by composition: :mod:`.gobuilds` (Kubernetes' commands, the
shared Go step, each CNI's build as its driver declares it, Traefik, helm), :mod:`.rootfs`
(Debian root filesystems) and :mod:`.assembly` (pod images, kind's base and node images, from
the other two's outputs). What goes in is in :mod:`.recipes` (shared) and in the CNI drivers'
offline recipes (:mod:`.plan` gathers them).

Every artefact is cached by version outside the repository next to a stamp holding the digest
of its recipe, so a second run rebuilds nothing and a changed recipe rebuilds only what it
changes. Images live in the engine's data root (``cnibench engine up`` keeps it between runs)
and are looked up by tag; their tags end in a recipe number (:data:`~cnibench.backends.kube.
images.OFFLINE_IMAGES`).
"""

from __future__ import annotations

import fcntl
import os
from collections.abc import Callable, Iterable, Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import IO

from cnibench.backends.kube.build_recipes import ImageRecipe, OfflineRecipe
from cnibench.backends.kube.gomodules import module_cache_dir
from cnibench.backends.kube.images import OFFLINE_IMAGES, Images
from cnibench.backends.kube.offline.assembly import ImageAssembly
from cnibench.backends.kube.offline.core import (
    BuildContext,
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
from cnibench.backends.kube.offline.recipes import ROOTFS_PACKAGES, OfflineVersions
from cnibench.backends.kube.offline.rootfs import RootFilesystems
from cnibench.errors import ProvisioningError
from cnibench.waiting import wait_for

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


class OfflineBuilder:
    """Builds :data:`~cnibench.backends.kube.images.OFFLINE_IMAGES` (and the images of every
    registered CNI with an offline recipe) into a Docker engine.

    A façade: it sequences the steps (:meth:`build`, :meth:`prepared`) and delegates each in
    one line to a feature object sharing one :class:`~.core.BuildContext`:
    :class:`~.gobuilds.GoBuilds`, :class:`~.rootfs.RootFilesystems` and
    :class:`~.assembly.ImageAssembly`.

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

    def __init__(
        self,
        *,
        docker_host: str | None = None,
        versions: OfflineVersions | None = None,
        images: Images = OFFLINE_IMAGES,
        root: Path | None = None,
        log: Callable[[str], None] | None = None,
        environ: Mapping[str, str] | None = None,
    ) -> None:
        self.context = BuildContext.create(
            docker_host=docker_host,
            versions=versions,
            images=images,
            root=root,
            log=log,
            environ=environ,
        )
        self._go = GoBuilds(self.context)
        self._rootfs = RootFilesystems(self.context)
        self._assembly = ImageAssembly(self.context, self._go, self._rootfs)

    # -- what the build shares --------------------------------------------------------------

    @property
    def versions(self) -> OfflineVersions:
        """What is built."""
        return self.context.versions

    @property
    def images(self) -> Images:
        """Tags produced."""
        return self.context.images

    @property
    def docker_host(self) -> str:
        """The engine (``""``: none known)."""
        return self.context.commands.docker_host

    @property
    def environ(self) -> dict[str, str]:
        """Environment of the Go and Docker commands."""
        return self.context.environ

    @property
    def root(self) -> Path:
        """Cache root."""
        return self.context.root

    @property
    def offline(self) -> Path:
        """``<cache>/offline``."""
        return self.context.offline

    @property
    def logs(self) -> Path:
        """The step logs."""
        return self.context.logs

    @property
    def report(self) -> BuildReport:
        """What this builder built so far."""
        return self.context.report

    @property
    def kubernetes_bin(self) -> Path:
        """Kubernetes' commands (see :attr:`.BuildContext.kubernetes_bin`)."""
        return self.context.kubernetes_bin

    @property
    def go_bin(self) -> Path:
        """The shared Go step's binaries, per version set."""
        return self.context.go_bin

    def go_digest(self) -> str:
        """Digest of the shared Go step (see :meth:`.BuildContext.go_digest`)."""
        return self.context.go_digest()

    def shared_cni_recipes(self) -> list[OfflineRecipe]:
        """CNI recipes built in the shared Go step."""
        return self.context.shared_cni_recipes()

    def image_exists(self, tag: str) -> bool:
        """Whether the engine holds ``tag``."""
        return self.context.commands.image_exists(tag)

    def module_dir(self, module: str, version: str) -> Path:
        """The module's directory in the Go module cache (downloaded if missing)."""
        return self.context.commands.module_dir(module, version)

    # -- Go builds (:mod:`.gobuilds`) -------------------------------------------------------

    @property
    def traefik_bin(self) -> Path:
        """Traefik's command, per release."""
        return self._go.traefik_bin

    @property
    def helm_bin(self) -> Path:
        """Directory of helm (see :attr:`.GoBuilds.helm_bin`)."""
        return self._go.helm_bin

    def cni_bin(self, cni: str) -> Path:
        """The commands of ``cni``'s own build, per release."""
        return self._go.cni_bin(cni)

    def artefacts(self) -> dict[str, Path]:
        """Name -> built file (see :meth:`.GoBuilds.artefacts`)."""
        return self._go.artefacts()

    def artefact(self, name: str, found: Mapping[str, Path]) -> Path:
        """A built artefact, or a path inside a CNI's module (see :meth:`.GoBuilds.artefact`)."""
        return self._go.artefact(name, found)

    def build_kubernetes(self) -> Path:
        """Kubernetes' commands; returns their bin directory."""
        return self._go.build_kubernetes()

    def build_go_binaries(self) -> Path:
        """The shared Go step; returns its bin directory."""
        return self._go.build_go_binaries()

    def build_cni(self, cni: str) -> Path:
        """``cni``'s own Go build; returns its bin directory."""
        return self._go.build_cni(cni)

    def build_traefik(self) -> Path:
        """Traefik's Go build; returns its bin directory."""
        return self._go.build_traefik()

    def build_helm(self) -> Path:
        """helm, unless there; returns its directory."""
        return self._go.build_helm()

    # -- root filesystems (:mod:`.rootfs`) and images (:mod:`.assembly`) --------------------

    def rootfs(self, name: str) -> Path:
        """The Debian root filesystem ``name`` (see :meth:`.RootFilesystems.rootfs`)."""
        return self._rootfs.rootfs(name)

    def import_image(self, recipe: ImageRecipe) -> None:
        """One pod image into the engine, unless present."""
        self._assembly.import_image(recipe)

    def base_image(self) -> str:
        """kind's base image; returns its tag."""
        return self._assembly.base_image()

    def node_image(self) -> str:
        """The kind node image; returns its tag."""
        return self._assembly.node_image()

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
            # Made aside and renamed over the old one: two builds of one cache may link at the
            # same time (one waited for no lock: see build), and a rename never leaves a moment
            # without the link, nor fails because the other made it first.
            aside = target / f".{name}.{os.getpid()}"
            aside.unlink(missing_ok=True)
            aside.symlink_to(source)
            os.replace(aside, target / name)
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
        # While another build holds the lock, this one waits only until that build has made
        # what this one needs: CI's background prepare holds it through Cilium's long build,
        # which the kind tier's kube-router module needs nothing of (cold, 2026-12-01, that
        # module waited for Cilium after Traefik, its last step, was done).
        with _exclusive(
            self.offline / ".build.lock", self.context.log, needless=lambda: self.prepared(wanted)
        ):
            return self._build_all(wanted, images=images)

    @contextmanager
    def exclusive(self) -> Iterator[None]:
        """Hold this cache's build lock, which :meth:`build` holds while it builds, for a
        caller of single steps (``scripts/kube-tier.sh``: :meth:`build_kubernetes` and
        :meth:`build_go_binaries`): two builds of one step would share its staging directory
        (on a cold cache CI's kube-tier build and the kind tier's ``images build`` both built
        Kubernetes, and one moved the other's commands away, 2026-11-28)."""
        self.offline.mkdir(parents=True, exist_ok=True)
        with _exclusive(self.offline / ".build.lock", self.context.log):
            yield

    def prepared(self, cnis: frozenset[str]) -> bool:
        """Whether every Go build and root filesystem the images of ``cnis`` need is current
        (nothing would be built: each step is asked and refuses instead of starting). Reads
        recipe stamps only; builds and downloads nothing."""
        self.context.checking = True
        try:
            self._prepare(cnis)
        except WouldBuildError:
            return False
        finally:
            self.context.checking = False
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


LOCK_WAIT_SECONDS = 6 * 3600.0
"""Seconds a build waits for another one of the same cache (the longest, azurerm's, is
allowed 4 hours: :mod:`.tofu`)."""
LOCK_POLL_SECONDS = 2.0
"""How often a waiting build tries the lock again and asks whether the other one has made
what it needs (reading recipe stamps only, about a millisecond: :meth:`OfflineBuilder.prepared`)."""


def _locked(handle: IO[str]) -> bool:
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    return True


@contextmanager
def _exclusive(
    lock_path: Path, log: Callable[[str], None], *, needless: Callable[[], bool] | None = None
) -> Iterator[None]:
    """One build at a time per cache: two builders sharing work directories would import
    each other's half-copied root filesystems.

    ``needless``: asked while the lock is held by another build; once it says the lock is no
    longer needed (that build has made every long step this one needs, so what is left to do
    touches no work directory of its), this one goes on without the lock. Without it, the
    wait lasts until the lock is free."""
    with lock_path.open("w") as handle:
        if _locked(handle):
            yield
            return
        log("another cnibench images build is running on this cache; waiting for it")
        if needless is None:
            fcntl.flock(handle, fcntl.LOCK_EX)
            yield
            return
        how = wait_for(
            lambda: "locked" if _locked(handle) else ("needless" if needless() else None),
            timeout=LOCK_WAIT_SECONDS,
            what="another cnibench images build of this cache to end",
            interval=LOCK_POLL_SECONDS,
            error=ProvisioningError,
        )
        if how == "needless":
            log("the other build has made everything this one needs; going on beside it")
        yield
