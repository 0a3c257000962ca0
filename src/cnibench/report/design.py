"""How a contrast's runs were taken: in one session or several, interleaved or in sequence.

The verdict's intervals assume independent runs. Two designs break that, and both are read
from the tidy results alone (``session_id``, ``time``):

- *sequential* sides: within a session, all the control's runs and then all the treatment's
  (or the other way round). Runs drift (a warming host, a filling conntrack table), and the
  drift then moves one side's mean against the other's, while each side's own spread misses
  it. :func:`drift_bound` estimates the drift as the lag-1 autocorrelation of an AR(1) over
  each session's run order, from the residuals of each side around its own mean (pooled over
  the contrast's sides and metrics), and bounds it by what those runs cannot rule out;
  :func:`drift_widening` turns the bound into the factor the variance of the difference of
  means grows by and the degrees of freedom left.
  Interleaved sides (rounds: control, treatment, control, ...) need no correction: the drift
  falls on both alike.
- sides from *different sessions* (another cluster, another day): a session offset moves a
  whole side. Runs of one session are not independent draws of that offset, so the unit of
  replication is the session: :func:`session_means` gives each side's per-session means, to
  compare when each side has at least 2 sessions; with fewer the offset cannot be told from a
  difference (:data:`ACROSS_SESSIONS_ADVICE`). Sides whose sessions overlap without being
  the same (a sweep in the first of two sessions, its control in both) are compared within
  the sessions they share (:func:`within_shared_sessions`), where an offset moves both alike.

``bench/coverage.py`` (sections ``aa-drift`` and ``aa-sessions``) measures how often an A/A
contrast's interval excludes no difference under both, through :func:`cnibench.report.verdict`.
"""

from __future__ import annotations

import enum
import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
import pandas as pd

from cnibench.stats import t_quantile, t_upper_tail

__all__ = [
    "ACROSS_SESSIONS_ADVICE",
    "DRIFT_BOUND_SD",
    "DriftBound",
    "Layout",
    "Pairing",
    "SideRuns",
    "drift_autocorrelation",
    "drift_bound",
    "drift_widening",
    "layout",
    "rounds_paired",
    "run_keys",
    "run_positions",
    "session_means",
    "sessions_text",
    "widened",
    "within_shared_sessions",
]

ACROSS_SESSIONS_ADVICE = "run both sides in one session, or ≥ 2 sessions each"
"""What makes a contrast across sessions with one session on a side detectable."""

DRIFT_ADVICE = (
    "interleave the conditions (cnibench run does where one cluster holds both), or run more"
)
"""What makes a sequential contrast whose drift leaves too few effective runs estimable."""

MIN_EFFECTIVE_RUNS = 3.0
"""Fewer effective runs than this (both sides together, :func:`effective_runs`) leave no
degrees of freedom for a t interval (``n_eff - 2 < 1``): a sequential contrast then states its
ratio without an interval or a claim, rather than an interval spanning orders of magnitude
(seen on a loaded machine's lab demo, 2026-11-27: 0.0041-190 for two CNIs at 5 runs each)."""

DRIFT_BOUND_SD = 0.75
"""The drift is bounded, not estimated: the largest AR(1) coefficient whose expected pooled
residual autocorrelation lies no more than this many of its standard deviations (under that
coefficient, for this layout of runs) above the observed one, read no lower than its value
without drift. Calibrated on sequential A/A lines that print an interval at rho 0.5: they
exclude no difference in 0.003 of cases at 5 runs a side and 0.059 at 10 through the verdict
(``bench/coverage.py --sections aa-printed`` and a second seed, 2026-12-06); in a prototype
(30000 contrasts a cell), 0.015 and 0.053, where 0.5 gave 0.064 and 0.068, 0.85 gave 0.004
and 0.050 with intervals a fifth wider again at 5 runs a side, and the point estimate read
0.5 of a rough standard error higher (the rule before issue 47) gave 0.12 and 0.07."""

_SESSION_GAP = 10**6
"""Positions of different sessions lie this far apart: no drift correlation between them."""

_GRID = np.linspace(0.0, 0.95, 96)
"""The AR(1) coefficients the drift is estimated on."""


class Layout(enum.StrEnum):
    """How a contrast's two sides were run relative to each other."""

    INTERLEAVED = "interleaved"
    """In one session (or the same sessions), the sides' runs alternating in time."""
    SEQUENTIAL = "sequential"
    """In one session (or the same sessions), one side's runs after the other's."""
    ACROSS_SESSIONS = "across sessions"
    """The sides come from different sessions (some session holds only one side)."""
    UNKNOWN = "unknown"
    """No run times or sessions recorded: taken as independent runs."""


@dataclass(frozen=True)
class SideRuns:
    """One side's runs of one metric, in time order.

    Attributes
    ----------
    values:
        One value per run (the scale the contrast is made on, e.g. logarithms for a ratio).
    sessions:
        Each run's ``session_id``.
    positions:
        Each run's place in its session's run order (0, 1, ...: every run of the session,
        of any condition, counts), offset by session so that no two sessions are adjacent.
    rounds:
        Each run's round, ``<session_id>/<repetition>`` (empty when the records carry no
        ``repetition``): in an interleaved session round ``i`` holds repetition ``i`` of
        every condition that takes turns (:func:`rounds_paired`).
    """

    values: npt.NDArray[np.float64]
    sessions: tuple[str, ...]
    positions: npt.NDArray[np.float64]
    rounds: tuple[str, ...] = ()


def run_positions(df: pd.DataFrame) -> pd.Series:
    """Each run's place in its session's run order, sessions far apart, by :func:`run_keys`.

    Parameters
    ----------
    df:
        Tidy results with ``run_id``, ``session_id`` and ``time`` (every run, failed ones
        too: they took their place in the order).

    Returns
    -------
    pandas.Series
        Float positions indexed by :func:`run_keys`; empty when ``time`` or ``session_id`` is
        missing.
    """
    if df.empty or "time" not in df.columns or "session_id" not in df.columns:
        return pd.Series(dtype=np.float64)
    runs = df.drop_duplicates(["session_id", "run_id"])[["run_id", "session_id", "time"]].copy()
    runs["time"] = pd.to_datetime(runs["time"], utc=True, errors="coerce")
    runs = runs.sort_values(["session_id", "time", "run_id"], kind="stable")
    order = runs.groupby("session_id", sort=True).cumcount().to_numpy(dtype=np.float64)
    session_index = (
        runs["session_id"]
        .astype(str)
        .map({s: i for i, s in enumerate(dict.fromkeys(runs["session_id"].astype(str)))})
    )
    positions = order + _SESSION_GAP * session_index.to_numpy(dtype=np.float64)
    return pd.Series(positions, index=run_keys(runs).to_numpy())


def run_keys(df: pd.DataFrame) -> pd.Series:
    """Each row's run as ``<session_id>/<run_id>``: a run id alone is unique only within its
    session, and a frame built by hand may repeat it across sessions."""
    return df["session_id"].astype(str) + "/" + df["run_id"].astype(str)


def layout(control: SideRuns, treatment: SideRuns) -> Layout:
    """Whether the sides share their sessions and, within them, alternate in time.

    Sides whose sets of sessions differ are :attr:`Layout.ACROSS_SESSIONS`. Within a shared
    session the runs of both, in time order, switch from one side to the other; rounds switch
    at least once per round, so at least ``min(n_control, n_treatment)`` times in all
    (:attr:`Layout.INTERLEAVED`); fewer switches (one: all of one side, then the other) are
    :attr:`Layout.SEQUENTIAL`.
    """
    if set(control.sessions) != set(treatment.sessions):
        return Layout.ACROSS_SESSIONS
    if not (np.isfinite(control.positions).all() and np.isfinite(treatment.positions).all()):
        return Layout.UNKNOWN
    if control.positions.size == 0 or treatment.positions.size == 0:
        return Layout.UNKNOWN
    positions = np.concatenate([control.positions, treatment.positions])
    labels = np.concatenate([np.zeros(control.positions.size), np.ones(treatment.positions.size)])
    ordered = labels[np.argsort(positions, kind="stable")]
    switches = int(np.sum(ordered[1:] != ordered[:-1]))
    fewest = min(control.positions.size, treatment.positions.size)
    return Layout.INTERLEAVED if switches >= fewest else Layout.SEQUENTIAL


def _correlation(positions: npt.NDArray[np.float64], rho: float) -> npt.NDArray[np.float64]:
    gaps = np.abs(positions[:, None] - positions[None, :])
    if rho <= 0.0:
        return np.asarray(gaps == 0, dtype=np.float64)
    return np.asarray(rho**gaps, dtype=np.float64)


def _expected_sums(positions: npt.NDArray[np.float64], rho: float) -> tuple[float, float]:
    """Expected sum of squared residuals and of lag-1 residual products of one side, per
    unit variance, under AR(1) ``rho`` over ``positions`` (in run order)."""
    n = positions.size
    centre = np.eye(n) - 1.0 / n
    covariance = centre @ _correlation(positions, rho) @ centre
    squares = float(np.trace(covariance))
    lagged = float(np.sum(np.diagonal(covariance, offset=1)))
    return squares, lagged


def _observed_sums(values: npt.NDArray[np.float64]) -> tuple[float, float]:
    residuals = values - values.mean()
    return float(residuals @ residuals), float(residuals[:-1] @ residuals[1:])


def _pooled_moments(control: SideRuns, treatment: SideRuns, rho: float) -> tuple[float, float]:
    """Mean and standard deviation of the pooled lag-1 residual autocorrelation of both sides
    (``(lagged_c + lagged_t) / (squares_c + squares_t)``) under AR(1) ``rho`` over their
    positions: a ratio of two Gaussian quadratic forms, to first order (delta method)."""
    positions = np.concatenate([control.positions, treatment.positions])
    n = positions.size
    centre = np.zeros((n, n))
    lag = np.zeros((n, n))
    start = 0
    for size in (control.positions.size, treatment.positions.size):
        block = np.eye(size) - 1.0 / size
        neighbours = (np.eye(size, k=1) + np.eye(size, k=-1)) / 2.0
        stop = start + size
        centre[start:stop, start:stop] = block
        lag[start:stop, start:stop] = block @ neighbours @ block
        start = stop
    correlation = _correlation(positions, rho)
    lag_c, centre_c = lag @ correlation, centre @ correlation
    numerator, denominator = float(np.trace(lag_c)), float(np.trace(centre_c))
    mean = numerator / denominator
    variance = 2.0 * (
        float(np.sum(lag_c * lag_c.T))
        - 2.0 * mean * float(np.sum(lag_c * centre_c.T))
        + mean * mean * float(np.sum(centre_c * centre_c.T))
    )
    return mean, math.sqrt(max(variance, 0.0)) / denominator


@dataclass(frozen=True)
class DriftBound:
    """What a contrast's runs say about its drift (:func:`drift_bound`).

    Attributes
    ----------
    estimate:
        The AR(1) coefficient whose expected pooled residual autocorrelation equals the
        observed one (method of moments; 0 when the observed one is at or below its value
        without drift).
    bound:
        The largest coefficient the runs do not rule out (:data:`DRIFT_BOUND_SD`): what the
        interval is widened for. At or above ``estimate``; it tends to it as runs grow.
    """

    estimate: float
    bound: float


def drift_bound(pairs: Sequence[tuple[SideRuns, SideRuns]]) -> DriftBound:
    """The drift's AR(1) coefficient over run order, estimated and bounded, from a contrast's
    sides (per metric).

    Parameters
    ----------
    pairs:
        ``(control, treatment)`` of each metric the contrast states, each side in time order.

    Returns
    -------
    DriftBound
        Both in [0, 0.95]; 0 and 0 when no side has 3 runs (2 runs' residuals say nothing of
        drift), NaN and NaN when no metric varies.

    Notes
    -----
    Residuals around a side's own mean have a negative lag-1 autocorrelation however
    independent the runs (-0.5 at 2 runs, about -1/n), and a drift of coefficient
    :math:`\\rho` shows in them only in part; so the observed autocorrelation :math:`r`
    (averaged over metrics) is matched to its expectation
    :math:`e(\\rho) = \\operatorname{tr}(A_1 M R M) / \\operatorname{tr}(M R M)` (:math:`M`
    centres each side, :math:`R_{ij} = \\rho^{|p_i - p_j|}`, :math:`A_1` picks neighbours),
    not taken as the coefficient. From 5 runs a side :math:`r` has a standard deviation of
    about 0.25 while :math:`e` moves by 0.24 from no drift to 0.5: the estimate cannot tell
    the two apart, and a line printed because its estimate came out low is the line whose
    drift was missed. So the interval is widened for the bound
    :math:`\\max\\{\\rho: e(\\rho) - z\\, s(\\rho) \\le \\max(r, e(0))\\}`, with
    :math:`s(\\rho)` the standard deviation of :math:`r` under :math:`\\rho` (ratio of
    quadratic forms, delta method) and :math:`z` = :data:`DRIFT_BOUND_SD`: an observed
    autocorrelation below its value without drift is noise (the drift is not negative), not
    evidence of no drift. The standard deviation is that of one metric (the one with the most
    runs): metrics of one contrast share their runs, and so their drift.
    """
    observed: list[float] = []
    informative = [
        (c, t)
        for c, t in pairs
        if max(c.values.size, t.values.size) >= 3 and min(c.values.size, t.values.size) >= 2
    ]
    if not informative:
        return DriftBound(0.0, 0.0)
    for control, treatment in informative:
        squares_c, lagged_c = _observed_sums(control.values)
        squares_t, lagged_t = _observed_sums(treatment.values)
        if squares_c + squares_t > 0.0:
            observed.append((lagged_c + lagged_t) / (squares_c + squares_t))
    if not observed:
        return DriftBound(math.nan, math.nan)
    widest = max(informative, key=lambda pair: pair[0].values.size + pair[1].values.size)
    moments = np.array([_pooled_moments(*widest, float(rho)) for rho in _GRID])
    value = float(np.mean(observed))
    reached = np.nonzero(moments[:, 0] >= value)[0]
    estimate = float(_GRID[reached[0]]) if reached.size else float(_GRID[-1])
    kept = np.nonzero(moments[:, 0] - DRIFT_BOUND_SD * moments[:, 1] <= max(value, moments[0, 0]))
    bound = float(_GRID[kept[0].max()]) if kept[0].size else 0.0
    return DriftBound(estimate, max(bound, estimate))


def drift_autocorrelation(pairs: Sequence[tuple[SideRuns, SideRuns]]) -> float:
    """The AR(1) coefficient a sequential contrast's interval is widened for: the bound of
    :func:`drift_bound` (in [0, 0.95]; 0 when no side has 3 runs, NaN when no metric
    varies)."""
    return drift_bound(pairs).bound


def effective_runs(control: SideRuns, treatment: SideRuns, rho: float) -> float:
    """The runs of both sides worth as many independent ones under AR(1) drift ``rho``:
    ``(n_c + n_t)(1 - rho)/(1 + rho)``."""
    n = control.positions.size + treatment.positions.size
    return n * (1.0 - rho) / (1.0 + rho) if rho > 0.0 else float(n)


def drift_widening(control: SideRuns, treatment: SideRuns, rho: float) -> tuple[float, float]:
    """How much AR(1) drift ``rho`` widens the variance of the difference of means.

    Returns
    -------
    tuple of float
        ``(factor, df)``: the variance of the difference of the sides' means under the drift,
        estimated from the residuals as they are under it, over the same under independent
        runs (at least 1); and the degrees of freedom its effective number of runs leaves,
        ``n_eff - 2`` with ``n_eff = (n_c + n_t)(1 - rho)/(1 + rho)`` (at least 1).
    """
    n_c, n_t = control.positions.size, treatment.positions.size
    if rho <= 0.0 or n_c < 2 or n_t < 2:
        return 1.0, math.inf
    positions = np.concatenate([control.positions, treatment.positions])
    weights = np.concatenate([np.full(n_c, -1.0 / n_c), np.full(n_t, 1.0 / n_t)])
    variance = float(weights @ _correlation(positions, rho) @ weights)
    squares = (
        _expected_sums(control.positions, rho)[0] + _expected_sums(treatment.positions, rho)[0]
    )
    factor = variance * (n_c + n_t - 2) / ((1.0 / n_c + 1.0 / n_t) * squares)
    df = max(1.0, effective_runs(control, treatment, rho) - 2.0)
    return max(1.0, factor), df


def widened(
    estimate: float,
    low: float,
    high: float,
    df: float,
    *,
    factor: float,
    df_cap: float,
    level: float,
) -> tuple[float, float, float]:
    """A t interval ``low``-``high`` around ``estimate`` (``df`` degrees of freedom) with its
    standard error times ``sqrt(factor)`` and at most ``df_cap`` degrees of freedom.

    Returns
    -------
    tuple of float
        ``(low, high, p_value)`` of the widened interval (same scale as the input).
    """
    upper = (1.0 + level) / 2.0
    se = (high - low) / (2.0 * t_quantile(upper, df))
    se *= math.sqrt(factor)
    kept = max(1.0, min(df, df_cap))
    half = t_quantile(upper, kept) * se
    p_value = 2.0 * t_upper_tail(abs(estimate) / se, kept) if se > 0 else math.nan
    return estimate - half, estimate + half, p_value


def within_shared_sessions(
    control: SideRuns, treatment: SideRuns
) -> tuple[SideRuns, SideRuns, str] | None:
    """Both sides restricted to the sessions they share, where their sets of sessions differ
    but overlap (e.g. a sweep run in the first of two sessions against a control run in
    both): within a shared session, a session's offset moves both sides alike, so the
    contrast is made there and the runs elsewhere are left out, said in the returned words.
    ``None`` when the sets are equal or disjoint (:func:`layout` decides those)."""
    first, second = set(control.sessions), set(treatment.sessions)
    shared = first & second
    if first == second or not shared:
        return None

    def keep(side: SideRuns) -> SideRuns:
        mask = np.array([s in shared for s in side.sessions], dtype=bool)
        sessions = tuple(s for s, k in zip(side.sessions, mask, strict=True) if k)
        rounds = (
            tuple(r for r, k in zip(side.rounds, mask, strict=True) if k) if side.rounds else ()
        )
        return SideRuns(side.values[mask], sessions, side.positions[mask], rounds)

    kept_control, kept_treatment = keep(control), keep(treatment)
    dropped = [
        f"{len(side.sessions) - len(kept.sessions)} {name} run(s)"
        f" of {', '.join(sorted(mine - shared))}"
        for name, side, kept, mine in (
            ("control", control, kept_control, first),
            ("treatment", treatment, kept_treatment, second),
        )
        if mine - shared
    ]
    words = (
        f"within the shared session(s) {', '.join(sorted(shared))}; "
        f"{' and '.join(dropped)} left out"
    )
    return kept_control, kept_treatment, words


@dataclass(frozen=True)
class Pairing:
    """How an interleaved contrast's runs pair up by round (:func:`rounds_paired`).

    Attributes
    ----------
    control, treatment:
        The paired values, round by round in the same order; empty when unpaired.
    incomplete:
        Rounds that hold a run of only one side (a failed or unverified run), or a side's
        run twice: any makes the contrast unpaired.
    """

    control: npt.NDArray[np.float64]
    treatment: npt.NDArray[np.float64]
    incomplete: tuple[str, ...]

    @property
    def paired(self) -> bool:
        """Every round holds one run of each side, and there are at least 2 rounds."""
        return not self.incomplete and self.control.size >= 2


def rounds_paired(control: SideRuns, treatment: SideRuns) -> Pairing:
    """Pair an interleaved contrast's runs by round (``session_id/repetition``).

    In rounds each side runs once, minutes apart from the other on the same machine state, so
    the within-round differences drop whatever moved the whole round. A round with one side
    missing (its run failed or was not verified) cannot be paired; then the contrast falls
    back to comparing all runs unpaired, which the caller says on the line. Sides that carry
    no rounds (records without ``repetition``) are not paired either.
    """
    empty = np.empty(0, dtype=np.float64)
    if not control.rounds or not treatment.rounds:
        return Pairing(empty, empty, ())
    counts_c = pd.Series(control.rounds).value_counts()
    counts_t = pd.Series(treatment.rounds).value_counts()
    repeated = sorted(
        set(counts_c[counts_c > 1].index.astype(str))
        | set(counts_t[counts_t > 1].index.astype(str))
    )
    alone = sorted(set(control.rounds) ^ set(treatment.rounds))
    if repeated or alone:
        return Pairing(empty, empty, tuple(dict.fromkeys([*alone, *repeated])))
    order = list(dict.fromkeys(control.rounds))
    by_control = dict(zip(control.rounds, control.values, strict=True))
    by_treatment = dict(zip(treatment.rounds, treatment.values, strict=True))
    return Pairing(
        np.array([by_control[r] for r in order], dtype=np.float64),
        np.array([by_treatment[r] for r in order], dtype=np.float64),
        (),
    )


def _take(side: SideRuns, keep: npt.NDArray[np.bool_]) -> SideRuns:
    return SideRuns(
        side.values[keep],
        tuple(s for s, k in zip(side.sessions, keep, strict=True) if k),
        side.positions[keep],
        tuple(r for r, k in zip(side.rounds, keep, strict=True) if k),
    )


def shared_rounds(control: SideRuns, treatment: SideRuns) -> tuple[SideRuns, SideRuns, int]:
    """Both sides cut, session by session, at the last round either side ran: a session run
    until decided (:mod:`cnibench.stats.sequential`) stops a condition once its contrasts are
    decided, while its partner may run on for others, and the rounds the partner ran alone
    after that stop belong to no look of this contrast.

    Returns the sides kept and how many of their runs were left out. Sides without rounds
    come back whole; a round missing inside the shared span (a failed run) stays missing, for
    :func:`rounds_paired` to see.
    """
    if not control.rounds or not treatment.rounds:
        return control, treatment, 0

    def last(side: SideRuns) -> dict[str, int]:
        out: dict[str, int] = {}
        for key in side.rounds:
            session, _, repetition = key.rpartition("/")
            out[session] = max(out.get(session, -1), int(repetition))
        return out

    ends_c, ends_t = last(control), last(treatment)

    def kept(side: SideRuns) -> npt.NDArray[np.bool_]:
        flags = []
        for key in side.rounds:
            session, _, repetition = key.rpartition("/")
            end = min(ends_c.get(session, -1), ends_t.get(session, -1))
            flags.append(end < 0 or int(repetition) <= end)
        return np.array(flags, dtype=bool)

    keep_c, keep_t = kept(control), kept(treatment)
    dropped = int((~keep_c).sum() + (~keep_t).sum())
    if not dropped:
        return control, treatment, 0
    return _take(control, keep_c), _take(treatment, keep_t), dropped


def session_means(side: SideRuns) -> npt.NDArray[np.float64]:
    """The mean of each session's values of one side, in order of first appearance."""
    frame = pd.DataFrame({"session": side.sessions, "value": side.values})
    means = frame.groupby("session", sort=False)["value"].mean()
    return means.to_numpy(dtype=np.float64)


def sessions_text(control: SideRuns, treatment: SideRuns) -> str:
    """The sessions a contrast draws on: ``"s1"`` for one shared session, ``"s2 vs s1"``
    (treatment first, as a ratio is treatment / control) when the sides' sessions differ."""
    first = list(dict.fromkeys(control.sessions))
    second = list(dict.fromkeys(treatment.sessions))
    if set(first) == set(second):
        return ", ".join(first)
    return f"{', '.join(second)} vs {', '.join(first)}"
