"""One number format for every table: the report's run tables, ``cnibench run``'s table and
``cnibench compare``'s text and Markdown (report.tables.format_number), laid out by rich."""

from __future__ import annotations

import io
import math

import pytest
from compare_support import Condition, write_result_set
from rich.console import Console

from cnibench import cli
from cnibench.records import Measurement, RunStatus
from cnibench.report import write_report
from cnibench.report.compare import compare_result_sets
from cnibench.report.tables import format_number, markdown_table, text_table
from cnibench.results import load_results
from cnibench.scenarios import SCENARIOS
from cnibench.scenarios.base import Condition as ScenarioCondition
from cnibench.scenarios.base import Verification
from cnibench.scenarios.runner import ConditionResult, RunResult


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (1.643e10, "16.43G"),
        (2.5e12, "2.500T"),
        (1.5e6, "1.500M"),
        (999_999.0, "1.000M"),
        (12_345.0, "12.35k"),
        (10_000.0, "10.00k"),
        (7786.0, "7786"),
        (8499.02, "8499"),
        (62.0, "62"),
        (900.0000000001, "900"),
        (0.0, "0"),
        (5.66, "5.660"),
        (0.6, "0.6000"),
        (1.0004, "1.000"),
        (0.018171, "0.01817"),
        (-3.2e9, "-3.200G"),
        (2.5e15, "2.500e+15"),
        (1.5e-7, "1.500e-07"),
        (math.nan, "–"),
        (math.inf, "–"),
    ],
    ids=str,
)
def test_format_number(value: float, text: str) -> None:
    assert format_number(value) == text


THROUGHPUT = 16.43e9
"""bits/s, written 16.43G by the one formatter (the former ones: 16.430G, 1.643e+10)."""


def test_run_table_of_cnibench_run_uses_the_one_formatter() -> None:
    condition = ScenarioCondition("egress", "gateway-off", {"gateway": "off"})
    runs = tuple(
        RunResult(
            f"r{i}", i, 0, RunStatus.OK, "", (Measurement("throughput", THROUGHPUT, "bits/s"),)
        )
        for i in range(3)
    )
    result = ConditionResult("egress", "vxlan", condition, Verification(True, "ok"), runs, "")
    buffer = io.StringIO()
    cli._print_table([result], SCENARIOS, Console(file=buffer, width=200))
    row = next(line for line in buffer.getvalue().splitlines() if "throughput" in line)
    assert "│ 16.43G │" in row


def test_compare_text_and_markdown_use_the_one_formatter(tmp_path) -> None:
    values = [THROUGHPUT] * 3
    base = write_result_set(
        tmp_path / "b", [Condition({"throughput": values})], session_id="20261122T100000Z-00000a"
    )
    cand = write_result_set(
        tmp_path / "c", [Condition({"throughput": values})], session_id="20261122T110000Z-00000b"
    )
    comparison = compare_result_sets(load_results(base), load_results(cand))
    assert "16.43G bits/s" in comparison.text()
    assert "16.43G bits/s" in comparison.markdown()


def test_report_run_tables_use_the_one_formatter(tmp_path) -> None:
    values = [THROUGHPUT, THROUGHPUT * 1.01, THROUGHPUT * 0.99]
    results = write_result_set(
        tmp_path / "r", [Condition({"throughput": values})], session_id="20261122T100000Z-00000a"
    )
    markdown = write_report(results, markdown=tmp_path / "r.md").markdown
    assert markdown is not None
    table = [line for line in markdown.read_text().splitlines() if "| Avg " in line]
    assert len(table) == 1
    assert [cell.strip() for cell in table[0].split("|")][2] == "16.43G"


def test_markdown_table_escapes_pipes_and_takes_brackets_as_text() -> None:
    text = markdown_table(["name", "value"], [["a|b", "1"], ["[bold]x[/bold]", "2"]], right={1})
    header, separator, *rows = text.splitlines()
    assert [c.strip() for c in header.split("|")[1:-1]] == ["name", "value"]
    assert separator.split("|")[2].endswith(":")
    assert rows[0].startswith("| a\\|b ")
    assert "[bold]x[/bold]" in rows[1]


def test_text_table_aligns_right_columns_and_cuts_nothing() -> None:
    long = "x" * 300
    text = text_table(["name", "value"], [[long, "1"], ["b", "16.43G"]], right={1})
    lines = text.splitlines()
    assert lines[0].split() == ["name", "value"]
    assert long in lines[1]
    assert lines[1].endswith(" 1")
    assert lines[2].endswith("16.43G")
    assert len(lines[1]) == len(lines[2])
