r"""The regression gate's false-alarm rates: the one its headline states for the baselines at
hand (:func:`stated_false_alarm_rate`), and what ``bench/coverage.py`` measured by simulation
(:mod:`cnibench.report.gate.measured_rates`, which that script writes, and
:func:`measured_false_alarm_rate`).

The stated rate is computed, not looked up: each gated comparison's own test (its standard
error from the metric's session-to-session SD as estimated, or as given, and the runs and
sessions of each side; its degrees of freedom) is taken as the truth, and with no true
difference the chance that it fails the gate is :func:`cnibench.stats.ratios.false_alarm_beyond`
(regression mode: significant at Holm's first step, :math:`\alpha/m`, and the estimate beyond
the threshold; Holm's later steps only follow a first rejection) or
:func:`cnibench.stats.ratios.false_alarm_not_cleared` (non-inferiority mode). The rate of the
whole comparison is at most :math:`1 - \prod_i (1 - q_i)` (the comparisons of one metric share
its variance estimate, so they alarm together rather than apart). With one session a side and
no given session SD the runs cannot bound it: a session effect of any size would look like a
regression (``bench/coverage.py`` measured 51 % at 20 metrics before the gate said so).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from cnibench.report.gate.directions import Direction
from cnibench.report.gate.interval import MetricTest, worse_logs
from cnibench.report.gate.verdicts import GATE_ALPHA, GateMode
from cnibench.stats import t_critical, t_two_sided
from cnibench.stats.ratios import false_alarm_beyond, false_alarm_not_cleared

__all__ = [
    "FalseAlarmRate",
    "MeasuredRate",
    "measured_false_alarm_rate",
    "stated_false_alarm_rate",
]


@dataclass(frozen=True)
class FalseAlarmRate:
    """The false-alarm rate of one comparison of result sets, for the baselines at hand.

    Attributes
    ----------
    rate:
        Most chance (fraction) that the gate fails this comparison when nothing changed, if
        each metric's session SD and run noise are what the data estimate (or the user gave);
        ``None`` when it cannot be bounded (:attr:`unknown`).
    comparisons:
        Gated comparisons with a test (the family Holm corrects over).
    estimated, given, unknown:
        The metrics whose session-to-session SD the data estimate, the user gave
        (``--session-sd``), or neither.
    session_sd:
        The session SD the user gave, as a fraction (0.03 = 3 %), if any.
    baselines, runs:
        Most baseline sessions of a condition, and the median runs per baseline session.
    mode:
        The gate's mode.
    """

    rate: float | None
    comparisons: int
    estimated: tuple[str, ...]
    given: tuple[str, ...]
    unknown: tuple[str, ...]
    session_sd: float | None
    baselines: int
    runs: int
    mode: GateMode = GateMode.REGRESSION

    def describe(self) -> str:
        """One clause for the headline: ``false-alarm rate at most 0.4% for these baselines
        (...)``, or why the runs cannot bound it."""
        if self.rate is None:
            return (
                "false-alarm rate not bounded: one session a side gives no session-to-session"
                f" SD for {', '.join(self.unknown)}; give --session-sd or several A/A baseline"
                " sessions"
            )
        basis = (
            f"{self.baselines} baseline session{'s' if self.baselines != 1 else ''} of"
            f" {self.runs} runs"
        )
        source = "each metric's session SD as estimated"
        if self.given:
            sd = f"session SD {100 * (self.session_sd or 0.0):g}% as given by --session-sd"
            source = (
                f"{sd} for {', '.join(self.given)}, the others' as estimated"
                if self.estimated
                else sd
            )
        test = "non-inferiority" if self.mode is GateMode.NON_INFERIORITY else "one-sided"
        shown = f"at most {100 * self.rate:.2g}%" if self.rate >= 1e-4 else "below 0.01%"
        return (
            f"false-alarm rate {shown} for these baselines ({basis}, {source},"
            f" {self.comparisons} comparison{'s' if self.comparisons != 1 else ''}; computed"
            f" from the gate's {test} test)"
        )


def stated_false_alarm_rate(
    tests: Sequence[tuple[MetricTest, Direction]],
    *,
    threshold: float,
    level: float,
    mode: GateMode,
    comparisons: int,
) -> float:
    """The chance that the gate fails when nothing changed, from each comparison's own test.

    Parameters
    ----------
    tests:
        The comparisons' tests (their standard errors and df taken as the truth), each with
        its metric's direction; identical runs (exact) raise no false alarm.
    threshold:
        The gate's threshold, fraction.
    level:
        Confidence level of the intervals (non-inferiority mode).
    mode:
        The gate's mode.
    comparisons:
        The family size Holm corrects over.

    Returns
    -------
    float
        :math:`1 - \\prod_i (1 - q_i)`, a fraction in [0, 1]: an upper bound, since the
        comparisons of one metric share its variance estimate and so alarm together
        (positively dependent, Šidák's inequality), and a simulation of the gate finds less
        (``bench/coverage.py``'s gate section prints both).
    """
    clear = 1.0
    for test, direction in tests:
        if test.exact or not test.se > 0:
            continue
        df = test.df if test.df > 0 else 1.0
        _, limit = worse_logs(direction, 0.0, threshold)
        if mode is GateMode.NON_INFERIORITY:
            quantile = t_two_sided(level, df)
            q = false_alarm_not_cleared(limit / test.se, quantile, df)
        else:
            critical = t_critical(GATE_ALPHA / max(comparisons, 1), df)
            q = false_alarm_beyond(limit / test.se, critical, df)
        clear *= 1.0 - q
    return 1.0 - clear


@dataclass(frozen=True)
class MeasuredRate:
    """One design's A/A false-alarm rate as ``bench/coverage.py`` measured it.

    Attributes
    ----------
    baselines, runs:
        The design: A/A baseline sessions of this many runs each (one candidate session).
    rate, margin:
        Share of simulated A/A comparisons that failed the gate, and its Monte-Carlo 95 %
        half-width.
    simulations, comparisons:
        Simulated compared sessions, and metric comparisons in each.
    session_sd:
        The session-to-session SDs simulated, as text (e.g. ``"8 % on 2 metrics, 1 % on 3"``).
    date, machine:
        When and where it was measured.
    """

    baselines: int
    runs: int
    rate: float
    margin: float
    simulations: int
    comparisons: int
    session_sd: str
    date: str
    machine: str

    def describe(self) -> str:
        """``0.9% (±0.6) measured for 3 baseline sessions of 5 runs by bench/coverage.py (...)``."""
        sessions = f"session{'s' if self.baselines != 1 else ''}"
        return (
            f"{100 * self.rate:.1f}% (±{100 * self.margin:.1f}) measured for {self.baselines}"
            f" baseline {sessions} of {self.runs} runs by bench/coverage.py"
            f" ({self.simulations} simulated A/A comparisons of {self.comparisons} metrics,"
            f" session SD {self.session_sd}; {self.date}, {self.machine})"
        )


def measured_false_alarm_rate(
    baselines: int,
    runs: int,
    *,
    table: Sequence[Mapping[str, str | int | float]] | None = None,
) -> tuple[MeasuredRate | None, MeasuredRate | None]:
    """Look a design up in the table ``bench/coverage.py`` wrote (:mod:`measured_rates`).

    Parameters
    ----------
    baselines, runs:
        Baseline sessions, and runs per baseline session.
    table:
        Entries to search (default: :data:`cnibench.report.gate.measured_rates.MEASURED`).

    Returns
    -------
    tuple
        ``(exact, nearest)``: the entry of this design or ``None``; and, when there is no
        exact entry, the nearest measured design (same number of baseline sessions first,
        then the closest runs), or ``None`` when the table is empty.
    """
    from cnibench.report.gate.measured_rates import MEASURED

    entries = [
        MeasuredRate(
            baselines=int(entry["baselines"]),
            runs=int(entry["runs"]),
            rate=float(entry["rate"]),
            margin=float(entry["margin"]),
            simulations=int(entry["simulations"]),
            comparisons=int(entry["comparisons"]),
            session_sd=str(entry["session_sd"]),
            date=str(entry["date"]),
            machine=str(entry["machine"]),
        )
        for entry in (MEASURED if table is None else table)
    ]
    for entry in entries:
        if (entry.baselines, entry.runs) == (baselines, runs):
            return entry, None
    if not entries:
        return None, None

    def distance(entry: MeasuredRate) -> tuple[float, float]:
        # One baseline session and several behave differently (no session variance): the
        # number of sessions decides first.
        sessions = abs(math.log(max(entry.baselines, 1) / max(baselines, 1)))
        return sessions, abs(math.log(max(entry.runs, 1) / max(runs, 1)))

    return None, min(entries, key=distance)
