"""Every metric cnibench records, declared once: which way it gets better, whether the
regression gate compares it, whether 0 is a real reading, and the short name a terminal
matrix gives it.

The gate (:mod:`cnibench.report.gate.directions`) and the feature matrix
(:mod:`cnibench.report.matrix`: its short names, and whether a detectable change is a cost or
a gain) read :data:`CATALOG` when they run, so a metric's direction is changed here and both
follow. Per-node and per-agent resources (``cpu@egress-gw``, ``ram@agent``) are one entry
each by their prefix (:data:`PER_NODE_CPU`, :data:`PER_NODE_RAM`).

>>> [str(direction_of(m)) for m in ("throughput", "cpu@egress-gw", "shares")]
['higher is better', 'lower is better', 'None']
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import TypeVar

__all__ = [
    "CATALOG",
    "PER_NODE_CPU",
    "PER_NODE_RAM",
    "CatalogView",
    "Direction",
    "Metric",
    "direction_of",
    "metric_info",
]


class Direction(enum.StrEnum):
    """Which way a metric gets better."""

    HIGHER_IS_BETTER = "higher is better"
    LOWER_IS_BETTER = "lower is better"


@dataclass(frozen=True)
class Metric:
    """One metric's declaration.

    Attributes
    ----------
    name:
        As records carry it (``throughput``); a prefix ending in ``@`` stands for every
        node's or agent's own (``cpu@``).
    direction:
        Which way it gets better; ``None`` where neither is (a share, a yes/no outcome).
    gated:
        Whether ``cnibench compare`` compares it.
    zero_possible:
        Whether 0 is a reading (CPU, memory) rather than a failed measurement (a rate, a
        time); the gate fails a gated metric at 0 otherwise.
    short:
        The terminal matrix's name for it where the full one is long (``""``: the name).
    """

    name: str
    direction: Direction | None
    gated: bool = False
    zero_possible: bool = False
    short: str = ""


_HIGHER, _LOWER = Direction.HIGHER_IS_BETTER, Direction.LOWER_IS_BETTER

PER_NODE_CPU = "cpu@"
"""Prefix of one node's (``cpu@egress-gw``) or the CNI agents' (``cpu@agent``) CPU, in cores."""

PER_NODE_RAM = "ram@"
"""Prefix of one node's or the CNI agents' memory (``ram@agent``)."""

CATALOG: dict[str, Metric] = {
    m.name: m
    for m in (
        # Rates (bits/s, requests/s, 1/s) and the share of connections that succeed: the gate
        # compares them in this order within a condition.
        Metric("throughput", _HIGHER, gated=True),
        Metric("requests_per_second", _HIGHER, gated=True, short="req/s"),
        Metric("new_connections_per_second", _HIGHER, gated=True, short="new conn/s"),
        Metric("connection_success_rate", _HIGHER, gated=True, short="conn success"),
        # Times (µs or ms): iperf3 RTT, sockperf, ab, wrk, curl request-response.
        Metric("latency_avg", _LOWER, gated=True),
        Metric("latency_mean", _LOWER, gated=True),
        Metric("latency_p50", _LOWER, gated=True),
        Metric("latency_p99", _LOWER, gated=True),
        # sockperf during a --pairs run's iperf3 streams (µs).
        Metric("latency_under_load_avg", _LOWER, gated=True, short="latency loaded"),
        Metric("latency_under_load_p50", _LOWER, gated=True),
        Metric("latency_under_load_p99", _LOWER, gated=True),
        Metric("time_per_request", _LOWER, gated=True),
        Metric("rtt_mean", _LOWER, gated=True),
        Metric("rr_mean", _LOWER, gated=True),
        Metric("rr_p50", _LOWER, gated=True),
        Metric("rr_p99", _LOWER, gated=True),
        # Resources over the run window (%, MB; cores for a node or the agents).
        Metric("cpu", _LOWER, gated=True, zero_possible=True),
        Metric("ram", _LOWER, gated=True, zero_possible=True),
        Metric(PER_NODE_CPU, _LOWER, gated=True, zero_possible=True),
        Metric(PER_NODE_RAM, _LOWER, zero_possible=True),
        Metric("cores_per_gbps", _LOWER, zero_possible=True, short="cores/Gbit/s"),
        Metric("cores_per_kconn", _LOWER, zero_possible=True, short="cores/kconn/s"),
        # Times to effect (s) and what leaked meanwhile: too skewed for the gate's ratio of
        # geometric means at a relative threshold; the report states their percentiles.
        Metric("policy_enforcement_time", _LOWER),
        Metric("policy_removal_time", _LOWER),
        Metric("egress_gateway_takeover_time", _LOWER),
        Metric("new_service_time", _LOWER),
        Metric("service_programming_time", _LOWER),
        Metric("service_creation_time", _LOWER),
        Metric("policy_enforcement_time_leaks", _LOWER, zero_possible=True),
        Metric("policy_removal_time_leaks", _LOWER, zero_possible=True),
        Metric("egress_gateway_takeover_time_leaks", _LOWER, zero_possible=True),
        Metric("new_service_time_leaks", _LOWER, zero_possible=True),
        # Loss.
        Metric("retransmits", _LOWER, zero_possible=True),
        Metric("retransmit_rate", _LOWER, zero_possible=True),
        Metric("failed_connections", _LOWER, zero_possible=True),
        # Neither way is better: a split's shares, yes/no outcomes, the host's idle share.
        Metric("shares", None),
        Metric("reachable", None, zero_possible=True),
        Metric("matches_reference", None, zero_possible=True),
        Metric("host_idle", None, zero_possible=True),
    )
}
"""Every declared metric by name, the gated ones first in the gate's order. Mutable on
purpose: a test (or a plugin) that declares a metric adds an entry, and everything that reads
directions follows."""


def metric_info(name: str) -> Metric | None:
    """The declaration of ``name`` (a per-node ``cpu@<role>`` or ``ram@<role>`` by its
    prefix), or ``None`` for a metric nobody declared."""
    if name in CATALOG:
        return CATALOG[name]
    for prefix in (PER_NODE_CPU, PER_NODE_RAM):
        if name.startswith(prefix) and len(name) > len(prefix) and prefix in CATALOG:
            return CATALOG[prefix]
    return None


def direction_of(name: str) -> Direction | None:
    """Which way ``name`` gets better; ``None`` for neither, or an undeclared metric."""
    info = metric_info(name)
    return info.direction if info is not None else None


_V = TypeVar("_V")


class CatalogView(Mapping[str, _V]):
    """What ``select`` gives for each declared metric (those it gives ``None`` for left out),
    read from :data:`CATALOG` whenever asked, in its order: the gate's directions and the
    matrix's short names are such views, so they follow a change to the catalog at once."""

    def __init__(self, select: Callable[[Metric], _V | None]) -> None:
        self._select = select

    def _items(self) -> dict[str, _V]:
        chosen = ((m.name, self._select(m)) for m in CATALOG.values())
        return {name: value for name, value in chosen if value is not None}

    def __getitem__(self, metric: str) -> _V:
        return self._items()[metric]

    def __iter__(self) -> Iterator[str]:
        return iter(self._items())

    def __len__(self) -> int:
        return len(self._items())
