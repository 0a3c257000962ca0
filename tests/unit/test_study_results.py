"""The committed kind study proves itself: its ``verdict.md``, the lines the README and
docs/findings.md quote from it, and every number of docs/findings.md's prose (marked
``<!-- fact KEY -->``, :mod:`cnibench.report.facts`) are recomputed here from the records beside
them (``cnibench.load_results``), so an edited number, or a record that no longer gives it,
fails."""

from __future__ import annotations

import functools
import json
import re
import shlex
import shutil
from pathlib import Path

import pytest

from cnibench.report.facts import FACT, Facts, marked_facts, unmarked_claims, unmarked_numbers
from cnibench.results import load_results
from cnibench.study import verdict_markdown

ROOT = Path(__file__).resolve().parents[2]
STUDIES = sorted((ROOT / "docs" / "results").glob("kind-*"))
QUOTE = re.compile(r"<!-- study-verdict (\S+) -->\n(.*?)<!-- /study-verdict -->", re.S)


@functools.cache
def _facts(name: str) -> Facts:
    """The facts of ``docs/results/<name>`` (records and verdict loaded once)."""
    return Facts.of(ROOT / "docs" / "results" / name)


FINDINGS = ROOT / "docs" / "findings.md"
REPORTED = re.compile(r"<!-- study (kind-\S+) -->")
"""The study docs/findings.md reports (a newer one may be committed before the page is
rewritten for it)."""


def _reported() -> Path:
    found = REPORTED.findall(FINDINGS.read_text())
    assert len(found) == 1, f"docs/findings.md names {len(found)} studies: {found}"
    return ROOT / "docs" / "results" / found[0]


def _fact(key: str) -> str:
    """A marked key's text: of the study the findings report, or of ``@<results set> KEY``."""
    if key.startswith("@"):
        name, _, key = key[1:].partition(" ")
        return _facts(name).get(key)
    return _facts(_reported().name).get(key)


def _wrong_facts(text: str) -> list[str]:
    return [
        f"{key}: the page says {shown!r}, the records {_fact(key)!r}"
        for key, shown in marked_facts(text)
        if shown != _fact(key)
    ]


@functools.cache
def _recomputed(study: Path) -> str:
    """The study's verdict from its records (a few seconds: computed once per study)."""
    return verdict_markdown(study)


def test_a_study_is_committed_with_n_at_least_5_everywhere() -> None:
    assert STUDIES, "docs/results/kind-<date>/ is missing: run nox -s study"
    df = load_results(STUDIES[-1], sessions="all")
    ok = df[(df["status"] == "ok") & df["verified"]].drop_duplicates("run_id")
    per_condition = ok.groupby(["cni", "scenario", "condition"]).size()
    assert per_condition.min() >= 5, per_condition[per_condition < 5]
    assert ok["cni"].nunique() >= 3
    assert ok["scenario"].nunique() >= 4


@pytest.mark.parametrize("study", STUDIES, ids=lambda p: p.name)
def test_the_verdict_is_recomputed_from_the_records(study: Path) -> None:
    assert (study / "verdict.md").read_text() == _recomputed(study)


def test_an_edited_number_in_the_verdict_is_caught(tmp_path: Path) -> None:
    copy = tmp_path / STUDIES[-1].name
    shutil.copytree(STUDIES[-1], copy)
    text = (copy / "verdict.md").read_text()
    number = re.search(r"×(\d)", text)
    assert number is not None
    digit = number.group(1)
    edited = text[: number.start(1)] + str((int(digit) + 1) % 10) + text[number.end(1) :]
    (copy / "verdict.md").write_text(edited)
    assert (copy / "verdict.md").read_text() != verdict_markdown(copy)


@pytest.mark.parametrize("document", ["README.md", "docs/findings.md"])
def test_quoted_verdict_lines_are_lines_of_the_recomputed_verdict(document: str) -> None:
    quotes = QUOTE.findall((ROOT / document).read_text())
    assert quotes, f"{document} quotes no study verdict line"
    for name, block in quotes:
        recomputed = _recomputed(ROOT / "docs" / "results" / name).splitlines()
        for line in block.strip().splitlines():
            line = line.strip().removeprefix("- ").removeprefix("> ").strip()
            if line.startswith("```") or not line:
                continue
            assert f"- {line}" in recomputed, line


def test_the_findings_report_a_committed_study() -> None:
    assert _reported() in STUDIES


def test_findings_list_the_plain_commands_the_study_ran() -> None:
    # The commands that made the reported study, from its own account (study.json): the
    # plan (STUDY) may since have changed for the next study.
    text = " ".join(FINDINGS.read_text().split())
    account = json.loads((_reported() / "study.json").read_text())
    ran = [s["command"] for s in account["steps"] if s["command"].startswith("cnibench run ")]
    assert len(ran) >= 3
    for command in ran:
        assert " ".join(shlex.split(command)) in text, command


def test_every_marked_number_of_the_findings_is_what_the_records_give() -> None:
    text = (ROOT / "docs" / "findings.md").read_text()
    assert len(marked_facts(text)) >= 30
    assert _wrong_facts(text) == []


def test_the_findings_prose_has_no_number_outside_a_mark() -> None:
    assert unmarked_numbers((ROOT / "docs" / "findings.md").read_text()) == []


def test_one_edited_digit_of_a_marked_number_is_caught() -> None:
    text = (ROOT / "docs" / "findings.md").read_text()
    mark = next(m for m in FACT.finditer(text) if re.search(r"\d", m.group(2)))
    digit = mark.start(2) + re.search(r"\d", mark.group(2)).start()  # type: ignore[union-attr]
    edited = text[:digit] + str((int(text[digit]) + 1) % 10) + text[digit + 1 :]
    assert len(_wrong_facts(edited)) == 1


def test_the_findings_state_a_direction_only_through_a_call() -> None:
    """ "costs", "same within", "wins over" ... in the page's own prose are the verdict's calls
    (``call`` facts, re-derived above), never words written beside a number."""
    text = FINDINGS.read_text()
    assert unmarked_claims(text) == []
    assert any(key.startswith("call ") for key, _ in marked_facts(text))


def test_one_edited_direction_is_caught() -> None:
    text = FINDINGS.read_text()
    mark = next(m for m in FACT.finditer(text) if m.group(1).strip().startswith("call "))
    swapped = {"higher": "lower", "lower": "higher"}.get(mark.group(2), "higher")
    edited = text[: mark.start(2)] + swapped + text[mark.end(2) :]
    assert len(_wrong_facts(edited)) == 1
