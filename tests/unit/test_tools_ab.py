"""ab adapter: argv builder and parser on captured real output (fixtures/ab)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from cnibench.errors import ConfigError, ParseError, ToolError
from cnibench.tools.ab import ab_argv, parse_ab

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "ab"
OK_FIXTURES = ["get_c10.txt", "keepalive_non2xx.txt"]
OK_IDS = ["get-c10", "keepalive-non2xx"]
URL = "http://198.19.1.4:80/"


def fixture(name: str) -> tuple[str, str]:
    stderr = FIXTURES / f"{name}.stderr"
    return (FIXTURES / name).read_text(), stderr.read_text() if stderr.exists() else ""


def report_value(text: str, label: str, index: int = 0) -> str:
    """First token after ``label:`` on the ``index``-th line starting with it (test-side)."""
    lines = [line for line in text.splitlines() if line.startswith(label + ":")]
    return lines[index].split(":", 1)[1].split()[0]


# --- argv -------------------------------------------------------------------------------------


def test_argv_defaults_follow_seed_004() -> None:
    assert ab_argv(URL) == ["ab", "-n", "50000", "-c", "10", URL]


@pytest.mark.parametrize(
    ("options", "expected"),
    [
        ({"keepalive": True}, ["ab", "-n", "50000", "-c", "10", "-k", URL]),
        ({"method": "POST"}, ["ab", "-n", "50000", "-c", "10", "-m", "POST", URL]),
        ({"requests": 200, "concurrency": 100}, ["ab", "-n", "200", "-c", "100", URL]),
        ({"timeout": 5}, ["ab", "-n", "50000", "-c", "10", "-s", "5", URL]),
        (
            {"timelimit": 20, "concurrency": 100},
            ["ab", "-t", "20", "-n", "1000000", "-c", "100", URL],
        ),
        ({"timelimit": 20, "requests": 500}, ["ab", "-t", "20", "-n", "500", "-c", "10", URL]),
    ],
    ids=["keepalive", "method", "counts", "timeout", "timelimit-first", "timelimit-with-cap"],
)
def test_argv_options(options: dict[str, Any], expected: list[str]) -> None:
    assert ab_argv(URL, **options) == expected


@pytest.mark.parametrize(
    ("url", "options"),
    [
        ("http://host", {}),
        ("198.19.1.4/", {}),
        (URL, {"concurrency": 0}),
        (URL, {"requests": 5, "concurrency": 10}),
        (URL, {"timelimit": 1.5}),
        (URL, {"method": "get"}),
    ],
    ids=["no-path", "no-scheme", "zero-concurrency", "fewer-requests", "fractional-t", "method"],
)
def test_argv_rejects_bad_values(url: str, options: dict[str, Any]) -> None:
    with pytest.raises(ConfigError):
        ab_argv(url, **options)


# --- parser on every captured fixture ---------------------------------------------------------


@pytest.mark.parametrize("name", OK_FIXTURES, ids=OK_IDS)
def test_parse_rates_and_times(name: str) -> None:
    text, stderr = fixture(name)
    result = parse_ab(text, stderr=stderr)
    assert result.requests_per_second == float(report_value(text, "Requests per second"))
    assert result.time_per_request_ms == float(report_value(text, "Time per request", 0))
    assert result.time_per_request_all_ms == float(report_value(text, "Time per request", 1))
    assert result.time_taken_s == float(report_value(text, "Time taken for tests"))
    assert result.transfer_rate_kbytes_per_second == float(report_value(text, "Transfer rate"))


@pytest.mark.parametrize("name", OK_FIXTURES, ids=OK_IDS)
def test_parse_counts(name: str) -> None:
    text, stderr = fixture(name)
    result = parse_ab(text, stderr=stderr)
    assert result.complete_requests == int(report_value(text, "Complete requests"))
    assert result.failed_requests == int(report_value(text, "Failed requests"))
    assert result.total_transferred_bytes == int(report_value(text, "Total transferred"))
    assert result.html_transferred_bytes == int(report_value(text, "HTML transferred"))
    assert result.concurrency == int(report_value(text, "Concurrency Level"))


@pytest.mark.parametrize("name", OK_FIXTURES, ids=OK_IDS)
def test_parse_percentile_table(name: str) -> None:
    text, stderr = fixture(name)
    section = text.split("served within a certain time (ms)")[1]
    table = {
        int(line.split("%")[0]): float(line.split()[1])
        for line in section.splitlines()
        if "%" in line
    }
    assert list(table) == [50, 66, 75, 80, 90, 95, 98, 99, 100]
    assert dict(parse_ab(text, stderr=stderr).percentiles_ms) == table


def test_parse_connection_times_row() -> None:
    text, _ = fixture("get_c10.txt")
    total_row = next(line for line in text.splitlines() if line.startswith("Total:"))
    low, mean, sd, median, high = (float(x) for x in total_row.split()[1:])
    row = parse_ab(text).connection_times_ms["Total"]
    assert (row.min, row.mean, row.sd, row.median, row.max) == (low, mean, sd, median, high)


def test_parse_plain_run_has_no_failures() -> None:
    text, stderr = fixture("get_c10.txt")
    result = parse_ab(text, stderr=stderr)
    assert result.complete_requests == 5000
    assert (result.failed_requests, result.non_2xx, result.keepalive_requests) == (0, 0, 0)


def test_parse_non_2xx_and_failure_breakdown() -> None:
    text, stderr = fixture("keepalive_non2xx.txt")
    result = parse_ab(text, stderr=stderr)
    assert result.non_2xx == int(report_value(text, "Non-2xx responses"))
    assert result.keepalive_requests == int(report_value(text, "Keep-Alive requests")) == 2000
    # ab counts a response whose length differs from the first one as a "Length" failure.
    assert result.failed_length == result.failed_requests > 0
    assert (result.failed_connect, result.failed_receive, result.failed_exceptions) == (0, 0, 0)


# --- failures ---------------------------------------------------------------------------------


def test_refused_is_tool_error_from_stderr() -> None:
    text, stderr = fixture("refused.txt")
    with pytest.raises(ToolError, match="Connection refused") as excinfo:
        parse_ab(text, stderr=stderr)
    assert excinfo.type is ToolError
    assert excinfo.value.tool == "ab"
    assert stderr.strip() in excinfo.value.output


def test_refused_without_stderr_is_parse_error() -> None:
    text, _ = fixture("refused.txt")
    with pytest.raises(ParseError, match="incomplete"):
        parse_ab(text)


def test_report_missing_rate_is_parse_error() -> None:
    text, _ = fixture("get_c10.txt")
    cut = "\n".join(line for line in text.splitlines() if not line.startswith("Requests per"))
    with pytest.raises(ParseError, match="rps"):
        parse_ab(cut)
