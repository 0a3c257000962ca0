"""Small helpers shared by the tool adapters: option validation and output clean-up."""

from __future__ import annotations

import math
import re
from collections.abc import Sequence

from cnibench.errors import ConfigError

__all__ = [
    "format_number",
    "join_output",
    "on_cpu",
    "require_positive",
    "strip_ansi",
    "whole_seconds",
]

_ANSI_ESCAPE = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")


def strip_ansi(text: str) -> str:
    """Remove terminal colour escapes (sockperf colours some summary lines).

    Parameters
    ----------
    text:
        Tool output.

    Returns
    -------
    str
        ``text`` without ANSI CSI sequences.
    """
    return _ANSI_ESCAPE.sub("", text)


def on_cpu(argv: Sequence[str], cpu: int | None) -> list[str]:
    """``argv`` run on CPU ``cpu`` alone (``taskset -c``, util-linux, in every Debian), or as
    it is for ``None``.

    Raises
    ------
    cnibench.errors.ConfigError
        A negative CPU number.
    """
    if cpu is None:
        return list(argv)
    if isinstance(cpu, bool) or cpu < 0:
        raise ConfigError(f"a CPU number is a whole number from 0, got {cpu!r}")
    return ["taskset", "-c", str(cpu), *argv]


def whole_seconds(value: float, *, tool: str, option: str) -> str:
    """Format a duration for a tool that only accepts whole seconds.

    Parameters
    ----------
    value:
        Duration in seconds; must be a positive whole number (``10`` or ``10.0``).
    tool, option:
        Named in the error message.

    Returns
    -------
    str
        The number of seconds without a decimal point, e.g. ``"10"``.

    Raises
    ------
    cnibench.errors.ConfigError
        When ``value`` is not finite, not positive or has a fractional part.
    """
    if not math.isfinite(value) or value <= 0 or value != int(value):
        raise ConfigError(
            f"{tool} {option} takes a positive whole number of seconds, got {value!r}"
        )
    return str(int(value))


def require_positive(value: float, *, tool: str, name: str) -> None:
    """Reject a non-positive or non-finite numeric parameter.

    Raises
    ------
    cnibench.errors.ConfigError
        When ``value`` is not a finite number above zero.
    """
    if not math.isfinite(value) or value <= 0:
        raise ConfigError(f"{tool}: {name} must be a positive number, got {value!r}")


def format_number(value: float) -> str:
    """Write a number without a useless ``.0`` (``1.0`` -> ``"1"``, ``0.5`` -> ``"0.5"``)."""
    if value == int(value):
        return str(int(value))
    return repr(float(value))


def join_output(stdout: str, stderr: str) -> str:
    """Both output streams of a tool in one text, for :attr:`ToolError.output`."""
    if not stderr:
        return stdout
    if not stdout:
        return stderr
    return f"{stdout.rstrip()}\n{stderr}"
