"""The session itself (:class:`BenchSession`): clusters pooled, the plan run through its one
door, results stored, progress reported, also on Ctrl-C."""

from __future__ import annotations

import dataclasses
import enum
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cnibench import stats
from cnibench.backends.base import ClusterSpec
from cnibench.errors import ConfigError, SetupError, UnsupportedError, VerificationError
from cnibench.results import ResultsStore
from cnibench.scenarios import Condition, Scenario, build_scenarios, scenario_named
from cnibench.scenarios.runner import (
    ClusterPool,
    ConditionResult,
    Runner,
    precision_reached,
    precision_words,
)
from cnibench.session.choice import BackendChoice, choose_backend, validate_cnis
from cnibench.session.config import CniRequest, SessionConfig
from cnibench.session.plan import (
    NAMED_SKIPS,
    GroupDesign,
    PlannedCondition,
    PlannedRun,
    RunOrder,
    block_rounds,
    plan_conditions,
    rotated,
    run_design,
    run_key,
)
from cnibench.session.until import Budget, undecided_conditions
from cnibench.signals import sigterm_raises_interrupt


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
    REFUSED = "refused"
    """Conditions the backend makes no cluster for (:meth:`Backend.unsupported
    <cnibench.backends.base.Backend.unsupported>`), skipped before any cluster is made;
    ``text`` is their skip line (:meth:`Skipped.line`), ``runs`` the repetitions they had.
    Sent right after :attr:`PLANNED`, one per scenario, CNI and reason."""
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
        if len(self.conditions) <= NAMED_SKIPS:
            which += f": {', '.join(self.conditions)}"
        return f"skipped {self.scenario}/{self.cni} ({which}): {self.reason}"


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
        self.backend.preflight(self.specs)
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
        # --until-decided: what each interleaved group's looks found.
        self._looks: list[dict[str, Any]] = []

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

        A condition the backend makes no cluster for (:meth:`Backend.unsupported
        <cnibench.backends.base.Backend.unsupported>`, e.g. a setting an existing cluster
        would have to change) is skipped before any cluster is made, and said at once
        (:attr:`EventKind.REFUSED`); one the cluster cannot run is skipped when its cluster
        is there (with the reason); one that cannot be set up or verified is recorded as not
        proven and the session goes on with the next; a failed repetition is kept, flagged,
        and never averaged in.

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
        # Conditions the backend makes no cluster for are skipped here, before any is made.
        skipped: dict[tuple[str, str, str], list[str]] = {}
        for p in plan:
            refusal = self.backend.unsupported(p.scenario.cluster_spec(p.spec, p.condition))
            if refusal:
                skipped.setdefault((p.scenario.name, p.cni, refusal), []).append(p.condition.id)
        refused = {(name, cni, c) for (name, cni, _), ids in skipped.items() for c in ids}
        runnable = [p for p in plan if run_key(p) not in refused]
        design = run_design(
            runnable,
            runs,
            sequential=not interleave,
            across_clusters=self.backend.clusters_coexist,
        )
        tell = progress or (lambda event: None)
        merged: dict[tuple[str, str, str], ConditionResult] = {}
        given_up: set[tuple[str, str, str]] = set()
        not_proven: list[str] = []
        ran: list[tuple[int, PlannedRun]] = []

        def one(round_number: int, planned_run: PlannedRun) -> None:
            scenario, cni, condition = planned_run.scenario, planned_run.cni, planned_run.condition
            key = run_key(planned_run)
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

        planned_per = Counter((p.scenario.name, p.cni) for p in plan)
        tell(ProgressEvent(EventKind.PLANNED, f"{len(plan)} conditions", len(plan) * runs))
        for (name, cni, reason), ids in skipped.items():
            line = Skipped(name, cni, reason, tuple(ids), planned_per[(name, cni)]).line()
            tell(ProgressEvent(EventKind.REFUSED, line, len(ids) * runs))
        for line in (design.shared_line(), design.sequential_line()):
            if line:
                tell(ProgressEvent(EventKind.DESIGN, line))
        self.runner.progress = lambda text: tell(ProgressEvent(EventKind.RUN, text, 1))
        self.pool.notice = lambda text: tell(ProgressEvent(EventKind.CLUSTER, text))
        budget = Budget(self.config.budget)
        try:
            for block in design.running_blocks:
                # A block's groups are all interleaved or it is one group: they share a design.
                until = self.config.until_decided and block[0].order is RunOrder.INTERLEAVED
                schedule = (
                    stats.look_schedule(max(2, runs), max(self.runner.max_runs, runs, 2))
                    if until
                    else ()
                )
                self.runner.looks = len(schedule) if until else 1
                budget.start_group()
                for round_number, planned_run in block_rounds(block):
                    one(round_number, planned_run)
                for group in block:
                    if group.order is RunOrder.INTERLEAVED and self.config.precision is not None:
                        self._rounds_to_precision(group, merged, given_up, one)
                if until:
                    pace = budget.round_seconds(runs)
                    self._looks += [
                        self._rounds_until_decided(
                            block, schedule, pace, budget, given_up, one, tell
                        )
                    ]
        finally:
            self.runner.progress = None
            self.runner.looks = 1
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
            self.store.write_json(
                "design",
                {
                    "groups": self._designs,
                    "rounds": self._rounds,
                    "looks": self._looks,
                    "warmups": self.runner.warmups,
                },
            )
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
            return precision_reached(merged[run_key(p)].runs, metrics, target)

        def measured(p: PlannedRun) -> bool:
            return run_key(p) in merged and run_key(p) not in given_up

        round_number = self.config.profile.runs
        while round_number < self.runner.max_runs:
            open_ = [p for p in members if measured(p) and not judged(p)[0]]
            if not open_:
                break
            for p in rotated(open_, round_number):
                one(round_number, p)
            round_number += 1
        for p in filter(measured, members):
            reached, widths = judged(p)
            result = merged[run_key(p)]
            note = precision_words(
                reached, widths, target, len({run.repetition for run in result.runs})
            )
            merged[run_key(p)] = dataclasses.replace(result, precision_note=note)
            slug = p.scenario.cluster_spec(p.spec, p.condition).slug
            self.store.write_json(
                f"precision-{p.scenario.name}-{slug}-{p.condition.id}",
                {"target": target, "max_runs": self.runner.max_runs, "note": note},
            )

    def _rounds_until_decided(
        self,
        block: Sequence[GroupDesign],
        schedule: Sequence[int],
        round_seconds: float,
        budget: Budget,
        given_up: set[tuple[str, str, str]],
        one: Callable[[int, PlannedRun], None],
        tell: ProgressListener,
    ) -> dict[str, Any]:
        """``--until-decided`` on an interleaved block (one group, or the groups of one
        scenario on clusters that share their rounds) whose profile's rounds have run: at each
        look of ``schedule`` ask the verdict which conditions still take part in an undecided
        contrast, and run rounds among those until the next look, in turns as the block's
        first rounds ran; stop when none is left, at the last look, or when the next look's
        rounds would end past ``--budget`` (about ``round_seconds`` a round). Returns what
        ``design.json`` records of it."""
        members = list({run_key(p): p for _, p in block_rounds(block)}.values())
        scenario = block[0].scenario
        cnis = ", ".join(group.cni for group in block)
        alone = len(block) == 1

        def label(p: PlannedRun) -> str:
            return p.condition.id if alone else f"{p.cni}/{p.condition.id}"

        looks: list[dict[str, Any]] = []
        stopped = ""
        for index, at in enumerate(schedule):
            look = undecided_conditions(
                self.store.session_dir,
                scenario,
                [(p.cni, p.condition.id) for p in members],
                rounds=at,
                scenarios=self.scenarios,
            )
            open_ = [
                p
                for p in members
                if (p.cni, p.condition.id) in look.undecided and run_key(p) not in given_up
            ]
            looks.append(
                {
                    "rounds": at,
                    "undecided": sorted(
                        label(p) for p in members if (p.cni, p.condition.id) in look.undecided
                    ),
                    "contrasts": list(look.contrasts),
                    "saturated": look.saturated,
                }
            )
            if not open_:
                stopped = "every contrast decided" + (
                    f" but {look.saturated} set aside: saturated runs" if look.saturated else ""
                )
                break
            if index + 1 == len(schedule):
                stopped = f"--max-runs {at} reached"
                break
            following = schedule[index + 1]
            share = len(open_) / max(len(members), 1)
            if not budget.allows(following - at, round_seconds * share):
                stopped = f"--budget: {following - at} more rounds would end past it"
                break
            tell(
                ProgressEvent(
                    EventKind.DESIGN,
                    f"{scenario} {cnis}: {len(look.contrasts)} contrast(s) undecided"
                    f" after {at} rounds; {following - at} more rounds of"
                    f" {', '.join(label(p) for p in open_)}",
                )
            )
            extra = tuple(
                dataclasses.replace(
                    group,
                    rounds=tuple(
                        (n, p)
                        for n in range(at, following)
                        for p in rotated([q for q in open_ if q.cni == group.cni], n)
                    ),
                )
                for group in block
            )
            for round_number, p in block_rounds(extra):
                one(round_number, p)
        looked = ", ".join(str(entry["rounds"]) for entry in looks)
        tell(
            ProgressEvent(
                EventKind.DESIGN,
                f"{scenario} {cnis}: until decided, looked after {looked} rounds"
                f" (each look at 5 %/{len(schedule)}); stopped: {stopped}",
            )
        )
        return {
            "scenario": scenario,
            "cni": cnis,
            "schedule": list(schedule),
            "looks": looks,
            "stopped": stopped,
        }

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
