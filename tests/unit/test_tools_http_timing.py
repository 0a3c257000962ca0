"""curl timing adapter: the one-process argv and the per-request parser (fixtures/http_timing)."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from cnibench.errors import ConfigError, ParseError, ToolError
from cnibench.tools.http_timing import http_timing_argv, parse_http_timing

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "http_timing"
WRITE_OUT = (
    "%{http_code}\\t%{time_total}\\t%{time_connect}\\t%{time_starttransfer}\\t"
    "%{num_connects}\\t%{exitcode}\\t%header{x-backend}\\t%{errormsg}\\n"
)


def fixture_text(name: str) -> str:
    return (FIXTURES / name).read_text()


def columns(text: str) -> list[list[str]]:
    return [line.split("\t") for line in text.splitlines() if line]


# --- argv -------------------------------------------------------------------------------------


def test_argv_is_one_curl_with_a_glob_and_new_connections() -> None:
    assert http_timing_argv("http://198.19.2.3:80/", count=10000) == [
        "curl",
        "--silent",
        "--output",
        "/dev/null",
        "--write-out",
        WRITE_OUT,
        "--connect-timeout",
        "5",
        "--max-time",
        "10",
        "--header",
        "Connection: close",
        "http://198.19.2.3:80/?seq=[1-10000]",
    ]


@pytest.mark.parametrize(
    ("url", "options", "last"),
    [
        ("http://h:8080", {"count": 3}, "http://h:8080/?seq=[1-3]"),
        ("http://h/api?x=1", {"count": 2}, "http://h/api?x=1&seq=[1-2]"),
        ("http://[fd00::1]:80/", {"count": 1}, "http://[fd00::1]:80/?seq=[1-1]"),
    ],
    ids=["no-path", "existing-query", "ipv6-literal"],
)
def test_argv_url_forms(url: str, options: dict[str, Any], last: str) -> None:
    assert http_timing_argv(url, **options)[-1] == last


def test_argv_reusing_connections_drops_connection_close() -> None:
    argv = http_timing_argv("http://h/", count=5, reuse_connections=True)
    assert "Connection: close" not in argv
    assert "--header" not in argv


def test_argv_custom_header_and_timeouts() -> None:
    argv = http_timing_argv(
        "http://h/", count=5, backend_header="X-Pod", connect_timeout=1.5, max_time=3
    )
    assert "%header{x-pod}" in argv[argv.index("--write-out") + 1]
    assert argv[argv.index("--connect-timeout") + 1] == "1.5"
    assert argv[argv.index("--max-time") + 1] == "3"


@pytest.mark.parametrize(
    ("url", "options"),
    [
        ("198.19.2.3/", {}),
        ("http://h/a[1]", {}),
        ("http://h/{a,b}", {}),
        ("http://h/", {"count": 0}),
        ("http://h/", {"backend_header": "X Backend"}),
        ("http://h/", {"max_time": 0}),
    ],
    ids=["no-scheme", "brackets", "braces", "zero-count", "bad-header", "zero-max-time"],
)
def test_argv_rejects_bad_values(url: str, options: dict[str, Any]) -> None:
    with pytest.raises(ConfigError):
        http_timing_argv(url, **options)


# --- parser on every captured fixture ---------------------------------------------------------


def test_parse_one_sample_per_request_in_order() -> None:
    text = fixture_text("split_200.txt")
    rows = columns(text)
    result = parse_http_timing(text)
    assert result.count == len(rows) == 200
    for sample, row in zip(result.samples, rows, strict=True):
        assert sample.status == int(row[0])
        assert sample.total_time_us == pytest.approx(float(row[1]) * 1e6)
        assert sample.connect_time_us == pytest.approx(float(row[2]) * 1e6)
        assert sample.backend == row[6]


def test_parse_backends_follow_the_3_to_1_proxy() -> None:
    text = fixture_text("split_200.txt")
    expected = Counter(row[6] for row in columns(text))
    result = parse_http_timing(text)
    assert dict(result.backend_counts()) == dict(expected)
    assert set(expected) == {"v1", "v2"}


def test_parse_every_request_opened_its_own_connection() -> None:
    result = parse_http_timing(fixture_text("split_200.txt"))
    assert {s.new_connections for s in result.samples} == {1}
    assert result.failed == 0


def test_total_times_array() -> None:
    text = fixture_text("split_200.txt")
    times = parse_http_timing(text).total_times_us()
    assert times.shape == (200,)
    assert times.tolist() == pytest.approx([float(row[1]) * 1e6 for row in columns(text)])
    assert (times > 0).all()


def test_partial_failures_are_kept_and_flagged() -> None:
    # Real lines of a good run followed by real lines of a refused run.
    text = fixture_text("split_200.txt") + fixture_text("refused.txt")
    result = parse_http_timing(text)
    assert (result.count, result.failed) == (203, 3)
    assert result.total_times_us().shape == (200,)
    assert result.total_times_us(successful_only=False).shape == (203,)
    assert result.statuses().tolist()[-3:] == [0, 0, 0]
    assert result.samples[-1].curl_exit_code == 7
    assert "Failed to connect" in result.samples[-1].error


# --- failures ---------------------------------------------------------------------------------


def test_all_refused_is_tool_error() -> None:
    text = fixture_text("refused.txt")
    with pytest.raises(ToolError, match="Failed to connect") as excinfo:
        parse_http_timing(text)
    assert excinfo.type is ToolError
    assert excinfo.value.tool == "curl"
    assert excinfo.value.output == text


@pytest.mark.parametrize(
    "text",
    ["", "\n\n", "200 0.1 0.1\n", "abc\t0.1\t0\t0\t1\t0\tv1\t\n"],
    ids=["empty", "blank-lines", "too-few-fields", "non-numeric-status"],
)
def test_malformed_output_is_parse_error(text: str) -> None:
    with pytest.raises(ParseError):
        parse_http_timing(text)
