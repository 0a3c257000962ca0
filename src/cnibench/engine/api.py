"""What cnibench itself asks a container engine, through the Docker SDK for Python.

kind, ``docker build`` of ``images/`` and the offline builder's steps run the docker CLI (see
ARCHITECTURE.md for which and why). Where cnibench asks an engine a question of its own (a kind
node's container ID and PID, whether an image is present, the kind network's subnet) it asks
the Engine API: no process per question, no ``--format`` template to parse, and errors it
can tell apart (a missing object is not an engine that does not answer).

:func:`open_engine_client` makes a client for a ``DOCKER_HOST`` value, :class:`EngineReads`
wraps the few reads, each turning the SDK's errors into one-line
:class:`~cnibench.errors.ProvisioningError`\\ s. ``docker`` is imported inside the functions:
importing it costs more than the rest of a command that never speaks to an engine.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Iterator, Mapping
from contextlib import closing, contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from cnibench.errors import ProvisioningError

if TYPE_CHECKING:
    from docker import DockerClient

__all__ = [
    "DEFAULT_TIMEOUT",
    "ContainerProcess",
    "EngineReads",
    "engine_client",
    "engine_failures",
    "open_engine_client",
]

DEFAULT_TIMEOUT = 30.0
"""Seconds an engine read waits for an answer (the CLI calls it replaces had 30 s or more)."""


def engine_failures() -> tuple[type[Exception], ...]:
    """What a Docker SDK call raises when the engine does not answer or refuses: its own
    errors, and the ``requests`` connection errors it lets through."""
    import requests
    from docker.errors import DockerException

    return (DockerException, requests.RequestException, OSError)


def _where(docker_host: str) -> str:
    return docker_host or "the default socket (DOCKER_HOST unset)"


def _one_line(exc: BaseException) -> str:
    """``exc`` as one line (an SDK message may carry a server's multi-line explanation)."""
    return " ".join(str(exc).split()) or type(exc).__name__


def open_engine_client(docker_host: str = "", *, timeout: float = DEFAULT_TIMEOUT) -> DockerClient:
    """A Docker SDK client of the engine at ``docker_host``; the caller closes it.

    Its API version is the one the engine names (``GET /version``, asked here), so no request
    is refused as too old or too new, and an engine that does not answer fails here.

    Parameters
    ----------
    docker_host:
        A ``DOCKER_HOST`` value (``unix:///run/cnibench-engine/x/docker.sock``,
        ``tcp://host:2375``); ``""`` for the SDK's default socket, as the docker CLI uses.
    timeout:
        Seconds each request may take (rounded up to a whole second, at least 1).

    Raises
    ------
    cnibench.errors.ProvisioningError
        The engine does not answer (one line naming it).
    """
    import docker

    try:
        return docker.DockerClient(
            base_url=docker_host or None, version="auto", timeout=max(1, math.ceil(timeout))
        )
    except engine_failures() as exc:
        raise ProvisioningError(
            f"engine at {_where(docker_host)} does not answer: {_one_line(exc)}"
        ) from exc


@contextmanager
def engine_client(
    docker_host: str = "", *, timeout: float = DEFAULT_TIMEOUT
) -> Iterator[DockerClient]:
    """:func:`open_engine_client`, closed when the block ends.

    Raises
    ------
    cnibench.errors.ProvisioningError
        The engine does not answer.
    """
    with closing(open_engine_client(docker_host, timeout=timeout)) as client:
        yield client


@dataclass(frozen=True)
class ContainerProcess:
    """A container as the host sees it.

    Attributes
    ----------
    id:
        The container's full ID (64 hex digits), which names its cgroup directory.
    pid:
        PID of its init process in the engine's PID namespace; ``0`` when it is not running.
    """

    id: str
    pid: int


class EngineReads:
    """The reads cnibench makes of one engine; each opens a client and closes it.

    Parameters
    ----------
    docker_host:
        The engine's ``DOCKER_HOST``; ``None`` takes ``$DOCKER_HOST`` at each read, the engine
        the docker CLI (and so kind) speaks to.
    timeout:
        Seconds each request may take.
    connect:
        Makes a client for a ``DOCKER_HOST`` value (:func:`open_engine_client` by default; unit
        tests pass one that returns a fake client, since they have no engine).
    """

    def __init__(
        self,
        docker_host: str | None = None,
        *,
        timeout: float = DEFAULT_TIMEOUT,
        connect: Callable[[str], Any] | None = None,
    ) -> None:
        self._docker_host = docker_host
        self._timeout = timeout
        self._connect = connect

    @property
    def docker_host(self) -> str:
        """The ``DOCKER_HOST`` the next read goes to (``""``: the SDK's default socket)."""
        if self._docker_host is not None:
            return self._docker_host
        return os.environ.get("DOCKER_HOST", "")

    @contextmanager
    def _client(self, what: str) -> Iterator[Any]:
        """A client for one read of ``what``; its failures become one-line errors."""
        host = self.docker_host
        if self._connect is None:
            client = open_engine_client(host, timeout=self._timeout)
        else:
            client = self._connect(host)
        with closing(client):
            try:
                yield client
            except engine_failures() as exc:
                raise ProvisioningError(
                    f"engine at {_where(host)}: reading {what} failed: {_one_line(exc)}"
                ) from exc

    def _attrs(self, kind: str, name: str) -> Mapping[str, Any]:
        """What the engine says of its ``kind`` (``container``, ``network``) ``name``.

        Raises
        ------
        cnibench.errors.ProvisioningError
            No such object, or the engine does not answer.
        """
        from docker.errors import NotFound

        with self._client(f"{kind} {name}") as client:
            try:
                attrs: Mapping[str, Any] = getattr(client, f"{kind}s").get(name).attrs
            except NotFound:
                raise ProvisioningError(
                    f"no {kind} {name} in the engine at {_where(self.docker_host)}"
                ) from None
        return attrs

    def container(self, name: str) -> ContainerProcess:
        """The ID and init PID of container ``name`` (or ID).

        Raises
        ------
        cnibench.errors.ProvisioningError
            No such container, or the engine does not answer.
        """
        attrs = self._attrs("container", name)
        return ContainerProcess(id=str(attrs["Id"]), pid=int(attrs["State"]["Pid"] or 0))

    def image_id(self, reference: str) -> str | None:
        """The ID (``sha256:...``) of image ``reference``, ``None`` when the engine has none.

        Raises
        ------
        cnibench.errors.ProvisioningError
            The engine does not answer.
        """
        from docker.errors import ImageNotFound

        with self._client(f"image {reference}") as client:
            try:
                return str(client.images.get(reference).id)
            except ImageNotFound:
                return None

    def network(self, name: str) -> Mapping[str, Any]:
        """Network ``name`` as the engine describes it (``GET /networks/{name}``: ``Name``,
        ``IPAM.Config``, ...).

        Raises
        ------
        cnibench.errors.ProvisioningError
            No such network, or the engine does not answer.
        """
        return self._attrs("network", name)
