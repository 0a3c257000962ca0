"""What the verdict compares: the contrasts the scenarios declare, as far as the results
hold both sides of each (one step of :mod:`cnibench.report.verdict`).

What is compared
----------------
Only what the scenarios declare (:mod:`cnibench.scenarios.base`), never every pair:

- *feature contrasts* (:attr:`Scenario.contrasts`): within one CNI, each treatment condition
  (e.g. ``gateway: on``) against the control condition whose recorded parameters equal its own
  in everything but the feature (:meth:`Contrast.is_control_of`);
- *CNI contrasts* (:attr:`Scenario.compares_cnis`): on each condition, every CNI against one
  reference CNI, the first one in the results (the first ``--cni``) unless ``reference`` names
  another; conditions are matched by their full parameters;
- *splits* (:attr:`Scenario.compares_shares_with_weights`, ``split``): one test per split
  condition of its requests per backend, pooled over runs, against the configured weights.

Feature and CNI contrasts are made for every :attr:`Scenario.primary_metrics` that both sides
recorded.
"""

from __future__ import annotations

import enum
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

import pandas as pd

from cnibench.backends.base import ClusterSpec
from cnibench.errors import ConfigError
from cnibench.records import ParamValue
from cnibench.report.configs import (
    CONTROL_VALUES,
    INSTRUMENT_FACTOR,
    Configuration,
    configuration,
    differing_factors,
    factor_words,
    instrumented,
)
from cnibench.report.data import ok_runs
from cnibench.report.derived import (
    AGENT_METRICS,
    HOST_WIDE,
    NODE_SUM,
    WORK_UNITS,
    host_wide_replaced,
    with_derived_metrics,
)
from cnibench.report.verdict.formatting import percent_text
from cnibench.scenarios import SCENARIOS
from cnibench.scenarios.base import OTHER_THAN_CONTROL, Condition, Contrast, Scenario


class ContrastKind(enum.StrEnum):
    """What a contrast compares."""

    FEATURE = "feature"
    """A feature against its own control, same CNI, everything else equal."""
    CNI = "cni"
    """A CNI against the reference of its group of comparable configurations (every
    data-path factor equal, :mod:`cnibench.report.configs`) on the same condition."""
    OPTION = "option"
    """One data-path option of a CNI against its default (e.g. kube-proxy nftables vs
    iptables, ``napi=threaded`` vs inline), same CNI, everything else equal."""
    WEIGHTS = "weights"
    """A split's observed requests per backend, pooled over runs, against its weights."""
    OUTCOME = "outcome"
    """A yes/no outcome (unit ``bool``) that no contrast covers, e.g. priority's
    ``reachable``: stated as ``k/n`` with its Clopper-Pearson interval, not tested."""


@dataclass(frozen=True)
class PlannedContrast:
    """One contrast the results allow, before any statistics.

    Attributes
    ----------
    scenario, metric:
        Scenario name and the primary metric compared.
    kind:
        :class:`ContrastKind`.
    feature:
        The feature (``"gateway"``), the CNI pair (``"routed vs vxlan"``) or ``"shares"``
        (a split) in words.
    cni, control_cni:
        CNI of the treatment and of the control (equal except for CNI contrasts).
    treatment, control:
        Condition ids; for weights ``control`` is ``"configured weights"``.
    treatment_parameters:
        Recorded parameters of the treatment condition (JSON text, sorted keys).
    control_parameters:
        Those of the control condition; ``""`` for weights.
    context:
        What else the two conditions share or how they differ, e.g.
        ``"rules 1000 vs 0; engine=iptables, placement=cross-node"`` (``""`` when nothing).
    weights:
        The configured weights as JSON, normalised to shares (splits only; ``""`` otherwise).
    """

    scenario: str
    kind: ContrastKind
    feature: str
    cni: str
    control_cni: str
    treatment: str
    control: str
    treatment_parameters: str
    control_parameters: str
    context: str
    metric: str
    weights: str = ""

    @property
    def label(self) -> str:
        """How a verdict line names the contrast, e.g. ``"egress gateway on vxlan"``."""
        if self.kind is ContrastKind.CNI:
            head = f"{self.scenario} {self.cni} vs reference {self.control_cni}"
        elif self.kind is ContrastKind.OPTION:
            head = f"{self.scenario} {self.feature} on {self.cni.partition(':')[0]}"
        elif self.kind is ContrastKind.OUTCOME:
            head = f"{self.scenario} {self.treatment} on {self.cni}"
        elif self.kind is ContrastKind.WEIGHTS:
            configured = ", ".join(
                f"{name} {percent_text(share)}" for name, share in json.loads(self.weights).items()
            )
            head = f"{self.scenario} shares vs configured {configured} on {self.cni}"
        else:
            head = f"{self.scenario} {self.feature} on {self.cni}"
        return f"{head} ({self.context})" if self.context else head


# --------------------------------------------------------------------------------------------
# Planning: which conditions the declarations pair up in these results
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Condition:
    cni: str
    condition: str
    parameters_json: str
    parameters: Mapping[str, ParamValue]
    metrics: frozenset[str]
    config: Configuration


def usable_rows(df: pd.DataFrame) -> pd.DataFrame:
    rows = ok_runs(with_derived_metrics(df))
    kept: pd.DataFrame = rows[rows["verified"].astype(bool)]
    return kept


def _configurations(rows: pd.DataFrame) -> dict[str, Configuration]:
    """Each CNI label's data-path factors, from its records' backend and options (or, for
    frames without them, from the label itself)."""
    out: dict[str, Configuration] = {}
    has_options = "options" in rows.columns
    has_backend = "backend" in rows.columns
    for cni, group in rows.groupby("cni", sort=False):
        label = str(cni)
        first = group.iloc[0]
        backend = str(first["backend"]) if has_backend else ""
        options = first["options"] if has_options else None
        if not isinstance(options, str) or not options:
            options = json.dumps(dict(ClusterSpec.from_label(label).options))
        out[label] = configuration(label, backend=backend, options=options)
    return out


def _conditions(
    rows: pd.DataFrame, scenario: str, configs: Mapping[str, Configuration]
) -> list[_Condition]:
    """Measured conditions of ``scenario`` in order of first appearance, per CNI."""
    mine = rows[rows["scenario"] == scenario]
    out = []
    for (cni, condition, parameters), group in mine.groupby(
        ["cni", "condition", "parameters"], sort=False
    ):
        try:
            loaded = json.loads(str(parameters))
        except json.JSONDecodeError as exc:
            raise ConfigError(
                f"{scenario}/{cni}/{condition}: parameters are not JSON ({exc.msg})"
            ) from None
        if not isinstance(loaded, dict):
            raise ConfigError(f"{scenario}/{cni}/{condition}: parameters are not a JSON object")
        out.append(
            _Condition(
                str(cni),
                str(condition),
                str(parameters),
                loaded,
                frozenset(str(m) for m in group["metric"]),
                configs[str(cni)],
            )
        )
    return out


def reference_cni(df: pd.DataFrame, reference: str | None = None) -> str:
    """The CNI every other CNI is compared with.

    Parameters
    ----------
    df:
        Tidy results (:func:`cnibench.results.load_results`).
    reference:
        A CNI of the results; ``None`` takes the one measured first (``cnibench run`` measures
        CNIs in ``--cni`` order, so this is the first ``--cni``).

    Returns
    -------
    str
        The reference CNI.

    Raises
    ------
    ConfigError
        ``reference`` is not a CNI of the results, or there are no results.
    """
    if df.empty or "cni" not in df.columns:
        raise ConfigError("no results: there is no CNI to take as the reference")
    ordered = df.sort_values(["time", "run_id"], kind="stable") if "time" in df.columns else df
    cnis = [str(c) for c in dict.fromkeys(ordered["cni"])]
    if reference is None:
        return cnis[0]
    if reference not in cnis:
        raise ConfigError(
            f"reference CNI {reference!r} is not in the results: choose one of {', '.join(cnis)}"
        )
    return reference


def _shown(value: ParamValue) -> str:
    return str(value)


def _feature_context(contrast: Contrast, treatment: _Condition, control: _Condition) -> str:
    differing = [
        f"{key} {_shown(treatment.parameters[key])} vs {_shown(control.parameters[key])}"
        for key, wanted in contrast.treatment.items()
        if wanted is OTHER_THAN_CONTROL
    ]
    fixed = set(contrast.treatment) | set(contrast.control)
    shared = [
        f"{key}={_shown(value)}" for key, value in treatment.parameters.items() if key not in fixed
    ]
    return "; ".join(part for part in (", ".join(differing), ", ".join(shared)) if part)


def _all_context(parameters: Mapping[str, ParamValue], *, leave_out: Iterable[str] = ()) -> str:
    skipped = set(leave_out)
    return ", ".join(f"{k}={_shown(v)}" for k, v in parameters.items() if k not in skipped)


def _resource(metric: str) -> bool:
    """CPU and memory figures (host-wide, per node, per agent, per unit of work): what an
    instrumented configuration may state."""
    return (
        metric in HOST_WIDE
        or metric.startswith(("cpu@", "ram@"))
        or metric in {name for name, *_ in WORK_UNITS}
    )


def _compared_metrics(
    scenario: Scenario,
    treatment: _Condition,
    control: _Condition,
    *,
    instrument_contrast: bool = False,
) -> list[str]:
    """The metrics a contrast of these two conditions states, in order: the scenario's
    primary metrics that are no function of another (:attr:`Scenario.dependent_metrics`),
    then where the work went (:mod:`cnibench.report.derived`), then host-wide CPU/RAM only
    where no per-node or per-agent figure of that resource exists. With the per-node CPU
    instrument on a side, only CPU and memory (unless the contrast is the instrument's own)."""
    declared = [m for m in scenario.primary_metrics if m not in HOST_WIDE]
    work = [NODE_SUM, *(name for name, *_ in WORK_UNITS), *AGENT_METRICS]
    host = [m for m in scenario.primary_metrics if m in HOST_WIDE]
    both = treatment.metrics & control.metrics
    dependent = set(scenario.dependent_metrics)
    measured_instrumented = instrumented(treatment.config) or instrumented(control.config)
    out = []
    for metric in dict.fromkeys([*declared, *work, *host]):
        if metric not in both or metric in dependent:
            continue
        if host_wide_replaced(metric, treatment.metrics | control.metrics):
            continue
        if measured_instrumented and not instrument_contrast and not _resource(metric):
            continue
        out.append(metric)
    return out


def _instrument_note(scenario: Scenario, condition: _Condition, notes: list[str]) -> None:
    if not instrumented(condition.config):
        return
    moved = [
        m
        for m in scenario.primary_metrics
        if not _resource(m) and m in condition.metrics and m not in scenario.dependent_metrics
    ]
    if not moved:
        return
    note = (
        f"{scenario.name} on {condition.cni}: {', '.join(moved)} not compared (napi=threaded,"
        " the per-node CPU instrument, moves throughput and latency: they are stated on a"
        " configuration without it, and this one states CPU and memory only)"
    )
    if note not in notes:
        notes.append(note)


def _feature_contrasts(
    scenario: Scenario, conditions: Sequence[_Condition], notes: list[str]
) -> list[PlannedContrast]:
    planned = []
    for cni in dict.fromkeys(c.cni for c in conditions):
        mine = [c for c in conditions if c.cni == cni]
        for contrast in scenario.contrasts:
            for treatment in mine:
                if not contrast.is_treatment(treatment.parameters):
                    continue
                controls = [
                    c for c in mine if contrast.is_control_of(c.parameters, treatment.parameters)
                ]
                if len(controls) != 1:
                    why = "no control condition" if not controls else "more than one control"
                    notes.append(
                        f"{scenario.name} {contrast.feature} on {cni}: {treatment.condition}"
                        f" not compared ({why} with everything else equal in these results)"
                    )
                    continue
                control = controls[0]
                _instrument_note(scenario, treatment, notes)
                planned += _on_metrics(
                    scenario,
                    ContrastKind.FEATURE,
                    contrast.feature,
                    treatment,
                    control,
                    _feature_context(contrast, treatment, control),
                    _compared_metrics(scenario, treatment, control),
                )
    return planned


def _on_metrics(
    scenario: Scenario,
    kind: ContrastKind,
    feature: str,
    treatment: _Condition,
    control: _Condition,
    context: str,
    metrics: Sequence[str],
) -> list[PlannedContrast]:
    """One contrast per metric."""
    return [
        PlannedContrast(
            scenario.name,
            kind,
            feature,
            treatment.cni,
            control.cni,
            treatment.condition,
            control.condition,
            treatment.parameters_json,
            control.parameters_json,
            context,
            metric,
        )
        for metric in metrics
    ]


def _key(parameters: Mapping[str, ParamValue]) -> str:
    return json.dumps(dict(parameters), sort_keys=True)


def _groups(
    scenario: str, configs: Sequence[Configuration], reference: str
) -> list[tuple[Configuration, list[Configuration]]]:
    """Comparable configurations (every data-path factor of ``scenario`` equal), each group
    with its reference: ``reference`` where it is in the group, else the first measured."""
    groups: dict[str, list[Configuration]] = {}
    for config in configs:
        factors = json.dumps(config.on_path(scenario), sort_keys=True)
        groups.setdefault(factors, []).append(config)
    out = []
    for members in groups.values():
        chosen = next((c for c in members if c.label == reference), members[0])
        out.append((chosen, [c for c in members if c is not chosen]))
    return out


def _cni_contrasts(
    scenario: Scenario,
    conditions: Sequence[_Condition],
    reference: str,
    notes: list[str],
    references: dict[str, str],
) -> list[PlannedContrast]:
    """Each CNI against the reference of its group of comparable configurations, condition by
    condition; pairs of configurations that differ in more than the CNI are named in
    ``notes`` as confounded, once per pair."""
    configs = list({c.cni: c.config for c in conditions}.values())
    planned: list[PlannedContrast] = []
    groups = _groups(scenario.name, configs, reference)
    for chosen, members in groups:
        if not members:
            continue
        references[f"{scenario.name}: {', '.join(m.label for m in (chosen, *members))}"] = (
            chosen.label
        )
        controls = {_key(c.parameters): c for c in conditions if c.cni == chosen.label}
        for member in members:
            for treatment in (c for c in conditions if c.cni == member.label):
                control = controls.get(_key(treatment.parameters))
                if control is None:
                    notes.append(
                        f"{scenario.name} {treatment.cni} vs reference {chosen.label}:"
                        f" {treatment.condition} not compared (the reference has no verified"
                        " run of that condition with the same parameters)"
                    )
                    continue
                _instrument_note(scenario, treatment, notes)
                planned += _on_metrics(
                    scenario,
                    ContrastKind.CNI,
                    f"{treatment.cni} vs {chosen.label}",
                    treatment,
                    control,
                    _all_context(treatment.parameters),
                    _compared_metrics(scenario, treatment, control),
                )
    # Every pair of configurations of different groups: an option contrast when the CNI is
    # the same and one factor differs, otherwise confounded (said once per pair).
    grouped = [[chosen, *members] for chosen, members in groups]
    for i, first_group in enumerate(grouped):
        for second_group in grouped[i + 1 :]:
            for first in first_group:
                for second in second_group:
                    differing = differing_factors(first, second, scenario=scenario.name)
                    if first.name == second.name and len(differing) == 1:
                        planned += _option_contrasts(
                            scenario, conditions, first, second, differing[0]
                        )
                        continue
                    what = "the CNI and " if first.name != second.name else ""
                    notes.append(
                        f"{scenario.name} {second.label} vs {first.label}: not compared:"
                        f" confounded by {what}{factor_words(differing, second, first)}; a"
                        " comparison changes one thing"
                    )
    return planned


def _option_contrasts(
    scenario: Scenario,
    conditions: Sequence[_Condition],
    a: Configuration,
    b: Configuration,
    factor: str,
) -> list[PlannedContrast]:
    """One option of one CNI against its default, condition by condition."""
    default = CONTROL_VALUES.get(factor, "")
    control, treatment = (a, b) if b.factor(factor) != default else (b, a)
    feature = f"{factor} {treatment.factor(factor) or 'none'} vs {control.factor(factor) or 'none'}"
    if factor == INSTRUMENT_FACTOR:
        feature += " (the per-node CPU instrument)"
    controls = {_key(c.parameters): c for c in conditions if c.cni == control.label}
    planned: list[PlannedContrast] = []
    for side in (c for c in conditions if c.cni == treatment.label):
        other = controls.get(_key(side.parameters))
        if other is None:
            continue
        planned += _on_metrics(
            scenario,
            ContrastKind.OPTION,
            feature,
            side,
            other,
            _all_context(side.parameters),
            _compared_metrics(
                scenario, side, other, instrument_contrast=factor == INSTRUMENT_FACTOR
            ),
        )
    return planned


def _configured_shares(condition: _Condition) -> dict[str, float]:
    raw = condition.parameters.get("weights")
    try:
        weights = json.loads(str(raw)) if isinstance(raw, str) else None
    except json.JSONDecodeError:
        weights = None
    if not isinstance(weights, dict) or not weights:
        raise ConfigError(
            f"{condition.cni}/{condition.condition}: parameter 'weights' is not a JSON object of"
            f" backend weights: {raw!r}"
        )
    numbers = {str(k): float(v) for k, v in weights.items()}
    total = sum(numbers.values())
    if total <= 0 or any(v < 0 for v in numbers.values()):
        raise ConfigError(f"{condition.cni}/{condition.condition}: weights {raw} are not positive")
    return {name: value / total for name, value in numbers.items()}


def _weight_contrasts(
    scenario: Scenario, conditions: Sequence[_Condition]
) -> list[PlannedContrast]:
    """One contrast per split condition: its backends' shares form one question."""
    planned = []
    for condition in conditions:
        shares = _configured_shares(condition)
        if not any(f"requests@{backend}" in condition.metrics for backend in shares):
            continue
        planned.append(
            PlannedContrast(
                scenario.name,
                ContrastKind.WEIGHTS,
                "shares",
                condition.cni,
                condition.cni,
                condition.condition,
                "configured weights",
                condition.parameters_json,
                "",
                _all_context(condition.parameters, leave_out=("weights",)),
                "shares",
                weights=json.dumps(shares),
            )
        )
    return planned


def _outcomes(
    scenario: Scenario,
    conditions: Sequence[_Condition],
    yes_no: set[str],
    planned: Sequence[PlannedContrast],
) -> list[PlannedContrast]:
    """A row per yes/no metric of a condition that no planned contrast states."""
    covered = {(p.cni, p.treatment, p.metric) for p in planned}
    covered |= {(p.control_cni, p.control, p.metric) for p in planned}

    def shown(condition: _Condition) -> set[str]:
        # What the run table shows of the condition: its headline and primary metrics.
        declared = Condition(scenario.name, condition.condition, dict(condition.parameters))
        return set(scenario.headline_metrics(declared)) | set(scenario.primary_metrics)

    return [
        PlannedContrast(
            scenario.name,
            ContrastKind.OUTCOME,
            "outcome",
            condition.cni,
            condition.cni,
            condition.condition,
            "",
            condition.parameters_json,
            "",
            "",
            metric,
        )
        for condition in conditions
        for metric in sorted(condition.metrics & yes_no & shown(condition))
        if (condition.cni, condition.condition, metric) not in covered
    ]


def plan_contrasts(
    df: pd.DataFrame,
    *,
    reference: str | None = None,
    scenarios: Mapping[str, Scenario] | None = None,
    notes: list[str] | None = None,
    references: dict[str, str] | None = None,
) -> list[PlannedContrast]:
    """The contrasts the scenarios declare, as far as these results contain both sides.

    Parameters
    ----------
    df:
        Tidy results (:func:`cnibench.results.load_results`); only successful, verified runs
        with a finite value count.
    reference:
        Reference CNI (:func:`reference_cni`; default: the first measured). CNIs are
        compared only within a group of configurations whose data-path factors are all equal
        (:mod:`cnibench.report.configs`): the reference where it is in the group, else the
        group's first measured configuration.
    scenarios:
        Scenario registry holding the declarations (default
        :data:`cnibench.scenarios.SCENARIOS`).
    notes:
        If given, receives one line per treatment condition that could not be paired, per
        pair of configurations confounded by more than one factor, and per instrumented
        configuration whose throughput and latency are not compared.
    references:
        If given, receives the reference chosen for each group of comparable
        configurations: ``{"<scenario>: <labels>": reference}``.

    Returns
    -------
    list of PlannedContrast
        Per scenario in order of first appearance: feature contrasts, then CNI contrasts, then
        weights; within each, in the order of the conditions and of the primary metrics.

    Raises
    ------
    ConfigError
        Bad ``reference``, or unreadable parameters.
    """
    registry = SCENARIOS if scenarios is None else scenarios
    rows = usable_rows(df)
    if rows.empty:
        return []
    chosen = reference_cni(df, reference)
    found = [] if notes is None else notes
    chosen_references = {} if references is None else references
    configs = _configurations(rows)
    planned: list[PlannedContrast] = []
    for name in dict.fromkeys(str(s) for s in rows["scenario"]):
        scenario = registry.get(name)
        if scenario is None:
            found.append(f"{name}: no scenario declares its contrasts; not in the verdict")
            continue
        conditions = _conditions(rows, name, configs)
        planned += _feature_contrasts(scenario, conditions, found)
        if scenario.compares_cnis:
            planned += _cni_contrasts(scenario, conditions, chosen, found, chosen_references)
        if scenario.compares_shares_with_weights:
            planned += _weight_contrasts(scenario, conditions)
        yes_no = set(rows.loc[(rows["scenario"] == name) & (rows["unit"] == "bool"), "metric"])
        planned += _outcomes(scenario, conditions, yes_no, planned)
    return planned
