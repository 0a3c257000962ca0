"""What every scenario is: conditions, a cluster spec per condition, set-up, proof, measurement.

A scenario is written once against :mod:`cnibench.backends.base` and runs on every backend. The
runner (:mod:`cnibench.scenarios.runner`) drives it: for each condition it gets a cluster for
:meth:`Scenario.cluster_spec`, calls :meth:`Scenario.prepare`, :meth:`Scenario.verify` (a set-up
that does not do what it claims is never measured), then :meth:`Scenario.measure` once per
repetition, and finally :meth:`Scenario.cleanup`.

Each scenario also declares what its report's verdict compares (:class:`Contrast`,
:attr:`Scenario.contrasts`, :attr:`Scenario.primary_metrics`); the report layer
(:mod:`cnibench.report.verdict`) finds the matching conditions in the results and does the
statistics.
"""

from __future__ import annotations

import abc
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from cnibench.backends.base import Backend, Capability, Cluster, ClusterSpec
from cnibench.records import Measurement, ParamValue
from cnibench.scenarios.profiles import Profile

__all__ = [
    "OTHER_THAN_CONTROL",
    "THROUGHPUT_COMPANIONS",
    "Condition",
    "Contrast",
    "Prepared",
    "RunOutput",
    "Scenario",
    "Verification",
    "with_companions",
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


THROUGHPUT_COMPANIONS = ("retransmits", "retransmit_rate")
"""Shown right after ``throughput`` wherever it is shown: iperf3's retransmitted segments per
run (count) and their share of the segments sent (ratio). Tables only: no verdict compares
them."""


def with_companions(metrics: Sequence[str]) -> tuple[str, ...]:
    """``metrics`` with :data:`THROUGHPUT_COMPANIONS` right after ``throughput`` (once each;
    unchanged without ``throughput``)."""
    out: list[str] = []
    for metric in metrics:
        if metric in THROUGHPUT_COMPANIONS:
            continue
        out.append(metric)
        if metric == "throughput":
            out.extend(THROUGHPUT_COMPANIONS)
    return tuple(out) if "throughput" in metrics else tuple(metrics)


class _OtherThanControl:
    """Type of :data:`OTHER_THAN_CONTROL`."""

    def __repr__(self) -> str:
        return "OTHER_THAN_CONTROL"


OTHER_THAN_CONTROL = _OtherThanControl()
"""In :attr:`Contrast.treatment`: any value of the parameter except the control's (policy:
every rule count against 0 rules)."""


@dataclass(frozen=True)
class Contrast:
    """A planned comparison within one CNI: a feature against its own control.

    A treatment condition is paired with the control condition whose parameters are equal to
    its own in every parameter outside :attr:`varies` (a parameter one condition has and the
    other lacks counts as different), so "everything else equal" is checked on the recorded
    parameters, never guessed from condition ids.

    Attributes
    ----------
    feature:
        What is switched on, as a verdict line names it, e.g. ``"gateway"``, ``"encryption"``.
    treatment:
        Parameter values a treatment condition has, e.g. ``{"gateway": "on"}``;
        :data:`OTHER_THAN_CONTROL` accepts every value but the control's.
    control:
        Parameter values its control condition has, e.g. ``{"gateway": "off"}``.
    varies:
        Further parameters that may differ between the two (besides the keys of
        ``treatment`` and ``control``), e.g. those only the treatment has.
    control_lacks:
        Parameters the control condition must not have at all (the baseline's pod conditions
        have no ``target``: a Service target is compared with them).
    """

    feature: str
    treatment: Mapping[str, ParamValue | _OtherThanControl]
    control: Mapping[str, ParamValue]
    varies: tuple[str, ...] = ()
    control_lacks: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        for key, value in self.treatment.items():
            if value is OTHER_THAN_CONTROL and key not in self.control:
                raise ValueError(
                    f"contrast {self.feature!r}: {key} is OTHER_THAN_CONTROL in the treatment"
                    " but has no control value"
                )

    @property
    def free_parameters(self) -> frozenset[str]:
        """Parameters that may differ between treatment and control; all others must match."""
        return (
            frozenset(self.treatment)
            | frozenset(self.control)
            | frozenset(self.varies)
            | frozenset(self.control_lacks)
        )

    def is_treatment(self, parameters: Mapping[str, ParamValue]) -> bool:
        """Whether a condition with these parameters is a treatment of this contrast."""
        for key, wanted in self.treatment.items():
            if key not in parameters:
                return False
            if wanted is OTHER_THAN_CONTROL:
                if parameters[key] == self.control[key]:
                    return False
            elif parameters[key] != wanted:
                return False
        return True

    def is_control_of(
        self, parameters: Mapping[str, ParamValue], treatment: Mapping[str, ParamValue]
    ) -> bool:
        """Whether a condition with ``parameters`` is the control of ``treatment``'s condition:
        it has the control values, and every other parameter equals the treatment's."""
        if any(
            key not in parameters or parameters[key] != value for key, value in self.control.items()
        ):
            return False
        if any(key in parameters for key in self.control_lacks):
            return False
        free = self.free_parameters
        keys = (set(parameters) | set(treatment)) - free
        return all(
            key in parameters and key in treatment and parameters[key] == treatment[key]
            for key in keys
        )


class Scenario(abc.ABC):
    """Base class of scenarios; instances are registered in :data:`cnibench.scenarios.SCENARIOS`."""

    name: str = ""
    """Scenario name as typed on the command line."""

    resource_metrics: bool = True
    """Whether a run's CPU and memory mean something (``False`` for reachability probes, which
    then record none)."""

    primary_metrics: tuple[str, ...] = ("cpu", "ram")
    """Metrics the report's verdict compares for this scenario, in order; a contrast is made
    for each one that both of its conditions recorded."""

    dependent_metrics: Mapping[str, str] = MappingProxyType({})
    """Metrics that are a function of another metric of the same run, by how the tool or the
    scenario defines them: ``{dependent: the metric it is a function of}``. The verdict states
    only the one they depend on (one measurement, one contrast); the tables show both."""

    contrasts: tuple[Contrast, ...] = ()
    """Planned comparisons of a feature against its control, per CNI (see :class:`Contrast`)."""

    compares_cnis: bool = True
    """Whether every CNI is compared with the reference CNI on each condition and primary
    metric (``False`` where the outcome itself is the result, as in ``priority``)."""

    compares_shares_with_weights: bool = False
    """Whether the verdict compares each backend's observed share (``share@<backend>``) with
    its configured weight (``split``); the condition's ``weights`` parameter holds them."""

    runs_pairs: bool = False
    """Whether the scenario runs several client/server pairs at once with ``--pairs N``
    (N > 1; the baseline's iperf3 and sockperf conditions). Planning refuses ``--pairs`` above
    1 for every scenario that does not (:func:`cnibench.session.plan_conditions`)."""

    proxy_parameter: str = ""
    """The parameter in which a condition through a Service names the proxy it asks for (the
    baseline's ``proxy``; ``""`` when none does). It differs whenever the proxy does, so a
    contrast of two Service proxies pairs conditions equal in every other parameter."""

    def through_service(self, parameters: Mapping[str, ParamValue]) -> bool:
        """Whether a condition with these recorded ``parameters`` sends its measured traffic to
        a Kubernetes Service, so that a Service proxy handles it. Default: no (pod to pod, to
        an external host, through a Gateway that sends to the pods). The verdict compares two
        Service proxies only on such conditions: pod-to-pod traffic meets none."""
        return False

    def headline_metrics(self, condition: Condition) -> tuple[str, ...]:
        """Metrics ``cnibench run``'s table shows for ``condition``, in order: what the
        scenario exists to measure. Default :attr:`primary_metrics` with
        :data:`THROUGHPUT_COMPANIONS` after ``throughput`` (a throughput read without its
        losses cannot be judged); a metric a run did not record is left out of the table."""
        return with_companions(self.primary_metrics)

    @abc.abstractmethod
    def conditions(self) -> list[Condition]:
        """Every condition of the scenario, in report order."""

    def on_backend(self, backend: Backend) -> Scenario:
        """This scenario as it plans its conditions on ``backend``: itself, unless a parameter
        of its conditions is a choice only some backends offer (the policy engine), which is
        then read from what the backend states (e.g. :attr:`Backend.policy_choices`), never
        from its name. The session calls it once the backend is chosen; calling it again with
        the same backend gives the same conditions.

        Raises
        ------
        cnibench.errors.ConfigError
            An option asks for a choice ``backend`` does not offer (one line).
        """
        return self

    def required_capabilities(self, condition: Condition) -> frozenset[Capability]:
        """Capabilities the cluster must offer for ``condition`` (else it is skipped)."""
        return frozenset()

    def policy_rules(self, condition: Condition) -> int:
        """Rules the largest policy ``condition`` applies carries, counted as
        :attr:`PolicySpec.rule_count <cnibench.policy.PolicySpec.rule_count>` counts them
        (0: no policy, or only a few rules). A cluster whose CNI is configured for fewer
        (:attr:`Policies.policy_rule_limit <cnibench.backends.base.Policies.policy_rule_limit>`)
        skips the condition before setting it up."""
        return 0

    def sequential_reason(self, condition: Condition) -> str:
        """Why ``condition``'s set-up cannot be repeated cheaply, or ``""`` (the default: it
        can). ``cnibench run`` interleaves a scenario's conditions in rounds, setting each up
        again every round (:func:`cnibench.session.run_design`); a condition with a reason
        runs all its repetitions on one set-up instead, and the session records the reason.
        Say it in one clause naming the cost, e.g. "1000 further Services are created and
        deleted at every set-up"."""
        return ""

    def cluster_spec(self, cni: ClusterSpec, condition: Condition) -> ClusterSpec:
        """The cluster ``condition`` needs on ``cni``, a ``--cni`` value as the session parsed
        it (name and options); equal specs share a cluster. Default: ``cni`` itself; a
        scenario that needs more (wireguard's encryption) derives it from ``cni``, never from
        its label."""
        return cni

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

    def time_changes(self, cluster: Cluster, prepared: Prepared, condition: Condition) -> RunOutput:
        """Changes timed once per run, after the run's resource window has closed, so that
        their API calls and the datapath's work on them count in no run's CPU (the baseline
        adds one more Service); their measurements join the run's. None by default. Raises
        :class:`cnibench.errors.CnibenchError` on failure."""
        return RunOutput(())

    def cleanup(self, cluster: Cluster, prepared: Prepared) -> None:
        """Undo :meth:`prepare` (remove pods, switch features off)."""
        for endpoint in prepared.endpoints.values():
            cluster.remove(endpoint)
