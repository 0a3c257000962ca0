"""A TCP port-forward from 127.0.0.1 in this process to a server inside a network namespace.

The lab never adds links or routes to the host's namespace, so its Prometheus (inside the
monitoring namespace) is not reachable by address. Like ``kubectl port-forward``, a listener on
loopback relays each connection; the upstream socket is created by a thread that has briefly
switched itself into the lab namespace with ``setns(2)``. A socket stays in the namespace it was
created in, so the relay works after the thread switched back. ``setns`` with ``CLONE_NEWNET``
only affects the calling thread, so the rest of the process never leaves its namespace.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import os
import selectors
import socket
import threading
from pathlib import Path

from cnibench.errors import ProvisioningError

__all__ = ["NamespacePortForward"]

CLONE_NEWNET = 0x40000000
_CHUNK = 65536
_POLL = 0.2


class NamespacePortForward:
    """Relay ``127.0.0.1:<port>`` to ``upstream`` inside network namespace ``netns_path``.

    Parameters
    ----------
    netns_path:
        Path of the namespace, e.g. ``/run/netns/cb1a2b3c-mon``.
    upstream:
        ``(address, port)`` reachable from inside that namespace.
    connect_timeout:
        Seconds to wait for each upstream connection.
    """

    def __init__(
        self, netns_path: Path, upstream: tuple[str, int], *, connect_timeout: float = 5.0
    ) -> None:
        self.netns_path = netns_path
        self.upstream = upstream
        self.connect_timeout = connect_timeout
        self._libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._sockets: set[socket.socket] = set()
        self._listener: socket.socket | None = None
        self._thread: threading.Thread | None = None

    @property
    def port(self) -> int:
        """Local port on 127.0.0.1 (0 before :meth:`start`)."""
        return 0 if self._listener is None else int(self._listener.getsockname()[1])

    @property
    def running(self) -> bool:
        """Whether the forward accepts connections."""
        return self._thread is not None and self._thread.is_alive()

    def start(self) -> int:
        """Start listening (idempotent) and return the local port.

        Raises
        ------
        ProvisioningError
            If the namespace does not exist or loopback cannot be bound.
        """
        if self.running:
            return self.port
        if not self.netns_path.exists():
            raise ProvisioningError(f"port-forward: namespace {self.netns_path} does not exist")
        try:
            listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            listener.bind(("127.0.0.1", 0))
            listener.listen(64)
        except OSError as exc:
            raise ProvisioningError(f"port-forward: cannot listen on 127.0.0.1: {exc}") from exc
        self._stop.clear()
        self._listener = listener
        self._thread = threading.Thread(
            target=self._accept_loop, name=f"portforward-{self.netns_path.name}", daemon=True
        )
        self._thread.start()
        return self.port

    def stop(self) -> None:
        """Stop accepting and close every relayed connection (idempotent)."""
        self._stop.set()
        with self._lock:
            sockets = list(self._sockets)
            self._sockets.clear()
        for sock in sockets:
            _close(sock)
        if self._thread is not None:
            self._thread.join(timeout=2.0)
            self._thread = None
        if self._listener is not None:
            _close(self._listener)
            self._listener = None

    def __enter__(self) -> NamespacePortForward:
        self.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    def _setns(self, fd: int) -> None:
        if self._libc.setns(fd, CLONE_NEWNET) != 0:
            errno = ctypes.get_errno()
            raise OSError(errno, f"setns: {os.strerror(errno)}")

    def connect_upstream(self) -> socket.socket:
        """A socket connected to ``upstream``, created inside the namespace.

        The calling thread enters the namespace and returns to its own before this returns.
        """
        own = os.open("/proc/thread-self/ns/net", os.O_RDONLY)
        try:
            target = os.open(self.netns_path, os.O_RDONLY)
            try:
                self._setns(target)
                try:
                    return socket.create_connection(self.upstream, timeout=self.connect_timeout)
                finally:
                    try:
                        self._setns(own)
                    except OSError:
                        # This thread is stuck in the lab namespace: it must not accept again.
                        self._stop.set()
                        raise
            finally:
                os.close(target)
        finally:
            os.close(own)

    def _accept_loop(self) -> None:
        listener = self._listener
        if listener is None:
            return
        with selectors.DefaultSelector() as selector:
            selector.register(listener, selectors.EVENT_READ)
            while not self._stop.is_set():
                if not selector.select(timeout=_POLL):
                    continue
                try:
                    client, _ = listener.accept()
                except OSError:
                    continue
                try:
                    upstream = self.connect_upstream()
                except OSError:
                    # The client sees a closed connection, as with an unreachable server.
                    _close(client)
                    continue
                with self._lock:
                    self._sockets.update((client, upstream))
                threading.Thread(target=self._relay, args=(client, upstream), daemon=True).start()

    def _relay(self, client: socket.socket, upstream: socket.socket) -> None:
        peers = {client: upstream, upstream: client}
        open_reads = {client, upstream}
        try:
            client.setblocking(True)
            upstream.settimeout(None)
            with selectors.DefaultSelector() as selector:
                for sock in peers:
                    selector.register(sock, selectors.EVENT_READ)
                while open_reads and not self._stop.is_set():
                    for key, _ in selector.select(timeout=_POLL):
                        source = key.fileobj
                        assert isinstance(source, socket.socket)
                        data = source.recv(_CHUNK)
                        if data:
                            peers[source].sendall(data)
                            continue
                        selector.unregister(source)
                        open_reads.discard(source)
                        with contextlib.suppress(OSError):
                            peers[source].shutdown(socket.SHUT_WR)
        except OSError:
            pass
        finally:
            with self._lock:
                self._sockets.discard(client)
                self._sockets.discard(upstream)
            _close(client)
            _close(upstream)


def _close(sock: socket.socket) -> None:
    with contextlib.suppress(OSError):
        sock.shutdown(socket.SHUT_RDWR)
    with contextlib.suppress(OSError):
        sock.close()
