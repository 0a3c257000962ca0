"""The numbers of each contrast: its scale, estimate, interval, p-value and power, with
the design its runs were taken in (one step of :mod:`cnibench.report.verdict`).

The numbers
-----------
A side's values are all its successful, verified runs; outlying runs are flagged in the
tables and figures, never dropped. The scale (:class:`Scale`) follows the data:

- *ratio* (positive quantities): the ratio of geometric means, treatment / control, with the
  t interval of the difference of mean logarithms, exponentiated: paired by round where both
  sides ran in the same rounds (below), else Welch's
  (:func:`cnibench.stats.ratios.log_ratio_interval`, as ``cnibench compare``). The printed
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
  many runs (:func:`cnibench.stats.skew_detection_plan`, the test's own power, averaged over
  what the dispersion may be given its estimate from these runs), or that no number of
  requests does and how many runs would.

How the runs were taken
-----------------------
Read from the records alone (``session_id``, ``time``; :mod:`cnibench.report.design`), per
contrast:

- *interleaved* (both sides in the same session(s), their runs alternating in rounds, as
  ``cnibench run`` takes them): each round (``session_id/repetition``) holds one run of each
  side, and the contrast is the paired t of the within-round differences (of logarithms for a
  ratio; :mod:`cnibench.stats.paired`), so whatever moved a whole round drops out. A round
  with one side missing (a failed or unverified run) leaves the contrast unpaired (Welch over
  every run), and ``pairing`` says so;
- *sequential* (in the same session, one side's runs after the other's): runs drift, and the
  drift then falls on one side only. The drift is bounded as an AR(1) over the session's run
  order from the residuals of each side around its mean, pooled over the sides and every
  metric of the pair: the largest coefficient those runs do not rule out
  (:func:`cnibench.report.design.drift_bound`; a few runs cannot tell no drift from 0.4, and
  the interval allows for what they cannot rule out), and the interval is widened by the
  variance that drift adds to the difference of means, with the degrees of freedom its
  effective number of runs leaves (:func:`cnibench.report.design.drift_widening`). The
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
"""

from __future__ import annotations

import enum
import json
import math
import warnings
from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt
import pandas as pd

from cnibench import stats
from cnibench.errors import CnibenchError
from cnibench.records import summary_scale
from cnibench.report import design
from cnibench.report.verdict.formatting import interval_text, share_text
from cnibench.report.verdict.plan import ContrastKind, PlannedContrast
from cnibench.stats.ratios import log_ratio_interval

RATIO_SPAN = 10.0
"""A treatment more than this factor above its (positive) control is compared as a
difference in the metric's unit: a near-zero control makes a ratio (×138) mean little and
head the list, where "+0.37 cores" says what happened."""

DEFAULT_MARGIN = 0.05
"""The relative margin of "same within ±5 %" (two one-sided tests on the interval that
carries the call) and of the runs an undecided line names, when no ``--margin`` is given."""

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
    rounds: tuple[str, ...] = ()
    if "repetition" in chosen.columns and chosen["repetition"].notna().all():
        rounds = tuple(
            f"{session}/{int(repetition)}"
            for session, repetition in zip(sessions, chosen["repetition"], strict=True)
        )
    return design.SideRuns(values, sessions, positions, rounds), units[0] if units else ""


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
        "pairing": "",
        "paired": False,
        "sd": math.nan,
        "sd_df": math.nan,
        "counts": (),
        "call_level": level,
        "saturated": 0,
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
        row.update(
            effect_size=abs(math.log(interval.ratio)) / sd,
            sd=sd,
            sd_df=float(control.size + treatment.size - 2),
        )


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
        row.update(
            effect_size=abs(comparison.difference) / sd,
            sd=sd,
            sd_df=float(control.size + treatment.size - 2),
        )


def _measure_paired(
    row: dict[str, Any], pairing: design.Pairing, scale: Scale, level: float
) -> None:
    """An interleaved contrast from its within-round differences (:mod:`cnibench.stats.paired`):
    what moved a whole round moves both of its runs and drops out."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", stats.DegenerateDataWarning)
        if scale is Scale.RATIO:
            result = stats.paired_log_ratio(pairing.control, pairing.treatment, level=level)
            estimate, (low, high) = result.ratio, result.ratio_interval
            row["ratio"] = estimate
        else:
            result = stats.paired_difference(pairing.control, pairing.treatment, level=level)
            estimate, low, high = result.estimate, result.low, result.high
    row.update(estimate=estimate, paired=True, pairing=f"{result.n_pairs} rounds, paired")
    if not math.isfinite(result.p_value):
        row["why_not"] = "the same difference in every round, no interval"
        return
    row.update(
        ci_low=low,
        ci_high=high,
        p_value=result.p_value,
        df=result.df,
        sd=result.sd,
        sd_df=result.df,
        # On the scale of one run's noise (a difference of two runs has sqrt(2) times it), so
        # that paired and unpaired lines order alike.
        effect_size=abs(result.estimate) / (result.sd / math.sqrt(2.0)),
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
    row["counts"] = (kc, int(control.size), kt, int(treatment.size))
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
        # Averaged over what the dispersion may be given its estimate: planned from the
        # estimate as if it were the truth, the advice delivered 0.78 instead of 0.9 when
        # shares vary 2 points between 5 runs (bench/coverage.py, section split-advice).
        estimated = test.dispersion_df > 0
        plan = stats.skew_detection_plan(
            weights,
            runs=test.runs,
            requests_per_run=test.n / test.runs,
            dispersion=test.dispersion_estimate if estimated else test.dispersion,
            dispersion_df=test.dispersion_df if estimated else math.inf,
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
        f"{name} {share_text(test.observed[name])} (Goodman"
        f" {share_text(test.intervals[name][0])}-{share_text(test.intervals[name][1])},"
        f" configured {share_text(test.expected[name])})"
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


class Drift:
    """The drift of each pair of conditions, bounded once from all the metrics their
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
            f"sequential, drift too strong for an interval at this design (AR(1) up to"
            f" {rho:.2f} not ruled out: the runs would be worth about {effective:.1f}"
            " independent ones);"
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
    df = float(row["df"])
    low, high, p_value = design.widened(
        centre, low, high, df, factor=factor, df_cap=df_cap, level=level
    )
    if row["scale"] == Scale.RATIO:
        low, high = math.exp(low), math.exp(high)
    kept = max(1.0, min(df, df_cap))
    # The drift's variance is in the SD the runs advice reads, its df in the interval's.
    row.update(
        ci_low=low,
        ci_high=high,
        p_value=p_value,
        df=kept,
        sd=float(row["sd"]) * math.sqrt(factor),
        sd_df=min(float(row["sd_df"]), kept),
    )


def _across_sessions(
    row: dict[str, Any],
    control: design.SideRuns,
    treatment: design.SideRuns,
    scale: Scale,
    level: float,
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
        _measure_ratio(row, geometric[0], geometric[1], level)
    elif scale is Scale.DIFFERENCE:
        means = [design.session_means(side) for side in (control, treatment)]
        _measure_difference(row, means[0], means[1], level)
    else:
        # Each session's share of yes, compared as a difference of means over sessions
        # (Welch's, not Newcombe's: the sessions, not the runs, are the units).
        means = [design.session_means(side) for side in (control, treatment)]
        row.update(scale=Scale.DIFFERENCE.value, unit="share of yes")
        _measure_difference(row, means[0], means[1], level)


def _saturated_count(rows: pd.DataFrame, planned: PlannedContrast, sessions: set[str]) -> int:
    """How many runs of the contrast's two sides (in ``sessions``) saturated their host: the
    ``_saturated`` rows :func:`cnibench.report.verdict.verdict` marks."""
    if "_saturated" not in rows.columns:
        return 0
    mask = np.zeros(len(rows), dtype=bool)
    for cni, condition, parameters in (
        (planned.cni, planned.treatment, planned.treatment_parameters),
        (planned.control_cni, planned.control, planned.control_parameters),
    ):
        mask |= (
            (rows["cni"] == cni)
            & (rows["condition"] == condition)
            & (rows["parameters"] == parameters)
            & (rows["metric"] == planned.metric)
        ).to_numpy(dtype=bool)
    mask &= rows["_saturated"].to_numpy(dtype=bool)
    if "session_id" in rows.columns:
        mask &= rows["session_id"].astype(str).isin(sessions).to_numpy(dtype=bool)
    chosen = rows[mask]
    if "session_id" not in chosen.columns:
        return int(chosen["run_id"].nunique())
    return len(set(design.run_keys(chosen)))


def planned_looks(rows: pd.DataFrame, planned: PlannedContrast) -> int:
    """The most looks either side's runs record (``looks``: a session run until decided);
    1 without the column."""
    if "looks" not in rows.columns:
        return 1
    sides = ((rows["cni"] == planned.cni) & (rows["condition"] == planned.treatment)) | (
        (rows["cni"] == planned.control_cni) & (rows["condition"] == planned.control)
    )
    values = pd.to_numeric(rows.loc[sides, "looks"], errors="coerce").dropna()
    return max(1, int(values.max())) if not values.empty else 1


def measure_contrast(
    planned: PlannedContrast,
    rows: pd.DataFrame,
    level: float,
    drift: Drift | None = None,
) -> dict[str, Any]:
    scenario_rows = rows[rows["scenario"] == planned.scenario]
    row = _empty_row("", level)
    # The looks its sides' runs were planned with (runs until decided), read once here: the
    # decision tests at 5 % over them, and below they say whether rounds are cut to shared.
    row["looks"] = planned_looks(scenario_rows, planned)
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
    if row["looks"] > 1:
        control_runs, treatment_runs, alone = design.shared_rounds(control_runs, treatment_runs)
        if alone:
            ran_on = f"{alone} run(s) of one side after the other stopped left out"
            left_out = "; ".join(part for part in (left_out, ran_on) if part)
    treatment, control = treatment_runs.values, control_runs.values
    sessions = {*control_runs.sessions, *treatment_runs.sessions}
    row["saturated"] = _saturated_count(scenario_rows, planned, sessions)
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
        _across_sessions(row, control_runs, treatment_runs, scale, level)
        return row
    if shape is design.Layout.INTERLEAVED and scale is not Scale.PROPORTION:
        pairing = design.rounds_paired(control_runs, treatment_runs)
        if pairing.paired:
            _measure_paired(row, pairing, scale, level)
            if left_out:
                row["drift"] = left_out
            return row
        if pairing.incomplete:
            row["pairing"] = (
                f"unpaired: {len(pairing.incomplete)} round(s) without one run of each side"
            )
    if scale is Scale.RATIO:
        _measure_ratio(row, control, treatment, level)
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
