#!/usr/bin/env python3
"""Run nox sessions from a stock Debian or Ubuntu that has only ``python3``: the README's two
commands (``python3 scripts/bootstrap.py demo``, ``python3 scripts/bootstrap.py tests``).

Usage: ``python3 scripts/bootstrap.py SESSION... [NOX ARGUMENTS]``. The arguments up to the
first one starting with ``-`` are sessions (``nox -s SESSION...``); the rest go to nox as given
(``-- tests/unit -k docs`` reaches the session as its posargs).

Nox lives in a virtualenv of its own, outside the repository and outside the system Python:
``$CNIBENCH_CACHE``, else ``$XDG_CACHE_HOME/cnibench``, else ``~/.cache/cnibench``, then
``bootstrap-venv-<major.minor>`` (one per Python version, so CI can cache it by version). It is
made once, with the first of these found:

1. ``uv`` on ``PATH``: ``uv venv`` and ``uv pip install nox``;
2. ``pipx`` on ``PATH``: ``pipx install nox`` with ``PIPX_HOME`` in that directory;
3. ``python3 -m venv`` and its pip. Debian and Ubuntu ship ``ensurepip``, which that needs, in
   the ``python3-venv`` package: when it is missing the bootstrap installs it with ``apt-get``
   as root, or with ``sudo`` after saying which two commands it asks sudo for; with neither it
   names the command to run and exits 1.

Later runs find ``bin/nox`` there and a stamp written once the install succeeded, and go
straight to nox (tens of milliseconds). ``CNIBENCH_BOOTSTRAP_PYTHON`` names another interpreter
to make the virtualenv from (default: the one running this script). Errors are one line on
stderr and exit 1. Standard library only, Python >= 3.11.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

NOX_REQUIREMENT = "nox>=2024.4.15"
"""What goes into the virtualenv (the noxfile needs ``session.create_tmp`` and ``session.bin``,
which every release since 2024 has)."""

STAMP = ".cnibench-bootstrap"
"""File written in the virtualenv's directory once nox is installed there (names the
installer): a directory without it is a half-made one, made again."""

VENV_PACKAGE = "python3-venv"
"""Debian's and Ubuntu's package holding ``ensurepip`` (``python3 -m venv`` fails without it)."""

APT_COMMANDS = (
    ("apt-get", "update", "-q"),
    ("apt-get", "install", "-y", "-q", "--no-install-recommends", VENV_PACKAGE),
)
"""How :data:`VENV_PACKAGE` is installed: as root directly, else each through ``sudo``."""


class BootstrapError(Exception):
    """A failure the user can act on: printed as one line, exit status 1."""


@dataclass(frozen=True)
class Invocation:
    """What to run: ``sessions`` (``nox -s``) and the arguments after them, passed as given."""

    sessions: tuple[str, ...]
    rest: tuple[str, ...]


def parse_arguments(argv: list[str]) -> Invocation:
    """Split ``argv`` at the first argument that starts with ``-``.

    Raises
    ------
    BootstrapError
        If no session is named.
    """
    split = next((i for i, arg in enumerate(argv) if arg.startswith("-")), len(argv))
    sessions = tuple(argv[:split])
    if not sessions:
        raise BootstrapError(
            "name the nox session(s) to run, e.g. `python3 scripts/bootstrap.py demo`"
            " (then any nox arguments, e.g. `tests -- tests/unit`)"
        )
    return Invocation(sessions, tuple(argv[split:]))


def cache_root(env: dict[str, str]) -> Path:
    """cnibench's cache directory, as the rest of cnibench finds it (``$CNIBENCH_CACHE``,
    ``$XDG_CACHE_HOME/cnibench``, ``~/.cache/cnibench``)."""
    if env.get("CNIBENCH_CACHE"):
        return Path(env["CNIBENCH_CACHE"])
    xdg = env.get("XDG_CACHE_HOME")
    base = Path(xdg) if xdg else Path(env.get("HOME") or Path.home()) / ".cache"
    return base / "cnibench"


def python_version(python: str) -> str:
    """``major.minor`` of the interpreter ``python`` (asked only when it is not this one)."""
    if python == sys.executable:
        return f"{sys.version_info.major}.{sys.version_info.minor}"
    try:
        done = subprocess.run(
            [python, "-c", "import sys; print('%d.%d' % sys.version_info[:2])"],
            capture_output=True,
            text=True,
            check=True,
        )
    except (OSError, subprocess.CalledProcessError) as exc:
        raise BootstrapError(f"CNIBENCH_BOOTSTRAP_PYTHON={python} does not run ({exc})") from exc
    return done.stdout.strip()


def choose_installer(path: str | None) -> str:
    """``uv``, ``pipx`` or ``venv``: the first of uv and pipx found on ``path``, else the
    interpreter's own ``venv`` module."""
    for tool in ("uv", "pipx"):
        if shutil.which(tool, path=path):
            return tool
    return "venv"


def run(command: list[str], *, env: dict[str, str] | None = None) -> None:
    """Run ``command`` (its output shown), raising :class:`BootstrapError` if it fails."""
    try:
        done = subprocess.run(command, env=env, check=False)
    except OSError as exc:
        raise BootstrapError(f"`{' '.join(command)}` did not start: {exc.strerror}") from exc
    if done.returncode != 0:
        raise BootstrapError(f"`{' '.join(command)}` failed (exit {done.returncode})")


def has_ensurepip(python: str) -> bool:
    """Whether ``python -m venv`` can put pip in a virtualenv (Debian: ``python3-venv``)."""
    try:
        probe = subprocess.run([python, "-c", "import ensurepip"], capture_output=True)
    except OSError:
        return False
    return probe.returncode == 0


def install_venv_package(path: str | None) -> None:
    """Install :data:`VENV_PACKAGE` with apt: as root, else through sudo after saying so.

    Raises
    ------
    BootstrapError
        Naming the command to run, when this is neither root nor has sudo.
    """
    plain = " && ".join(" ".join(command) for command in APT_COMMANDS)
    if os.geteuid() == 0:
        print(f"bootstrap: python3 -m venv needs {VENV_PACKAGE}; running: {plain}", flush=True)
        for command in APT_COMMANDS:
            run(list(command), env={**os.environ, "DEBIAN_FRONTEND": "noninteractive"})
        return
    if not shutil.which("sudo", path=path):
        raise BootstrapError(
            f"python3 -m venv needs the {VENV_PACKAGE} package and this is not root and has no"
            f" sudo: as root run `{plain}` (or install uv or pipx), then run this again"
        )
    asked = "; ".join(f"sudo {' '.join(command)}" for command in APT_COMMANDS)
    print(
        f"bootstrap: python3 -m venv needs the {VENV_PACKAGE} package (Debian's ensurepip);"
        f" asking sudo for exactly: {asked}",
        flush=True,
    )
    for command in APT_COMMANDS:
        run(["sudo", *command])  # no debconf question: python3-venv asks none


def make_venv(directory: Path, python: str, installer: str, path: str | None) -> None:
    """Make ``directory`` a home for nox (``directory/bin/nox``) with ``installer``."""
    print(f"bootstrap: installing nox into {directory} ({installer})", flush=True)
    if installer == "uv":
        run(["uv", "venv", "-q", "--python", python, str(directory)])
        bin_python = str(directory / "bin" / "python")
        run(["uv", "pip", "install", "-q", "--python", bin_python, NOX_REQUIREMENT])
    elif installer == "pipx":
        # pipx keeps its virtualenvs under PIPX_HOME and links their commands into
        # PIPX_BIN_DIR: both in ``directory``, so nox is ``directory/bin/nox`` as with the others
        # and nothing of pipx's own home is touched.
        env = {
            **os.environ,
            "PIPX_HOME": str(directory),
            "PIPX_BIN_DIR": str(directory / "bin"),
            "PIPX_MAN_DIR": str(directory / "man"),
        }
        run(["pipx", "install", "--python", python, NOX_REQUIREMENT], env=env)
    else:
        if not has_ensurepip(python):
            install_venv_package(path)
            if not has_ensurepip(python):
                raise BootstrapError(
                    f"{VENV_PACKAGE} is installed but {python} still has no ensurepip: install"
                    " the venv package of that Python (or uv or pipx), then run this again"
                )
        run([python, "-m", "venv", str(directory)])
        bin_python = str(directory / "bin" / "python")
        pip_install = [bin_python, "-m", "pip", "install", "-q", "--disable-pip-version-check"]
        run([*pip_install, NOX_REQUIREMENT])
    if not os.access(directory / "bin" / "nox", os.X_OK):
        raise BootstrapError(f"{installer} ran but left no {directory / 'bin' / 'nox'}")
    (directory / STAMP).write_text(f"{installer}\n")


def nox_executable(env: dict[str, str]) -> Path:
    """``bin/nox`` of the bootstrap's virtualenv, made first if it is not there yet."""
    python = env.get("CNIBENCH_BOOTSTRAP_PYTHON") or sys.executable
    directory = cache_root(env) / f"bootstrap-venv-{python_version(python)}"
    nox = directory / "bin" / "nox"
    if (directory / STAMP).is_file() and os.access(nox, os.X_OK):
        return nox
    if directory.exists():  # an interrupted install: start again
        shutil.rmtree(directory)
    directory.parent.mkdir(parents=True, exist_ok=True)
    path = env.get("PATH")
    try:
        make_venv(directory, python, choose_installer(path), path)
    except BaseException:
        shutil.rmtree(directory, ignore_errors=True)
        raise
    return nox


def main(argv: list[str]) -> int:
    """Make (or reuse) nox's virtualenv, then replace this process with ``nox -s ...``."""
    try:
        invocation = parse_arguments(argv)
        nox = nox_executable(dict(os.environ))
        os.chdir(REPO)  # the noxfile's directory, wherever this was started from
        command = [str(nox), "-s", *invocation.sessions, *invocation.rest]
        os.execv(command[0], command)
    except BootstrapError as exc:
        print(f"bootstrap: {exc}", file=sys.stderr)
        return 1
    except OSError as exc:
        print(f"bootstrap: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
    return 0  # not reached: execv does not return


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
