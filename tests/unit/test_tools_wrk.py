"""wrk adapter: argv builder and parser on captured real output (fixtures/wrk)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from cnibench.errors import ConfigError, ParseError, ToolError
from cnibench.tools.wrk import parse_wrk, wrk_argv

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "wrk"
OK_FIXTURES = ["t2_c10.txt", "t8_c1000.txt", "non2xx.txt"]
OK_IDS = ["t2-c10", "t8-c1000", "non2xx"]
URL = "http://198.19.1.4:80/"

# Written out here rather than imported, so the test does not reuse the parser's tables.
MICROSECONDS = {"us": 1, "ms": 1_000, "s": 1_000_000}
BYTES = {"B": 1, "KB": 1024, "MB": 1024 * 1024, "GB": 1024 * 1024 * 1024}


def fixture(name: str) -> tuple[str, str]:
    stderr = FIXTURES / f"{name}.stderr"
    return (FIXTURES / name).read_text(), stderr.read_text() if stderr.exists() else ""


def to_us(token: str) -> float:
    for unit in ("us", "ms", "s"):
        if token.endswith(unit):
            return float(token[: -len(unit)]) * MICROSECONDS[unit]
    raise AssertionError(f"no time unit in {token!r}")


def to_bytes(token: str) -> float:
    for unit in ("KB", "MB", "GB", "B"):
        if token.endswith(unit):
            return float(token[: -len(unit)]) * BYTES[unit]
    raise AssertionError(f"no byte unit in {token!r}")


def line_tokens(text: str, first: str) -> list[str]:
    return next(line.split() for line in text.splitlines() if line.split()[:1] == [first])


# --- argv -------------------------------------------------------------------------------------


def test_argv_defaults_follow_seed_004() -> None:
    assert wrk_argv(URL) == [
        "wrk",
        "-t",
        "8",
        "-c",
        "1000",
        "-d",
        "30s",
        "--latency",
        "--timeout",
        "2s",
        URL,
    ]


def test_argv_small_run_without_timeout() -> None:
    argv = wrk_argv(URL, threads=2, connections=10, duration=3.0, timeout=None)
    assert argv == ["wrk", "-t", "2", "-c", "10", "-d", "3s", "--latency", URL]


@pytest.mark.parametrize(
    "options",
    [
        {"threads": 0},
        {"threads": 4, "connections": 2},
        {"duration": 0.5},
        {"timeout": 0.5},
    ],
    ids=["no-threads", "fewer-connections-than-threads", "sub-second-duration", "sub-s-timeout"],
)
def test_argv_rejects_bad_values(options: dict[str, Any]) -> None:
    with pytest.raises(ConfigError):
        wrk_argv(URL, **options)


def test_argv_rejects_url_without_scheme() -> None:
    with pytest.raises(ConfigError):
        wrk_argv("198.19.1.4/")


# --- parser on every captured fixture ---------------------------------------------------------


@pytest.mark.parametrize("name", OK_FIXTURES, ids=OK_IDS)
def test_parse_rate_and_transfer(name: str) -> None:
    text, stderr = fixture(name)
    result = parse_wrk(text, stderr=stderr)
    assert result.requests_per_second == float(line_tokens(text, "Requests/sec:")[1])
    assert result.transfer_bytes_per_second == pytest.approx(
        to_bytes(line_tokens(text, "Transfer/sec:")[1])
    )


@pytest.mark.parametrize("name", OK_FIXTURES, ids=OK_IDS)
def test_parse_latency_table_with_units(name: str) -> None:
    text, stderr = fixture(name)
    _, avg, stdev, high, _ = line_tokens(text, "Latency")
    result = parse_wrk(text, stderr=stderr)
    assert result.latency_avg_us == pytest.approx(to_us(avg))
    assert result.latency_stdev_us == pytest.approx(to_us(stdev))
    assert result.latency_max_us == pytest.approx(to_us(high))


@pytest.mark.parametrize("name", OK_FIXTURES, ids=OK_IDS)
def test_parse_latency_distribution(name: str) -> None:
    text, stderr = fixture(name)
    section = text.split("Latency Distribution")[1].splitlines()[1:5]
    expected = {int(line.split("%")[0]): to_us(line.split()[1]) for line in section}
    result = parse_wrk(text, stderr=stderr)
    assert list(result.latency_percentiles_us) == [50, 75, 90, 99]
    assert dict(result.latency_percentiles_us) == pytest.approx(expected)


@pytest.mark.parametrize("name", OK_FIXTURES, ids=OK_IDS)
def test_parse_request_count_and_shape(name: str) -> None:
    text, stderr = fixture(name)
    summary = next(line.split() for line in text.splitlines() if " requests in " in line)
    shape = next(line.split() for line in text.splitlines() if "threads and" in line)
    result = parse_wrk(text, stderr=stderr)
    assert result.requests == int(summary[0])
    assert result.duration_s == pytest.approx(to_us(summary[3].rstrip(",")) / 1e6)
    assert result.bytes_read == pytest.approx(to_bytes(summary[4]))
    assert (result.threads, result.connections) == (int(shape[0]), int(shape[3]))


def test_parse_thread_rate_suffixes() -> None:
    text, _ = fixture("t8_c1000.txt")
    _, avg, stdev, high, _ = line_tokens(text, "Req/Sec")
    assert avg.endswith("k")  # the row this test is about uses wrk's k suffix
    result = parse_wrk(text)
    assert result.thread_rps_avg == pytest.approx(float(avg[:-1]) * 1000)
    assert result.thread_rps_stdev == pytest.approx(float(stdev[:-1]) * 1000)
    assert result.thread_rps_max == pytest.approx(float(high[:-1]) * 1000)


def test_parse_socket_errors_under_1000_connections() -> None:
    text, _ = fixture("t8_c1000.txt")
    tokens = next(line for line in text.splitlines() if "Socket errors" in line).split()
    connect, read, write, timeout = (int(t.rstrip(",")) for t in tokens[3::2])
    errors = parse_wrk(text).errors
    assert (errors.connect, errors.read, errors.write, errors.timeout) == (
        connect,
        read,
        write,
        timeout,
    )
    assert errors.total == connect + read + write + timeout > 0


def test_parse_non_2xx_responses() -> None:
    text, _ = fixture("non2xx.txt")
    count = int(next(line for line in text.splitlines() if "Non-2xx" in line).split()[-1])
    errors = parse_wrk(text).errors
    assert errors.non_2xx_3xx == count > 0
    assert errors.total == count


def test_clean_run_has_no_errors() -> None:
    assert parse_wrk(fixture("t2_c10.txt")[0]).errors.total == 0


# --- failures ---------------------------------------------------------------------------------


def test_refused_is_tool_error() -> None:
    text, stderr = fixture("refused.txt")
    with pytest.raises(ToolError, match="unable to connect") as excinfo:
        parse_wrk(text, stderr=stderr)
    assert excinfo.type is ToolError
    assert excinfo.value.tool == "wrk"


def test_report_without_latency_distribution_is_parse_error() -> None:
    text, _ = fixture("t2_c10.txt")
    head, tail = text.split("  Latency Distribution")
    without = head + "\n".join(line for line in tail.splitlines() if "%" not in line)
    with pytest.raises(ParseError, match="--latency"):
        parse_wrk(without)


def test_empty_output_is_parse_error() -> None:
    with pytest.raises(ParseError):
        parse_wrk("")
