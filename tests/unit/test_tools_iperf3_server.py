"""libiperf server process: argv builder and parsers on captured output (fixtures/iperf3_server).

The process itself is exercised for real in tests/integration/test_iperf3_server.py.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from cnibench.errors import ConfigError, ParseError, ToolError
from cnibench.tools.iperf3_server import (
    iperf3_server_process_argv,
    iperf3_server_record_from_json,
    parse_iperf3_server_output,
    parse_iperf3_server_record,
)

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "iperf3_server"


def fixture_text(name: str) -> str:
    return (FIXTURES / name).read_text()


def test_process_argv_for_the_lab() -> None:
    argv = iperf3_server_process_argv(port=5201, bind="198.18.0.200", timeout=60)
    assert argv == [
        sys.executable,
        "-P",
        "-m",
        "cnibench.tools.iperf3_server",
        "--port",
        "5201",
        "--bind",
        "198.18.0.200",
        "--timeout",
        "60",
        "--once",
    ]


def test_process_argv_several_tests_any_address() -> None:
    argv = iperf3_server_process_argv(port=5301, timeout=2.5, count=3, python="python3")
    assert argv == [
        "python3",
        "-P",
        "-m",
        "cnibench.tools.iperf3_server",
        "--port",
        "5301",
        "--timeout",
        "2.5",
        "--count",
        "3",
    ]


@pytest.mark.parametrize(
    ("port", "timeout", "count"),
    [(0, 10.0, 1), (5201, 0.0, 1), (5201, 10.0, 0)],
    ids=["port-0", "zero-timeout", "zero-count"],
)
def test_process_argv_rejects_bad_values(port: int, timeout: float, count: int) -> None:
    with pytest.raises(ConfigError):
        iperf3_server_process_argv(port=port, timeout=timeout, count=count)


def test_parse_record_line() -> None:
    text = fixture_text("once.jsonl")
    line = json.loads(text)
    record = parse_iperf3_server_record(text)
    assert record.remote_host == line["remote_host"] == "127.0.0.1"
    assert record.remote_port == line["remote_port"]
    assert record.local_port == line["local_port"]
    assert record.received_bits_per_second == line["received_bits_per_second"] > 0
    assert (record.protocol, record.reverse) == ("TCP", False)
    assert json.loads(record.raw_json) == line["result"]


def test_record_fields_agree_with_libiperf_report() -> None:
    # The summary fields of the line must be what libiperf's own report says.
    result = json.loads(fixture_text("once.jsonl"))["result"]
    record = parse_iperf3_server_record(fixture_text("once.jsonl"))
    assert record.remote_host == result["start"]["connected"][0]["remote_host"]
    assert record.received_bits_per_second == result["end"]["sum_received"]["bits_per_second"]
    assert record.duration_s == result["start"]["test_start"]["duration"]


def test_record_from_libiperf_json() -> None:
    report = json.dumps(json.loads(fixture_text("once.jsonl"))["result"])
    record = iperf3_server_record_from_json(report)
    assert record == parse_iperf3_server_record(fixture_text("once.jsonl"))


def test_several_lines_give_several_records() -> None:
    line = fixture_text("once.jsonl").strip()
    records = parse_iperf3_server_output(f"{line}\n{line}\n")
    assert len(records) == 2
    with pytest.raises(ParseError, match="one iperf3 server record"):
        parse_iperf3_server_record(f"{line}\n{line}\n")


def test_no_client_is_tool_error() -> None:
    text = fixture_text("no_client.jsonl")
    with pytest.raises(ToolError, match="no iperf3 client connected within 1 s") as excinfo:
        parse_iperf3_server_record(text)
    assert excinfo.type is ToolError
    assert excinfo.value.tool == "iperf3-server"


def test_libiperf_error_report_is_tool_error() -> None:
    with pytest.raises(ToolError, match="Address already in use"):
        iperf3_server_record_from_json(
            '{"start": {}, "error": "unable to start listener: Address already in use"}'
        )


@pytest.mark.parametrize(
    ("stdout", "stderr"),
    [
        ("", "Traceback ...\nModuleNotFoundError: No module named 'iperf3'\n"),
        ("garbage\n", ""),
        ("[]\n", ""),
    ],
    ids=["no-output", "not-json", "not-an-object"],
)
def test_unusable_output_is_parse_error(stdout: str, stderr: str) -> None:
    with pytest.raises(ParseError):
        parse_iperf3_server_output(stdout, stderr=stderr)


def test_record_line_missing_a_field_is_parse_error() -> None:
    line = json.loads(fixture_text("once.jsonl"))
    del line["remote_host"]
    with pytest.raises(ParseError, match="remote_host"):
        parse_iperf3_server_record(json.dumps(line))
