"""What every feature of the offline builder shares, by composition: the
:class:`BuildContext` (cache, versions, the step log and report) each feature object is given,
its :class:`BuildCommands` (running ``go``, ``docker`` and the others with their output in step
logs, the Go environment, Go modules), and the recipe stamps.

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

from cnibench.backends.kube.build_recipes import OfflineRecipe
from cnibench.backends.kube.gomodules import go_env_value
from cnibench.backends.kube.images import OFFLINE_IMAGES, Images
from cnibench.backends.kube.offline.plan import cni_recipes
from cnibench.backends.kube.offline.recipes import OfflineVersions, go_proxy, recipe_digest
from cnibench.errors import ConfigError, ProvisioningError

__all__ = [
    "BuildCommands",
    "BuildContext",
    "BuildReport",
    "WouldBuildError",
    "cache_root",
    "is_current",
    "offline_bin_dir",
    "stamp",
]

NO_DWARF = "-gcflags=all=-dwarf=false"
"""Go flag of every build here: the compiler makes no debug information. Every command is
linked with ``-ldflags=-s -w``, which drops it from the binary, but only at link time: without
this flag the compiler still writes it for each package (16 % of the compile work of ``go
install -a`` of helm: 238 core-seconds against 285, measured 2026-12-03). The code it compiles
is the same, so the recipes' digests, and the caches stamped with them, do not change."""

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
    """Raised by a step asked only whether it is current (:attr:`BuildContext.checking`)."""


def is_current(directory: Path, digest: str) -> bool:
    """Whether ``directory`` holds the stamp of the recipe whose digest is ``digest``."""
    path = directory / ".cnibench-recipe"
    return path.is_file() and path.read_text().strip() == digest


def stamp(directory: Path, digest: str) -> None:
    """Mark ``directory`` as built by the recipe whose digest is ``digest``."""
    (directory / ".cnibench-recipe").write_text(digest + "\n")


class BuildCommands:
    """Runs the commands of a build (``go``, ``docker``, ``gcc``, ``mmdebstrap``), each one's
    output appended to its step's log, and fetches Go modules.

    Parameters
    ----------
    environ:
        Environment of the commands.
    docker_host:
        The engine (``unix://...``); ``""``: none, and a ``docker`` command fails.
    logs:
        Directory of the step logs (``<step>.log``).
    """

    def __init__(self, *, environ: Mapping[str, str], docker_host: str, logs: Path) -> None:
        self.environ = dict(environ)
        self.docker_host = docker_host
        self.logs = logs

    def run(
        self,
        argv: Sequence[str],
        *,
        step: str,
        cwd: Path | None = None,
        env: Mapping[str, str] | None = None,
        stdin: int | None = None,
        timeout: float = 3600.0,
    ) -> str:
        """Run ``argv``, its output appended to ``logs/<step>.log``; stdout returned.
        ``timeout`` in s.

        Raises
        ------
        cnibench.errors.ProvisioningError
            The command is missing, ran over ``timeout`` or failed (the message names its last
            error line and its log).
        """
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

    def go_env(self) -> dict[str, str]:
        """The environment of a Go command: the configured module proxy (never ``direct``),
        ``-mod=mod``, no debug information (:data:`NO_DWARF`), no cgo, the local toolchain.

        Raises
        ------
        cnibench.errors.ConfigError
            ``GOPROXY`` names no module proxy.
        """
        env = dict(self.environ)
        configured = env.get("GOPROXY") or go_env_value("GOPROXY", env)
        proxy = go_proxy(configured)
        if not proxy:
            raise ConfigError("GOPROXY names no module proxy: set GOPROXY to one")
        flags = env.get("GOFLAGS") or go_env_value("GOFLAGS", env)
        env.update(
            GOPROXY=proxy,
            GOFLAGS=" ".join(f for f in (flags, "-mod=mod", "-buildvcs=false", NO_DWARF) if f),
            CGO_ENABLED="0",
            GOTOOLCHAIN="local",
        )
        return env

    def module_go_env(self) -> dict[str, str]:
        """:meth:`go_env` for a build inside a module's own directory: the module cache is
        read-only, so its own go.mod and go.sum must do."""
        env = self.go_env()
        env["GOFLAGS"] = env["GOFLAGS"].replace("-mod=mod", "-mod=readonly")
        return env

    def docker(self, *args: str, step: str, stdin: int | None = None) -> str:
        """``docker <args>`` on the engine (as :meth:`run`).

        Raises
        ------
        cnibench.errors.ProvisioningError
            No engine is known, or the command failed.
        """
        if not self.docker_host:
            raise ProvisioningError(
                'no container engine: run eval "$(cnibench engine up)" or set DOCKER_HOST'
            )
        env = dict(self.environ, DOCKER_HOST=self.docker_host, DOCKER_BUILDKIT="0")
        return self.run(["docker", *args], step=step, env=env, stdin=stdin)

    def image_exists(self, tag: str) -> bool:
        """Whether the engine holds ``tag``."""
        return self.inspectable("image", tag)

    def inspectable(self, kind: str, name: str) -> bool:
        """Whether ``docker <kind> inspect <name>`` finds it."""
        try:
            self.docker(kind, "inspect", "--format", "{{.Id}}", name, step="inspect")
        except ProvisioningError:
            return False
        return True

    def module_dir(self, module: str, version: str) -> Path:
        """The module's directory in the Go module cache (downloaded if missing)."""
        out = self.run(
            ["go", "mod", "download", "-json", f"{module}@{version}"],
            step="go-download",
            env=self.go_env(),
        )
        return Path(json.loads(out)["Dir"])

    def go_build_into(
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
        try:
            self.run(
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
        finally:
            shutil.rmtree(staging, ignore_errors=True)
        stamp(out, digest)


@dataclass
class BuildContext:
    """What the features of one offline build share (:class:`~.gobuilds.GoBuilds`,
    :class:`~.rootfs.RootFilesystems`, :class:`~.assembly.ImageAssembly`, and
    :class:`~.tofu.TofuBuilds`): the cache, the versions, the commands and the step log.
    :meth:`create` makes one as :class:`~.builder.OfflineBuilder` documents its parameters."""

    versions: OfflineVersions
    """What to build."""
    images: Images
    """Tags to produce."""
    root: Path
    """Cache root (see :func:`cache_root`)."""
    environ: dict[str, str]
    """Environment of the Go and Docker commands (and of ``$CNIBENCH_KUBE_CACHE``)."""
    commands: BuildCommands
    """Runs the commands, their output in the step logs under :attr:`logs`."""
    log: Callable[[str], None]
    """Receives one line per step."""
    report: BuildReport = field(default_factory=BuildReport)
    """What the build did so far."""
    checking: bool = False
    """Only asking whether every step is current: a step that would build raises
    :class:`WouldBuildError` instead of starting."""

    @classmethod
    def create(
        cls,
        *,
        docker_host: str | None = None,
        versions: OfflineVersions | None = None,
        images: Images = OFFLINE_IMAGES,
        root: Path | None = None,
        log: Callable[[str], None] | None = None,
        environ: Mapping[str, str] | None = None,
    ) -> BuildContext:
        """A context with the defaults of the environment (``$DOCKER_HOST``, the cache root
        of :func:`cache_root`, a log on stdout)."""
        env = dict(os.environ if environ is None else environ)
        root = root or cache_root(env)
        commands = BuildCommands(
            environ=env,
            docker_host=docker_host or env.get("DOCKER_HOST", ""),
            logs=root / "offline" / "logs",
        )
        return cls(
            versions=versions or OfflineVersions(),
            images=images,
            root=root,
            environ=env,
            commands=commands,
            log=log or (lambda line: print(f"[images] {line}", flush=True)),
        )

    @property
    def offline(self) -> Path:
        """``<cache>/offline``: every artefact of the offline build but Kubernetes'."""
        return self.root / "offline"

    @property
    def logs(self) -> Path:
        """The step logs (``<step>.log``)."""
        return self.commands.logs

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

    @contextmanager
    def step(self, name: str) -> Iterator[None]:
        """One step of the build: logged, timed into :attr:`report` (s).

        Raises
        ------
        WouldBuildError
            :attr:`checking`: the step would start.
        """
        if self.checking:
            raise WouldBuildError(name)
        start = time.monotonic()
        self.log(f"{name} ...")
        yield
        took = time.monotonic() - start
        self.report.seconds[name] = self.report.seconds.get(name, 0.0) + took
        self.log(f"{name}: done in {took:.0f} s")


def _last_line(path: Path) -> str:
    lines = [line.strip() for line in path.read_text(errors="replace").splitlines() if line.strip()]
    return lines[-1][:300] if lines else "(no output)"
