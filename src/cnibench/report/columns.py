"""Short texts laid out in a terminal's columns: wrapped at spaces, never cut.

The matrix (:mod:`cnibench.report.matrix`) prints cells such as ``×0.57 0.0000019-17354 ?445``.
Cut to fit a column, ``0.0000019-1735…`` is another number, and ``requests_per_second
(reques…`` another name; so a text that does not fit its column goes on in the next line of
that column, broken only at a space, and a column is never narrower than the longest word in
it. All functions are pure: text in, lines out.
"""

from __future__ import annotations

import textwrap
from collections.abc import Sequence

__all__ = ["GAP", "fit_columns", "lay_out_row", "wrap_words"]

GAP = 1
"""Spaces between two columns."""


def wrap_words(text: str, width: int, *, indent: str = "", hang: str = "") -> list[str]:
    """``text`` in lines of at most ``width`` columns, broken only at spaces (never inside a
    number, a hyphenated name or a ``0.61-0.82`` interval): a word longer than ``width`` gets
    a line of its own, whole, rather than cut. ``indent`` starts the first line, ``hang`` the
    others. ``[indent]`` for an empty text."""
    lines = textwrap.wrap(
        text,
        max(1, width),
        initial_indent=indent,
        subsequent_indent=hang,
        break_long_words=False,
        break_on_hyphens=False,
    )
    return lines or [indent]


def _longest_word(texts: Sequence[str]) -> int:
    return max((len(word) for text in texts for word in text.split()), default=0)


def fit_columns(
    columns: Sequence[Sequence[str]], room: int, *, comfortable: int
) -> list[list[int]]:
    """Which columns go side by side, and how wide each is, within ``room`` characters.

    Parameters
    ----------
    columns:
        Each column's texts (its header lines and cells).
    room:
        Characters a block of columns may take, gaps included.
    comfortable:
        Width a column asks for before its texts wrap (its widest text, if narrower): a
        block holds as many columns as fit at that width, so that few cells wrap.

    Returns
    -------
    list of list of int
        One list per block of adjacent columns: each column's width (gap included), in order.
        A column is at least its longest word plus :data:`GAP` wide, even where that exceeds
        ``room`` (a block of one column then: the word is never cut).
    """
    least = [_longest_word(texts) + GAP for texts in columns]
    whole = [max((len(t) for t in texts), default=0) + GAP for texts in columns]
    asked = [max(low, min(full, comfortable)) for low, full in zip(least, whole, strict=True)]
    blocks: list[list[int]] = []
    start = 0
    while start < len(columns):
        end = start + 1
        while end < len(columns) and sum(asked[start : end + 1]) <= room:
            end += 1
        widths = asked[start:end]
        spare = room - sum(widths)
        # What is left goes to the columns whose texts would still wrap, one character each
        # in turn, so that no column takes it all.
        while spare > 0:
            wanting = [i for i in range(len(widths)) if widths[i] < whole[start + i]]
            if not wanting:
                break
            for i in wanting[:spare]:
                widths[i] += 1
            spare -= min(spare, len(wanting))
        blocks.append(widths)
        start = end
    return blocks


def lay_out_row(
    head: Sequence[str], head_width: int, cells: Sequence[Sequence[str]], widths: Sequence[int]
) -> list[str]:
    """One row of a table: ``head`` (its lines) in the first ``head_width`` characters, then
    each cell's lines in its column of ``widths``; as many lines as the tallest, right ends
    stripped."""
    depth = max(len(head), *(len(c) for c in cells)) if cells else len(head)
    lines = []
    for d in range(depth):
        text = (head[d] if d < len(head) else "").ljust(head_width)
        for lines_of_cell, width in zip(cells, widths, strict=True):
            text += (lines_of_cell[d] if d < len(lines_of_cell) else "").ljust(width)
        lines.append(text.rstrip())
    return lines
