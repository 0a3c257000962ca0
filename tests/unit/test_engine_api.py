"""How cnibench talks to its private engine (the Docker SDK over the engine's unix socket).

A fake, not the real thing: no dockerd may be started here (it would share the machine with
the kind clusters of other work), so each test serves a small fake Docker Engine API on a unix
socket in a temporary run directory: a real HTTP server answering only the calls engine.py and
engine_client.py make (``GET /version``, ``GET /_ping``, ``POST /networks/prune``,
``GET /networks``) the way the Engine API documents them. The real engine is exercised by
tests/kind/test_engine.py.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import socketserver
import tempfile
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any

import pytest

from cnibench.engine import client as engine_client
from cnibench.engine import engine_down, engine_paths, engine_status, engine_up
from cnibench.errors import ProvisioningError

API_VERSION = "1.45"
NETWORKS = [
    {"Name": "bridge", "Driver": "bridge", "Id": "0" * 64, "Options": {}},
    {"Name": "kind", "Driver": "bridge", "Id": "4f16f4515231" + "a" * 52, "Options": {}},
]


@dataclass
class FakeEngine:
    """What the fake engine was asked, and how it answers ``/_ping``."""

    socket: Path
    ping_status: int = 200
    requests: list[tuple[str, str]] = field(default_factory=list)


def _handler(fake: FakeEngine) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def _answer(self, status: int, body: Any, content_type: str) -> None:
            data = body.encode() if isinstance(body, str) else json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(data)))
            self.send_header("Api-Version", API_VERSION)
            self.end_headers()
            self.wfile.write(data)

        def _route(self) -> None:
            # The SDK puts the API version in front of every path but /version.
            path = re.sub(r"^/v[0-9.]+(?=/)", "", self.path.split("?", 1)[0])
            fake.requests.append((self.command, path))
            length = int(self.headers.get("Content-Length") or 0)
            if length:
                self.rfile.read(length)
            if (self.command, path) == ("GET", "/version"):
                self._answer(
                    200, {"ApiVersion": API_VERSION, "Version": "26.1.5"}, "application/json"
                )
            elif (self.command, path) == ("GET", "/_ping"):
                text = "OK" if fake.ping_status == 200 else "engine is shutting down"
                self._answer(fake.ping_status, text, "text/plain")
            elif (self.command, path) == ("POST", "/networks/prune"):
                self._answer(200, {"NetworksDeleted": ["old"]}, "application/json")
            elif (self.command, path) == ("GET", "/networks"):
                self._answer(200, NETWORKS, "application/json")
            else:
                self._answer(404, {"message": f"page not found: {path}"}, "application/json")

        do_GET = _route  # noqa: N815 (the names http.server dispatches to)
        do_POST = _route  # noqa: N815

        def log_message(self, format: str, *args: Any) -> None:
            pass

    return Handler


@pytest.fixture
def run_root() -> Iterator[Path]:
    # Short on purpose: engine_paths refuses run roots too long for containerd's socket path.
    root = Path(tempfile.mkdtemp(prefix="cbe", dir="/tmp"))
    yield root
    shutil.rmtree(root, ignore_errors=True)


@pytest.fixture
def environ(run_root: Path) -> dict[str, str]:
    return {"CNIBENCH_ENGINE_RUN": str(run_root), "HOME": str(run_root), "PATH": "/nonexistent"}


@pytest.fixture
def fake_engine(environ: dict[str, str]) -> Iterator[FakeEngine]:
    """The fake engine serving at the socket of engine ``fake``."""
    paths = engine_paths("fake", environ)
    paths.run_dir.mkdir(parents=True)
    fake = FakeEngine(paths.socket)
    server = socketserver.ThreadingUnixStreamServer(str(paths.socket), _handler(fake))
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    try:
        yield fake
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


def test_an_engine_that_answers_its_ping_is_up(
    fake_engine: FakeEngine, environ: dict[str, str]
) -> None:
    status = engine_status("fake", environ=environ)
    assert status.answering
    assert status.pid is None  # no pidfile: not running as far as cnibench's dockerd goes
    assert ("GET", "/_ping") in fake_engine.requests


def test_an_engine_whose_ping_fails_is_not_answering(
    fake_engine: FakeEngine, environ: dict[str, str]
) -> None:
    fake_engine.ping_status = 500
    assert not engine_status("fake", environ=environ).answering
    assert ("GET", "/_ping") in fake_engine.requests


def test_a_socket_nobody_serves_is_not_answering(environ: dict[str, str]) -> None:
    paths = engine_paths("gone", environ)
    paths.run_dir.mkdir(parents=True)
    server = socketserver.UnixStreamServer(str(paths.socket), BaseHTTPRequestHandler)
    server.server_close()  # the socket file stays, as after a killed dockerd
    assert paths.socket.exists()
    assert not engine_status("gone", environ=environ).answering


def test_no_socket_is_not_answering(environ: dict[str, str]) -> None:
    assert not engine_status("never", environ=environ).answering


def test_engine_up_returns_the_address_of_an_engine_that_already_answers(
    fake_engine: FakeEngine, environ: dict[str, str]
) -> None:
    # Checked first: engine_up starts a dockerd when nothing answers, which must not happen here.
    assert engine_status("fake", environ=environ).answering
    assert engine_up("fake", environ=environ) == f"unix://{fake_engine.socket}"


@pytest.mark.skipif(os.geteuid() != 0, reason="engine down checks for root first")
def test_engine_down_refuses_an_answering_engine_without_its_pidfile(
    fake_engine: FakeEngine, environ: dict[str, str]
) -> None:
    with pytest.raises(ProvisioningError) as raised:
        engine_down("fake", environ=environ)
    assert str(raised.value) == (
        f"engine fake answers at unix://{fake_engine.socket} but"
        f" {fake_engine.socket.parent}/dockerd.pid names no dockerd of it;"
        " not stopping an unknown process"
    )
    assert fake_engine.socket.exists()


def test_networks_are_pruned_before_the_bridges_are_listed(fake_engine: FakeEngine) -> None:
    assert engine_client._bridges_after_prune(fake_engine.socket) == ["br-4f16f4515231"]
    asked = [r for r in fake_engine.requests if r[1] != "/version"]
    assert asked == [("POST", "/networks/prune"), ("GET", "/networks")]


def test_no_bridges_are_named_when_the_engine_is_gone(run_root: Path) -> None:
    assert engine_client._bridges_after_prune(run_root / "docker.sock", timeout=1) == []
