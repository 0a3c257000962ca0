"""wrk: HTTP load with many connections, requests per second and latency percentiles.

:func:`wrk_argv` plans a run (always ``--latency`` so the percentile table is printed),
:func:`parse_wrk` reads the report into a :class:`WrkResult`. wrk prints numbers with unit
suffixes (``217.75us``, ``2.08ms``, ``22.39MB``, ``34.10k``); they are converted to µs, bytes
and plain counts. wrk's byte units are binary (1 KB = 1024 bytes), its count suffixes decimal.
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
    "WRK",
    "WrkErrors",
    "WrkResult",
    "parse_wrk",
    "wrk_argv",
    "wrk_measurements",
]

TOOL = "wrk"

_TIME_UNITS_US = {"us": 1.0, "ms": 1e3, "s": 1e6, "m": 60e6, "h": 3600e6}
_BYTE_UNITS = {"B": 1, "KB": 1024, "MB": 1024**2, "GB": 1024**3, "TB": 1024**4}
_COUNT_UNITS = {"": 1.0, "k": 1e3, "M": 1e6, "G": 1e9}


def wrk_argv(
    url: str,
    *,
    threads: int = 8,
    connections: int = 1000,
    duration: float = 30.0,
    timeout: float | None = 2.0,
) -> list[str]:
    """Command line of a wrk run with the latency distribution.

    Parameters
    ----------
    url:
        Target URL.
    threads:
        Worker threads (``-t``); wrk needs at least one connection per thread.
    connections:
        Connections kept open in total (``-c``), e.g. 1000 as in seed 004.
    duration:
        Test length in whole seconds (``-d``).
    timeout:
        A response slower than this many whole seconds counts as a timeout error
        (``--timeout``); ``None`` keeps wrk's 2 s.

    Returns
    -------
    list of str
        ``["wrk", "-t", T, "-c", C, "-d", "30s", "--latency", ..., url]``.

    Raises
    ------
    cnibench.errors.ConfigError
        On a URL without scheme, fewer connections than threads, or fractional durations.
    """
    if not re.match(r"^https?://[^/]+", url):
        raise ConfigError(f"wrk: url must look like http://host[:port]/path, got {url!r}")
    if threads < 1:
        raise ConfigError(f"wrk: threads must be at least 1, got {threads}")
    if connections < threads:
        raise ConfigError(
            f"wrk: connections ({connections}) must be at least the threads ({threads})"
        )
    argv = [
        "wrk",
        "-t",
        str(threads),
        "-c",
        str(connections),
        "-d",
        whole_seconds(duration, tool=TOOL, option="-d") + "s",
        "--latency",
    ]
    if timeout is not None:
        argv += ["--timeout", whole_seconds(timeout, tool=TOOL, option="--timeout") + "s"]
    argv.append(url)
    return argv


@dataclass(frozen=True)
class WrkErrors:
    """wrk's error counts: socket errors by kind and non-2xx/3xx responses."""

    connect: int = 0
    read: int = 0
    write: int = 0
    timeout: int = 0
    non_2xx_3xx: int = 0

    @property
    def total(self) -> int:
        """All errors together."""
        return self.connect + self.read + self.write + self.timeout + self.non_2xx_3xx


@dataclass(frozen=True)
class WrkResult:
    """wrk's report.

    Attributes
    ----------
    requests_per_second:
        Completed requests per second over the run.
    transfer_bytes_per_second:
        Bytes read per second (wrk's binary units converted to bytes).
    latency_avg_us, latency_stdev_us, latency_max_us:
        Request latency statistics in µs (wrk's per-thread table, which it already pools).
    latency_percentiles_us:
        Percent (50, 75, 90, 99) to latency in µs, from ``--latency``.
    thread_rps_avg, thread_rps_stdev, thread_rps_max:
        wrk's "Req/Sec" row: requests per second of one thread (its ``k``/``M`` suffixes
        expanded).
    requests:
        Requests completed.
    duration_s:
        Actual run time in seconds (slightly longer than requested).
    bytes_read:
        Bytes read in total.
    errors:
        Socket errors and non-2xx/3xx responses.
    threads, connections:
        As run.
    """

    requests_per_second: float
    transfer_bytes_per_second: float
    latency_avg_us: float
    latency_stdev_us: float
    latency_max_us: float
    latency_percentiles_us: Mapping[int, float] = field(repr=False)
    thread_rps_avg: float
    thread_rps_stdev: float
    thread_rps_max: float
    requests: int
    duration_s: float
    bytes_read: float
    errors: WrkErrors
    threads: int
    connections: int


_VALUE = r"([\d.]+)([a-zA-Z%]*)"
_LATENCY = re.compile(rf"^\s+Latency\s+{_VALUE}\s+{_VALUE}\s+{_VALUE}", re.MULTILINE)
_REQ_SEC = re.compile(
    r"^\s+Req/Sec\s+([\d.]+[kMG]?)\s+([\d.]+[kMG]?)\s+([\d.]+[kMG]?)", re.MULTILINE
)
_PERCENTILE = re.compile(r"^\s+(\d+)%\s+([\d.]+)(us|ms|s|m|h)\s*$", re.MULTILINE)
_SUMMARY = re.compile(
    r"^\s+(\d+) requests in ([\d.]+)(us|ms|s|m|h), ([\d.]+)([KMGT]?B) read", re.MULTILINE
)
_RPS = re.compile(r"^Requests/sec:\s+([\d.]+)", re.MULTILINE)
_TRANSFER = re.compile(r"^Transfer/sec:\s+([\d.]+)([KMGT]?B)", re.MULTILINE)
_SOCKET_ERRORS = re.compile(r"Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)")
_NON_2XX = re.compile(r"Non-2xx or 3xx responses: (\d+)")
_THREADS = re.compile(r"^\s+(\d+) threads and (\d+) connections", re.MULTILINE)
_ERROR_LINES = re.compile(r"^(unable to connect to .+|.*[Ee]rror.*)$", re.MULTILINE)


def parse_wrk(text: str, *, stderr: str = "") -> WrkResult:
    """Parse the report wrk printed with ``--latency``.

    Parameters
    ----------
    text:
        wrk's standard output.
    stderr:
        wrk's standard error (``unable to connect to HOST:PORT Connection refused``).

    Returns
    -------
    WrkResult
        Rate (requests/s, bytes/s), latency (µs) and error counts.

    Raises
    ------
    cnibench.errors.ToolError
        When wrk could not run (e.g. connection refused) and printed no report.
    cnibench.errors.ParseError
        When the report or its latency distribution is missing.
    """
    output = join_output(text, stderr)
    rps = _RPS.search(text)
    summary = _SUMMARY.search(text)
    if rps is None or summary is None:
        error = _ERROR_LINES.search(stderr) or _ERROR_LINES.search(text)
        if error:
            raise ToolError(f"wrk failed: {error.group(1).strip()}", tool=TOOL, output=output)
        raise ParseError("wrk output has no Requests/sec summary", tool=TOOL, output=output)
    latency = _LATENCY.search(text)
    transfer = _TRANSFER.search(text)
    percentiles = {int(p): _time_us(v, u) for p, v, u in _PERCENTILE.findall(text)}
    threads = _THREADS.search(text)
    req_sec = _REQ_SEC.search(text)
    if latency is None or transfer is None or not percentiles or threads is None or req_sec is None:
        raise ParseError(
            "wrk report lacks the latency table or distribution (run it with --latency)",
            tool=TOOL,
            output=output,
        )
    try:
        socket_errors = _SOCKET_ERRORS.search(text)
        non_2xx = _NON_2XX.search(text)
        connect, read, write, timeout = (
            (int(x) for x in socket_errors.groups()) if socket_errors else (0, 0, 0, 0)
        )
        errors = WrkErrors(
            connect=connect,
            read=read,
            write=write,
            timeout=timeout,
            non_2xx_3xx=int(non_2xx.group(1)) if non_2xx else 0,
        )
        return WrkResult(
            requests_per_second=float(rps.group(1)),
            transfer_bytes_per_second=_bytes(transfer.group(1), transfer.group(2)),
            latency_avg_us=_time_us(latency.group(1), latency.group(2)),
            latency_stdev_us=_time_us(latency.group(3), latency.group(4)),
            latency_max_us=_time_us(latency.group(5), latency.group(6)),
            latency_percentiles_us=MappingProxyType(percentiles),
            thread_rps_avg=_count(req_sec.group(1)),
            thread_rps_stdev=_count(req_sec.group(2)),
            thread_rps_max=_count(req_sec.group(3)),
            requests=int(summary.group(1)),
            duration_s=_time_us(summary.group(2), summary.group(3)) / 1e6,
            bytes_read=_bytes(summary.group(4), summary.group(5)),
            errors=errors,
            threads=int(threads.group(1)),
            connections=int(threads.group(2)),
        )
    except KeyError as exc:
        raise ParseError(f"wrk printed an unknown unit {exc}", tool=TOOL, output=output) from exc


def _time_us(value: str, unit: str) -> float:
    """A wrk duration (``217.75us``, ``2.08ms``, ``1.10s``) in µs."""
    return float(value) * _TIME_UNITS_US[unit]


def _bytes(value: str, unit: str) -> float:
    """A wrk size (``22.39MB``) in bytes; wrk's KB/MB/GB are powers of 1024."""
    return float(value) * _BYTE_UNITS[unit]


def _count(text: str) -> float:
    """A wrk count with a decimal suffix (``34.10k`` -> 34100.0)."""
    match = re.fullmatch(r"([\d.]+)([kMG]?)", text)
    if match is None:
        raise KeyError(text)
    return float(match.group(1)) * _COUNT_UNITS[match.group(2)]


def _client_argv(target: ToolTarget, profile: MeasurementProfile) -> list[str]:
    return wrk_argv(
        target.url,
        threads=profile.wrk_threads,
        connections=profile.wrk_connections,
        duration=profile.duration,
    )


def wrk_measurements(stdout: str, stderr: str) -> list[Measurement]:
    """Requests per second, mean, median and 99th percentile latency (µs), and errors."""
    parsed = parse_wrk(stdout, stderr=stderr)
    return [
        Measurement("requests_per_second", parsed.requests_per_second, "requests/s"),
        Measurement("latency_avg", parsed.latency_avg_us, "us"),
        Measurement("latency_p50", parsed.latency_percentiles_us[50], "us"),
        Measurement("latency_p99", parsed.latency_percentiles_us[99], "us"),
        Measurement("errors", float(parsed.errors.total), "count"),
    ]


WRK = MeasurementTool(
    name=TOOL,
    package="wrk",
    purpose="HTTP requests/s and latency",
    # Debian's wrk prints its package version (``wrk debian/4.1.0-3+b2``).
    version=VersionProbe("wrk", ("--version",), rf"wrk (?:\S*/)?{VERSION_NUMBER}"),
    client=ClientMeasurement(
        server="http-echo",
        argv=_client_argv,
        timeout=lambda profile: profile.duration + 30,
        measurements=wrk_measurements,
        raw_file="wrk.txt",
    ),
)
"""wrk in the registry: the profile's threads and connections for its duration against the
pod's HTTP echo."""
