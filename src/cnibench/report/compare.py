"""Regression gate between two result sets: is the candidate measurably worse than the baseline?

``cnibench compare BASELINE CANDIDATE`` and the pytest plugin's ``--compare-to`` both call
:func:`compare_result_sets`; a notebook calls :func:`compare_results` for the same numbers as a
tidy DataFrame. Nothing here plots.

What is compared
----------------
Successful, verified runs with a finite value (:func:`comparable_runs`). Conditions are matched
by :data:`MATCH_COLUMNS` (scenario, CNI, condition id and parameters); CNI version, environment
and options may differ, since telling those apart is what a regression gate is for. Within a
matched condition every metric of :data:`METRIC_DIRECTIONS` recorded on both sides is compared;
that table is the one place that says which metrics matter and whether higher or lower is
better. Metrics outside it (counts, split shares, per-node receive rates, ``throughput_sender``)
are not gated.

The interval
------------
Each side's values are trimmed as everywhere in cnibench (:data:`TRIM_PROPORTION` per end,
:func:`cnibench.stats.trimmed_sample`; with fewer than 10 runs nothing is cut). The ratio is
candidate / baseline of the geometric means, and its interval is the Welch t interval of the
difference of the mean logarithms (:func:`cnibench.stats.compare` on ``log(values)``),
exponentiated (:func:`log_ratio_interval`). The Fieller interval that
:func:`cnibench.stats.compare` gives for a ratio of arithmetic means is unbounded when the
baseline mean is not clearly non-zero (two runs far apart are enough) and its lower bound can
be negative; the log-scale interval is finite and positive for any positive values, is
symmetric in the sense that swapping baseline and candidate inverts it exactly, and is exact
when run-to-run variation is multiplicative (log-normal). With run-to-run spreads of a few per
cent the geometric ratio equals the ratio of truncated means to within a fraction of a per cent.

The gate
--------
With threshold ``t`` (:func:`parse_threshold`), a metric *regressed* when its whole interval lies
beyond the threshold on the worse side: ``ci_high < 1 - t`` for higher-is-better metrics,
``ci_low > 1 + t`` for lower-is-better ones. Each interval is a 95 % interval on its own; no
multiplicity correction is applied (a correction makes intervals from 2-3 runs so wide that no
gate could ever fire), so a regression needs both a significant change and one larger than the
threshold. A comparison with fewer than 2 runs on a side, or non-positive values, gets verdict
``n/a`` and never fails the gate.
"""

from __future__ import annotations

import enum
import math
import re
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Any

import numpy as np
import numpy.typing as npt
import pandas as pd

from cnibench import stats
from cnibench.errors import ConfigError, InsufficientDataError, ResultsError
from cnibench.report.data import LEVEL, TRIM_PROPORTION, ok_runs
from cnibench.report.scrub import scrub_text
from cnibench.results import ALL_SESSIONS, atomic_write_bytes, load_results

__all__ = [
    "COMPARISON_COLUMNS",
    "DEFAULT_THRESHOLD",
    "MATCH_COLUMNS",
    "METRIC_DIRECTIONS",
    "ConditionKey",
    "Direction",
    "RatioInterval",
    "ResultComparison",
    "Verdict",
    "comparable_runs",
    "compare_result_sets",
    "compare_results",
    "format_threshold",
    "load_result_set",
    "log_ratio_interval",
    "parse_threshold",
    "write_markdown",
]


class Direction(enum.StrEnum):
    """Which way a metric gets better."""

    HIGHER_IS_BETTER = "higher is better"
    LOWER_IS_BETTER = "lower is better"


class Verdict(enum.StrEnum):
    """Outcome of one (condition, metric) comparison, worst first."""

    REGRESSION = "REGRESSION"
    """The whole interval is worse than the threshold: fails the gate."""
    WORSE = "worse"
    """The whole interval is on the worse side of 1, but not all of it beyond the threshold."""
    NO_CHANGE = "no detectable change"
    """The interval covers 1."""
    BETTER = "better"
    """The whole interval is on the better side of 1."""
    NOT_APPLICABLE = "n/a"
    """No interval: too few runs, or values that are not positive (see ``note``)."""


_HIGHER = Direction.HIGHER_IS_BETTER
_LOWER = Direction.LOWER_IS_BETTER
METRIC_DIRECTIONS: Mapping[str, Direction] = MappingProxyType(
    {
        # Rates (bits/s, requests/s, 1/s) and the share of connections that succeed.
        "throughput": _HIGHER,
        "requests_per_second": _HIGHER,
        "new_connections_per_second": _HIGHER,
        "connection_success_rate": _HIGHER,
        # Times (µs or ms): iperf3 RTT, sockperf, ab, wrk, curl request-response.
        "latency_avg": _LOWER,
        "latency_mean": _LOWER,
        "latency_p50": _LOWER,
        "latency_p99": _LOWER,
        "time_per_request": _LOWER,
        "rtt_mean": _LOWER,
        "rr_mean": _LOWER,
        "rr_p50": _LOWER,
        "rr_p99": _LOWER,
        # Resources of the nodes over the run window (%, MB).
        "cpu": _LOWER,
        "ram": _LOWER,
    }
)
"""The metrics the gate compares and which way each gets better; the only place that says so.
In this order within a condition."""

MATCH_COLUMNS: tuple[str, ...] = ("scenario", "cni", "condition", "parameters")
"""Columns of :func:`cnibench.results.load_results` that must be equal for two runs to be
compared (``parameters`` is JSON text with sorted keys)."""

DEFAULT_THRESHOLD = 0.05
"""5 %: the default of ``cnibench compare --threshold`` and of ``--fail-on-regression``."""

COMPARISON_COLUMNS: tuple[str, ...] = (
    "scenario",
    "cni",
    "condition",
    "parameters",
    "metric",
    "unit",
    "direction",
    "n_baseline",
    "n_candidate",
    "baseline_mean",
    "candidate_mean",
    "ratio",
    "ci_low",
    "ci_high",
    "level",
    "p_value",
    "threshold",
    "limit",
    "verdict",
    "regression",
    "note",
)
"""Columns of :func:`compare_results`, one row per matched (condition, metric)."""

ConditionKey = tuple[str, str, str, str]
"""Values of :data:`MATCH_COLUMNS` of one condition."""

_NUMBER = re.compile(r"^(?P<number>[+-]?(?:\d+(?:\.\d*)?|\.\d+))\s*(?P<percent>%?)$")
_MARKDOWN_SPECIAL = re.compile(r"([\\`*_\[\]<>|])")


# --------------------------------------------------------------------------------------------
# Threshold
# --------------------------------------------------------------------------------------------


def parse_threshold(text: str) -> float:
    """The regression threshold as a fraction: ``"5%"`` and ``"0.05"`` both give ``0.05``.

    Parameters
    ----------
    text:
        A percentage from 0 % to 100 % (``"5%"``, ``"2.5 %"``), or a plain fraction below 1
        (``"0.05"``). A plain number of 1 or more is refused as ambiguous (``"5"`` could mean
        5 % or 500 %).

    Returns
    -------
    float
        The threshold in [0, 1].

    Raises
    ------
    ConfigError
        Garbage, a negative value, more than 100 %, or a plain number >= 1; one line saying
        what to write instead.
    """
    cleaned = str(text).strip()
    match = _NUMBER.match(cleaned)
    if match is None:
        raise ConfigError(
            f"invalid threshold {text!r}: write a percentage such as 5% or a fraction such as 0.05"
        )
    value = float(match.group("number"))
    if value < 0:
        raise ConfigError(f"invalid threshold {text!r}: it must not be negative")
    if match.group("percent"):
        if value > 100:
            raise ConfigError(f"invalid threshold {text!r}: it must be at most 100%")
        return value / 100.0
    if value >= 1:
        raise ConfigError(
            f"invalid threshold {text!r}: a plain number must be a fraction below 1;"
            f" write {match.group('number')}% for per cent"
        )
    return value


def format_threshold(threshold: float) -> str:
    """``0.05`` -> ``"5%"`` (as the command line takes it)."""
    return f"{100.0 * threshold:g}%"


def _checked_threshold(threshold: float) -> float:
    if isinstance(threshold, bool) or not isinstance(threshold, int | float):
        raise ConfigError(f"threshold must be a fraction in [0, 1], got {threshold!r}")
    if not 0.0 <= float(threshold) <= 1.0:
        raise ConfigError(f"threshold must be a fraction in [0, 1], got {threshold!r}")
    return float(threshold)


# --------------------------------------------------------------------------------------------
# Statistics
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class RatioInterval:
    """Ratio candidate / baseline of geometric means with its interval.

    Attributes
    ----------
    ratio:
        ``exp(mean(log candidate) - mean(log baseline))``; dimensionless.
    low, high:
        Bounds of the interval: positive and finite for positive values with at least 2 per
        side; equal to ``ratio`` when both samples are constant.
    level:
        Confidence level, e.g. 0.95.
    p_value:
        Welch's two-sided p-value for equal mean logarithms (NaN when undefined).
    df:
        Welch–Satterthwaite degrees of freedom of the log-scale interval.
    n_baseline, n_candidate:
        Sample sizes.
    """

    ratio: float
    low: float
    high: float
    level: float
    p_value: float
    df: float
    n_baseline: int
    n_candidate: int


def log_ratio_interval(
    baseline: npt.ArrayLike, candidate: npt.ArrayLike, *, level: float = LEVEL
) -> RatioInterval:
    """Ratio of geometric means candidate / baseline with a Welch t interval on the log scale.

    Parameters
    ----------
    baseline, candidate:
        One positive value per run, same unit (e.g. bits/s).
    level:
        Confidence level in (0, 1).

    Returns
    -------
    RatioInterval
        ``exp`` of :func:`cnibench.stats.compare` applied to ``log(baseline)`` and
        ``log(candidate)``: the difference of the mean logarithms and its Welch interval.

    Raises
    ------
    InsufficientDataError
        Empty input, NaN/infinite or non-positive values.
    ConfigError
        ``level`` outside (0, 1).

    Warns
    -----
    cnibench.stats.DegenerateDataWarning
        Fewer than 2 values on a side (NaN bounds) or both sides constant (zero width).

    Examples
    --------
    >>> r = log_ratio_interval([100.0, 104.0, 96.0], [80.0, 83.0, 77.0])
    >>> round(r.ratio, 3), r.low < r.ratio < r.high < 1.0
    (0.8, True)
    """
    b = np.asarray(baseline, dtype=np.float64)
    c = np.asarray(candidate, dtype=np.float64)
    for name, values in (("baseline", b), ("candidate", c)):
        finite = values[np.isfinite(values)]
        if finite.size and np.any(finite <= 0.0):
            raise InsufficientDataError(
                f"{name} has values <= 0: a ratio on the log scale needs positive values"
            )
    with np.errstate(divide="ignore", invalid="ignore"):
        log_b, log_c = np.log(b), np.log(c)
    comparison = stats.compare(log_b, log_c, level=level, method="welch")
    return RatioInterval(
        ratio=math.exp(comparison.difference),
        low=math.exp(comparison.ci_low),
        high=math.exp(comparison.ci_high),
        level=comparison.level,
        p_value=comparison.p_value,
        df=comparison.df,
        n_baseline=comparison.n_baseline,
        n_candidate=comparison.n_treatment,
    )


def _verdict(direction: Direction, low: float, high: float, threshold: float) -> Verdict:
    if not (math.isfinite(low) and math.isfinite(high)):
        return Verdict.NOT_APPLICABLE
    if direction is Direction.HIGHER_IS_BETTER:
        worse, beyond, better = high < 1.0, high < 1.0 - threshold, low > 1.0
    else:
        worse, beyond, better = low > 1.0, low > 1.0 + threshold, high < 1.0
    if beyond:
        return Verdict.REGRESSION
    if worse:
        return Verdict.WORSE
    return Verdict.BETTER if better else Verdict.NO_CHANGE


def _limit(direction: Direction, threshold: float) -> float:
    """The ratio the whole interval must pass to be a regression."""
    return 1.0 - threshold if direction is Direction.HIGHER_IS_BETTER else 1.0 + threshold


# --------------------------------------------------------------------------------------------
# Matching
# --------------------------------------------------------------------------------------------


def comparable_runs(df: pd.DataFrame) -> pd.DataFrame:
    """Rows the gate may use: successful, verified, finite, and a metric it compares.

    Parameters
    ----------
    df:
        Tidy results (:func:`cnibench.results.load_results`).

    Returns
    -------
    pandas.DataFrame
        A copy restricted to :data:`METRIC_DIRECTIONS`.
    """
    rows = ok_runs(df)
    keep = rows["verified"].astype(bool) & rows["metric"].isin(list(METRIC_DIRECTIONS))
    kept: pd.DataFrame = rows[keep].copy()
    return kept


def _condition_keys(rows: pd.DataFrame) -> list[ConditionKey]:
    keys = rows[list(MATCH_COLUMNS)].astype(str).drop_duplicates()
    return [(str(a), str(b), str(c), str(d)) for a, b, c, d in keys.itertuples(index=False)]


def _label(key: ConditionKey, ambiguous: bool = False) -> str:
    """``scenario/cni/condition``, with the parameters when the id alone is ambiguous."""
    scenario, cni, condition, parameters = key
    label = f"{scenario}/{cni}/{condition}"
    return f"{label} {parameters}" if ambiguous else label


def _labels(keys: Sequence[ConditionKey]) -> dict[ConditionKey, str]:
    plain = [_label(key) for key in keys]
    return {key: _label(key, plain.count(_label(key)) > 1) for key in keys}


def _values_by_metric(rows: pd.DataFrame) -> dict[tuple[ConditionKey, str], tuple[Any, str]]:
    """(condition key, metric) -> (values in run order, unit)."""
    out: dict[tuple[ConditionKey, str], tuple[Any, str]] = {}
    ordered = rows.sort_values(["time", "run_id"], kind="stable")
    for group_key, group in ordered.groupby([*MATCH_COLUMNS, "metric"], sort=False):
        scenario, cni, condition, parameters, metric = (str(part) for part in group_key)
        units = sorted({str(unit) for unit in group["unit"]})
        out[((scenario, cni, condition, parameters), metric)] = (
            group["value"].to_numpy(dtype=np.float64),
            units[0] if len(units) == 1 else "/".join(units),
        )
    return out


def _compare_metric(
    baseline: Any, candidate: Any, direction: Direction, threshold: float, level: float
) -> dict[str, Any]:
    """Means, ratio, interval and verdict of one matched (condition, metric)."""
    row: dict[str, Any] = {
        "n_baseline": int(baseline.size),
        "n_candidate": int(candidate.size),
        "baseline_mean": float(np.mean(baseline)),
        "candidate_mean": float(np.mean(candidate)),
        "ratio": math.nan,
        "ci_low": math.nan,
        "ci_high": math.nan,
        "p_value": math.nan,
        "note": "",
    }
    if baseline.size < 2 or candidate.size < 2:
        row["note"] = "an interval needs at least 2 runs on each side"
    elif min(float(baseline.min()), float(candidate.min())) <= 0.0:
        row["note"] = "values <= 0: no ratio on the log scale"
    else:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", stats.DegenerateDataWarning)
            # scipy's "precision loss" when one side's runs are (nearly) equal: the Welch
            # interval is still what the formula gives, so it is not worth a note.
            warnings.filterwarnings("ignore", "Precision loss", RuntimeWarning)
            interval = log_ratio_interval(baseline, candidate, level=level)
        row.update(
            ratio=interval.ratio,
            ci_low=interval.low,
            ci_high=interval.high,
            p_value=interval.p_value,
        )
        if any(issubclass(w.category, stats.DegenerateDataWarning) for w in caught):
            row["note"] = "all runs equal on both sides: zero-width interval"
    row["verdict"] = _verdict(direction, row["ci_low"], row["ci_high"], threshold).value
    return row


_VERDICT_RANK = {verdict: rank for rank, verdict in enumerate(Verdict)}


def _worst_first(frame: pd.DataFrame) -> pd.DataFrame:
    """Regressions first, then by how much worse the estimate is; ``n/a`` last."""
    if frame.empty:
        return frame
    applicable = frame["verdict"] != Verdict.NOT_APPLICABLE
    # log of the ratio turned so that larger is worse (NaN without a ratio).
    sign = np.where(frame["direction"] == Direction.HIGHER_IS_BETTER, -1.0, 1.0)
    with np.errstate(divide="ignore", invalid="ignore"):
        worsening = sign * np.log(frame["ratio"].to_numpy(dtype=np.float64))
    key = pd.DataFrame(
        {
            "rank": (~applicable).astype(int) * 2
            + (frame["verdict"] != Verdict.REGRESSION).astype(int),
            "better_first": -worsening,
        },
        index=frame.index,
    )
    order = key.sort_values(["rank", "better_first"], kind="stable", na_position="last").index
    return frame.loc[order].reset_index(drop=True)


@dataclass(frozen=True)
class ResultComparison:
    """A comparison of two result sets: the tidy table plus what did not match.

    Attributes
    ----------
    frame:
        One row per matched (condition, metric), columns :data:`COMPARISON_COLUMNS`, worst
        first (:func:`compare_results`).
    threshold:
        The regression threshold as a fraction.
    level:
        Confidence level of the intervals.
    only_baseline, only_candidate:
        Conditions (:data:`MATCH_COLUMNS` values) present on one side only.
    """

    frame: pd.DataFrame
    threshold: float
    level: float
    only_baseline: tuple[ConditionKey, ...]
    only_candidate: tuple[ConditionKey, ...]

    @property
    def regressions(self) -> pd.DataFrame:
        """Rows whose verdict is :attr:`Verdict.REGRESSION`."""
        return self.frame[self.frame["regression"]]

    @property
    def regressed(self) -> bool:
        """Whether the gate fails."""
        return bool(self.frame["regression"].any())

    def _row_labels(self) -> list[str]:
        keys: list[ConditionKey] = [
            (str(r.scenario), str(r.cni), str(r.condition), str(r.parameters))
            for r in self.frame.itertuples(index=False)
        ]
        labels = _labels(list(dict.fromkeys(keys)))
        return [labels[key] for key in keys]

    def headline(self) -> str:
        """One line: how many regressions among how many comparisons, at which threshold."""
        conditions = len(self.frame[list(MATCH_COLUMNS)].drop_duplicates())
        found = int(self.frame["regression"].sum())
        what = f"{found} REGRESSION{'S' if found != 1 else ''}" if found else "no regression"
        return (
            f"{what} beyond {format_threshold(self.threshold)} in {len(self.frame)} metric"
            f" comparison{'s' if len(self.frame) != 1 else ''} of {conditions} matched"
            f" condition{'s' if conditions != 1 else ''} (ratio = candidate / baseline,"
            f" {100.0 * self.level:g}% CI)"
        )

    def regression_lines(self) -> list[str]:
        """One line per regression, naming the metric and the condition."""
        lines = []
        level = f"{100.0 * self.level:g}%"
        threshold = format_threshold(self.threshold)
        for label, row in zip(self._row_labels(), self.frame.to_dict("records"), strict=True):
            if not row["regression"]:
                continue
            side = "below" if row["direction"] == Direction.HIGHER_IS_BETTER else "above"
            lines.append(
                f"REGRESSION {row['metric']} of {label}: ratio {_ratio(row['ratio'])}"
                f" ({level} CI {_ratio(row['ci_low'])}-{_ratio(row['ci_high'])},"
                f" n = {row['n_baseline']} vs {row['n_candidate']}), whole interval {side}"
                f" {_ratio(row['limit'])} ({row['direction']}, threshold {threshold})"
            )
        return [scrub_text(line) for line in lines]

    def unmatched_lines(self) -> list[str]:
        """One line per side naming the conditions present only there (none when all match)."""
        lines = []
        for side, keys in (("baseline", self.only_baseline), ("candidate", self.only_candidate)):
            if keys:
                names = ", ".join(_labels(list(keys)).values())
                lines.append(f"only in the {side} (not compared): {names}")
        return [scrub_text(line) for line in lines]

    def _cells(self) -> list[list[str]]:
        rows = []
        for label, row in zip(self._row_labels(), self.frame.to_dict("records"), strict=True):
            has_ci = math.isfinite(row["ci_low"]) and math.isfinite(row["ci_high"])
            rows.append(
                [
                    str(row["verdict"]),
                    str(row["metric"]),
                    label,
                    _value(row["baseline_mean"], row["unit"]),
                    _value(row["candidate_mean"], row["unit"]),
                    _ratio(row["ratio"]) if math.isfinite(row["ratio"]) else "-",
                    f"[{_ratio(row['ci_low'])}, {_ratio(row['ci_high'])}]" if has_ci else "-",
                    f"{row['n_baseline']} vs {row['n_candidate']}",
                    str(row["note"]),
                ]
            )
        return rows

    def text(self) -> str:
        """The terminal table: headline, then one line per (condition, metric), worst first."""
        header = [
            "verdict",
            "metric",
            "condition",
            "baseline",
            "candidate",
            "ratio",
            f"{100.0 * self.level:g}% CI",
            "n",
            "note",
        ]
        rows = [header, *self._cells()]
        if not any(row[-1] for row in rows[1:]):
            rows = [row[:-1] for row in rows]
        widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
        right = {3, 4, 5}
        lines = [self.headline()]
        for row in rows:
            cells = [
                cell.rjust(width) if i in right else cell.ljust(width)
                for i, (cell, width) in enumerate(zip(row, widths, strict=True))
            ]
            lines.append("  ".join(cells).rstrip())
        lines += self.unmatched_lines()
        return scrub_text("\n".join(lines))

    def markdown(self) -> str:
        """A Markdown section for a pull-request comment: headline, method, table, unmatched."""
        level = f"{100.0 * self.level:g} %"
        found = int(self.frame["regression"].sum())
        title = f"**{found} regression{'s' if found != 1 else ''}**" if found else "no regression"
        lines = [
            f"### cnibench compare: {title} beyond {format_threshold(self.threshold)}",
            "",
            f"Ratio = candidate / baseline of the geometric means of successful, verified runs,"
            f" with its {level} confidence interval (Welch t interval on the log scale). A"
            " regression is a metric whose whole interval is worse than the threshold. Worst"
            " first.",
            "",
            f"| verdict | metric | condition | baseline | candidate | ratio | {level} CI | n |",
            "|---|---|---|---:|---:|---:|---|---:|",
        ]
        for cells in self._cells():
            verdict, metric, label, base, cand, ratio, ci, n, note = (
                _markdown_cell(cell) for cell in cells
            )
            if cells[0] == Verdict.REGRESSION:
                verdict = f"**{verdict}**"
            if note:
                ci = f"{ci} ({note})"
            lines.append(
                f"| {verdict} | {metric} | {label} | {base} | {cand} | {ratio} | {ci} | {n} |"
            )
        unmatched = self.unmatched_lines()
        if unmatched:
            lines += ["", *(f"- {_markdown_cell(line)}" for line in unmatched)]
        return scrub_text("\n".join(lines) + "\n")


def _ratio(value: float) -> str:
    if not math.isfinite(value):
        return str(value)
    return f"{value:.3f}" if value < 10 else f"{value:.4g}"


def _value(value: float, unit: str) -> str:
    """A mean with its unit: ``16.43G bits/s``, ``103.5 us`` (prefixes as the run table's)."""
    number = f"{value:.4g}"
    for smallest, divisor, prefix in ((1e9, 1e9, "G"), (1e6, 1e6, "M"), (1e4, 1e3, "k")):
        if abs(value) >= smallest:
            number = f"{value / divisor:.4g}{prefix}"
            break
    return f"{number} {unit}".strip()


def _markdown_cell(text: str) -> str:
    return _MARKDOWN_SPECIAL.sub(r"\\\1", text.replace("\n", " "))


# --------------------------------------------------------------------------------------------
# Public entry points
# --------------------------------------------------------------------------------------------


def compare_result_sets(
    baseline: pd.DataFrame,
    candidate: pd.DataFrame,
    *,
    threshold: float = DEFAULT_THRESHOLD,
    level: float = LEVEL,
    proportion: float = TRIM_PROPORTION,
) -> ResultComparison:
    """Compare every matched condition and metric of two result sets.

    Parameters
    ----------
    baseline, candidate:
        Tidy results (:func:`cnibench.results.load_results`), e.g. of main and of a branch.
    threshold:
        Regression threshold as a fraction in [0, 1] (0.05 = 5 %; see :func:`parse_threshold`
        for the text form).
    level:
        Confidence level of the intervals, in (0, 1).
    proportion:
        Fraction trimmed from each end of each side before comparing.

    Returns
    -------
    ResultComparison
        The table (see :func:`compare_results`) and the conditions only one side has.

    Raises
    ------
    InsufficientDataError
        A side has no successful verified run of a compared metric, or no condition and metric
        is in both.
    ConfigError
        Bad ``threshold``, ``level`` or ``proportion``.
    """
    chosen = _checked_threshold(threshold)
    if not 0.0 < level < 1.0:
        raise ConfigError(f"level must be strictly between 0 and 1, got {level!r}")
    base_rows, cand_rows = comparable_runs(baseline), comparable_runs(candidate)
    for name, runs in (("baseline", base_rows), ("candidate", cand_rows)):
        if runs.empty:
            raise InsufficientDataError(
                f"the {name} has no successful verified run of a compared metric"
                f" ({', '.join(METRIC_DIRECTIONS)})"
            )
    base_keys, cand_keys = _condition_keys(base_rows), _condition_keys(cand_rows)
    matched = [key for key in base_keys if key in set(cand_keys)]
    in_both = set(matched)
    if not matched:
        raise InsufficientDataError(
            "no condition is in both result sets (same scenario, CNI, condition and"
            f" parameters): baseline has {', '.join(_labels(base_keys).values())};"
            f" candidate has {', '.join(_labels(cand_keys).values())}"
        )
    base_values, cand_values = _values_by_metric(base_rows), _values_by_metric(cand_rows)
    rows: list[dict[str, Any]] = []
    for key in matched:
        for metric, direction in METRIC_DIRECTIONS.items():
            if (key, metric) not in base_values or (key, metric) not in cand_values:
                continue
            (b, unit_b), (c, unit_c) = base_values[(key, metric)], cand_values[(key, metric)]
            b = stats.trimmed_sample(b, proportion=proportion)
            c = stats.trimmed_sample(c, proportion=proportion)
            row: dict[str, Any] = dict(zip(MATCH_COLUMNS, key, strict=True))
            row.update(metric=metric, unit=unit_b, direction=direction.value)
            row.update(_compare_metric(b, c, direction, chosen, level))
            if unit_b != unit_c:
                row.update(verdict=Verdict.NOT_APPLICABLE.value, note=f"units differ: {unit_c}")
            row.update(
                level=level,
                threshold=chosen,
                limit=_limit(direction, chosen),
                regression=row["verdict"] == Verdict.REGRESSION,
            )
            rows.append(row)
    if not rows:
        raise InsufficientDataError("the matched conditions share no compared metric")
    frame = _worst_first(pd.DataFrame(rows, columns=list(COMPARISON_COLUMNS)))
    frame["regression"] = frame["regression"].astype(bool)
    return ResultComparison(
        frame=frame,
        threshold=chosen,
        level=level,
        only_baseline=tuple(key for key in base_keys if key not in in_both),
        only_candidate=tuple(key for key in cand_keys if key not in in_both),
    )


def compare_results(
    baseline: pd.DataFrame,
    candidate: pd.DataFrame,
    *,
    threshold: float = DEFAULT_THRESHOLD,
    level: float = LEVEL,
    proportion: float = TRIM_PROPORTION,
) -> pd.DataFrame:
    """The regression comparison of two result sets as a tidy DataFrame (notebook API).

    Parameters
    ----------
    baseline, candidate, threshold, level, proportion:
        As for :func:`compare_result_sets`.

    Returns
    -------
    pandas.DataFrame
        One row per (condition, metric) present in both, worst first, columns
        :data:`COMPARISON_COLUMNS`: the match columns; ``metric``, ``unit``, ``direction``
        (:class:`Direction`); ``n_baseline``/``n_candidate`` (runs kept after trimming);
        ``baseline_mean``/``candidate_mean`` (truncated means, in ``unit``); ``ratio``,
        ``ci_low``, ``ci_high`` (candidate / baseline of the geometric means and its
        log-scale Welch interval; NaN where the verdict is ``n/a``); ``level``, ``p_value``,
        ``threshold``, ``limit`` (the ratio the whole interval must pass), ``verdict``
        (:class:`Verdict`), ``regression`` (bool) and ``note``.

    Examples
    --------
    >>> from cnibench.results import load_results
    >>> table = compare_results(load_results("main/"), load_results("branch/"))  # doctest: +SKIP
    >>> table[table.regression][["condition", "metric", "ratio"]]  # doctest: +SKIP
    """
    return compare_result_sets(
        baseline, candidate, threshold=threshold, level=level, proportion=proportion
    ).frame


def load_result_set(paths: Path | Sequence[Path], *, what: str) -> pd.DataFrame:
    """Load one or more results directories for a comparison, or say in one line why not.

    Parameters
    ----------
    paths:
        Results directories or session directories.
    what:
        How the error messages name this side, e.g. ``"baseline"``.

    Returns
    -------
    pandas.DataFrame
        The records of all of them (:func:`cnibench.results.load_results`).

    Raises
    ------
    ConfigError
        A path that does not exist or is not a directory, unreadable or corrupted results, or
        no record at all.
    """
    chosen = [paths] if isinstance(paths, Path) else list(paths)
    frames = []
    for path in chosen:
        if not path.exists():
            raise ConfigError(f"{what} results directory {path} does not exist")
        if not path.is_dir():
            raise ConfigError(f"{what} results path {path} is not a directory")
        try:
            # A baseline is every session of its directories (e.g. main's last runs).
            frames.append(load_results(path, sessions=ALL_SESSIONS))
        except ResultsError as exc:
            raise ConfigError(f"{what} results in {path} cannot be read: {exc}") from exc
    frame = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()
    if frame.empty:
        names = ", ".join(str(path) for path in chosen) or "(none)"
        raise ConfigError(f"{what} results in {names} hold no run records")
    return frame


def write_markdown(comparison: ResultComparison, path: Path) -> Path:
    """Write :meth:`ResultComparison.markdown` atomically (never a half-written file).

    Raises
    ------
    ConfigError
        The file cannot be written (missing directory, permissions).
    """
    try:
        return atomic_write_bytes(path, comparison.markdown().encode())
    except ResultsError as exc:
        raise ConfigError(f"cannot write --markdown {path}: {exc}") from exc
