"""A fake Docker SDK client for tests that have no engine (importable as ``engine_stand_in``:
pytest puts tests/ on ``sys.path``).

It answers the few calls :class:`~cnibench.engine.api.EngineReads` makes
(``containers.get``, ``images.get``, ``networks.get``, ``close``) from dictionaries, raising
the SDK's own ``NotFound`` / ``ImageNotFound`` for a missing name, so the code under test meets
the errors a real engine gives. The kind tier asks a real engine the same questions.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import SimpleNamespace
from typing import Any

from cnibench.engine.api import EngineReads

FAKE_DOCKER_HOST = "unix:///fake-engine/docker.sock"
"""The ``DOCKER_HOST`` a fake engine answers for (nothing listens there)."""


class _FakeCollection:
    """``client.containers`` / ``images`` / ``networks``: ``get(name)`` only."""

    def __init__(
        self, owner: FakeEngineClient, kind: str, objects: Mapping[str, Any], missing: type
    ) -> None:
        self._owner = owner
        self._kind = kind
        self._objects = objects
        self._missing = missing

    def get(self, name: str) -> Any:
        self._owner.asked.append((self._kind, name))
        if self._owner.failure is not None:
            raise self._owner.failure
        if name not in self._objects:
            raise self._missing(f"No such {self._kind}: {name}")
        return self._objects[name]


class FakeEngineClient:
    """A fake ``docker.DockerClient`` (unit tests have no engine).

    Parameters
    ----------
    containers:
        Container name -> its ``attrs`` (``{"Id": ..., "State": {"Pid": ...}}``).
    images:
        Image reference -> its ID.
    networks:
        Network name -> its ``attrs`` (``{"Name": ..., "IPAM": {"Config": [...]}}``).
    failure:
        Raised by every ``get`` (an engine that stops answering mid-read).

    Attributes
    ----------
    asked:
        ``(kind, name)`` of each ``get``, in order.
    closed:
        How many times ``close`` was called.
    """

    def __init__(
        self,
        *,
        containers: Mapping[str, Mapping[str, Any]] | None = None,
        images: Mapping[str, str] | None = None,
        networks: Mapping[str, Mapping[str, Any]] | None = None,
        failure: Exception | None = None,
    ) -> None:
        from docker.errors import ImageNotFound, NotFound

        self.asked: list[tuple[str, str]] = []
        self.closed = 0
        self.failure = failure
        self.containers = _FakeCollection(
            self,
            "container",
            {
                name: SimpleNamespace(id=attrs.get("Id", ""), attrs=attrs)
                for name, attrs in (containers or {}).items()
            },
            NotFound,
        )
        self.images = _FakeCollection(
            self,
            "image",
            {ref: SimpleNamespace(id=image_id) for ref, image_id in (images or {}).items()},
            ImageNotFound,
        )
        self.networks = _FakeCollection(
            self,
            "network",
            {name: SimpleNamespace(attrs=attrs) for name, attrs in (networks or {}).items()},
            NotFound,
        )

    def close(self) -> None:
        self.closed += 1


def fake_engine(client: FakeEngineClient | None = None) -> EngineReads:
    """Engine reads of :data:`FAKE_DOCKER_HOST` answered by ``client`` (an empty one when
    ``None``: no container, image or network)."""
    answering = client or FakeEngineClient()
    return EngineReads(FAKE_DOCKER_HOST, connect=lambda docker_host: answering)


def node_containers(pids: Mapping[str, int]) -> FakeEngineClient:
    """A fake engine holding one kind node container per ``pids`` entry: ID ``<name>id``,
    init PID as given."""
    return FakeEngineClient(
        containers={name: {"Id": f"{name}id", "State": {"Pid": pid}} for name, pid in pids.items()}
    )
