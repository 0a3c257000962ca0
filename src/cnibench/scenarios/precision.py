"""``--precision``: whether a condition's runs are precise enough to stop, and what it did in
one line. The rule looks at interval widths only, never at a difference or a p-value, so
stopping on it cannot bias a comparison."""

from __future__ import annotations

import math
import warnings
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from cnibench import stats
from cnibench.records import RunStatus

if TYPE_CHECKING:
    from cnibench.scenarios.runner import RunResult

__all__ = ["precision_reached", "precision_words"]


def precision_reached(
    runs: Sequence[RunResult], metrics: Sequence[str], target: float
) -> tuple[bool, dict[str, float]]:
    """Whether every positive primary metric's interval is narrow enough for ``target``.

    Parameters
    ----------
    runs:
        The attempts so far (only ok ones count).
    metrics:
        The scenario's primary metrics; those not measured, or with a run at 0 or below (no
        relative width), are left out.
    target:
        Wanted half-width of a *contrast* between two such conditions, as a fraction (0.05
        for ``--precision 5%``). Each condition must reach ``target / sqrt(2)``: two
        independent conditions of that half-width on the log scale give a ratio of about
        ``target``.

    Returns
    -------
    tuple of (bool, dict)
        Whether all reached it (False with fewer than 2 ok runs or no metric to judge), and
        per metric the relative half-width of its 95 % interval, ``sqrt(high / low) - 1``.
    """
    ok = [run for run in runs if run.status is RunStatus.OK]
    widths: dict[str, float] = {}
    for metric in metrics:
        values = [
            m.value for run in ok for m in run.measurements if m.metric == metric and m.pair is None
        ]
        finite = [v for v in values if math.isfinite(v)]
        if len(finite) < 2 or min(finite) <= 0:
            continue
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", stats.DegenerateDataWarning)
            interval = stats.geometric_mean_interval(finite)
        widths[metric] = math.sqrt(interval.high / interval.low) - 1.0
    reached = bool(widths) and all(w <= target / math.sqrt(2.0) for w in widths.values())
    return reached, widths


def precision_words(
    reached: bool, widths: Mapping[str, float], target: float, repetitions: int
) -> str:
    """What ``--precision`` did, in one line, e.g. ``"precision ±5 % reached after 9 runs:
    throughput ±3.1 %"``."""
    shown = ", ".join(f"{metric} ±{100 * width:.1f} %" for metric, width in widths.items())
    goal = (
        f"±{100 * target:g} % per contrast (±{100 * target / math.sqrt(2.0):.1f} % per condition)"
    )
    if reached:
        return f"precision {goal} reached after {repetitions} runs: {shown}"
    return (
        f"precision {goal} NOT reached: stopped at the maximum of {repetitions} runs:"
        f" {shown or 'no positive primary metric to judge'}"
    )
