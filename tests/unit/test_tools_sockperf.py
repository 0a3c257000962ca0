"""sockperf adapter: argv builders and parser on captured real output (fixtures/sockperf)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from cnibench.errors import ConfigError, ParseError, ToolError
from cnibench.scenarios.profiles import profile_named
from cnibench.tools.registry import ToolTarget
from cnibench.tools.sockperf import (
    PINNED_CPU,
    SOCKPERF,
    parse_sockperf,
    sockperf_pingpong_argv,
    sockperf_server_argv,
)

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "sockperf"
OK_FIXTURES = ["udp_pingpong.txt", "tcp_pingpong.txt", "udp_full_rtt.txt"]
OK_IDS = ["udp", "tcp", "udp-full-rtt"]


def fixture_text(name: str) -> str:
    return (FIXTURES / name).read_text()


def numbers_after(text: str, marker: str) -> list[float]:
    """Every number that follows ``marker`` up to the next space/semicolon (test-side reading)."""
    values = []
    for line in text.splitlines():
        if marker in line:
            tail = line.split(marker, 1)[1].strip()
            values.append(float(tail.split()[0].rstrip(";").replace("\x1b[0m", "")))
    return values


# --- argv -------------------------------------------------------------------------------------


def test_pingpong_argv_defaults() -> None:
    assert sockperf_pingpong_argv("198.19.2.7") == [
        "sockperf",
        "ping-pong",
        "-i",
        "198.19.2.7",
        "-p",
        "11111",
        "-t",
        "10",
        "-m",
        "14",
    ]


@pytest.mark.parametrize(
    ("options", "tail"),
    [
        ({"tcp": True}, ["--tcp"]),
        ({"full_rtt": True}, ["--full-rtt"]),
        ({"mps": 1000}, ["--mps=1000"]),
        ({"tcp": True, "full_rtt": True}, ["--tcp", "--full-rtt"]),
    ],
    ids=["tcp", "full-rtt", "mps", "tcp-full-rtt"],
)
def test_pingpong_argv_flags(options: dict[str, Any], tail: list[str]) -> None:
    argv = sockperf_pingpong_argv("h", port=12000, duration=3, msg_size=64, **options)
    assert argv[:10] == ["sockperf", "ping-pong", "-i", "h", "-p", "12000", "-t", "3", "-m", "64"]
    assert argv[10:] == tail


@pytest.mark.parametrize(
    "options",
    [{"msg_size": 13}, {"duration": 1.5}, {"port": 0}, {"mps": 0}],
    ids=["message-too-small", "fractional-duration", "port-0", "zero-mps"],
)
def test_pingpong_argv_rejects_bad_values(options: dict[str, Any]) -> None:
    with pytest.raises(ConfigError):
        sockperf_pingpong_argv("h", **options)


def test_server_argv() -> None:
    assert sockperf_server_argv(port=11112, bind="198.19.1.2", tcp=True) == [
        "sockperf",
        "server",
        "-i",
        "198.19.1.2",
        "-p",
        "11112",
        "--tcp",
    ]
    assert sockperf_server_argv() == ["sockperf", "server", "-i", "0.0.0.0", "-p", "11111"]


def test_a_cpu_puts_either_end_behind_taskset() -> None:
    assert sockperf_server_argv(cpu=3)[:4] == ["taskset", "-c", "3", "sockperf"]
    assert sockperf_pingpong_argv("h", cpu=0)[:5] == ["taskset", "-c", "0", "sockperf", "ping-pong"]
    assert sockperf_server_argv(cpu=3)[3:] == sockperf_server_argv()


@pytest.mark.parametrize("cpu", [-1, True])
def test_a_cpu_that_is_no_cpu_number_is_refused(cpu: int) -> None:
    with pytest.raises(ConfigError, match="CPU number"):
        sockperf_pingpong_argv("h", cpu=cpu)


def test_the_measuring_client_runs_on_the_cpu_the_servers_run_on() -> None:
    """Both ends on one CPU: a round trip is then the data path's work, not the host waking a
    second CPU (bench/pinning.py)."""
    run = SOCKPERF.client
    assert run is not None
    argv = run.argv(ToolTarget("198.19.1.4", 11111), profile_named("smoke"))
    assert argv[:3] == ["taskset", "-c", str(PINNED_CPU)]
    assert sockperf_server_argv(cpu=PINNED_CPU)[:3] == argv[:3]


# --- parser on every captured fixture ---------------------------------------------------------


@pytest.mark.parametrize("name", OK_FIXTURES, ids=OK_IDS)
def test_parse_average_matches_summary_line(name: str) -> None:
    text = fixture_text(name)
    # sockperf prints the mean twice: "avg-latency=X" / "avg-rtt=X" and "Summary: ... is X usec".
    summary = numbers_after(text, "Latency is") or numbers_after(text, "Round trip is")
    assert parse_sockperf(text).avg_latency_us == summary[0]


@pytest.mark.parametrize("name", OK_FIXTURES, ids=OK_IDS)
def test_parse_percentiles_and_extremes(name: str) -> None:
    text = fixture_text(name)
    table = {}
    for line in text.splitlines():
        if "---> percentile" in line:
            left, right = line.split("=")
            table[float(left.split()[-1])] = float(right)
    result = parse_sockperf(text)
    assert result.p50_us == table[50.0]
    assert result.p99_us == table[99.0]
    assert result.p999_us == table[99.9]
    assert dict(result.percentiles_us) == table
    assert result.max_us == numbers_after(text, "<MAX> observation =")[0]
    assert result.min_us == numbers_after(text, "<MIN> observation =")[0]
    assert result.min_us <= result.p50_us <= result.p99_us <= result.max_us


@pytest.mark.parametrize("name", OK_FIXTURES, ids=OK_IDS)
def test_parse_counts(name: str) -> None:
    text = fixture_text(name)
    valid = next(line for line in text.splitlines() if "[Valid Duration]" in line)
    received = int(valid.rsplit("ReceivedMessages=", 1)[1])
    result = parse_sockperf(text)
    assert result.received_messages == received
    assert result.observations == received  # one observation per reply in ping-pong
    assert result.dropped_messages == 0


@pytest.mark.parametrize(
    ("name", "protocol", "round_trip"),
    [
        ("udp_pingpong.txt", "UDP", False),
        ("tcp_pingpong.txt", "TCP", False),
        ("udp_full_rtt.txt", "UDP", True),
    ],
    ids=OK_IDS,
)
def test_parse_protocol_and_latency_kind(name: str, protocol: str, round_trip: bool) -> None:
    result = parse_sockperf(fixture_text(name))
    assert (result.protocol, result.round_trip) == (protocol, round_trip)


def test_one_way_latency_doubles_to_rtt() -> None:
    result = parse_sockperf(fixture_text("udp_pingpong.txt"))
    assert result.avg_rtt_us == pytest.approx(2 * result.avg_latency_us)


def test_full_rtt_is_not_doubled() -> None:
    result = parse_sockperf(fixture_text("udp_full_rtt.txt"))
    assert result.avg_rtt_us == result.avg_latency_us


# --- failures ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("tcp_refused.txt", "Connection refused"),
        ("udp_no_server.txt", "No messages were received"),
    ],
    ids=["tcp-refused", "udp-no-server"],
)
def test_failures_are_tool_errors(name: str, message: str) -> None:
    text = fixture_text(name)
    with pytest.raises(ToolError, match=message) as excinfo:
        parse_sockperf(text)
    assert excinfo.type is ToolError
    assert excinfo.value.tool == "sockperf"
    assert excinfo.value.output == text


def test_output_cut_before_summary_is_parse_error() -> None:
    text = fixture_text("udp_pingpong.txt")
    with pytest.raises(ParseError):
        parse_sockperf(text.split("Printing statistics")[0])


def test_summary_without_percentiles_is_parse_error() -> None:
    text = fixture_text("tcp_pingpong.txt")
    kept = "\n".join(line for line in text.splitlines() if "percentile 99.000" not in line)
    with pytest.raises(ParseError, match="p99"):
        parse_sockperf(kept)
