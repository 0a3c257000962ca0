"""The source echo: an HTTP server on the external host that answers each request with the
address the request came from, as the first word of its body.

An egress gateway is in force for a client once its requests reach the external host from
the gateway's address rather than from the client node's own (each node masquerades its own
pods). The effect probe (:mod:`cnibench.tools.effect_probe`) reads the first word of each
answer, so with this server beside it, it times the gateway's takeover to its 10 ms and counts
the requests that still left un-masqueraded by the gateway meanwhile.

It runs where the external host is: on the lab in its network namespace, as ``python -m
cnibench.tools.source_echo HOST PORT SECONDS`` (this interpreter, so nothing else need be
installed there), which prints :data:`READY` once it listens; on a Kubernetes backend, whose
external host is this machine, in a thread of this process (:func:`serve_in_thread`). Either
way it serves for ``seconds`` at most, then ends by itself.
"""

from __future__ import annotations

import socket
import socketserver
import sys
import threading
from collections.abc import Sequence

from cnibench.errors import ConfigError
from cnibench.tools._common import require_positive

__all__ = ["READY", "SourceEchoServer", "serve_in_thread", "source_echo_argv"]

TOOL = "source-echo"
READY = "source-echo listening"
"""The line the command prints once it listens."""


def _answer(peer: str) -> bytes:
    body = f"{peer}\n".encode()
    head = f"HTTP/1.0 200 OK\r\nContent-Length: {len(body)}\r\nConnection: close\r\n\r\n"
    return head.encode() + body


class _Handler(socketserver.BaseRequestHandler):
    def handle(self) -> None:
        conn: socket.socket = self.request
        conn.settimeout(1.0)
        try:
            conn.recv(4096)  # the request line; what it asks does not matter
            conn.sendall(_answer(str(self.client_address[0])))
        except OSError:
            pass  # the prober gave up on this attempt


class SourceEchoServer(socketserver.ThreadingTCPServer):
    """The server, bound to ``host:port`` (IPv4 or IPv6), each request in a thread; a
    :class:`~cnibench.backends.base.RunningServer`."""

    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 128
    """The probe connects every 10 ms; socketserver's backlog of 5 overflowed on a busy machine,
    and a SYN dropped there is an attempt timed out (neither the old source nor the new)."""

    def __init__(self, host: str, port: int) -> None:
        if not 0 < port < 65536:
            raise ConfigError(f"{TOOL}: port {port} is out of range")
        self.address_family = socket.AF_INET6 if ":" in host else socket.AF_INET
        super().__init__((host, port), _Handler)

    def serve_for(self, seconds: float) -> None:
        """Serve until :meth:`stop`, or for ``seconds`` at most (blocks)."""
        timer = threading.Timer(seconds, self.shutdown)
        timer.daemon = True
        timer.start()
        try:
            self.serve_forever(poll_interval=0.1)
        finally:
            timer.cancel()

    def stop(self) -> None:
        """Stop serving and free the port (safe to call again)."""
        self.shutdown()
        self.server_close()


def serve_in_thread(host: str, port: int, *, seconds: float) -> SourceEchoServer:
    """Serve on ``host:port`` in a thread of this process for ``seconds`` at most; returns
    once it listens. Stop it earlier with ``stop()``.

    Raises
    ------
    cnibench.errors.ConfigError
        A non-positive time or a port out of range.
    OSError
        The address cannot be bound (not this host's, or the port is taken).
    """
    require_positive(seconds, tool=TOOL, name="seconds")
    server = SourceEchoServer(host, port)
    threading.Thread(
        target=server.serve_for, args=(seconds,), name="cnibench-source-echo", daemon=True
    ).start()
    return server


def source_echo_argv(host: str, port: int, *, seconds: float) -> list[str]:
    """The command that serves on ``host:port`` for ``seconds`` (this interpreter)."""
    require_positive(seconds, tool=TOOL, name="seconds")
    return [sys.executable, "-m", "cnibench.tools.source_echo", host, str(port), f"{seconds:g}"]


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m cnibench.tools.source_echo HOST PORT SECONDS``."""
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) != 3:
        print("usage: python -m cnibench.tools.source_echo HOST PORT SECONDS", file=sys.stderr)
        return 2
    server = SourceEchoServer(args[0], int(args[1]))
    print(READY, flush=True)
    with server:
        server.serve_for(float(args[2]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
