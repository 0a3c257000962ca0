"""Where the work went: per-run sums over nodes and agents, and CPU per unit of work.

The records hold each role node's CPU (``cpu@client``, ``cpu@server``, ``cpu@egress-gw``,
cores; only where a node's CPU is its own: ``napi=threaded``), each component's CPU and
memory (``cpu@cilium-agent``, ``ram@flanneld``, ``cpu@traefik``) and host-wide figures
(``cpu`` in %, ``ram`` in MB: the whole machine, every node and everything else on it).
A feature that moves work from one node to another (the egress gateway) changes the nodes
it touches and perhaps not their sum; a feature that costs work shows in the sum and in the
CPU each unit of work takes. :func:`with_derived_metrics` adds, per run:

``cpu@nodes``
    The sum of the role nodes' CPU (cores), where the run has at least two of them.
``cores_per_gbps``
    ``cpu@nodes`` per Gbit/s of ``throughput``.
``cores_per_kconn``
    ``cpu@nodes`` per 1000 ``new_connections_per_second``.
``cpu@agent`` / ``ram@agent``
    The sum over the CNI's own components (every ``@`` target that is neither a machine of
    the set-up, see :data:`MACHINES`, nor the Gateway implementation the configuration
    names), in cores / MB.

Host-wide metrics (:data:`HOST_WIDE`) stay in the tables; the verdict states them only where
no per-node or per-agent figure of the same resource exists (:func:`host_wide_replaced`).
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable

import pandas as pd

from cnibench.backends.base import NodeRole
from cnibench.report.data import run_values

__all__ = [
    "AGENT_METRICS",
    "HOST_WIDE",
    "MACHINES",
    "NODE_SUM",
    "WORK_UNITS",
    "host_wide_replaced",
    "with_derived_metrics",
]

HOST_WIDE = frozenset({"cpu", "ram"})
"""Metrics measured over the whole machine (every node and anything else on it)."""

MACHINES = frozenset({*(role.value for role in NodeRole), "external", "monitoring"})
"""``@`` targets that are machines of the set-up, not components of the CNI."""

ROLE_NODES = tuple(role.value for role in NodeRole)
"""The nodes whose CPU :data:`NODE_SUM` adds up."""

NODE_SUM = "cpu@nodes"
"""Sum of the role nodes' CPU in one run, cores."""

AGENT_METRICS = ("cpu@agent", "ram@agent")
"""Sum over the CNI's own components in one run (cores, MB)."""

WORK_UNITS: tuple[tuple[str, str, float, str], ...] = (
    ("cores_per_gbps", "throughput", 1e9, "cores per Gbit/s"),
    ("cores_per_kconn", "new_connections_per_second", 1e3, "cores per 1000 conn/s"),
)
"""``(metric, work metric, its unit of work, unit)``: CPU per unit of work."""

DERIVED = frozenset({NODE_SUM, *AGENT_METRICS, *(name for name, *_ in WORK_UNITS)})
"""Every metric :func:`with_derived_metrics` may add."""


def _gateway_of(options: object) -> str:
    try:
        loaded = json.loads(str(options)) if isinstance(options, str) and options else {}
    except json.JSONDecodeError:
        return ""
    return str(loaded.get("gateway", "")) if isinstance(loaded, dict) else ""


def _target(metric: str) -> tuple[str, str]:
    resource, at, where = metric.partition("@")
    return (resource, where) if at else ("", "")


def with_derived_metrics(df: pd.DataFrame) -> pd.DataFrame:
    """``df`` with rows for :data:`DERIVED` metrics added to each successful run.

    A derived row copies its run's columns (ids, CNI, parameters, status, ...) and sets
    ``metric``, ``value`` and ``unit``. Runs that already carry a derived metric (a second
    call) are left as they are.

    Parameters
    ----------
    df:
        Tidy results (:func:`cnibench.results.load_results`).

    Returns
    -------
    pandas.DataFrame
        A new frame; ``df`` itself is not changed.
    """
    if df.empty or "metric" not in df.columns or "run_id" not in df.columns:
        return df
    metrics = df["metric"].astype(str)
    if metrics.isin(DERIVED).any():
        return df
    wanted = metrics.str.contains("@", regex=False) | metrics.isin([w for _, w, *_ in WORK_UNITS])
    if "pair" in df.columns:  # a --pairs run's per-pair values are not the run's
        wanted &= df["pair"].isna().to_numpy(dtype=bool)
    candidates = df[wanted & (df["status"] == "ok")] if "status" in df.columns else df[wanted]
    if candidates.empty:
        return df
    # A run is (session, run id): two sessions of one configuration repeat run ids.
    key = ["session_id", "run_id"] if "session_id" in df.columns else ["run_id"]
    first = run_values(df).drop_duplicates(key).set_index(key)
    added: list[dict[str, object]] = []
    for run_key, run in candidates.groupby(key, sort=False):
        values = {str(m): float(v) for m, v in zip(run["metric"], run["value"], strict=True)}
        template = {str(k): v for k, v in first.loc[run_key].to_dict().items()}  # type: ignore[index]
        template.update(zip(key, run_key, strict=True))
        gateway = _gateway_of(template.get("options", ""))

        found: list[tuple[str, float, str]] = []

        nodes = [values[f"cpu@{role}"] for role in ROLE_NODES if f"cpu@{role}" in values]
        if len(nodes) >= 2:
            total = sum(nodes)
            found.append((NODE_SUM, total, "cores"))
            for name, work, per, unit in WORK_UNITS:
                done = values.get(work, math.nan)
                if math.isfinite(done) and done > 0:
                    found.append((name, total / (done / per), unit))
        for resource, name, unit in (("cpu", "cpu@agent", "cores"), ("ram", "ram@agent", "MB")):
            parts = [
                value
                for metric, value in values.items()
                if _target(metric)[0] == resource
                and _target(metric)[1] not in MACHINES
                and _target(metric)[1] != gateway
            ]
            if parts:
                found.append((name, sum(parts), unit))
        added += [
            {**template, "metric": metric, "value": value, "unit": unit}
            for metric, value, unit in found
            if math.isfinite(value)
        ]
    if not added:
        return df
    return pd.concat([df, pd.DataFrame(added, columns=df.columns)], ignore_index=True)


def host_wide_replaced(metric: str, recorded: Iterable[str]) -> bool:
    """Whether host-wide ``metric`` (``cpu``/``ram``) is replaced by a per-node or per-agent
    figure of the same resource among ``recorded`` metrics."""
    if metric not in HOST_WIDE:
        return False
    return any(_target(m)[0] == metric for m in recorded)
