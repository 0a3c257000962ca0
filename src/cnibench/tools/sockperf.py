"""sockperf ping-pong: request-response latency with percentiles.

:func:`sockperf_pingpong_argv` plans a client run, :func:`sockperf_server_argv` the matching
server, :func:`parse_sockperf` reads the client's summary into a :class:`SockperfResult`.

What the numbers mean
---------------------
In ping-pong mode sockperf times each message's round trip and, by default, reports half of
it: the *one-way latency* (RTT/2) for the mean, the percentiles, the minimum and the maximum.
With ``--full-rtt`` (``full_rtt=True`` here) it reports the round trip itself.
:class:`SockperfResult` keeps the values as printed and says which kind they are in
:attr:`SockperfResult.round_trip`; :attr:`SockperfResult.avg_rtt_us` always gives the round trip.
Only the "valid duration" (after sockperf's warm-up) enters the statistics.

Where the two ends run
----------------------
Client and server run on one CPU, :data:`PINNED_CPU` (``taskset``). Left to the scheduler,
they land on two CPUs on an idle host, and every round trip then waits for the host to wake
the other CPU: on this project's 2-vCPU virtual machine that alone took about 45 of the 52 µs
a round trip between two namespaces took, against 7.5 µs on one CPU, and on kind, where other
processes keep CPUs awake some of the time, the median moved between about 8 and 17 µs from
run to run. On one CPU the data path's own work is what a round trip adds up.
``bench/pinning.py`` measures both side by side.

sockperf exits with status 0 even when it could not reach the server; the parser recognises
its error lines instead.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType

from cnibench.errors import ConfigError, ParseError, ToolError
from cnibench.records import Measurement
from cnibench.tools._common import join_output, on_cpu, strip_ansi, whole_seconds
from cnibench.tools.registry import (
    VERSION_NUMBER,
    ClientMeasurement,
    MeasurementProfile,
    MeasurementTool,
    ToolTarget,
    VersionProbe,
)

__all__ = [
    "PINNED_CPU",
    "SOCKPERF",
    "SockperfResult",
    "parse_sockperf",
    "sockperf_measurements",
    "sockperf_pairs_measurements",
    "sockperf_pingpong_argv",
    "sockperf_server_argv",
]

TOOL = "sockperf"
MIN_MSG_SIZE = 14
"""sockperf's smallest message: its own header (bytes)."""
PINNED_CPU = 0
"""The CPU both the client and the server run on (see the module's docstring); CPU 0, since
every machine has it."""


def sockperf_pingpong_argv(
    server: str,
    *,
    port: int = 11111,
    duration: float = 10.0,
    tcp: bool = False,
    msg_size: int = MIN_MSG_SIZE,
    full_rtt: bool = False,
    mps: int | None = None,
    cpu: int | None = None,
) -> list[str]:
    """Command line of a sockperf ping-pong client.

    Parameters
    ----------
    server:
        Address of the sockperf server.
    port:
        Server port (UDP, or TCP with ``tcp=True``).
    duration:
        Test length in seconds (whole seconds only); sockperf spends the first 0.4 s of it
        warming up and leaves that out of the statistics.
    tcp:
        Use TCP; the server must then have been started with ``--tcp`` too.
    msg_size:
        Message size in bytes, at least 14.
    full_rtt:
        Report round-trip times instead of the default one-way latency (RTT/2).
    mps:
        Messages per second; ``None`` sends as fast as replies come back (ping-pong default).
    cpu:
        Run the client on this CPU alone (``taskset -c``); ``None`` leaves it to the scheduler.

    Returns
    -------
    list of str
        ``["sockperf", "ping-pong", "-i", server, "-p", port, "-t", seconds, "-m", size, ...]``,
        after ``["taskset", "-c", cpu]`` when ``cpu`` is given.

    Raises
    ------
    cnibench.errors.ConfigError
        On an empty address, a bad port, fractional duration or too small message.
    """
    if not server:
        raise ConfigError("sockperf: server address must not be empty")
    _check_port(port)
    if msg_size < MIN_MSG_SIZE:
        raise ConfigError(
            f"sockperf: msg_size must be at least {MIN_MSG_SIZE} bytes, got {msg_size}"
        )
    argv = [
        "sockperf",
        "ping-pong",
        "-i",
        server,
        "-p",
        str(port),
        "-t",
        whole_seconds(duration, tool=TOOL, option="-t"),
        "-m",
        str(msg_size),
    ]
    if tcp:
        argv.append("--tcp")
    if full_rtt:
        argv.append("--full-rtt")
    if mps is not None:
        if mps <= 0:
            raise ConfigError(f"sockperf: mps must be positive, got {mps}")
        argv.append(f"--mps={mps}")
    return on_cpu(argv, cpu)


def sockperf_server_argv(
    *, port: int = 11111, bind: str = "0.0.0.0", tcp: bool = False, cpu: int | None = None
) -> list[str]:
    """Command line of a sockperf server.

    Parameters
    ----------
    port:
        Port to listen on.
    bind:
        Address to listen on.
    tcp:
        Serve TCP; a server serves either UDP or TCP, so a pod answering both runs two.
    cpu:
        Run the server on this CPU alone (``taskset -c``); ``None`` leaves it to the scheduler.

    Returns
    -------
    list of str
        ``["sockperf", "server", "-i", bind, "-p", port]`` plus ``--tcp``, after
        ``["taskset", "-c", cpu]`` when ``cpu`` is given.
    """
    _check_port(port)
    argv = ["sockperf", "server", "-i", bind, "-p", str(port)]
    if tcp:
        argv.append("--tcp")
    return on_cpu(argv, cpu)


def _check_port(port: int) -> None:
    if not 0 < port < 65536:
        raise ConfigError(f"sockperf: port must be in 1..65535, got {port}")


@dataclass(frozen=True)
class SockperfResult:
    """Latency statistics of one sockperf ping-pong run, all in µs.

    Every ``*_us`` value is one-way latency (RTT/2) unless :attr:`round_trip` is true.

    Attributes
    ----------
    avg_latency_us, std_dev_us:
        Mean and standard deviation.
    p50_us, p99_us, p999_us:
        Median, 99th and 99.9th percentiles.
    min_us, max_us:
        Smallest and largest observation.
    observations:
        Number of round trips in the statistics (the valid duration).
    percentiles_us:
        Every percentile sockperf printed, keyed by percentile (``99.9``, ``50.0``, ...).
    round_trip:
        Whether the values are full round trips (``--full-rtt``) rather than RTT/2.
    protocol:
        ``"UDP"`` or ``"TCP"``.
    valid_run_time_s:
        Length of the measured period in seconds.
    sent_messages, received_messages:
        Messages in the measured period.
    dropped_messages, duplicated_messages, out_of_order_messages:
        Anomalies sockperf counted.
    """

    avg_latency_us: float
    std_dev_us: float
    p50_us: float
    p99_us: float
    p999_us: float
    min_us: float
    max_us: float
    observations: int
    percentiles_us: Mapping[float, float] = field(repr=False)
    round_trip: bool
    protocol: str
    valid_run_time_s: float
    sent_messages: int
    received_messages: int
    dropped_messages: int
    duplicated_messages: int
    out_of_order_messages: int

    @property
    def avg_rtt_us(self) -> float:
        """Mean round-trip time in µs, whichever way sockperf reported it."""
        return self.avg_latency_us if self.round_trip else 2.0 * self.avg_latency_us


_ERROR_PATTERNS = (
    re.compile(r"sockperf: ERROR: (?P<msg>.+)"),
    re.compile(r"sockperf: (?P<msg>No messages were received from the server.*)"),
)
_AVG = re.compile(r"====> avg-(?P<kind>latency|rtt)=(?P<avg>[\d.]+) \(std-dev=(?P<std>[\d.]+)")
_OBSERVATIONS = re.compile(r"Total (?P<n>\d+) observations")
_PERCENTILE = re.compile(r"---> percentile (?P<p>[\d.]+) =\s*(?P<v>[\d.]+)")
_EXTREME = re.compile(r"---> <(?P<which>MAX|MIN)> observation =\s*(?P<v>[\d.]+)")
_VALID = re.compile(
    r"\[Valid Duration\] RunTime=(?P<t>[\d.]+) sec; SentMessages=(?P<sent>\d+); "
    r"ReceivedMessages=(?P<recv>\d+)"
)
_ANOMALIES = re.compile(
    r"# dropped messages = (?P<dropped>\d+); # duplicated messages = (?P<dup>\d+); "
    r"# out-of-order messages = (?P<ooo>\d+)"
)
_PROTOCOL = re.compile(r"PORT =\s*\d+ # (?P<proto>UDP|TCP)")


def parse_sockperf(text: str, *, stderr: str = "") -> SockperfResult:
    """Parse the summary a sockperf ping-pong client printed.

    Parameters
    ----------
    text:
        The client's standard output (sockperf prints everything there; colour escapes are
        ignored).
    stderr:
        The client's standard error, searched for error lines too.

    Returns
    -------
    SockperfResult
        Latency statistics in µs (one-way unless run with ``--full-rtt``).

    Raises
    ------
    cnibench.errors.ToolError
        When sockperf reported an error (connection refused, no reply from the server).
    cnibench.errors.ParseError
        When the summary is missing or incomplete.
    """
    output = join_output(text, stderr)
    clean = strip_ansi(output)
    for pattern in _ERROR_PATTERNS:
        match = pattern.search(clean)
        if match:
            raise ToolError(f"sockperf failed: {match['msg'].strip()}", tool=TOOL, output=output)

    avg = _AVG.search(clean)
    observations = _OBSERVATIONS.search(clean)
    valid = _VALID.search(clean)
    if avg is None or observations is None or valid is None:
        raise ParseError(
            "sockperf output has no latency summary (avg, observations, valid duration)",
            tool=TOOL,
            output=output,
        )
    percentiles = {float(m["p"]): float(m["v"]) for m in _PERCENTILE.finditer(clean)}
    extremes = {m["which"]: float(m["v"]) for m in _EXTREME.finditer(clean)}
    missing = [f"p{p:g}" for p in (50.0, 99.0, 99.9) if p not in percentiles]
    missing += [f"<{w}>" for w in ("MIN", "MAX") if w not in extremes]
    if missing:
        raise ParseError(f"sockperf summary lacks percentiles {missing}", tool=TOOL, output=output)
    anomalies = _ANOMALIES.search(clean)
    protocol = _PROTOCOL.search(clean)
    return SockperfResult(
        avg_latency_us=float(avg["avg"]),
        std_dev_us=float(avg["std"]),
        p50_us=percentiles[50.0],
        p99_us=percentiles[99.0],
        p999_us=percentiles[99.9],
        min_us=extremes["MIN"],
        max_us=extremes["MAX"],
        observations=int(observations["n"]),
        percentiles_us=MappingProxyType(dict(sorted(percentiles.items()))),
        round_trip=avg["kind"] == "rtt",
        protocol=protocol["proto"] if protocol else "",
        valid_run_time_s=float(valid["t"]),
        sent_messages=int(valid["sent"]),
        received_messages=int(valid["recv"]),
        dropped_messages=int(anomalies["dropped"]) if anomalies else 0,
        duplicated_messages=int(anomalies["dup"]) if anomalies else 0,
        out_of_order_messages=int(anomalies["ooo"]) if anomalies else 0,
    )


def _client_argv(target: ToolTarget, profile: MeasurementProfile) -> list[str]:
    return sockperf_pingpong_argv(
        target.address, port=target.port, duration=profile.duration, cpu=PINNED_CPU
    )


def sockperf_measurements(stdout: str, stderr: str) -> list[Measurement]:
    """Mean, median, 99th and 99.9th percentile latency (µs, as sockperf reports them), and the
    loss sockperf counted in the measured period: ``dropped_messages`` (count) and
    ``message_loss`` (dropped over sent messages, ratio; UDP loses, TCP retransmits instead)."""
    parsed = parse_sockperf(stdout, stderr=stderr)
    out = [
        Measurement("latency_avg", parsed.avg_latency_us, "us"),
        Measurement("latency_p50", parsed.p50_us, "us"),
        Measurement("latency_p99", parsed.p99_us, "us"),
        Measurement("latency_p999", parsed.p999_us, "us"),
        Measurement("dropped_messages", float(parsed.dropped_messages), "count"),
    ]
    if parsed.sent_messages > 0:
        loss = parsed.dropped_messages / parsed.sent_messages
        out.append(Measurement("message_loss", loss, "ratio"))
    return out


def sockperf_pairs_measurements(outputs: Sequence[tuple[str, str]]) -> list[Measurement]:
    """The aggregate of several sockperf ping-pong clients run at once (``--pairs``), from
    each one's ``(stdout, stderr)``: ``latency_avg`` is the mean over every round trip of all
    clients (each client's mean weighted by its observations, µs); ``latency_p50``,
    ``latency_p99`` and ``latency_p999`` the largest of the clients' (µs: the pooled
    percentile lies between the clients' smallest and largest, and the largest is the bound
    a user of the slowest pair sees); ``dropped_messages`` the sum (count) and
    ``message_loss`` the dropped over the sent messages of all clients (ratio).

    Raises
    ------
    cnibench.errors.ToolError, cnibench.errors.ParseError
        From :func:`parse_sockperf` of any client's output.
    ValueError
        No output at all.
    """
    if not outputs:
        raise ValueError("sockperf_pairs_measurements needs at least one client's output")
    parsed = [parse_sockperf(stdout, stderr=stderr) for stdout, stderr in outputs]
    observations = sum(p.observations for p in parsed)
    if observations > 0:
        mean = sum(p.avg_latency_us * p.observations for p in parsed) / observations
    else:
        mean = sum(p.avg_latency_us for p in parsed) / len(parsed)
    dropped = sum(p.dropped_messages for p in parsed)
    sent = sum(p.sent_messages for p in parsed)
    out = [
        Measurement("latency_avg", mean, "us"),
        Measurement("latency_p50", max(p.p50_us for p in parsed), "us"),
        Measurement("latency_p99", max(p.p99_us for p in parsed), "us"),
        Measurement("latency_p999", max(p.p999_us for p in parsed), "us"),
        Measurement("dropped_messages", float(dropped), "count"),
    ]
    if sent > 0:
        out.append(Measurement("message_loss", dropped / sent, "ratio"))
    return out


SOCKPERF = MeasurementTool(
    name=TOOL,
    package="sockperf",
    purpose="ping-pong latency",
    version=VersionProbe("sockperf", ("--version",), rf"sockperf, version {VERSION_NUMBER}"),
    client=ClientMeasurement(
        server="sockperf-server",
        argv=_client_argv,
        timeout=lambda profile: profile.duration + 30,
        measurements=sockperf_measurements,
        raw_file="sockperf.txt",
        combine=sockperf_pairs_measurements,
    ),
)
"""sockperf in the registry: ping-pong against the pod's sockperf server for the profile's
duration."""
