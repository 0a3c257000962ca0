"""The verdict: each scenario's planned contrasts as ratios with intervals, corrected together.

What is compared
----------------
Only what the scenarios declare (:mod:`cnibench.scenarios.base`), never every pair:

- *feature contrasts* (:attr:`Scenario.contrasts`): within one CNI, each treatment condition
  (e.g. ``gateway: on``) against the control condition whose recorded parameters equal its own
  in everything but the feature (:meth:`Contrast.is_control_of`);
- *CNI contrasts* (:attr:`Scenario.compares_cnis`): on each condition, every CNI against one
  reference CNI, the first one in the results (the first ``--cni``) unless ``reference`` names
  another; conditions are matched by their full parameters;
- *weights* (:attr:`Scenario.compares_shares_with_weights`, ``split``): each backend's observed
  share of requests against its configured share.

Each of these is made for every :attr:`Scenario.primary_metrics` that both sides recorded.

The numbers
-----------
A side's values are its successful, verified runs, minus outlier runs and trimmed exactly as in
the bar charts and tables (:func:`cnibench.stats.summarize_runs`). The ratio is treatment /
control of the truncated means (the numbers the bar charts show). Its interval and p-value are
those of ``cnibench compare``: Welch's t on the logarithms of the kept runs
(:func:`cnibench.report.compare.log_ratio_interval`, which is :func:`cnibench.stats.compare` on
the log scale), exponentiated, so it is finite and positive for any positive values. For the
weights the configured share is a constant, and the same interval becomes the one-sample t
interval of the observed shares.

Multiplicity
------------
Holm's step-down correction (:func:`cnibench.stats.holm_adjusted`) over all contrasts of one
verdict. Holm rather than Benjamini-Hochberg: every verdict line is a claim someone acts on
("the gateway costs 17 % throughput"), so the family-wise error rate is what should be
controlled (the chance that *any* line claims a difference that is not there), and Holm
controls it under any dependence between contrasts, which share control and reference runs.
Intervals are shown at their own 95 % level (simultaneous intervals from 2-3 runs would be
too wide to read); a line claims a difference only when its Holm-adjusted p-value is at most
5 %, and otherwise says "no detectable difference".
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
from cnibench.errors import ConfigError
from cnibench.records import ParamValue
from cnibench.report.compare import log_ratio_interval
from cnibench.report.data import LEVEL, TRIM_PROPORTION, ok_runs
from cnibench.scenarios import SCENARIOS
from cnibench.scenarios.base import OTHER_THAN_CONTROL, Contrast, Scenario

__all__ = [
    "CORRECTION",
    "SUMMARY_LINES",
    "VERDICT_COLUMNS",
    "ContrastKind",
    "PlannedContrast",
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
    "contrast",
    "metric",
    "unit",
    "n_treatment",
    "n_control",
    "treatment_mean",
    "control_mean",
    "ratio",
    "ci_low",
    "ci_high",
    "level",
    "p_value",
    "p_adjusted",
    "significant",
    "verdict",
)
"""Columns of :func:`verdict`, one row per contrast."""


class ContrastKind(enum.StrEnum):
    """What a contrast compares."""

    FEATURE = "feature"
    """A feature against its own control, same CNI, everything else equal."""
    CNI = "cni"
    """A CNI against the reference CNI on the same condition."""
    WEIGHTS = "weights"
    """A backend's observed share of requests against its configured share."""


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
        The feature (``"gateway"``), the CNI pair (``"routed vs vxlan"``) or the backend
        (``"share of v1"``) in words.
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
    expected_share:
        Configured share of the backend (weights only; NaN otherwise).
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
    expected_share: float = math.nan

    @property
    def label(self) -> str:
        """How a verdict line names the contrast, e.g. ``"egress gateway on vxlan"``."""
        if self.kind is ContrastKind.CNI:
            head = f"{self.scenario} {self.cni} vs reference {self.control_cni}"
        elif self.kind is ContrastKind.WEIGHTS:
            head = (
                f"{self.scenario} {self.feature} vs configured"
                f" {_percent(self.expected_share)} on {self.cni}"
            )
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


def _usable(df: pd.DataFrame) -> pd.DataFrame:
    rows = ok_runs(df)
    kept: pd.DataFrame = rows[rows["verified"].astype(bool)]
    return kept


def _conditions(rows: pd.DataFrame, scenario: str) -> list[_Condition]:
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
                planned += _on_shared_metrics(
                    scenario,
                    ContrastKind.FEATURE,
                    contrast.feature,
                    treatment,
                    control,
                    _feature_context(contrast, treatment, control),
                )
    return planned


def _on_shared_metrics(
    scenario: Scenario,
    kind: ContrastKind,
    feature: str,
    treatment: _Condition,
    control: _Condition,
    context: str,
) -> list[PlannedContrast]:
    """One contrast per primary metric of ``scenario`` both conditions measured."""
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
        for metric in scenario.primary_metrics
        if metric in treatment.metrics and metric in control.metrics
    ]


def _cni_contrasts(
    scenario: Scenario, conditions: Sequence[_Condition], reference: str
) -> list[PlannedContrast]:
    planned = []
    controls = {
        json.dumps(dict(c.parameters), sort_keys=True): c for c in conditions if c.cni == reference
    }
    for treatment in conditions:
        if treatment.cni == reference:
            continue
        control = controls.get(json.dumps(dict(treatment.parameters), sort_keys=True))
        if control is None:
            continue
        planned += _on_shared_metrics(
            scenario,
            ContrastKind.CNI,
            f"{treatment.cni} vs {reference}",  # the feature: the CNI
            treatment,
            control,
            _all_context(treatment.parameters),
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
    planned = []
    for condition in conditions:
        for backend, share in _configured_shares(condition).items():
            metric = f"share@{backend}"
            if share <= 0.0 or metric not in condition.metrics:
                # A weight-0 backend that answers fails verification: no ratio to state.
                continue
            planned.append(
                PlannedContrast(
                    scenario.name,
                    ContrastKind.WEIGHTS,
                    f"share of {backend}",
                    condition.cni,
                    condition.cni,
                    condition.condition,
                    "configured weights",
                    condition.parameters_json,
                    "",
                    _all_context(condition.parameters),
                    metric,
                    expected_share=share,
                )
            )
    return planned


def plan_contrasts(
    df: pd.DataFrame,
    *,
    reference: str | None = None,
    scenarios: Mapping[str, Scenario] | None = None,
    notes: list[str] | None = None,
) -> list[PlannedContrast]:
    """The contrasts the scenarios declare, as far as these results contain both sides.

    Parameters
    ----------
    df:
        Tidy results (:func:`cnibench.results.load_results`); only successful, verified runs
        with a finite value count.
    reference:
        Reference CNI (:func:`reference_cni`; default: the first measured).
    scenarios:
        Scenario registry holding the declarations (default
        :data:`cnibench.scenarios.SCENARIOS`).
    notes:
        If given, receives one line per treatment condition that could not be paired.

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
    planned: list[PlannedContrast] = []
    for name in dict.fromkeys(str(s) for s in rows["scenario"]):
        scenario = registry.get(name)
        if scenario is None:
            found.append(f"{name}: no scenario declares its contrasts; not in the verdict")
            continue
        conditions = _conditions(rows, name)
        planned += _feature_contrasts(scenario, conditions, found)
        if scenario.compares_cnis:
            planned += _cni_contrasts(scenario, conditions, chosen)
        if scenario.compares_shares_with_weights:
            planned += _weight_contrasts(scenario, conditions)
    return planned


# --------------------------------------------------------------------------------------------
# Statistics
# --------------------------------------------------------------------------------------------


def _kept(values: npt.NDArray[np.float64], proportion: float, level: float) -> tuple[Any, float]:
    """The runs a summary keeps (outliers out, then trimmed) and their truncated mean."""
    summary = stats.summarize_runs(values, proportion=proportion, level=level)
    out = {outlier.index for outlier in summary.outliers}
    kept = np.asarray([v for i, v in enumerate(values) if i not in out], dtype=np.float64)
    return stats.trimmed_sample(kept, proportion=proportion), summary.mean


def _side(
    rows: pd.DataFrame, cni: str, condition: str, parameters: str, metric: str
) -> tuple[npt.NDArray[np.float64], str]:
    mask = (
        (rows["cni"] == cni)
        & (rows["condition"] == condition)
        & (rows["parameters"] == parameters)
        & (rows["metric"] == metric)
    )
    chosen = rows[mask].sort_values(["time", "run_id"], kind="stable")
    units = [str(u) for u in dict.fromkeys(chosen["unit"])]
    return chosen["value"].to_numpy(dtype=np.float64), units[0] if units else ""


def _measure(
    planned: PlannedContrast, rows: pd.DataFrame, proportion: float, level: float
) -> dict[str, Any]:
    scenario_rows = rows[rows["scenario"] == planned.scenario]
    treated, unit = _side(
        scenario_rows, planned.cni, planned.treatment, planned.treatment_parameters, planned.metric
    )
    treatment, treatment_mean = _kept(treated, proportion, level)
    if planned.kind is ContrastKind.WEIGHTS:
        control_mean = planned.expected_share
        # A constant control: Welch's interval is then the one-sample t interval.
        control = np.full(max(treatment.size, 2), control_mean)
        n_control = 0
    else:
        controlled, _ = _side(
            scenario_rows,
            planned.control_cni,
            planned.control,
            planned.control_parameters,
            planned.metric,
        )
        control, control_mean = _kept(controlled, proportion, level)
        n_control = int(control.size)
    row: dict[str, Any] = {
        "unit": unit,
        "n_treatment": int(treatment.size),
        "n_control": n_control,
        "treatment_mean": treatment_mean,
        "control_mean": control_mean,
        "ratio": math.nan,
        "ci_low": math.nan,
        "ci_high": math.nan,
        "level": level,
        "p_value": math.nan,
        "why_not": "",
    }
    if treatment_mean > 0 and control_mean > 0:
        row["ratio"] = treatment_mean / control_mean
    if treatment.size < 2 or (n_control < 2 and planned.kind is not ContrastKind.WEIGHTS):
        row["why_not"] = "fewer than 2 runs on a side"
        return row
    if np.any(treatment <= 0) or np.any(control <= 0):
        row["why_not"] = "values that are not positive, no ratio"
        row["ratio"] = math.nan
        return row
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", stats.DegenerateDataWarning)
        # scipy warns about precision with nearly equal samples; the interval says it.
        warnings.simplefilter("ignore", RuntimeWarning)
        interval = log_ratio_interval(control, treatment, level=level)
    if interval.low == interval.high:
        row["why_not"] = "identical runs on each side, no interval"
        return row
    row.update(ci_low=interval.low, ci_high=interval.high, p_value=interval.p_value)
    return row


# --------------------------------------------------------------------------------------------
# Words
# --------------------------------------------------------------------------------------------


def _percent(share: float) -> str:
    return f"{100.0 * share:.3g} %"


def _number(value: float, *, digits: int = 2) -> str:
    if value >= 100:
        return f"{value:.0f}"
    if value >= 10:
        return f"{value:.1f}"
    if value >= 0.01:
        return f"{value:.{digits}f}"
    # Two significant digits, never in exponent notation: "CI 0.0000085-35925" reads as a
    # (uselessly wide) interval, "CI 8.5e-06-35925" as a typo.
    return np.format_float_positional(value, precision=2, fractional=False, trim="-")


def _digits(low: float, high: float) -> int:
    """Decimals that keep an interval's bounds apart (at least 2, at most 6): a narrow
    interval must not print as "1.00-1.00"."""
    digits = 2
    while digits < 6 and 10.0**-digits > (high - low) / 2.0:
        digits += 1
    return digits


def _n_text(row: Mapping[str, Any]) -> str:
    if row["kind"] == ContrastKind.WEIGHTS:
        return f"n = {row['n_treatment']} runs"
    return f"n = {row['n_treatment']} vs {row['n_control']}"


def _sentence(planned: PlannedContrast, row: Mapping[str, Any]) -> str:
    head = f"{planned.label}: {planned.metric}"
    level = f"{100.0 * float(row['level']):g} %"
    n = _n_text(row)
    if row["why_not"]:
        if math.isfinite(row["ratio"]):
            return f"{head} ×{_number(row['ratio'])} ({row['why_not']}, {n})"
        return f"{head} not compared ({row['why_not']}, {n})"
    low, high, ratio = float(row["ci_low"]), float(row["ci_high"]), float(row["ratio"])
    digits = _digits(low, high)
    ci = f"{_number(low, digits=digits)}-{_number(high, digits=digits)}"
    if low <= 1.0 <= high:
        return f"{head} no detectable difference (CI {ci}, {n})"
    stated = f"{head} ×{_number(ratio, digits=digits)} ({level} CI {ci}, {n})"
    if not row["significant"]:
        return (
            f"{stated}, but no detectable difference after {CORRECTION}'s correction"
            f" (adjusted p = {row['p_adjusted']:.2g})"
        )
    return stated


# --------------------------------------------------------------------------------------------
# Public entry points
# --------------------------------------------------------------------------------------------


def verdict(
    df: pd.DataFrame,
    *,
    reference: str | None = None,
    level: float = LEVEL,
    proportion: float = TRIM_PROPORTION,
    scenarios: Mapping[str, Scenario] | None = None,
) -> pd.DataFrame:
    """The planned contrasts of a result set as a tidy DataFrame, largest effect first.

    Parameters
    ----------
    df:
        Tidy results (:func:`cnibench.results.load_results`).
    reference:
        CNI every other CNI is compared with (default: the first measured, i.e. the first
        ``--cni``).
    level:
        Confidence level of the intervals and of the corrected test, in (0, 1).
    proportion:
        Fraction trimmed from each end of each side (as in the bar charts).
    scenarios:
        Registry with the declarations (default :data:`cnibench.scenarios.SCENARIOS`).

    Returns
    -------
    pandas.DataFrame
        One row per contrast (:func:`plan_contrasts`), columns :data:`VERDICT_COLUMNS`:
        ``scenario``; ``kind`` (:class:`ContrastKind`); ``feature``; ``cni`` and
        ``control_cni``; ``treatment`` and ``control`` (condition ids); ``context``;
        ``contrast`` (how the line names it, e.g. ``"egress gateway on vxlan"``);
        ``metric`` and ``unit``; ``n_treatment``/``n_control`` (runs kept; ``n_control`` is 0
        for weights); ``treatment_mean``/``control_mean`` (truncated means in ``unit``; the
        configured share for weights); ``ratio`` (treatment / control of the truncated means);
        ``ci_low``/``ci_high`` (Welch t interval on the log scale; NaN where there is none);
        ``level``; ``p_value`` (Welch's, log scale) and ``p_adjusted`` (Holm's, over all rows
        with a p-value); ``significant`` (``p_adjusted <= 1 - level``) and ``verdict`` (the
        line). Sorted by effect size, ``|log ratio|``, largest first; rows without an
        interval last. The frame's ``attrs["notes"]`` lists treatment conditions that could
        not be paired, ``attrs["reference"]`` the reference CNI.

    Raises
    ------
    ConfigError
        Bad ``reference``, ``level`` or ``proportion``, or unreadable parameters.

    Examples
    --------
    >>> from cnibench.results import load_results
    >>> from cnibench import report
    >>> table = report.verdict(load_results("results/"))  # doctest: +SKIP
    >>> table[["verdict", "p_adjusted"]]  # doctest: +SKIP
    """
    if isinstance(level, bool) or not isinstance(level, int | float) or not 0.0 < level < 1.0:
        raise ConfigError(f"level must be strictly between 0 and 1, got {level!r}")
    if not isinstance(proportion, int | float) or not 0.0 <= proportion < 0.5:
        raise ConfigError(f"proportion must be in [0, 0.5), got {proportion!r}")
    notes: list[str] = []
    planned = plan_contrasts(df, reference=reference, scenarios=scenarios, notes=notes)
    rows = _usable(df)
    measured = [(p, _measure(p, rows, proportion, level)) for p in planned]
    adjusted = stats.holm_adjusted([m["p_value"] for _, m in measured]).tolist()
    records = []
    for (p, m), p_adj in zip(measured, adjusted, strict=True):
        m["p_adjusted"] = float(p_adj)
        m["significant"] = bool(
            math.isfinite(p_adj)
            and p_adj <= 1.0 - level
            and not (m["ci_low"] <= 1.0 <= m["ci_high"])
        )
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
                "contrast": p.label,
                "metric": p.metric,
                **{k: v for k, v in m.items() if k != "why_not"},
                "verdict": _sentence(p, {**m, "kind": p.kind}),
            }
        )
    frame = pd.DataFrame(records, columns=list(VERDICT_COLUMNS))
    if not frame.empty:
        ratio = frame["ratio"].to_numpy(dtype=np.float64)
        has_interval = np.isfinite(frame["ci_low"].to_numpy(dtype=np.float64))
        with np.errstate(divide="ignore", invalid="ignore"):
            effect = np.where(has_interval & (ratio > 0), np.abs(np.log(ratio)), -1.0)
        order = np.argsort(-effect, kind="stable")
        frame = frame.iloc[order].reset_index(drop=True)
    frame.attrs["notes"] = notes
    frame.attrs["reference"] = reference_cni(df, reference) if not df.empty else ""
    return frame


def verdict_lines(frame: pd.DataFrame) -> list[str]:
    """The verdict lines of :func:`verdict`'s frame, in its order (largest effect first)."""
    return [str(text) for text in frame["verdict"]]


def verdict_summary(
    frame: pd.DataFrame, *, limit: int = SUMMARY_LINES, full_at: str = ""
) -> list[str]:
    """What ``cnibench run`` and ``pytest --report`` print at the end: a heading line, then
    :func:`verdict_lines` (the heading alone says so when there is no contrast).

    A terminal is read from its last screen, so at most ``limit`` lines are printed: every
    detectable difference first, then the lines whose own interval excludes 1 though the
    correction leaves no detectable difference, then the rest, each group largest effect
    first; a last line counts what was left out and says where every line is (``full_at``,
    e.g. the ``cnibench report`` command of the results). A session with a few contrasts
    prints them all, in :func:`verdict`'s order."""
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
    heading = (
        f"verdict: {len(frame)} planned contrast(s), ratio treatment / control of truncated"
        f" means with its {100 * level:g} % CI, {CORRECTION}-corrected, largest effect first"
    )
    cnis = set(frame["cni"]) | set(frame["control_cni"])
    if len(cnis) > 1:
        heading += f"; reference CNI {frame.attrs.get('reference', '')}"
    shown, tail = frame, []
    if len(frame) > limit:
        significant = frame["significant"].to_numpy(dtype=bool)
        detected = int(significant.sum())
        low = frame["ci_low"].to_numpy(dtype=np.float64)
        high = frame["ci_high"].to_numpy(dtype=np.float64)
        # Then the lines whose own interval excludes 1 (evidence, if not enough after the
        # correction), then the rest; a stable sort keeps the effect order within each group.
        apart = (low > 1.0) | (high < 1.0)
        rank = np.where(significant, 0, np.where(apart, 1, 2))
        shown = frame.iloc[np.argsort(rank, kind="stable")[:limit]]
        left_out = len(frame) - len(shown)
        left_detected = detected - int(shown["significant"].sum())
        heading += (
            f"; the {len(shown)} that say most: {detected} detectable difference(s), then the"
            " largest effects whose own interval excludes 1, then the rest"
        )
        rest = f"{left_out} more not shown"
        if left_detected:
            rest += f" ({left_detected} of them detectable differences)"
        else:
            rest += ", each with no detectable difference"
        if full_at:
            rest += f"; every line: {full_at}"
        tail = [f"  ... {rest}"]
    return [heading + ":", *(f"  {line}" for line in verdict_lines(shown)), *tail]
