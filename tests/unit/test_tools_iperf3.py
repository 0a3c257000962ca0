"""iperf3 adapter: argv builder and parser on captured real output (fixtures/iperf3)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from cnibench.errors import ConfigError, ParseError, ToolError
from cnibench.tools.iperf3 import iperf3_client_argv, iperf3_server_argv, parse_iperf3

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "iperf3"
OK_FIXTURES = ["tcp.json", "tcp_reverse_parallel2.json", "udp.json"]


def fixture_text(name: str) -> str:
    return (FIXTURES / name).read_text()


def fixture_json(name: str) -> Any:
    with (FIXTURES / name).open() as handle:
        return json.load(handle)


# --- argv -------------------------------------------------------------------------------------


def test_client_argv_defaults() -> None:
    assert iperf3_client_argv("198.19.1.5") == [
        "iperf3",
        "-c",
        "198.19.1.5",
        "-p",
        "5201",
        "-t",
        "10",
        "-i",
        "1",
        "-J",
        "--connect-timeout",
        "5000",
    ]


@pytest.mark.parametrize(
    ("options", "expected_tail"),
    [
        ({"udp": True}, ["-u"]),
        ({"reverse": True}, ["-R"]),
        ({"parallel": 4}, ["-P", "4"]),
        ({"bitrate": 100_000_000}, ["-b", "100000000"]),
        ({"udp": True, "bitrate": 5_000_000}, ["-u", "-b", "5000000"]),
    ],
    ids=["udp", "reverse", "parallel", "bitrate", "udp-bitrate"],
)
def test_client_argv_options(options: dict[str, Any], expected_tail: list[str]) -> None:
    argv = iperf3_client_argv("10.0.0.1", connect_timeout_ms=None, **options)
    assert argv[:10] == ["iperf3", "-c", "10.0.0.1", "-p", "5201", "-t", "10", "-i", "1", "-J"]
    assert argv[10:] == expected_tail


def test_client_argv_port_duration_interval() -> None:
    argv = iperf3_client_argv("h", port=5301, duration=30.0, interval=0.5, connect_timeout_ms=900)
    assert argv == [
        "iperf3",
        "-c",
        "h",
        "-p",
        "5301",
        "-t",
        "30",
        "-i",
        "0.5",
        "-J",
        "--connect-timeout",
        "900",
    ]


@pytest.mark.parametrize(
    "options",
    [
        {"duration": 2.5},
        {"duration": 0},
        {"port": 0},
        {"port": 70000},
        {"parallel": 0},
        {"bitrate": 0},
        {"interval": -1.0},
        {"connect_timeout_ms": 0},
    ],
    ids=[
        "fractional-duration",
        "zero-duration",
        "port-0",
        "port-too-big",
        "no-streams",
        "zero-bitrate",
        "negative-interval",
        "zero-connect-timeout",
    ],
)
def test_client_argv_rejects_bad_values(options: dict[str, Any]) -> None:
    with pytest.raises(ConfigError):
        iperf3_client_argv("h", **options)


def test_server_argv_one_off_bound() -> None:
    assert iperf3_server_argv(port=5202, bind="198.18.0.200") == [
        "iperf3",
        "-s",
        "-p",
        "5202",
        "-1",
        "-B",
        "198.18.0.200",
    ]


def test_server_argv_persistent() -> None:
    assert iperf3_server_argv(one_off=False) == ["iperf3", "-s", "-p", "5201"]


# --- parser on every captured fixture ---------------------------------------------------------


@pytest.mark.parametrize("name", OK_FIXTURES, ids=["tcp", "tcp-reverse-P2", "udp"])
def test_parse_throughput_matches_json_totals(name: str) -> None:
    raw = fixture_json(name)
    result = parse_iperf3(fixture_text(name))
    assert result.sent_bits_per_second == raw["end"]["sum_sent"]["bits_per_second"]
    assert result.received_bits_per_second == raw["end"]["sum_received"]["bits_per_second"]
    assert result.received_bits_per_second > 0


@pytest.mark.parametrize(
    ("name", "protocol", "reverse", "parallel"),
    [
        ("tcp.json", "TCP", False, 1),
        ("tcp_reverse_parallel2.json", "TCP", True, 2),
        ("udp.json", "UDP", False, 1),
    ],
    ids=["tcp", "tcp-reverse-P2", "udp"],
)
def test_parse_test_shape(name: str, protocol: str, reverse: bool, parallel: int) -> None:
    result = parse_iperf3(fixture_text(name))
    assert (result.protocol, result.reverse, result.parallel) == (protocol, reverse, parallel)
    assert result.duration_s == 2.0
    assert result.remote_host == "127.0.0.1"
    assert result.local_host == "127.0.0.1"


@pytest.mark.parametrize("name", OK_FIXTURES, ids=["tcp", "tcp-reverse-P2", "udp"])
def test_parse_intervals_follow_json(name: str) -> None:
    raw = fixture_json(name)
    result = parse_iperf3(fixture_text(name))
    assert len(result.intervals) == len(raw["intervals"]) == 2
    for parsed, source in zip(result.intervals, raw["intervals"], strict=True):
        assert parsed.start == source["sum"]["start"]
        assert parsed.end == source["sum"]["end"]
        assert parsed.bits_per_second == source["sum"]["bits_per_second"]


def test_parse_tcp_retransmits_and_rtt() -> None:
    raw = fixture_json("tcp.json")
    result = parse_iperf3(fixture_text("tcp.json"))
    assert result.retransmits == raw["end"]["sum_sent"]["retransmits"]
    assert result.mean_rtt_us == raw["end"]["streams"][0]["sender"]["mean_rtt"]
    assert [i.retransmits for i in result.intervals] == [
        i["sum"]["retransmits"] for i in raw["intervals"]
    ]
    assert result.jitter_ms is None
    assert result.lost_percent is None


def test_parse_reverse_has_no_local_rtt() -> None:
    # With -R the sender is the server; iperf3 zero-fills the RTT the client cannot know.
    raw = fixture_json("tcp_reverse_parallel2.json")
    assert all(s["sender"]["mean_rtt"] == 0 for s in raw["end"]["streams"])
    result = parse_iperf3(fixture_text("tcp_reverse_parallel2.json"))
    assert result.mean_rtt_us is None
    assert all(i.retransmits is None for i in result.intervals)


def test_parse_udp_jitter_and_loss() -> None:
    raw = fixture_json("udp.json")
    result = parse_iperf3(fixture_text("udp.json"))
    assert result.retransmits is None
    assert result.mean_rtt_us is None
    assert result.jitter_ms == raw["end"]["sum_received"]["jitter_ms"]
    assert result.lost_percent == raw["end"]["sum_received"]["lost_percent"]
    assert raw["start"]["test_start"]["target_bitrate"] == 100_000_000


def test_parse_cpu_utilisation() -> None:
    cpu = fixture_json("tcp.json")["end"]["cpu_utilization_percent"]
    result = parse_iperf3(fixture_text("tcp.json"))
    assert result.cpu_host_percent == cpu["host_total"]
    assert result.cpu_remote_percent == cpu["remote_total"]


def test_parse_keeps_raw_document() -> None:
    assert parse_iperf3(fixture_text("tcp.json")).raw == fixture_json("tcp.json")


# --- failures ---------------------------------------------------------------------------------


def test_error_report_is_tool_error_with_message() -> None:
    text = fixture_text("refused.json")
    with pytest.raises(ToolError) as excinfo:
        parse_iperf3(text)
    assert excinfo.type is ToolError
    assert "Connection refused" in str(excinfo.value)
    assert excinfo.value.tool == "iperf3"
    assert excinfo.value.output == text


def test_truncated_json_is_parse_error() -> None:
    text = fixture_text("tcp.json")
    with pytest.raises(ParseError) as excinfo:
        parse_iperf3(text[: len(text) // 2])
    assert excinfo.value.tool == "iperf3"


def test_plain_text_error_is_parse_error_naming_stderr() -> None:
    with pytest.raises(ParseError, match="unable to connect"):
        parse_iperf3("", stderr="iperf3: error - unable to connect to server: No route to host\n")


def test_json_without_summary_is_parse_error() -> None:
    raw = fixture_json("tcp.json")
    del raw["end"]["sum_received"]
    with pytest.raises(ParseError, match="sum_received"):
        parse_iperf3(json.dumps(raw))


def test_json_array_is_parse_error() -> None:
    with pytest.raises(ParseError):
        parse_iperf3("[1, 2]")
