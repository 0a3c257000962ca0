"""Fixtures of the kind tier: a private Docker engine, the offline images, real kind clusters.

Everything goes through the commands a person types: ``cnibench engine up``, ``cnibench
images build``, ``cnibench run --cluster kind``, ``cnibench clean``, ``cnibench engine down``.
The engine lives for this package only and its address is passed to each command explicitly
(never put into this process's environment), so tiers after this one keep seeing no engine.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from cnibench.engine import engine_paths
from cnibench.leases import hold

from .kind_support import (
    ENGINE_NAME,
    TIER_LEASE,
    cnibench,
    for_the_tier,
    hold_engine,
    release_engine,
)

BUILD_TIMEOUT = 3600.0
"""Seconds ``cnibench images build`` may take cold (about 20 minutes on 2 cores)."""


def _why_not() -> str:
    if os.geteuid() != 0:
        return "the kind tier needs root (a private dockerd)"
    missing = [
        tool for tool in ("dockerd", "docker", "mmdebstrap", "go", "gcc") if not shutil.which(tool)
    ]
    if missing:
        return f"the kind tier needs {', '.join(missing)} (nox -s tests installs them)"
    return ""


def _host_state() -> dict[str, object]:
    """What the tier may not leave behind on the host: bridges, /lib/modules, engine dirs."""
    links = subprocess.run(["ip", "-o", "link"], capture_output=True, text=True, check=False)
    bridges = sorted(
        line.split(":")[1].strip().split("@")[0]
        for line in links.stdout.splitlines()
        if line.split(":")[1].strip().startswith("br-")
    )
    return {
        "bridges": bridges,
        "/lib/modules": Path("/lib/modules").exists(),
        "engine run dir": Path(f"/run/cnibench-engine/{ENGINE_NAME}").exists(),
    }


def _without_engine() -> dict[str, str]:
    """This process's environment without an engine or a cluster of its own (the tier passes
    its engine to each command explicitly)."""
    return {k: v for k, v in os.environ.items() if k not in ("DOCKER_HOST", "KUBECONFIG")}


def _clear_a_killed_run() -> None:
    """What an earlier run of the tier that was killed (SIGKILL: no clean-up ran) left: its
    engine's run dir, and clusters in the engine's data root, which come back with their nodes
    stopped when the engine starts again. Cleared as a person would, with ``engine up``,
    ``clean`` and ``engine down`` (each keeps what a live session holds), so that the host
    state the tier is compared with at its end is the host's own, not that run's."""
    paths = engine_paths(ENGINE_NAME)
    containers = paths.data_root / "containers"
    if not paths.run_dir.exists() and not (containers.is_dir() and any(containers.iterdir())):
        return
    base = _without_engine()
    up = cnibench("engine", "up", "--name", ENGINE_NAME, env=base, timeout=180)
    env = dict(base, DOCKER_HOST=up.stdout.strip().removeprefix("export DOCKER_HOST="))
    cnibench("clean", env=env, check=False, timeout=600)
    cnibench("engine", "down", "--name", ENGINE_NAME, env=base, timeout=180)


@pytest.fixture(scope="package")
def host_before() -> dict[str, object]:
    """The host's state before the tier started its engine (once a killed earlier run's
    leftovers are cleared)."""
    if not _why_not():
        _clear_a_killed_run()
    return _host_state()


@pytest.fixture(scope="package")
def engine_env(host_before: dict[str, object]) -> Iterator[dict[str, str]]:
    """Environment of every command of the tier: the private engine and the offline images.

    At the end, ``cnibench clean`` and ``cnibench engine down`` must leave the host as the
    tier found it: no kind cluster, no dockerd, no bridge, no /lib/modules it created.
    """
    reason = _why_not()
    if reason:
        pytest.skip(reason)
    base = _without_engine()
    tier = hold(*TIER_LEASE)
    up = cnibench("engine", "up", "--name", ENGINE_NAME, env=base, timeout=180)
    line = up.stdout.strip()
    assert line.startswith("export DOCKER_HOST=unix://"), line
    env = dict(
        base, DOCKER_HOST=line.removeprefix("export DOCKER_HOST="), CNIBENCH_IMAGES="offline"
    )
    hold_engine(env["DOCKER_HOST"])
    try:
        yield env
    finally:
        # A clean for the tier (CNIBENCH_CLEAN_FOR): its own claim keeps nothing from it, and
        # the cleans of the other tiers beside it keep the engine until the claim ends below.
        cleaned = cnibench("clean", env=for_the_tier(env), check=False, timeout=600)
        down = cnibench("engine", "down", "--name", ENGINE_NAME, env=base, check=False, timeout=180)
        release_engine()
        # Held until the tier's own clean-up (which removes the /lib/modules it made) is over:
        # a kube-tier test running beside it then knows that change is the kind tier's.
        tier.release()
        after = _host_state()
        left = {k: v for k, v in after.items() if v != host_before[k]}
        if left or down.returncode != 0:
            pytest.fail(
                f"the kind tier left {left} (clean: {cleaned.stdout.strip()!r};"
                f" engine down exit {down.returncode}: {down.stderr.strip()!r})"
            )


@pytest.fixture(scope="package")
def offline_images(engine_env: dict[str, str]) -> dict[str, str]:
    """The offline image set, built (or found) in the tier's engine."""
    cnibench("images", "build", env=engine_env, timeout=BUILD_TIMEOUT)
    return engine_env


@pytest.fixture(scope="package")
def kind_results(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Results directory shared by the tier's runs (kept as a test artefact)."""
    keep = os.environ.get("CNIBENCH_KIND_RESULTS")
    if keep:
        path = Path(keep)
        path.mkdir(parents=True, exist_ok=True)
        return path
    return tmp_path_factory.mktemp("kind-results")
