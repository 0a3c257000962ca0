"""A benchmark session: options validated once, a backend chosen, clusters pooled, results stored.

The CLI (``cnibench run``) and the pytest plugin are thin shells over :class:`BenchSession`; both
accept the same options and produce the same results. This is the only layer that knows the
concrete backends.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cnibench.backends.base import Backend
from cnibench.backends.lab.plan import LabDatapath, napi_option
from cnibench.errors import ConfigError
from cnibench.results import ResultsStore
from cnibench.scenarios import Condition, Scenario, build_scenarios, scenario_named
from cnibench.scenarios.options import ScenarioOptions, parse_scenario_options
from cnibench.scenarios.profiles import Profile, parse_duration, profile_named
from cnibench.scenarios.runner import (
    DEFAULT_MAX_RUNS,
    ClusterPool,
    ConditionResult,
    ProgressCallback,
    Runner,
)
from cnibench.signals import sigterm_raises_interrupt

__all__ = [
    "CLUSTER_CHOICES",
    "LAB_DATAPATHS",
    "BenchSession",
    "PlannedCondition",
    "PlannedRun",
    "SessionConfig",
    "add_scenario_options",
    "container_engine",
    "plan_conditions",
    "select_backend",
    "validate_cnis",
]

CLUSTER_CHOICES = ("auto", "lab", "kind", "aks", "existing")
LAB_DATAPATHS = tuple(datapath.value for datapath in LabDatapath)
"""Datapaths the lab offers as ``--cni`` (``("routed", "vxlan")``; the names live in
:class:`~cnibench.backends.lab.plan.LabDatapath`)."""


@dataclass(frozen=True)
class SessionConfig:
    """Options of a benchmark session (shared by ``cnibench run`` and the pytest plugin).

    Attributes
    ----------
    cluster:
        One of :data:`CLUSTER_CHOICES`.
    cnis:
        CNIs (kube) or datapaths (lab); empty means the backend's defaults.
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
    """

    cluster: str = "auto"
    cnis: tuple[str, ...] = ()
    profile: Profile = field(default_factory=lambda: profile_named(DEFAULT_PROFILE))
    results_dir: Path = Path("results")
    keep_cluster: bool = False
    recreate_cluster: bool = False
    scenario_options: ScenarioOptions = field(default_factory=ScenarioOptions)
    precision: float | None = None
    max_runs: int = DEFAULT_MAX_RUNS
    precision_metrics: tuple[str, ...] = ()


def container_engine(timeout: float = 5.0) -> str:
    """Name of a container engine that answers (``docker``/``podman``), or ``""``."""
    from cnibench.backends.kube.engine import answering_engine

    return answering_engine(timeout=timeout)


def select_backend(
    cluster: str, *, keep_cluster: bool = False, recreate_cluster: bool = False
) -> tuple[Backend, str]:
    """The backend for ``--cluster`` and a sentence saying what was picked and why."""
    if cluster not in CLUSTER_CHOICES:
        raise ConfigError(
            f"unknown --cluster {cluster!r}: choose one of {', '.join(CLUSTER_CHOICES)}"
        )
    if cluster == "auto":
        engine = container_engine()
        if engine:
            cluster = "kind"
            reason = f"--cluster auto: {engine} answers, using kind"
        else:
            cluster = "lab"
            reason = "--cluster auto: no container engine answers, using the embedded lab"
    else:
        reason = f"--cluster {cluster}"
    if cluster == "lab":
        from cnibench.backends.lab import LabBackend

        return LabBackend(), reason
    from cnibench.backends.kube import AksProvider, ExistingProvider, KindProvider, KubeBackend

    provider: KindProvider | AksProvider | ExistingProvider
    if cluster == "kind":
        provider = KindProvider(recreate=recreate_cluster)
    elif cluster == "aks":
        _check_aks_prerequisites()
        provider = AksProvider()
    else:
        provider = ExistingProvider()
        if not provider.kubeconfig.is_file():
            raise ConfigError(
                f"--cluster existing: kubeconfig {provider.kubeconfig} does not exist"
                " (set KUBECONFIG to a readable kubeconfig)"
            )
    return KubeBackend(provider, keep_cluster=keep_cluster), reason


def _check_aks_prerequisites() -> None:
    """Fail before anything starts when ``--cluster aks`` cannot work here (one-line error)."""
    from cnibench.backends.kube.providers import AKS_CREDENTIAL_VARIABLES

    if shutil.which("terraform") is None:
        raise ConfigError(
            "--cluster aks needs terraform on PATH, and it is not there"
            " (install Terraform, or choose --cluster lab, kind or existing)"
        )
    missing = [name for name in AKS_CREDENTIAL_VARIABLES if not os.environ.get(name)]
    if missing:
        raise ConfigError(
            f"--cluster aks needs Azure credentials in the environment: {', '.join(missing)}"
        )


def validate_cnis(
    backend: Backend, cnis: Sequence[str], *, requested: str = "auto"
) -> tuple[str, ...]:
    """``cnis`` (``--cni`` labels, see :meth:`ClusterSpec.from_label`) checked against what
    ``backend`` offers, options included, and written the one way results record them
    (:attr:`ClusterSpec.label`); the backend's defaults when empty.

    ``requested`` is the ``--cluster`` the user gave: when ``auto`` fell back to the lab and a
    Kubernetes CNI was asked for, the error says what is missing and what to run instead.
    """
    from cnibench.backends.base import ClusterSpec
    from cnibench.backends.kube.cni import cni_definition
    from cnibench.backends.kube.cnis import cni_names

    kube_cnis = cni_names()
    specs = [ClusterSpec.from_label(cni) for cni in cnis]

    if backend.name == "lab":
        for spec in specs:
            cni = spec.cni
            if cni in kube_cnis and requested == "auto":
                raise ConfigError(
                    f"--cni {cni!r} needs a Kubernetes cluster and none is at hand: no container"
                    ' engine answers for kind (start one: eval "$(cnibench engine up)", then'
                    " cnibench images build and CNIBENCH_IMAGES=offline) and no --cluster existing"
                    f" was given (set KUBECONFIG); or measure a lab datapath: --cni"
                    f" {' / '.join(LAB_DATAPATHS)}"
                )
            if cni in kube_cnis:
                raise ConfigError(
                    f"--cni {cni!r} is a Kubernetes CNI and --cluster lab runs lab datapaths:"
                    f" choose --cni {' / '.join(LAB_DATAPATHS)}, or --cluster kind or existing"
                )
            if cni not in LAB_DATAPATHS:
                raise ConfigError(
                    f"unknown --cni {cni!r} for the lab: choose one of {', '.join(LAB_DATAPATHS)}"
                )
            try:
                napi_option(spec.options)
            except ConfigError as exc:
                raise ConfigError(f"--cni {spec.label!r}: {exc}") from None
        return tuple(dict.fromkeys(spec.label for spec in specs)) or LAB_DATAPATHS

    for spec in specs:
        if spec.cni not in kube_cnis:
            raise ConfigError(f"unknown --cni {spec.cni!r}: choose one of {', '.join(kube_cnis)}")
        cni_definition(spec)  # the driver refuses options and features it does not take
    # The first registered driver is kind's own CNI: what a plain kind cluster runs.
    return tuple(dict.fromkeys(spec.label for spec in specs)) or kube_cnis[:1]


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
        "--keep-cluster",
        action="store_true",
        help="leave Kubernetes clusters running after the session",
    )
    add(
        "--recreate-cluster",
        action="store_true",
        help="do not reuse a cached Kubernetes cluster",
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
    cluster = str(values["cluster"])
    if cluster not in CLUSTER_CHOICES:
        raise ConfigError(
            f"unknown --cluster {cluster!r}: choose one of {', '.join(CLUSTER_CHOICES)}"
        )
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
        cnis=tuple(values.get("cni") or ()),
        profile=profile,
        results_dir=Path(values.get("results_dir") or "results"),
        keep_cluster=bool(values.get("keep_cluster")),
        recreate_cluster=bool(values.get("recreate_cluster")),
        scenario_options=options,
        precision=precision,
        max_runs=DEFAULT_MAX_RUNS if max_runs is None else max_runs,
        precision_metrics=_precision_metrics(values.get("precision_on"), precision),
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
        help="lab policy engines: iptables, nftables, nftables-set or all",
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

    ``only`` holds the CNIs a ``scenario@cni1+cni2`` item restricts it to, as typed; empty means
    every CNI of the session.
    """

    scenario: Scenario
    condition: Condition
    only: tuple[str, ...] = ()


@dataclass(frozen=True)
class PlannedRun:
    """One condition on one CNI: what :meth:`BenchSession.plan` returns, in running order."""

    scenario: Scenario
    cni: str
    condition: Condition


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
    groups: dict[tuple[str, str], list[PlannedRun]] = {}
    for planned in plan:
        groups.setdefault((planned.scenario.name, planned.cni), []).append(planned)
    order: list[tuple[int, PlannedRun]] = []
    for members in groups.values():
        for round_number in range(runs):
            shift = round_number % len(members)
            order += [(round_number, m) for m in (*members[shift:], *members[:shift])]
    return order


def plan_conditions(
    registry: Mapping[str, Scenario],
    items: Sequence[str] = (),
    conditions: Sequence[str] = (),
) -> list[PlannedCondition]:
    """The conditions a session runs, from scenario items and condition ids; pure (no backend).

    ``items`` are ``--scenario`` values, each comma-separated, ``NAME`` or ``NAME@cni1+cni2``
    (the scenario only on those CNIs); none means every scenario of ``registry``.
    ``conditions`` keeps only the conditions with those ids; none keeps all.

    Both front ends call this: ``cnibench run`` before a backend is chosen (so a misspelt name
    is reported before "no engine answers"), the pytest plugin for each test marked with a
    scenario.

    Raises
    ------
    cnibench.errors.ConfigError
        An unknown scenario, or no condition matching ``conditions`` (the choices listed).
    """
    names = [item for arg in items for item in arg.split(",") if item] or list(registry)
    chosen = []
    for item in names:
        name, _, only = item.partition("@")
        chosen.append((scenario_named(name, registry), tuple(c for c in only.split("+") if c)))
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


class BenchSession:
    """One benchmark session; use as a context manager so clusters are always torn down.

    SIGTERM is turned into :class:`KeyboardInterrupt` while the session is open, so a
    terminated run cleans up exactly like one interrupted with Ctrl-C.
    """

    def __init__(
        self,
        config: SessionConfig,
        *,
        scenarios: Mapping[str, Scenario] | None = None,
        progress: ProgressCallback | None = None,
    ) -> None:
        self.config = config
        self.backend, self.backend_reason = select_backend(
            config.cluster,
            keep_cluster=config.keep_cluster,
            recreate_cluster=config.recreate_cluster,
        )
        self.cnis = validate_cnis(self.backend, config.cnis, requested=config.cluster)
        self.backend.preflight()
        # The registry the caller planned with (so scenarios are configured once), else one
        # built from the session's options.
        self.scenarios = (
            dict(scenarios) if scenarios is not None else build_scenarios(config.scenario_options)
        )
        self.store = ResultsStore(config.results_dir)
        self.pool = ClusterPool(self.backend)
        self.runner = Runner(
            self.pool,
            self.store,
            config.profile,
            progress=progress,
            precision=config.precision,
            max_runs=config.max_runs,
            precision_metrics=config.precision_metrics,
        )
        self._previous_sigterm: object = None

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
        cnis_of = {
            only: validate_cnis(self.backend, only) if only else self.cnis
            for only in dict.fromkeys(p.only for p in planned)
        }
        named = (cni for cnis in cnis_of.values() for cni in cnis)
        order = tuple(dict.fromkeys((*self.cnis, *named)))
        return [
            PlannedRun(p.scenario, cni, p.condition)
            for cni in order
            for p in planned
            if cni in cnis_of[p.only]
        ]

    def run_condition(
        self,
        scenario: Scenario | str,
        cni: str,
        condition: Condition,
        *,
        repetitions: range | None = None,
    ) -> ConditionResult:
        """Run one condition (see :meth:`cnibench.scenarios.runner.Runner.run_condition`).

        ``scenario`` may be a name, resolved among the session's configured scenarios;
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
