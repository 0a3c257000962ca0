"""The Go builds of the offline image set: Kubernetes' commands, the shared Go step (kind, etcd,
CoreDNS, the CNI plugins, pause and flanneld), each CNI's own build as its driver's
:class:`~cnibench.backends.kube.build_recipes.OfflineRecipe` declares it, Traefik and helm.

Kubernetes' commands are built once into ``<cache>/kube/<version>/bin``, the directory the kube
test tier's control plane also runs from.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path

from cnibench.backends.kube.build_recipes import OfflineRecipe
from cnibench.backends.kube.offline.core import BuildContext, is_current, stamp
from cnibench.backends.kube.offline.plan import cni_recipes
from cnibench.backends.kube.offline.recipes import (
    CNI_PLUGINS,
    GATEWAY_API_MODULE,
    KUBERNETES_COMMANDS,
    KUBERNETES_IMPORTS,
    TRAEFIK_MODULE,
    etcd_go_mod,
    kubernetes_go_mod,
    recipe_digest,
    version_ldflags,
)

__all__ = ["GoBuilds"]

# Bumped when the way a step builds changes without its versions changing.
_KUBERNETES_RECIPE = "k8s-2"
_TRAEFIK_RECIPE = "traefik-1"
TRAEFIK_BUILD_MINUTES = 6.0
"""About how long Traefik's build takes cold on 2 cores (see ``OfflineRecipe.build_minutes``:
a build of several steps runs the shortest first)."""
HELM_BUILD_MINUTES = 1.0


class GoBuilds:
    """The Go builds (and pause, with ``gcc``) of :class:`~.builder.OfflineBuilder`.

    Parameters
    ----------
    context:
        The build's cache, versions and commands.
    """

    def __init__(self, context: BuildContext) -> None:
        self.context = context
        self._commands = context.commands

    def artefacts(self) -> dict[str, Path]:
        """Name (as :class:`~cnibench.backends.kube.build_recipes.ImageRecipe` ``files`` use
        it) -> built file."""
        found = {c: self.context.kubernetes_bin / c for c in KUBERNETES_COMMANDS}
        for name in ("etcd", "coredns", "pause", "kind"):
            found[name] = self.context.go_bin / name
        for plugin in CNI_PLUGINS:
            name = plugin.rsplit("/", 1)[1]
            found[f"cni/{name}"] = self.context.go_bin / "cni" / name
        for cni, recipe in cni_recipes().items():
            if recipe.always:
                found[recipe.build.binary] = self.context.go_bin / recipe.build.binary
                continue
            for package in recipe.build.packages:
                name = package.rsplit("/", 1)[-1]
                found[recipe.artefact_prefix + name] = self.cni_bin(cni) / name
        found["traefik"] = self.traefik_bin / "traefik"
        return found

    @property
    def traefik_bin(self) -> Path:
        """Traefik's command, per release."""
        return self.context.offline / "traefik" / self.context.versions.traefik / "bin"

    def cni_bin(self, cni: str) -> Path:
        """The commands of ``cni``'s own build, per release
        (``<cache>/offline/<recipe>/<version>/bin``)."""
        recipe = cni_recipes()[cni]
        return self.context.offline / recipe.recipe / recipe.version / "bin"

    def artefact(self, name: str, found: Mapping[str, Path]) -> Path:
        """A built artefact, or a path inside a CNI's module (its recipe's
        ``source_prefix``: Cilium's init scripts and BPF tree), used in place from the module
        cache."""
        for recipe in cni_recipes().values():
            if recipe.source_prefix and name.startswith(recipe.source_prefix):
                module = self._commands.module_dir(recipe.build.module, recipe.version)
                return module / name.removeprefix(recipe.source_prefix)
        return found[name]

    def build_kubernetes(self) -> Path:
        """Kubernetes' seven commands in one ``go build`` (see :func:`~.recipes.
        kubernetes_go_mod`); returns the bin directory."""
        v = self.context.versions
        digest = recipe_digest(_KUBERNETES_RECIPE, v.kubernetes, version_ldflags(v.kubernetes))
        out = self.context.kubernetes_bin
        if is_current(out, digest) and all((out / c).is_file() for c in KUBERNETES_COMMANDS):
            return out
        with self.context.step(
            f"kubernetes {v.kubernetes}: go build of {len(KUBERNETES_COMMANDS)} commands"
        ):
            env = self._commands.go_env()
            upstream = self._commands.run(
                ["go", "mod", "download", "-json", f"k8s.io/kubernetes@{v.kubernetes}"],
                step="kubernetes",
                env=env,
            )
            go_mod_text = Path(json.loads(upstream)["GoMod"]).read_text()
            work = out.parent / "src"
            work.mkdir(parents=True, exist_ok=True)
            (work / "go.mod").write_text(kubernetes_go_mod(v, go_mod_text))
            (work / "tools.go").write_text(KUBERNETES_IMPORTS)
            self._commands.run(["go", "mod", "tidy"], step="kubernetes", cwd=work, env=env)
            self._commands.go_build_into(
                out,
                [f"k8s.io/kubernetes/cmd/{c}" for c in KUBERNETES_COMMANDS],
                ["-trimpath", "-ldflags", version_ldflags(v.kubernetes)],
                digest=digest,
                step="kubernetes",
                cwd=work,
                env=env,
            )
        return out

    def build_go_binaries(self) -> Path:
        """kind, etcd, CoreDNS, the reference CNI plugins, pause, and the CNIs built with every
        offline set (flanneld: see :meth:`.BuildContext.shared_cni_recipes`)."""
        v = self.context.versions
        out = self.context.go_bin
        digest = self.context.go_digest()
        if is_current(out, digest):
            return out
        with self.context.step("kind, etcd, CoreDNS, flannel, CNI plugins, pause: go build"):
            env = self._commands.go_env()
            out.mkdir(parents=True, exist_ok=True)
            ldflags = ["-trimpath", "-ldflags", "-s -w"]

            def install(package: str, target: Path) -> None:
                self._commands.run(
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
            for recipe in self.context.shared_cni_recipes():
                self._build_shared(recipe, out, env)
            work = self.context.offline / "src" / f"etcd-{v.etcd}"
            work.mkdir(parents=True, exist_ok=True)
            (work / "go.mod").write_text(etcd_go_mod(v))
            (work / "etcd.go").write_text(
                '//go:build tools\n\npackage etcd\n\nimport _ "go.etcd.io/etcd/server/v3"\n'
            )
            self._commands.run(["go", "mod", "tidy"], step="go-binaries", cwd=work, env=env)
            self._commands.run(
                ["go", "build", *ldflags, "-o", str(out / "etcd"), "go.etcd.io/etcd/server/v3"],
                step="go-binaries",
                cwd=work,
                env=env,
            )
            pause_c = (
                self._commands.module_dir("k8s.io/kubernetes", v.kubernetes)
                / "build/pause/linux/pause.c"
            )
            self._commands.run(
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
            stamp(out, digest)
        return out

    def _build_shared(self, recipe: OfflineRecipe, out: Path, env: Mapping[str, str]) -> None:
        """A CNI built in the shared Go step (flanneld) through its wrapper module, into
        ``out``."""
        build = recipe.build
        work = self.context.offline / "src" / f"{recipe.recipe}-{recipe.version}"
        self._write_wrapper(recipe, work)
        self._commands.run(
            ["go", "build", *build.flags, "-o", str(out / build.binary), *build.packages],
            step="go-binaries",
            cwd=work,
            env=dict(env, **build.env),
        )

    def _write_wrapper(self, recipe: OfflineRecipe, work: Path) -> None:
        build = recipe.build
        module = (
            self._commands.module_dir(build.module, recipe.version) if build.reads_module else None
        )
        for relative, text in build.wrapper(recipe.version, module).items():
            path = work / relative
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)

    def build_cni(self, cni: str) -> Path:
        """``cni``'s commands in one ``go build`` (compilation shared between them) through
        the wrapper module its recipe declares; returns the bin directory."""
        recipe = cni_recipes()[cni]
        build = recipe.build
        digest = recipe_digest(*build.digest_inputs)
        out = self.cni_bin(cni)
        names = [package.rsplit("/", 1)[-1] for package in build.packages]
        if is_current(out, digest) and all((out / name).is_file() for name in names):
            return out
        what = f" of {len(names)} commands" if len(names) > 1 else ""
        with self.context.step(f"{recipe.recipe} {recipe.version}: go build{what}"):
            env = self._commands.go_env()
            work = self.context.offline / "src" / f"{recipe.recipe}-{recipe.version}"
            work.mkdir(parents=True, exist_ok=True)
            self._write_wrapper(recipe, work)
            # Main packages of a dependency: -mod=mod (from _go_env) lets the build complete
            # go.mod and go.sum.
            self._commands.go_build_into(
                out,
                list(build.packages),
                [*build.flags],
                digest=digest,
                step=recipe.recipe,
                cwd=work,
                env=dict(env, **build.env),
            )
        return out

    def build_traefik(self) -> Path:
        """Traefik's command, built with its own module directory (in the Go module cache) as
        the main module, since its go.mod has ``replace`` directives; and the Gateway API
        module whose CRDs go in before it. Returns the bin directory.

        The web UI embeds ``webui/static``, which holds a placeholder in the module: no npm
        build is needed.
        """
        v = self.context.versions
        digest = recipe_digest(_TRAEFIK_RECIPE, v.traefik, v.gateway_api)
        out = self.traefik_bin
        if is_current(out, digest) and (out / "traefik").is_file():
            return out
        with self.context.step(f"traefik {v.traefik}: go build"):
            self._commands.module_dir(GATEWAY_API_MODULE, v.gateway_api)
            module = self._commands.module_dir(TRAEFIK_MODULE, v.traefik)
            # The module cache is read-only: its own go.mod and go.sum must do.
            env = self._commands.module_go_env()
            self._commands.go_build_into(
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
        return self.context.kubernetes_bin

    def build_helm(self) -> Path:
        """helm (``go install``) into :attr:`helm_bin` unless one is there; returns the
        directory. Not stamped: the directory's stamp is the Kubernetes build's."""
        out = self.helm_bin
        if (out / "helm").is_file():
            return out
        with self.context.step(f"helm {self.context.versions.helm}: go install"):
            out.mkdir(parents=True, exist_ok=True)
            self._commands.run(
                [
                    "go",
                    "install",
                    "-trimpath",
                    "-ldflags",
                    "-s -w",
                    f"helm.sh/helm/v3/cmd/helm@{self.context.versions.helm}",
                ],
                step="helm",
                env=dict(self._commands.go_env(), GOBIN=str(out)),
            )
        return out
