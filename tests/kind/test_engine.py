"""The private engine for real: ``cnibench engine up|down|status`` and ``cnibench clean`` run a
real dockerd as root, and real containers run in it from an image made without any registry
(``docker import`` of a statically linked program built here with gcc).

Every engine here has a name of its own (``cbtest<hex>``) and a data root under ``tmp_path``,
so a developer's default engine (``cnibench``), which may be building images at the same time,
is never stopped or touched. The ``cnibench clean`` test moves the run root as well
(``CNIBENCH_ENGINE_RUN``), since ``clean`` stops every engine it finds there.
"""

from __future__ import annotations

import os
import re
import secrets
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

import pytest

from cnibench.engine import lacks_capability

from . import kind_support

PROGRAM = r"""
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
/* No argument: say hello. One argument: sleep that many seconds (a container that stays up). */
int main(int argc, char **argv) {
    if (argc > 1) { sleep(atoi(argv[1])); return 0; }
    printf("hello from pid %d\n", (int)getpid());
    return 0;
}
"""
IMAGE = "cbtest/hello:1"
DEFAULT_SOCKETS = (Path("/var/run/docker.sock"), Path("/run/docker.sock"))


@dataclass(frozen=True)
class Engine:
    """A private engine started through the CLI for one test or module."""

    name: str
    env: dict[str, str]
    """Environment of every command: CNIBENCH_ENGINE_DATA (and _RUN) set, DOCKER_HOST not."""
    up_stdout: str
    docker_host: str
    run_dir: Path
    data_root: Path

    @property
    def docker_env(self) -> dict[str, str]:
        """Environment for the docker CLI: this engine's DOCKER_HOST."""
        return {**self.env, "DOCKER_HOST": self.docker_host}

    def pid(self) -> int:
        return int((self.run_dir / "dockerd.pid").read_text())


def _why_not() -> str:
    if os.geteuid() != 0:
        return "the private engine needs root"
    missing = [
        tool for tool in ("dockerd", "containerd", "runc", "docker", "gcc") if not _which(tool)
    ]
    if missing:
        return f"missing {', '.join(missing)} (apt-get install docker.io containerd runc gcc)"
    return ""


def _which(tool: str) -> str | None:
    return shutil.which(tool, path=os.environ.get("PATH", "") + ":/usr/sbin:/sbin")


def cnibench(
    *args: str, env: Mapping[str, str], timeout: float = 180.0, check: bool = True
) -> subprocess.CompletedProcess[str]:
    """The tier's CLI runner, with the shorter timeout engine commands need."""
    return kind_support.cnibench(*args, env=env, timeout=timeout, check=check)


def docker(
    *args: str, engine: Engine, check: bool = True, stdin: bytes | None = None
) -> subprocess.CompletedProcess[str]:
    raw = subprocess.run(
        ["docker", *args],
        env=engine.docker_env,
        input=stdin,
        capture_output=True,
        timeout=120,
        check=False,
    )
    done = subprocess.CompletedProcess(
        raw.args, raw.returncode, raw.stdout.decode(), raw.stderr.decode(errors="replace")
    )
    if check and done.returncode != 0:
        pytest.fail(f"docker {' '.join(args)} exited {done.returncode}: {done.stderr.strip()}")
    return done


def _base_env(tmp: Path, **extra: str) -> dict[str, str]:
    strip = ("DOCKER_HOST", "KUBECONFIG", "CNIBENCH_ENGINE_DATA", "CNIBENCH_ENGINE_RUN")
    env = {k: v for k, v in os.environ.items() if k not in strip}
    return {**env, "CNIBENCH_ENGINE_DATA": str(tmp / "data"), **extra}


def _start(tmp: Path, **extra: str) -> Engine:
    name = f"cbtest{secrets.token_hex(4)}"
    env = _base_env(tmp, **extra)
    up = cnibench("engine", "up", "--name", name, env=env)
    run_root = Path(extra.get("CNIBENCH_ENGINE_RUN", "/run/cnibench-engine"))
    docker_host = up.stdout.strip().removeprefix("export DOCKER_HOST=")
    return Engine(name, env, up.stdout, docker_host, run_root / name, tmp / "data")


def _stop(engine: Engine) -> None:
    cnibench("engine", "down", "--name", engine.name, "--purge", env=engine.env, check=False)


def _gone(pid: int, timeout: float = 10.0) -> bool:
    """Whether ``pid`` has exited (a zombie waiting for its reaper counts as exited)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[-1].split()[0]
        except OSError:
            return True
        if state in ("Z", "X"):
            return True
        time.sleep(0.1)
    return False


def _mounts_under(*roots: Path) -> list[str]:
    points = [line.split()[4] for line in Path("/proc/self/mountinfo").read_text().splitlines()]
    return [p for p in points for r in roots if p == str(r) or p.startswith(f"{r}/")]


def _firewall() -> dict[str, list[str]]:
    """Host rules of iptables-save and ip6tables-save: comments dropped, counters zeroed."""
    rules = {}
    for tool in ("iptables-save", "ip6tables-save"):
        if not _which(tool):
            continue
        out = subprocess.run([tool], capture_output=True, text=True, check=True).stdout
        rules[tool] = [
            re.sub(r"\[\d+:\d+\]", "[0:0]", line)
            for line in out.splitlines()
            if line.strip() and not line.startswith("#")
        ]
    return rules


@pytest.fixture(scope="module")
def image_tar(tmp_path_factory: pytest.TempPathFactory) -> bytes:
    """A tarball of a root filesystem holding one static program, ``/hello``."""
    if _why_not():
        pytest.skip(_why_not())
    work = tmp_path_factory.mktemp("hello")
    (work / "hello.c").write_text(PROGRAM)
    root = work / "root"
    root.mkdir()
    subprocess.run(
        ["gcc", "-static", "-Os", "-o", str(root / "hello"), str(work / "hello.c")], check=True
    )
    return subprocess.run(
        ["tar", "-C", str(root), "-c", "."], capture_output=True, check=True
    ).stdout


@pytest.fixture(scope="module")
def before() -> dict[str, object]:
    """The host's firewall rules and default sockets before any engine of this module started."""
    return {"firewall": _firewall(), "sockets": [p for p in DEFAULT_SOCKETS if p.exists()]}


@pytest.fixture(scope="module")
def engine(
    tmp_path_factory: pytest.TempPathFactory, image_tar: bytes, before: dict[str, object]
) -> Iterator[Engine]:
    """One engine for the module, with the hello image imported."""
    started = _start(tmp_path_factory.mktemp("engine"))
    try:
        docker("import", "-", IMAGE, engine=started, stdin=image_tar)
        yield started
    finally:
        _stop(started)


def test_up_prints_only_the_export_line(engine: Engine) -> None:
    assert engine.up_stdout == (
        f"export DOCKER_HOST=unix:///run/cnibench-engine/{engine.name}/docker.sock\n"
    )


def test_up_again_returns_the_running_engine(engine: Engine) -> None:
    pid = engine.pid()
    again = cnibench("engine", "up", "--name", engine.name, env=engine.env)
    assert again.stdout == engine.up_stdout
    assert engine.pid() == pid


def test_docker_answers_with_a_server_version_and_our_data_root(engine: Engine) -> None:
    version = docker("version", "--format", "{{.Server.Version}}", engine=engine).stdout
    assert re.match(r"^\d+\.\d+", version.strip()), version
    root = docker("info", "--format", "{{.DockerRootDir}}", engine=engine).stdout.strip()
    assert Path(root) == engine.data_root


def test_a_container_runs_without_network_or_registry(engine: Engine) -> None:
    done = docker(
        "run", "--rm", "--pull", "never", "--network", "none", IMAGE, "/hello", engine=engine
    )
    assert done.stdout == "hello from pid 1\n"


def test_a_privileged_container_runs(engine: Engine) -> None:
    done = docker(
        "run", "--rm", "--pull", "never", "--network", "none", "--privileged", IMAGE, "/hello",
        engine=engine,
    )  # fmt: skip
    assert done.stdout == "hello from pid 1\n"


@pytest.mark.skipif(not lacks_capability(), reason="CAP_SYS_RESOURCE is there: no runc shim")
def test_without_the_shim_a_privileged_container_fails_here(engine: Engine) -> None:
    # The proof that the shim is what makes the test above pass on this machine.
    done = docker(
        "run", "--rm", "--pull", "never", "--network", "none", "--privileged", "--runtime",
        "runc", IMAGE, "/hello",
        engine=engine, check=False,
    )  # fmt: skip
    assert done.returncode != 0
    assert "caps" in done.stderr


def test_privileged_exec_in_a_running_container(engine: Engine) -> None:
    name = f"cbtest-exec-{secrets.token_hex(3)}"
    docker("run", "-d", "--name", name, "--pull", "never", "--network", "none", IMAGE,
           "/hello", "300", engine=engine)  # fmt: skip
    try:
        done = docker("exec", "--privileged", name, "/hello", engine=engine)
        assert done.stdout.startswith("hello from pid ")
    finally:
        docker("rm", "-f", name, engine=engine, check=False)


def test_host_firewall_and_default_socket_are_untouched(
    engine: Engine, before: dict[str, object]
) -> None:
    docker("run", "--rm", "--pull", "never", "--network", "none", IMAGE, "/hello", engine=engine)
    assert _firewall() == before["firewall"]
    assert [p for p in DEFAULT_SOCKETS if p.exists()] == before["sockets"]


def test_status_lists_the_engine_and_its_data_size(engine: Engine) -> None:
    out = cnibench("engine", "status", env=engine.env).stdout
    line = next(line for line in out.splitlines() if line.startswith(f"{engine.name}:"))
    assert f"running (pid {engine.pid()}), answers at {engine.docker_host}" in line
    # The data root holds at least the imported image: a static program of hundreds of KiB.
    size = re.search(r"; data ([0-9.]+) (B|KiB|MiB|GiB)$", line)
    assert size is not None, line
    assert size.group(2) in ("MiB", "GiB") or (
        size.group(2) == "KiB" and float(size.group(1)) > 100
    )


def test_prune_removes_only_stale_cnibench_tags_and_keeps_one_a_container_uses(
    engine: Engine,
) -> None:
    """Old versions of cnibench's images go; current ones, a user's own and one a container
    still runs from stay (the images are tags of the hello image: only names matter here)."""
    from cnibench.backends.kube.images import OFFLINE_IMAGES

    current = OFFLINE_IMAGES.tools
    stale, in_use = (
        "localhost/cnibench-tools:offline-0",
        "localhost/cnibench-flannel:v0.1-offline-0",
    )
    users = "localhost/someone-else:1"
    for tag in (current, stale, in_use, users):
        docker("tag", IMAGE, tag, engine=engine)
    name = f"cbprune{secrets.token_hex(3)}"
    docker("run", "-d", "--name", name, "--pull", "never", "--network", "none", in_use,
           "/hello", "120", engine=engine)  # fmt: skip
    try:
        dry = cnibench("images", "prune", "--dry-run", env=engine.docker_env).stdout
        assert f"{stale}: would remove" in dry.splitlines()
        assert docker("image", "inspect", stale, engine=engine, check=False).returncode == 0
        done = cnibench("images", "prune", env=engine.docker_env).stdout.splitlines()
        assert f"{stale}: removed" in done
        assert f"{in_use}: kept: a container uses it" in done
        for gone in (stale,):
            assert docker("image", "inspect", gone, engine=engine, check=False).returncode != 0
        for kept in (current, in_use, users, IMAGE):
            assert docker("image", "inspect", kept, engine=engine, check=False).returncode == 0
    finally:
        docker("rm", "-f", name, engine=engine, check=False)
        for tag in (current, in_use, users):
            docker("rmi", tag, engine=engine, check=False)


def test_down_stops_everything_and_keeps_the_cache(
    tmp_path: Path, image_tar: bytes, before: dict[str, object]
) -> None:
    engine = _start(tmp_path)
    try:
        docker("import", "-", IMAGE, engine=engine, stdin=image_tar)
        # A container left running: down must stop it and undo its mounts.
        docker("run", "-d", "--pull", "never", "--network", "none", IMAGE, "/hello", "300",
               engine=engine)  # fmt: skip
        pids = [engine.pid(), int((engine.run_dir / "exec/containerd/containerd.pid").read_text())]
        assert _mounts_under(engine.run_dir, engine.data_root)

        down = cnibench("engine", "down", "--name", engine.name, env=engine.env)
        assert down.stdout == ""
        assert all(_gone(pid) for pid in pids)
        assert not engine.run_dir.exists()
        assert _mounts_under(engine.run_dir, engine.data_root) == []
        assert (engine.data_root / "overlay2").is_dir()  # the image cache stays
        assert _firewall() == before["firewall"]
        assert [p for p in DEFAULT_SOCKETS if p.exists()] == before["sockets"]

        again = cnibench("engine", "down", "--name", engine.name, env=engine.env)
        assert "was not running" in again.stderr
        cnibench("engine", "down", "--name", engine.name, "--purge", env=engine.env)
        assert not engine.data_root.exists()
    finally:
        _stop(engine)


def test_up_after_down_finds_the_cached_image(tmp_path: Path, image_tar: bytes) -> None:
    first = _start(tmp_path)
    try:
        docker("import", "-", IMAGE, engine=first, stdin=image_tar)
        cnibench("engine", "down", "--name", first.name, env=first.env)
        cnibench("engine", "up", "--name", first.name, env=first.env)
        done = docker("run", "--rm", "--pull", "never", "--network", "none", IMAGE, "/hello",
                      engine=first)  # fmt: skip
        assert done.stdout == "hello from pid 1\n"
    finally:
        _stop(first)


@pytest.fixture
def private_run_root() -> Iterator[Path]:
    """A run root of its own under /run (short: socket paths are limited to 107 bytes), so
    ``cnibench clean`` sees only this test's engine."""
    if _why_not():
        pytest.skip(_why_not())
    root = Path(tempfile.mkdtemp(prefix="cbt", dir="/run"))
    try:
        yield root
    finally:
        shutil.rmtree(root, ignore_errors=True)


def test_clean_stops_a_leftover_engine(tmp_path: Path, private_run_root: Path) -> None:
    engine = _start(tmp_path, CNIBENCH_ENGINE_RUN=str(private_run_root))
    try:
        pid = engine.pid()
        # DOCKER_HOST points kind (if installed) at this engine, where no cluster exists.
        clean = cnibench("clean", env=engine.docker_env, timeout=600)
        assert f"engine: {engine.name}: stopped" in clean.stdout.splitlines()
        assert _gone(pid)
        assert not engine.run_dir.exists()
        assert "no private engine" in cnibench("engine", "status", env=engine.env).stdout
    finally:
        _stop(engine)


def test_bad_engine_name_is_one_line_and_exit_2(tmp_path: Path) -> None:
    done = cnibench("engine", "up", "--name", "../etc", env=_base_env(tmp_path), check=False)
    assert done.returncode == 2
    assert done.stdout == ""
    assert done.stderr.count("\n") == 1
    assert done.stderr.startswith("cnibench: error: engine name '../etc'")
