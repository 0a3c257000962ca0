"""The verdict's lines: each contrast's numbers in words, their order, and the summary
``cnibench run`` and ``pytest --cnibench-report`` print (a step of
:mod:`cnibench.report.verdict`).

Words
-----
Each line is a call (:mod:`cnibench.report.verdict.decide`): a cost, when its p-value,
Holm-adjusted within its question, is at most 5 %; "same within ±5 %" (or the margin), when
the whole interval lies inside it; else "undecided", with the effect this design detects
(power 0.8) and the runs per side that ±5 % (or the margin) would need. The interval printed
is the one that carries the call, at its own level (95 % or more). Bounds are rounded
outwards, with as many decimals as it takes for an interval that excludes 1 (or 0) not to
print as if it contained it (:func:`interval_text`). Lines are ordered by a standardized
effect (:attr:`effect_size`), not by the size of the ratio.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np
import numpy.typing as npt
import pandas as pd

from cnibench.errors import ConfigError
from cnibench.report import design
from cnibench.report.columns import wrap_words
from cnibench.report.data import SATURATION_IDLE_BOUND
from cnibench.report.derived import HOST_WIDE
from cnibench.report.verdict.decide import is_apart
from cnibench.report.verdict.formatting import decimals, interval_text, number_text, si_prefix
from cnibench.report.verdict.measure import DRIFT_TOO_STRONG, Scale
from cnibench.report.verdict.plan import ContrastKind, PlannedContrast

CORRECTION = "Holm"
"""The multiplicity correction within each question of a verdict (see the notes of
:mod:`cnibench.report.verdict`)."""

SUMMARY_LINES = 24
"""Most contrast lines :func:`verdict_summary` prints: about one terminal screen."""


MOST_RUNS = 1000
"""Above this many runs per side an undecided line says "more than 1000": a design that far
from deciding needs another design (less noise, interleaving), not a count."""

MOST_DETECTABLE = 10.0
"""Above a ×11 change (±1000 %) an undecided line says "only changes beyond ±1000 %"."""


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
    if row.get("paired"):
        n = f"n = {row['n_treatment']} rounds, paired"
    else:
        n = f"n = {row['n_treatment']} vs {row['n_control']}"
    if int(row.get("looks", 1)) > 1:
        # Run until decided: the level of the interval is 5 % over the planned looks.
        n += f", run until decided ({int(row['looks'])} looks planned)"
    notes = [str(row[k]) for k in ("pairing", "drift") if row.get(k) and not row.get("paired")]
    if row.get("paired") and row.get("drift"):
        notes = [str(row["drift"])]
    if str(row.get("why_not", "")).startswith(DRIFT_TOO_STRONG):
        # The line's reason says it, with the drift and what to do: said once.
        notes = [note for note in notes if note != DRIFT_TOO_STRONG]
        notes = [note.replace(f"; {DRIFT_TOO_STRONG}", "") for note in notes]
    return "; ".join([n, *notes])


def _drift_too_strong(row: Mapping[str, Any]) -> bool:
    """Whether a sequential contrast's drift left no interval (its ``drift`` says so after
    what else it notes, e.g. the sessions the sides shared)."""
    return DRIFT_TOO_STRONG in str(row.get("drift", ""))


def level_text(level: float) -> str:
    """A confidence level as a line prints it, rounded down so it never claims more:
    ``"95 %"``, ``"98.7 %"``."""
    shown = math.floor(1000.0 * level + 1e-9) / 10.0
    return f"{shown:g} %"


def _signed(value: float, digits: int) -> str:
    return ("+" if value >= 0 else "-") + number_text(abs(value), digits=digits)


def margin_words(row: Mapping[str, Any]) -> str:
    """``"±5 %"`` for a ratio's margin, ``"±0.05 cores"`` for a difference's, or ``""``."""
    margin = float(row["margin"])
    if not math.isfinite(margin):
        return ""
    if row["scale"] == Scale.RATIO:
        return f"±{100 * margin:g} %"
    return f"±{margin:g} {row['unit']}".rstrip()


def _power_words(row: Mapping[str, Any]) -> str:
    if not math.isfinite(float(row["detectable"])):
        return ""
    replicate = "rounds" if row.get("paired") else row.get("replicate", "runs")
    if row["scale"] == Scale.RATIO and float(row["detectable"]) > MOST_DETECTABLE:
        words = f": this design detects only changes beyond ±{100 * MOST_DETECTABLE:.0f} %"
    elif row["scale"] == Scale.RATIO:
        words = f": this design detects about ±{100 * float(row['detectable']):.0f} %"
    else:
        divisor, prefix = si_prefix(float(row["detectable"]))
        shown = f"{number_text(float(row['detectable']) / divisor)}{prefix}"
        words = f": this design detects about ±{shown} {row['unit']}".rstrip()
    wanted = margin_words(row)
    needed = int(row["runs_needed"])
    if wanted and needed > MOST_RUNS:
        words += f"; {wanted} needs more than {MOST_RUNS} {replicate} per side"
    elif wanted and needed > 0:
        words += f"; {wanted} needs about {needed} {replicate} per side"
    return words


def saturated_words(row: Mapping[str, Any]) -> str:
    """Why a contrast with saturated runs is no finding: ``"not decided: 2 run(s) saturated
    the host (< 5 % CPU idle)"``."""
    return (
        f"not decided: {int(row['saturated'])} run(s) saturated the host"
        f" (< {100 * SATURATION_IDLE_BOUND:g} % CPU idle)"
    )


def _estimate_words(row: Mapping[str, Any]) -> str:
    """``"×0.93, "`` or ``"+0.37 cores, "`` (the estimate alone, no interval), or ``""``."""
    estimate = float(row["estimate"])
    if not math.isfinite(estimate):
        return ""
    if row["scale"] == Scale.RATIO:
        return f"×{number_text(estimate)}, "
    if row["scale"] == Scale.DIFFERENCE:
        divisor, prefix = si_prefix(abs(estimate))
        unit = f" {row['unit']}" if row["unit"] else ""
        return f"{_signed(estimate / divisor, 2)}{prefix}{unit}, "
    return ""


def sentence(planned: PlannedContrast, row: Mapping[str, Any]) -> str:
    n = _n_text(row)
    level = level_text(float(row.get("call_level", row["level"])))
    if row["scale"] == Scale.SPLIT:
        head = f"{planned.label}:"
        if row["why_not"]:
            return f"{head} not compared ({row['why_not']}, {n})"
        word = "differs from the weights" if row["significant"] else "consistent with the weights"
        if is_apart(row) and not row["significant"]:
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
    if int(row.get("saturated", 0)):
        return f"{head} {saturated_words(row)} ({_estimate_words(row)}{n})"
    stated_without_claim = row["design"] == design.Layout.ACROSS_SESSIONS or _drift_too_strong(row)
    if row["why_not"] and stated_without_claim:
        shown = f"×{number_text(row['ratio'])}" if math.isfinite(row["ratio"]) else "not compared"
        return f"{head} {shown} ({n}; {row['why_not']})"
    if row["why_not"]:
        if math.isfinite(row["ratio"]):
            return f"{head} ×{number_text(row['ratio'])} ({row['why_not']}, {n})"
        return f"{head} not compared ({row['why_not']}, {n})"
    low, high, estimate = float(row["ci_low"]), float(row["ci_high"]), float(row["estimate"])
    digits = decimals(low, high)
    if row["scale"] == Scale.RATIO:
        stated = f"×{number_text(estimate, digits=digits)}"
        ci = f"{level} CI {interval_text(low, high, null=1.0)}"
        body = f"{stated} ({ci}, {n})"
    elif row["scale"] == Scale.DIFFERENCE:
        # One SI prefix for every number of the line (10.9G → 0.22G), as the run table.
        sides = (float(row["control_mean"]), float(row["treatment_mean"]))
        divisor, prefix = si_prefix(max(abs(v) for v in (low, high, estimate, *sides)))
        unit = f" {row['unit']}" if row["unit"] else ""
        d = decimals(low / divisor, high / divisor)
        stated = f"{_signed(estimate / divisor, d)}{prefix}{unit}"
        moved = (
            f"{number_text(sides[0] / divisor, digits=d)}{prefix} →"
            f" {number_text(sides[1] / divisor, digits=d)}{prefix}"
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
    if is_apart(row):
        # Only Newcombe's interval beside Fisher's exact test can disagree (every other
        # interval is its test's dual at the call's level): say which decides.
        return (
            f"{head} undecided {body}: Fisher's exact test, {CORRECTION}-adjusted within its"
            f" question, does not confirm (adjusted p = {row['p_adjusted']:.2g})"
        )
    if row["equivalent"]:
        return f"{head} same within {margin_words(row)} {body}"
    return f"{head} undecided {body}{_power_words(row)}"


KIND_ORDER = (
    ContrastKind.FEATURE,
    ContrastKind.OPTION,
    ContrastKind.CNI,
    ContrastKind.WEIGHTS,
    ContrastKind.OUTCOME,
)
"""Order of the groups of a verdict within a scenario."""


def grouped_order(frame: pd.DataFrame) -> npt.NDArray[np.intp]:
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


CALL_RANK = {"cost": 0, "outcome": 0, "same within": 1, "undecided": 2, "not compared": 3}
"""The calls a line makes, in the order a cut summary keeps them."""


def _call(row: Mapping[str, Any]) -> str:
    """What ``row``'s line says: a cost, an outcome, same within, undecided, not compared."""
    if row["kind"] in (ContrastKind.OUTCOME, "outcome"):
        return "outcome"
    if int(row.get("saturated", 0) or 0):
        return "not compared"
    if row["significant"]:
        return "cost"
    if row["equivalent"]:
        return "same within"
    if not math.isfinite(float(row["p_value"])):
        return "not compared"
    return "undecided"


def _references(frame: pd.DataFrame) -> list[str]:
    """``["flannel for baseline: flannel, kube-router", ...]``: each group's reference."""
    chosen: Mapping[str, str] = frame.attrs.get("references", {})
    return [f"{reference} for {group}" for group, reference in chosen.items()]


REFERENCES_WORDS = "CNIs compared within groups of equal data-path options, reference"
"""What the heading says before each group's reference (:func:`_references`)."""


def verdict_lines(frame: pd.DataFrame) -> list[str]:
    """The verdict lines of :func:`verdict`'s frame, in its order (grouped by feature)."""
    return [str(text) for text in frame["verdict"]]


def verdict_summary(
    frame: pd.DataFrame,
    *,
    limit: int = SUMMARY_LINES,
    full_at: str = "",
    width: int | None = None,
) -> list[str]:
    """What ``cnibench run`` and ``pytest --cnibench-report`` print at the end: a heading, then
    :func:`verdict_lines` (the heading alone says so when there is no contrast).

    A terminal is read from its last screen, so at most ``limit`` lines are printed, chosen
    in this order: every cost and every outcome (an outcome such as ``reachable 0/5`` is an
    answer, never hidden), then the lines that read "same within", then the undecided ones,
    host-wide figures after all others; they are printed in :func:`verdict`'s order (grouped
    by feature). A last line counts what was left out by call and says where every line is
    (``full_at``, e.g. the ``cnibench report`` command of the results). The heading counts
    the tested contrasts (:func:`tested_count`) and the questions they answer, then says how
    to read the lines. With ``width`` it is several lines of at most ``width`` characters,
    one paragraph per thing it says (each reference on a line of its own); without, one line.
    The contrast lines are one each, however long: people grep them."""
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
    has_test = np.isfinite(frame["p_value"].to_numpy(dtype=np.float64))
    questions = frame.loc[has_test, "question"].nunique() if "question" in frame else 0
    # One paragraph per thing the heading says; joined by "; " on one line without a width.
    heading = [
        f"verdict: {tested} tested contrast(s) in {questions} question(s){stated}",
        f"{CORRECTION}-corrected within each question (at most {100 * (1 - level):g} % chance"
        " of any false cost per question), each interval at the level that carries its call",
        "treatment vs control: ratio of geometric means (×), or a difference in the metric's"
        " unit (+/-) where a side is 0, near 0 or negative, a difference of proportions for"
        " yes/no, one pooled test per split; grouped by feature",
    ]
    references = _references(frame)
    if references:
        heading.append(f"{REFERENCES_WORDS} " + "; ".join(references))
    aside = int((frame["saturated"] > 0).sum()) if "saturated" in frame.columns else 0
    if aside:
        # In the heading, not below the lines: what follows the lines is read as a line.
        heading.append(
            f"{aside} not decided: a run on a side saturated the host"
            f" (< {100 * SATURATION_IDLE_BOUND:g} % CPU idle)"
        )
    shown, tail = frame, []
    if len(frame) > limit:
        calls = np.array(
            [_call({str(k): v for k, v in row.items()}) for row in frame.to_dict("records")]
        )
        detected = int(np.isin(calls, ("cost", "outcome")).sum())
        # A stable sort keeps the effect order within each group.
        host = frame["metric"].isin(HOST_WIDE).to_numpy(dtype=bool)
        rank = np.vectorize(CALL_RANK.__getitem__)(calls) + len(CALL_RANK) * host
        chosen = np.sort(np.argsort(rank, kind="stable")[:limit])
        shown = frame.iloc[chosen]
        hidden = np.ones(len(frame), dtype=bool)
        hidden[chosen] = False
        heading.append(
            f"the {len(shown)} that say most: {detected} cost(s) and outcome(s), then"
            ' "same within", then undecided, host-wide figures last'
        )
        counted = ", ".join(
            f"{int((calls[hidden] == call).sum())} {call}"
            for call in CALL_RANK
            if (calls[hidden] == call).any()
        )
        rest = f"{int(hidden.sum())} more not shown ({counted})"
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
    lines = [f"  {line}" for line in verdict_lines(shown)]
    return [*_heading_lines(heading, references, width), *lines, *tail]


def _heading_lines(paragraphs: list[str], references: list[str], width: int | None) -> list[str]:
    """The heading's paragraphs on one line (``width`` None), or each wrapped to ``width``
    under the first (indented 4, its further lines 6; one line per reference), the last
    ending in ``:``."""
    if width is None:
        return ["; ".join(paragraphs) + ":"]
    first, *rest = paragraphs
    lines = wrap_words(first, width, hang="      ")
    for paragraph in rest:
        if references and paragraph.startswith(REFERENCES_WORDS):
            lines += wrap_words(f"{REFERENCES_WORDS}s:", width, indent="    ", hang="      ")
            for reference in references:
                lines += wrap_words(reference, width, indent="      ", hang="        ")
            continue
        lines += wrap_words(paragraph, width, indent="    ", hang="      ")
    lines[-1] += ":"
    return lines
