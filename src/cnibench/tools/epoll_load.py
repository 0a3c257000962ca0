"""cnibench's own closed-loop HTTP/1.1 load: keep-alive connections driven by one epoll loop.

The split scenario needs one record per request (start, backend, latency, status) at the rate
the gateway can serve. locust's ``FastHttpUser`` spends most of a core on its own per-request
machinery (greenlet switches, a cookie jar, header dictionaries, its statistics), and on a host
where the gateway shares the cores it reached about 0.4 of hey's rate. This engine does only
what the records need: each virtual user is one keep-alive connection that sends the same
prepared ``GET``, reads the answer (``Content-Length``, chunked, or until the server closes),
takes the status and the backend header from the head, and sends again (after ``wait``
seconds if asked). It ran at 1.3 to 1.5 times hey's rate on the same gateway
(``bench/loadgen.py``).

A request is recorded when its whole answer is in; one that gets no answer within
``request_timeout`` seconds, or whose connection fails, is recorded with status 0 and the error,
and its user reconnects. A response saying ``Connection: close`` makes the user reconnect
before its next request. Users start at ``spawn_rate`` per second; the run stops ``duration``
seconds after the first one started, and requests in flight then are dropped.
"""

from __future__ import annotations

import contextlib
import heapq
import os
import resource
import select
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass
from urllib.parse import urlsplit

__all__ = ["EpollLoad", "Record", "run_epoll_load"]

Record = tuple[float, str, float, int, str]
"""One request: start (epoch s), backend, latency (ms), status (0: none), error ("" if none)."""

_MAX_BODY_NAME = 64
"""Longest response body still taken as a backend name (bytes)."""
_RECONNECT_DELAY = 0.05
"""Seconds a user waits before reconnecting after a failure (no hot loop on a dead server)."""
_TIMEOUT_SCAN = 0.1
_RECV = 65536


@dataclass
class _User:
    sock: socket.socket
    connected: bool = False
    sent_at: float = 0.0
    """perf_counter time the request in flight was sent (0: none in flight)."""
    buffer: bytes = b""
    served: int = 0


@dataclass
class EpollLoad:
    """One run's parameters (see the module notes).

    Attributes
    ----------
    url:
        ``http://host[:port]/path`` (an address, not a name: no resolver is asked).
    users:
        Connections, each a closed loop.
    spawn_rate:
        Users started per second.
    duration:
        Seconds from the first user's start to the stop.
    backend_header:
        Response header naming the backend; else a short one-line body names it.
    wait:
        Seconds a user waits between a response and its next request.
    request_timeout:
        Seconds a request may wait for its whole answer.
    """

    url: str
    users: int
    spawn_rate: float
    duration: float
    backend_header: str = "X-Backend"
    wait: float = 0.0
    request_timeout: float = 5.0


def _parse_head(head: bytes) -> tuple[int, dict[bytes, bytes]]:
    lines = head.split(b"\r\n")
    try:
        status = int(lines[0].split(b" ", 2)[1])
    except (IndexError, ValueError):
        status = 0
    headers: dict[bytes, bytes] = {}
    for line in lines[1:]:
        name, _, value = line.partition(b":")
        headers[name.strip().lower()] = value.strip()
    return status, headers


def _complete(buffer: bytes) -> tuple[int, dict[bytes, bytes], bytes, int] | None:
    """``(status, headers, body, bytes used)`` when ``buffer`` starts with a whole response."""
    end = buffer.find(b"\r\n\r\n")
    if end < 0:
        return None
    status, headers = _parse_head(buffer[:end])
    start = end + 4
    length = headers.get(b"content-length")
    if length is not None:
        stop = start + int(length)
        return (status, headers, buffer[start:stop], stop) if len(buffer) >= stop else None
    if headers.get(b"transfer-encoding", b"").lower() == b"chunked":
        body, at = b"", start
        while True:
            line_end = buffer.find(b"\r\n", at)
            if line_end < 0:
                return None
            size = int(buffer[at:line_end].split(b";")[0], 16)
            if size == 0:
                tail = buffer.find(b"\r\n\r\n", line_end)
                return None if tail < 0 else (status, headers, body, tail + 4)
            chunk_end = line_end + 2 + size
            if len(buffer) < chunk_end + 2:
                return None
            body += buffer[line_end + 2 : chunk_end]
            at = chunk_end + 2
    if status in (204, 304) or 100 <= status < 200:
        return status, headers, b"", start
    return None  # read until the server closes (see the EOF handling)


def run_epoll_load(load: EpollLoad, emit: Callable[[list[Record]], None]) -> float:
    """Run ``load``, handing records to ``emit`` in batches; return the run's wall time (s)."""
    parts = urlsplit(load.url)
    host = parts.hostname or ""
    port = parts.port or 80
    path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    request = (
        f"GET {path} HTTP/1.1\r\nHost: {parts.netloc}\r\nUser-Agent: cnibench\r\n"
        "Accept: */*\r\n\r\n"
    ).encode()
    header = load.backend_header.lower().encode()
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < load.users + 64 <= hard or (hard == resource.RLIM_INFINITY and soft < load.users):
        resource.setrlimit(resource.RLIMIT_NOFILE, (load.users + 64, hard))
    poller = select.epoll()
    users: dict[int, _User] = {}
    batch: list[Record] = []
    perf = time.perf_counter
    origin_perf, origin_epoch = perf(), time.time()
    heap: list[tuple[float, int, int]] = []
    """(due, sequence, what): what is -1 to open a connection, else the fd of a user whose
    wait is over."""
    sequence = 0

    def schedule(due: float, kind: int) -> None:
        nonlocal sequence
        sequence += 1
        heapq.heappush(heap, (due, sequence, kind))

    def record(sent: float, backend: str, latency: float, status: int, error: str) -> None:
        batch.append((origin_epoch + (sent - origin_perf), backend, latency, status, error))
        if len(batch) >= 4096:
            emit(batch[:])
            batch.clear()

    def connect() -> None:
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sock.setblocking(False)
        # Its first request counts from now, so a connection that fails is a failed request.
        user = _User(sock, sent_at=perf())
        users[sock.fileno()] = user
        poller.register(sock.fileno(), select.EPOLLOUT)
        try:
            sock.connect((host, port))
        except BlockingIOError:
            pass
        except OSError as exc:
            drop(sock.fileno(), failure=f"{type(exc).__name__}: {exc}", reconnect=_RECONNECT_DELAY)

    def drop(fd: int, *, failure: str = "", reconnect: float = 0.0) -> None:
        user = users.pop(fd)
        if failure and user.sent_at:
            record(user.sent_at, "", (perf() - user.sent_at) * 1000.0, 0, failure[:200])
        with contextlib.suppress(OSError):
            poller.unregister(fd)
        user.sock.close()
        schedule(perf() + reconnect, -1)

    def send(fd: int, user: _User) -> None:
        user.sent_at = perf()
        try:
            user.sock.send(request)
        except OSError as exc:
            drop(fd, failure=f"{type(exc).__name__}: {exc}", reconnect=_RECONNECT_DELAY)

    def answered(fd: int, user: _User, now: float) -> None:
        """Record the response once it is whole, then send the next request (or wait)."""
        done = _complete(user.buffer)
        if done is None:
            return
        status, headers, body, used = done
        user.buffer = user.buffer[used:]
        record(
            user.sent_at, _backend(headers, body, header), (now - user.sent_at) * 1000.0, status, ""
        )
        user.sent_at = 0.0
        user.served += 1
        if headers.get(b"connection", b"").lower() == b"close":
            drop(fd, reconnect=load.wait)
        elif load.wait > 0:
            schedule(now + load.wait, fd)
        else:
            send(fd, user)

    for index in range(load.users):
        schedule(origin_perf + index / load.spawn_rate, -1)
    stop = origin_perf + load.duration
    next_scan = origin_perf + _TIMEOUT_SCAN
    # Load pacing, not a wait: this loop reads the clock to start users at the spawn rate,
    # space a user's requests by `wait` and end the run at its duration
    # (tests/unit/test_waiting.py lists it).
    try:
        while True:
            now = perf()
            if now >= stop:
                break
            while heap and heap[0][0] <= now:
                _, _, kind = heapq.heappop(heap)
                if kind == -1:
                    connect()
                    continue
                waiting = users.get(kind)
                # The fd may since belong to a new connection: only a connected idle user sends.
                if waiting is not None and waiting.connected and not waiting.sent_at:
                    send(kind, waiting)
            timeout = stop - now
            if heap:
                timeout = min(timeout, heap[0][0] - now)
            timeout = max(0.0, min(timeout, next_scan - now))
            for fd, _events in poller.poll(timeout):
                user = users.get(fd)
                if user is None:
                    continue
                if not user.connected:
                    code = user.sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
                    if code:
                        # OSError picks the subclass: ConnectionRefusedError, TimeoutError...
                        error = OSError(code, os.strerror(code))
                        failure = f"{type(error).__name__}: {error}"
                        drop(fd, failure=failure, reconnect=_RECONNECT_DELAY)
                        continue
                    user.connected = True
                    poller.modify(fd, select.EPOLLIN)
                    send(fd, user)
                    continue
                try:
                    data = user.sock.recv(_RECV)
                except BlockingIOError:
                    continue
                except OSError as exc:
                    drop(fd, failure=f"{type(exc).__name__}: {exc}", reconnect=_RECONNECT_DELAY)
                    continue
                now = perf()
                if not data:
                    _closed(user, now, record, header)
                    drop(fd, failure="" if not user.sent_at else "ConnectionError: closed")
                    continue
                user.buffer += data
                if user.sent_at:
                    answered(fd, user, now)
            now = perf()
            if now >= next_scan:
                next_scan = now + _TIMEOUT_SCAN
                late = [
                    fd
                    for fd, u in users.items()
                    if u.sent_at and now - u.sent_at > load.request_timeout
                ]
                for fd in late:
                    drop(fd, failure=f"TimeoutError: no answer in {load.request_timeout:g} s")
    finally:
        for user in users.values():
            user.sock.close()
        poller.close()
    if batch:
        emit(batch)
    return perf() - origin_perf


def _backend(headers: dict[bytes, bytes], body: bytes, header: bytes) -> str:
    """The backend header's value, else a short one-line body (the echo backends' name)."""
    value = headers.get(header, b"")
    if value:
        return value.decode(errors="replace")
    name = body.strip()
    if 0 < len(name) <= _MAX_BODY_NAME and b"\n" not in name:
        return name.decode(errors="replace")
    return ""


def _closed(
    user: _User,
    now: float,
    record: Callable[[float, str, float, int, str], None],
    header: bytes,
) -> None:
    """A server that ends its answer by closing: the buffer is the whole response."""
    end = user.buffer.find(b"\r\n\r\n")
    if not user.sent_at or end < 0:
        return
    status, headers = _parse_head(user.buffer[:end])
    if b"content-length" in headers or b"transfer-encoding" in headers:
        return  # a short answer: the caller records the failure
    body = user.buffer[end + 4 :]
    record(user.sent_at, _backend(headers, body, header), (now - user.sent_at) * 1000.0, status, "")
    user.sent_at = 0.0
