"""What a session is asked: ``--cluster`` (:class:`ClusterChoice`), ``--cni``
(:class:`CniRequest`, each value parsed once) and every other option (:class:`SessionConfig`)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from cnibench.backends import choose
from cnibench.backends.base import ClusterSpec, NodePins
from cnibench.backends.choose import CLUSTER_CHOICES as CLUSTER_CHOICES
from cnibench.backends.choose import ClusterChoice as ClusterChoice
from cnibench.scenarios.options import ScenarioOptions
from cnibench.scenarios.profiles import DEFAULT_MAX_RUNS, Profile, profile_named

LAB_DATAPATHS = choose.lab_datapaths()
"""Datapaths the lab offers as ``--cni`` (``("routed", "vxlan")``; the names live in
:class:`~cnibench.backends.lab.plan.LabDatapath`)."""


@dataclass(frozen=True)
class CniRequest:
    """``--cni`` as asked for: each value parsed once into a :class:`ClusterSpec` (the one
    parse: :meth:`ClusterSpec.from_label`), repeats dropped, in the order given. These specs
    travel: checked by :func:`validate_cnis`, planned (:class:`PlannedRun`), handed to the
    runner and to :meth:`Scenario.cluster_spec`; nothing after parses a label again.

    Which backend a name belongs to is decided here without importing one: a name of
    :data:`LAB_DATAPATHS` is the lab's, any other a Kubernetes CNI (checked against the kube
    registry only when the kube backend is chosen, so a lab run never imports it).
    """

    specs: tuple[ClusterSpec, ...] = ()

    @classmethod
    def parse(cls, labels: Iterable[str]) -> CniRequest:
        """The request ``labels`` (``--cni`` values) make.

        Raises
        ------
        cnibench.errors.ConfigError
            A value that is not ``NAME`` or ``NAME:OPTION,...``.
        """
        specs: dict[str, ClusterSpec] = {}
        for label in labels:
            spec = ClusterSpec.from_label(label)
            specs.setdefault(spec.label, spec)
        return cls(tuple(specs.values()))

    @property
    def labels(self) -> tuple[str, ...]:
        """Each spec's canonical ``--cni`` label (what results record)."""
        return tuple(spec.label for spec in self.specs)

    def __bool__(self) -> bool:
        return bool(self.specs)


@dataclass(frozen=True)
class SessionConfig:
    """Options of a benchmark session (shared by ``cnibench run`` and the pytest plugin).

    Attributes
    ----------
    cluster:
        ``--cluster``, checked once (:meth:`ClusterChoice.parse`; its text is accepted and
        checked on construction).
    cnis:
        CNIs (kube) or datapaths (lab), parsed once (:class:`CniRequest`; ``--cni`` labels
        are accepted and parsed on construction); empty means the backend's defaults.
    profile:
        Repetitions and durations, with ``--runs``/``--duration`` already applied.
    results_dir:
        Directory receiving one sub-directory per session.
    keep_cluster:
        Leave clusters running at the end (kube only; labs are always removed).
    recreate_cluster:
        Do not reuse a cached cluster (kube only).
    scenario_options:
        Scenario parameters (``--weights``, ``--users``, ``--rules``, ``--clients``,
        ``--engine``).
    precision:
        ``--precision``: wanted half-width of a contrast's 95 % interval as a fraction (0.05);
        each condition repeats runs until its primary metrics are that precise or
        ``max_runs`` is reached (:func:`cnibench.scenarios.runner.precision_reached`).
        ``None``: exactly the profile's runs.
    max_runs:
        ``--max-runs``: most repetitions ``precision`` or ``until_decided`` may take a
        condition to.
    precision_metrics:
        ``--precision-on``: the metrics ``precision`` judges (default: each scenario's
        positive primary metrics), e.g. ``("throughput",)``.
    until_decided:
        ``--until-decided``: after the profile's rounds, an interleaved group adds rounds to
        the conditions whose contrasts are undecided, looking at them at the rounds of
        :func:`cnibench.stats.look_schedule` (the profile's runs, doubling, ``max_runs``),
        each look at the level of :func:`cnibench.stats.look_level`; a condition stops when
        every contrast it takes part in is decided.
    budget:
        ``--budget``: seconds the session may spend; ``until_decided`` starts no look's
        rounds that would end past it (``None``: no limit but ``max_runs``).
    report:
        ``--report``: HTML report written at the end of the session (``None``: none).
    reference:
        ``--reference``: the CNI the verdict compares every other with (``None``: the first);
        checked against the session's CNIs by :func:`choose_backend`.
    all_metrics:
        ``--all-metrics``: the report draws every recorded metric.
    nodes:
        ``--nodes``: Kubernetes nodes named for roles (``ROLE=NODE,...``; labels accepted and
        parsed on construction); the other roles' nodes are chosen by the backend.
    image_registry:
        ``--image-registry``: the registry a cluster pulls cnibench's own images from
        (``HOST[:PORT][/PATH]``, ``""``: none; kind then loads them); they are pushed there
        first from the engine of ``DOCKER_HOST`` when one is set.
    """

    cluster: ClusterChoice = ClusterChoice.AUTO
    cnis: CniRequest = field(default_factory=CniRequest)
    profile: Profile = field(default_factory=lambda: profile_named(DEFAULT_PROFILE))
    results_dir: Path = Path("results")
    keep_cluster: bool = False
    recreate_cluster: bool = False
    scenario_options: ScenarioOptions = field(default_factory=ScenarioOptions)
    precision: float | None = None
    max_runs: int = DEFAULT_MAX_RUNS
    precision_metrics: tuple[str, ...] = ()
    until_decided: bool = False
    budget: float | None = None
    report: Path | None = None
    reference: str | None = None
    all_metrics: bool = False
    nodes: NodePins = field(default_factory=NodePins)
    image_registry: str = ""

    def __post_init__(self) -> None:
        if not isinstance(self.cluster, ClusterChoice):  # --cluster text, as a notebook writes it
            object.__setattr__(self, "cluster", ClusterChoice.parse(self.cluster))
        if not isinstance(self.cnis, CniRequest):  # --cni labels, as a notebook writes them
            object.__setattr__(self, "cnis", CniRequest.parse(self.cnis))
        if not isinstance(self.nodes, NodePins):  # a --nodes value, as a notebook writes it
            object.__setattr__(self, "nodes", NodePins.parse(self.nodes))
        object.__setattr__(self, "results_dir", Path(self.results_dir))


DEFAULT_PROFILE = "quick"
"""The profile of ``cnibench run`` and of the pytest plugin alike. ``quick``: the default is what
runs when someone first tries cnibench, and must end in minutes with intervals worth reading (5
runs); a CI job that only proves the path works asks for ``smoke`` (2 runs), numbers meant to be
quoted for ``standard`` or ``paper``."""
