"""What cnibench asks its private engine over the engine's socket (the Docker SDK for Python):
whether it answers, and its networks' host bridges after pruning the unused ones; and which
container engine CLI answers at all (:func:`answering_engine`).
"""

from __future__ import annotations

import contextlib
import math
import shutil
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cnibench.engine.api import engine_failures

if TYPE_CHECKING:
    from docker import DockerClient

__all__ = [
    "answering_engine",
    "bridge_names",
]


def answering_engine(
    candidates: Sequence[str] = ("docker", "podman"), *, timeout: float = 5.0
) -> str:
    """The first of ``candidates`` whose ``<engine> info`` succeeds (the docker client follows
    ``DOCKER_HOST``), or ``""`` when none answers within ``timeout`` seconds each."""
    for engine in candidates:
        if shutil.which(engine) is None:
            continue
        try:
            done = subprocess.run(
                [engine, "info"], capture_output=True, timeout=timeout, check=False
            )
        except (OSError, subprocess.TimeoutExpired):
            continue
        if done.returncode == 0:
            return engine
    return ""


def bridge_names(networks: Sequence[Mapping[str, Any]]) -> list[str]:
    """Host bridge interfaces of an engine's user-defined bridge networks (``GET /networks``):
    the ``com.docker.network.bridge.name`` option, else ``br-`` and the id's first 12 hex
    digits, as dockerd names them. The default ``bridge`` network is left out (this engine
    runs with ``--bridge=none``)."""
    names = []
    for network in networks:
        if network.get("Driver") != "bridge" or network.get("Name") == "bridge":
            continue
        options = network.get("Options") or {}
        names.append(
            str(options.get("com.docker.network.bridge.name") or f"br-{network['Id'][:12]}")
        )
    return names


def _client(sock: Path, timeout: float) -> DockerClient:
    """A Docker SDK client of the engine at ``sock``; its API version is the one the engine
    names (``GET /version``), so no request is refused as too old or too new.

    Raises
    ------
    docker.errors.DockerException
        The engine does not answer.
    """
    import docker

    return docker.DockerClient(
        base_url=f"unix://{sock}", version="auto", timeout=max(1, math.ceil(timeout))
    )


def _ping(sock: Path, timeout: float = 2.0) -> bool:
    """Whether a Docker API answers ``GET /_ping`` on ``sock``."""
    if not sock.exists():
        return False
    try:
        with contextlib.closing(_client(sock, timeout)) as client:
            return bool(client.ping())
    except engine_failures():
        return False


def _bridges_after_prune(sock: Path, timeout: float = 30.0) -> list[str]:
    """Prune the engine's unused networks and return the host bridges of the networks it has
    (:func:`bridge_names`); best effort: what cannot be asked is left out."""
    failures = engine_failures()
    try:
        client = _client(sock, timeout)
    except failures:
        return []
    with contextlib.closing(client):
        with contextlib.suppress(*failures):
            client.networks.prune()
        try:
            return bridge_names(client.api.networks())
        except failures:
            return []
