"""Value types shared by every layer: measurements, run records, the environment fingerprint.

A *run* is one repetition of one scenario condition (e.g. "egress, vxlan, gateway on, run 3").
It yields several :class:`Measurement` values; the results store writes one :class:`RunRecord`
per (run, metric), the tidy shape that ``load_results`` turns into a DataFrame row each.
"""

from __future__ import annotations

import enum
import hashlib
import json
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any, Literal, Union

__all__ = [
    "Environment",
    "Measurement",
    "ParamValue",
    "RunRecord",
    "RunStatus",
    "summary_scale",
    "unit_upper_bound",
]

ParamValue = Union[str, int, float, bool]
"""A scenario parameter or option value as stored in results (JSON scalars only)."""


UNIT_UPPER_BOUNDS = {"%": 100.0}
"""Units whose values cannot exceed a bound: ``%`` is a share of the CPUs (at most 100)."""


def unit_upper_bound(unit: str) -> float | None:
    """The largest value a quantity in ``unit`` can take, or ``None`` when it has no bound."""
    return UNIT_UPPER_BOUNDS.get(unit)


YES_NO_UNITS = frozenset({"bool"})
"""Units of a yes/no outcome per run (``reachable``, ``matches_reference``): 1 is yes."""


def summary_scale(unit: str) -> Literal["auto", "binary"]:
    """How :func:`cnibench.stats.summarize_runs` should summarise a metric in ``unit``:
    ``"binary"`` (a count of yes with its interval) for :data:`YES_NO_UNITS`, else
    ``"auto"``."""
    return "binary" if unit in YES_NO_UNITS else "auto"


class RunStatus(enum.StrEnum):
    """Outcome of one run: ``ok`` values may be averaged; ``failed`` and ``warmup`` ones never
    are."""

    OK = "ok"
    FAILED = "failed"
    WARMUP = "warmup"
    """Measured before the first counted run on a new cluster, to let it warm up (its
    repetition is -1; a failed one keeps this status, with its reason): shown as warm-up,
    never in a statistic, the verdict or the gate, and not a failure."""


@dataclass(frozen=True)
class Measurement:
    """One number measured in a run.

    Attributes
    ----------
    metric:
        Name in the domain, e.g. ``"throughput"``, ``"latency_p99"``, ``"cpu"``.
    value:
        The value in ``unit``; ``nan`` for a failed run.
    unit:
        Unit of ``value``, e.g. ``"bits/s"``, ``"us"``, ``"%"``, ``"MB"``, ``"requests/s"``.
    pair:
        With ``--pairs``: the 0-based client/server pair that measured it (one of several
        streams run at once); ``None`` for the run's own value (the aggregate of its pairs,
        or the one client of a run without pairs), the only value statistics use.
    """

    metric: str
    value: float
    unit: str
    pair: int | None = None


@dataclass(frozen=True)
class RunRecord:
    """One tidy results row: one metric of one run, with everything needed to group it.

    Attributes
    ----------
    session_id:
        Identifier of the benchmark session (one ``cnibench run`` or pytest session).
    run_id:
        Identifier of the run, unique within the session.
    time:
        Start of the run, ISO 8601 in UTC.
    backend:
        ``"lab"`` or ``"kube"``.
    provider:
        ``"lab"``, ``"kind"``, ``"aks"`` or ``"existing"``.
    cni:
        CNI (kube) or datapath (lab), e.g. ``"cilium"``, ``"vxlan"``.
    cni_version:
        Version of the CNI, or of the kernel for the lab.
    scenario:
        Scenario name, e.g. ``"egress"``.
    condition:
        Readable id of the parameter set, e.g. ``"gateway-on"``; the grouping key in reports.
    parameters:
        The scenario parameters of this condition.
    repetition:
        0-based repetition index within the condition; -1 for a warm-up run.
    metric, value, unit:
        The measurement (see :class:`Measurement`).
    verified:
        Whether the scenario's verification passed before this run was measured.
    status:
        ``ok``, ``failed`` or ``warmup``: failed runs carry ``reason`` and are never averaged
        in, nor are warm-up runs (:attr:`RunStatus.WARMUP`).
    reason:
        Why the run failed; empty when ``status`` is ``ok``.
    environment_id:
        Key of the session's :class:`Environment` fingerprint.
    options:
        Backend options that shaped the set-up (encryption, mode, ...).
    pair:
        :attr:`Measurement.pair`: the 0-based client/server pair of a ``--pairs`` run that
        measured this value, or ``None`` for the run's value (its aggregate over the pairs,
        or a run without pairs). Statistics, verdicts and comparisons read only ``None``
        rows, so one run is one sample however many pairs it ran; files written before the
        field existed load with ``None``.
    looks:
        How many times the session planned to look at this run's contrasts: above 1 for a run
        of a session run until decided (:func:`cnibench.stats.look_schedule`), whose verdict
        tests each look at ``alpha / looks``; 1 for a fixed design, and for files written
        before the field existed.
    """

    session_id: str
    run_id: str
    time: str
    backend: str
    provider: str
    cni: str
    cni_version: str
    scenario: str
    condition: str
    parameters: Mapping[str, ParamValue]
    repetition: int
    metric: str
    value: float
    unit: str
    verified: bool
    status: RunStatus = RunStatus.OK
    reason: str = ""
    environment_id: str = ""
    options: Mapping[str, ParamValue] = field(default_factory=dict)
    pair: int | None = None
    looks: int = 1

    def to_json_dict(self) -> dict[str, Any]:
        """Plain-JSON form (what the results store writes)."""
        data = asdict(self)
        data["status"] = self.status.value
        data["parameters"] = dict(self.parameters)
        data["options"] = dict(self.options)
        return data

    @classmethod
    def from_json_dict(cls, data: Mapping[str, Any]) -> RunRecord:
        """Inverse of :meth:`to_json_dict`."""
        values = dict(data)
        values["status"] = RunStatus(values.get("status", "ok"))
        values["value"] = float("nan") if values["value"] is None else float(values["value"])
        pair = values.get("pair")
        values["pair"] = None if pair is None else int(pair)
        values["looks"] = int(values.get("looks", 1))
        return cls(**values)


@dataclass(frozen=True)
class Environment:
    """Fingerprint of where a session ran, stored once per session.

    Attributes
    ----------
    kernel:
        ``uname -r`` of the host.
    cpu_model:
        Model name of the host CPU.
    cpu_count:
        Logical CPUs of the host.
    memory_bytes:
        Total memory of the host in bytes.
    python:
        Python version.
    cnibench_version:
        Version of cnibench.
    backend, provider, cni, cni_version:
        What was benchmarked.
    nodes:
        Node name to a description (role, CPUs, memory) of each node.
    cni_values:
        Helm values or lab options of the CNI; never contains secrets.
    tool_versions:
        Tool name to version string, e.g. ``{"iperf3": "3.12"}``.
    datapath_settings:
        Data-path settings as the running cluster reported them, not as asked (that is
        ``cni_values``): e.g. ``{"service proxy": "cilium eBPF", "kube-proxy replacement":
        "true", "host routing": "bpf", "masquerade": "bpf"}`` from Cilium's agents, or
        ``{"service proxy": "kube-proxy nftables"}`` from kube-proxy's ConfigMap
        (:meth:`~cnibench.backends.kube.cnis.base.CniDriver.datapath_status`); ``{}`` where
        nothing was read (the lab, fingerprints written before the field). Left out of
        :attr:`environment_id` while empty, so those fingerprints keep their ids.
    """

    kernel: str
    cpu_model: str
    cpu_count: int
    memory_bytes: int
    python: str
    cnibench_version: str
    backend: str = ""
    provider: str = ""
    cni: str = ""
    cni_version: str = ""
    nodes: Mapping[str, Mapping[str, ParamValue]] = field(default_factory=dict)
    cni_values: Mapping[str, Any] = field(default_factory=dict)
    tool_versions: Mapping[str, str] = field(default_factory=dict)
    datapath_settings: Mapping[str, str] = field(default_factory=dict)

    def to_json_dict(self) -> dict[str, Any]:
        """Plain-JSON form, including the derived ``environment_id``."""
        data: dict[str, Any] = json.loads(json.dumps(asdict(self), default=str))
        data["environment_id"] = self.environment_id
        return data

    @property
    def environment_id(self) -> str:
        """Stable 12-hex-digit key: equal fingerprints give equal ids."""
        fields = asdict(self)
        if not fields["datapath_settings"]:
            del fields["datapath_settings"]
        payload = json.dumps(fields, sort_keys=True, default=str)
        return hashlib.sha256(payload.encode()).hexdigest()[:12]
