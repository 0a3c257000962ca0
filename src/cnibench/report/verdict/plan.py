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

*Option contrasts* (two configurations of one CNI that differ in one label factor,
:mod:`cnibench.report.configs`) pair conditions with equal parameters; a Service-proxy
contrast pairs only conditions whose traffic goes to a Service
(:meth:`Scenario.through_service`), equal but for the proxy they name, and says once per pair
that the others are not compared. A contrast whose configurations also differ in a recorded
data-path setting (:func:`cnibench.report.configs.differing_settings`: Cilium's masquerading
under kube-proxy replacement but not in kube-proxy mode) is planned as "not compared: differs
in ..." (:attr:`PlannedContrast.not_compared`): a line without a number, outside its
question's family.
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
    INSTRUMENT_WORDS,
    SERVICE_PROXY_FACTOR,
    Configuration,
    configuration,
    differing_factors,
    differing_settings,
    factor_words,
    instrumented,
    recorded_implementation,
    recorded_settings,
    settings_words,
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
from cnibench.report.labels import feature_words
from cnibench.report.verdict.formatting import percent_text
from cnibench.scenarios.base import OTHER_THAN_CONTROL, Condition, Contrast, Scenario
from cnibench.scenarios.egress import OFFERED_LOAD


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
    backend:
        The backend the treatment ran on (``"lab"``, ``"kube"``; ``""`` when not recorded).
    not_compared:
        Why the two sides are not compared although the contrast is planned, e.g. ``"differs
        in masquerade (bpf vs iptables)"``: its line says so and nothing else; ``""`` for a
        contrast that is measured.
    implementation:
        What ran the treatment's encryption, as its sessions' fingerprints recorded it
        (:func:`cnibench.report.configs.recorded_implementation`: the lab's ``"kernel"`` or
        ``"wireguard-go"``; ``""`` when not recorded).
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
    backend: str = ""
    not_compared: str = ""
    implementation: str = ""

    @property
    def label(self) -> str:
        """How a verdict line names the contrast, e.g. ``"egress gateway on vxlan"``, or what
        ran where the backend and its records say more (:func:`cnibench.report.labels.
        feature_words`: ``"WireGuard (userspace wireguard-go) on vxlan"`` where the lab
        recorded wireguard-go)."""
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
            words = feature_words(
                self.scenario, self.feature, self.backend, implementations=[self.implementation]
            )
            head = f"{words or f'{self.scenario} {self.feature}'} on {self.cni}"
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
    backend: str = ""
    implementation: str = ""


def usable_rows(df: pd.DataFrame) -> pd.DataFrame:
    rows = ok_runs(with_derived_metrics(df))
    kept: pd.DataFrame = rows[rows["verified"].astype(bool)]
    return kept


def _configurations(
    rows: pd.DataFrame, environments: pd.DataFrame | None, notes: list[str]
) -> dict[str, Configuration]:
    """Each CNI label's data-path factors, from its records' backend and options (or, for
    frames without them, from the label itself), and its settings from the fingerprints of
    the environments its records name (none without ``environments``); a configuration whose
    cluster reported a setting otherwise than asked is named in ``notes``."""
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
        config = configuration(label, backend=backend, options=options)
        fingerprints = _fingerprints(group, environments)
        if fingerprints:
            recorded = recorded_settings(
                config.name,
                service_proxy=config.factor(SERVICE_PROXY_FACTOR) if backend == "kube" else "",
                fingerprints=fingerprints,
            )
            config = configuration(
                label, backend=backend, options=options, settings=recorded.settings
            )
            if recorded.mismatches:
                notes.append(
                    f"{label}: its cluster reported its data path otherwise than asked"
                    f" ({'; '.join(recorded.mismatches)}); its contrasts go by what it reported"
                )
        out[label] = config
    return out


def _fingerprints(
    group: pd.DataFrame, environments: pd.DataFrame | None
) -> list[dict[str, object]]:
    """The environment fingerprints (rows of ``environments``) of ``group``'s records."""
    if environments is None or environments.empty or "environment_id" not in group.columns:
        return []
    wanted = set(group["environment_id"].astype(str))
    mine = environments[environments["environment_id"].astype(str).isin(wanted)]
    return [
        {str(k): v for k, v in row.items()}
        for row in mine.drop_duplicates("environment_id").to_dict("records")
    ]


def _conditions(
    rows: pd.DataFrame,
    scenario: str,
    configs: Mapping[str, Configuration],
    environments: pd.DataFrame | None,
) -> list[_Condition]:
    """Measured conditions of ``scenario`` in order of first appearance, per CNI, each with
    what ran its encryption as the fingerprints of its own records say (the lab's WireGuard
    is the kernel's or wireguard-go per session)."""
    mine = rows[rows["scenario"] == scenario]
    out = []
    # One reading per set of sessions, not per condition: a CNI's conditions share them.
    implementations: dict[frozenset[str], str] = {}

    def implementation(group: pd.DataFrame) -> str:
        ids = (
            frozenset(group["environment_id"].astype(str))
            if "environment_id" in group.columns
            else frozenset()
        )
        if ids not in implementations:
            implementations[ids] = recorded_implementation(_fingerprints(group, environments))
        return implementations[ids]

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
                str(group["backend"].iloc[0]) if "backend" in group.columns else "",
                implementation(group),
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
        f"{scenario.name} on {condition.cni}: {', '.join(moved)} not compared (napi=threaded:"
        f" {INSTRUMENT_WORDS}; it slows throughput and latency, so they are stated on a"
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
    *,
    not_compared: str = "",
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
            backend=treatment.backend,
            not_compared=not_compared,
            implementation=treatment.implementation,
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
                # Two configurations of one CNI equal in every factor on this path may still
                # have recorded different settings (a feature that switched one on).
                extra = (
                    differing_settings(member, chosen, factor="")
                    if member.name == chosen.name
                    else []
                )
                planned += _on_metrics(
                    scenario,
                    ContrastKind.CNI,
                    f"{treatment.cni} vs {chosen.label}",
                    treatment,
                    control,
                    _all_context(treatment.parameters),
                    _compared_metrics(scenario, treatment, control),
                    not_compared=(
                        f"differs in {settings_words(extra, member, chosen)}" if extra else ""
                    ),
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
                            scenario, conditions, first, second, differing[0], notes
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
    notes: list[str],
) -> list[PlannedContrast]:
    """One option of one CNI against its default, condition by condition: on conditions
    with equal parameters, or for the Service proxy on conditions through a Service equal but
    for the proxy they name (the others said once in ``notes``); "not compared: differs in
    ..." where the two configurations recorded another data-path setting differently."""
    default = CONTROL_VALUES.get(factor, "")
    control, treatment = (a, b) if b.factor(factor) != default else (b, a)
    feature = f"{factor} {treatment.factor(factor) or 'none'} vs {control.factor(factor) or 'none'}"
    if factor == INSTRUMENT_FACTOR:
        feature += " (threaded receive, to count each node's CPU)"
    leave_out = (scenario.proxy_parameter,) if factor == SERVICE_PROXY_FACTOR else ()

    def key(parameters: Mapping[str, ParamValue]) -> str:
        return _key({k: v for k, v in parameters.items() if k not in leave_out})

    sides = [c for c in conditions if c.cni == treatment.label]
    if factor == SERVICE_PROXY_FACTOR:
        untouched = [c for c in sides if not scenario.through_service(c.parameters)]
        sides = [c for c in sides if scenario.through_service(c.parameters)]
        if untouched:
            notes.append(
                f"{scenario.name} {feature} on {treatment.name}:"
                f" {', '.join(c.condition for c in untouched)} not compared: the service proxy"
                " handles none of their traffic, which goes to no Service"
            )
    extra = differing_settings(treatment, control, factor=factor)
    not_compared = f"differs in {settings_words(extra, treatment, control)}" if extra else ""
    controls = {key(c.parameters): c for c in conditions if c.cni == control.label}
    planned: list[PlannedContrast] = []
    for side in sides:
        other = controls.get(key(side.parameters))
        if other is None:
            continue
        if (OFFERED_LOAD in side.metrics) != (OFFERED_LOAD in other.metrics):
            paced = side if OFFERED_LOAD in side.metrics else other
            notes.append(
                f"{scenario.name} {feature} on {treatment.name} ({side.condition}) not compared:"
                f" {paced.cni}'s runs were paced (a fixed offered load, to count CPU), the"
                " other's ran as fast as they could"
            )
            continue
        planned += _on_metrics(
            scenario,
            ContrastKind.OPTION,
            feature,
            side,
            other,
            _all_context(side.parameters, leave_out=leave_out),
            _compared_metrics(
                scenario, side, other, instrument_contrast=factor == INSTRUMENT_FACTOR
            ),
            not_compared=not_compared,
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
    environments: pd.DataFrame | None = None,
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
        pair of configurations confounded by more than one factor, per instrumented
        configuration whose throughput and latency are not compared, per Service-proxy
        contrast whose conditions without a Service are not compared, and per configuration
        whose cluster reported a setting otherwise than asked.
    references:
        If given, receives the reference chosen for each group of comparable
        configurations: ``{"<scenario>: <labels>": reference}``.
    environments:
        The environment fingerprints of the results' sessions
        (:func:`cnibench.results.load_environments`), from which each configuration's
        recorded data-path settings are read (:func:`cnibench.report.configs.
        recorded_settings`), and what ran each treatment's encryption
        (:attr:`PlannedContrast.implementation`); ``None``: none are known, so no option
        contrast is held back for a setting its label does not name, and no label names the
        lab's WireGuard implementation.

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
    from cnibench.scenarios import SCENARIOS  # as registered now (a user may add one)

    registry = SCENARIOS if scenarios is None else scenarios
    rows = usable_rows(df)
    if rows.empty:
        return []
    chosen = reference_cni(df, reference)
    found = [] if notes is None else notes
    chosen_references = {} if references is None else references
    configs = _configurations(rows, environments, found)
    planned: list[PlannedContrast] = []
    for name in dict.fromkeys(str(s) for s in rows["scenario"]):
        scenario = registry.get(name)
        if scenario is None:
            found.append(f"{name}: no scenario declares its contrasts; not in the verdict")
            continue
        conditions = _conditions(rows, name, configs, environments)
        planned += _feature_contrasts(scenario, conditions, found)
        if scenario.compares_cnis:
            planned += _cni_contrasts(scenario, conditions, chosen, found, chosen_references)
        if scenario.compares_shares_with_weights:
            planned += _weight_contrasts(scenario, conditions)
        yes_no = set(rows.loc[(rows["scenario"] == name) & (rows["unit"] == "bool"), "metric"])
        planned += _outcomes(scenario, conditions, yes_no, planned)
    return planned
