"""locust runner: argv builder and record/summary parsers on captured output (fixtures/locust).

locust itself only ever runs in a child process; tests/integration/test_locust_runner.py runs it
for real.
"""

from __future__ import annotations

import csv
import json
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from cnibench.errors import ConfigError, ParseError, ToolError
from cnibench.tools.locust_runner import (
    locust_runner_argv,
    parse_locust_records,
    parse_locust_summary,
)

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "locust"
RECORDS = FIXTURES / "split_records.csv"
SUMMARY = FIXTURES / "split_records.csv.stderr"


def csv_rows() -> list[dict[str, str]]:
    with RECORDS.open(newline="") as handle:
        return list(csv.DictReader(handle))


def test_argv() -> None:
    argv = locust_runner_argv(
        "http://198.18.0.10:80/", users=100, spawn_rate=100, duration=10, out="/tmp/r.csv"
    )
    assert argv == [
        sys.executable,
        "-P",
        "-m",
        "cnibench.tools.locust_runner",
        "--url",
        "http://198.18.0.10:80/",
        "--users",
        "100",
        "--spawn-rate",
        "100",
        "--duration",
        "10",
        "--backend-header",
        "X-Backend",
        "--request-timeout",
        "5",
        "--out",
        "/tmp/r.csv",
        "--engine",
        "epoll",
    ]


def test_the_epoll_engine_refuses_https_and_unknown_engines_are_refused() -> None:
    from cnibench.errors import ConfigError

    with pytest.raises(ConfigError, match="plain http"):
        locust_runner_argv("https://198.18.0.10/", users=1, spawn_rate=1, duration=1, out="-")
    with pytest.raises(ConfigError, match="unknown engine 'k6'"):
        locust_runner_argv(
            "http://198.18.0.10/", users=1, spawn_rate=1, duration=1, out="-", engine="k6"
        )
    argv = locust_runner_argv(
        "https://198.18.0.10/", users=1, spawn_rate=1, duration=1, out="-", engine="locust"
    )
    assert argv[-2:] == ["--engine", "locust"]


def test_argv_with_wait_and_header() -> None:
    argv = locust_runner_argv(
        "http://h/",
        users=1,
        spawn_rate=0.5,
        duration=1.5,
        out="-",
        wait=0.25,
        backend_header="X-Pod",
    )
    assert argv[argv.index("--spawn-rate") + 1] == "0.5"
    assert argv[argv.index("--backend-header") + 1] == "X-Pod"
    assert argv[-2:] == ["--wait", "0.25"]


@pytest.mark.parametrize(
    ("url", "options"),
    [
        ("198.18.0.10/", {}),
        ("http://h/", {"users": 0}),
        ("http://h/", {"spawn_rate": 0}),
        ("http://h/", {"duration": -1}),
        ("http://h/", {"wait": -0.1}),
        ("http://h/", {"out": ""}),
        ("http://h/", {"processes": 0}),
    ],
    ids=[
        "no-scheme",
        "no-users",
        "zero-spawn-rate",
        "negative-duration",
        "negative-wait",
        "no-out",
        "no-processes",
    ],
)
def test_argv_rejects_bad_values(url: str, options: dict[str, Any]) -> None:
    arguments: dict[str, Any] = {"users": 1, "spawn_rate": 1, "duration": 1, "out": "-"}
    arguments.update(options)
    with pytest.raises(ConfigError):
        locust_runner_argv(url, **arguments)


def test_records_from_file() -> None:
    rows = csv_rows()
    run = parse_locust_records(RECORDS)
    assert run.requests == len(rows) > 0
    assert list(run.records.columns) == ["time", "backend", "latency_ms", "status", "error"]
    assert run.records["time"].tolist() == pytest.approx([float(r["time"]) for r in rows])
    assert run.records["latency_ms"].tolist() == pytest.approx(
        [float(r["latency_ms"]) for r in rows]
    )
    assert run.records["status"].tolist() == [int(r["status"]) for r in rows]


def test_records_backend_counts() -> None:
    expected = Counter(r["backend"] for r in csv_rows() if r["status"] == "200")
    run = parse_locust_records(RECORDS)
    assert dict(run.backend_counts()) == dict(expected)
    assert set(expected) == {"v1", "v2"}
    assert run.failures == 0


def test_records_rate_spans_first_start_to_last_end() -> None:
    rows = csv_rows()
    starts = [float(r["time"]) for r in rows]
    ends = [float(r["time"]) + float(r["latency_ms"]) / 1000 for r in rows]
    run = parse_locust_records(RECORDS)
    assert run.requests_per_second == pytest.approx(len(rows) / (max(ends) - min(starts)))


def test_records_from_text_equal_records_from_file() -> None:
    from_text = parse_locust_records(RECORDS.read_text())
    from_file = parse_locust_records(RECORDS)
    assert from_text.records.equals(from_file.records)


def test_failed_requests_are_counted() -> None:
    text = RECORDS.read_text() + "1795344757.5,,0.9,0,ConnectionRefusedError: refused\n"
    text += "1795344757.6,v1,1.2,404,LocustBadStatusCode: code=404\n"
    run = parse_locust_records(text)
    assert run.failures == 2
    assert "" not in run.backend_counts()


def test_summary_line() -> None:
    text = SUMMARY.read_text()
    line = json.loads(text.strip().splitlines()[-1])
    summary = parse_locust_summary(text)
    assert summary.requests == line["requests"] == len(csv_rows())
    assert summary.failures == line["failures"]
    assert summary.users == 4
    assert dict(summary.backends) == line["backends"]
    assert dict(summary.statuses) == {int(k): v for k, v in line["statuses"].items()}


def test_summary_error_line_is_tool_error() -> None:
    with pytest.raises(ToolError, match="cannot write records"):
        parse_locust_summary('{"error": "cannot write records: No space left on device"}\n')


def test_missing_summary_is_parse_error() -> None:
    with pytest.raises(ParseError):
        parse_locust_summary("Traceback (most recent call last):\n")


def test_header_only_is_tool_error() -> None:
    with pytest.raises(ToolError, match="no request"):
        parse_locust_records("time,backend,latency_ms,status,error\n")


def test_path_given_as_str_is_parse_error_with_hint() -> None:
    with pytest.raises(ParseError, match=r"pathlib\.Path"):
        parse_locust_records(str(RECORDS))


def test_wrong_columns_are_parse_error() -> None:
    with pytest.raises(ParseError, match="must start with"):
        parse_locust_records("time,latency\n1.0,2.0\n")


def test_unreadable_file_is_parse_error(tmp_path: Path) -> None:
    with pytest.raises(ParseError, match="cannot read"):
        parse_locust_records(tmp_path / "missing.csv")


def test_importing_cnibench_tools_does_not_import_locust() -> None:
    # locust monkey-patches the process with gevent on import; it must stay in the child.
    code = (
        "import sys, cnibench.tools as t; t.locust_runner_argv; t.parse_locust_records; "
        "print('locust' in sys.modules, 'gevent' in sys.modules)"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True
    )
    assert done.stdout.split() == ["False", "False"]


def test_argv_names_the_processes_only_when_given() -> None:
    base = {"users": 4, "spawn_rate": 4, "duration": 1, "out": "-"}
    assert "--processes" not in locust_runner_argv("http://h/", **base)
    argv = locust_runner_argv("http://h/", **base, processes=3)
    assert argv[argv.index("--processes") + 1] == "3"
