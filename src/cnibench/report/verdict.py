"""The verdict: each scenario's planned contrasts with intervals, corrected together.

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

The numbers
-----------
A side's values are all its successful, verified runs; outlying runs are flagged in the
tables and figures, never dropped. The scale (:class:`Scale`) follows the data:

- *ratio* (positive quantities): the ratio of geometric means, treatment / control, with the
  Welch t interval of the difference of mean logarithms, exponentiated
  (:func:`cnibench.report.compare.log_ratio_interval`, as ``cnibench compare``). The printed
  ratio is the centre of that interval on the log scale, and each side's geometric mean is
  :func:`cnibench.stats.summarize_runs`' estimate, the number the tables and bars show.
- *difference* (a side with a zero or negative run, or sides more than :data:`RATIO_SPAN`
  apart, e.g. an idle gateway node's CPU): the difference of means in the metric's unit with
  Welch's interval (:func:`cnibench.stats.compare`), printed as ``+0.37 cores (95 % CI
  0.35-0.39; 0.00 → 0.37)``.
- *proportion* (yes/no metrics, unit ``bool``): the difference of the shares of yes with
  Newcombe's interval and Fisher's exact p-value; each side as ``k/n`` with its
  Clopper-Pearson interval.
- *split*: :func:`cnibench.stats.split_test` (one pooled test allowing for overdispersion
  between runs) beside the Goodman intervals, and the requests a 5-point skew needs at this
  many runs (:func:`cnibench.stats.skew_detection_plan`, the test's own power), or that no
  number of requests does and how many runs would.

How the runs were taken
-----------------------
Read from the records alone (``session_id``, ``time``; :mod:`cnibench.report.design`), per
contrast:

- *interleaved* (both sides in the same session(s), their runs alternating in rounds, as
  ``cnibench run --interleave`` takes them): as above;
- *sequential* (in the same session, one side's runs after the other's): runs drift, and the
  drift then falls on one side only. The drift is estimated as an AR(1) over the session's run
  order from the residuals of each side around its mean, pooled over the sides and every
  metric of the pair (:func:`cnibench.report.design.drift_autocorrelation`), and the interval
  is widened by the variance it adds to the difference of means, with the degrees of freedom
  its effective number of runs leaves (:func:`cnibench.report.design.drift_widening`). The
  line says "sequential, drift allowed for" (with 2 runs a side nothing can be estimated, and
  it says that instead);
- *across sessions* (some session holds only one side): the session is the unit of
  replication. With at least 2 sessions on each side the sides' per-session means are
  compared as runs are (the line names the sessions, "session-level variance"); with fewer,
  a session offset cannot be told from a difference, and the line is "across sessions <ids>:
  not a detectable difference at this design" with what would make it one, and no p-value
  (it is not one of the tested contrasts).

The ``sessions`` column names the sessions each contrast draws on (``"B vs A"`` when they
differ, treatment first), ``design`` the layout (:class:`cnibench.report.design.Layout`).

Words
-----
A line claims a difference only when its Holm-adjusted p-value is at most 5 % and its own
interval excludes no difference. Otherwise it says "same within ±X %" when a margin is given
and the whole interval lies inside it (two one-sided tests), else "inconclusive" with the
effect this n could detect (power 0.8) and the runs per side that ±5 % (or the margin) would
need. Bounds are rounded outwards, with as many decimals as it takes for an interval that
excludes 1 (or 0) not to print as if it contained it (:func:`interval_text`). Lines are
ordered by a standardized effect (:attr:`effect_size`), not by the size of the ratio.

Multiplicity
------------
Holm's step-down correction (:func:`cnibench.stats.holm_adjusted`) over all contrasts of one
verdict. Holm rather than Benjamini-Hochberg: every verdict line is a claim someone acts on
("the gateway costs 17 % throughput"), so the family-wise error rate is what should be
controlled (the chance that *any* line claims a difference that is not there), and Holm
controls it under any dependence between contrasts, which share control and reference runs.
Intervals are shown at their own 95 % level (simultaneous intervals from 2-3 runs would be
too wide to read).
"""

from __future__ import annotations

import enum
import json
import math
import warnings
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
import pandas as pd

from cnibench import stats
from cnibench.backends.base import ClusterSpec
from cnibench.errors import CnibenchError, ConfigError
from cnibench.records import ParamValue, summary_scale
from cnibench.report import design
from cnibench.report.compare import log_ratio_interval
from cnibench.report.configs import (
    CONTROL_VALUES,
    INSTRUMENT_FACTOR,
    Configuration,
    configuration,
    differing_factors,
    factor_words,
    instrumented,
)
from cnibench.report.data import LEVEL, ok_runs
from cnibench.report.derived import (
    AGENT_METRICS,
    HOST_WIDE,
    NODE_SUM,
    WORK_UNITS,
    host_wide_replaced,
    with_derived_metrics,
)
from cnibench.scenarios import SCENARIOS
from cnibench.scenarios.base import OTHER_THAN_CONTROL, Condition, Contrast, Scenario

__all__ = [
    "CORRECTION",
    "DEFAULT_MARGIN",
    "RATIO_SPAN",
    "SUMMARY_LINES",
    "VERDICT_COLUMNS",
    "ContrastKind",
    "PlannedContrast",
    "Scale",
    "interval_text",
    "plan_contrasts",
    "reference_cni",
    "verdict",
    "verdict_lines",
    "verdict_summary",
]

CORRECTION = "Holm"
"""The multiplicity correction across the contrasts of one verdict (see the module notes)."""

SUMMARY_LINES = 24
"""Most contrast lines :func:`verdict_summary` prints: about one terminal screen."""

VERDICT_COLUMNS: tuple[str, ...] = (
    "scenario",
    "kind",
    "feature",
    "cni",
    "control_cni",
    "treatment",
    "control",
    "context",
    "treatment_parameters",
    "contrast",
    "metric",
    "unit",
    "scale",
    "n_treatment",
    "n_control",
    "treatment_mean",
    "control_mean",
    "estimate",
    "ratio",
    "ci_low",
    "ci_high",
    "level",
    "p_value",
    "p_adjusted",
    "effect_size",
    "detectable",
    "runs_needed",
    "margin",
    "equivalent",
    "significant",
    "design",
    "sessions",
    "verdict",
)
"""Columns of :func:`verdict`, one row per contrast."""


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
                f"{name} {_percent(share)}" for name, share in json.loads(self.weights).items()
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


def _usable(df: pd.DataFrame) -> pd.DataFrame:
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
    rows = _usable(df)
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


# --------------------------------------------------------------------------------------------
# Statistics
# --------------------------------------------------------------------------------------------

RATIO_SPAN = 10.0
"""A treatment more than this factor above its (positive) control is compared as a
difference in the metric's unit: a near-zero control makes a ratio (×138) mean little and
head the list, where "+0.37 cores" says what happened."""

DEFAULT_MARGIN = 0.05
"""The relative change an "inconclusive" line names the runs for (±5 %) when no margin is
given."""

SKEW = 0.05
"""The split skew (share moved between backends) whose requests a split line states."""
SKEW_POWER = 0.9
"""Power wanted for :data:`SKEW`."""
SKEW_ALPHA = 0.01
"""Level for :data:`SKEW`."""
DETECT_POWER = 0.8
"""Power of the "this n detects about ..." and "needs about N runs" statements."""


class Scale(enum.StrEnum):
    """On which scale a contrast is estimated."""

    RATIO = "ratio"
    """Ratio of geometric means, Welch's t on the logarithms: positive quantities."""
    DIFFERENCE = "difference"
    """Difference of means in the metric's unit, Welch's t: a side that is 0, near 0
    (:data:`RATIO_SPAN`) or negative."""
    PROPORTION = "proportion"
    """Difference of proportions of yes (unit ``bool``), Newcombe's interval, Fisher's test."""
    SPLIT = "split"
    """One pooled test of a split's per-run counts against its weights."""


def _side(
    rows: pd.DataFrame, cni: str, condition: str, parameters: str, metric: str
) -> tuple[npt.NDArray[np.float64], str]:
    runs, unit = _side_runs(rows, cni, condition, parameters, metric)
    return runs.values, unit


def _side_runs(
    rows: pd.DataFrame, cni: str, condition: str, parameters: str, metric: str
) -> tuple[design.SideRuns, str]:
    """One side's values of ``metric`` in time order, with their sessions and places in
    their sessions' run order (``_position``, :func:`verdict` adds it)."""
    mask = (
        (rows["cni"] == cni)
        & (rows["condition"] == condition)
        & (rows["parameters"] == parameters)
        & (rows["metric"] == metric)
    )
    chosen = rows[mask].sort_values(["time", "run_id"], kind="stable")
    units = [str(u) for u in dict.fromkeys(chosen["unit"])]
    sessions = (
        tuple(str(s) for s in chosen["session_id"])
        if "session_id" in chosen.columns
        else ("",) * len(chosen)
    )
    positions = (
        chosen["_position"].to_numpy(dtype=np.float64)
        if "_position" in chosen.columns
        else np.full(len(chosen), np.nan)
    )
    values = chosen["value"].to_numpy(dtype=np.float64)
    return design.SideRuns(values, sessions, positions), units[0] if units else ""


def _pooled_sd(a: npt.NDArray[np.float64], b: npt.NDArray[np.float64]) -> float:
    df = a.size + b.size - 2
    if df < 1:
        return math.nan
    ss = float(np.sum((a - a.mean()) ** 2) + np.sum((b - b.mean()) ** 2))
    return math.sqrt(ss / df)


def _empty_row(unit: str, level: float) -> dict[str, Any]:
    return {
        "unit": unit,
        "scale": Scale.RATIO.value,
        "n_treatment": 0,
        "n_control": 0,
        "treatment_mean": math.nan,
        "control_mean": math.nan,
        "estimate": math.nan,
        "ratio": math.nan,
        "ci_low": math.nan,
        "ci_high": math.nan,
        "level": level,
        "p_value": math.nan,
        "effect_size": math.nan,
        "detectable": math.nan,
        "runs_needed": -1,
        "margin": math.nan,
        "equivalent": False,
        "design": "",
        "sessions": "",
        "why_not": "",
        "detail": "",
        "df": math.inf,
        "replicate": "runs",
        "drift": "",
    }


def _scale_of(unit: str, treatment: npt.NDArray[np.float64], control: Any) -> Scale:
    if summary_scale(unit) == "binary":
        return Scale.PROPORTION
    if treatment.size and control.size and np.all(treatment > 0) and np.all(control > 0):
        # Only a near-zero *control* makes a ratio meaningless (×138); a treatment that falls
        # to a fiftieth of its control (userspace WireGuard's throughput) is a fine ×0.02.
        growth = math.exp(float(np.mean(np.log(treatment)) - np.mean(np.log(control))))
        if growth <= RATIO_SPAN:
            return Scale.RATIO
    return Scale.DIFFERENCE


def _measure_ratio(
    row: dict[str, Any],
    control: npt.NDArray[np.float64],
    treatment: npt.NDArray[np.float64],
    level: float,
    margin: float | None,
) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", stats.DegenerateDataWarning)
        # scipy warns about precision with nearly equal samples; the interval says it.
        warnings.simplefilter("ignore", RuntimeWarning)
        interval = log_ratio_interval(control, treatment, level=level)
    row.update(estimate=interval.ratio, ratio=interval.ratio)
    if interval.low == interval.high:
        row["why_not"] = "identical runs on each side, no interval"
        return
    row.update(ci_low=interval.low, ci_high=interval.high, p_value=interval.p_value, df=interval.df)
    sd = _pooled_sd(np.log(control), np.log(treatment))
    if sd > 0:
        row["effect_size"] = abs(math.log(interval.ratio)) / sd
        shift = stats.detectable_effect(
            sd, control.size, treatment.size, alpha=1.0 - level, power=DETECT_POWER
        )
        row["detectable"] = math.expm1(shift)
        wanted = DEFAULT_MARGIN if margin is None else margin
        row["runs_needed"] = stats.runs_needed(
            sd, math.log1p(wanted), alpha=1.0 - level, power=DETECT_POWER
        )
    if margin is not None:
        row["margin"] = margin
        row["equivalent"] = bool(1.0 - margin <= interval.low and interval.high <= 1.0 + margin)


def _measure_difference(
    row: dict[str, Any],
    control: npt.NDArray[np.float64],
    treatment: npt.NDArray[np.float64],
    level: float,
) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", stats.DegenerateDataWarning)
        warnings.simplefilter("ignore", RuntimeWarning)
        comparison = stats.compare(control, treatment, level=level)
    row.update(
        treatment_mean=comparison.treatment_mean,
        control_mean=comparison.baseline_mean,
        estimate=comparison.difference,
    )
    if comparison.ci_low == comparison.ci_high:
        row["why_not"] = "identical runs on each side, no interval"
        return
    row.update(
        ci_low=comparison.ci_low,
        ci_high=comparison.ci_high,
        p_value=comparison.p_value,
        df=comparison.df,
    )
    sd = _pooled_sd(control, treatment)
    if sd > 0:
        row["effect_size"] = abs(comparison.difference) / sd
        row["detectable"] = stats.detectable_effect(
            sd, control.size, treatment.size, alpha=1.0 - level, power=DETECT_POWER
        )


def _measure_proportion(
    row: dict[str, Any],
    control: npt.NDArray[np.float64],
    treatment: npt.NDArray[np.float64],
    level: float,
) -> None:
    if not (np.isin(control, (0.0, 1.0)).all() and np.isin(treatment, (0.0, 1.0)).all()):
        row["why_not"] = "a yes/no metric with values other than 0 and 1"
        return
    kc, kt = int(control.sum()), int(treatment.sum())
    result = stats.proportion_difference(kc, control.size, kt, treatment.size, level=level)
    row.update(
        treatment_mean=kt / treatment.size,
        control_mean=kc / control.size,
        estimate=result.difference,
        ci_low=result.low,
        ci_high=result.high,
        p_value=result.p_value,
        effect_size=abs(
            2.0 * math.asin(math.sqrt(kt / treatment.size))
            - 2.0 * math.asin(math.sqrt(kc / control.size))
        ),
    )
    shown = stats.proportion_interval(kt, int(treatment.size), level=level)
    row["detail"] = (
        f"{kt}/{treatment.size} = {shown.estimate:.2f} (Clopper-Pearson"
        f" {interval_text(shown.low, shown.high, null=1.0)})"
        f" vs {kc}/{control.size}"
    )


def _measure_split(
    planned: PlannedContrast, rows: pd.DataFrame, row: dict[str, Any], level: float
) -> None:
    weights = json.loads(planned.weights)
    mine = rows[
        (rows["cni"] == planned.cni)
        & (rows["condition"] == planned.treatment)
        & (rows["parameters"] == planned.treatment_parameters)
    ]
    per_run: list[dict[str, int]] = []
    for _, run in mine.groupby("run_id", sort=False):
        values = dict(zip(run["metric"].astype(str), run["value"], strict=True))
        counts = {name: values.get(f"requests@{name}") for name in weights}
        if all(c is not None and math.isfinite(c) for c in counts.values()):
            per_run.append({name: round(float(c or 0)) for name, c in counts.items()})
    row.update(unit="requests", scale=Scale.SPLIT.value, n_treatment=len(per_run))
    if not per_run:
        row["why_not"] = "no run recorded its requests per backend"
        return
    try:
        test = stats.split_test(per_run, weights, level=level)
        # The split test's own power at this many runs (its F rule with (runs - 1)(K - 1)
        # df), not the many-runs chi-square's: 1429 requests over 5 runs have power 0.57.
        plan = stats.skew_detection_plan(
            weights,
            runs=test.runs,
            requests_per_run=test.n / test.runs,
            dispersion=test.dispersion,
            skew=SKEW,
            power=SKEW_POWER,
            alpha=SKEW_ALPHA,
        )
    except (ValueError, CnibenchError) as exc:
        row["why_not"] = str(exc)
        return
    row.update(
        estimate=test.max_abs_error,
        p_value=test.p_value,
        effect_size=math.sqrt(test.statistic / test.n) if test.n else math.nan,
        runs_needed=plan.requests or -1,
    )
    shares = ", ".join(
        f"{name} {_share_text(test.observed[name])} (Goodman"
        f" {_share_text(test.intervals[name][0])}-{_share_text(test.intervals[name][1])},"
        f" configured {_share_text(test.expected[name])})"
        for name in test.observed
    )
    enough = "enough" if plan.requests is not None and test.n >= plan.requests else "too few"
    dispersion = (
        f", between-run overdispersion ×{test.dispersion:.2f}" if test.dispersion > 1.0 else ""
    )
    row["detail"] = (
        f"{test.n} requests pooled over {test.runs} run(s): {shares}; one pooled test"
        f" p = {test.p_value:.2g}{dispersion}; {plan.statement()}: {enough} here"
    )


def _pair_key(planned: PlannedContrast) -> tuple[str, ...]:
    return (
        planned.scenario,
        planned.cni,
        planned.treatment,
        planned.treatment_parameters,
        planned.control_cni,
        planned.control,
        planned.control_parameters,
    )


class _Drift:
    """The drift of each pair of conditions, estimated once from all the metrics their
    contrasts state (they share their runs, and so their drift)."""

    def __init__(self, rows: pd.DataFrame, planned: Sequence[PlannedContrast]) -> None:
        self._rows = rows
        self._metrics: dict[tuple[str, ...], list[str]] = {}
        for p in planned:
            self._metrics.setdefault(_pair_key(p), []).append(p.metric)
        self._found: dict[tuple[str, ...], float] = {}

    def coefficient(self, planned: PlannedContrast) -> float:
        key = _pair_key(planned)
        if key not in self._found:
            pairs = []
            for metric in self._metrics.get(key, [planned.metric]):
                treatment, unit = _side_runs(
                    self._rows,
                    planned.cni,
                    planned.treatment,
                    planned.treatment_parameters,
                    metric,
                )
                control, _ = _side_runs(
                    self._rows,
                    planned.control_cni,
                    planned.control,
                    planned.control_parameters,
                    metric,
                )
                if summary_scale(unit) == "binary":
                    continue
                pairs.append((_drift_scale(control), _drift_scale(treatment)))
            self._found[key] = design.drift_autocorrelation(pairs) if pairs else 0.0
        return self._found[key]


def _drift_scale(side: design.SideRuns) -> design.SideRuns:
    """Logarithms of positive values (the scale of a ratio), else the values."""
    finite = side.values[np.isfinite(side.values)]
    if finite.size == side.values.size and np.all(finite > 0):
        return design.SideRuns(np.log(side.values), side.sessions, side.positions)
    return side


DRIFT_TOO_STRONG = "sequential, drift too strong for an interval"
"""The ``drift`` of a sequential contrast whose drift leaves fewer than
:data:`cnibench.report.design.MIN_EFFECTIVE_RUNS` effective runs (ratio stated, no claim)."""


def _widen_for_drift(
    row: dict[str, Any],
    control: design.SideRuns,
    treatment: design.SideRuns,
    rho: float,
    level: float,
) -> None:
    """Widen a sequential contrast's interval by the drift (:mod:`cnibench.report.design`)."""
    if max(control.values.size, treatment.values.size) < 3:
        row["drift"] = "sequential, drift not estimable with 2 runs a side"
        return
    row["drift"] = "sequential, drift allowed for"
    if not math.isfinite(rho) or not math.isfinite(float(row["ci_low"])):
        return
    effective = design.effective_runs(control, treatment, rho)
    if effective < design.MIN_EFFECTIVE_RUNS:
        row["drift"] = DRIFT_TOO_STRONG
        row["why_not"] = (
            f"sequential, drift too strong for an interval at this design (AR(1) about"
            f" {rho:.2f}: the runs are worth about {effective:.1f} independent ones);"
            f" {design.DRIFT_ADVICE}"
        )
        row.update(ci_low=math.nan, ci_high=math.nan, p_value=math.nan)
        return
    factor, df_cap = design.drift_widening(control, treatment, rho)
    if factor <= 1.0 and df_cap >= float(row["df"]):
        return
    if row["scale"] == Scale.RATIO:
        centre = math.log(float(row["estimate"]))
        low, high = math.log(float(row["ci_low"])), math.log(float(row["ci_high"]))
    else:
        centre, low, high = float(row["estimate"]), float(row["ci_low"]), float(row["ci_high"])
    low, high, p_value = design.widened(
        centre, low, high, float(row["df"]), factor=factor, df_cap=df_cap, level=level
    )
    if row["scale"] == Scale.RATIO:
        low, high = math.exp(low), math.exp(high)
        if math.isfinite(float(row["detectable"])):
            row["detectable"] = math.expm1(math.log1p(row["detectable"]) * math.sqrt(factor))
        if math.isfinite(float(row["margin"])):
            margin = float(row["margin"])
            row["equivalent"] = bool(1.0 - margin <= low and high <= 1.0 + margin)
    elif math.isfinite(float(row["detectable"])):
        row["detectable"] = float(row["detectable"]) * math.sqrt(factor)
    row.update(ci_low=low, ci_high=high, p_value=p_value)


def _across_sessions(
    row: dict[str, Any],
    control: design.SideRuns,
    treatment: design.SideRuns,
    scale: Scale,
    level: float,
    margin: float | None,
) -> None:
    """A contrast whose sides come from different sessions: the session is the unit of
    replication (each side's per-session means, compared as runs are), or, with fewer than
    2 sessions on a side, no claim: a session offset cannot be told from a difference."""
    counts = (len(set(treatment.sessions)), len(set(control.sessions)))
    if min(counts) < 2:
        row["why_not"] = (
            f"across sessions {row['sessions']}: not a detectable difference at this design;"
            f" {design.ACROSS_SESSIONS_ADVICE}"
        )
        if scale is Scale.RATIO:
            row["ratio"] = row["estimate"] = math.exp(
                float(np.mean(np.log(treatment.values)) - np.mean(np.log(control.values)))
            )
        return
    row["replicate"] = "sessions"
    row["drift"] = (
        f"{counts[0]} vs {counts[1]} sessions ({row['sessions']}), session-level variance"
    )
    if scale is Scale.RATIO:
        geometric = [
            np.exp(design.session_means(_drift_scale(side))) for side in (control, treatment)
        ]
        _measure_ratio(row, geometric[0], geometric[1], level, margin)
    elif scale is Scale.DIFFERENCE:
        means = [design.session_means(side) for side in (control, treatment)]
        _measure_difference(row, means[0], means[1], level)
    else:
        # Each session's share of yes, compared as a difference of means over sessions
        # (Welch's, not Newcombe's: the sessions, not the runs, are the units).
        means = [design.session_means(side) for side in (control, treatment)]
        row.update(scale=Scale.DIFFERENCE.value, unit="share of yes")
        _measure_difference(row, means[0], means[1], level)


def _measure(
    planned: PlannedContrast,
    rows: pd.DataFrame,
    level: float,
    margin: float | None,
    drift: _Drift | None = None,
) -> dict[str, Any]:
    scenario_rows = rows[rows["scenario"] == planned.scenario]
    row = _empty_row("", level)
    if planned.kind in (ContrastKind.WEIGHTS, ContrastKind.OUTCOME):
        mine = scenario_rows[
            (scenario_rows["cni"] == planned.cni)
            & (scenario_rows["condition"] == planned.treatment)
            & (scenario_rows["parameters"] == planned.treatment_parameters)
        ]
        if "session_id" in mine.columns:
            row["sessions"] = ", ".join(str(s) for s in dict.fromkeys(mine["session_id"]))
    if planned.kind is ContrastKind.WEIGHTS:
        _measure_split(planned, scenario_rows, row, level)
        return row
    if planned.kind is ContrastKind.OUTCOME:
        values, unit = _side(
            scenario_rows,
            planned.cni,
            planned.treatment,
            planned.treatment_parameters,
            planned.metric,
        )
        row.update(unit=unit, scale=Scale.PROPORTION.value, n_treatment=values.size)
        if not np.isin(values, (0.0, 1.0)).all():
            row["why_not"] = "a yes/no metric with values other than 0 and 1"
            return row
        shown = stats.proportion_interval(int(values.sum()), int(values.size), level=level)
        row.update(
            treatment_mean=shown.estimate,
            estimate=shown.estimate,
            ci_low=shown.low,
            ci_high=shown.high,
        )
        row["detail"] = f"{int(values.sum())}/{values.size}"
        return row
    treatment_runs, unit = _side_runs(
        scenario_rows, planned.cni, planned.treatment, planned.treatment_parameters, planned.metric
    )
    control_runs, _ = _side_runs(
        scenario_rows,
        planned.control_cni,
        planned.control,
        planned.control_parameters,
        planned.metric,
    )
    shared = design.within_shared_sessions(control_runs, treatment_runs)
    left_out = ""
    if shared is not None:
        control_runs, treatment_runs, left_out = shared
    treatment, control = treatment_runs.values, control_runs.values
    shape = design.layout(control_runs, treatment_runs)
    row.update(design=shape.value, sessions=design.sessions_text(control_runs, treatment_runs))
    scale = _scale_of(unit, treatment, control)
    row.update(unit=unit, scale=scale.value, n_treatment=treatment.size, n_control=control.size)
    if scale is not Scale.PROPORTION and treatment.size and control.size:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", stats.DegenerateDataWarning)
            row["treatment_mean"] = stats.summarize_runs(treatment, level=level).mean
            row["control_mean"] = stats.summarize_runs(control, level=level).mean
    if treatment.size < 2 or control.size < 2:
        row["why_not"] = "fewer than 2 runs on a side"
        return row
    if shape is design.Layout.ACROSS_SESSIONS:
        _across_sessions(row, control_runs, treatment_runs, scale, level, margin)
        return row
    if scale is Scale.RATIO:
        _measure_ratio(row, control, treatment, level, margin)
    elif scale is Scale.DIFFERENCE:
        _measure_difference(row, control, treatment, level)
    else:
        _measure_proportion(row, control, treatment, level)
    if shape is design.Layout.SEQUENTIAL and scale is not Scale.PROPORTION:
        rho = drift.coefficient(planned) if drift is not None else 0.0
        scaled = (_drift_scale(control_runs), _drift_scale(treatment_runs))
        _widen_for_drift(row, *scaled, rho, level)
    if left_out:
        row["drift"] = "; ".join(part for part in (left_out, row["drift"]) if part)
    return row


# --------------------------------------------------------------------------------------------
# Words
# --------------------------------------------------------------------------------------------


def _percent(share: float) -> str:
    return f"{100.0 * share:.3g} %"


def _share_text(share: float) -> str:
    return f"{100.0 * share:.1f} %"


def _fixed(value: float, digits: int, rounding: Any) -> str:
    """``value`` with ``digits`` decimals, rounded by ``rounding`` (``math.floor`` for a
    lower bound, ``math.ceil`` for an upper one), so a printed interval never looks narrower
    than it is."""
    scaled = rounding(round(value * 10.0**digits, 9)) / 10.0**digits
    return f"{scaled:.{digits}f}"


def _number(value: float, *, digits: int = 2) -> str:
    if abs(value) >= 100:
        return f"{value:.0f}"
    if abs(value) >= 10:
        return f"{value:.1f}"
    if abs(value) >= 0.01 or value == 0:
        return f"{value:.{digits}f}"
    # Two significant digits, never in exponent notation: "CI 0.0000085-35925" reads as a
    # (uselessly wide) interval, "CI 8.5e-06-35925" as a typo.
    return np.format_float_positional(value, precision=2, fractional=False, trim="-")


def _digits(low: float, high: float) -> int:
    """Decimals that keep an interval's bounds apart (at least 2, at most 6): a narrow
    interval must not print as "1.00-1.00"."""
    digits = 2
    while digits < 6 and 10.0**-digits > high - low:
        digits += 1
    return digits


def _prefix(magnitude: float) -> tuple[float, str]:
    """Divisor and SI prefix for numbers of this magnitude (as the run table shows them)."""
    for smallest, divisor, prefix in ((1e9, 1e9, "G"), (1e6, 1e6, "M"), (1e4, 1e3, "k")):
        if magnitude >= smallest:
            return divisor, prefix
    return 1.0, ""


def interval_text(low: float, high: float, *, null: float) -> str:
    """``"low-high"`` rounded outwards, with enough decimals that an interval excluding
    ``null`` (1 for a ratio, 0 for a difference) never prints as if it contained it:
    ``1.004-1.02``, not ``1.00-1.02``.

    Examples
    --------
    >>> interval_text(1.0004, 1.0213, null=1.0)
    '1.0004-1.0213'
    >>> interval_text(0.0689, 113.08, null=1.0)
    '0.06-114'
    """
    digits = _digits(low, high)

    def bound(value: float, d: int, rounding: Any) -> str:
        if abs(value) >= 100:
            # No decimals on a bound this large, and only on it: a wide interval's other bound,
            # 0.069 in "0.069-114", must not round outwards to 0 (a ratio's bound is positive).
            d = 0
        elif value != 0 and abs(value) < 0.01:
            # Two significant digits however small (never "0.00" for a positive bound).
            d = max(d, 1 - math.floor(math.log10(abs(value))))
        return _fixed(value, d, rounding)

    def shown(d: int) -> tuple[str, str]:
        return bound(low, d, math.floor), bound(high, d, math.ceil)

    lo, hi = shown(digits)
    while digits < 9 and (
        (low > null and float(lo) <= null) or (high < null and float(hi) >= null)
    ):
        digits += 1
        lo, hi = shown(digits)
    # "-1.2--0.8" misreads; with a negative bound the two are joined by "to".
    return f"{lo} to {hi}" if low < 0 or high < 0 else f"{lo}-{hi}"


def metric_words(metric: str) -> str:
    """How a line names ``metric``: host-wide figures say so (``ram (host-wide)``)."""
    return f"{metric} (host-wide)" if metric in HOST_WIDE else metric


def tested_count(frame: pd.DataFrame) -> int:
    """How many rows of :func:`verdict`'s frame have a p-value: the family Holm's correction
    runs over (outcomes, and sides with identical or too few runs, have none)."""
    if frame.empty:
        return 0
    return int(np.isfinite(frame["p_value"].to_numpy(dtype=np.float64)).sum())


def _n_text(row: Mapping[str, Any]) -> str:
    if row["kind"] in (ContrastKind.WEIGHTS, ContrastKind.OUTCOME):
        return f"n = {row['n_treatment']} runs"
    n = f"n = {row['n_treatment']} vs {row['n_control']}"
    return f"{n}; {row['drift']}" if row.get("drift") else n


def _signed(value: float, digits: int) -> str:
    return ("+" if value >= 0 else "-") + _number(abs(value), digits=digits)


def _apart(row: Mapping[str, Any]) -> bool:
    """Whether the row's own interval excludes "no difference" (its own test for splits)."""
    low, high = float(row["ci_low"]), float(row["ci_high"])
    if row.get("kind") == ContrastKind.OUTCOME or row.get("kind") == "outcome":
        return False
    if row["scale"] == Scale.SPLIT:
        p = float(row["p_value"])
        return math.isfinite(p) and p <= 1.0 - float(row["level"])
    null = 1.0 if row["scale"] == Scale.RATIO else 0.0
    return math.isfinite(low) and math.isfinite(high) and (low > null or high < null)


def _power_words(row: Mapping[str, Any]) -> str:
    if not math.isfinite(float(row["detectable"])):
        return ""
    if row["scale"] == Scale.RATIO:
        wanted = DEFAULT_MARGIN if not math.isfinite(row["margin"]) else float(row["margin"])
        words = f": this n detects about ±{100 * float(row['detectable']):.0f} %"
        if int(row["runs_needed"]) > 0:
            replicate = row.get("replicate", "runs")
            words += f"; ±{100 * wanted:g} % needs about {row['runs_needed']} {replicate} per side"
        return words
    divisor, prefix = _prefix(float(row["detectable"]))
    shown = f"{_number(float(row['detectable']) / divisor)}{prefix}"
    return f": this n detects about ±{shown} {row['unit']}".rstrip()


def _sentence(planned: PlannedContrast, row: Mapping[str, Any]) -> str:
    n = _n_text(row)
    level = f"{100.0 * float(row['level']):g} %"
    if row["scale"] == Scale.SPLIT:
        head = f"{planned.label}:"
        if row["why_not"]:
            return f"{head} not compared ({row['why_not']}, {n})"
        word = "differs from the weights" if row["significant"] else "consistent with the weights"
        if _apart(row) and not row["significant"]:
            word += f" after {CORRECTION}'s correction (adjusted p = {row['p_adjusted']:.2g})"
        return f"{head} {word}; {row['detail']}"
    head = f"{planned.label}: {metric_words(planned.metric)}"
    if planned.kind is ContrastKind.OUTCOME and not row["why_not"]:
        low, high = float(row["ci_low"]), float(row["ci_high"])
        return (
            f"{head} {row['detail']} = {float(row['estimate']):.2f} ({level} CI"
            f" {interval_text(low, high, null=1.0)}, Clopper-Pearson;"
            " an outcome, not a comparison)"
        )
    stated_without_claim = row["design"] == design.Layout.ACROSS_SESSIONS or str(
        row.get("drift", "")
    ).startswith(DRIFT_TOO_STRONG)
    if row["why_not"] and stated_without_claim:
        shown = f"×{_number(row['ratio'])}" if math.isfinite(row["ratio"]) else "not compared"
        return f"{head} {shown} ({n}; {row['why_not']})"
    if row["why_not"]:
        if math.isfinite(row["ratio"]):
            return f"{head} ×{_number(row['ratio'])} ({row['why_not']}, {n})"
        return f"{head} not compared ({row['why_not']}, {n})"
    low, high, estimate = float(row["ci_low"]), float(row["ci_high"]), float(row["estimate"])
    digits = _digits(low, high)
    if row["scale"] == Scale.RATIO:
        stated = f"×{_number(estimate, digits=digits)}"
        ci = f"{level} CI {interval_text(low, high, null=1.0)}"
        body = f"{stated} ({ci}, {n})"
    elif row["scale"] == Scale.DIFFERENCE:
        # One SI prefix for every number of the line (10.9G → 0.22G), as the run table.
        sides = (float(row["control_mean"]), float(row["treatment_mean"]))
        divisor, prefix = _prefix(max(abs(v) for v in (low, high, estimate, *sides)))
        unit = f" {row['unit']}" if row["unit"] else ""
        d = _digits(low / divisor, high / divisor)
        stated = f"{_signed(estimate / divisor, d)}{prefix}{unit}"
        moved = (
            f"{_number(sides[0] / divisor, digits=d)}{prefix} →"
            f" {_number(sides[1] / divisor, digits=d)}{prefix}"
        )
        shown = interval_text(low / divisor, high / divisor, null=0.0)
        if prefix:
            separator = " to " if " to " in shown else "-"
            lo, hi = shown.split(separator)
            shown = f"{lo}{prefix}{separator}{hi}{prefix}"
        body = f"{stated} ({level} CI {shown}; {moved}, {n})"
    else:
        stated = f"{_signed(estimate, 2)} in the share of yes"
        body = (
            f"{stated} ({row['detail']}; {level} CI of the difference"
            f" {interval_text(low, high, null=0.0)}, Newcombe; Fisher p = {row['p_value']:.2g})"
        )
    if row["significant"]:
        return f"{head} {body}"
    if _apart(row):
        return (
            f"{head} {body}, but no detectable difference after {CORRECTION}'s correction"
            f" (adjusted p = {row['p_adjusted']:.2g})"
        )
    if row["equivalent"]:
        return f"{head} same within ±{100 * float(row['margin']):g} % {body}"
    return f"{head} inconclusive {body}{_power_words(row)}"


# --------------------------------------------------------------------------------------------
# Public entry points
# --------------------------------------------------------------------------------------------


def verdict(
    df: pd.DataFrame,
    *,
    reference: str | None = None,
    level: float = LEVEL,
    margin: float | None = None,
    scenarios: Mapping[str, Scenario] | None = None,
) -> pd.DataFrame:
    """The planned contrasts of a result set as a tidy DataFrame, grouped by feature.

    Parameters
    ----------
    df:
        Tidy results (:func:`cnibench.results.load_results`).
    reference:
        CNI every other CNI is compared with (default: the first measured, i.e. the first
        ``--cni``).
    level:
        Confidence level of the intervals and of the corrected test, in (0, 1).
    margin:
        Equivalence margin as a fraction (0.02 = ±2 %, ``--margin 2%``): a ratio whose whole
        interval lies within ``1 ± margin`` is "same within ±2 %" (two one-sided tests at
        ``(1 - level) / 2`` each). ``None``: no equivalence claims; "inconclusive" lines name
        the runs for ±5 %.
    scenarios:
        Registry with the declarations (default :data:`cnibench.scenarios.SCENARIOS`).

    Returns
    -------
    pandas.DataFrame
        One row per contrast (:func:`plan_contrasts`), columns :data:`VERDICT_COLUMNS`:
        ``scenario``; ``kind`` (:class:`ContrastKind`); ``feature``; ``cni`` and
        ``control_cni``; ``treatment`` and ``control`` (condition ids); ``context``;
        ``treatment_parameters`` (the treatment condition's recorded parameters, JSON);
        ``contrast`` (how the line names it); ``metric`` and ``unit``; ``scale``
        (:class:`Scale`); ``n_treatment``/``n_control`` (every successful verified run;
        ``n_treatment`` counts runs for a split); ``treatment_mean``/``control_mean`` (the
        estimates compared: geometric means for a ratio, means for a difference, shares of
        yes for a proportion); ``estimate`` (the ratio, the difference in ``unit``, the
        difference of proportions, or a split's largest share error) and its interval
        ``ci_low``/``ci_high`` (NaN where there is none; none for a split); ``ratio`` (the
        estimate of a ratio row, NaN otherwise: the centre of its interval on the log
        scale); ``level``; ``p_value`` and ``p_adjusted`` (Holm's, over all rows with a
        p-value); ``effect_size`` (standardized: ``|log ratio|`` or ``|difference|`` over the
        pooled run-to-run SD, Cohen's h for proportions, Cohen's w for splits);
        ``detectable`` (the effect this n detects with power 0.8: relative for ratios, in
        ``unit`` for differences); ``runs_needed`` (runs per side for ±margin or ±5 %, or
        requests for a 5-point skew of a split at its number of runs; -1 when unknown, or for a
        split when only more runs would do); ``margin``; ``equivalent``;
        ``significant`` (``p_adjusted <= 1 - level`` and the interval excludes no
        difference); ``design`` (how the sides' runs were taken: ``interleaved``,
        ``sequential``, ``across sessions``, or ``unknown`` without run times) and
        ``sessions`` (the sessions the contrast draws on: ``"A"``, or ``"B vs A"``,
        treatment first, when the sides' sessions differ); and ``verdict`` (the line).
        Grouped by scenario, kind (feature, option, CNI, weights, outcome) and feature,
        each in order of first appearance; within a group by ``effect_size``, largest
        first, rows without a p-value last.
        ``attrs["notes"]`` lists what could not be compared and why (confounded pairs of
        configurations among them), ``attrs["reference"]`` the reference CNI asked for (or
        the first measured), ``attrs["references"]`` the reference chosen for each group of
        comparable configurations.

    Raises
    ------
    ConfigError
        Bad ``reference``, ``level`` or ``margin``, or unreadable parameters.

    Examples
    --------
    >>> from cnibench.results import load_results
    >>> from cnibench import report
    >>> table = report.verdict(load_results("results/"))  # doctest: +SKIP
    >>> table[["verdict", "p_adjusted"]]  # doctest: +SKIP
    """
    if isinstance(level, bool) or not isinstance(level, int | float) or not 0.0 < level < 1.0:
        raise ConfigError(f"level must be strictly between 0 and 1, got {level!r}")
    if margin is not None and (
        isinstance(margin, bool) or not isinstance(margin, int | float) or not 0.0 < margin < 1.0
    ):
        raise ConfigError(f"margin must be a fraction strictly between 0 and 1, got {margin!r}")
    notes: list[str] = []
    references: dict[str, str] = {}
    planned = plan_contrasts(
        df, reference=reference, scenarios=scenarios, notes=notes, references=references
    )
    rows = _usable(df)
    positions = design.run_positions(df)
    rows = rows.assign(
        _position=design.run_keys(rows).map(positions).astype(np.float64)
        if not positions.empty
        else np.nan
    )
    drift = _Drift(rows, planned)
    measured = [(p, _measure(p, rows, level, margin, drift)) for p in planned]
    adjusted = stats.holm_adjusted([m["p_value"] for _, m in measured]).tolist()
    records = []
    for (p, m), p_adj in zip(measured, adjusted, strict=True):
        m["p_adjusted"] = float(p_adj)
        m["kind"] = p.kind
        m["significant"] = bool(math.isfinite(p_adj) and p_adj <= 1.0 - level and _apart(m))
        records.append(
            {
                "scenario": p.scenario,
                "kind": p.kind.value,
                "feature": p.feature,
                "cni": p.cni,
                "control_cni": p.control_cni,
                "treatment": p.treatment,
                "control": p.control,
                "context": p.context,
                "treatment_parameters": p.treatment_parameters,
                "contrast": p.label,
                "metric": p.metric,
                **{k: v for k, v in m.items() if k not in ("why_not", "detail", "kind")},
                "verdict": _sentence(p, m),
            }
        )
    frame = pd.DataFrame(records, columns=list(VERDICT_COLUMNS))
    if not frame.empty:
        frame = frame.iloc[_grouped_order(frame)].reset_index(drop=True)
    frame.attrs["notes"] = notes
    frame.attrs["reference"] = reference_cni(df, reference) if not df.empty else ""
    frame.attrs["references"] = references
    return frame


KIND_ORDER = (
    ContrastKind.FEATURE,
    ContrastKind.OPTION,
    ContrastKind.CNI,
    ContrastKind.WEIGHTS,
    ContrastKind.OUTCOME,
)
"""Order of the groups of a verdict within a scenario."""


def _grouped_order(frame: pd.DataFrame) -> npt.NDArray[np.intp]:
    """Rows grouped by scenario, kind and feature (each in order of first appearance), then
    by a standardized effect within a group, largest first; rows without a p-value last."""
    scenario_rank = {s: i for i, s in enumerate(dict.fromkeys(frame["scenario"]))}
    feature_rank = {f: i for i, f in enumerate(dict.fromkeys(frame["feature"]))}
    kind_rank = {k.value: i for i, k in enumerate(KIND_ORDER)}
    effect = frame["effect_size"].to_numpy(dtype=np.float64)
    has_test = np.isfinite(frame["p_value"].to_numpy(dtype=np.float64))
    strength = np.where(has_test, np.where(np.isfinite(effect), effect, -0.5), -1.0)
    keys = (
        -strength,
        frame["feature"].map(feature_rank).to_numpy(),
        frame["kind"].map(kind_rank).to_numpy(),
        frame["scenario"].map(scenario_rank).to_numpy(),
    )
    return np.lexsort(keys)


def _references_text(frame: pd.DataFrame) -> str:
    """``"; references: flannel (baseline: flannel, kube-router), ..."``, or ``""``."""
    chosen: Mapping[str, str] = frame.attrs.get("references", {})
    if not chosen:
        return ""
    parts = [f"{reference} for {group}" for group, reference in chosen.items()]
    return "; CNIs compared within groups of equal data-path options, reference " + "; ".join(parts)


def verdict_lines(frame: pd.DataFrame) -> list[str]:
    """The verdict lines of :func:`verdict`'s frame, in its order (grouped by feature)."""
    return [str(text) for text in frame["verdict"]]


def verdict_summary(
    frame: pd.DataFrame, *, limit: int = SUMMARY_LINES, full_at: str = ""
) -> list[str]:
    """What ``cnibench run`` and ``pytest --report`` print at the end: a heading line, then
    :func:`verdict_lines` (the heading alone says so when there is no contrast).

    A terminal is read from its last screen, so at most ``limit`` lines are printed, chosen
    in this order: every detectable difference, then the lines whose own interval excludes 1
    though the correction leaves no detectable difference, then the rest, host-wide figures
    after all others; they are printed in :func:`verdict`'s order (grouped by feature). A
    last line counts what was left out and says where every line is (``full_at``, e.g. the
    ``cnibench report`` command of the results). The heading counts the contrasts Holm's
    correction ran over (:func:`tested_count`)."""
    if frame.empty:
        notes = [f"  {note}" for note in frame.attrs.get("notes", [])]
        return [
            "verdict: no planned contrast in these results (a feature needs its control"
            " condition, a CNI comparison a second CNI on the same condition)",
            *notes,
        ]
    if limit < 1:
        raise ConfigError(f"limit must be at least 1, got {limit!r}")
    level = float(frame["level"].iloc[0])
    tested = tested_count(frame)
    untested = len(frame) - tested
    stated = f"; {untested} more stated without a test" if untested else ""
    heading = (
        f"verdict: {tested} tested contrast(s), {CORRECTION}-corrected across these"
        f" {tested}{stated}; treatment vs control with a {100 * level:g} % CI: ratio of"
        " geometric means (×), or a difference in the metric's unit (+/-) where a side is 0,"
        " near 0 or negative, a difference of proportions for yes/no, one pooled test per"
        " split; grouped by feature"
    )
    heading += _references_text(frame)
    shown, tail = frame, []
    if len(frame) > limit:
        significant = frame["significant"].to_numpy(dtype=bool)
        detected = int(significant.sum())
        # Then the lines whose own interval excludes no difference (evidence, if not enough
        # after the correction), then the rest; a stable sort keeps the effect order within
        # each group.
        apart = np.array(
            [_apart({str(k): v for k, v in row.items()}) for row in frame.to_dict("records")],
            dtype=np.bool_,
        )
        host = frame["metric"].isin(HOST_WIDE).to_numpy(dtype=bool)
        rank = np.where(significant, 0, np.where(apart, 1, 2)) + 3 * host
        chosen = np.sort(np.argsort(rank, kind="stable")[:limit])
        shown = frame.iloc[chosen]
        left_out = len(frame) - len(shown)
        left_detected = detected - int(shown["significant"].sum())
        heading += (
            f"; the {len(shown)} that say most: {detected} detectable difference(s), then the"
            " largest effects whose own interval excludes no difference, then the rest,"
            " host-wide figures last"
        )
        rest = f"{left_out} more not shown"
        if left_detected:
            rest += f" ({left_detected} of them detectable differences)"
        else:
            rest += ", each with no detectable difference"
        if full_at:
            rest += f"; every line: {full_at}"
        tail = [f"  ... {rest}"]
    notes = frame.attrs.get("notes", [])
    if notes:
        # Never silently: a contrast the results could not form is counted, and the report
        # names each with why.
        where = f" ({full_at})" if full_at else ""
        tail.append(
            f"  {len(notes)} note(s) on what was not compared and why: see the report{where}"
        )
    return [heading + ":", *(f"  {line}" for line in verdict_lines(shown)), *tail]
