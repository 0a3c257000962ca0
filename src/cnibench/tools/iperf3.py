"""iperf3: throughput, retransmissions and TCP round-trip time.

Two pure functions: :func:`iperf3_client_argv` plans a client run (always with ``-J`` so the
output is machine readable), :func:`parse_iperf3` turns that JSON into an :class:`Iperf3Result`.
:func:`iperf3_server_argv` starts the matching server. Nothing here runs a process.

The raw JSON is described by TypedDicts (``total=False``: iperf3 omits keys depending on the
protocol, the direction and its version); values are read defensively and a missing mandatory
field is a :class:`~cnibench.errors.ParseError`.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, TypedDict, cast

from cnibench.errors import ConfigError, ParseError, ToolError
from cnibench.records import Measurement
from cnibench.tools._common import format_number, join_output, require_positive, whole_seconds
from cnibench.tools.registry import (
    VERSION_NUMBER,
    ClientMeasurement,
    MeasurementProfile,
    MeasurementTool,
    ToolTarget,
    VersionProbe,
)

__all__ = [
    "DEFAULT_MSS_BYTES",
    "IPERF3",
    "Iperf3Connected",
    "Iperf3End",
    "Iperf3Interval",
    "Iperf3IntervalJson",
    "Iperf3Json",
    "Iperf3Result",
    "Iperf3Start",
    "Iperf3StreamEnd",
    "Iperf3Sum",
    "Iperf3TestStart",
    "iperf3_client_argv",
    "iperf3_measurements",
    "iperf3_pairs_measurements",
    "iperf3_result_measurements",
    "iperf3_server_argv",
    "parse_iperf3",
]

TOOL = "iperf3"
DEFAULT_MSS_BYTES = 1448
"""Sender MSS in bytes assumed when iperf3's JSON names none (a 1500-byte MTU less 20 bytes of
IPv4, 20 of TCP and 12 of timestamp options)."""


# --- raw JSON (iperf 3.x ``-J``) -------------------------------------------------------------


class Iperf3Connected(TypedDict, total=False):
    """One entry of ``start.connected``: a data stream's socket addresses."""

    socket: int
    local_host: str
    local_port: int
    remote_host: str
    remote_port: int


class Iperf3TestStart(TypedDict, total=False):
    """``start.test_start``: the test as negotiated (``reverse`` is 0 or 1)."""

    protocol: str
    num_streams: int
    blksize: int
    omit: int
    duration: int
    reverse: int
    target_bitrate: int


class Iperf3Start(TypedDict, total=False):
    """``start``: connection set-up and the negotiated test. ``tcp_mss_default`` is the
    control connection's MSS in bytes (``TCP_MAXSEG``), ``tcp_mss`` the one set with ``-M``;
    TCP only."""

    connected: list[Iperf3Connected]
    version: str
    system_info: str
    test_start: Iperf3TestStart
    tcp_mss_default: int
    tcp_mss: int


class Iperf3Sum(TypedDict, total=False):
    """A summary block (``sum``, ``sum_sent``, ``sum_received``, or one stream side).

    ``bits_per_second`` is in bits/s; ``mean_rtt``/``min_rtt``/``max_rtt`` are in µs and only
    present on a TCP sender side; ``jitter_ms``/``lost_percent`` only for UDP.
    """

    start: float
    end: float
    seconds: float
    bytes: int
    bits_per_second: float
    retransmits: int
    mean_rtt: int
    min_rtt: int
    max_rtt: int
    jitter_ms: float
    lost_packets: int
    packets: int
    lost_percent: float
    omitted: bool
    sender: bool


class Iperf3StreamEnd(TypedDict, total=False):
    """One entry of ``end.streams``: TCP has ``sender``/``receiver``, UDP has ``udp``."""

    sender: Iperf3Sum
    receiver: Iperf3Sum
    udp: Iperf3Sum


class Iperf3IntervalJson(TypedDict, total=False):
    """One entry of ``intervals``: per-stream blocks and their ``sum``."""

    streams: list[Iperf3Sum]
    sum: Iperf3Sum


class Iperf3End(TypedDict, total=False):
    """``end``: totals of the test (bits/s, CPU %)."""

    streams: list[Iperf3StreamEnd]
    sum: Iperf3Sum
    sum_sent: Iperf3Sum
    sum_received: Iperf3Sum
    cpu_utilization_percent: dict[str, float]


class Iperf3Json(TypedDict, total=False):
    """Top level of ``iperf3 -J`` output; ``error`` is present when the test failed."""

    start: Iperf3Start
    intervals: list[Iperf3IntervalJson]
    end: Iperf3End
    error: str


# --- argv builders ----------------------------------------------------------------------------


def iperf3_client_argv(
    server: str,
    *,
    port: int = 5201,
    duration: float = 10.0,
    udp: bool = False,
    reverse: bool = False,
    parallel: int = 1,
    bitrate: int | None = None,
    interval: float = 1.0,
    connect_timeout_ms: int | None = 5000,
) -> list[str]:
    """Command line of an iperf3 client that reports in JSON.

    Parameters
    ----------
    server:
        Address or name of the iperf3 server.
    port:
        Server TCP port (the control connection; UDP tests use it too).
    duration:
        Test length in seconds; iperf3 only takes whole seconds.
    udp:
        UDP instead of TCP (``-u``). Without ``bitrate`` iperf3 sends only 1 Mbit/s of UDP.
    reverse:
        The server sends and the client receives (``-R``).
    parallel:
        Number of parallel streams (``-P``).
    bitrate:
        Target rate in bits/s (``-b``); ``None`` keeps iperf3's default (unlimited for TCP).
    interval:
        Seconds between interval reports (``-i``), the resolution of
        :attr:`Iperf3Result.intervals`.
    connect_timeout_ms:
        Give up on the control connection after this many milliseconds (``--connect-timeout``);
        ``None`` waits as long as the kernel does.

    Returns
    -------
    list of str
        ``["iperf3", "-c", server, "-p", ..., "-t", ..., "-J", ...]``, runnable as is.

    Raises
    ------
    cnibench.errors.ConfigError
        On a non-positive or fractional duration, or any other out-of-range value.
    """
    if not server:
        raise ConfigError("iperf3: server address must not be empty")
    _check_port(port)
    if parallel < 1:
        raise ConfigError(f"iperf3: parallel must be at least 1, got {parallel}")
    require_positive(interval, tool=TOOL, name="interval")
    argv = [
        "iperf3",
        "-c",
        server,
        "-p",
        str(port),
        "-t",
        whole_seconds(duration, tool=TOOL, option="-t"),
        "-i",
        format_number(interval),
        "-J",
    ]
    if udp:
        argv.append("-u")
    if reverse:
        argv.append("-R")
    if parallel != 1:
        argv += ["-P", str(parallel)]
    if bitrate is not None:
        if bitrate <= 0:
            raise ConfigError(f"iperf3: bitrate must be positive bits/s, got {bitrate}")
        argv += ["-b", str(int(bitrate))]
    if connect_timeout_ms is not None:
        if connect_timeout_ms <= 0:
            raise ConfigError(
                f"iperf3: connect_timeout_ms must be positive, got {connect_timeout_ms}"
            )
        argv += ["--connect-timeout", str(int(connect_timeout_ms))]
    return argv


def iperf3_server_argv(
    *, port: int = 5201, one_off: bool = True, bind: str | None = None
) -> list[str]:
    """Command line of an iperf3 server.

    Parameters
    ----------
    port:
        TCP port to listen on.
    one_off:
        Serve one test, then exit (``-1``); otherwise serve tests until stopped.
    bind:
        Listen only on this address (``-B``); ``None`` listens on all addresses.

    Returns
    -------
    list of str
        ``["iperf3", "-s", "-p", port, ...]``.
    """
    _check_port(port)
    argv = ["iperf3", "-s", "-p", str(port)]
    if one_off:
        argv.append("-1")
    if bind:
        argv += ["-B", bind]
    return argv


def _check_port(port: int) -> None:
    if not 0 < port < 65536:
        raise ConfigError(f"iperf3: port must be in 1..65535, got {port}")


# --- parser -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Iperf3Interval:
    """One interval report summed over the parallel streams.

    Attributes
    ----------
    start, end:
        Seconds since the start of the test.
    bits_per_second:
        Throughput in the interval, in bits/s (sending side of this client's direction).
    retransmits:
        TCP retransmissions in the interval; ``None`` when the local side was not the TCP
        sender (UDP, or ``-R``).
    """

    start: float
    end: float
    bits_per_second: float
    retransmits: int | None


@dataclass(frozen=True)
class Iperf3Result:
    """What an iperf3 client run measured.

    Attributes
    ----------
    sent_bits_per_second:
        Sender-side mean throughput in bits/s (``end.sum_sent``).
    received_bits_per_second:
        Receiver-side mean throughput in bits/s (``end.sum_received``), the goodput a
        benchmark should quote.
    retransmits:
        TCP retransmissions over the test, summed over streams (``end.sum_sent``); ``None``
        for UDP. With ``-R`` the server reports its own count to the client.
    mean_rtt_us:
        Mean smoothed TCP round-trip time in µs, averaged over streams with equal weight;
        ``None`` when the local side was not the TCP sender (UDP, ``-R``), because iperf3
        only reads the RTT from the sending socket.
    intervals:
        Per-interval throughput.
    protocol:
        ``"TCP"`` or ``"UDP"``.
    reverse:
        Whether the server was the sender (``-R``).
    parallel:
        Number of parallel streams.
    duration_s:
        Requested test length in seconds.
    jitter_ms, lost_percent:
        UDP receiver jitter in ms and datagram loss in percent; ``None`` for TCP.
    mss_bytes:
        The sender's MSS in bytes used to count segments: ``start.tcp_mss`` (``-M``), else
        ``start.tcp_mss_default`` (iperf3's ``TCP_MAXSEG`` of its control connection, on the
        same path as the data streams), else :data:`DEFAULT_MSS_BYTES`; ``None`` for UDP. On a
        pod path (MTU 1450-9000 bytes) it is the path's MSS; on loopback iperf 3.12 reads
        32768, below the 65483 bytes a loopback segment may carry, so a loopback rate is an
        upper estimate.
    sent_bytes:
        Bytes the sender sent (``end.sum_sent.bytes``).
    remote_host, local_host:
        Addresses of the first data stream as the client saw them.
    cpu_host_percent, cpu_remote_percent:
        iperf3's own CPU use of the client and of the server, in percent of one core.
    raw:
        The parsed JSON document, for anything not lifted into a field.
    """

    sent_bits_per_second: float
    received_bits_per_second: float
    retransmits: int | None
    mean_rtt_us: float | None
    intervals: tuple[Iperf3Interval, ...]
    protocol: str
    reverse: bool
    parallel: int
    duration_s: float
    jitter_ms: float | None
    lost_percent: float | None
    mss_bytes: int | None
    sent_bytes: int
    remote_host: str
    local_host: str
    cpu_host_percent: float | None
    cpu_remote_percent: float | None
    raw: Iperf3Json = field(repr=False, compare=False)

    @property
    def segments_sent(self) -> float | None:
        """Segments the sender sent, estimated as :attr:`sent_bytes` over :attr:`mss_bytes`
        (iperf3 reports bytes; the kernel's retransmission count is in segments); ``None``
        for UDP."""
        return None if self.mss_bytes is None else self.sent_bytes / self.mss_bytes

    @property
    def retransmit_rate(self) -> float | None:
        """Retransmitted over sent segments (a ratio): :attr:`retransmits` over
        :attr:`segments_sent`; ``None`` for UDP or when nothing was sent."""
        segments = self.segments_sent
        if self.retransmits is None or not segments:
            return None
        return self.retransmits / segments


def parse_iperf3(text: str, *, stderr: str = "") -> Iperf3Result:
    """Parse the JSON an iperf3 client printed with ``-J``.

    Parameters
    ----------
    text:
        The client's standard output.
    stderr:
        The client's standard error, kept in the error's ``output`` if parsing fails.

    Returns
    -------
    Iperf3Result
        Throughput (bits/s), retransmissions, RTT (µs) and per-interval values.

    Raises
    ------
    cnibench.errors.ToolError
        When iperf3 reported an error (its message is in the exception), e.g. the server
        refused the connection.
    cnibench.errors.ParseError
        When ``text`` is not a complete iperf3 JSON report.
    """
    output = join_output(text, stderr)
    try:
        document = json.loads(text)
    except json.JSONDecodeError as exc:
        hint = stderr.strip().splitlines()[-1] if stderr.strip() else "no JSON on stdout"
        raise ParseError(
            f"iperf3 output is not valid JSON ({exc.msg} at char {exc.pos}): {hint}",
            tool=TOOL,
            output=output,
        ) from exc
    if not isinstance(document, dict):
        raise ParseError("iperf3 output is JSON but not an object", tool=TOOL, output=output)
    raw = cast(Iperf3Json, document)
    if "error" in raw:
        raise ToolError(f"iperf3 failed: {raw['error']}", tool=TOOL, output=output)
    try:
        return _result_from_json(raw)
    except (KeyError, TypeError, ValueError, IndexError) as exc:
        raise ParseError(
            f"iperf3 JSON lacks an expected field: {exc!r}", tool=TOOL, output=output
        ) from exc


def _result_from_json(raw: Iperf3Json) -> Iperf3Result:
    start = raw["start"]
    test_start = start["test_start"]
    end = raw["end"]
    protocol = str(test_start["protocol"])
    reverse = bool(test_start.get("reverse", 0))
    udp = protocol == "UDP"
    sum_sent = end["sum_sent"]
    sum_received = end["sum_received"]
    connected = start.get("connected") or [Iperf3Connected()]

    jitter_ms: float | None = None
    lost_percent: float | None = None
    if udp:
        # iperf >= 3.10 repeats the receiver statistics in sum_received; older ones only in sum.
        udp_sum = sum_received if "jitter_ms" in sum_received else end["sum"]
        jitter_ms = float(udp_sum["jitter_ms"])
        lost_percent = float(udp_sum["lost_percent"])

    cpu = end.get("cpu_utilization_percent", {})
    mss = None if udp else _mss_bytes(start)
    return Iperf3Result(
        sent_bits_per_second=_finite(sum_sent["bits_per_second"]),
        received_bits_per_second=_finite(sum_received["bits_per_second"]),
        retransmits=None if udp else int(sum_sent.get("retransmits", 0)),
        mean_rtt_us=_mean_rtt_us(end.get("streams", [])),
        intervals=tuple(_interval(i["sum"]) for i in raw.get("intervals", [])),
        protocol=protocol,
        reverse=reverse,
        parallel=int(test_start.get("num_streams", len(connected))),
        duration_s=float(test_start["duration"]),
        jitter_ms=jitter_ms,
        lost_percent=lost_percent,
        mss_bytes=mss,
        sent_bytes=int(sum_sent.get("bytes", 0)),
        remote_host=str(connected[0].get("remote_host", "")),
        local_host=str(connected[0].get("local_host", "")),
        cpu_host_percent=_optional_float(cpu.get("host_total")),
        cpu_remote_percent=_optional_float(cpu.get("remote_total")),
        raw=raw,
    )


def _mss_bytes(start: Iperf3Start) -> int:
    for key in ("tcp_mss", "tcp_mss_default"):
        value = start.get(key)
        if isinstance(value, int) and value > 0:
            return value
    return DEFAULT_MSS_BYTES


def _interval(block: Iperf3Sum) -> Iperf3Interval:
    retransmits = block.get("retransmits")
    return Iperf3Interval(
        start=float(block["start"]),
        end=float(block["end"]),
        bits_per_second=_finite(block["bits_per_second"]),
        retransmits=None if retransmits is None else int(retransmits),
    )


def _mean_rtt_us(streams: Sequence[Iperf3StreamEnd]) -> float | None:
    # Only a local TCP sender has tcp_info RTTs; with -R the block is zero-filled and flagged
    # "sender": false, so it must not be read as a 0 µs RTT.
    rtts = [
        float(s["sender"]["mean_rtt"])
        for s in streams
        if "sender" in s and s["sender"].get("sender", False) and "mean_rtt" in s["sender"]
    ]
    if not rtts:
        return None
    return sum(rtts) / len(rtts)


def _finite(value: Any) -> float:
    number = float(value)
    if not math.isfinite(number):
        raise ValueError(f"non-finite number {value!r}")
    return number


def _optional_float(value: object) -> float | None:
    if value is None:
        return None
    return float(cast(float, value))


def _client_argv(target: ToolTarget, profile: MeasurementProfile) -> list[str]:
    return iperf3_client_argv(target.address, port=target.port, duration=profile.duration)


def iperf3_result_measurements(parsed: Iperf3Result) -> list[Measurement]:
    """What one iperf3 run measured, as records: received and sent throughput (bits/s);
    with TCP ``retransmits`` (segments, count) and ``retransmit_rate`` (retransmitted over sent
    segments, ratio: :attr:`Iperf3Result.retransmit_rate`), and ``rtt_mean`` (µs) where iperf3
    reported it; with UDP ``datagram_loss`` (lost over sent datagrams, ratio)."""
    out = [
        Measurement("throughput", parsed.received_bits_per_second, "bits/s"),
        Measurement("throughput_sender", parsed.sent_bits_per_second, "bits/s"),
    ]
    if parsed.retransmits is not None:
        out.append(Measurement("retransmits", float(parsed.retransmits), "count"))
    if parsed.retransmit_rate is not None:
        out.append(Measurement("retransmit_rate", parsed.retransmit_rate, "ratio"))
    if parsed.mean_rtt_us is not None:
        out.append(Measurement("rtt_mean", parsed.mean_rtt_us, "us"))
    if parsed.lost_percent is not None:
        out.append(Measurement("datagram_loss", parsed.lost_percent / 100.0, "ratio"))
    return out


def iperf3_measurements(stdout: str, stderr: str) -> list[Measurement]:
    """:func:`iperf3_result_measurements` of an iperf3 client's JSON output."""
    return iperf3_result_measurements(parse_iperf3(stdout, stderr=stderr))


def iperf3_pairs_measurements(outputs: Sequence[tuple[str, str]]) -> list[Measurement]:
    """The aggregate of several iperf3 clients run at once (``--pairs``), from each one's
    ``(stdout, stderr)``: ``throughput`` and ``throughput_sender`` are the sums of the
    clients' (bits/s), ``retransmits`` the sum (count), ``retransmit_rate`` the retransmitted
    over the sent segments of all clients together (ratio), ``rtt_mean`` the mean of the
    clients' means (µs), ``datagram_loss`` (UDP) the mean of their losses (ratio). A metric
    is given only when every client reported it.

    Raises
    ------
    cnibench.errors.ToolError, cnibench.errors.ParseError
        From :func:`parse_iperf3` of any client's output.
    ValueError
        No output at all.
    """
    if not outputs:
        raise ValueError("iperf3_pairs_measurements needs at least one client's output")
    parsed = [parse_iperf3(stdout, stderr=stderr) for stdout, stderr in outputs]
    out = [
        Measurement("throughput", sum(p.received_bits_per_second for p in parsed), "bits/s"),
        Measurement("throughput_sender", sum(p.sent_bits_per_second for p in parsed), "bits/s"),
    ]
    retransmits = [p.retransmits for p in parsed]
    if all(r is not None for r in retransmits):
        total = float(sum(r for r in retransmits if r is not None))
        out.append(Measurement("retransmits", total, "count"))
        segments = [p.segments_sent for p in parsed]
        sent = sum(s for s in segments if s is not None)
        if all(s is not None for s in segments) and sent > 0:
            out.append(Measurement("retransmit_rate", total / sent, "ratio"))
    rtts = [p.mean_rtt_us for p in parsed]
    if all(r is not None for r in rtts):
        out.append(Measurement("rtt_mean", sum(r for r in rtts if r is not None) / len(rtts), "us"))
    losses = [p.lost_percent for p in parsed]
    if all(loss is not None for loss in losses):
        mean_loss = sum(loss for loss in losses if loss is not None) / len(losses)
        out.append(Measurement("datagram_loss", mean_loss / 100.0, "ratio"))
    return out


IPERF3 = MeasurementTool(
    name=TOOL,
    package="iperf3",
    purpose="throughput",
    version=VersionProbe("iperf3", ("--version",), rf"iperf {VERSION_NUMBER}"),
    client=ClientMeasurement(
        server="iperf3-server",
        argv=_client_argv,
        timeout=lambda profile: profile.duration + 30,
        measurements=iperf3_measurements,
        raw_file="iperf3.json",
        combine=iperf3_pairs_measurements,
    ),
)
"""iperf3 in the registry: one TCP stream to the pod's iperf3 server for the profile's
duration."""
