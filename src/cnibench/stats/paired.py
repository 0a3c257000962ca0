"""Two conditions run in interleaved rounds: the contrast from the differences within rounds.

``cnibench run`` interleaves the conditions of one cluster in rounds (control, treatment,
control, ...), so each round holds one run of each side, taken minutes apart on the same
machine state. A slow round (a busy host, a filling conntrack table) moves both of its runs
alike. Welch's test over all runs lets that round effect cancel out of the estimate but keeps
it in the error; the differences within rounds drop it from both. With a round SD of 5 % and a
run noise of 2 %, 6 rounds detect a ×1.05 with power about 0.9 paired against about 0.26 with
Welch (``bench/coverage.py --sections paired``, where both are measured side by side).

Every function here is pure and unit-agnostic: a ratio contrast passes logarithms, or uses
:func:`paired_log_ratio`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
from scipy import stats as sps

from cnibench.errors import InsufficientDataError
from cnibench.stats._validation import (
    _validated_level,
    _validated_positive,
    _validated_values,
    _warn,
)
from cnibench.stats.power import sd_upper_factor, smallest_enough, t_test_power

__all__ = [
    "PairedDifference",
    "paired_detectable_effect",
    "paired_difference",
    "paired_log_ratio",
    "paired_power",
    "paired_runs_needed",
]


@dataclass(frozen=True)
class PairedDifference:
    """The mean within-round difference, treatment minus control, with Student's interval.

    Attributes
    ----------
    estimate:
        Mean of the ``n_pairs`` differences, in the unit of the values (of the logarithms for
        :func:`paired_log_ratio`, whose :attr:`ratio` is ``exp`` of it).
    low, high:
        Its interval at ``level`` (Student's t with ``n_pairs - 1`` degrees of freedom); NaN
        with fewer than 2 pairs, equal to ``estimate`` when every difference is the same.
    p_value:
        Two-sided p-value of the paired t test (``scipy.stats.ttest_rel``); NaN where there is
        no interval.
    sd:
        Standard deviation of the differences (what the runs-needed advice is computed from).
    df:
        Degrees of freedom, ``n_pairs - 1``.
    n_pairs:
        Rounds with a run of each side.
    level:
        Confidence level of ``low``/``high``.
    log:
        Whether the differences are of logarithms (a ratio contrast).
    """

    estimate: float
    low: float
    high: float
    p_value: float
    sd: float
    df: float
    n_pairs: int
    level: float
    log: bool = False

    @property
    def ratio(self) -> float:
        """``exp(estimate)`` for a log-scale contrast (the ratio of geometric means), else NaN."""
        return math.exp(self.estimate) if self.log else math.nan

    @property
    def ratio_interval(self) -> tuple[float, float]:
        """``(exp(low), exp(high))`` for a log-scale contrast, else NaNs."""
        if not self.log:
            return math.nan, math.nan
        return math.exp(self.low), math.exp(self.high)


def paired_difference(
    control: npt.ArrayLike, treatment: npt.ArrayLike, *, level: float = 0.95
) -> PairedDifference:
    """Paired t interval of ``treatment - control`` over rounds.

    Parameters
    ----------
    control, treatment:
        One value per round, in the same round order (``control[i]`` and ``treatment[i]``
        were run in round ``i``), same unit.
    level:
        Confidence level in (0, 1).

    Returns
    -------
    PairedDifference

    Raises
    ------
    InsufficientDataError
        Empty or non-finite input, or sides of different lengths (a round without one side
        is no pair: the caller falls back to an unpaired comparison).

    Warns
    -----
    DegenerateDataWarning
        Fewer than 2 pairs (no interval), or identical differences (a zero-width interval).

    Examples
    --------
    >>> r = paired_difference([10.0, 12.0, 9.0, 11.0], [10.5, 12.4, 9.6, 11.5])
    >>> round(r.estimate, 3), r.n_pairs, r.low > 0
    (0.5, 4, True)
    """
    c = _validated_values(control, "control")
    t = _validated_values(treatment, "treatment")
    if c.size != t.size:
        raise InsufficientDataError(
            f"paired sides need one value per round each, got {c.size} and {t.size}"
        )
    confidence = _validated_level(level)
    return _paired(t - c, confidence, log=False)


def paired_log_ratio(
    control: npt.ArrayLike, treatment: npt.ArrayLike, *, level: float = 0.95
) -> PairedDifference:
    """Paired t interval of the log ratio ``log(treatment / control)`` over rounds.

    The ratio of geometric means is :attr:`PairedDifference.ratio`, its interval
    :attr:`PairedDifference.ratio_interval`; both sides must be positive.

    Raises
    ------
    InsufficientDataError
        As :func:`paired_difference`, or a value that is not positive.

    Examples
    --------
    >>> r = paired_log_ratio([100.0, 120.0, 90.0], [105.0, 126.0, 94.5])
    >>> round(r.ratio, 4)
    1.05
    """
    c = _validated_values(control, "control")
    t = _validated_values(treatment, "treatment")
    if np.any(c <= 0.0) or np.any(t <= 0.0):
        raise InsufficientDataError("a paired log ratio needs positive values on both sides")
    if c.size != t.size:
        raise InsufficientDataError(
            f"paired sides need one value per round each, got {c.size} and {t.size}"
        )
    confidence = _validated_level(level)
    return _paired(np.log(t) - np.log(c), confidence, log=True)


def _paired(differences: npt.NDArray[np.float64], level: float, *, log: bool) -> PairedDifference:
    n = int(differences.size)
    estimate = float(np.mean(differences))
    if n < 2:
        _warn(f"a paired interval needs at least 2 rounds, got {n}: no interval")
        return PairedDifference(
            estimate, math.nan, math.nan, math.nan, math.nan, math.nan, n, level, log
        )
    sd = float(np.std(differences, ddof=1))
    df = float(n - 1)
    if sd == 0.0:
        _warn("every round's difference is the same: a zero-width interval and no p-value")
        return PairedDifference(estimate, estimate, estimate, math.nan, 0.0, df, n, level, log)
    se = sd / math.sqrt(n)
    half = float(sps.t.ppf(0.5 + level / 2.0, df)) * se
    p_value = float(2.0 * sps.t.sf(abs(estimate) / se, df))
    return PairedDifference(
        estimate, estimate - half, estimate + half, p_value, sd, df, n, level, log
    )


def paired_power(effect: float, sd: float, pairs: int, *, alpha: float = 0.05) -> float:
    """Power of the two-sided paired t test.

    Parameters
    ----------
    effect:
        True mean difference (of logarithms for a ratio: ``log(1.05)``).
    sd:
        Standard deviation of the within-round differences, same scale.
    pairs:
        Rounds (at least 2).
    alpha:
        Two-sided level of the test (already corrected for its family where it is one of many).

    Returns
    -------
    float
        From the noncentral t distribution with ``pairs - 1`` degrees of freedom.
    """
    if pairs < 2:
        raise InsufficientDataError("paired power needs at least 2 rounds")
    scale = _validated_positive(sd, "sd")
    _validated_level(alpha)
    return t_test_power(abs(effect) / scale * math.sqrt(pairs), pairs - 1.0, alpha)


def paired_detectable_effect(
    sd: float, pairs: int, *, alpha: float = 0.05, power: float = 0.8
) -> float:
    """Smallest true mean difference a paired t test over ``pairs`` rounds detects with
    ``power`` at ``alpha`` (same scale as ``sd``, the SD of the within-round differences)."""
    scale = _validated_positive(sd, "sd")
    low, high = 0.0, scale
    while paired_power(high, scale, pairs, alpha=alpha) < power:
        low, high = high, 2.0 * high
    for _ in range(60):
        middle = (low + high) / 2.0
        if paired_power(middle, scale, pairs, alpha=alpha) < power:
            low = middle
        else:
            high = middle
    return high


def paired_runs_needed(
    sd: float,
    margin: float,
    *,
    alpha: float = 0.05,
    power: float = 0.8,
    df_sd: float = math.inf,
    most: int = 100_000,
) -> int:
    """Rounds a paired t test needs to detect ``margin`` with ``power``.

    Parameters
    ----------
    sd:
        Standard deviation of the within-round differences (logarithms for a ratio).
    margin:
        The difference to detect, same scale (``log(1.05)`` for ±5 %).
    alpha:
        Two-sided level, corrected for the contrast's family (Bonferroni's ``0.05 / m`` is
        the conservative choice that keeps the stated power under Holm's step-down).
    power:
        Wanted power.
    df_sd:
        Degrees of freedom ``sd`` was estimated with. With a finite value ``sd`` is first
        raised to its one-sided 80 % upper confidence bound (``sd * sqrt(df / chi2_0.2(df))``),
        so that an SD that happened to come out low in a few rounds does not promise a power
        the next runs will not have.
    most:
        Give up above this many (returned as is).

    Returns
    -------
    int
        Smallest number of rounds, at least 2.
    """
    scale = _validated_positive(sd, "sd")
    size = _validated_positive(margin, "margin")
    _validated_level(alpha)
    _validated_level(power)
    scale *= sd_upper_factor(df_sd)

    def enough(n: int) -> bool:
        return paired_power(size, scale, n, alpha=alpha) >= power

    return smallest_enough(enough, most=most)
