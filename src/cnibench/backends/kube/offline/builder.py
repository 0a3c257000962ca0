"""Build the offline image set: Go modules and Debian packages in, images in a Docker engine out.

Every artefact is cached by version outside the repository (``$CNIBENCH_CACHE``, else
``$XDG_CACHE_HOME/cnibench``, else ``~/.cache/cnibench``) next to a stamp holding the digest of
its recipe, so a second run rebuilds nothing and a changed recipe rebuilds only what it
changes. Images live in the engine's data root (``cnibench engine up`` keeps it between runs)
and are looked up by tag; their tags end in a recipe number (:data:`~cnibench.backends.kube.
images.OFFLINE_IMAGES`).

Kubernetes' commands are built once into ``<cache>/kube/<version>/bin``, the directory the kube
test tier's control plane also runs from.
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import subprocess
import tarfile
import tempfile
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from cnibench.backends.kube.images import OFFLINE_IMAGES, Images
from cnibench.backends.kube.offline.recipes import (
    CILIUM_BUILD_TAGS,
    CILIUM_MODULE,
    CILIUM_PACKAGES,
    CILIUM_SOURCE,
    CNI_PLUGINS,
    GATEWAY_API_MODULE,
    KUBE_ROUTER_MODULE,
    KUBERNETES_COMMANDS,
    KUBERNETES_IMPORTS,
    ROOTFS_PACKAGES,
    TENCENT_VPC_MODULE,
    TENCENT_VPC_STUB,
    TRAEFIK_MODULE,
    ImageRecipe,
    OfflineVersions,
    cilium_go_mod,
    cilium_ldflags,
    containerd_config,
    debian_mirror,
    debootstrap_argv,
    etcd_go_mod,
    flannel_go_mod,
    go_proxy,
    image_recipes,
    kube_router_go_mod,
    kubernetes_go_mod,
    recipe_digest,
    runtime_images,
    version_ldflags,
)
from cnibench.errors import ConfigError, ProvisioningError

__all__ = ["BuildReport", "OfflineBuilder", "cache_root", "module_cache_dir", "offline_bin_dir"]

# Bumped when the way a step builds changes without its versions changing.
_KUBERNETES_RECIPE = "k8s-2"
_GO_RECIPE = "go-1"
_CILIUM_RECIPE = "cilium-1"
_KUBE_ROUTER_RECIPE = "kube-router-1"
_TRAEFIK_RECIPE = "traefik-1"
_ROOTFS_RECIPE = "rootfs-1"
_NODE_RECIPE = "node-1"

_STORAGE_CLASS = """\
# kind applies /kind/manifests/default-storage.yaml at creation; the offline node image has no
# provisioner image, so only the class is declared (cnibench's pods use no volumes).
apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata:
  name: standard
  annotations:
    storageclass.kubernetes.io/is-default-class: "true"
provisioner: kubernetes.io/no-provisioner
volumeBindingMode: WaitForFirstConsumer
"""


def cache_root(environ: Mapping[str, str] | None = None) -> Path:
    """Root of cnibench's build caches (``$CNIBENCH_CACHE``, ``$XDG_CACHE_HOME/cnibench``,
    ``~/.cache/cnibench``)."""
    env = os.environ if environ is None else environ
    if env.get("CNIBENCH_CACHE"):
        return Path(env["CNIBENCH_CACHE"])
    base = env.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "cnibench"


def module_cache_dir(module: str, version: str, environ: Mapping[str, str] | None = None) -> Path:
    """Where ``module@version`` is (or would be) in the Go module cache (``$GOMODCACHE``, else
    ``go env GOMODCACHE``), without downloading it: how a chart built with the module (Cilium's
    ``install/kubernetes/cilium``) is found when the module cache is the only copy.

    Module paths with capitals are escaped as the cache does (``A`` -> ``!a``).
    """
    env = dict(os.environ if environ is None else environ)
    root = env.get("GOMODCACHE") or _go_env_value("GOMODCACHE", env)
    if not root:
        raise ProvisioningError("go env GOMODCACHE names no module cache")
    escaped = "".join(f"!{c.lower()}" if c.isupper() else c for c in module)
    return Path(root) / f"{escaped}@{version}"


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


class OfflineBuilder:
    """Builds :data:`~cnibench.backends.kube.images.OFFLINE_IMAGES` into a Docker engine.

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
        digest = recipe_digest(_GO_RECIPE, self.versions)
        return self.offline / "go" / digest

    def artefacts(self) -> dict[str, Path]:
        """Name (as :class:`~.recipes.ImageRecipe` ``files`` use it) -> built file."""
        found = {c: self.kubernetes_bin / c for c in KUBERNETES_COMMANDS}
        for name in ("etcd", "coredns", "pause", "flanneld", "kind"):
            found[name] = self.go_bin / name
        for plugin in CNI_PLUGINS:
            name = plugin.rsplit("/", 1)[1]
            found[f"cni/{name}"] = self.go_bin / "cni" / name
        for package in CILIUM_PACKAGES:
            name = package.rsplit("/", 1)[-1]
            found[f"cilium/{name}"] = self.cilium_bin / name
        found["kube-router"] = self.kube_router_bin / "kube-router"
        found["traefik"] = self.traefik_bin / "traefik"
        return found

    @property
    def traefik_bin(self) -> Path:
        """Traefik's command, per release."""
        return self.offline / "traefik" / self.versions.traefik / "bin"

    @property
    def kube_router_bin(self) -> Path:
        """kube-router's command, per release."""
        return self.offline / "kube-router" / self.versions.kube_router / "bin"

    @property
    def cilium_bin(self) -> Path:
        """Cilium's commands (:data:`~.recipes.CILIUM_PACKAGES`), per release."""
        return self.offline / "cilium" / self.versions.cilium / "bin"

    def _artefact(self, name: str, found: Mapping[str, Path]) -> Path:
        """A built artefact, or a path inside the Cilium module (:data:`~.recipes.
        CILIUM_SOURCE`), which is used in place from the module cache."""
        if name.startswith(CILIUM_SOURCE):
            module = self.module_dir(CILIUM_MODULE, self.versions.cilium)
            return module / name.removeprefix(CILIUM_SOURCE)
        return found[name]

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
            raise _WouldBuildError(name)
        start = time.monotonic()
        self._log(f"{name} ...")
        yield
        took = time.monotonic() - start
        self.report.seconds[name] = self.report.seconds.get(name, 0.0) + took
        self._log(f"{name}: done in {took:.0f} s")

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
        configured = env.get("GOPROXY") or _go_env_value("GOPROXY", env)
        proxy = go_proxy(configured)
        if not proxy:
            raise ConfigError("GOPROXY names no module proxy: set GOPROXY to one")
        flags = env.get("GOFLAGS") or _go_env_value("GOFLAGS", env)
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

    # -- Go ---------------------------------------------------------------------------------

    def build_kubernetes(self) -> Path:
        """Kubernetes' seven commands in one ``go build`` (see :func:`~.recipes.
        kubernetes_go_mod`); returns the bin directory."""
        v = self.versions
        digest = recipe_digest(_KUBERNETES_RECIPE, v.kubernetes, version_ldflags(v.kubernetes))
        out = self.kubernetes_bin
        if self._current(out, digest) and all((out / c).is_file() for c in KUBERNETES_COMMANDS):
            return out
        with self._step(
            f"kubernetes {v.kubernetes}: go build of {len(KUBERNETES_COMMANDS)} commands"
        ):
            env = self._go_env()
            upstream = self._run(
                ["go", "mod", "download", "-json", f"k8s.io/kubernetes@{v.kubernetes}"],
                step="kubernetes",
                env=env,
            )
            go_mod_text = Path(json.loads(upstream)["GoMod"]).read_text()
            work = out.parent / "src"
            work.mkdir(parents=True, exist_ok=True)
            (work / "go.mod").write_text(kubernetes_go_mod(v, go_mod_text))
            (work / "tools.go").write_text(KUBERNETES_IMPORTS)
            self._run(["go", "mod", "tidy"], step="kubernetes", cwd=work, env=env)
            self._go_build_into(
                out,
                [f"k8s.io/kubernetes/cmd/{c}" for c in KUBERNETES_COMMANDS],
                ["-trimpath", "-ldflags", version_ldflags(v.kubernetes)],
                digest=digest,
                step="kubernetes",
                cwd=work,
                env=env,
            )
        return out

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
    ) -> None:
        """One ``go build`` of ``packages`` (compilation shared between them) into a staging
        directory beside ``out``; the commands then replace those in ``out``, which is stamped
        with ``digest``. An interrupted build leaves ``out`` as it was."""
        staging = out.parent / "bin.new"
        shutil.rmtree(staging, ignore_errors=True)
        staging.mkdir(parents=True)
        self._run(
            ["go", "build", *flags, "-o", str(staging) + "/", *packages],
            step=step,
            cwd=cwd,
            env=env,
        )
        out.mkdir(parents=True, exist_ok=True)
        for package in packages:
            name = package.rsplit("/", 1)[-1]
            os.replace(staging / name, out / name)
        shutil.rmtree(staging, ignore_errors=True)
        self._stamp(out, digest)

    def build_go_binaries(self) -> Path:
        """kind, etcd, CoreDNS, flanneld, the reference CNI plugins and pause."""
        v = self.versions
        out = self.go_bin
        digest = recipe_digest(_GO_RECIPE, v)
        if self._current(out, digest):
            return out
        with self._step("kind, etcd, CoreDNS, flannel, CNI plugins, pause: go build"):
            env = self._go_env()
            out.mkdir(parents=True, exist_ok=True)
            ldflags = ["-trimpath", "-ldflags", "-s -w"]

            def install(package: str, target: Path) -> None:
                self._run(
                    ["go", "install", *ldflags, package],
                    step="go-binaries",
                    env=dict(env, GOBIN=str(target)),
                )

            install(f"sigs.k8s.io/kind@{v.kind}", out)
            install(f"github.com/coredns/coredns@{v.coredns}", out)
            for plugin in CNI_PLUGINS:
                install(
                    f"github.com/containernetworking/plugins/plugins/{plugin}@{v.cni_plugins}",
                    out / "cni",
                )
            self._build_flanneld(out / "flanneld", env)
            work = self.offline / "src" / f"etcd-{v.etcd}"
            work.mkdir(parents=True, exist_ok=True)
            (work / "go.mod").write_text(etcd_go_mod(v))
            (work / "etcd.go").write_text(
                '//go:build tools\n\npackage etcd\n\nimport _ "go.etcd.io/etcd/server/v3"\n'
            )
            self._run(["go", "mod", "tidy"], step="go-binaries", cwd=work, env=env)
            self._run(
                ["go", "build", *ldflags, "-o", str(out / "etcd"), "go.etcd.io/etcd/server/v3"],
                step="go-binaries",
                cwd=work,
                env=env,
            )
            pause_c = (
                self.module_dir("k8s.io/kubernetes", v.kubernetes) / "build/pause/linux/pause.c"
            )
            self._run(
                [
                    "gcc",
                    "-Os",
                    "-static",
                    f'-DVERSION="{v.pause}"',
                    "-o",
                    str(out / "pause"),
                    str(pause_c),
                ],
                step="go-binaries",
            )
            self._stamp(out, digest)
        return out

    def _build_flanneld(self, target: Path, env: Mapping[str, str]) -> None:
        """flanneld through a wrapper module (see :func:`~.recipes.flannel_go_mod`)."""
        work = self.offline / "src" / f"flannel-{self.versions.flannel}"
        stub = work / "tencent-vpc-stub"
        (stub / "v20170312").mkdir(parents=True, exist_ok=True)
        (stub / "go.mod").write_text(f"module {TENCENT_VPC_MODULE}\n\ngo 1.24.0\n")
        (stub / "v20170312" / "stub.go").write_text(TENCENT_VPC_STUB)
        (work / "go.mod").write_text(flannel_go_mod(self.versions))
        # flannel is a main package: nothing can import it, so `go mod tidy` cannot see it;
        # -mod=mod lets the build itself complete go.mod and go.sum. Its udp backend is cgo,
        # so this one binary links glibc (the image's Debian is the build host's release).
        self._run(
            [
                "go",
                "build",
                "-trimpath",
                "-ldflags",
                "-s -w",
                "-o",
                str(target),
                "github.com/flannel-io/flannel",
            ],
            step="go-binaries",
            cwd=work,
            env=dict(env, CGO_ENABLED="1"),
        )

    def build_cilium(self) -> Path:
        """Cilium's commands in one ``go build`` (compilation shared between them) through a
        wrapper module (see :func:`~.recipes.cilium_go_mod`); returns the bin directory.

        Cold, this takes about 18 minutes on 2 cores.
        """
        v = self.versions
        packages = [f"{CILIUM_MODULE}/{package}" for package in CILIUM_PACKAGES]
        ldflags = cilium_ldflags(v)
        digest = recipe_digest(_CILIUM_RECIPE, v.cilium, ldflags, CILIUM_BUILD_TAGS, packages)
        out = self.cilium_bin
        names = [package.rsplit("/", 1)[-1] for package in packages]
        if self._current(out, digest) and all((out / name).is_file() for name in names):
            return out
        with self._step(f"cilium {v.cilium}: go build of {len(packages)} commands"):
            env = self._go_env()
            module = self.module_dir(CILIUM_MODULE, v.cilium)
            upstream = module / "go.mod"
            work = self.offline / "src" / f"cilium-{v.cilium}"
            work.mkdir(parents=True, exist_ok=True)
            (work / "go.mod").write_text(cilium_go_mod(v, upstream.read_text()))
            # Cilium's own go.sum (verified with its module) vouches for its forks, which the
            # checksum database does not know (it answers 404 for github.com/cilium/gobgp/v3).
            (work / "go.sum").write_text((module / "go.sum").read_text())
            (work / "doc.go").write_text(
                "// Package cilium only holds the go.mod that builds Cilium's commands.\n"
                "package cilium\n"
            )
            # Main packages of a dependency: -mod=mod (from _go_env) lets the build complete
            # go.mod and go.sum, as for flanneld.
            self._go_build_into(
                out,
                packages,
                ["-tags", CILIUM_BUILD_TAGS, "-ldflags", ldflags],
                digest=digest,
                step="cilium",
                cwd=work,
                env=env,
            )
        return out

    def build_kube_router(self) -> Path:
        """kube-router's command through a wrapper module (see
        :func:`~.recipes.kube_router_go_mod`); returns the bin directory. About 4 minutes cold
        on 2 cores."""
        v = self.versions
        package = f"{KUBE_ROUTER_MODULE}/cmd/kube-router"
        digest = recipe_digest(_KUBE_ROUTER_RECIPE, v.kube_router, package)
        out = self.kube_router_bin
        if self._current(out, digest) and (out / "kube-router").is_file():
            return out
        with self._step(f"kube-router {v.kube_router}: go build"):
            work = self.offline / "src" / f"kube-router-{v.kube_router}"
            work.mkdir(parents=True, exist_ok=True)
            (work / "go.mod").write_text(kube_router_go_mod(v))
            (work / "doc.go").write_text(
                "// Package kuberouter only holds the go.mod that builds kube-router.\n"
                "package kuberouter\n"
            )
            # A main package of a dependency: -mod=mod (from _go_env) completes go.mod/go.sum.
            self._go_build_into(
                out,
                [package],
                ["-trimpath", "-ldflags", "-s -w"],
                digest=digest,
                step="kube-router",
                cwd=work,
                env=self._go_env(),
            )
        return out

    def build_traefik(self) -> Path:
        """Traefik's command, built with its own module directory (in the Go module cache) as
        the main module, since its go.mod has ``replace`` directives; and the Gateway API
        module whose CRDs go in before it. Returns the bin directory.

        The web UI embeds ``webui/static``, which holds a placeholder in the module: no npm
        build is needed.
        """
        v = self.versions
        digest = recipe_digest(_TRAEFIK_RECIPE, v.traefik, v.gateway_api)
        out = self.traefik_bin
        if self._current(out, digest) and (out / "traefik").is_file():
            return out
        with self._step(f"traefik {v.traefik}: go build"):
            self.module_dir(GATEWAY_API_MODULE, v.gateway_api)
            module = self.module_dir(TRAEFIK_MODULE, v.traefik)
            # The module cache is read-only: its own go.mod and go.sum must do.
            env = dict(self._go_env())
            env["GOFLAGS"] = env["GOFLAGS"].replace("-mod=mod", "-mod=readonly")
            self._go_build_into(
                out,
                ["./cmd/traefik"],
                [
                    "-trimpath",
                    "-ldflags",
                    f"-s -w -X github.com/traefik/traefik/v3/pkg/version.Version={v.traefik}",
                ],
                digest=digest,
                step="traefik",
                cwd=module,
                env=env,
            )
        return out

    @property
    def helm_bin(self) -> Path:
        """Directory of the helm that installs Cilium's chart: the Kubernetes bin directory,
        where ``scripts/kube-tier.sh`` installs the same release, so one build serves both."""
        return self.kubernetes_bin

    def build_helm(self) -> Path:
        """helm (``go install``) into :attr:`helm_bin` unless one is there; returns the
        directory. Not stamped: the directory's stamp is the Kubernetes build's."""
        out = self.helm_bin
        if (out / "helm").is_file():
            return out
        with self._step(f"helm {self.versions.helm}: go install"):
            out.mkdir(parents=True, exist_ok=True)
            self._run(
                [
                    "go",
                    "install",
                    "-trimpath",
                    "-ldflags",
                    "-s -w",
                    f"helm.sh/helm/v3/cmd/helm@{self.versions.helm}",
                ],
                step="helm",
                env=dict(self._go_env(), GOBIN=str(out)),
            )
        return out

    # -- root filesystems -------------------------------------------------------------------

    def rootfs(self, name: str) -> Path:
        """A Debian root filesystem with :data:`~.recipes.ROOTFS_PACKAGES` ``[name]``."""
        packages = ROOTFS_PACKAGES[name]
        digest = recipe_digest(_ROOTFS_RECIPE, self.versions.debian, packages)
        target = self.offline / "rootfs" / f"{name}-{digest}"
        if self._current(target, digest):
            return target
        with self._step(f"root filesystem {name!r} ({len(packages)} Debian packages)"):
            mirror = self._mirror()
            shutil.rmtree(target, ignore_errors=True)
            debcache = self.offline / "debcache"
            debcache.mkdir(parents=True, exist_ok=True)
            self._run(
                debootstrap_argv(
                    str(target),
                    suite=self.versions.debian,
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
            self._stamp(target, digest)
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
                "no Debian archive in /etc/apt/sources.list{,.d}: debootstrap needs one"
            )
        return mirror

    # -- images -----------------------------------------------------------------------------

    def import_image(self, recipe: ImageRecipe) -> None:
        """``docker import`` of the recipe's root filesystem plus files, unless present."""
        if self.image_exists(recipe.tag):
            self.report.reused.append(recipe.tag)
            return
        artefacts = self.artefacts()
        with (
            self._step(f"image {recipe.tag}"),
            tempfile.TemporaryDirectory(dir=self.offline) as tmp,
        ):
            tar_path = Path(tmp) / "image.tar"
            removed = {p.strip("/") for p in recipe.remove}
            base = self.rootfs(recipe.rootfs) if recipe.rootfs else None
            with tarfile.open(tar_path, "w") as tar:
                if base is not None:

                    def keep(info: tarfile.TarInfo) -> tarfile.TarInfo | None:
                        name = info.name.removeprefix("./")
                        return None if name in removed or name == ".cnibench-recipe" else info

                    tar.add(base, arcname=".", filter=keep)
                for inside, artefact in sorted(recipe.files.items()):
                    _add_parents(tar, inside, present=base)
                    path = self._artefact(artefact, artefacts)
                    info = tar.gettarinfo(str(path), arcname=inside.lstrip("/"))
                    info.mode = 0o755
                    info.uid = info.gid = 0
                    info.uname = info.gname = "root"
                    with path.open("rb") as handle:
                        tar.addfile(info, handle)
                for inside, artefact in sorted(recipe.trees.items()):
                    _add_parents(tar, inside, present=base)
                    tar.add(
                        self._artefact(artefact, artefacts),
                        arcname=inside.strip("/"),
                        filter=_owned_by_root,
                    )
                for inside, target in sorted(recipe.links.items()):
                    _add_parents(tar, inside, present=base)
                    info = tarfile.TarInfo(inside.strip("/"))
                    info.type = tarfile.SYMTYPE
                    info.linkname = target
                    info.mode = 0o777
                    tar.addfile(info)
            changes = [arg for change in recipe.changes() for arg in ("--change", change)]
            self._docker("import", *changes, str(tar_path), recipe.tag, step="images")
        self.report.built.append(recipe.tag)

    def _add_stopsignal(self, source: str, tag: str) -> None:
        # `docker import/commit --change` refuse STOPSIGNAL; a one-line build adds it.
        with tempfile.TemporaryDirectory(dir=self.offline) as context:
            Path(context, "Dockerfile").write_text(f"FROM {source}\nSTOPSIGNAL SIGRTMIN+3\n")
            self._docker("build", "--network", "none", "-q", "-t", tag, context, step="images")

    def base_image(self) -> str:
        """kind's base image (``images/base`` of the kind module) on a Debian node rootfs."""
        v = self.versions
        kind_files = self.module_dir("sigs.k8s.io/kind", v.kind) / "images" / "base" / "files"
        digest = recipe_digest(_NODE_RECIPE, v, ROOTFS_PACKAGES["node"])
        tag = f"localhost/cnibench-kind-base:{digest}"
        if self.image_exists(tag):
            self.report.reused.append(tag)
            return tag
        with self._step("kind base image"):
            rootfs = self.rootfs("node")
            work = self.offline / "work" / f"base-{digest}"
            shutil.rmtree(work, ignore_errors=True)
            work.parent.mkdir(parents=True, exist_ok=True)
            self._run(["cp", "-a", str(rootfs), str(work)], step="base")
            _install_kind_base_files(kind_files, work)
            config = containerd_config(
                (kind_files / "etc/containerd/config.toml").read_text(), pause_tag=v.pause
            )
            (work / "etc/containerd/config.toml").write_text(config)
            for name in ("containerd", "containerd-shim-runc-v2", "ctr"):
                _symlink(work / "usr/local/bin" / name, f"/usr/bin/{name}")
            _symlink(work / "usr/local/sbin/runc", "/usr/sbin/runc")
            spec = json.loads(self._run(["chroot", str(work), "ctr", "oci", "spec"], step="base"))
            spec.setdefault("hooks", {}).setdefault("createContainer", []).append(
                {"path": "/kind/bin/mount-product-files.sh"}
            )
            spec.get("process", {}).pop("rlimits", None)
            (work / "etc/containerd/cri-base.json").write_text(json.dumps(spec, indent=2))
            cni_dir = work / "opt/cni/bin"
            cni_dir.mkdir(parents=True, exist_ok=True)
            for name, path in self.artefacts().items():
                if name.startswith("cni/"):
                    shutil.copy2(path, cni_dir / name.removeprefix("cni/"))
            self._run(["chroot", str(work), "/bin/bash", "-c", _SYSTEMD_SETUP], step="base")
            stage = f"localhost/cnibench-kind-base-stage:{digest}"
            self._import_dir(
                work,
                stage,
                ["ENV container=docker", 'ENTRYPOINT ["/usr/local/bin/entrypoint", "/sbin/init"]'],
            )
            self._add_stopsignal(stage, tag)
            self._docker("rmi", stage, step="images")
            shutil.rmtree(work, ignore_errors=True)
        self.report.built.append(tag)
        return tag

    def _import_dir(self, directory: Path, tag: str, changes: Sequence[str]) -> None:
        args = [arg for change in changes for arg in ("--change", change)]
        self._pipe(["tar", "-C", str(directory), "-c", "."], ["import", *args, "-", tag], "images")

    def _pipe(self, producer: Sequence[str], docker_args: Sequence[str], step: str) -> None:
        """``producer | docker <docker_args>``; either failing fails the step."""
        env = dict(self.environ, DOCKER_HOST=self.docker_host)
        source = subprocess.Popen(list(producer), stdout=subprocess.PIPE, env=env)
        try:
            assert source.stdout is not None
            self._docker(*docker_args, step=step, stdin=source.stdout.fileno())
        finally:
            if source.stdout is not None:
                source.stdout.close()
            if source.wait() != 0:
                raise ProvisioningError(
                    f"{' '.join(producer[:3])} failed (exit {source.returncode})"
                )

    def node_image(self) -> str:
        """The kind node image: base + kubelet/kubeadm/kubectl + the runtime images imported
        into its containerd (what ``kind build node-image`` does)."""
        tag = self.images.kind_node
        if self.image_exists(tag):
            self.report.reused.append(tag)
            return tag
        base = self.base_image()
        for recipe in runtime_images(self.versions):
            self.import_image(recipe)
        with self._step(f"node image {tag}"):
            builder = f"cnibench-node-build-{os.getpid()}"
            if self._inspectable("container", builder):  # left by an interrupted build
                self._docker("rm", "-f", "-v", builder, step="node-image")
            self._docker(
                "run",
                "-d",
                "--pull",
                "never",
                "--name",
                builder,
                "--privileged",
                "--network",
                "none",
                "--entrypoint",
                "sleep",
                base,
                "infinity",
                step="node-image",
            )
            try:
                bins = self.kubernetes_bin
                for command in ("kubelet", "kubeadm", "kubectl"):
                    self._docker(
                        "cp",
                        str(bins / command),
                        f"{builder}:/usr/bin/{command}",
                        step="node-image",
                    )
                with tempfile.NamedTemporaryFile("w", dir=self.offline, suffix=".yaml") as storage:
                    storage.write(_STORAGE_CLASS)
                    storage.flush()
                    self._docker(
                        "exec", builder, "mkdir", "-p", "/kind/manifests", step="node-image"
                    )
                    self._docker(
                        "cp",
                        storage.name,
                        f"{builder}:/kind/manifests/default-storage.yaml",
                        step="node-image",
                    )
                self._docker(
                    "exec",
                    builder,
                    "sh",
                    "-c",
                    f"printf %s {self.versions.kubernetes} > /kind/version",
                    step="node-image",
                )
                self._docker(
                    "exec",
                    "-d",
                    builder,
                    "sh",
                    "-c",
                    "containerd > /tmp/containerd.log 2>&1",
                    step="node-image",
                )
                self._docker(
                    "exec",
                    builder,
                    "sh",
                    "-c",
                    "for i in $(seq 1 30); do ctr version >/dev/null 2>&1 && exit 0; sleep 1; done;"
                    " exit 1",
                    step="node-image",
                )
                for recipe in runtime_images(self.versions):
                    self._pipe_image(recipe.tag, builder)
                self._docker(
                    "exec",
                    builder,
                    "sh",
                    "-c",
                    "kill $(pidof containerd); while pidof containerd >/dev/null; do sleep 0.2;"
                    " done; rm -rf /tmp/*",
                    step="node-image",
                )
                stage = f"{tag}-stage"
                self._docker(
                    "commit",
                    "--change",
                    'ENTRYPOINT ["/usr/local/bin/entrypoint", "/sbin/init"]',
                    "--change",
                    "CMD []",
                    builder,
                    stage,
                    step="node-image",
                )
            finally:
                self._docker("rm", "-f", "-v", builder, step="node-image")
            self._add_stopsignal(stage, tag)
            self._docker("rmi", stage, step="node-image")
        self.report.built.append(tag)
        return tag

    def _pipe_image(self, tag: str, container: str) -> None:
        self._pipe(
            ["docker", "save", tag],
            [
                "exec",
                "-i",
                container,
                "ctr",
                "--namespace=k8s.io",
                "images",
                "import",
                "--label=io.cri-containerd.pinned=pinned",
                "--all-platforms",
                "--no-unpack",
                "--digests",
                "-",
            ],
            "node-image",
        )

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
        except _WouldBuildError:
            return False
        finally:
            self._checking = False
        return True

    def _prepare(self, cnis: frozenset[str]) -> None:
        """The long steps for ``cnis``, one after another (a check: see :meth:`prepared`)."""
        recipes = image_recipes(self.images, cnis=cnis)
        wanted_rootfs = {recipe.rootfs for recipe in recipes}
        optional = {"cilium", "kube-router"}
        for name in ROOTFS_PACKAGES:
            if name not in optional or name in wanted_rootfs:
                self.rootfs(name)
        self.build_kubernetes()
        self.build_go_binaries()
        if "kube-router" in wanted_rootfs:
            self.build_kube_router()
        if any(recipe.tag == self.images.traefik for recipe in recipes):
            self.build_traefik()
        if "cilium" in wanted_rootfs:
            self.build_cilium()
            self.build_helm()

    def _build_all(self, cnis: frozenset[str], *, images: bool) -> BuildReport:
        recipes = image_recipes(self.images, cnis=cnis)
        wanted_rootfs = {recipe.rootfs for recipe in recipes}
        cilium = "cilium" in wanted_rootfs
        kube_router = "kube-router" in wanted_rootfs
        traefik = any(recipe.tag == self.images.traefik for recipe in recipes)
        optional = {"cilium", "kube-router"}
        rootfs_names = [
            name for name in ROOTFS_PACKAGES if name not in optional or name in wanted_rootfs
        ]

        def go_builds() -> None:
            self.build_kubernetes()
            self.build_go_binaries()
            if kube_router:
                self.build_kube_router()
            if traefik:
                self.build_traefik()
            if cilium:
                self.build_cilium()
                self.build_helm()

        with ThreadPoolExecutor(max_workers=2) as pool:
            go = pool.submit(go_builds)
            rootfs = pool.submit(lambda: [self.rootfs(name) for name in rootfs_names])
            go.result()
            rootfs.result()
        self.link_tools()
        if not images:
            return self.report
        self.node_image()
        for recipe in recipes:
            self.import_image(recipe)
        return self.report


_SYSTEMD_SETUP = """\
set -e
find /lib/systemd/system/sysinit.target.wants/ -name systemd-tmpfiles-setup.service -delete
rm -f /lib/systemd/system/multi-user.target.wants/* /etc/systemd/system/*.wants/* \
  /lib/systemd/system/local-fs.target.wants/* /lib/systemd/system/sockets.target.wants/*udev* \
  /lib/systemd/system/sockets.target.wants/*initctl* /lib/systemd/system/basic.target.wants/*
grep -q '^ReadKMsg=no' /etc/systemd/journald.conf || echo ReadKMsg=no >> /etc/systemd/journald.conf
systemctl enable kubelet.service containerd.service undo-mount-hacks.service
systemctl mask systemd-binfmt.service
mkdir -p /etc/kubernetes/manifests /var/lib/kubelet
"""
"""What kind's base Dockerfile does to systemd (kubelet and containerd started at boot, units a
container must not run masked or removed)."""


class _WouldBuildError(Exception):
    """Raised by a step asked only whether it is current (:meth:`OfflineBuilder.prepared`)."""


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


def _install_kind_base_files(files: Path, root: Path) -> None:
    """Copy kind's ``images/base/files`` into ``root`` with the modes its Dockerfile sets
    (scripts executable, configuration 0644), leaving out the fuse-overlayfs unit."""
    for source in files.rglob("*"):
        if source.is_dir() or source.name == "containerd-fuse-overlayfs.service":
            continue
        relative = source.relative_to(files)
        target = root / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(source, target)
        executable = relative.parts[0] == "usr" or relative.parts[:2] == ("kind", "bin")
        target.chmod(0o755 if executable else 0o644)
    (root / "kind/bin").chmod(0o755)


def _owned_by_root(info: tarfile.TarInfo) -> tarfile.TarInfo:
    """A tree's entry owned by root and writable by it (the module cache's copies are
    read-only)."""
    info.uid = info.gid = 0
    info.uname = info.gname = "root"
    info.mode |= 0o200
    return info


def _symlink(link: Path, target: str) -> None:
    link.parent.mkdir(parents=True, exist_ok=True)
    if link.is_symlink() or link.exists():
        link.unlink()
    link.symlink_to(target)


def _add_parents(tar: tarfile.TarFile, inside: str, *, present: Path | None) -> None:
    """Directory entries above ``inside`` that the root filesystem ``present`` lacks (docker
    refuses a layer that names a path twice)."""
    parts = inside.strip("/").split("/")[:-1]
    for depth in range(1, len(parts) + 1):
        if present is not None and (present / "/".join(parts[:depth])).is_dir():
            continue
        info = tarfile.TarInfo("/".join(parts[:depth]))
        info.type = tarfile.DIRTYPE
        info.mode = 0o755
        tar.addfile(info)


def _go_env_value(name: str, environ: Mapping[str, str]) -> str:
    try:
        done = subprocess.run(
            ["go", "env", name],
            capture_output=True,
            text=True,
            env=dict(environ),
            check=False,
            timeout=60,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise ProvisioningError(f"go is not usable: {exc}") from exc
    return done.stdout.strip()


def _last_line(path: Path) -> str:
    lines = [line.strip() for line in path.read_text(errors="replace").splitlines() if line.strip()]
    return lines[-1][:300] if lines else "(no output)"
