"""ApacheBench (``ab``): HTTP requests per second and request latency.

:func:`ab_argv` plans a run, :func:`parse_ab` reads ab's report into an :class:`AbResult`.
ab writes its report to standard output and its errors (``apr_socket_connect(): Connection
refused (111)``) to standard error, exiting non-zero; pass both streams to the parser.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from cnibench.errors import ConfigError, ParseError, ToolError
from cnibench.records import Measurement
from cnibench.tools._common import join_output, whole_seconds
from cnibench.tools.registry import (
    VERSION_NUMBER,
    ClientMeasurement,
    MeasurementProfile,
    MeasurementTool,
    ToolTarget,
    VersionProbe,
)

__all__ = [
    "AB",
    "AbConnectionTimes",
    "AbResult",
    "ab_argv",
    "ab_measurements",
    "parse_ab",
]

TOOL = "ab"
DEFAULT_REQUESTS = 50000
"""ab's own request cap when only a time limit is given, and seed 004's request count."""
TIMELIMIT_REQUEST_CAP = 1_000_000
"""Request cap used with a time limit, so the time limit (not ab's 50000) ends the run.

ab allocates per-request statistics up front (about 50 bytes each), so the cap stays modest.
"""


def ab_argv(
    url: str,
    *,
    requests: int | None = None,
    concurrency: int = 10,
    keepalive: bool = False,
    timelimit: float | None = None,
    method: str | None = None,
    timeout: float | None = None,
) -> list[str]:
    """Command line of an ab run.

    Parameters
    ----------
    url:
        Target URL with a path (ab requires at least ``/``).
    requests:
        Number of requests (``-n``). ``None`` means 50000 without a time limit, and
        :data:`TIMELIMIT_REQUEST_CAP` with one.
    concurrency:
        Requests in flight at once (``-c``).
    keepalive:
        Reuse connections (``-k``); by default every request opens its own connection.
    timelimit:
        Stop after this many whole seconds (``-t``), e.g. 20 as in seed 003's L7 test.
    method:
        HTTP method (``-m``), e.g. ``"POST"`` to probe an L7 policy; ``None`` sends GET.
    timeout:
        Seconds to wait for each response (``-s``, whole seconds); ``None`` keeps ab's 30 s.

    Returns
    -------
    list of str
        ``["ab", ("-t", T,) "-n", N, "-c", C, ..., url]``. With a time limit ``-t`` comes first
        because ab resets ``-n`` to 50000 when it parses ``-t``.

    Raises
    ------
    cnibench.errors.ConfigError
        On a URL without scheme and path, or non-positive counts and durations.
    """
    if not re.match(r"^https?://[^/]+/", url):
        raise ConfigError(f"ab: url must look like http://host[:port]/path, got {url!r}")
    if concurrency < 1:
        raise ConfigError(f"ab: concurrency must be at least 1, got {concurrency}")
    if requests is None:
        requests = DEFAULT_REQUESTS if timelimit is None else TIMELIMIT_REQUEST_CAP
    if requests < concurrency:
        raise ConfigError(
            f"ab: requests ({requests}) must be at least the concurrency ({concurrency})"
        )
    argv = ["ab"]
    if timelimit is not None:
        argv += ["-t", whole_seconds(timelimit, tool=TOOL, option="-t")]
    argv += ["-n", str(requests), "-c", str(concurrency)]
    if keepalive:
        argv.append("-k")
    if method is not None:
        if not re.fullmatch(r"[A-Z]+", method):
            raise ConfigError(f"ab: method must be an upper-case HTTP method, got {method!r}")
        argv += ["-m", method]
    if timeout is not None:
        argv += ["-s", whole_seconds(timeout, tool=TOOL, option="-s")]
    argv.append(url)
    return argv


@dataclass(frozen=True)
class AbConnectionTimes:
    """One row of ab's "Connection Times (ms)" table, in ms (ab rounds most to integers)."""

    min: float
    mean: float
    sd: float
    median: float
    max: float


@dataclass(frozen=True)
class AbResult:
    """ab's report.

    Attributes
    ----------
    requests_per_second:
        Completed requests per second of wall time.
    time_per_request_ms:
        Mean time of one request as a client saw it, in ms (concurrency x wall time / n).
    time_per_request_all_ms:
        Wall time divided by the number of requests, in ms (ab's "across all concurrent
        requests"), the inverse of the rate.
    complete_requests, failed_requests:
        Request counts; a failed request is a connect, receive, length or exception failure.
    failed_connect, failed_receive, failed_length, failed_exceptions:
        Breakdown of ``failed_requests``. ``failed_length`` counts responses whose length
        differed from the first one, which is not a network failure.
    non_2xx:
        Responses with a status outside 200-299.
    keepalive_requests:
        Requests sent on a reused connection (``-k``).
    time_taken_s:
        Wall time of the run in seconds.
    total_transferred_bytes, html_transferred_bytes:
        Bytes received in total and in bodies.
    transfer_rate_kbytes_per_second:
        Received kB/s (ab's kilobytes of 1024 bytes).
    percentiles_ms:
        Share of requests served within a time: percent (50, 66, ..., 100) to ms.
    connection_times_ms:
        The Connect/Processing/Waiting/Total rows.
    concurrency:
        Concurrency level of the run.
    """

    requests_per_second: float
    time_per_request_ms: float
    time_per_request_all_ms: float
    complete_requests: int
    failed_requests: int
    failed_connect: int
    failed_receive: int
    failed_length: int
    failed_exceptions: int
    non_2xx: int
    keepalive_requests: int
    time_taken_s: float
    total_transferred_bytes: int
    html_transferred_bytes: int
    transfer_rate_kbytes_per_second: float
    percentiles_ms: Mapping[int, float] = field(repr=False)
    connection_times_ms: Mapping[str, AbConnectionTimes] = field(repr=False)
    concurrency: int


_ERROR = re.compile(
    r"^(?P<msg>(?:apr_\w+(?:\(\))?|ab): .+)$|^(?P<timeout>Total of \d+ requests completed)$",
    re.MULTILINE,
)
_NUMBER = r"([\d.]+)"
_FIELDS = {
    "concurrency": re.compile(r"^Concurrency Level:\s+(\d+)", re.MULTILINE),
    "time_taken": re.compile(rf"^Time taken for tests:\s+{_NUMBER} seconds", re.MULTILINE),
    "complete": re.compile(r"^Complete requests:\s+(\d+)", re.MULTILINE),
    "failed": re.compile(r"^Failed requests:\s+(\d+)", re.MULTILINE),
    "total": re.compile(r"^Total transferred:\s+(\d+) bytes", re.MULTILINE),
    "html": re.compile(r"^HTML transferred:\s+(\d+) bytes", re.MULTILINE),
    "rps": re.compile(rf"^Requests per second:\s+{_NUMBER} \[#/sec\] \(mean\)", re.MULTILINE),
    "tpr": re.compile(rf"^Time per request:\s+{_NUMBER} \[ms\] \(mean\)$", re.MULTILINE),
    "tpr_all": re.compile(
        rf"^Time per request:\s+{_NUMBER} \[ms\] \(mean, across all concurrent requests\)",
        re.MULTILINE,
    ),
    "rate": re.compile(rf"^Transfer rate:\s+{_NUMBER} \[Kbytes/sec\] received", re.MULTILINE),
}
_OPTIONAL_COUNTS = {
    "non_2xx": re.compile(r"^Non-2xx responses:\s+(\d+)", re.MULTILINE),
    "keepalive": re.compile(r"^Keep-Alive requests:\s+(\d+)", re.MULTILINE),
}
_FAILED_BREAKDOWN = re.compile(
    r"\(Connect: (\d+), Receive: (\d+), Length: (\d+), Exceptions: (\d+)\)"
)
_PERCENTILE = re.compile(r"^\s+(\d+)%\s+(\d+)", re.MULTILINE)
_CONNECTION_ROW = re.compile(
    r"^(Connect|Processing|Waiting|Total):\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)",
    re.MULTILINE,
)


def parse_ab(text: str, *, stderr: str = "") -> AbResult:
    """Parse the report ab printed.

    Parameters
    ----------
    text:
        ab's standard output.
    stderr:
        ab's standard error, where it prints why it gave up.

    Returns
    -------
    AbResult
        Rate (requests/s), latency (ms) and request counts.

    Raises
    ------
    cnibench.errors.ToolError
        When ab aborted (e.g. ``apr_socket_connect(): Connection refused (111)``) and printed
        no report.
    cnibench.errors.ParseError
        When the report is incomplete.
    """
    output = join_output(text, stderr)
    values: dict[str, str] = {}
    for name, pattern in _FIELDS.items():
        match = pattern.search(text)
        if match:
            values[name] = match.group(1)
    if len(values) < len(_FIELDS):
        error = _ERROR.search(stderr) or _ERROR.search(text)
        if error:
            message = (error["msg"] or error["timeout"]).strip()
            raise ToolError(f"ab failed: {message}", tool=TOOL, output=output)
        missing = sorted(set(_FIELDS) - set(values))
        raise ParseError(f"ab report is incomplete, missing {missing}", tool=TOOL, output=output)

    breakdown = _FAILED_BREAKDOWN.search(text)
    failed_parts = [int(x) for x in breakdown.groups()] if breakdown else [0, 0, 0, 0]
    counts = {}
    for name, pattern in _OPTIONAL_COUNTS.items():
        match = pattern.search(text)
        counts[name] = int(match.group(1)) if match else 0
    percentiles = {int(p): float(v) for p, v in _PERCENTILE.findall(text)}
    rows = {
        m[0]: AbConnectionTimes(*(float(x) for x in m[1:])) for m in _CONNECTION_ROW.findall(text)
    }
    return AbResult(
        requests_per_second=float(values["rps"]),
        time_per_request_ms=float(values["tpr"]),
        time_per_request_all_ms=float(values["tpr_all"]),
        complete_requests=int(values["complete"]),
        failed_requests=int(values["failed"]),
        failed_connect=failed_parts[0],
        failed_receive=failed_parts[1],
        failed_length=failed_parts[2],
        failed_exceptions=failed_parts[3],
        non_2xx=counts["non_2xx"],
        keepalive_requests=counts["keepalive"],
        time_taken_s=float(values["time_taken"]),
        total_transferred_bytes=int(values["total"]),
        html_transferred_bytes=int(values["html"]),
        transfer_rate_kbytes_per_second=float(values["rate"]),
        percentiles_ms=MappingProxyType(percentiles),
        connection_times_ms=MappingProxyType(rows),
        concurrency=int(values["concurrency"]),
    )


def _client_argv(target: ToolTarget, profile: MeasurementProfile) -> list[str]:
    # Concurrency 10, as seed 004.
    return ab_argv(target.url, requests=profile.ab_requests, concurrency=10)


def ab_measurements(stdout: str, stderr: str) -> list[Measurement]:
    """Requests per second, mean time per request (ms) and failed requests."""
    parsed = parse_ab(stdout, stderr=stderr)
    return [
        Measurement("requests_per_second", parsed.requests_per_second, "requests/s"),
        Measurement("time_per_request", parsed.time_per_request_ms, "ms"),
        Measurement("failed_requests", float(parsed.failed_requests), "count"),
    ]


AB = MeasurementTool(
    name=TOOL,
    package="apache2-utils",
    purpose="HTTP requests/s (ApacheBench)",
    version=VersionProbe("ab", ("-V",), rf"ApacheBench, Version {VERSION_NUMBER}"),
    client=ClientMeasurement(
        server="http-echo",
        argv=_client_argv,
        timeout=lambda profile: 300.0,
        measurements=ab_measurements,
        raw_file="ab.txt",
    ),
)
"""ab in the registry: the profile's request count at concurrency 10 against the pod's HTTP
echo."""
