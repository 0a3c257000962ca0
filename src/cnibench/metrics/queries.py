"""Named PromQL queries: the node-level formulas of seed 001, with their units.

Seed 001 measured every node with three node-exporter formulas (CPU %, RAM, received bytes).
Here each is a :class:`NamedQuery` whose PromQL text is a template; :meth:`NamedQuery.render`
fills in the ``irate`` window, the interface regex and optional label matchers. Rendering is a
pure function, so what is sent to Prometheus can be read and tested without a server.

Why the window is 5 s and not the seed's 1 min
----------------------------------------------
``irate(x[W])`` uses only the last two samples inside the look-back window ``W``. ``W`` must
therefore span at least two scrape intervals (or the result is empty, the failure REFERENCE-CNI
describes for the default 1 min scrape interval), and it should be short, because it bounds how
old the samples behind a value may be: with ``W = 1m`` the first minute of a short run may be
computed from samples taken before the run began, and a node-exporter that stopped answering
keeps reporting its last rate for a minute. With the 1 s scrape interval the lab and cnibench's
in-cluster Prometheus use, ``5s`` covers five scrapes (room for jitter and one missed scrape)
while keeping every value inside the run it describes. Use a larger window for a slower scrape
interval (at least four times the interval).
"""

from __future__ import annotations

import re
import string
import types
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from cnibench.errors import ConfigError

__all__ = [
    "CPU_PERCENT",
    "DEFAULT_DEVICE_REGEX",
    "DEFAULT_WINDOW",
    "NAMED_QUERIES",
    "RAM_MB",
    "RECEIVE_RATE",
    "RECEIVE_RATE_BITS",
    "NamedQuery",
    "label_selector",
    "promql_string",
    "validate_duration",
]

DEFAULT_WINDOW = "5s"
"""Default ``irate`` look-back window (see the module docstring for why 5 s)."""

DEFAULT_DEVICE_REGEX = "(?i)^(ens|eth).+$"
"""Seed 001's interface regex (cloud VM NICs). The lab's node interfaces are named
``cb<id>-<node>u`` and need their own regex, e.g. ``"^cb[0-9a-f]+-.*$"``."""

_DURATION_RE = re.compile(r"^(?:[0-9]+(?:ms|s|m|h|d|w|y))+$")
_LABEL_NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def validate_duration(value: str, *, what: str = "duration") -> str:
    """Check that ``value`` is a Prometheus duration such as ``"5s"``, ``"1m30s"``, ``"250ms"``.

    Parameters
    ----------
    value:
        The duration text.
    what:
        What the value is, used in the error message (e.g. ``"irate window"``).

    Returns
    -------
    str
        ``value`` unchanged.

    Raises
    ------
    ConfigError
        If ``value`` is not a positive Prometheus duration.
    """
    if not _DURATION_RE.match(value) or not re.search(r"[1-9]", value):
        raise ConfigError(
            f"invalid {what} {value!r}: expected a Prometheus duration such as '5s' or '1m30s'"
        )
    return value


def promql_string(value: str) -> str:
    """Quote ``value`` as a PromQL double-quoted string literal.

    PromQL strings follow Go's escaping rules, so a regex such as ``127\\.0\\.0\\.1`` must have
    its backslashes doubled inside double quotes.

    Parameters
    ----------
    value:
        Any text, e.g. a label value or a regular expression.

    Returns
    -------
    str
        The literal including the surrounding double quotes.
    """
    escaped = (
        value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n").replace("\t", "\\t")
    )
    return f'"{escaped}"'


def label_selector(
    *,
    instances: Sequence[str] | None = None,
    labels: Mapping[str, str] | None = None,
) -> str:
    """Extra label matchers to add inside a metric selector's braces.

    Parameters
    ----------
    instances:
        Exact ``instance`` label values (``host:port`` or names set by
        :func:`~cnibench.metrics.config.prometheus_config`); matched with one anchored regex
        in which every value is escaped, so ``10.0.0.1:9100`` does not also match
        ``10.0.0.11:9100``.
    labels:
        Further exact matches, label name to value (e.g. ``{"job": "node"}``).

    Returns
    -------
    str
        Matchers joined by commas (``'instance=~"...", job="node"'``), or ``""`` when there is
        nothing to match.

    Raises
    ------
    ConfigError
        If a label name is not a valid Prometheus label name or ``instances`` is empty.
    """
    parts: list[str] = []
    if instances is not None:
        if not instances:
            raise ConfigError("instances must not be empty; pass None to select every instance")
        alternatives = "|".join(re.escape(instance) for instance in instances)
        parts.append(f"instance=~{promql_string(f'^(?:{alternatives})$')}")
    for name, value in (labels or {}).items():
        if not _LABEL_NAME_RE.match(name):
            raise ConfigError(f"invalid Prometheus label name {name!r}")
        parts.append(f"{name}={promql_string(value)}")
    return ", ".join(parts)


@dataclass(frozen=True)
class NamedQuery:
    """A PromQL formula with a name and a unit.

    Attributes
    ----------
    name:
        Identifier, e.g. ``"cpu_percent"``.
    promql_template:
        PromQL text with ``string.Template`` placeholders: ``${window}`` (the ``irate``
        look-back window), ``${device_regex}`` (a quoted PromQL string), ``${selector}`` (the
        extra label matchers of :func:`label_selector`, for braces that hold nothing else) and
        ``${matchers}`` (the same preceded by a comma, to follow other matchers). The result
        has one series per ``instance``.
    unit:
        Unit of the query's values, e.g. ``"%"``, ``"MB"``, ``"bytes/s"``.
    description:
        What the value means, for reports and ``--help``.
    """

    name: str
    promql_template: str
    unit: str
    description: str

    def render(
        self,
        *,
        window: str = DEFAULT_WINDOW,
        device_regex: str = DEFAULT_DEVICE_REGEX,
        instances: Sequence[str] | None = None,
        labels: Mapping[str, str] | None = None,
    ) -> str:
        """PromQL text ready to send.

        Parameters
        ----------
        window:
            ``irate`` look-back window, a Prometheus duration (default ``"5s"``).
        device_regex:
            RE2 regex of the network interfaces to count (``device`` label).
        instances, labels:
            Optional matchers, see :func:`label_selector`.

        Returns
        -------
        str
            The query.

        Raises
        ------
        ConfigError
            If ``window`` is not a duration or a matcher is invalid.
        """
        validate_duration(window, what="irate window")
        selector = label_selector(instances=instances, labels=labels)
        return string.Template(self.promql_template).substitute(
            window=window,
            device_regex=promql_string(device_regex),
            selector=selector,
            matchers=f", {selector}" if selector else "",
        )


CPU_PERCENT = NamedQuery(
    name="cpu_percent",
    promql_template=(
        '100 - 100 * avg by (instance) (irate(node_cpu_seconds_total{mode="idle"${matchers}}'
        "[${window}]))"
    ),
    unit="%",
    description="CPU utilisation of the node, all cores averaged (100 % = every core busy)",
)

RAM_MB = NamedQuery(
    name="ram_mb",
    promql_template=(
        "(node_memory_MemTotal_bytes{${selector}} - node_memory_MemAvailable_bytes{${selector}})"
        " / 1024 / 1024"
    ),
    unit="MB",
    description="Memory in use on the node (total minus available), in MB of 2**20 bytes",
)

# Summed per instance: a node namespace in the lab has several interfaces matching its regex
# (underlay plus pod veths); with seed 001's single ens/eth NIC per node the sum is that NIC.
RECEIVE_RATE = NamedQuery(
    name="receive_rate",
    promql_template=(
        "sum by (instance) (irate(node_network_receive_bytes_total"
        "{device=~${device_regex}${matchers}}[${window}]))"
    ),
    unit="bytes/s",
    description="Bytes received per second on the node's matching interfaces",
)

RECEIVE_RATE_BITS = NamedQuery(
    name="receive_rate_bits",
    promql_template=(
        "8 * sum by (instance) (irate(node_network_receive_bytes_total"
        "{device=~${device_regex}${matchers}}[${window}]))"
    ),
    unit="bits/s",
    description="Bits received per second on the node's matching interfaces",
)

NAMED_QUERIES: Mapping[str, NamedQuery] = types.MappingProxyType(
    {query.name: query for query in (CPU_PERCENT, RAM_MB, RECEIVE_RATE, RECEIVE_RATE_BITS)}
)
"""Every named query by name (read-only)."""
