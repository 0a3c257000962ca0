"""Yes/no outcomes: the share of yes with its interval (Clopper-Pearson, Wilson), and the
difference of two shares (Newcombe's interval, Fisher's exact test)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

import numpy as np
from scipy import stats as sps

from cnibench.errors import InsufficientDataError
from cnibench.stats._validation import _shown, _validated_choice, _validated_level
from cnibench.stats.intervals import Interval


def proportion_interval(
    successes: int,
    trials: int,
    *,
    level: float = 0.95,
    method: Literal["clopper-pearson", "wilson"] = "clopper-pearson",
) -> Interval:
    """Share of yes among ``trials`` yes/no outcomes, with its interval.

    Parameters
    ----------
    successes, trials : int
        Count of yes and of outcomes (e.g. 4 of 5 probes reachable), ``0 <= successes <=
        trials``, ``trials >= 1``.
    level : float, default 0.95
        Confidence level, strictly between 0 and 1.
    method : {"clopper-pearson", "wilson"}, default "clopper-pearson"
        Exact (Clopper-Pearson, never below ``level``) or Wilson's score interval.

    Returns
    -------
    Interval
        ``estimate = successes / trials`` and the bounds, in [0, 1]; ``n = trials``.

    Raises
    ------
    InsufficientDataError
        Counts that are negative, not whole, or more successes than trials.
    ConfigError
        ``level`` outside (0, 1), unknown ``method``.

    Notes
    -----
    Clopper-Pearson: the ``alpha/2`` and ``1 - alpha/2`` quantiles of
    ``Beta(k, n - k + 1)`` and ``Beta(k + 1, n - k)`` (0 and 1 at the edges). Wilson:
    :math:`(\\hat p + z^2/2n \\pm z\\sqrt{\\hat p(1-\\hat p)/n + z^2/4n^2}) / (1 + z^2/n)`.

    References
    ----------
    C. J. Clopper and E. S. Pearson, Biometrika 26 (1934) 404-413.
    E. B. Wilson, JASA 22 (1927) 209-212.

    Examples
    --------
    >>> ci = proportion_interval(4, 5)
    >>> round(ci.low, 2), round(ci.high, 2)
    (0.28, 0.99)
    """
    k, n = _validated_count_pair(successes, trials)
    confidence = _validated_level(level)
    chosen = _validated_choice(method, ("clopper-pearson", "wilson"), "method")
    alpha = 1.0 - confidence
    if chosen == "clopper-pearson":
        low = 0.0 if k == 0 else float(sps.beta.ppf(alpha / 2.0, k, n - k + 1))
        high = 1.0 if k == n else float(sps.beta.ppf(1.0 - alpha / 2.0, k + 1, n - k))
    else:
        low, high = _wilson_bounds(k, n, alpha)
    return Interval(k / n, low, high, confidence, chosen, n)


def _validated_count_pair(successes: int, trials: int) -> tuple[int, int]:
    for name, value in (("successes", successes), ("trials", trials)):
        if isinstance(value, bool) or not isinstance(value, int | np.integer):
            raise InsufficientDataError(f"{name} must be a whole number, got {_shown(value)}")
    k, n = int(successes), int(trials)
    if n < 1 or not 0 <= k <= n:
        raise InsufficientDataError(
            f"need 0 <= successes <= trials and trials >= 1, got {k} of {n}"
        )
    return k, n


def _wilson_bounds(k: int, n: int, alpha: float) -> tuple[float, float]:
    z = float(sps.norm.ppf(1.0 - alpha / 2.0))
    p = k / n
    centre = (p + z * z / (2.0 * n)) / (1.0 + z * z / n)
    half = z * math.sqrt(p * (1.0 - p) / n + z * z / (4.0 * n * n)) / (1.0 + z * z / n)
    return max(0.0, centre - half), min(1.0, centre + half)


@dataclass(frozen=True)
class ProportionDifference:
    """Difference of two proportions (treatment - control) with Newcombe's interval.

    Attributes
    ----------
    difference:
        ``k_t / n_t - k_c / n_c``, in [-1, 1].
    low, high:
        Newcombe's hybrid score interval (method 10), built from the two Wilson intervals.
    level:
        Confidence level.
    p_value:
        Two-sided p-value of Fisher's exact test of the 2x2 table.
    successes_treatment, trials_treatment, successes_control, trials_control:
        The counts.
    """

    difference: float
    low: float
    high: float
    level: float
    p_value: float
    successes_treatment: int
    trials_treatment: int
    successes_control: int
    trials_control: int


def proportion_difference(
    successes_control: int,
    trials_control: int,
    successes_treatment: int,
    trials_treatment: int,
    *,
    level: float = 0.95,
) -> ProportionDifference:
    """Treatment minus control share of yes, with Newcombe's interval and Fisher's exact test.

    Parameters
    ----------
    successes_control, trials_control, successes_treatment, trials_treatment : int
        The two counts, e.g. 5 of 5 reachable without a policy and 4 of 5 with it.
    level : float, default 0.95
        Confidence level, strictly between 0 and 1.

    Returns
    -------
    ProportionDifference

    Notes
    -----
    With Wilson bounds :math:`(l_t, u_t)` and :math:`(l_c, u_c)` and :math:`d = \\hat p_t -
    \\hat p_c`, Newcombe's interval is :math:`d - \\sqrt{(\\hat p_t - l_t)^2 + (u_c - \\hat
    p_c)^2}` to :math:`d + \\sqrt{(u_t - \\hat p_t)^2 + (\\hat p_c - l_c)^2}`.

    References
    ----------
    R. G. Newcombe, "Interval estimation for the difference between independent proportions:
    comparison of eleven methods", Statistics in Medicine 17 (1998) 873-890.
    """
    kc, nc = _validated_count_pair(successes_control, trials_control)
    kt, nt = _validated_count_pair(successes_treatment, trials_treatment)
    confidence = _validated_level(level)
    alpha = 1.0 - confidence
    pt, pc = kt / nt, kc / nc
    lt, ut = _wilson_bounds(kt, nt, alpha)
    lc, uc = _wilson_bounds(kc, nc, alpha)
    d = pt - pc
    low = d - math.sqrt((pt - lt) ** 2 + (uc - pc) ** 2)
    high = d + math.sqrt((ut - pt) ** 2 + (pc - lc) ** 2)
    table = [[kt, nt - kt], [kc, nc - kc]]
    p_value = float(sps.fisher_exact(table).pvalue)
    return ProportionDifference(d, low, high, confidence, p_value, kt, nt, kc, nc)
