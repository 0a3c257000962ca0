"""The source echo and the effect probe together, for real on loopback: the echo answers each
connection with the address it came from, and the probe (perl, as in a pod) reads it as the
first word of the body. An egress gateway's takeover is timed this way: in force once the
answer names anyone but the client node (``Effect.answering_other_than``)."""

from __future__ import annotations

import socket
import subprocess
import urllib.request
from collections.abc import Iterator

import pytest

from cnibench.errors import ConfigError
from cnibench.tools.effect_probe import (
    Effect,
    ProbeOutcome,
    effect_probe_argv,
    parse_effect_probe,
)
from cnibench.tools.source_echo import READY, SourceEchoServer, serve_in_thread, source_echo_argv


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _run(argv: list[str]) -> str:
    return subprocess.run(argv, capture_output=True, text=True, timeout=30, check=True).stdout


@pytest.fixture
def echo() -> Iterator[tuple[str, int]]:
    port = _free_port()
    server = serve_in_thread("127.0.0.1", port, seconds=30)
    try:
        yield "127.0.0.1", port
    finally:
        server.stop()


def test_the_echo_answers_with_the_address_the_request_came_from(echo: tuple[str, int]) -> None:
    host, port = echo
    with urllib.request.urlopen(f"http://{host}:{port}/", timeout=5) as answer:
        assert answer.status == 200
        assert answer.read().decode().split() == ["127.0.0.1"]


def test_the_probe_reads_the_source_and_holds_once_it_is_not_the_old_one(
    echo: tuple[str, int],
) -> None:
    host, port = echo
    # The old source was another address: every answer already shows the change.
    argv = effect_probe_argv(
        host, port, effect=Effect.answering_other_than("198.18.0.9"), max_seconds=2,
        stop_after=5,
    )  # fmt: skip
    log = parse_effect_probe(_run(argv))
    assert {(a.outcome, a.answered_by) for a in log.attempts} == {
        (ProbeOutcome.ANSWERED, "127.0.0.1")
    }
    assert log.ended == "effect"
    assert all(Effect.answering_other_than("198.18.0.9").holds(a) for a in log.attempts)
    # Still answered for the old source (this one): never in force, each answer a leak.
    same = Effect.answering_other_than("127.0.0.1")
    argv = effect_probe_argv(host, port, effect=same, max_seconds=0.3, stop_after=5)
    log = parse_effect_probe(_run(argv))
    assert log.ended == "time"
    assert log.attempts
    assert all(same.leaks(a) and not same.holds(a) for a in log.attempts)


def test_the_command_form_says_when_it_listens_and_ends_by_itself() -> None:
    port = _free_port()
    proc = subprocess.Popen(
        source_echo_argv("127.0.0.1", port, seconds=1), stdout=subprocess.PIPE, text=True
    )
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline().strip() == READY
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=5) as answer:
            assert answer.read().decode().strip() == "127.0.0.1"
        assert proc.wait(timeout=15) == 0  # its second is up: it ended on its own
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_a_port_out_of_range_and_no_time_are_refused() -> None:
    with pytest.raises(ConfigError, match="out of range"):
        SourceEchoServer("127.0.0.1", 70000)
    with pytest.raises(ConfigError):
        serve_in_thread("127.0.0.1", _free_port(), seconds=0)
    with pytest.raises(ConfigError, match="one word"):
        Effect.answering_other_than("")


def test_stop_frees_the_port_and_may_be_repeated() -> None:
    port = _free_port()
    server = serve_in_thread("127.0.0.1", port, seconds=30)
    server.stop()
    server.stop()  # the egress set-up's finally may stop it after its time ran out
    again = serve_in_thread("127.0.0.1", port, seconds=1)
    again.stop()
