"""How the regression gate's answer reads: :class:`ResultComparison`, its three-way answer and
headline, the terminal table, one line per failing or undecided comparison, and the Markdown
(:mod:`~cnibench.report.gate.markdown`) and JUnit XML (:mod:`~cnibench.report.gate.junit`) it
writes for pull requests and CI."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any

import numpy as np
import pandas as pd

from cnibench.errors import ConfigError, ResultsError
from cnibench.report.gate.directions import Direction, format_threshold
from cnibench.report.gate.loading import MATCH_COLUMNS, ConditionKey, FailedRun, condition_labels
from cnibench.report.gate.plan import VarianceComponents
from cnibench.report.gate.rates import FalseAlarmRate
from cnibench.report.gate.verdicts import GATE_ALPHA, Answer, GateMode, Verdict
from cnibench.report.scrub import scrub_text
from cnibench.report.tables import format_number, text_table
from cnibench.results import atomic_write_bytes
from cnibench.stats.ratios import SessionVariance

__all__ = ["ResultComparison", "write_junit", "write_markdown"]


@dataclass(frozen=True)
class ResultComparison:
    """A comparison of two result sets: the tidy table, the gate's answer, what did not match.

    Attributes
    ----------
    frame:
        One row per compared (condition, metric), columns
        :data:`~cnibench.report.gate.verdicts.COMPARISON_COLUMNS`, failing first, then
        undecided, then within threshold (:func:`~cnibench.report.compare.compare_results`).
    threshold:
        The regression threshold as a fraction.
    level:
        Confidence level of the intervals.
    only_baseline, only_candidate:
        Conditions (:data:`MATCH_COLUMNS` values) present on one side only; each gated metric
        of one only in the baseline is a ``MISSING`` row unless :attr:`allow_missing`.
    mode:
        The :class:`GateMode` applied.
    between:
        Session-to-session variance pooled over every metric
        (:func:`~cnibench.stats.ratios.session_variance`), for orientation only: the
        intervals use :attr:`components`. ``None`` when the baseline holds one session.
    components:
        Per metric, its variance components
        (:func:`~cnibench.report.gate.plan.variance_components`, both sides' sessions of
        every matched condition), which the intervals use.
    design:
        ``(baseline sessions, runs per baseline session)`` of the baselines at hand.
    failed_runs:
        Candidate runs that failed or recorded a gated metric at an impossible 0
        (:func:`~cnibench.report.gate.loading.failed_candidate_runs`) in a matched
        condition; they fail the gate unless :attr:`allow_failed_runs`.
    allow_failed_runs:
        Whether failed runs were left out instead of failing the gate.
    allow_missing:
        Whether what the candidate lacks was listed instead of failing the gate.
    missing:
        With :attr:`allow_missing`, the (condition, metric) pairs of the baseline the
        candidate lacks, listed and not gated.
    session_sd:
        The session SD the user gave (``--session-sd``, a fraction), if any.
    false_alarm:
        The false-alarm rate for the baselines at hand
        (:func:`~cnibench.report.gate.rates.stated_false_alarm_rate`), or why there is none.
    """

    frame: pd.DataFrame
    threshold: float
    level: float
    only_baseline: tuple[ConditionKey, ...]
    only_candidate: tuple[ConditionKey, ...]
    mode: GateMode = GateMode.REGRESSION
    between: SessionVariance | None = None
    components: Mapping[str, VarianceComponents] = field(
        default_factory=lambda: MappingProxyType({})
    )
    design: tuple[int, int] = (1, 0)
    failed_runs: tuple[FailedRun, ...] = ()
    allow_failed_runs: bool = False
    allow_missing: bool = False
    missing: tuple[tuple[ConditionKey, str], ...] = ()
    session_sd: float | None = None
    false_alarm: FalseAlarmRate | None = None

    @property
    def regressions(self) -> pd.DataFrame:
        """Rows that fail the gate (regression, not shown, failed runs, missing)."""
        return self.frame[self.frame["regression"]]

    @property
    def regressed(self) -> bool:
        """Whether the gate fails: a comparison regressed, failed or is missing."""
        return bool(self.frame["regression"].any())

    @property
    def undecided(self) -> pd.DataFrame:
        """Rows the gate could not decide (each names what would decide it)."""
        frame = self.frame
        return frame[(frame["answer"] == Answer.UNDECIDED) & ~frame["regression"]]

    @property
    def answer(self) -> Answer:
        """The gate's answer: regressed when any comparison fails (a regression is decided
        whatever else is undecided), else undecided when any comparison is, else within
        threshold (every gated comparison)."""
        if self.regressed:
            return Answer.REGRESSED
        if not self.undecided.empty:
            return Answer.UNDECIDED
        return Answer.WITHIN

    def row_labels(self) -> list[str]:
        """``scenario/cni/condition`` of each row (with the parameters where ambiguous)."""
        keys: list[ConditionKey] = [
            (str(r.scenario), str(r.cni), str(r.condition), str(r.parameters))
            for r in self.frame.itertuples(index=False)
        ]
        labels = condition_labels(list(dict.fromkeys(keys)))
        return [labels[key] for key in keys]

    def counts(self) -> dict[str, int]:
        """How many comparisons are ``regressed`` (regression or not shown within),
        ``failed`` (failed runs), ``missing``, ``undecided`` and ``within`` threshold."""
        verdicts = self.frame["verdict"].tolist()
        return {
            "regressed": sum(v in (Verdict.REGRESSION, Verdict.NOT_SHOWN) for v in verdicts),
            "failed": verdicts.count(Verdict.FAILED_RUNS),
            "missing": verdicts.count(Verdict.MISSING),
            "undecided": len(self.undecided),
            "within": int((self.frame["answer"] == Answer.WITHIN).sum()),
        }

    def summary(self) -> str:
        """The answer and its counts, e.g. ``UNDECIDED: 3 undecided at 5%, none regressed,
        26 within threshold``."""
        n = self.counts()
        threshold = format_threshold(self.threshold)
        plural = "s" if n["regressed"] != 1 else ""
        beyond = "not shown within" if self.mode is GateMode.NON_INFERIORITY else "beyond"
        answer = self.answer
        if answer is Answer.REGRESSED:
            regressions = f"{n['regressed']} regression{plural} {beyond} {threshold}"
            found = [
                regressions if n["regressed"] else "",
                f"FAILED RUNS in {n['failed']}" if n["failed"] else "",
                f"MISSING in {n['missing']}" if n["missing"] else "",
            ]
            rest = [f"{n['undecided']} undecided" if n["undecided"] else ""]
            rest.append(f"{n['within']} within threshold" if n["within"] else "")
            others = ", ".join(part for part in rest if part)
            return (
                "REGRESSED: "
                + ", ".join(part for part in found if part)
                + (f"; {others}" if others else "")
            )
        if answer is Answer.UNDECIDED:
            within = f", {n['within']} within threshold" if n["within"] else ""
            return f"UNDECIDED: {n['undecided']} undecided at {threshold}, none regressed{within}"
        return f"WITHIN THRESHOLD: all {n['within']} within {threshold}"

    def headline(self) -> str:
        """One line: the gate's answer with its counts, the comparisons, the method, and the
        false-alarm rate for the baselines at hand (never a constant, never "no regression"
        while a comparison is undecided)."""
        conditions = len(self.frame[list(MATCH_COLUMNS)].drop_duplicates())
        comparisons = len(self.frame)
        return (
            f"{self.summary()}; {comparisons} metric comparison{'s' if comparisons != 1 else ''}"
            f" of {conditions} condition{'s' if conditions != 1 else ''} (ratio = candidate /"
            f" baseline of geometric means, {100.0 * self.level:g}% CI; {self.mode.value} mode;"
            f" {self.false_alarm_statement()})"
        )

    def false_alarm_statement(self) -> str:
        """The false-alarm rate for the baselines at hand, or why the runs cannot bound it."""
        if self.false_alarm is None:
            return "false-alarm rate not computed"
        return self.false_alarm.describe()

    def warning(self) -> str:
        """Which session-to-session SD each metric's intervals include, and for which metrics
        none is known (their comparisons are undecided)."""
        rate = self.false_alarm
        known = {m: c for m, c in self.components.items() if c.known}
        given = rate.given if rate is not None else ()
        unknown = (
            rate.unknown
            if rate is not None
            else tuple(m for m, c in self.components.items() if not c.known)
        )
        parts = []
        if known:
            sds = ", ".join(f"{m} {c.session_sd_percent:.1f}%" for m, c in known.items())
            sessions = self.design[0]
            parts.append(
                f"session-to-session SD per metric, from {sessions} baseline session"
                f"{'s' if sessions != 1 else ''} (and the candidate's when several): {sds};"
                " included in every interval"
            )
        if given:
            sd = f"{100 * (self.session_sd or 0.0):g}%"
            parts.append(
                f"session-to-session SD {sd} as given by --session-sd for {', '.join(given)}"
                " (one session a side); included in their intervals"
            )
        if unknown:
            parts.append(
                f"warning: one session a side gives no session-to-session SD for"
                f" {', '.join(unknown)}, so their comparisons are undecided: at the runs' noise"
                f" alone the false-alarm rate can be far above {100 * GATE_ALPHA:g}%"
                " (bench/coverage.py measured 51% at 20 metrics); give --session-sd (e.g. 3%)"
                " or several A/A baseline sessions (the same code measured in separate"
                " sessions) to decide them"
            )
        return "; ".join(parts) if parts else "no comparison needs a session-to-session SD"

    def regression_lines(self) -> list[str]:
        """One line per comparison that fails the gate, naming the metric and the condition."""
        lines = []
        level = f"{100.0 * self.level:g}%"
        threshold = format_threshold(self.threshold)
        for label, row in zip(self.row_labels(), self.frame.to_dict("records"), strict=True):
            if not row["regression"]:
                continue
            side = "below" if row["direction"] == Direction.HIGHER_IS_BETTER else "above"
            if row["verdict"] in (Verdict.FAILED_RUNS, Verdict.MISSING):
                lines.append(f"{row['verdict']} {row['metric']} of {label}: {row['note']}")
                continue
            if str(row["note"]).startswith("TOTAL FAILURE"):
                why = str(row["note"])
            elif row["note"].startswith("identical runs"):
                why = (
                    f"identical runs on each side, the exact ratio {side}"
                    f" {format_number(row['limit'])} ({row['direction']}, threshold {threshold})"
                )
            elif row["verdict"] == Verdict.NOT_SHOWN:
                why = (
                    f"the interval's bound is not {side} {format_number(row['limit'])} on the"
                    " safe side"
                    f" ({row['direction']}, threshold {threshold}, non-inferiority)"
                )
            else:
                why = (
                    f"ratio {side} {format_number(row['limit'])} and significantly worse (one-sided"
                    f" adjusted p = {row['p_adjusted']:.2g}; {row['direction']}, threshold"
                    f" {threshold})"
                )
            lines.append(
                f"{row['verdict']} {row['metric']} of {label}: ratio {format_number(row['ratio'])}"
                f" ({level} CI {format_number(row['ci_low'])}-{format_number(row['ci_high'])},"
                f" n = {row['n_baseline']} vs {row['n_candidate']}): {why}"
            )
        return [scrub_text(line) for line in lines]

    def undecided_lines(self) -> list[str]:
        """One line per undecided comparison: its ratio and what would decide it."""
        lines = []
        level = f"{100.0 * self.level:g}%"
        for label, row in zip(self.row_labels(), self.frame.to_dict("records"), strict=True):
            if row["regression"] or row["answer"] != Answer.UNDECIDED:
                continue
            if math.isfinite(row["ci_low"]) and math.isfinite(row["ci_high"]):
                what = (
                    f"ratio {format_number(row['ratio'])} ({level} CI"
                    f" {format_number(row['ci_low'])}-{format_number(row['ci_high'])},"
                    f" n = {row['n_baseline']} vs {row['n_candidate']})"
                )
            else:
                what = str(row["note"]) or "no interval"
            lines.append(f"UNDECIDED {row['metric']} of {label}: {what}: {row['decide']}")
        return [scrub_text(line) for line in lines]

    def equivalence_line(self, margin: float) -> str:
        """Which metrics are shown the same within ``±margin``: their whole interval inside
        ``[1 - margin, 1 + margin]`` (two one-sided tests)."""
        low = self.frame["ci_low"].to_numpy(dtype=np.float64)
        high = self.frame["ci_high"].to_numpy(dtype=np.float64)
        inside = (low >= 1.0 - margin) & (high <= 1.0 + margin)
        return (
            f"same within ±{100 * margin:g}%: {int(inside.sum())} of {len(self.frame)} metric"
            " comparisons (the rest could not show it: their interval reaches beyond the"
            " margin)"
        )

    def unmatched_lines(self) -> list[str]:
        """One line each naming what only one side has (none when everything matches)."""
        lines = []
        if self.only_baseline:
            names = ", ".join(condition_labels(list(self.only_baseline)).values())
            fate = (
                "missing in the candidate, not gated (--allow-missing)"
                if self.allow_missing
                else "missing in the candidate: each metric fails as MISSING"
            )
            lines.append(f"only in the baseline ({fate}): {names}")
        lacking = [(key, metric) for key, metric in self.missing if key not in self.only_baseline]
        if lacking:
            labels = condition_labels(list(dict.fromkeys(key for key, _ in lacking)))
            names = ", ".join(f"{metric} of {labels[key]}" for key, metric in lacking)
            lines.append(f"missing in the candidate (not gated, --allow-missing): {names}")
        if self.only_candidate:
            names = ", ".join(condition_labels(list(self.only_candidate)).values())
            lines.append(f"only in the candidate (not gated): {names}")
        return [scrub_text(line) for line in lines]

    def cells(self) -> list[dict[str, Any]]:
        """Each row's cells as text: ``verdict``, ``metric``, ``condition``, ``baseline``,
        ``candidate``, ``ratio``, ``ci``, ``n``, ``answer``, ``note`` (with what decides it)
        and ``decide``."""
        rows = []
        for label, row in zip(self.row_labels(), self.frame.to_dict("records"), strict=True):
            has_ci = math.isfinite(row["ci_low"]) and math.isfinite(row["ci_high"])
            rows.append(
                {
                    "verdict": str(row["verdict"]),
                    "metric": str(row["metric"]),
                    "condition": label,
                    "baseline": _value(row["baseline_mean"], row["unit"]),
                    "candidate": _value(row["candidate_mean"], row["unit"]),
                    "ratio": format_number(row["ratio"]) if math.isfinite(row["ratio"]) else "-",
                    "ci": (
                        f"[{format_number(row['ci_low'])}, {format_number(row['ci_high'])}]"
                        if has_ci
                        else "-"
                    ),
                    "n": f"{row['n_baseline']} vs {row['n_candidate']}",
                    "answer": str(row["answer"]),
                    "note": "; ".join(p for p in (str(row["note"]), str(row["decide"])) if p),
                    "decide": str(row["decide"]),
                    "regression": bool(row["regression"]),
                }
            )
        return rows

    def text(self) -> str:
        """The terminal table: headline, then one line per (condition, metric), failing first,
        then undecided, then within threshold."""
        columns = ["verdict", "metric", "condition", "baseline", "candidate", "ratio", "ci", "n"]
        header = [*columns[:6], f"{100.0 * self.level:g}% CI", "n", "answer", "note"]
        rows = [[cell[c] for c in (*columns, "answer", "note")] for cell in self.cells()]
        if not any(row[-1] for row in rows):
            header, rows = header[:-1], [row[:-1] for row in rows]
        lines = [self.headline(), self.warning(), text_table(header, rows, right={3, 4, 5})]
        lines += self.unmatched_lines()
        return scrub_text("\n".join(lines))

    def markdown(self) -> str:
        """A Markdown section for a pull-request comment (:mod:`~cnibench.report.gate.markdown`:
        regressions and undecided comparisons first, those within threshold folded, at most
        65,536 characters)."""
        from cnibench.report.gate.markdown import comparison_markdown

        return comparison_markdown(self)

    def junit(self) -> str:
        """JUnit XML, one test case per gated comparison (:mod:`~cnibench.report.gate.junit`)."""
        from cnibench.report.gate.junit import comparison_junit

        return comparison_junit(self)


def _value(value: float, unit: str) -> str:
    """A mean with its unit: ``16.43G bits/s``, ``103.5 us`` (:func:`format_number`); ``-``
    without one."""
    if not math.isfinite(value):
        return "-"
    return f"{format_number(value)} {unit}".strip()


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


def write_junit(comparison: ResultComparison, path: Path) -> Path:
    """Write :meth:`ResultComparison.junit` atomically (never a half-written file).

    Raises
    ------
    ConfigError
        The file cannot be written (missing directory, permissions).
    """
    try:
        return atomic_write_bytes(path, comparison.junit().encode())
    except ResultsError as exc:
        raise ConfigError(f"cannot write --junit {path}: {exc}") from exc
