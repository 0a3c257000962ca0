"""The regression gate's answer as a pull-request comment: what failed and what is undecided
first, each with why or what would decide it, and the comparisons within threshold folded in a
``<details>`` block, the whole at most :data:`MARKDOWN_LIMIT` characters (GitHub's limit for a
comment)."""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from cnibench.report.gate.verdicts import GATE_ALPHA, Answer
from cnibench.report.scrub import scrub_text

if TYPE_CHECKING:
    from cnibench.report.gate.rendering import ResultComparison

__all__ = ["MARKDOWN_LIMIT", "comparison_markdown"]

MARKDOWN_LIMIT = 65_536
"""Most characters of the Markdown: GitHub's limit for the body of a pull-request comment."""

_MARKDOWN_SPECIAL = re.compile(r"([\\`*_\[\]<>])")
"""Markdown syntax escaped in a cell; ``|`` is escaped by :func:`markdown_table`."""

_COLUMNS = ("metric", "condition", "baseline", "candidate", "ratio", "ci", "n")
"""The cells every table shows, in order."""
_RIGHT = {2, 3, 4}
"""Right-aligned columns of every table: baseline, candidate, ratio."""


_FULL = "left out to fit a comment; cnibench compare prints every row"


def _sentence(text: str) -> str:
    """``text`` with a capital first letter and a full stop."""
    return f"{text[:1].upper()}{text[1:]}."


def _cell(text: str) -> str:
    return _MARKDOWN_SPECIAL.sub(r"\\\1", text.replace("\n", " "))


def _table(headers: Sequence[str], rows: Sequence[Sequence[str]], *, shift: int = 0) -> str:
    """A GitHub-flavoured Markdown table of cells already escaped (:func:`_cell`), unpadded: a
    comment has a size limit and a renderer aligns the columns anyway (``---:`` for numbers).
    ``shift`` columns come before :data:`_COLUMNS`."""
    right = {index + shift for index in _RIGHT}
    rule = ["---:" if index in right else "---" for index in range(len(headers))]
    lines = [headers, rule, *rows]
    return "\n".join(
        "| " + " | ".join(c.replace("|", "\\|") for c in line) + " |" for line in lines
    )


def _footnoted(texts: Sequence[str]) -> tuple[list[str], list[str]]:
    """Each text as written, or as a reference ``[n]`` when several rows share it, and the
    notes ``[n] text`` that the references point to."""
    counts: dict[str, int] = {}
    for text in texts:
        counts[text] = counts.get(text, 0) + 1
    numbers: dict[str, int] = {}
    shown = []
    for text in texts:
        if counts[text] > 1:
            number = numbers.setdefault(text, len(numbers) + 1)
            shown.append(f"\\[{number}\\]")
        else:
            shown.append(text)
    return shown, [f"\\[{number}\\] {text}" for text, number in numbers.items()]


def _sections(
    comparison: ResultComparison, cells: Sequence[dict[str, Any]], keep: tuple[int, int]
) -> str:
    """The comment with at most ``keep`` = (undecided, within) rows of those two tables."""
    level = f"{100.0 * comparison.level:g} %"
    failing = [c for c in cells if c["regression"]]
    undecided = [c for c in cells if not c["regression"] and c["answer"] == Answer.UNDECIDED]
    within = [c for c in cells if c["answer"] == Answer.WITHIN and not c["regression"]]
    columns = ["metric", "condition", "baseline", "candidate", "ratio", f"{level} CI", "n"]

    def values(cell: dict[str, Any]) -> list[str]:
        return [_cell(cell[k]) for k in _COLUMNS]

    summary = comparison.summary()
    title, _, counts = summary.partition(": ")
    lines = [
        f"### cnibench compare: **{title}** ({_cell(counts)})",
        "",
        _sentence(_cell(comparison.headline().removeprefix(summary).lstrip("; "))),
        "",
        "Ratio = candidate / baseline of the geometric means of successful, verified runs, with"
        f" its {level} confidence interval. *Regressed*: worse than the threshold and"
        f" significantly so (one-sided, Holm over this comparison at {100 * GATE_ALPHA:g}%), or"
        " a failed run or a missing metric; *within threshold*: the interval's bound on the"
        " worse side clears it; *undecided*: neither, with what would decide it."
        f" {_sentence(_cell(comparison.warning()))}",
    ]
    if failing:
        notes, footnotes = _footnoted([_cell(c["note"]) for c in failing])
        rows = [
            [f"**{_cell(c['verdict'])}**", *values(c), note]
            for c, note in zip(failing, notes, strict=True)
        ]
        lines += ["", f"#### Regressed or failed ({len(failing)})", ""]
        lines += [_table(["verdict", *columns, "why"], rows, shift=1), *_notes(footnotes)]
    if undecided:
        shown = undecided[: keep[0]]
        notes, footnotes = _footnoted([_cell(c["note"]) for c in shown])
        rows = [[*values(c), note] for c, note in zip(shown, notes, strict=True)]
        lines += ["", f"#### Undecided ({len(undecided)}): what would decide each", ""]
        lines += [_table([*columns, "what would decide it"], rows), *_notes(footnotes)]
        if len(shown) < len(undecided):
            lines += ["", f"... and {len(undecided) - len(shown)} more undecided ({_FULL})"]
    if within:
        shown = within[: keep[1]]
        lines += [
            "",
            f"<details><summary>Within threshold ({len(within)})</summary>",
            "",
            _table(columns, [values(c) for c in shown]),
        ]
        if len(shown) < len(within):
            lines += ["", f"... and {len(within) - len(shown)} more within threshold ({_FULL})"]
        lines += ["", "</details>"]
    unmatched = comparison.unmatched_lines()
    if unmatched:
        lines += ["", *(f"- {_cell(line)}" for line in unmatched)]
    return scrub_text("\n".join(lines) + "\n")


def _notes(footnotes: Sequence[str]) -> list[str]:
    """The notes under a table, one paragraph each."""
    return [line for note in footnotes for line in ("", note)]


def comparison_markdown(comparison: ResultComparison, *, limit: int = MARKDOWN_LIMIT) -> str:
    """The comparison as Markdown for a pull-request comment, at most ``limit`` characters.

    Parameters
    ----------
    comparison:
        The gate's comparison.
    limit:
        Most characters; rows within threshold are left out first, then undecided ones (each
        cut said, with where the full table is: ``cnibench compare``'s text output). The
        regressed and failed rows are always kept.

    Returns
    -------
    str
        A ``###`` section: the answer, the headline's details and method, a table of the
        regressed or failed comparisons (with why), one of the undecided ones (with what
        would decide each), those within threshold in a ``<details>`` block, and what only
        one side has.
    """
    answers = comparison.frame["answer"].tolist()
    failing = comparison.frame["regression"].tolist()
    undecided = sum(a == Answer.UNDECIDED and not f for a, f in zip(answers, failing, strict=True))
    within = sum(a == Answer.WITHIN and not f for a, f in zip(answers, failing, strict=True))
    cells = comparison.cells()
    text = _sections(comparison, cells, (undecided, within))
    if len(text) <= limit:
        return text
    # The fewest rows cut: those within threshold first, then undecided ones.
    kept = _most_kept(lambda k: len(_sections(comparison, cells, (undecided, k))) <= limit, within)
    if kept is not None:
        return _sections(comparison, cells, (undecided, kept))
    kept = _most_kept(lambda k: len(_sections(comparison, cells, (k, 0))) <= limit, undecided)
    return _sections(comparison, cells, (kept or 0, 0))


def _most_kept(fits: Callable[[int], bool], total: int) -> int | None:
    """The largest ``k`` in ``[0, total]`` with ``fits(k)`` (``fits`` falls as ``k`` grows), or
    ``None`` when not even 0 fits."""
    if not fits(0):
        return None
    low, high = 0, total
    while low < high:
        middle = (low + high + 1) // 2
        low, high = (middle, high) if fits(middle) else (low, middle - 1)
    return low
