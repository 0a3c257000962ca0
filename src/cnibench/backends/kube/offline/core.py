"""The part of the offline builder every image family shares: the cache and its recipe
stamps, running commands (``go``, ``docker``) with their output in step logs, and the Go
environment.

Every artefact is cached by version outside the repository (``$CNIBENCH_CACHE``, else
``$XDG_CACHE_HOME/cnibench``, else ``~/.cache/cnibench``) next to a stamp holding the digest of
its recipe, so a second run rebuilds nothing and a changed recipe rebuilds only what it
changes.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from cnibench.backends.kube.build_recipes import ImageRecipe, OfflineRecipe
from cnibench.backends.kube.gomodules import go_env_value
from cnibench.backends.kube.images import OFFLINE_IMAGES, Images
from cnibench.backends.kube.offline.plan import cni_recipes
from cnibench.backends.kube.offline.recipes import OfflineVersions, go_proxy, recipe_digest
from cnibench.errors import ConfigError, ProvisioningError

__all__ = ["BuildReport", "BuilderCore", "WouldBuildError", "cache_root", "offline_bin_dir"]

GO_RECIPE = "go-1"
"""Recipe number of the shared Go step (bumped when the way it builds changes without its
versions changing)."""


def cache_root(environ: Mapping[str, str] | None = None) -> Path:
    """Root of cnibench's build caches (``$CNIBENCH_CACHE``, ``$XDG_CACHE_HOME/cnibench``,
    ``~/.cache/cnibench``)."""
    env = os.environ if environ is None else environ
    if env.get("CNIBENCH_CACHE"):
        return Path(env["CNIBENCH_CACHE"])
    base = env.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "cnibench"


def offline_bin_dir(
    versions: OfflineVersions | None = None, environ: Mapping[str, str] | None = None
) -> Path:
    """Where ``kind``, ``kubectl`` and ``helm`` of the offline build are linked (the front
    ends look there after ``$PATH``)."""
    return cache_root(environ) / "offline" / "bin"


@dataclass
class BuildReport:
    """What a build did.

    Attributes
    ----------
    built, reused:
        Image tags made by this run and tags that were already there.
    seconds:
        Wall time of each step, by step name.
    """

    built: list[str] = field(default_factory=list)
    reused: list[str] = field(default_factory=list)
    seconds: dict[str, float] = field(default_factory=dict)

    def summary(self) -> str:
        """One line for people."""
        total = sum(self.seconds.values())
        return (
            f"{len(self.built)} image(s) built, {len(self.reused)} reused"
            f" ({total:.0f} s of build steps)"
        )


class WouldBuildError(Exception):
    """Raised by a step asked only whether it is current (:meth:`BuilderCore.prepared`)."""


class BuilderCore:
    """What every step of the offline build shares (see :class:`~.builder.OfflineBuilder`
    for the parameters)."""

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
        self.environ = dict(os.environ if environ is None else environ)
        self.docker_host = docker_host or self.environ.get("DOCKER_HOST", "")
        self.versions = versions or OfflineVersions()
        self.images = images
        self.root = root or cache_root(self.environ)
        self.offline = self.root / "offline"
        self.logs = self.offline / "logs"
        self._log = log or (lambda line: print(f"[images] {line}", flush=True))
        self.report = BuildReport()
        self._checking = False

    # -- paths and stamps -------------------------------------------------------------------

    @property
    def kubernetes_bin(self) -> Path:
        """``<cache>/kube/<version>/bin``: Kubernetes' commands (shared with the kube tier;
        ``$CNIBENCH_KUBE_CACHE`` moves ``<cache>/kube`` as for ``scripts/kube-tier.sh``)."""
        kube = self.environ.get("CNIBENCH_KUBE_CACHE") or str(self.root / "kube")
        return Path(kube) / self.versions.kubernetes / "bin"

    @property
    def go_bin(self) -> Path:
        """Binaries from the other Go modules (and pause), per version set."""
        return self.offline / "go" / self.go_digest()

    def go_digest(self) -> str:
        """Digest of the shared Go step: the version set (whose ``flannel`` names the one CNI
        built there), and what any other CNI built there adds."""
        extra = [
            part for recipe in self.shared_cni_recipes() for part in recipe.build.digest_inputs
        ]
        return recipe_digest(GO_RECIPE, self.versions, *extra)

    def shared_cni_recipes(self) -> list[OfflineRecipe]:
        """CNI recipes built in the shared Go step (``always``), in registration order."""
        return [recipe for recipe in cni_recipes().values() if recipe.always]

    @staticmethod
    def _current(directory: Path, digest: str) -> bool:
        stamp = directory / ".cnibench-recipe"
        return stamp.is_file() and stamp.read_text().strip() == digest

    @staticmethod
    def _stamp(directory: Path, digest: str) -> None:
        (directory / ".cnibench-recipe").write_text(digest + "\n")

    @contextmanager
    def _step(self, name: str) -> Iterator[None]:
        if self._checking:
            raise WouldBuildError(name)
        start = time.monotonic()
        self._log(f"{name} ...")
        yield
        took = time.monotonic() - start
        self.report.seconds[name] = self.report.seconds.get(name, 0.0) + took
        self._log(f"{name}: done in {took:.0f} s")

    # -- what the other families provide ----------------------------------------------------

    def artefacts(self) -> dict[str, Path]:
        """Name (as :class:`~cnibench.backends.kube.build_recipes.ImageRecipe` ``files`` use
        it) -> built file (see :class:`~.gobuilds.GoBuilds`)."""
        raise NotImplementedError

    def artefact(self, name: str, found: Mapping[str, Path]) -> Path:
        """A built artefact, or a path inside a CNI's module (see
        :class:`~.gobuilds.GoBuilds`)."""
        raise NotImplementedError

    def rootfs(self, name: str) -> Path:
        """A Debian root filesystem (see :class:`~.rootfs.RootFilesystems`)."""
        raise NotImplementedError

    def import_image(self, recipe: ImageRecipe) -> None:
        """An image into the engine (see :class:`~.assembly.ImageAssembly`)."""
        raise NotImplementedError

    # -- running things ---------------------------------------------------------------------

    def _run(
        self,
        argv: Sequence[str],
        *,
        step: str,
        cwd: Path | None = None,
        env: Mapping[str, str] | None = None,
        stdin: int | None = None,
        timeout: float = 3600.0,
    ) -> str:
        """Run ``argv``, its output appended to ``logs/<step>.log``; stdout returned."""
        self.logs.mkdir(parents=True, exist_ok=True)
        log_path = self.logs / f"{step}.log"
        with log_path.open("a") as log_file:
            log_file.write(f"$ {' '.join(argv)}\n")
            log_file.flush()
            try:
                done = subprocess.run(
                    list(argv),
                    cwd=cwd,
                    env=dict(env or self.environ),
                    stdin=stdin if stdin is not None else subprocess.DEVNULL,
                    stdout=subprocess.PIPE,
                    stderr=log_file,
                    text=True,
                    timeout=timeout,
                    check=False,
                )
            except FileNotFoundError as exc:
                raise ProvisioningError(f"{argv[0]} is not installed ({step})") from exc
            except subprocess.TimeoutExpired as exc:
                raise ProvisioningError(f"{step}: {argv[0]} ran over {timeout:.0f} s") from exc
            log_file.write(done.stdout[-4000:])
        if done.returncode != 0:
            raise ProvisioningError(
                f"{step}: {' '.join(argv[:3])} failed (exit {done.returncode}):"
                f" {_last_line(log_path)} (log: {log_path})"
            )
        return done.stdout

    def _go_env(self) -> dict[str, str]:
        env = dict(self.environ)
        configured = env.get("GOPROXY") or go_env_value("GOPROXY", env)
        proxy = go_proxy(configured)
        if not proxy:
            raise ConfigError("GOPROXY names no module proxy: set GOPROXY to one")
        flags = env.get("GOFLAGS") or go_env_value("GOFLAGS", env)
        env.update(
            GOPROXY=proxy,
            GOFLAGS=" ".join(f for f in (flags, "-mod=mod", "-buildvcs=false") if f),
            CGO_ENABLED="0",
            GOTOOLCHAIN="local",
        )
        return env

    def _docker(self, *args: str, step: str, stdin: int | None = None) -> str:
        if not self.docker_host:
            raise ProvisioningError(
                'no container engine: run eval "$(cnibench engine up)" or set DOCKER_HOST'
            )
        env = dict(self.environ, DOCKER_HOST=self.docker_host, DOCKER_BUILDKIT="0")
        return self._run(["docker", *args], step=step, env=env, stdin=stdin)

    def image_exists(self, tag: str) -> bool:
        """Whether the engine holds ``tag``."""
        return self._inspectable("image", tag)

    def _inspectable(self, kind: str, name: str) -> bool:
        """Whether ``docker <kind> inspect <name>`` finds it."""
        try:
            self._docker(kind, "inspect", "--format", "{{.Id}}", name, step="inspect")
        except ProvisioningError:
            return False
        return True

    def module_dir(self, module: str, version: str) -> Path:
        """The module's directory in the Go module cache (downloaded if missing)."""
        out = self._run(
            ["go", "mod", "download", "-json", f"{module}@{version}"],
            step="go-download",
            env=self._go_env(),
        )
        return Path(json.loads(out)["Dir"])

    def _go_build_into(
        self,
        out: Path,
        packages: Sequence[str],
        flags: Sequence[str],
        *,
        digest: str,
        step: str,
        cwd: Path,
        env: Mapping[str, str],
        timeout: float = 3600.0,
    ) -> None:
        """One ``go build`` of ``packages`` (compilation shared between them) into a staging
        directory beside ``out``; the commands then replace those in ``out``, which is stamped
        with ``digest``. An interrupted build leaves ``out`` as it was. ``timeout`` (s) bounds
        the build."""
        staging = out.parent / "bin.new"
        shutil.rmtree(staging, ignore_errors=True)
        staging.mkdir(parents=True)
        self._run(
            ["go", "build", *flags, "-o", str(staging) + "/", *packages],
            step=step,
            cwd=cwd,
            env=env,
            timeout=timeout,
        )
        out.mkdir(parents=True, exist_ok=True)
        for package in packages:
            name = package.rsplit("/", 1)[-1]
            os.replace(staging / name, out / name)
        shutil.rmtree(staging, ignore_errors=True)
        self._stamp(out, digest)


def _last_line(path: Path) -> str:
    lines = [line.strip() for line in path.read_text(errors="replace").splitlines() if line.strip()]
    return lines[-1][:300] if lines else "(no output)"
