"""KubePod.run: reading an exec session until the command ends or its time is up.

The websocket session is a stand-in: the exec subresource needs an API server and a kubelet,
which unit tests cannot start (tests/kind runs the real one). It answers like the kubernetes
client's ``WSClient``: ``update(timeout)`` blocks up to ``timeout`` seconds for a frame, the
frames then wait in ``peek_*``/``read_*``, and the error channel carries the final ``v1.Status``.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pytest

from cnibench.backends.base import Node, NodeRole
from cnibench.backends.kube import pods
from cnibench.errors import ToolError

_SUCCESS = '{"status": "Success"}'


@dataclass
class _Session:
    """Hands out one ``(stdout, stderr)`` frame per ``update``; closes after the last one, or
    never when ``hangs`` (a frame then takes the whole ``update`` timeout to not come)."""

    frames: list[tuple[str, str]]
    hangs: bool = False
    updates: list[float] = field(default_factory=list)
    closed: bool = False
    _out: str = ""
    _err: str = ""

    def is_open(self) -> bool:
        return not self.closed and (self.hangs or bool(self.frames))

    def update(self, timeout: float) -> None:
        self.updates.append(timeout)
        if self.frames:
            self._out, self._err = self.frames.pop(0)
        else:
            time.sleep(timeout)

    def peek_stdout(self) -> bool:
        return bool(self._out)

    def read_stdout(self) -> str:
        out, self._out = self._out, ""
        return out

    def peek_stderr(self) -> bool:
        return bool(self._err)

    def read_stderr(self) -> str:
        err, self._err = self._err, ""
        return err

    def read_channel(self, channel: int) -> str:
        assert channel == 3
        return _SUCCESS

    def close(self) -> None:
        self.closed = True


def _pod(monkeypatch: pytest.MonkeyPatch, session: _Session) -> pods.KubePod:
    def stream(method: Callable[..., Any], *args: Any, **kwargs: Any) -> _Session:
        return session

    monkeypatch.setattr("kubernetes.stream.stream", stream)
    monkeypatch.setattr(pods, "websocket_core_api", lambda api_client: api_client)
    api = type("Api", (), {"connect_get_namespaced_pod_exec": None})()
    node = Node("kind-worker", NodeRole.CLIENT, "172.18.0.3")
    return pods.KubePod("client", "cnibench", node, "10.244.1.5", api)


def test_output_is_read_until_the_session_closes(monkeypatch: pytest.MonkeyPatch) -> None:
    session = _Session([("1 2", ""), (" 3\n", "warn\n"), ("", "")])
    result = _pod(monkeypatch, session).run(["seq", "3"], timeout=30)
    assert (result.returncode, result.stdout, result.stderr) == (0, "1 2 3\n", "warn\n")
    assert len(session.updates) == 3
    assert all(0 < timeout <= 1.0 for timeout in session.updates)
    assert session.closed


def test_a_command_that_outlives_its_timeout_fails_with_what_it_printed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    session = _Session([("partial\n", "")], hangs=True)
    started = time.monotonic()
    late = r"^iperf3 in pod client did not finish within 0\.4 s$"
    with pytest.raises(ToolError, match=late) as raised:
        _pod(monkeypatch, session).run(["iperf3", "-c", "x"], timeout=0.4)
    took = time.monotonic() - started
    assert raised.value.output == "partial\n"
    assert raised.value.tool == "iperf3"
    assert 0.4 <= took < 1.4, took
    assert session.updates[-1] <= 0.4  # never waits for a frame past the deadline
    assert session.closed


def test_a_broken_session_fails_at_once(monkeypatch: pytest.MonkeyPatch) -> None:
    class _Broken(_Session):
        def update(self, timeout: float) -> None:
            raise ConnectionResetError("connection reset by peer")

    with pytest.raises(ToolError, match="exec of ping in pod client broke off"):
        _pod(monkeypatch, _Broken([], hangs=True)).run(["ping"], timeout=30)
