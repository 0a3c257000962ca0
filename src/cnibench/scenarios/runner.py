"""The engine shared by ``cnibench run`` and the pytest plugin.

For one (scenario, CNI, condition) the runner gets a cluster from the :class:`ClusterPool`,
prepares, verifies, measures every repetition (retrying failed ones up to the profile's limit),
adds CPU and memory over each run's window (host-wide from the cluster's Prometheus, and each
machine's own where the backend can separate them), and writes every run
atomically to the results store as soon as it ends. A failed attempt is recorded with its reason
and never averaged in; an unverified set-up, or one that cannot be made, is recorded as failed
and raises. Before the first measured run on a cluster that asks for it
(:attr:`~cnibench.backends.base.Monitoring.warm_up`: one made for this session on kind), the
runner waits, within a bound, for the cluster's CPU to settle (:mod:`cnibench.scenarios.warmup`)
and measures warm-up runs, recorded with status ``warmup`` and never counted.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import math
import time
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, cast

from cnibench import stats
from cnibench.backends.base import (
    Backend,
    Cluster,
    ClusterIdentity,
    ClusterSpec,
    Endpoint,
    Monitoring,
    ResourceUsage,
)
from cnibench.errors import (
    AgentRestartedError,
    CnibenchError,
    InsufficientDataError,
    ProvisioningError,
    SetupError,
    ToolError,
    UnsupportedError,
    VerificationError,
)
from cnibench.metrics import MetricsClient, MetricsSettings
from cnibench.records import (
    Measurement,
    ParamValue,
    RunRecord,
    RunStatus,
    summary_scale,
    unit_upper_bound,
)
from cnibench.results import ResultsStore
from cnibench.scenarios.base import Condition, Prepared, Scenario, Verification
from cnibench.scenarios.precision import precision_reached as precision_reached
from cnibench.scenarios.precision import precision_words as precision_words
from cnibench.scenarios.profiles import DEFAULT_MAX_RUNS, Profile
from cnibench.scenarios.usage import host_cpu, host_idle, machine_usage
from cnibench.scenarios.warmup import Settled, settle
from cnibench.signals import signals_deferred

__all__ = [
    "ClusterPool",
    "ConditionResult",
    "MetricSummary",
    "ProgressCallback",
    "RunResult",
    "Runner",
    "host_idle",
    "machine_usage",
]

METRICS_READY_TIMEOUT = 60.0
"""Seconds to wait for a new cluster's Prometheus to scrape every node, and then again for it
to have every node's rates."""
SCRAPE_TIMEOUT = 15.0
"""Seconds to wait after a run for every node's next scrape (fifteen 1 s scrape intervals)."""

ProgressCallback = Callable[[str], None]
"""Called with a short description after each attempted run (drives progress bars)."""


@dataclass(frozen=True)
class RunResult:
    """One attempted repetition.

    Attributes
    ----------
    run_id:
        Identifier within the session.
    repetition:
        0-based repetition index.
    attempt:
        0 for the first attempt, 1.. for retries.
    status:
        ``ok`` or ``failed``; ``warmup`` for a warm-up run (:attr:`ConditionResult.warmup`).
    reason:
        Why it failed (empty when ok).
    measurements:
        Numbers measured (empty when failed).
    evidence:
        Per-run verification observations.
    """

    run_id: str
    repetition: int
    attempt: int
    status: RunStatus
    reason: str
    measurements: tuple[Measurement, ...]
    evidence: Mapping[str, ParamValue] = field(default_factory=dict)


@dataclass(frozen=True)
class MetricSummary:
    """Estimate and 95 % interval of one metric over the ok runs of a condition.

    Attributes
    ----------
    metric, unit:
        What was summarised.
    n:
        Number of ok runs (every one is in the estimate; outlying ones are only flagged).
    estimate:
        :func:`cnibench.stats.summarize_runs`: the geometric mean of the runs when all are
        positive, else their mean; for a yes/no metric (unit ``bool``) the share of yes.
    low, high:
        Its 95 % interval (log-t, t or Clopper-Pearson; NaN when n < 2 except for yes/no).
    flagged:
        Outlying runs (modified z-score beyond 3.5), shown beside the row, never dropped.
    estimator:
        What ``estimate`` is, in words (``"geometric mean"``, ``"mean"``, ``"proportion"``).
    successes:
        Runs that said yes (yes/no metrics; else -1).
    """

    metric: str
    unit: str
    n: int
    estimate: float
    low: float
    high: float
    flagged: int = 0
    estimator: str = "geometric mean"
    successes: int = -1


@dataclass(frozen=True)
class ConditionResult:
    """Everything a condition produced.

    Attributes
    ----------
    scenario, cni, condition:
        What ran.
    verification:
        The set-up verification.
    runs:
        Every attempt, failed ones included.
    session_dir:
        Where the records were written.
    precision_note:
        With ``--precision``: whether the target was reached and after how many runs, or the
        maximum stopped it (``""`` without ``--precision``).
    warmup:
        The warm-up runs made on this condition's set-up before its first measured run, when
        it was the first on a new cluster (:attr:`Runner.warmups`): status ``warmup``, never
        in :attr:`runs`, :meth:`summaries` or any statistic.
    """

    scenario: str
    cni: str
    condition: Condition
    verification: Verification
    runs: tuple[RunResult, ...]
    session_dir: str
    precision_note: str = ""
    warmup: tuple[RunResult, ...] = ()

    @property
    def ok_runs(self) -> tuple[RunResult, ...]:
        """Runs that succeeded (the only ones statistics use)."""
        return tuple(run for run in self.runs if run.status is RunStatus.OK)

    @property
    def verified(self) -> bool:
        """Set-up verified and every ok run's own verification passed."""
        return self.verification.ok and all(
            run.evidence.get("verified", True) is not False for run in self.ok_runs
        )

    def values(self, metric: str) -> list[float]:
        """Values of ``metric`` over the ok runs, in repetition order: one per run, the
        aggregate of a ``--pairs`` run (its per-pair values never count as runs)."""
        return [
            m.value
            for run in self.ok_runs
            for m in run.measurements
            if m.metric == metric and m.pair is None
        ]

    def pair_values(self, metric: str) -> list[float]:
        """Each pair's value of ``metric`` over the ok runs of a ``--pairs`` condition (empty
        without pairs): the spread shown beside the aggregate, never a sample of it."""
        return [
            m.value
            for run in self.ok_runs
            for m in run.measurements
            if m.metric == metric and m.pair is not None
        ]

    def summaries(self) -> list[MetricSummary]:
        """One :class:`MetricSummary` per metric measured in the ok runs: the report's own
        summary (:func:`cnibench.stats.summarize_runs`: every run in, outliers flagged)."""
        units: dict[str, str] = {}
        for run in self.ok_runs:
            for m in run.measurements:
                if m.pair is None:
                    units.setdefault(m.metric, m.unit)
        out = []
        for metric, unit in units.items():
            try:
                summary = stats.summarize_runs(
                    self.values(metric), scale=summary_scale(unit), upper=unit_upper_bound(unit)
                )
            except InsufficientDataError:
                continue
            out.append(
                MetricSummary(
                    metric,
                    unit,
                    summary.n,
                    summary.mean,
                    summary.low,
                    summary.high,
                    flagged=len(summary.outliers),
                    estimator=summary.estimator,
                    successes=summary.successes,
                )
            )
        return out


class ClusterPool:
    """Clusters by spec, provisioned on first use and torn down together (also on Ctrl-C).

    ``notice``, when set, is called with each line of a new cluster's
    :attr:`~cnibench.backends.base.ClusterIdentity.notes` once it is provisioned, and with
    each line the cluster tells later (:meth:`~cnibench.backends.base.ClusterIdentity.listen`),
    each prefixed with the cluster's ``--cni`` label.
    """

    def __init__(self, backend: Backend) -> None:
        self.backend = backend
        self._clusters: dict[str, Cluster] = {}
        self.notice: Callable[[str], None] | None = None

    def get(self, spec: ClusterSpec) -> Cluster:
        """The cluster for ``spec``, provisioning it if needed."""
        cluster = self._clusters.get(spec.key)
        if cluster is None:
            cluster = self.backend.provision(spec)
            self._clusters[spec.key] = cluster
            for line in cluster.notes:
                self._tell(spec.label, line)
            # What the cluster says later (a cluster-wide object about to be created on a
            # cluster cnibench did not create) goes to whoever listens then.
            cluster.listen(functools.partial(self._tell, spec.label))
        return cluster

    def tell(self, cluster: ClusterIdentity, line: str) -> None:
        """Pass ``line`` about ``cluster`` on to whoever listens (:attr:`notice`), prefixed
        with its ``--cni`` label, as the cluster's own lines are."""
        self._tell(cluster.spec.label, line)

    def _tell(self, label: str, line: str) -> None:
        notice = self.notice
        if notice is not None:
            notice(f"{label}: {line}")

    def teardown(self) -> None:
        """Tear every cluster down; errors of one do not stop the others, and neither does
        Ctrl-C or SIGTERM, which is raised once the last one is down (a cluster's own teardown
        defers it only for itself)."""
        errors: list[str] = []
        with signals_deferred():
            while self._clusters:
                _, cluster = self._clusters.popitem()
                try:
                    cluster.teardown()
                except CnibenchError as exc:
                    errors.append(str(exc))
        if errors:
            raise CnibenchError("teardown incomplete: " + "; ".join(errors))

    def __enter__(self) -> ClusterPool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.teardown()


def new_session_id() -> str:
    """Sortable, unique session id such as ``20261122T103500Z-1a2b3c``."""
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    return f"{stamp}-{uuid.uuid4().hex[:6]}"


class _PlacingCluster:
    """The cluster as a scenario's ``prepare`` sees it: every call goes through, and the pods
    it placed are remembered so a set-up that fails half-way leaves none behind."""

    def __init__(self, cluster: Cluster) -> None:
        self._cluster = cluster
        self._placed: list[Endpoint] = []

    def place(self, name: str, **kwargs: Any) -> Endpoint:
        endpoint = self._cluster.place(name, **kwargs)
        self._placed.append(endpoint)
        return endpoint

    def remove_placed(self) -> None:
        """Remove what was placed, newest first; the set-up's own error is the one to report."""
        for endpoint in reversed(self._placed):
            with suppress(CnibenchError):
                self._cluster.remove(endpoint)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._cluster, name)


class Runner:
    """Runs conditions and records their results (see module docstring)."""

    def __init__(
        self,
        pool: ClusterPool,
        store: ResultsStore,
        profile: Profile,
        *,
        progress: ProgressCallback | None = None,
        resource_metrics: bool = True,
        precision: float | None = None,
        max_runs: int = DEFAULT_MAX_RUNS,
        precision_metrics: tuple[str, ...] = (),
    ) -> None:
        self.pool = pool
        self.store = store
        self.profile = profile
        self.progress = progress
        self.resource_metrics = resource_metrics
        self.precision = precision
        self.max_runs = max(max_runs, profile.runs)
        self.precision_metrics = precision_metrics
        self.looks = 1
        """The looks the session plans for the runs it records now (``--until-decided``
        sets it for an interleaved group: :attr:`RunRecord.looks`)."""
        self._environments: set[str] = set()
        self._metrics_checked: set[int] = set()
        self._environment_ids: dict[int, str] = {}
        self._warmed: set[int] = set()
        self.warmups: list[dict[str, Any]] = []
        """One entry per cluster the runner warmed up (JSON): its ``--cni`` label, why
        (:attr:`~cnibench.backends.base.WarmUp.reason`), the settle wait
        (:meth:`~cnibench.scenarios.warmup.Settled.as_json`) and the warm-up runs' ids; each
        is also written as the session's ``warmup-<cluster>.json``."""

    def run_condition(
        self,
        scenario: Scenario,
        cni: ClusterSpec,
        condition: Condition,
        *,
        repetitions: range | None = None,
    ) -> ConditionResult:
        """Prepare, verify, measure and record ``condition`` on the cluster for ``cni`` (a
        ``--cni`` value as the session parsed it; the scenario says which cluster,
        :meth:`Scenario.cluster_spec`).

        ``repetitions`` runs exactly those repetition numbers (one round of an interleaved
        session, :func:`cnibench.session.interleaved_rounds`); by default the profile's runs,
        extended by ``--precision``.

        Raises
        ------
        UnsupportedError
            The cluster lacks a capability the condition needs, or its CNI is configured for
            fewer policy rules than the condition applies (:meth:`Scenario.policy_rules`).
        VerificationError
            The set-up does not do what it claims, or a check of it could not run (recorded
            as a failed run first).
        SetupError
            The set-up could not be made, e.g. a pod never became Ready (recorded as a failed
            run first; what was placed is removed).
        """
        cluster = self.pool.get(scenario.cluster_spec(cni, condition))
        missing = scenario.required_capabilities(condition) - cluster.capabilities
        if missing:
            names = ", ".join(sorted(c.value for c in missing))
            hints = [h for h in (cluster.capability_hint(c) for c in sorted(missing)) if h]
            how = f" ({'; '.join(hints)})" if hints else ""
            raise UnsupportedError(f"{cluster.backend}/{cni.label} lacks {names}{how}")
        rules = scenario.policy_rules(condition)
        limit = cluster.policy_rule_limit if rules else None
        if limit is not None and rules > limit.rules:
            raise UnsupportedError(
                f"{cluster.backend}/{cni.label}: a policy of {rules} rules is more than its CNI"
                f" is configured for ({limit.reason}); cnibench never changes a CNI's settings"
            )
        self._record_environment(cluster)
        if self.resource_metrics and scenario.resource_metrics:
            self._metrics_ready(cluster)
        with self._prepared(scenario, cluster, condition) as prepared:
            try:
                verification = scenario.verify(cluster, prepared, condition)
            except ToolError as exc:
                # A probe that cannot run proves nothing: the condition is not verified, and
                # the session goes on with the next one instead of ending here.
                verification = Verification(False, f"a check could not run: {exc}")
            if not verification.ok:
                self._write_failed(
                    cluster, scenario, condition, 0, f"verification failed: {verification.detail}"
                )
                raise VerificationError(
                    f"{scenario.name}/{condition.id} on {cni.label}: {verification.detail}"
                )
            self.store.write_json(
                f"verification-{scenario.name}-{cluster.spec.slug}-{condition.id}",
                {"ok": verification.ok, "detail": verification.detail, **verification.evidence},
            )
            warmup = self._warm_up(scenario, cluster, prepared, condition)
            if repetitions is not None:
                runs = [
                    run
                    for repetition in repetitions
                    for run in self._repetition(scenario, cluster, prepared, condition, repetition)
                ]
                precision_note = ""
            else:
                runs, precision_note = self._measured_runs(scenario, cluster, prepared, condition)
            if precision_note:
                self.store.write_json(
                    f"precision-{scenario.name}-{cluster.spec.slug}-{condition.id}",
                    {"target": self.precision, "max_runs": self.max_runs, "note": precision_note},
                )
        return ConditionResult(
            scenario=scenario.name,
            cni=cni.label,
            condition=condition,
            verification=verification,
            runs=tuple(runs),
            session_dir=str(self.store.session_dir),
            precision_note=precision_note,
            warmup=warmup,
        )

    def _warm_up(
        self, scenario: Scenario, cluster: Cluster, prepared: Prepared, condition: Condition
    ) -> tuple[RunResult, ...]:
        """Once per cluster, on the first condition's set-up and before its first measured
        run: what the cluster's :attr:`~cnibench.backends.base.Monitoring.warm_up` asks, a
        bounded wait for its CPU to settle, then the warm-up runs (one attempt each, status
        ``warmup`` whether they succeed or fail; a failed one is not retried). They measure on a
        copy of the set-up's state, so what the set-up hands its first run (a time to effect,
        :func:`~cnibench.scenarios.effect.take_effect`) still goes to the first measured one."""
        if id(cluster) in self._warmed:
            return ()
        self._warmed.add(id(cluster))
        wanted = cluster.warm_up
        if not wanted.needed:
            return ()
        settled = None
        if wanted.settle_seconds > 0:
            settled = settle(
                lambda: cluster.resource_usage(reset_peak=True), bound=wanted.settle_seconds
            )
        runs = tuple(
            self._attempt(
                scenario,
                cluster,
                dataclasses.replace(prepared, expected=dict(prepared.expected)),
                condition,
                -1,
                n,
                warmup=True,
                settled=settled,
            )
            for n in range(wanted.runs)
        )
        entry: dict[str, Any] = {
            "cni": cluster.spec.label,
            "reason": wanted.reason,
            "scenario": scenario.name,
            "condition": condition.id,
            "settle": None if settled is None else settled.as_json(),
            "runs": [run.run_id for run in runs],
        }
        self.warmups.append(entry)
        self.store.write_json(f"warmup-{cluster.spec.slug}", entry)
        said = [] if settled is None else [settled.line()]
        if runs:
            said.append(f"{len(runs)} warm-up run(s) of {condition.id} recorded, never counted")
        self.pool.tell(cluster, f"{wanted.reason}: {'; '.join(said)}")
        return runs

    def _measured_runs(
        self, scenario: Scenario, cluster: Cluster, prepared: Prepared, condition: Condition
    ) -> tuple[list[RunResult], str]:
        """The profile's repetitions, then, with ``--precision``, one more at a time until
        every primary metric's interval is narrow enough or ``max_runs`` is reached. The rule
        looks at interval widths only, never at a difference or a p-value, so stopping cannot
        bias a comparison towards significance."""
        runs: list[RunResult] = []
        repetition = 0
        while True:
            runs += self._repetition(scenario, cluster, prepared, condition, repetition)
            repetition += 1
            if repetition < self.profile.runs:
                continue
            if self.precision is None:
                return runs, ""
            judged = self.precision_metrics or scenario.primary_metrics
            reached, widths = precision_reached(runs, judged, self.precision)
            if reached or repetition >= self.max_runs:
                return runs, precision_words(reached, widths, self.precision, repetition)

    @contextmanager
    def _prepared(
        self, scenario: Scenario, cluster: Cluster, condition: Condition
    ) -> Iterator[Prepared]:
        placing = _PlacingCluster(cluster)
        try:
            prepared = scenario.prepare(cast(Cluster, placing), condition, self.profile)
        except ProvisioningError as exc:
            # One condition that cannot be set up (a pod never Ready, a policy rejected) is
            # recorded as failed with its reason; the cluster stays usable for the next one.
            placing.remove_placed()
            self._write_failed(cluster, scenario, condition, 0, f"set-up failed: {exc}")
            raise SetupError(
                f"{scenario.name}/{condition.id} on {cluster.spec.label}: set-up failed: {exc}"
            ) from exc
        try:
            yield prepared
        finally:
            scenario.cleanup(cluster, prepared)

    def _repetition(
        self,
        scenario: Scenario,
        cluster: Cluster,
        prepared: Prepared,
        condition: Condition,
        repetition: int,
    ) -> list[RunResult]:
        attempts: list[RunResult] = []
        for attempt in range(self.profile.retries + 1):
            run = self._attempt(scenario, cluster, prepared, condition, repetition, attempt)
            attempts.append(run)
            if run.status is RunStatus.OK:
                break
        if self.progress is not None:
            self.progress(f"{scenario.name} {cluster.spec.label} {condition.id} #{repetition}")
        return attempts

    def _attempt(
        self,
        scenario: Scenario,
        cluster: Cluster,
        prepared: Prepared,
        condition: Condition,
        repetition: int,
        attempt: int,
        *,
        warmup: bool = False,
        settled: Settled | None = None,
    ) -> RunResult:
        """One attempt, recorded. With ``warmup`` a warm-up run: status ``warmup`` whether it
        succeeds or fails, and the wait before it (``settled``) among its records
        (:meth:`Settled.measurements`)."""
        run_id = f"{scenario.name}-{cluster.spec.slug}-{condition.id}-r{repetition}a{attempt}"
        if warmup:
            run_id = f"{scenario.name}-{cluster.spec.slug}-{condition.id}-warmup{attempt}"
        waited = [] if settled is None else settled.measurements()
        resources = self.resource_metrics and scenario.resource_metrics
        before = cluster.resource_usage(reset_peak=True) if resources else {}
        host_before = host_cpu(cluster)
        started = time.time()
        raw: Mapping[str, str] = {}
        after: Mapping[str, ResourceUsage] | None = None  # the run's closing reading
        try:
            output = scenario.measure(cluster, prepared, condition, self.profile, repetition)
            host_after = host_cpu(cluster)
            raw = output.raw
            ended = time.time()
            after = cluster.resource_usage() if before else {}
            measurements = list(output.measurements)
            measurements += host_idle(host_before, host_after)
            if resources:
                measurements += machine_usage(before, after, ended - started)
                measurements += self._resources(cluster, started, ended)
            # After the run's closing readings: what the changes cost is in no run's window.
            changes = scenario.time_changes(cluster, prepared, condition)
            measurements += changes.measurements
            raw = {**raw, **changes.raw}
            evidence: dict[str, ParamValue] = {}
            measurements += waited
            if output.verification is not None:
                evidence = {"verified": output.verification.ok, **output.verification.evidence}
                if not output.verification.ok:
                    raise VerificationError(output.verification.detail)
        except CnibenchError as exc:
            reason = f"{type(exc).__name__}: {exc}"
            # A run that failed before its closing reading still has the agents read (a
            # reading taken already compared them).
            unclosed = bool(before) and after is None
            if unclosed and not isinstance(exc, AgentRestartedError | VerificationError):
                reason = self._agent_first(cluster, reason)
            failed_raw = dict(raw)
            output_text = getattr(exc, "output", "")
            if output_text:
                failed_raw["tool-output.txt"] = output_text
            # A tool failure does not undo the set-up's verification; a failed proof does.
            verified = not isinstance(exc, VerificationError)
            status = RunStatus.WARMUP if warmup else RunStatus.FAILED
            self._write(
                cluster,
                scenario,
                condition,
                repetition,
                run_id,
                started,
                waited,
                reason,
                failed_raw,
                verified=verified,
                status=status,
            )
            return RunResult(run_id, repetition, attempt, status, reason, tuple(waited))
        if evidence:
            raw = {**raw, "evidence.json": json.dumps(evidence, indent=2)}
        if settled is not None:
            raw = {**raw, "settle.json": json.dumps(settled.as_json(), indent=2)}
        status = RunStatus.WARMUP if warmup else RunStatus.OK
        self._write(
            cluster,
            scenario,
            condition,
            repetition,
            run_id,
            started,
            measurements,
            "",
            raw,
            verified=True,
            status=status,
        )
        return RunResult(run_id, repetition, attempt, status, "", tuple(measurements), evidence)

    @staticmethod
    def _agent_first(cluster: Monitoring, reason: str) -> str:
        """The reason of a failed run, led by the CNI agent's restart when one happened during
        it: a tool that lost its connection then is a consequence, not the cause."""
        try:
            cluster.resource_usage()
        except AgentRestartedError as cause:
            return f"{type(cause).__name__}: {cause}; the tool then failed: {reason}"
        except CnibenchError:
            pass
        return reason

    def _resources(self, cluster: Cluster, start: float, end: float) -> list[Measurement]:
        """Host-wide CPU and RAM (mean over nodes' exporters) plus each node's receive rate
        over the run window, from Prometheus."""
        client = MetricsClient(
            cluster.prometheus_url(),
            settings=MetricsSettings(device_regex=cluster.metrics_device_regex),
        )
        # The scrape under way when the run ended may be stored up to an interval later.
        client.wait_for_next_scrape([node.name for node in cluster.nodes], timeout=SCRAPE_TIMEOUT)
        return self._per_node_resources(client, cluster, start, end)

    def _metrics_ready(self, cluster: Cluster) -> None:
        """Once per cluster: wait until every node-exporter is scraped and rates exist."""
        if id(cluster) in self._metrics_checked:
            return
        client = MetricsClient(cluster.prometheus_url())
        # One target per machine: roles sharing a node (same-node placement) share its exporter.
        machines = len({node.name for node in cluster.nodes})
        client.wait_until_ready(METRICS_READY_TIMEOUT, expected_targets=machines)
        # A run's rates (irate) need two scrapes within their window from its first moment.
        distinct = list(dict.fromkeys(node.name for node in cluster.nodes))
        client.wait_for_rates(distinct, timeout=METRICS_READY_TIMEOUT)
        self._metrics_checked.add(id(cluster))

    def _per_node_resources(
        self, client: MetricsClient, cluster: Cluster, start: float, end: float
    ) -> list[Measurement]:
        # A node holding several roles (same-node placement) is named after all of them.
        names: dict[str, str] = {}
        for node in cluster.nodes:
            held = names.get(node.name)
            names[node.name] = f"{held}+{node.role.value}" if held else node.role.value
        per_node = client.run_metrics(start, max(end, start + 1.0), instances=names)
        out = [m for m in per_node if m.metric.startswith("receive_rate@")]
        for metric, unit in (("cpu", "%"), ("ram", "MB")):
            values = [m.value for m in per_node if m.metric.startswith(f"{metric}@")]
            if values:
                out.append(Measurement(metric, sum(values) / len(values), unit))
        return out

    def _record_environment(self, cluster: ClusterIdentity) -> str:
        """Write the cluster's fingerprint once per session; return its id."""
        known = self._environment_ids.get(id(cluster))
        if known is not None:
            return known
        env = cluster.environment()
        if env.environment_id not in self._environments:
            self.store.write_environment(env)
            self._environments.add(env.environment_id)
        self._environment_ids[id(cluster)] = env.environment_id
        return env.environment_id

    def _write_failed(
        self,
        cluster: Cluster,
        scenario: Scenario,
        condition: Condition,
        repetition: int,
        reason: str,
    ) -> None:
        run_id = f"{scenario.name}-{cluster.spec.slug}-{condition.id}-unverified"
        self._write(
            cluster,
            scenario,
            condition,
            repetition,
            run_id,
            time.time(),
            [],
            reason,
            {},
            verified=False,
            status=RunStatus.FAILED,
        )

    def _write(
        self,
        cluster: Cluster,
        scenario: Scenario,
        condition: Condition,
        repetition: int,
        run_id: str,
        started: float,
        measurements: Sequence[Measurement],
        reason: str,
        raw: Mapping[str, str],
        *,
        verified: bool,
        status: RunStatus,
    ) -> None:
        """One run's records: one per measurement, after a row ``run`` with the reason when
        it failed (a failed warm-up keeps its settle wait's records too)."""
        failed = bool(reason)
        base = RunRecord(
            session_id=self.store.session_id,
            run_id=run_id,
            time=datetime.fromtimestamp(started, UTC).isoformat(),
            backend=cluster.backend,
            provider=cluster.provider,
            cni=cluster.spec.label,
            cni_version=cluster.cni_version,
            scenario=scenario.name,
            condition=condition.id,
            parameters=dict(condition.parameters),
            repetition=repetition,
            metric="run",
            value=math.nan,
            unit="",
            verified=verified,
            status=status,
            reason=reason,
            environment_id=self._record_environment(cluster),
            options={"encryption": cluster.spec.encryption, **cluster.spec.options},
            looks=self.looks,
        )
        records = [base] if failed else []
        records += [
            dataclasses.replace(base, metric=m.metric, value=m.value, unit=m.unit, pair=m.pair)
            for m in measurements
        ]
        self.store.write_run(run_id, records, raw)
