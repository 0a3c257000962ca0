"""The policy probe runs with bash and coreutils only (no Python in the tools image).

Run on loopback from a stand-in endpoint that executes argv on this host, against a real
listening socket and a real closed port; the blocked (timeout) outcome is covered by the lab
policy tests, where a namespace drops the packets.
"""

from __future__ import annotations

import shutil
import socket
import subprocess
import time
from collections.abc import Iterator, Sequence

import pytest

from cnibench.backends.base import CommandResult, Node, NodeRole
from cnibench.errors import ToolError
from cnibench.scenarios.policy import probe_matrix


class HostEndpoint:
    """Runs argv on this host (loopback only), like a pod would run it."""

    def __init__(self, path: str = "") -> None:
        self.path = path

    @property
    def name(self) -> str:
        return "host"

    @property
    def node(self) -> Node:
        return Node("host", NodeRole.CLIENT, "127.0.0.1")

    @property
    def ip(self) -> str:
        return "127.0.0.1"

    def run(self, argv: Sequence[str], *, timeout: float) -> CommandResult:
        started = time.monotonic()
        env = {"PATH": self.path} if self.path else None
        try:
            done = subprocess.run(
                list(argv), capture_output=True, text=True, timeout=timeout, check=False, env=env
            )
        except FileNotFoundError as exc:  # what an exec into a pod without the binary reports
            return CommandResult(tuple(argv), 127, "", str(exc), time.monotonic() - started)
        return CommandResult(
            tuple(argv), done.returncode, done.stdout, done.stderr, time.monotonic() - started
        )


@pytest.fixture
def listening() -> Iterator[int]:
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(8)
    try:
        yield server.getsockname()[1]
    finally:
        server.close()


@pytest.fixture
def closed_port() -> int:
    probe = socket.socket()
    probe.bind(("127.0.0.1", 0))
    port = probe.getsockname()[1]
    probe.close()  # bound then closed: nothing listens there now
    return port


def test_open_and_refused_are_told_apart(listening: int, closed_port: int) -> None:
    cells = probe_matrix(
        [
            (
                HostEndpoint(),
                [("srv", "127.0.0.1", listening, True), ("x", "127.0.0.1", closed_port, False)],
            )
        ]
    )
    assert [(c.destination, c.observed, c.ok) for c in cells] == [
        (f"srv:{listening}", "open", True),
        (f"x:{closed_port}", "refused", True),
    ]


def test_an_open_port_expected_blocked_is_wrong(listening: int) -> None:
    (cell,) = probe_matrix([(HostEndpoint(), [("srv", "127.0.0.1", listening, False)])])
    assert cell.observed == "open"
    assert not cell.ok


def test_a_probe_that_cannot_run_is_a_tool_error(
    listening: int, tmp_path_factory: pytest.TempPathFactory
) -> None:
    empty = tmp_path_factory.mktemp("no-tools")  # no bash on PATH: the probe never ran
    with pytest.raises(ToolError, match="printed no result"):
        probe_matrix([(HostEndpoint(str(empty)), [("srv", "127.0.0.1", listening, True)])])


def test_without_timeout_the_cell_is_an_error_not_blocked(
    listening: int, tmp_path_factory: pytest.TempPathFactory
) -> None:
    only_bash = tmp_path_factory.mktemp("only-bash")
    (only_bash / "bash").symlink_to(shutil.which("bash") or "/bin/bash")
    (cell,) = probe_matrix(
        [(HostEndpoint(str(only_bash)), [("srv", "127.0.0.1", listening, False)])]
    )
    assert cell.observed == "error"
    assert not cell.ok
