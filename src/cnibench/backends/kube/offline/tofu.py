"""OpenTofu and the azurerm provider built from their Go modules, and ``terraform/aks`` checked
against the provider's real schema with no network (``nox -s aks-validate``).

The provider is laid out as a filesystem mirror (the unpacked layout,
``<mirror>/<host>/hashicorp/azurerm/<version>/linux_amd64/terraform-provider-azurerm_v<version>``)
and named in a CLI configuration (``TF_CLI_CONFIG_FILE``) whose ``provider_installation`` has
that mirror and no ``direct`` block, so ``tofu init`` never asks a registry. Both builds are
cached by version under ``<cache>/offline`` next to a recipe stamp, like the rest of the offline
builder (:mod:`.core`), whose module download, command runner and Go build they reuse.

Planning is pure (:func:`cli_config`, :func:`mirror_binary`, :func:`provider_version`,
:func:`check_argv`); :class:`TofuBuilds` builds and :func:`check_module` runs ``tofu``.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from cnibench.backends.kube.offline.core import BuildContext, is_current
from cnibench.backends.kube.offline.recipes import recipe_digest
from cnibench.errors import ProvisioningError

__all__ = [
    "AZURERM_MODULE",
    "CHECK_COMMANDS",
    "TOFU_MODULE",
    "ModuleCheck",
    "StepResult",
    "TofuBuilds",
    "TofuToolchain",
    "TofuVersions",
    "check_argv",
    "check_module",
    "cli_config",
    "mirror_binary",
    "provider_version",
]

TOFU_MODULE = "github.com/opentofu/opentofu"
AZURERM_MODULE = "github.com/hashicorp/terraform-provider-azurerm"
PROVIDER_HOST = "registry.opentofu.org"
"""Where OpenTofu resolves ``source = "hashicorp/azurerm"`` (Terraform would say
``registry.terraform.io``): the mirror must use the host the lock file will name."""
PLATFORM = "linux_amd64"

# Bumped when the way a build runs changes without its version changing.
_TOFU_RECIPE = "tofu-1"
_AZURERM_RECIPE = "azurerm-1"
_AZURERM_TIMEOUT = 4 * 3600.0
"""The provider is one of the largest Go programs there is: over an hour cold on 2 busy cores."""

CHECK_COMMANDS = ("init", "validate", "test")
"""What :func:`check_module` runs, in order; it stops at the first that fails."""


@dataclass(frozen=True)
class TofuVersions:
    """The Go module versions built.

    Attributes
    ----------
    tofu:
        OpenTofu's release (MPL-2.0; Terraform itself is not open source any more).
    azurerm:
        The provider module's version. The module proxy serves only pseudo-versions of its
        main branch, whose Go module path never took a major-version suffix (hence ``v1.44``);
        the provider's own release number is read from the module (:func:`provider_version`).
    """

    tofu: str = "v1.12.6"
    azurerm: str = "v1.44.1-0.20260824201233-fae580791926"


@dataclass(frozen=True)
class TofuToolchain:
    """A built ``tofu`` and the CLI configuration that installs azurerm from the mirror.

    Attributes
    ----------
    tofu:
        The ``tofu`` binary.
    cli_config:
        File for ``TF_CLI_CONFIG_FILE``.
    azurerm_version:
        The provider release the mirror holds (e.g. ``5.2.0``).
    """

    tofu: Path
    cli_config: Path
    azurerm_version: str

    def environment(self, base: Mapping[str, str]) -> dict[str, str]:
        """``base`` plus what makes ``tofu`` use only the mirror and never prompt."""
        env = dict(base)
        env.update(
            TF_CLI_CONFIG_FILE=str(self.cli_config),
            TF_IN_AUTOMATION="1",
            TF_INPUT="0",
            CHECKPOINT_DISABLE="1",
        )
        # A plugin cache directory would be a second place providers come from.
        env.pop("TF_PLUGIN_CACHE_DIR", None)
        return env


_RELEASE_RE = re.compile(r"^\d+\.\d+\.\d+$")


def provider_version(version_file: str) -> str:
    """The provider's release number from its module's ``version/VERSION`` file.

    Raises
    ------
    cnibench.errors.ProvisioningError
        The file does not hold a plain ``MAJOR.MINOR.PATCH``.

    Examples
    --------
    >>> provider_version("5.2.0\\n")
    '5.2.0'
    """
    text = version_file.strip()
    if not _RELEASE_RE.match(text):
        raise ProvisioningError(f"azurerm's version/VERSION holds {text[:40]!r}, not X.Y.Z")
    return text


def mirror_binary(
    mirror: Path, version: str, *, host: str = PROVIDER_HOST, platform: str = PLATFORM
) -> Path:
    """Where azurerm ``version`` goes in an unpacked filesystem mirror rooted at ``mirror``."""
    return (
        mirror
        / host
        / "hashicorp"
        / "azurerm"
        / version
        / platform
        / f"terraform-provider-azurerm_v{version}"
    )


def cli_config(mirror: Path) -> str:
    """A CLI configuration installing every provider from ``mirror`` only.

    There is no ``direct`` block: a provider the mirror lacks fails ``tofu init`` at once
    instead of being fetched from a registry.
    """
    path = str(mirror).replace("\\", "\\\\").replace('"', '\\"')
    return (
        "# Written by cnibench (nox -s aks-validate): providers come only from the local mirror.\n"
        "provider_installation {\n"
        "  filesystem_mirror {\n"
        f'    path    = "{path}"\n'
        '    include = ["*/*/*"]\n'
        "  }\n"
        "}\n"
    )


def check_argv(tofu: Path, command: str) -> list[str]:
    """The ``tofu`` command line of one step of :func:`check_module` (``init``, ``validate``,
    ``test``)."""
    if command not in CHECK_COMMANDS:
        raise ValueError(f"unknown check step {command!r}; expected one of {CHECK_COMMANDS}")
    extra = {"init": ["-input=false", "-backend=false"]}.get(command, [])
    return [str(tofu), command, "-no-color", *extra]


@dataclass(frozen=True)
class StepResult:
    """One ``tofu`` command of a check.

    Attributes
    ----------
    command:
        ``init``, ``validate`` or ``test``.
    argv:
        The command line.
    returncode:
        Its exit status.
    output:
        Its stdout and stderr, interleaved.
    seconds:
        Wall time (s).
    """

    command: str
    argv: tuple[str, ...]
    returncode: int
    output: str
    seconds: float


@dataclass(frozen=True)
class ModuleCheck:
    """What :func:`check_module` found.

    Attributes
    ----------
    workdir:
        The copy of the module the commands ran in (it keeps ``.terraform`` and the lock file).
    steps:
        The commands run, in order; the last is the first that failed, if any did.
    """

    workdir: Path
    steps: tuple[StepResult, ...]

    @property
    def ok(self) -> bool:
        """Whether every step of :data:`CHECK_COMMANDS` ran and passed."""
        return len(self.steps) == len(CHECK_COMMANDS) and all(s.returncode == 0 for s in self.steps)

    @property
    def failed(self) -> StepResult | None:
        """The step that failed, or ``None``."""
        return next((s for s in self.steps if s.returncode != 0), None)


def check_module(
    toolchain: TofuToolchain,
    module: Path,
    workdir: Path,
    *,
    environ: Mapping[str, str] | None = None,
    timeout: float = 600.0,
) -> ModuleCheck:
    """``tofu init``, ``validate`` and ``test`` of a copy of ``module`` made at ``workdir``
    (emptied first), so the module itself gains no ``.terraform`` or lock file.

    ``tofu test`` runs the module's ``tests/*.tftest.hcl``; with ``mock_provider`` they plan
    against the provider's schema without credentials.
    """
    shutil.rmtree(workdir, ignore_errors=True)
    shutil.copytree(
        module, workdir, ignore=shutil.ignore_patterns(".terraform", ".terraform.lock.hcl")
    )
    env = toolchain.environment(os.environ if environ is None else environ)
    steps: list[StepResult] = []
    for command in CHECK_COMMANDS:
        step = _check_step(toolchain, command, workdir, env, timeout)
        steps.append(step)
        if step.returncode != 0:
            break
    return ModuleCheck(workdir, tuple(steps))


def _check_step(
    toolchain: TofuToolchain, command: str, workdir: Path, env: Mapping[str, str], timeout: float
) -> StepResult:
    """One ``tofu COMMAND`` in ``workdir``, with how long it took.

    Raises
    ------
    cnibench.errors.ProvisioningError
        tofu could not be run or did not end within ``timeout`` seconds.
    """
    argv = check_argv(toolchain.tofu, command)
    start = time.monotonic()
    try:
        done = subprocess.run(
            argv,
            cwd=workdir,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            timeout=timeout,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise ProvisioningError(f"tofu {command} in {workdir} did not run: {exc}") from exc
    return StepResult(command, tuple(argv), done.returncode, done.stdout, time.monotonic() - start)


class TofuBuilds:
    """Builds ``tofu`` and azurerm (or finds them current in the cache) and lays out the mirror,
    on a :class:`~cnibench.backends.kube.offline.core.BuildContext` of its own.

    Parameters
    ----------
    tofu_versions:
        What to build.
    root, log, environ:
        As for :class:`~cnibench.backends.kube.offline.builder.OfflineBuilder`.
    """

    def __init__(
        self,
        *,
        tofu_versions: TofuVersions | None = None,
        root: Path | None = None,
        log: Callable[[str], None] | None = None,
        environ: Mapping[str, str] | None = None,
    ) -> None:
        log = log or (lambda line: print(f"[tofu] {line}", flush=True))
        self.context = BuildContext.create(root=root, log=log, environ=environ)
        self._commands = self.context.commands
        self.tofu_versions = tofu_versions or TofuVersions()

    @property
    def offline(self) -> Path:
        """``<cache>/offline``, where the builds and the mirror are kept."""
        return self.context.offline

    @property
    def mirror(self) -> Path:
        """Root of the filesystem mirror (and of the CLI configuration beside it)."""
        return self.offline / "tofu-mirror"

    def build_tofu(self) -> Path:
        """``tofu`` (``./cmd/tofu``, built in the module's directory: its go.mod replaces hcl);
        returns the binary."""
        version = self.tofu_versions.tofu
        flags = ["-trimpath", "-ldflags", "-s -w -X github.com/opentofu/opentofu/version.dev=no"]
        digest = recipe_digest(_TOFU_RECIPE, version, flags)
        out = self.offline / "tofu" / version / "bin"
        if is_current(out, digest) and (out / "tofu").is_file():
            return out / "tofu"
        with self.context.step(f"opentofu {version}: go build"):
            module = self._commands.module_dir(TOFU_MODULE, version)
            self._commands.go_build_into(
                out,
                [f"{TOFU_MODULE}/cmd/tofu"],
                flags,
                digest=digest,
                step="tofu",
                cwd=module,
                env=self._commands.module_go_env(),
            )
        return out / "tofu"

    def build_azurerm(self) -> tuple[Path, str]:
        """The azurerm provider (its module's root package, built in the module's directory),
        stamped with the release its ``version/VERSION`` names; returns the binary and that
        release."""
        module_version = self.tofu_versions.azurerm
        out = self.offline / "azurerm" / module_version / "bin"
        binary = out / "terraform-provider-azurerm"
        release_file = out / "provider-version"
        if release_file.is_file():
            release = release_file.read_text().strip()
            if is_current(out, self._azurerm_digest(release)) and binary.is_file():
                return binary, release
        module = self._commands.module_dir(AZURERM_MODULE, module_version)
        release = provider_version((module / "version" / "VERSION").read_text())
        digest = self._azurerm_digest(release)
        if is_current(out, digest) and binary.is_file():
            return binary, release
        with self.context.step(f"azurerm {release} ({module_version}): go build"):
            self._commands.go_build_into(
                out,
                [AZURERM_MODULE],
                self._azurerm_flags(release),
                digest=digest,
                step="azurerm",
                cwd=module,
                env=self._commands.module_go_env(),
                timeout=_AZURERM_TIMEOUT,
            )
            release_file.write_text(release + "\n")
        return binary, release

    def _azurerm_flags(self, release: str) -> list[str]:
        # The provider reports this version to tofu (it is "dev" unless set at link time).
        stamp = f"{AZURERM_MODULE}/version.ProviderVersion={release}"
        return ["-trimpath", "-ldflags", f"-s -w -X {stamp}"]

    def _azurerm_digest(self, release: str) -> str:
        return recipe_digest(
            _AZURERM_RECIPE, self.tofu_versions.azurerm, self._azurerm_flags(release)
        )

    def toolchain(self) -> TofuToolchain:
        """Both builds (reused when current), the mirror and its CLI configuration."""
        tofu = self.build_tofu()
        provider, release = self.build_azurerm()
        target = mirror_binary(self.mirror, release)
        target.parent.mkdir(parents=True, exist_ok=True)
        if not (target.is_symlink() and target.resolve() == provider.resolve()):
            # A link, not a copy: the provider is hundreds of MB, and a rebuild replaces it
            # in place.
            staging = target.with_name(target.name + ".new")
            staging.unlink(missing_ok=True)
            staging.symlink_to(provider)
            os.replace(staging, target)
        config = self.mirror / "tofu.tfrc"
        config.write_text(cli_config(self.mirror))
        return TofuToolchain(tofu, config, release)


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m cnibench.backends.kube.offline.tofu [MODULE]``: build (or reuse) the
    toolchain, then check ``MODULE`` (``init``, ``validate``, ``test``) in a copy; exit 1 if a
    step fails. Without ``MODULE``, only build.
    """
    parser = argparse.ArgumentParser(
        prog="python -m cnibench.backends.kube.offline.tofu",
        description="Check a Terraform module with OpenTofu and azurerm built from Go modules.",
    )
    parser.add_argument(
        "module", type=Path, nargs="?", metavar="MODULE", help="module directory to check"
    )
    parser.add_argument(
        "--workdir", type=Path, metavar="DIR", help="where the copy goes (default: in the cache)"
    )
    args = parser.parse_args(argv)
    builds = TofuBuilds()
    toolchain = builds.toolchain()
    print(f"[tofu] {toolchain.tofu} with azurerm {toolchain.azurerm_version} from the mirror")
    if args.module is None:
        return 0
    workdir = args.workdir or builds.offline / "tofu-check" / args.module.resolve().name
    check = check_module(toolchain, args.module, workdir)
    for step in check.steps:
        status = "ok" if step.returncode == 0 else f"FAILED (exit {step.returncode})"
        print(f"$ {' '.join(step.argv[1:])}  # {step.seconds:.1f} s, {status}")
        print(step.output.rstrip())
    return 0 if check.ok else 1


if __name__ == "__main__":
    sys.exit(main())
