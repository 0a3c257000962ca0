"""What every scenario is: conditions, a cluster spec per condition, set-up, proof, measurement.

A scenario is written once against :mod:`cnibench.backends.base` and runs on every backend. The
runner (:mod:`cnibench.scenarios.runner`) drives it: for each condition it gets a cluster for
:meth:`Scenario.cluster_spec`, calls :meth:`Scenario.prepare`, :meth:`Scenario.verify` (a set-up
that does not do what it claims is never measured), then :meth:`Scenario.measure` once per
repetition, and finally :meth:`Scenario.cleanup`.
"""

from __future__ import annotations

import abc
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from cnibench.backends.base import Capability, Cluster, ClusterSpec
from cnibench.records import Measurement, ParamValue
from cnibench.scenarios.profiles import Profile

__all__ = [
    "Condition",
    "Prepared",
    "RunOutput",
    "Scenario",
    "Verification",
]


@dataclass(frozen=True)
class Condition:
    """One parameter set of a scenario, e.g. egress with the gateway on.

    Attributes
    ----------
    scenario:
        Scenario name.
    id:
        Readable id used in test ids, results and reports, e.g. ``"cross-node-idle-iperf3"``.
    parameters:
        The parameter values, stored with every record.
    """

    scenario: str
    id: str
    parameters: Mapping[str, ParamValue]

    def __str__(self) -> str:
        return self.id


@dataclass
class Prepared:
    """Whatever a scenario set up for a condition (pods, expected values), kept for cleanup.

    Attributes
    ----------
    endpoints:
        Role in the scenario (``"client"``, ``"server"``) to the endpoint placed for it.
    expected:
        Values verification and measurement compare against (e.g. the expected source IP).
    """

    endpoints: dict[str, Any] = field(default_factory=dict)
    expected: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Verification:
    """Proof (or disproof) that a set-up does what it claims.

    Attributes
    ----------
    ok:
        Whether every check passed.
    detail:
        One line saying what was checked and what was seen.
    evidence:
        The observations, stored with the results (e.g. ``{"source_seen": "198.18.0.12"}``).
    """

    ok: bool
    detail: str
    evidence: Mapping[str, ParamValue] = field(default_factory=dict)


@dataclass(frozen=True)
class RunOutput:
    """What one repetition measured.

    Attributes
    ----------
    measurements:
        Numbers of the run (resource metrics are added by the runner).
    raw:
        Raw tool outputs by file name, kept beside the records.
    verification:
        Per-run proof where the scenario can check every run (egress: the source address the
        server saw); ``None`` when only the set-up is verified.
    """

    measurements: Sequence[Measurement]
    raw: Mapping[str, str] = field(default_factory=dict)
    verification: Verification | None = None


class Scenario(abc.ABC):
    """Base class of scenarios; instances are registered in :data:`cnibench.scenarios.SCENARIOS`."""

    name: str = ""
    """Scenario name as typed on the command line."""

    resource_metrics: bool = True
    """Whether a run's CPU and memory mean something (``False`` for reachability probes, which
    then record none)."""

    @abc.abstractmethod
    def conditions(self) -> list[Condition]:
        """Every condition of the scenario, in report order."""

    def required_capabilities(self, condition: Condition) -> frozenset[Capability]:
        """Capabilities the cluster must offer for ``condition`` (else it is skipped)."""
        return frozenset()

    def cluster_spec(self, cni: str, condition: Condition) -> ClusterSpec:
        """The cluster ``condition`` needs for ``cni`` (a ``--cni`` label, see
        :meth:`ClusterSpec.from_label`); equal specs share a cluster."""
        return ClusterSpec.from_label(cni)

    @abc.abstractmethod
    def prepare(self, cluster: Cluster, condition: Condition, profile: Profile) -> Prepared:
        """Place workloads and switch features on for ``condition``."""

    @abc.abstractmethod
    def verify(self, cluster: Cluster, prepared: Prepared, condition: Condition) -> Verification:
        """Check that the set-up does what ``condition`` claims."""

    @abc.abstractmethod
    def measure(
        self,
        cluster: Cluster,
        prepared: Prepared,
        condition: Condition,
        profile: Profile,
        repetition: int,
    ) -> RunOutput:
        """Measure one repetition. Raises :class:`cnibench.errors.CnibenchError` on failure."""

    def cleanup(self, cluster: Cluster, prepared: Prepared) -> None:
        """Undo :meth:`prepare` (remove pods, switch features off)."""
        for endpoint in prepared.endpoints.values():
            cluster.remove(endpoint)
