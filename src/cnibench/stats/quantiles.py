"""A percentile of one sample with a distribution-free confidence interval.

Times to effect (a policy enforced, a new Service answering) are skewed and sometimes stepped,
so their mean says little; what a platform team asks is "how long, usually, and how long at
worst". The interval here assumes nothing of the distribution: it is bounded by two order
statistics, chosen from the binomial count of values below the percentile, so each tail
misses with probability at most half of ``1 - level`` (the coverage is at least ``level``,
exactly so only where the binomial allows). With few values the upper order statistic a high
percentile needs does not exist: the interval is then open above (``high`` is infinite) and
:func:`runs_to_bound` says how many values would close it.

>>> interval = percentile_interval([0.08, 0.09, 0.10, 0.11, 0.12, 0.13, 0.09, 0.1, 0.1, 0.2], 50)
>>> interval.n, round(interval.estimate, 3), interval.low, interval.high
(10, 0.1, 0.09, 0.13)
>>> runs_to_bound(90), runs_to_bound(99)
(35, 367)
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
from scipy import stats as sps

from cnibench.errors import ConfigError
from cnibench.stats._validation import _validated_level, _validated_values

__all__ = ["PercentileInterval", "percentile_interval", "runs_to_bound"]


@dataclass(frozen=True)
class PercentileInterval:
    """A percentile of a sample with its distribution-free interval.

    Attributes
    ----------
    percentile : float
        Which one, in (0, 100).
    estimate : float
        The sample percentile (linear interpolation between order statistics, NumPy's
        default, as :func:`cnibench.stats.describe`).
    low, high : float
        The order statistics that bound it; ``-inf`` or ``inf`` where ``n`` is too small for
        that side (:func:`runs_to_bound`).
    level : float
        Confidence level the interval reaches at least.
    n : int
        Number of values.
    """

    percentile: float
    estimate: float
    low: float
    high: float
    level: float
    n: int

    @property
    def bounded(self) -> bool:
        """Whether both ends are finite."""
        return math.isfinite(self.low) and math.isfinite(self.high)


def _fraction(percentile: float) -> float:
    if not 0.0 < percentile < 100.0:
        raise ConfigError(f"percentile must be in (0, 100), got {percentile}")
    return percentile / 100.0


def percentile_interval(
    values: npt.ArrayLike, percentile: float, *, level: float = 0.95
) -> PercentileInterval:
    """The ``percentile`` of ``values`` with a distribution-free interval of at least
    ``level``.

    With ``B`` the number of values below the true percentile (binomial, ``n`` and ``q``),
    the interval ``[x(l), x(u)]`` (1-based order statistics) misses below when ``B < l`` and
    above when ``B >= u``; ``l`` is the largest and ``u`` the smallest order keeping each
    chance at most ``(1 - level) / 2``. No such ``l`` (or ``u``): that end is open.

    Raises
    ------
    cnibench.errors.InsufficientDataError
        No values, or a value that is not finite.
    cnibench.errors.ConfigError
        ``percentile`` outside (0, 100) or ``level`` outside (0, 1).
    """
    x = np.sort(_validated_values(values, "values"))
    q = _fraction(percentile)
    level = _validated_level(level)
    tail = (1.0 - level) / 2.0
    n = int(x.size)
    counts = np.arange(n + 1)
    below = sps.binom.cdf(counts, n, q)  # below[k] = P(B <= k)
    # Lower end x(l): P(B <= l - 1) <= tail; the largest such l >= 1.
    lows = [k + 1 for k in range(n) if below[k] <= tail]
    # Upper end x(u): P(B >= u) = 1 - P(B <= u - 1) <= tail; the smallest such u <= n.
    highs = [u for u in range(1, n + 1) if 1.0 - below[u - 1] <= tail]
    low = float(x[lows[-1] - 1]) if lows else -math.inf
    high = float(x[highs[0] - 1]) if highs else math.inf
    estimate = float(np.percentile(x, percentile))
    return PercentileInterval(percentile, estimate, low, high, level, n)


def runs_to_bound(percentile: float, *, level: float = 0.95) -> int:
    """The fewest values for which :func:`percentile_interval` is bounded on both ends: the
    largest value must be above the percentile with probability ``1 - (1 - level) / 2``
    (``q**n <= tail``), and the smallest below it (``(1 - q)**n <= tail``)."""
    q = _fraction(percentile)
    tail = (1.0 - _validated_level(level)) / 2.0
    above = math.log(tail) / math.log(q)
    below = math.log(tail) / math.log(1.0 - q)
    return math.ceil(max(above, below) - 1e-12)
