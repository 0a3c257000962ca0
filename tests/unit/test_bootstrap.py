"""scripts/bootstrap.py, the README's two commands, run for real as a subprocess on a ``PATH``
of small stand-ins that record their calls: which installer it picks (uv, pipx, else
``python3 -m venv``, with ``python3-venv`` from apt when ensurepip is missing), what it asks
sudo for, that a second run reuses the virtualenv, and its one-line errors. The stand-ins are
there because the real installers would fetch nox from PyPI and apt would change the machine."""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
BOOTSTRAP = ROOT / "scripts" / "bootstrap.py"

NOBODY = 65534
"""Who runs the bootstrap in the tests of a user without root (when the tests run as root)."""

RECORD = 'printf "%s\\n" "$(basename "$0") $*" >> "$LOG"\n'

NOX = RECORD + 'printf "cwd %s\\n" "$PWD" >> "$LOG"\n'

MAKE_NOX = 'mkdir -p "$1" && cp "$FAKES/nox" "$1/nox"\n'

FAKES = {
    "nox": NOX,
    "uv": RECORD
    + """case "$1" in
venv) mkdir -p "$5/bin" ;;
pip) d=$(dirname "$5"); $make "$d" ;;
esac
""",
    "pipx": RECORD + 'printf "PIPX_HOME %s\\n" "$PIPX_HOME" >> "$LOG"; $make "$PIPX_BIN_DIR"\n',
    "sudo": RECORD + 'exec "$@"\n',
    "apt-get": RECORD + 'if [ "$1" = install ]; then : > "$STATE/python3-venv"; fi\n',
    # An interpreter for CNIBENCH_BOOTSTRAP_PYTHON: ensurepip only once "python3-venv" is
    # installed (by the apt-get above), `-m venv DIR` makes DIR/bin/python, whose
    # `-m pip install` puts nox there.
    "python3": RECORD
    + """case "$1" in
-c) case "$2" in *ensurepip*) [ -e "$STATE/python3-venv" ] || exit 1 ;; *) echo 3.99 ;; esac ;;
-m) mkdir -p "$3/bin" && cp "$FAKES/venv-python" "$3/bin/python" ;;
esac
""",
    "venv-python": RECORD + '$make "$(dirname "$0")"\n',
}

COREUTILS = ("mkdir", "cp", "dirname", "basename", "printf", "cat")


def _write_fakes(tmp: Path, present: tuple[str, ...]) -> tuple[Path, Path]:
    """A directory of every stand-in (``fakes``) and a ``PATH`` directory holding only
    ``present`` of them, plus the coreutils the stand-ins use."""
    fakes, path = tmp / "fakes", tmp / "bin"
    fakes.mkdir()
    path.mkdir()
    for name, body in FAKES.items():
        script = fakes / name
        script.write_text(f'#!/bin/sh\nmake="/bin/sh $FAKES/make-nox"\n{body}')
        script.chmod(0o755)
    (fakes / "make-nox").write_text(MAKE_NOX)
    for name in present:
        (path / name).symlink_to(fakes / name)
    for tool in COREUTILS:
        real = next(Path(d) / tool for d in ("/usr/bin", "/bin") if (Path(d) / tool).exists())
        (path / tool).symlink_to(real)
    return fakes, path


def _setup(tmp: Path, present: tuple[str, ...] = (), *, as_user: bool = False) -> None:
    """The stand-ins, with ``present`` of them on ``PATH``; everything writable by another user
    when ``as_user``."""
    for sub in ("state", "cache"):
        (tmp / sub).mkdir(exist_ok=True)
    _write_fakes(tmp, present)
    (tmp / "calls.log").touch(mode=0o666)
    if as_user:
        for directory in (tmp, *tmp.rglob("*")):
            if directory.is_dir() and not directory.is_symlink():
                directory.chmod(0o777)
        (tmp / "calls.log").chmod(0o666)


def _bootstrap(
    tmp: Path,
    *args: str,
    present: tuple[str, ...] = (),
    fake_python: bool = False,
    as_user: bool = False,
) -> tuple[subprocess.CompletedProcess[str], list[str]]:
    """Run the bootstrap with ``present`` stand-ins on ``PATH`` (set up on the first call),
    as root or, with ``as_user``, as nobody; its result and the calls recorded, in order."""
    if not (tmp / "fakes").exists():
        _setup(tmp, present, as_user=as_user)
    env = {
        "PATH": str(tmp / "bin"),
        "HOME": str(tmp / "home"),
        "CNIBENCH_CACHE": str(tmp / "cache"),
        "LOG": str(tmp / "calls.log"),
        "STATE": str(tmp / "state"),
        "FAKES": str(tmp / "fakes"),
    }
    if fake_python:
        env["CNIBENCH_BOOTSTRAP_PYTHON"] = str(tmp / "fakes" / "python3")
    user: dict[str, Any] = {}
    python = sys.executable
    if as_user and os.geteuid() == 0:
        user = {"user": NOBODY, "group": NOBODY, "extra_groups": []}
        python = _python_for_nobody()
    done = subprocess.run(
        [python, str(BOOTSTRAP), *args],
        env=env,
        cwd=tmp,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        **user,
    )
    log = tmp / "calls.log"
    return done, log.read_text().splitlines() if log.exists() else []


def _python_for_nobody() -> str:
    """An interpreter ≥ 3.11 that user nobody may run (this one may sit in root's home)."""
    for python in (sys.executable, "/usr/bin/python3"):
        try:
            check = subprocess.run(
                [python, "-c", "import sys; assert sys.version_info >= (3, 11)"],
                user=NOBODY,
                group=NOBODY,
                extra_groups=[],
                capture_output=True,
                check=False,
            )
        except OSError:  # not reachable by nobody
            continue
        if check.returncode == 0:
            return python
    pytest.skip("no Python >= 3.11 that user nobody can run")


def _version() -> str:
    return f"{sys.version_info.major}.{sys.version_info.minor}"


def test_uv_is_used_when_on_path(tmp_path: Path) -> None:
    done, calls = _bootstrap(tmp_path, "demo", present=("uv", "pipx"))
    venv = tmp_path / "cache" / f"bootstrap-venv-{_version()}"
    assert done.returncode == 0, done.stderr
    assert calls == [
        f"uv venv -q --python {sys.executable} {venv}",
        f"uv pip install -q --python {venv}/bin/python nox>=2024.4.15",
        "nox -s demo",
        f"cwd {ROOT}",
    ]


def test_pipx_is_used_when_there_is_no_uv(tmp_path: Path) -> None:
    done, calls = _bootstrap(tmp_path, "tests", present=("pipx",))
    venv = tmp_path / "cache" / f"bootstrap-venv-{_version()}"
    assert done.returncode == 0, done.stderr
    assert calls[:2] == [
        f"pipx install --python {sys.executable} nox>=2024.4.15",
        f"PIPX_HOME {venv}",
    ]
    assert calls[2:] == ["nox -s tests", f"cwd {ROOT}"]


def test_sessions_and_the_rest_reach_nox(tmp_path: Path) -> None:
    done, calls = _bootstrap(tmp_path, "lint", "typecheck", "--", "-k", "x", present=("uv",))
    assert done.returncode == 0, done.stderr
    assert "nox -s lint typecheck -- -k x" in calls


def test_a_second_run_reuses_the_virtualenv(tmp_path: Path) -> None:
    _bootstrap(tmp_path, "demo", present=("uv",))
    (tmp_path / "calls.log").unlink()
    done, calls = _bootstrap(tmp_path, "tests")
    assert done.returncode == 0, done.stderr
    assert calls == ["nox -s tests", f"cwd {ROOT}"]  # no installer ran


def test_a_half_made_virtualenv_is_made_again(tmp_path: Path) -> None:
    (tmp_path / "cache" / f"bootstrap-venv-{_version()}" / "bin").mkdir(parents=True)
    done, calls = _bootstrap(tmp_path, "demo", present=("uv",))
    assert done.returncode == 0, done.stderr
    assert calls[0].startswith("uv venv")


@pytest.mark.skipif(os.geteuid() != 0, reason="apt-get without sudo is what root does")
def test_root_without_ensurepip_installs_python3_venv_with_apt(tmp_path: Path) -> None:
    done, calls = _bootstrap(tmp_path, "demo", present=("apt-get",), fake_python=True)
    venv = tmp_path / "cache" / "bootstrap-venv-3.99"
    assert done.returncode == 0, done.stderr
    assert "python3-venv" in done.stdout
    assert calls == [
        "python3 -c import sys; print('%d.%d' % sys.version_info[:2])",
        "python3 -c import ensurepip",
        "apt-get update -q",
        "apt-get install -y -q --no-install-recommends python3-venv",
        "python3 -c import ensurepip",
        f"python3 -m venv {venv}",
        "python -m pip install -q --disable-pip-version-check nox>=2024.4.15",
        "nox -s demo",
        f"cwd {ROOT}",
    ]


@pytest.fixture
def shared_tmp() -> Iterator[Path]:
    """A temporary directory another user can reach (pytest's own is root's only, 0700)."""
    directory = Path(tempfile.mkdtemp(prefix="cnibench-bootstrap-"))
    directory.chmod(0o777)
    yield directory
    shutil.rmtree(directory)


def test_a_user_with_sudo_is_told_what_sudo_is_asked_for(shared_tmp: Path) -> None:
    tmp_path = shared_tmp
    done, calls = _bootstrap(
        tmp_path, "demo", present=("sudo", "apt-get"), fake_python=True, as_user=True
    )
    assert done.returncode == 0, done.stderr
    assert (
        "asking sudo for exactly: sudo apt-get update -q;"
        " sudo apt-get install -y -q --no-install-recommends python3-venv"
    ) in done.stdout
    sudo = [call for call in calls if call.startswith("sudo")]
    assert sudo == [
        "sudo apt-get update -q",
        "sudo apt-get install -y -q --no-install-recommends python3-venv",
    ]
    assert calls[-2:] == ["nox -s demo", f"cwd {ROOT}"]


def test_a_user_without_sudo_gets_the_command_to_run(shared_tmp: Path) -> None:
    tmp_path = shared_tmp
    done, calls = _bootstrap(tmp_path, "demo", present=("apt-get",), fake_python=True, as_user=True)
    assert done.returncode == 1
    assert done.stderr.count("\n") == 1, done.stderr
    assert (
        "as root run `apt-get update -q && apt-get install -y -q --no-install-recommends"
        in done.stderr
    )
    assert not any(call.startswith(("apt-get", "nox")) for call in calls)
    assert not (tmp_path / "cache" / "bootstrap-venv-3.99").exists()


@pytest.mark.parametrize(
    ("args", "message"),
    [((), "name the nox session"), (("--help",), "name the nox session")],
    ids=["nothing", "an-option-first"],
)
def test_usage_errors_are_one_line(tmp_path: Path, args: tuple[str, ...], message: str) -> None:
    done, _ = _bootstrap(tmp_path, *args)
    assert done.returncode == 1
    assert done.stderr.startswith(f"bootstrap: {message}")
    assert done.stderr.count("\n") == 1


def test_a_failing_installer_is_one_line_and_leaves_nothing(tmp_path: Path) -> None:
    _setup(tmp_path, ("uv",))
    uv = tmp_path / "fakes" / "uv"
    uv.write_text("#!/bin/sh\necho 'error: no network' >&2\nexit 2\n")
    uv.chmod(uv.stat().st_mode | stat.S_IXUSR)
    done, _ = _bootstrap(tmp_path, "demo")
    assert done.returncode == 1
    assert done.stderr.splitlines()[-1].startswith("bootstrap: `uv venv")
    assert "Traceback" not in done.stderr
    assert not (tmp_path / "cache" / f"bootstrap-venv-{_version()}").exists()
