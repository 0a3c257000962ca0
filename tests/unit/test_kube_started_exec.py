"""KubePod.start: one exec session read as the command prints; the command's PID comes first
(``sh`` prints it and execs the command), so stopping it is a ``kill`` of that PID.

The websocket sessions are stand-ins like those of ``test_kube_pod_exec.py``: the exec
subresource needs an API server and a kubelet, which unit tests cannot start (tests/kind runs
the real one).
"""

from __future__ import annotations

import threading
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
    """One ``stdout`` frame per ``update``; closes after the last one unless ``hangs`` (then it
    stays open, each ``update`` waiting its timeout or until :meth:`close`)."""

    frames: list[str]
    hangs: bool = False
    closed: threading.Event = field(default_factory=threading.Event)
    _out: str = ""

    def is_open(self) -> bool:
        return not self.closed.is_set() and (self.hangs or bool(self.frames))

    def update(self, timeout: float) -> None:
        if self.frames:
            self._out = self.frames.pop(0)
        else:
            self.closed.wait(timeout)

    def peek_stdout(self) -> bool:
        return bool(self._out)

    def read_stdout(self) -> str:
        out, self._out = self._out, ""
        return out

    def peek_stderr(self) -> bool:
        return False

    def read_stderr(self) -> str:
        return ""

    def read_channel(self, channel: int) -> str:
        assert channel == 3
        return _SUCCESS

    def close(self) -> None:
        self.closed.set()


@dataclass
class _Execs:
    """Hands out one session per exec, in order, and keeps each exec's command."""

    sessions: list[_Session]
    commands: list[list[str]] = field(default_factory=list)

    def stream(self, method: Callable[..., Any], *args: Any, **kwargs: Any) -> _Session:
        self.commands.append(list(kwargs["command"]))
        return self.sessions.pop(0)


def _pod(monkeypatch: pytest.MonkeyPatch, execs: _Execs) -> pods.KubePod:
    monkeypatch.setattr("kubernetes.stream.stream", execs.stream)
    monkeypatch.setattr(pods, "websocket_core_api", lambda api_client: api_client)
    api = type("Api", (), {"connect_get_namespaced_pod_exec": None})()
    node = Node("kind-worker", NodeRole.CLIENT, "172.18.0.3")
    return pods.KubePod("client", "cnibench", node, "10.244.1.5", api)


def test_the_first_line_is_the_commands_own_and_its_output_has_no_pid(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    execs = _Execs([_Session(["4242\nstart 4242 1", "00 syscall\na 0 1 2 refused\n", "end x 1\n"])])
    started = _pod(monkeypatch, execs).start(["perl", "-e", "..."])
    assert started.first_line(timeout=5) == "start 4242 100 syscall"
    result = started.wait(timeout=5)
    assert result.returncode == 0
    assert result.stdout == "start 4242 100 syscall\na 0 1 2 refused\nend x 1\n"
    (command,) = execs.commands
    assert command[:2] == ["sh", "-c"]
    assert command[-3:] == ["perl", "-e", "..."]  # after sh's $0, the command as given


def test_stopping_kills_the_pid_it_printed_and_closes_the_session(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    running = _Session(["4242\nstart 4242 100 syscall\n"], hangs=True)
    execs = _Execs([running, _Session([""])])
    started = _pod(monkeypatch, execs).start(["perl", "-e", "..."])
    assert started.first_line(timeout=5).startswith("start 4242")
    begun = time.monotonic()
    started.stop()
    assert time.monotonic() - begun < 3
    assert running.closed.is_set()
    kill = execs.commands[1]
    assert kill[:2] == ["sh", "-c"]
    assert "kill -9 4242" in kill[2]
    started.stop()  # again: nothing more to do
    assert len(execs.commands) == 2


def test_a_command_that_prints_nothing_in_time_fails_with_one_line(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    execs = _Execs([_Session(["4242\n"], hangs=True), _Session([""])])
    started = _pod(monkeypatch, execs).start(["perl", "-e", "..."])
    with pytest.raises(ToolError, match=r"^perl in pod client did not print within 0\.3 s"):
        started.first_line(timeout=0.3)
    started.stop()


def test_waiting_past_the_time_stops_it_and_keeps_what_it_printed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    execs = _Execs([_Session(["4242\nstart 4242 100 syscall\n"], hangs=True), _Session([""])])
    started = _pod(monkeypatch, execs).start(["perl"])
    started.first_line(timeout=5)
    with pytest.raises(ToolError, match=r"did not finish within 0\.2 s") as raised:
        started.wait(timeout=0.2)
    assert "start 4242 100 syscall" in raised.value.output
    assert any("kill -9 4242" in part for part in execs.commands[1])
