"""Exit codes of the ``cnibench`` command, one meaning each (see :mod:`cnibench.cli`)."""

from __future__ import annotations

__all__ = ["EXIT_FAILED", "EXIT_INTERRUPTED", "EXIT_OK", "EXIT_UNDECIDED", "EXIT_USAGE"]

EXIT_OK = 0
"""Done: every benchmark ran, the report was written; ``compare``: every gated comparison is
within the threshold (decided)."""
EXIT_FAILED = 1
"""A benchmark failed; ``compare``: a regression, a failed candidate run or a missing metric
or condition (decided, even when other comparisons are undecided)."""
EXIT_USAGE = 2
"""A usage error or bad input (one line on stderr)."""
EXIT_UNDECIDED = 3
"""``compare``: no regression, but some comparison is undecided; its line on stderr says what
would decide it (more sessions or runs, or ``--session-sd``)."""
EXIT_INTERRUPTED = 130
"""Ctrl-C or SIGTERM: everything the run created was removed."""
