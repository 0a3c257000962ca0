"""Which metrics the regression gate compares, which way each gets better, and its threshold.

:data:`METRIC_DIRECTIONS` says which metrics the gate compares and whether higher or lower is
better (with per-node CPU ``cpu@<role>``, :func:`gated_direction`), and
:func:`zero_is_impossible` where a 0 is a failed measurement, both as
:data:`cnibench.metric_catalog.CATALOG` declares them; :func:`parse_threshold` reads
the threshold as ``cnibench compare --threshold`` and the plugin's
``--cnibench-fail-on-regression`` take it, :func:`parse_session_sd` the ``--session-sd`` (the
plugin's ``--cnibench-session-sd``) both take.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from cnibench.errors import ConfigError
from cnibench.metric_catalog import PER_NODE_CPU, CatalogView, Direction, metric_info

__all__ = [
    "DEFAULT_THRESHOLD",
    "METRIC_DIRECTIONS",
    "PER_NODE_CPU",
    "Direction",
    "checked_threshold",
    "format_threshold",
    "gated_direction",
    "metric_order",
    "parse_fraction",
    "parse_session_sd",
    "parse_threshold",
    "zero_is_impossible",
]


METRIC_DIRECTIONS: Mapping[str, Direction] = CatalogView(
    lambda m: m.direction if m.gated and not m.name.endswith("@") else None
)
"""The metrics the gate compares and which way each gets better, in this order within a
condition: a view of :data:`cnibench.metric_catalog.CATALOG`, where they are declared (with
:data:`PER_NODE_CPU` for the per-node CPU of ``cpu@<role>``)."""

DEFAULT_THRESHOLD = 0.05
"""5 %: the default of ``cnibench compare --threshold`` and of the plugin's
``--cnibench-fail-on-regression``."""

_NUMBER = re.compile(r"^(?P<number>[+-]?(?:\d+(?:\.\d*)?|\.\d+))\s*(?P<percent>%?)$")


def gated_direction(metric: str) -> Direction | None:
    """Which way ``metric`` gets better, or ``None`` when the gate does not compare it."""
    info = metric_info(metric)
    return info.direction if info is not None and info.gated else None


def zero_is_impossible(metric: str) -> bool:
    """Whether a value of 0 (or below) of a gated ``metric`` means the measurement failed.

    A rate at 0 (no byte, no request, no new connection, none succeeded) and a time at 0
    (latency, RTT, request-response) are failures, not measurements; CPU and memory (declared
    ``zero_possible`` in the catalog, per-node ``cpu@<role>`` too) may read 0.
    """
    info = metric_info(metric)
    return info is not None and info.gated and not info.zero_possible


def metric_order(metric: str) -> tuple[int, str]:
    """Sort key of a metric: the order of :data:`METRIC_DIRECTIONS`, then by name."""
    order = list(METRIC_DIRECTIONS)
    return (order.index(metric), "") if metric in order else (len(order), metric)


def parse_fraction(text: str, *, what: str = "threshold") -> float:
    """A fraction written as a percentage or a plain fraction: ``"5%"`` and ``"0.05"`` both
    give ``0.05``.

    Parameters
    ----------
    text:
        A percentage from 0 % to 100 % (``"5%"``, ``"2.5 %"``), or a plain fraction below 1
        (``"0.05"``). A plain number of 1 or more is refused as ambiguous (``"5"`` could mean
        5 % or 500 %).
    what:
        How the error messages name the value (``"threshold"``, ``"session SD"``).

    Returns
    -------
    float
        The fraction in [0, 1].

    Raises
    ------
    ConfigError
        Garbage, a negative value, more than 100 %, or a plain number >= 1; one line saying
        what to write instead.
    """
    cleaned = str(text).strip()
    match = _NUMBER.match(cleaned)
    if match is None:
        raise ConfigError(
            f"invalid {what} {text!r}: write a percentage such as 5% or a fraction such as 0.05"
        )
    value = float(match.group("number"))
    if value < 0:
        raise ConfigError(f"invalid {what} {text!r}: it must not be negative")
    if match.group("percent"):
        if value > 100:
            raise ConfigError(f"invalid {what} {text!r}: it must be at most 100%")
        return value / 100.0
    if value >= 1:
        raise ConfigError(
            f"invalid {what} {text!r}: a plain number must be a fraction below 1;"
            f" write {match.group('number')}% for per cent"
        )
    return value


def parse_threshold(text: str) -> float:
    """The regression threshold as a fraction: ``"5%"`` and ``"0.05"`` both give ``0.05``
    (:func:`parse_fraction`).

    Raises
    ------
    ConfigError
        Garbage, a negative value, more than 100 %, or a plain number >= 1; one line saying
        what to write instead.
    """
    return parse_fraction(text, what="threshold")


def parse_session_sd(text: str) -> float:
    """``--session-sd``: the session-to-session SD as a relative change, a fraction in [0, 1]
    (``"3%"`` and ``"0.03"`` both give ``0.03``; :func:`parse_fraction`).

    Raises
    ------
    ConfigError
        As :func:`parse_fraction`, naming the session SD.
    """
    return parse_fraction(text, what="session SD")


def format_threshold(threshold: float) -> str:
    """``0.05`` -> ``"5%"`` (as the command line takes it)."""
    return f"{100.0 * threshold:g}%"


def checked_threshold(threshold: float) -> float:
    """``threshold`` as a float when it is a fraction in [0, 1] (the library's form).

    Raises
    ------
    ConfigError
        Not a number, or outside [0, 1] (e.g. ``5`` meant as per cent).
    """
    if isinstance(threshold, bool) or not isinstance(threshold, int | float):
        raise ConfigError(f"threshold must be a fraction in [0, 1], got {threshold!r}")
    if not 0.0 <= float(threshold) <= 1.0:
        raise ConfigError(f"threshold must be a fraction in [0, 1], got {threshold!r}")
    return float(threshold)
