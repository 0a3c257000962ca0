"""A benchmark session: options validated once, a backend chosen, clusters pooled, results stored.

The CLI (``cnibench run``) and the pytest plugin are thin shells over :class:`BenchSession`; both
accept the same options and produce the same results. This is the only layer that knows the
concrete backends.
"""

from __future__ import annotations

import dataclasses
import enum
import os
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cnibench.backends.base import Backend, ClusterSpec, NodePins
from cnibench.backends.lab.plan import LabDatapath, napi_option
from cnibench.errors import ConfigError, SetupError, UnsupportedError, VerificationError
from cnibench.results import ResultsStore
from cnibench.scenarios import Condition, Scenario, build_scenarios, scenario_named
from cnibench.scenarios.options import ScenarioOptions, parse_scenario_options
from cnibench.scenarios.profiles import Profile, parse_duration, profile_named
from cnibench.scenarios.runner import (
    DEFAULT_MAX_RUNS,
    ClusterPool,
    ConditionResult,
    Runner,
    precision_reached,
    precision_words,
)
from cnibench.signals import sigterm_raises_interrupt

__all__ = [
    "CLUSTER_CHOICES",
    "LAB_DATAPATHS",
    "BackendChoice",
    "BenchSession",
    "ClusterChoice",
    "CniRequest",
    "EventKind",
    "GroupDesign",
    "PlannedCondition",
    "PlannedRun",
    "ProgressEvent",
    "RunDesign",
    "RunOrder",
    "SessionConfig",
    "SessionOutcome",
    "Skipped",
    "add_scenario_options",
    "choose_backend",
    "choose_cluster",
    "container_engine",
    "interleaved_rounds",
    "plan_conditions",
    "run_design",
    "select_backend",
    "validate_cnis",
]


class ClusterChoice(enum.StrEnum):
    """``--cluster``: where a session benchmarks. Checked once, by :meth:`parse`, when the
    options become a :class:`SessionConfig`; everything after takes this type and checks
    nothing (a member equals its text, ``ClusterChoice.LAB == "lab"``)."""

    AUTO = "auto"
    """The lab or kind, chosen from the request (:func:`choose_cluster`)."""
    LAB = "lab"
    KIND = "kind"
    AKS = "aks"
    EXISTING = "existing"
    """The cluster ``KUBECONFIG`` names."""

    @classmethod
    def parse(cls, text: str) -> ClusterChoice:
        """The choice ``text`` names.

        Raises
        ------
        cnibench.errors.ConfigError
            Not one of :data:`CLUSTER_CHOICES` (one line listing them).
        """
        if text not in CLUSTER_CHOICES:
            raise ConfigError(
                f"unknown --cluster {text!r}: choose one of {', '.join(CLUSTER_CHOICES)}"
            )
        return cls(text)


CLUSTER_CHOICES = tuple(choice.value for choice in ClusterChoice)
"""The ``--cluster`` values, in the order help and errors list them."""
LAB_DATAPATHS = tuple(datapath.value for datapath in LabDatapath)
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

    @property
    def lab_names(self) -> tuple[str, ...]:
        """The names that are lab datapaths."""
        return tuple(dict.fromkeys(s.cni for s in self.specs if s.cni in LAB_DATAPATHS))

    @property
    def kube_names(self) -> tuple[str, ...]:
        """The names that are not lab datapaths (Kubernetes CNIs, or misspelt)."""
        return tuple(dict.fromkeys(s.cni for s in self.specs if s.cni not in LAB_DATAPATHS))

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
        ``--max-runs``: most repetitions ``precision`` may take a condition to.
    precision_metrics:
        ``--precision-on``: the metrics ``precision`` judges (default: each scenario's
        positive primary metrics), e.g. ``("throughput",)``.
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
    report: Path | None = None
    reference: str | None = None
    all_metrics: bool = False
    nodes: NodePins = field(default_factory=NodePins)

    def __post_init__(self) -> None:
        if not isinstance(self.cluster, ClusterChoice):  # --cluster text, as a notebook writes it
            object.__setattr__(self, "cluster", ClusterChoice.parse(self.cluster))
        if not isinstance(self.cnis, CniRequest):  # --cni labels, as a notebook writes them
            object.__setattr__(self, "cnis", CniRequest.parse(self.cnis))
        if not isinstance(self.nodes, NodePins):  # a --nodes value, as a notebook writes it
            object.__setattr__(self, "nodes", NodePins.parse(self.nodes))
        object.__setattr__(self, "results_dir", Path(self.results_dir))


def container_engine(timeout: float = 5.0) -> str:
    """Name of a container engine that answers (``docker``/``podman``), or ``""``."""
    from cnibench.backends.kube.engine import answering_engine

    return answering_engine(timeout=timeout)


def choose_cluster(
    cluster: ClusterChoice, cnis: CniRequest, *, engine: Callable[[], str] | None = None
) -> tuple[ClusterChoice, str]:
    """Which ``--cluster`` serves ``cnis``, and a sentence saying why: the backend chosen
    from what was asked, made once per session.

    With ``--cluster auto``: lab datapaths select the lab (no engine is asked); Kubernetes
    CNIs select kind when a container engine answers; no ``--cni`` selects kind when an engine
    answers, else the lab. Pure but for ``engine``, called at most once: it names the
    container engine that answers, or returns ``""`` (default :func:`container_engine`; tests
    pass a fake).

    Raises
    ------
    cnibench.errors.ConfigError
        Lab datapaths and Kubernetes CNIs in one request (the line says how to split them);
        Kubernetes CNIs with ``auto`` and no engine (the line names ``cnibench engine up``, or
        that a name is unknown).
    """
    lab, kube = cnis.lab_names, cnis.kube_names
    if lab and kube:
        raise ConfigError(
            f"--cni {', '.join(lab)} (lab) and --cni {', '.join(kube)} (Kubernetes) cannot share"
            " a session, which runs on one backend: split them into two runs, cnibench run"
            f" {' '.join(f'--cni {name}' for name in lab)} ... and cnibench run"
            f" {' '.join(f'--cni {name}' for name in kube)} ..."
        )
    if cluster != ClusterChoice.AUTO:
        return cluster, f"--cluster {cluster}"
    if lab:
        return ClusterChoice.LAB, f"--cluster auto: --cni {', '.join(lab)} runs on the embedded lab"
    answering = (engine or container_engine)()
    if answering:
        return ClusterChoice.KIND, f"--cluster auto: {answering} answers, using kind"
    if kube:
        _check_names(cnis, backend="")  # a misspelt name is unknown, not a missing cluster
        raise ConfigError(
            f"--cni {kube[0]!r} needs a Kubernetes cluster and none is at hand: no container"
            ' engine answers for kind (start one: eval "$(cnibench engine up)", then'
            " cnibench images build) and no --cluster existing was given (set KUBECONFIG);"
            f" or measure a lab datapath: --cni {' / '.join(LAB_DATAPATHS)}"
        )
    return ClusterChoice.LAB, "--cluster auto: no container engine answers, using the embedded lab"


def select_backend(
    cluster: ClusterChoice,
    cnis: CniRequest | None = None,
    *,
    keep_cluster: bool = False,
    recreate_cluster: bool = False,
    engine: Callable[[], str] | None = None,
    nodes: NodePins | None = None,
) -> tuple[Backend, str]:
    """The backend for ``--cluster`` and ``cnis`` (see :func:`choose_cluster`) and a sentence
    saying what was picked and why. Only the chosen backend's package is imported.

    Raises
    ------
    cnibench.errors.ConfigError
        As :func:`choose_cluster`; ``nodes`` (``--nodes``) on the lab, which has no
        Kubernetes nodes to name.
    """
    cluster, reason = choose_cluster(cluster, cnis or CniRequest(), engine=engine)
    if cluster == ClusterChoice.LAB and nodes:
        raise ConfigError(
            f"--nodes {nodes.text}: names Kubernetes nodes, and this session runs on the lab"
            " (use --cluster existing, kind or aks)"
        )
    if cluster == ClusterChoice.LAB:
        from cnibench.backends.lab import LabBackend

        return LabBackend(), reason
    from cnibench.backends.kube import AksProvider, ExistingProvider, KindProvider, KubeBackend

    images = None
    provider: KindProvider | AksProvider | ExistingProvider
    if cluster == ClusterChoice.KIND:
        from cnibench.backends.kube.images import Images, default_image_set

        # On cnibench's own engine the offline set is kind's default (CNIBENCH_IMAGES wins).
        images = Images.from_environment(os.environ, default=default_image_set(os.environ))
        provider = KindProvider(images=images, recreate=recreate_cluster)
    elif cluster == ClusterChoice.AKS:
        _check_aks_prerequisites()
        provider = AksProvider()
    else:
        provider = ExistingProvider()
        if not provider.kubeconfig.is_file():
            raise ConfigError(
                f"--cluster existing: kubeconfig {provider.kubeconfig} does not exist"
                " (set KUBECONFIG to a readable kubeconfig)"
            )
    backend = KubeBackend(provider, images=images, keep_cluster=keep_cluster, nodes=nodes)
    return backend, reason


def _check_aks_prerequisites() -> None:
    """Fail before anything starts when ``--cluster aks`` cannot work here (one-line error)."""
    from cnibench.backends.kube.providers import AKS_CREDENTIAL_VARIABLES, terraform_command

    if terraform_command() is None:
        raise ConfigError(
            "--cluster aks needs terraform or tofu on PATH (or CNIBENCH_TERRAFORM naming one),"
            " and neither is there (install Terraform or OpenTofu, or choose --cluster lab, kind"
            " or existing)"
        )
    missing = [name for name in AKS_CREDENTIAL_VARIABLES if not os.environ.get(name)]
    if missing:
        raise ConfigError(
            f"--cluster aks needs Azure credentials in the environment: {', '.join(missing)}"
        )


def validate_cnis(backend: Backend, cnis: CniRequest) -> tuple[ClusterSpec, ...]:
    """The session's CNIs: ``cnis`` checked against what ``backend`` offers, names and
    options, the one check of ``--cni`` values (:func:`choose_backend` makes it once per
    session; :meth:`BenchSession.plan` once for a CNI only a ``--scenario`` item names). The
    specs are ``cnis``'s own, not parsed again; the backend's defaults when it is empty.

    On the lab nothing of the kube backend is imported unless a name is not a datapath (then
    only to say whether it is a Kubernetes CNI or unknown).

    Raises
    ------
    cnibench.errors.ConfigError
        One line naming the value and what ``backend`` offers instead.
    """
    _check_names(cnis, backend=backend.name)
    if backend.name == "lab":
        for spec in cnis.specs:
            try:
                napi_option(spec.options)
            except ConfigError as exc:
                raise ConfigError(f"--cni {spec.label!r}: {exc}") from None
        return cnis.specs or tuple(ClusterSpec(cni=name) for name in LAB_DATAPATHS)

    from cnibench.backends.kube.cni import cni_definition
    from cnibench.backends.kube.cnis import cni_names

    for spec in cnis.specs:
        cni_definition(spec)  # the driver refuses options and features it does not take
    # The first registered driver is kind's own CNI: what a plain kind cluster runs.
    return cnis.specs or (ClusterSpec(cni=cni_names()[0]),)


def _check_names(cnis: CniRequest, *, backend: str) -> None:
    """Refuse a ``--cni`` name that ``backend`` (``"lab"``, ``"kube"``, or ``""`` while none
    could be chosen) cannot run, in one line saying what to choose instead. Imports the kube
    registry only for a name that is not a lab datapath."""
    if backend == "lab":
        if cnis.kube_names:
            from cnibench.backends.kube.cnis import cni_names

            name = cnis.kube_names[0]
            if name in cni_names():
                raise ConfigError(
                    f"--cni {name!r} is a Kubernetes CNI and --cluster lab runs lab"
                    f" datapaths: choose --cni {' / '.join(LAB_DATAPATHS)}, or --cluster"
                    " kind or existing"
                )
            raise ConfigError(
                f"unknown --cni {name!r} for the lab: choose one of {', '.join(LAB_DATAPATHS)}"
            )
        return
    from cnibench.backends.kube.cnis import cni_names

    known = cni_names()
    for spec in cnis.specs:
        if backend and spec.cni in LAB_DATAPATHS:
            raise ConfigError(
                f"--cni {spec.cni!r} is a lab datapath and a Kubernetes cluster runs"
                f" Kubernetes CNIs: choose --cluster lab, or --cni {' / '.join(known)}"
            )
        if spec.cni not in known and spec.cni not in LAB_DATAPATHS:
            choices = f"one of {', '.join(known)}"
            if not backend:
                choices = (
                    f"a lab datapath ({', '.join(LAB_DATAPATHS)}) or a Kubernetes CNI"
                    f" ({', '.join(known)})"
                )
            raise ConfigError(f"unknown --cni {spec.cni!r}: choose {choices}")


@dataclass(frozen=True)
class BackendChoice:
    """What :func:`choose_backend` decided for a session, once: the backend, why, and the
    session's CNIs, checked against it (the specs parsed from ``--cni``, or the backend's
    defaults)."""

    backend: Backend
    reason: str
    specs: tuple[ClusterSpec, ...]

    @property
    def cnis(self) -> tuple[str, ...]:
        """The session's CNIs as results record them (each spec's ``--cni`` label)."""
        return tuple(spec.label for spec in self.specs)


def choose_backend(
    config: SessionConfig, *, engine: Callable[[], str] | None = None
) -> BackendChoice:
    """The backend of a session and its checked CNIs, before anything is created: the
    backend chosen from the request (:func:`choose_cluster`), ``--cni`` checked against it
    (:func:`validate_cnis`), ``--reference`` checked against those CNIs, and on kind with the
    offline image set the build checked (:func:`_require_offline_build`).

    Both front ends call it once (the plugin keeps the choice for its session), so the
    container engine is asked at most once.

    Raises
    ------
    cnibench.errors.ConfigError
        One line naming the problem and what to do.
    """
    backend, reason = select_backend(
        config.cluster,
        config.cnis,
        keep_cluster=config.keep_cluster,
        recreate_cluster=config.recreate_cluster,
        engine=engine,
        nodes=config.nodes,
    )
    choice = BackendChoice(backend, reason, validate_cnis(backend, config.cnis))
    if config.reference is not None and config.reference not in choice.cnis:
        raise ConfigError(
            f"--reference {config.reference!r} is not one of the CNIs of this session:"
            f" {', '.join(choice.cnis)}"
        )
    _require_offline_build(backend, choice.specs)
    return choice


def _require_offline_build(backend: Backend, specs: Sequence[ClusterSpec]) -> None:
    """On kind with the offline image set (cnibench's own engine, or ``CNIBENCH_IMAGES=
    offline``), refuse before any cluster is created when the images are not built: the line
    names the ``cnibench images build`` to run. Builds nothing."""
    provider = getattr(backend, "provider", None)
    if getattr(provider, "name", "") != "kind":
        return
    from cnibench.backends.kube.images import Images
    from cnibench.backends.kube.offline.status import missing_build

    images = getattr(provider, "images", None)
    if not isinstance(images, Images) or not images.offline:
        return
    names = [spec.cni for spec in specs] + [
        spec.options["gateway"] for spec in specs if spec.options.get("gateway")
    ]
    command = missing_build(images, names)
    if command:
        raise ConfigError(
            f"the offline images of this kind run are not built yet: run {command} (once per"
            " engine; nothing was created)"
        )


DEFAULT_PROFILE = "quick"
"""The profile of ``cnibench run`` and of the pytest plugin alike. ``quick``: the default is what
runs when someone first tries cnibench, and must end in minutes with intervals worth reading (5
runs); a CI job that only proves the path works asks for ``smoke`` (2 runs), numbers meant to be
quoted for ``standard`` or ``paper``."""


def add_session_options(add: Callable[..., object]) -> None:
    """The options of a session, one table for ``cnibench run`` (argparse) and the pytest
    plugin (its option group): same names, defaults and help. Values stay text here and are
    checked once, by :func:`session_config`, so both front ends give the same one-line
    errors."""
    add(
        "--cluster",
        default="auto",
        metavar="KIND",
        help="where to benchmark: auto (kind when a container engine answers, else the lab),"
        " lab, kind, aks or existing (default: auto)",
    )
    add(
        "--cni",
        action="append",
        default=[],
        metavar="NAME[:FEATURE,...]",
        help=f"lab datapath ({', '.join(LAB_DATAPATHS)}) or Kubernetes CNI, with features and"
        " options, e.g. cilium:gateway-api or cilium:mode=kube-proxy (repeatable); default:"
        " the backend's",
    )
    add(
        "--profile",
        default=DEFAULT_PROFILE,
        metavar="NAME",
        help=f"smoke, quick, standard or paper (default: {DEFAULT_PROFILE})",
    )
    add("--runs", default=None, metavar="N", help="repetitions per condition (overrides it)")
    add(
        "--duration",
        default=None,
        metavar="TIME",
        help="length of each timed measurement, e.g. 30s or 12m (overrides the profile)",
    )
    add(
        "--precision",
        default=None,
        metavar="P",
        help="repeat runs until each contrast's 95%% interval is within ±P (e.g. 5%%) or"
        " --max-runs is reached; stops on width, never on significance",
    )
    add(
        "--max-runs",
        default=None,
        metavar="N",
        help=f"most runs per condition --precision may take (default {DEFAULT_MAX_RUNS})",
    )
    add(
        "--precision-on",
        default=None,
        metavar="METRIC,...",
        help="the metrics --precision judges, e.g. throughput (default: each scenario's"
        " primary metrics)",
    )
    add("--results-dir", default="results", metavar="DIR", help="default: results")
    add(
        "--nodes",
        default=None,
        metavar="ROLE=NODE,...",
        help="Kubernetes nodes for the roles client, server and egress-gw, e.g."
        " client=worker-1,server=worker-2 (default: nodes labelled cnibench.io/role=ROLE, else"
        " schedulable Ready workers chosen by cnibench; nothing is written to any node)",
    )
    add(
        "--keep-cluster",
        action="store_true",
        help="leave Kubernetes clusters running after the session",
    )
    add(
        "--recreate-cluster",
        action="store_true",
        help="do not reuse a cached Kubernetes cluster",
    )
    add(
        "--report",
        default=None,
        metavar="FILE",
        help="write a self-contained HTML report of this session's results at the end",
    )
    add(
        "--reference",
        default=None,
        metavar="CNI",
        help="CNI the end-of-session verdict (and --report) compares every other CNI with"
        " (default: the first --cni)",
    )
    add(
        "--all-metrics",
        action="store_true",
        help="--report draws every recorded metric, not only each scenario's primary metrics",
    )
    add_scenario_options(add)


SESSION_OPTIONS = (
    "cluster",
    "cni",
    "profile",
    "runs",
    "duration",
    "precision",
    "max_runs",
    "precision_on",
    "results_dir",
    "keep_cluster",
    "recreate_cluster",
    "nodes",
    "report",
    "reference",
    "all_metrics",
    "weights",
    "users",
    "rules",
    "clients",
    "engine",
    "target",
    "proxy",
    "services",
    "load_engine",
)
"""Destination names of :func:`add_session_options`, the keys :func:`session_config` reads."""


def session_config(values: Mapping[str, Any]) -> SessionConfig:
    """A :class:`SessionConfig` from the options of :func:`add_session_options` (keys as
    argparse names them: ``results_dir``), every value checked here and only here.

    Raises
    ------
    cnibench.errors.ConfigError
        One line naming the option and the bad value.
    """
    cluster = ClusterChoice.parse(str(values["cluster"]))
    runs = _integer("--runs", values.get("runs"))
    duration = values.get("duration")
    profile = profile_named(str(values["profile"])).with_overrides(
        runs=runs, duration=parse_duration(str(duration)) if duration is not None else None
    )
    options = parse_scenario_options(
        weights=values.get("weights"),
        users=values.get("users"),
        rules=values.get("rules"),
        clients=values.get("clients"),
        engine=values.get("engine"),
        target=values.get("target"),
        proxy=values.get("proxy"),
        services=values.get("services"),
        load_engine=values.get("load_engine"),
    )
    precision = _precision(values.get("precision"))
    max_runs = _integer("--max-runs", values.get("max_runs"))
    if max_runs is not None and max_runs < profile.runs:
        raise ConfigError(
            f"--max-runs {max_runs} is below the {profile.runs} runs per condition of the profile"
        )
    return SessionConfig(
        cluster=cluster,
        cnis=CniRequest.parse(values.get("cni") or ()),
        profile=profile,
        results_dir=Path(values.get("results_dir") or "results"),
        keep_cluster=bool(values.get("keep_cluster")),
        recreate_cluster=bool(values.get("recreate_cluster")),
        scenario_options=options,
        precision=precision,
        max_runs=DEFAULT_MAX_RUNS if max_runs is None else max_runs,
        precision_metrics=_precision_metrics(values.get("precision_on"), precision),
        report=Path(str(values["report"])) if values.get("report") else None,
        reference=None if values.get("reference") is None else str(values["reference"]),
        all_metrics=bool(values.get("all_metrics")),
        nodes=NodePins.parse(values.get("nodes")),
    )


def _precision_metrics(text: object, precision: float | None) -> tuple[str, ...]:
    """``--precision-on`` as metric names; it means nothing without ``--precision``."""
    if text is None:
        return ()
    if precision is None:
        raise ConfigError("--precision-on needs --precision")
    names = tuple(name.strip() for name in str(text).split(",") if name.strip())
    if not names:
        raise ConfigError(f"--precision-on {str(text)!r}: name at least one metric")
    return names


def _precision(text: object) -> float | None:
    """``--precision`` as a fraction in (0, 1): ``5%`` or ``0.05``."""
    if text is None:
        return None
    from cnibench.report.compare import parse_threshold

    try:
        value = parse_threshold(str(text))
    except ConfigError as exc:
        raise ConfigError(str(exc).replace("threshold", "--precision")) from None
    if not 0.0 < value < 1.0:
        raise ConfigError(f"--precision {text!r}: it must be above 0 and below 100%")
    return value


def _integer(option: str, text: object) -> int | None:
    """``text`` as an int (its range is checked where it is used, e.g.
    :meth:`Profile.with_overrides` for ``--runs``)."""
    if text is None:
        return None
    try:
        return int(str(text))
    except ValueError:
        raise ConfigError(f"{option}: {str(text)!r} is not an integer") from None


def add_scenario_options(add: Callable[..., object]) -> None:
    """Scenario parameters shared by ``cnibench run`` and the pytest plugin."""
    add(
        "--weights",
        action="append",
        default=None,
        metavar="B=W,...",
        help="split weights, e.g. v1=60,v2=40 (repeatable: one weight set each)",
    )
    add("--users", default=None, metavar="N,...", help="split virtual users, e.g. 1,10,100,1000")
    add("--rules", default=None, metavar="N,...", help="policy rule counts, e.g. 0,100,500,1000")
    add("--clients", default=None, metavar="N,...", help="policy concurrent clients, e.g. 1,50")
    add(
        "--engine",
        default=None,
        metavar="NAME,...",
        help="the lab's policy engines: iptables, nftables, nftables-set or all (default"
        " iptables,nftables-set); refused on Kubernetes, where each CNI enforces with its own",
    )
    add(
        "--target",
        default=None,
        metavar="NAME,...",
        help="baseline targets: pod (default), service (a virtual IP), nodeport, or all",
    )
    add(
        "--proxy",
        default=None,
        metavar="NAME,...",
        help="Service proxies for the service and nodeport targets: iptables, nftables (the"
        " lab's two, the default), ebpf (a CNI's kube-proxy replacement) or all; a Kubernetes"
        " cluster runs the one it has and skips the others, naming it",
    )
    add(
        "--services",
        default=None,
        metavar="N,...",
        help="further Services in the proxy's tables, e.g. 0,1000,5000 (default: 0)",
    )
    add(
        "--load-engine",
        default=None,
        metavar="NAME",
        help="what drives the split scenario's users: epoll (cnibench's own, default) or locust",
    )


@dataclass(frozen=True)
class PlannedCondition:
    """A condition of a scenario chosen for a session, before the CNIs are known.

    ``only`` holds the CNIs a ``scenario@cni1+cni2`` item restricts it to, parsed as ``--cni``
    values are (:meth:`CniRequest.parse`); empty means every CNI of the session.
    """

    scenario: Scenario
    condition: Condition
    only: CniRequest = field(default_factory=CniRequest)


@dataclass(frozen=True)
class PlannedRun:
    """One condition on one CNI: what :meth:`BenchSession.plan` returns, in running order.

    ``spec`` is the CNI as the session parsed and checked it (one of
    :attr:`BenchSession.specs`, or a CNI a ``--scenario`` item named): the runner and the
    scenario take it as it is."""

    scenario: Scenario
    spec: ClusterSpec
    condition: Condition

    @property
    def cni(self) -> str:
        """The CNI as results record it (:attr:`ClusterSpec.label`)."""
        return self.spec.label


def interleaved_rounds(plan: Sequence[PlannedRun], runs: int) -> list[tuple[int, PlannedRun]]:
    """``plan`` as interleaved rounds: the conditions of one scenario on one CNI (one
    cluster) take turns, one repetition each per round, the order rotating every round, so
    that drift of the machine during the session falls on treatment and control alike.

    With a control C and a treatment T that is C T, T C, C T, ...; with more conditions each
    leads in turn. Groups keep the plan's order (one cluster at a time).

    Parameters
    ----------
    plan:
        :meth:`BenchSession.plan`'s running order.
    runs:
        Rounds (the profile's runs per condition).

    Returns
    -------
    list of (round, PlannedRun)
        The running order; ``round`` is the repetition number of that run.

    Examples
    --------
    Two conditions ``C`` and ``T`` of one scenario and CNI, 3 runs:
    ``[(0, C), (0, T), (1, T), (1, C), (2, C), (2, T)]``.
    """
    order: list[tuple[int, PlannedRun]] = []
    for members in _groups(plan).values():
        for round_number in range(runs):
            order += [(round_number, m) for m in _rotated(members, round_number)]
    return order


def _groups(plan: Sequence[PlannedRun]) -> dict[tuple[str, str], list[PlannedRun]]:
    """``plan`` by (scenario, CNI), in the plan's order: what may take turns on one cluster."""
    groups: dict[tuple[str, str], list[PlannedRun]] = {}
    for planned in plan:
        groups.setdefault((planned.scenario.name, planned.cni), []).append(planned)
    return groups


def _rotated(members: Sequence[PlannedRun], round_number: int) -> list[PlannedRun]:
    """``members`` in the order of round ``round_number``: each leads in turn."""
    shift = round_number % len(members)
    return [*members[shift:], *members[:shift]]


class RunOrder(enum.Enum):
    """How the conditions of one scenario on one CNI take their repetitions."""

    INTERLEAVED = "interleaved"
    """In rounds, one repetition each, every round setting each condition up again."""
    SEQUENTIAL = "sequential"
    """One condition after the other, all its repetitions on one set-up."""


SEQUENTIAL_ASKED = "--sequential was given"
"""The reason :func:`run_design` records when every group is sequential because it was asked."""
LONE_CONDITION = "one condition: nothing to alternate with"
"""The reason recorded for a condition that is alone in its group (nothing to interleave with,
so setting it up again every round would cost time and balance nothing)."""


@dataclass(frozen=True)
class GroupDesign:
    """The order of some conditions of one scenario on one CNI, and why.

    Attributes
    ----------
    scenario, cni:
        The group: conditions that may take turns (on one cluster, or on the few the scenario
        asks for, as wireguard's with and without encryption).
    order:
        Interleaved or sequential.
    conditions:
        Their ids, in the order planned.
    reason:
        Why sequential (``""`` when interleaved): :meth:`Scenario.sequential_reason`,
        :data:`LONE_CONDITION` or :data:`SEQUENTIAL_ASKED`.
    rounds:
        The running order of these conditions: (repetition, run), the repetition ``-1`` for a
        sequential condition (all its repetitions on one set-up).
    """

    scenario: str
    cni: str
    order: RunOrder
    conditions: tuple[str, ...]
    reason: str = ""
    rounds: tuple[tuple[int, PlannedRun], ...] = ()

    def as_json(self) -> dict[str, Any]:
        """What ``design.json`` records of the group."""
        return {
            "scenario": self.scenario,
            "cni": self.cni,
            "order": self.order.value,
            "conditions": list(self.conditions),
            "reason": self.reason,
        }


@dataclass(frozen=True)
class RunDesign:
    """The running order of a session's plan (:func:`run_design`), group by group."""

    groups: tuple[GroupDesign, ...]

    @property
    def order(self) -> list[tuple[int, PlannedRun]]:
        """Every (repetition, run) in running order; repetition ``-1``: all of them."""
        return [step for group in self.groups for step in group.rounds]

    def sequential_line(self) -> str:
        """One line saying what runs sequentially and why (``""`` when nothing does), e.g.
        ``sequential, not interleaved: baseline on flannel (...-1000svc): 1000 further
        Services ...``; reasons shared by several groups are said once."""
        by_reason: dict[str, list[str]] = {}
        for group in self.groups:
            if group.order is RunOrder.SEQUENTIAL:
                named = ", ".join(group.conditions[:_NAMED_SKIPS])
                if len(group.conditions) > _NAMED_SKIPS:
                    named = f"{len(group.conditions)} conditions"
                where = f"{group.scenario} on {group.cni} ({named})"
                by_reason.setdefault(group.reason, []).append(where)
        if not by_reason:
            return ""
        parts = [f"{'; '.join(where)}: {reason}" for reason, where in by_reason.items()]
        return f"sequential, not interleaved: {' | '.join(parts)}"


def run_design(plan: Sequence[PlannedRun], runs: int, *, sequential: bool = False) -> RunDesign:
    """The running order of ``plan``: interleaved rounds wherever conditions can be set up
    side by side, sequential where they cannot, each group saying which and why. Pure.

    The conditions of one scenario on one CNI (one cluster) whose set-up can be repeated
    cheaply take turns in rounds (:func:`interleaved_rounds`), so that drift of the machine
    falls on treatment and control alike; then each condition whose scenario gives a
    :meth:`Scenario.sequential_reason` (thousands of Services) runs all its repetitions on one
    set-up. A condition alone in its group runs sequentially too (:data:`LONE_CONDITION`).

    Parameters
    ----------
    plan:
        :meth:`BenchSession.plan`'s running order.
    runs:
        Repetitions per condition (the profile's runs).
    sequential:
        ``--sequential``: every condition after the other, as planned.
    """
    groups: list[GroupDesign] = []
    for (name, cni), members in _groups(plan).items():
        if sequential:
            groups.append(_sequential(name, cni, members, SEQUENTIAL_ASKED))
            continue
        cheap = [p for p in members if not p.scenario.sequential_reason(p.condition)]
        if len(cheap) > 1:
            groups.append(
                GroupDesign(
                    name,
                    cni,
                    RunOrder.INTERLEAVED,
                    tuple(p.condition.id for p in cheap),
                    rounds=tuple(interleaved_rounds(cheap, runs)),
                )
            )
        elif cheap:
            groups.append(_sequential(name, cni, cheap, LONE_CONDITION))
        costly: dict[str, list[PlannedRun]] = {}
        for p in members:
            reason = p.scenario.sequential_reason(p.condition)
            if reason:
                costly.setdefault(reason, []).append(p)
        groups += [_sequential(name, cni, some, reason) for reason, some in costly.items()]
    return RunDesign(tuple(groups))


def _sequential(name: str, cni: str, members: Sequence[PlannedRun], reason: str) -> GroupDesign:
    return GroupDesign(
        name,
        cni,
        RunOrder.SEQUENTIAL,
        tuple(p.condition.id for p in members),
        reason,
        tuple((-1, p) for p in members),
    )


def _key(planned: PlannedRun) -> tuple[str, str, str]:
    return (planned.scenario.name, planned.cni, planned.condition.id)


def plan_conditions(
    registry: Mapping[str, Scenario],
    items: Sequence[str] = (),
    conditions: Sequence[str] = (),
) -> list[PlannedCondition]:
    """The conditions a session runs, from scenario items and condition ids; pure (no backend).

    ``items`` are ``--scenario`` values, each comma-separated, ``NAME`` or ``NAME@cni1+cni2``
    (the scenario only on those CNIs, parsed here as ``--cni`` values are and checked against
    the backend by :meth:`BenchSession.plan`); none means every scenario of ``registry``.
    ``conditions`` keeps only the conditions with those ids; none keeps all.

    Both front ends call this: ``cnibench run`` before a backend is chosen (so a misspelt name
    is reported before "no engine answers"), the pytest plugin for each test marked with a
    scenario.

    Raises
    ------
    cnibench.errors.ConfigError
        An unknown scenario, a CNI after ``@`` that is not ``NAME[:OPTION,...]``, or no
        condition matching ``conditions`` (the choices listed).
    """
    names = [item for arg in items for item in arg.split(",") if item] or list(registry)
    chosen = []
    for item in names:
        name, _, only = item.partition("@")
        chosen.append(
            (scenario_named(name, registry), CniRequest.parse(c for c in only.split("+") if c))
        )
    planned = [
        PlannedCondition(scenario, condition, only)
        for scenario, only in chosen
        for condition in scenario.conditions()
        if not conditions or condition.id in conditions
    ]
    if not planned:
        known = [c.id for scenario, _ in chosen for c in scenario.conditions()]
        raise ConfigError(
            f"no condition matches --condition {', '.join(conditions)}:"
            f" choose from {', '.join(dict.fromkeys(known))}"
        )
    return planned


class EventKind(enum.Enum):
    """What a :class:`ProgressEvent` reports."""

    PLANNED = "planned"
    """The plan is known; ``runs`` is the number of repetitions it holds."""
    CONDITION = "condition"
    """A condition (or one interleaved round of it) starts; ``text`` names it."""
    RUN = "run"
    """One repetition was attempted (``runs`` = 1)."""
    SKIPPED = "skipped"
    """A condition the cluster cannot run was skipped; ``runs``: the repetitions it had left."""
    NOT_PROVEN = "not-proven"
    """A condition could not be set up or verified; ``runs``: the repetitions it had left."""
    DESIGN = "design"
    """Some conditions run sequentially, not interleaved; ``text`` says which and why
    (:meth:`RunDesign.sequential_line`), once, right after :attr:`PLANNED`."""
    CLUSTER = "cluster"
    """A cluster was provisioned; ``text`` is one line of what it found worth telling
    (:attr:`~cnibench.backends.base.ClusterIdentity.notes`: the CNI running on an existing
    cluster, which node holds which role)."""


@dataclass(frozen=True)
class ProgressEvent:
    """What :meth:`BenchSession.run` reports as it goes: a front end renders it (the CLI's
    progress bar advances by ``runs``), a notebook or the pytest plugin may ignore it."""

    kind: EventKind
    text: str
    runs: int = 0


ProgressListener = Callable[[ProgressEvent], None]
"""Receives each :class:`ProgressEvent` of :meth:`BenchSession.run`."""


@dataclass(frozen=True)
class Skipped:
    """Conditions of one scenario on one CNI skipped for one reason (the cluster lacks what
    they need): ``conditions`` are their ids, ``planned`` how many that scenario planned on
    that CNI."""

    scenario: str
    cni: str
    reason: str
    conditions: tuple[str, ...]
    planned: int

    def line(self) -> str:
        """One line: how many of the planned conditions were skipped (named when few)."""
        which = f"{len(self.conditions)} of {self.planned} conditions"
        if len(self.conditions) <= _NAMED_SKIPS:
            which += f": {', '.join(self.conditions)}"
        return f"skipped {self.scenario}/{self.cni} ({which}): {self.reason}"


_NAMED_SKIPS = 4
"""Skipped conditions of one scenario and CNI are named up to this many, else counted."""


@dataclass(frozen=True)
class SessionOutcome:
    """What :meth:`BenchSession.run` ran, and what counts as failed, skipped or not proven:
    decided here, once, for every front end.

    Attributes
    ----------
    plan:
        The planned runs, in running order.
    results:
        One result per condition that was set up and verified (interleaved rounds merged).
    skipped:
        Conditions the cluster cannot run, grouped by scenario, CNI and reason.
    not_proven:
        One line per condition that could not be set up (``NOT SET UP ...``) or verified
        (``NOT VERIFIED ...``); the session went on with the next.
    session_dir:
        Where the session's results are (absent when nothing was written).
    """

    plan: tuple[PlannedRun, ...]
    results: tuple[ConditionResult, ...]
    skipped: tuple[Skipped, ...]
    not_proven: tuple[str, ...]
    session_dir: Path

    @property
    def failed(self) -> bool:
        """Whether the session failed: a condition not proven, a condition without one good
        run, or nothing measured at all."""
        return bool(self.not_proven) or not self.results or any(not r.ok_runs for r in self.results)

    def lines(self) -> list[str]:
        """The lines people grep: skips, conditions not proven, failed runs, and "nothing was
        measured" when every condition was skipped."""
        lines = [skip.line() for skip in self.skipped] + list(self.not_proven)
        for result in self.results:
            lines += [
                f"failed {result.scenario}/{result.cni}/{run.run_id}: {run.reason}"
                for run in result.runs
                if run.reason
            ]
        if not self.results and not self.not_proven:
            lines.append("nothing was measured: every condition was skipped")
        return lines


class BenchSession:
    """One benchmark session; use as a context manager so clusters are always torn down.

    :meth:`run` is the one door: ``cnibench run``, the pytest plugin and notebooks all call
    it. SIGTERM is turned into :class:`KeyboardInterrupt` while the session is open, so a
    terminated run cleans up exactly like one interrupted with Ctrl-C.

    Parameters
    ----------
    config:
        The session's options.
    scenarios:
        The registry the caller configured (so scenarios are configured once); default: one
        built from ``config``'s scenario options. Either way :attr:`scenarios` holds each
        planned for the chosen backend (:meth:`Scenario.on_backend`: a Kubernetes CNI's policy
        conditions name no engine); plan with those.
    choice:
        The backend already chosen by :func:`choose_backend` for ``config`` (the plugin
        chooses at configuration time); default: chosen here.
    """

    def __init__(
        self,
        config: SessionConfig,
        *,
        scenarios: Mapping[str, Scenario] | None = None,
        choice: BackendChoice | None = None,
    ) -> None:
        self.config = config
        choice = choice or choose_backend(config)
        self.backend, self.backend_reason = choice.backend, choice.reason
        self.specs = choice.specs
        """The session's CNIs, parsed once and checked against the backend; what runs."""
        self.cnis = choice.cnis
        """The same as results record them (``--cni`` labels), in order."""
        configured = (
            scenarios if scenarios is not None else build_scenarios(config.scenario_options)
        )
        # Options the backend cannot honour (--engine on Kubernetes) are refused before its
        # preflight asks anything of the machine.
        self.scenarios = {name: s.on_backend(self.backend) for name, s in configured.items()}
        self.backend.preflight()
        self.store = ResultsStore(config.results_dir)
        self.pool = ClusterPool(self.backend)
        self.runner = Runner(
            self.pool,
            self.store,
            config.profile,
            precision=config.precision,
            max_runs=config.max_runs,
            precision_metrics=config.precision_metrics,
        )
        self._previous_sigterm: object = None
        # design.json of every run() so far (the plugin calls run() once per test).
        self._designs: list[dict[str, Any]] = []
        self._rounds: list[dict[str, Any]] = []
        self._skipped: list[dict[str, Any]] = []

    def plan(self, planned: Sequence[PlannedCondition]) -> list[PlannedRun]:
        """``planned`` (from :func:`plan_conditions`) on this session's CNIs, in running order.

        A condition runs on every CNI of the session, or on its ``only`` CNIs (checked against
        the backend like ``--cni``). The order is by CNI (the session's, as given, then CNIs
        only an item names), then as planned, so one cluster serves all its conditions before
        the next is provisioned.

        Raises
        ------
        cnibench.errors.ConfigError
            An ``only`` CNI the backend does not offer.
        """
        specs = {spec.label: spec for spec in self.specs}
        named = {s.label: s for p in planned for s in p.only.specs if s.label not in specs}
        if named:  # checked once, as --cni values were by choose_backend
            specs |= {
                s.label: s for s in validate_cnis(self.backend, CniRequest((*named.values(),)))
            }
        return [
            PlannedRun(p.scenario, spec, p.condition)
            for label, spec in specs.items()
            for p in planned
            if label in (p.only.labels or self.cnis)
        ]

    def spec(self, cni: str) -> ClusterSpec:
        """The session's CNI whose label (as results record it, and as the plugin's ``cni``
        fixture holds it) is ``cni``: the spec parsed from ``--cni``, looked up, not parsed
        again.

        Raises
        ------
        cnibench.errors.ConfigError
            ``cni`` is not the label of one of :attr:`specs`.
        """
        for spec in self.specs:
            if spec.label == cni:
                return spec
        raise ConfigError(f"--cni {cni!r} is not a CNI of this session: {', '.join(self.cnis)}")

    def run(
        self,
        planned: Sequence[PlannedCondition] | None = None,
        *,
        interleave: bool = True,
        progress: ProgressListener | None = None,
    ) -> SessionOutcome:
        """Run ``planned`` (default: every condition of every scenario) on the session's CNIs
        and say what came of it.

        A condition the cluster cannot run is skipped (with the reason); one that cannot be
        set up or verified is recorded as not proven and the session goes on with the next;
        a failed repetition is kept, flagged, and never averaged in.

        Parameters
        ----------
        planned:
            From :func:`plan_conditions` with this session's scenarios.
        interleave:
            ``True`` (the default): the conditions of a scenario on one CNI take turns in
            rounds, one repetition each, wherever their set-up can be repeated cheaply
            (:func:`run_design`); with ``--precision`` the rounds go on, among the conditions
            not yet precise enough, until each is or ``--max-runs`` is reached. ``False``
            (``--sequential``): one condition after the other. Either way the design of each
            group and the running order are written to the results as ``design.json``, and a
            :attr:`EventKind.DESIGN` event says what runs sequentially and why.
        progress:
            Receives a :class:`ProgressEvent` as the session goes.

        Raises
        ------
        cnibench.errors.ConfigError
            An ``only`` CNI the backend lacks.
        """
        plan = self.plan(plan_conditions(self.scenarios) if planned is None else planned)
        runs = self.config.profile.runs
        design = run_design(plan, runs, sequential=not interleave)
        tell = progress or (lambda event: None)
        merged: dict[tuple[str, str, str], ConditionResult] = {}
        given_up: set[tuple[str, str, str]] = set()
        skipped: dict[tuple[str, str, str], list[str]] = {}
        not_proven: list[str] = []
        ran: list[tuple[int, PlannedRun]] = []

        def one(round_number: int, planned_run: PlannedRun) -> None:
            scenario, cni, condition = planned_run.scenario, planned_run.cni, planned_run.condition
            key = _key(planned_run)
            if key in given_up:
                return
            ran.append((round_number, planned_run))
            tell(ProgressEvent(EventKind.CONDITION, f"{scenario.name} {cni} {condition.id}"))
            # One round of an interleaved session is one repetition; otherwise all.
            rounds = None if round_number < 0 else range(round_number, round_number + 1)
            left = runs if rounds is None else max(0, runs - round_number)
            try:
                result = self.run_condition(
                    scenario, planned_run.spec, condition, repetitions=rounds
                )
            except UnsupportedError as exc:
                given_up.add(key)
                skipped.setdefault((scenario.name, cni, str(exc)), []).append(condition.id)
                tell(ProgressEvent(EventKind.SKIPPED, str(exc), left))
                return
            except VerificationError as exc:
                # One condition that cannot be set up or proven says nothing of the next.
                given_up.add(key)
                label = "NOT SET UP" if isinstance(exc, SetupError) else "NOT VERIFIED"
                not_proven.append(f"{label} {exc}")
                tell(ProgressEvent(EventKind.NOT_PROVEN, not_proven[-1], left))
                return
            earlier = merged.get(key)
            merged[key] = (
                result
                if earlier is None
                else dataclasses.replace(earlier, runs=(*earlier.runs, *result.runs))
            )

        tell(ProgressEvent(EventKind.PLANNED, f"{len(plan)} conditions", len(plan) * runs))
        line = design.sequential_line()
        if line:
            tell(ProgressEvent(EventKind.DESIGN, line))
        self.runner.progress = lambda text: tell(ProgressEvent(EventKind.RUN, text, 1))
        self.pool.notice = lambda text: tell(ProgressEvent(EventKind.CLUSTER, text))
        try:
            for group in design.groups:
                for round_number, planned_run in group.rounds:
                    one(round_number, planned_run)
                if group.order is RunOrder.INTERLEAVED and self.config.precision is not None:
                    self._rounds_to_precision(group, merged, given_up, one)
        finally:
            self.runner.progress = None
            self.pool.notice = None
        self._designs += [group.as_json() for group in design.groups]
        # A round of null: a sequential condition, every repetition on one set-up.
        self._rounds += [
            {
                "round": number if number >= 0 else None,
                "scenario": p.scenario.name,
                "cni": p.cni,
                "condition": p.condition.id,
            }
            for number, p in ran
        ]
        planned_per = Counter((p.scenario.name, p.cni) for p in plan)
        self._skipped += [
            {
                "scenario": name,
                "cni": cni,
                "reason": reason,
                "conditions": ids,
                "planned": planned_per[(name, cni)],
            }
            for (name, cni, reason), ids in skipped.items()
        ]
        if self.store.session_dir.is_dir():  # not when every condition was skipped
            self.store.write_json("design", {"groups": self._designs, "rounds": self._rounds})
            if self._skipped:
                # What the clusters could not run, and why: the report's matrix says so in
                # the cells of those configurations rather than leaving them blank.
                self.store.write_json("skipped", {"skipped": self._skipped})
        return SessionOutcome(
            plan=tuple(plan),
            results=tuple(r for key, r in merged.items() if key not in given_up),
            skipped=tuple(
                Skipped(name, cni, reason, tuple(ids), planned_per[(name, cni)])
                for (name, cni, reason), ids in skipped.items()
            ),
            not_proven=tuple(not_proven),
            session_dir=self.store.session_dir,
        )

    def _rounds_to_precision(
        self,
        group: GroupDesign,
        merged: dict[tuple[str, str, str], ConditionResult],
        given_up: set[tuple[str, str, str]],
        one: Callable[[int, PlannedRun], None],
    ) -> None:
        """``--precision`` on an interleaved group: after the profile's rounds, further rounds
        among the conditions whose primary metrics are not yet precise enough (the rule of
        :func:`~cnibench.scenarios.runner.precision_reached`: interval widths only), until
        none is left or ``--max-runs`` rounds were made; then each condition's note, as the
        runner writes it for a sequential condition."""
        target = self.config.precision
        assert target is not None
        members = list({p.condition.id: p for _, p in group.rounds}.values())

        def judged(p: PlannedRun) -> tuple[bool, dict[str, float]]:
            metrics = self.runner.precision_metrics or p.scenario.primary_metrics
            return precision_reached(merged[_key(p)].runs, metrics, target)

        def measured(p: PlannedRun) -> bool:
            return _key(p) in merged and _key(p) not in given_up

        round_number = self.config.profile.runs
        while round_number < self.runner.max_runs:
            open_ = [p for p in members if measured(p) and not judged(p)[0]]
            if not open_:
                break
            for p in _rotated(open_, round_number):
                one(round_number, p)
            round_number += 1
        for p in filter(measured, members):
            reached, widths = judged(p)
            result = merged[_key(p)]
            note = precision_words(
                reached, widths, target, len({run.repetition for run in result.runs})
            )
            merged[_key(p)] = dataclasses.replace(result, precision_note=note)
            slug = p.scenario.cluster_spec(p.spec, p.condition).slug
            self.store.write_json(
                f"precision-{p.scenario.name}-{slug}-{p.condition.id}",
                {"target": target, "max_runs": self.runner.max_runs, "note": note},
            )

    def run_condition(
        self,
        scenario: Scenario | str,
        cni: ClusterSpec,
        condition: Condition,
        *,
        repetitions: range | None = None,
    ) -> ConditionResult:
        """Run one condition (see :meth:`cnibench.scenarios.runner.Runner.run_condition`);
        what :meth:`run` calls for each planned condition. Raises what the runner raises
        (:class:`~cnibench.errors.UnsupportedError`, :class:`~cnibench.errors.VerificationError`);
        :meth:`run` is the door that turns those into an outcome.

        ``scenario`` may be a name, resolved among the session's configured scenarios;
        ``cni`` is one of :attr:`specs` (:meth:`spec` finds it by its label);
        ``repetitions`` runs only those repetition numbers (one interleaved round).
        """
        if isinstance(scenario, str):
            scenario = scenario_named(scenario, self.scenarios)
        return self.runner.run_condition(scenario, cni, condition, repetitions=repetitions)

    def close(self) -> None:
        """Tear down every cluster of the session."""
        self.pool.teardown()

    def __enter__(self) -> BenchSession:
        self._guard = sigterm_raises_interrupt()
        self._guard.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        try:
            self.close()
        finally:
            self._guard.__exit__(None, None, None)
