"""The committed kind study proves itself: its ``verdict.md`` and the lines the README and
docs/findings.md quote from it are recomputed here from the records beside them
(``cnibench.load_results``), so an edited number, or a record that no longer gives it, fails."""

from __future__ import annotations

import functools
import re
import shutil
from pathlib import Path

import pytest

from cnibench.results import load_results
from cnibench.study import STUDY, commands, verdict_markdown

ROOT = Path(__file__).resolve().parents[2]
STUDIES = sorted((ROOT / "docs" / "results").glob("kind-*"))
QUOTE = re.compile(r"<!-- study-verdict (\S+) -->\n(.*?)<!-- /study-verdict -->", re.S)


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


def test_findings_list_the_plain_commands_of_the_study() -> None:
    text = (ROOT / "docs" / "findings.md").read_text()
    out = Path("docs/results") / STUDIES[-1].name
    for line in commands(out):
        assert " ".join(line) in " ".join(text.split()), " ".join(line)
    assert len(STUDY) >= 3
