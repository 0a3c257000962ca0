"""Sequential HTTP request timing with curl: one line per request (seed 002's method).

Seed 002 timed 10000 sequential requests, one curl process each. Here a single curl process
makes all of them: the URL carries a curl glob (``?seq=[1-10000]``), so curl fetches it
``count`` times one after the other, discards the bodies and prints one ``--write-out`` line
per transfer with the status, the timings and the ``X-Backend`` response header (the name of the
echo backend that answered; curl >= 7.84 for ``%header{...}``). By default every request also
opens its own TCP connection (``Connection: close``), as a fresh curl process would, so the
times include the TCP handshake.

:func:`http_timing_argv` builds that command, :func:`parse_http_timing` reads its lines into an
:class:`HttpTimingResult`.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType

import numpy as np
import numpy.typing as npt

from cnibench.errors import ConfigError, ParseError, ToolError
from cnibench.tools._common import format_number, join_output, require_positive
from cnibench.tools.registry import VERSION_NUMBER, MeasurementTool, VersionProbe

__all__ = [
    "CURL",
    "HttpSample",
    "HttpTimingResult",
    "http_timing_argv",
    "parse_http_timing",
]

TOOL = "curl"
SEQUENCE_PARAMETER = "seq"
"""Query parameter that carries the request number (it makes curl repeat the URL)."""
_FIELDS = 8


def http_timing_argv(
    url: str,
    *,
    count: int = 10000,
    backend_header: str = "X-Backend",
    reuse_connections: bool = False,
    connect_timeout: float = 5.0,
    max_time: float = 10.0,
) -> list[str]:
    """One curl command that makes ``count`` sequential requests and times each.

    Parameters
    ----------
    url:
        Target URL (``http://host[:port]/path``); must not contain ``[]{}`` after the host,
        because curl would read them as a glob.
    count:
        Number of requests, e.g. 10000 as in seed 002.
    backend_header:
        Response header naming the backend that answered; its value becomes
        :attr:`HttpSample.backend` (empty when the header is absent).
    reuse_connections:
        Keep one connection open for all requests. By default each request opens its own
        connection, as a separate curl process per request does.
    connect_timeout:
        Seconds curl waits for each TCP connection (``--connect-timeout``).
    max_time:
        Seconds one request may take in total (``--max-time``), which bounds the whole command
        by ``count * max_time``.

    Returns
    -------
    list of str
        ``["curl", "--silent", "--output", "/dev/null", "--write-out", FORMAT, ...,
        "http://host/path?seq=[1-N]"]``; no shell needed.

    Raises
    ------
    cnibench.errors.ConfigError
        On a URL without ``http(s)://``, glob characters in the path, a header name with
        spaces, or non-positive counts and times.
    """
    match = re.match(r"^(https?://(?:\[[0-9A-Fa-f:.]+\]|[^/?#\[\]{}]+))([^#]*)$", url)
    if match is None:
        raise ConfigError(f"curl timing: url must look like http://host[:port]/path, got {url!r}")
    rest = match.group(2) or "/"
    if any(c in rest for c in "[]{}"):
        raise ConfigError(
            f"curl timing: url path must not contain []{{}} (curl globs), got {url!r}"
        )
    if count < 1:
        raise ConfigError(f"curl timing: count must be at least 1, got {count}")
    if not re.fullmatch(r"[A-Za-z0-9-]+", backend_header):
        raise ConfigError(f"curl timing: backend_header is not a header name: {backend_header!r}")
    require_positive(connect_timeout, tool=TOOL, name="connect_timeout")
    require_positive(max_time, tool=TOOL, name="max_time")
    separator = "&" if "?" in rest else "?"
    write_out = "\\t".join(
        [
            "%{http_code}",
            "%{time_total}",
            "%{time_connect}",
            "%{time_starttransfer}",
            "%{num_connects}",
            "%{exitcode}",
            f"%header{{{backend_header.lower()}}}",
            "%{errormsg}",
        ]
    )
    argv = [
        "curl",
        "--silent",
        "--output",
        "/dev/null",
        "--write-out",
        write_out + "\\n",
        "--connect-timeout",
        format_number(connect_timeout),
        "--max-time",
        format_number(max_time),
    ]
    if not reuse_connections:
        argv += ["--header", "Connection: close"]
    argv.append(f"{match.group(1)}{rest}{separator}{SEQUENCE_PARAMETER}=[1-{count}]")
    return argv


@dataclass(frozen=True)
class HttpSample:
    """One request.

    Attributes
    ----------
    total_time_us:
        Time from the start of the request to the last byte of the response, in µs (curl's
        ``time_total``; includes the TCP handshake when the connection is new).
    status:
        HTTP status; 0 when no response arrived.
    backend:
        Value of the backend header, ``""`` when absent.
    connect_time_us:
        Time until the TCP connection was established, in µs (0 when reused or failed).
    start_transfer_us:
        Time until the first response byte, in µs.
    new_connections:
        Connections curl opened for this request (0 when it reused one).
    curl_exit_code:
        curl's result code for this transfer (0 = success, 7 = could not connect, 28 = timeout).
    error:
        curl's error message for a failed transfer, ``""`` otherwise.
    """

    total_time_us: float
    status: int
    backend: str
    connect_time_us: float
    start_transfer_us: float
    new_connections: int
    curl_exit_code: int
    error: str

    @property
    def ok(self) -> bool:
        """Whether the transfer succeeded with a 2xx status."""
        return self.curl_exit_code == 0 and 200 <= self.status < 300


@dataclass(frozen=True)
class HttpTimingResult:
    """All requests of one timing run, in order.

    Attributes
    ----------
    samples:
        One entry per request, in the order they were sent.
    """

    samples: tuple[HttpSample, ...]

    @property
    def count(self) -> int:
        """Number of requests made."""
        return len(self.samples)

    @property
    def failed(self) -> int:
        """Requests that did not end with a 2xx response."""
        return sum(1 for s in self.samples if not s.ok)

    def total_times_us(self, *, successful_only: bool = True) -> npt.NDArray[np.float64]:
        """Request times in µs as an array, the values the statistics work on.

        Parameters
        ----------
        successful_only:
            Leave out failed requests (their time is when curl gave up, not a response time).
        """
        chosen = [s.total_time_us for s in self.samples if s.ok or not successful_only]
        return np.asarray(chosen, dtype=np.float64)

    def statuses(self) -> npt.NDArray[np.int64]:
        """HTTP status of every request (0 where none arrived)."""
        return np.asarray([s.status for s in self.samples], dtype=np.int64)

    def backend_counts(self) -> Mapping[str, int]:
        """Number of successful responses per backend name."""
        return MappingProxyType(dict(Counter(s.backend for s in self.samples if s.ok)))


def parse_http_timing(text: str, *, stderr: str = "") -> HttpTimingResult:
    """Parse the per-request lines of the command built by :func:`http_timing_argv`.

    Parameters
    ----------
    text:
        curl's standard output: one tab-separated line per request.
    stderr:
        curl's standard error, kept in the error's ``output``.

    Returns
    -------
    HttpTimingResult
        Every request's status, backend and times (µs).

    Raises
    ------
    cnibench.errors.ToolError
        When not a single request got a response (e.g. connection refused every time); the
        message is curl's error for the first request.
    cnibench.errors.ParseError
        When there are no lines or a line is not in the expected format.
    """
    output = join_output(text, stderr)
    samples: list[HttpSample] = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        fields = line.split("\t", _FIELDS - 1)
        if len(fields) != _FIELDS:
            raise ParseError(
                f"curl timing line {number} has {len(fields)} fields, expected {_FIELDS}: "
                f"{line[:120]!r}",
                tool=TOOL,
                output=output,
            )
        try:
            samples.append(_sample(fields))
        except ValueError as exc:
            raise ParseError(
                f"curl timing line {number} is malformed ({exc}): {line[:120]!r}",
                tool=TOOL,
                output=output,
            ) from exc
    if not samples:
        raise ParseError("curl printed no timing lines", tool=TOOL, output=output)
    if not any(s.status for s in samples):
        first = samples[0]
        reason = first.error or f"curl exit code {first.curl_exit_code}"
        raise ToolError(
            f"curl timing: none of {len(samples)} requests got a response: {reason}",
            tool=TOOL,
            output=output,
        )
    return HttpTimingResult(samples=tuple(samples))


def _sample(fields: list[str]) -> HttpSample:
    code, total, connect, start_transfer, connects, exit_code, backend, error = fields
    total_us = _seconds_to_us(total)
    return HttpSample(
        total_time_us=total_us,
        status=int(code),
        backend=backend.strip(),
        connect_time_us=_seconds_to_us(connect),
        start_transfer_us=_seconds_to_us(start_transfer),
        new_connections=int(connects),
        curl_exit_code=int(exit_code),
        error=error.strip(),
    )


def _seconds_to_us(value: str) -> float:
    seconds = float(value)
    if not math.isfinite(seconds) or seconds < 0:
        raise ValueError(f"bad time {value!r}")
    # curl prints whole microseconds; rounding removes float noise from the conversion.
    return round(seconds * 1e6, 3)


CURL = MeasurementTool(
    name=TOOL,
    package="curl",
    purpose="sequential request-response timing",
    version=VersionProbe("curl", ("--version",), rf"curl {VERSION_NUMBER}"),
)
"""curl in the registry; the scenarios that time request-response (wireguard, l7) run it
themselves, so it has no baseline measurement."""
