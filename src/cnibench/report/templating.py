"""The report's jinja2 templates (``templates/report.html``, ``templates/report.md``, shipped in
the package) and the tests and filters they use: which cells are numbers, where a label or a
matrix cell may break."""

from __future__ import annotations

import re

import jinja2
import markupsafe

from cnibench.report import tables

__all__ = ["numeric", "report_templates"]

_TEMPLATES = "templates"
"""Package directory of the report's jinja2 templates (``report.html``, ``report.md``)."""


def numeric(cell: object) -> bool:
    """Whether a table cell is a number (right-aligned), as the HTML template tests it."""
    return bool(re.fullmatch(r"[-+]?[0-9.,eE+–-]+[kMGT%]?|n/a", str(cell).strip()))


def _breakable(label: str) -> markupsafe.Markup:
    """A configuration label that a narrow column may break after ``:`` and ``,`` (the
    terminal's matrix breaks there too): escaped, with ``<wbr>`` at those places."""
    escaped = str(markupsafe.escape(label))
    return markupsafe.Markup(escaped.replace(":", ":<wbr>").replace(",", ",<wbr>"))


_MARK_OR_COUNT = re.compile(r"^(?:[●≈?⊘⚠]|n\d+$|ok$|drift$)")
"""A matrix cell's token that opens its second part: a mark (●, ≈, ?N, ⊘, ⚠), the runs
(``n5``) or a word that stands for a mark."""


def _matrix_cell(cell: object) -> markupsafe.Markup:
    """A matrix cell that may break in one place only: between its estimate with its
    interval (``×0.73 0.45-1.17``) and its marks and runs (``?669 n5``), so that a
    configuration's column is about half as wide and every column fits the page; each part
    stays whole (a ``nowrap`` span: a browser would break after the ``?`` of ``?669``)."""
    tokens = str(cell).split(" ")
    cut = next((i for i, t in enumerate(tokens) if i and _MARK_OR_COUNT.match(t)), len(tokens))
    parts = [" ".join(tokens[:cut]), " ".join(tokens[cut:])]
    return markupsafe.Markup(" ").join(
        markupsafe.Markup('<span class="whole">{}</span>').format(part) for part in parts if part
    )


def report_templates() -> jinja2.Environment:
    """The report's templates, HTML autoescaped, Markdown as written."""
    environment = jinja2.Environment(
        loader=jinja2.PackageLoader("cnibench.report", _TEMPLATES),
        autoescape=jinja2.select_autoescape(enabled_extensions=("html",), default=False),
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
    )
    environment.tests["numeric"] = numeric
    environment.filters["markdown_table"] = tables.markdown_table
    environment.filters["breakable"] = _breakable
    environment.filters["matrix_cell"] = _matrix_cell
    return environment
