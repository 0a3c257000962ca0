"""Student's t where the layers above compute an interval or a p-value from an estimate, its
standard error and degrees of freedom (the gate's log ratios, the verdict's drift widening):
they call these and import no scipy themselves (an import contract of ``pyproject.toml``).

>>> round(t_two_sided(0.95, 10), 3), round(t_critical(0.025, 10), 3)
(2.228, 2.228)
>>> round(t_upper_tail(t_two_sided(0.95, 10), 10), 3)
0.025
"""

from __future__ import annotations

from scipy import stats as sps

__all__ = ["t_critical", "t_quantile", "t_two_sided", "t_upper_tail"]


def t_quantile(probability: float, df: float) -> float:
    """The ``probability`` quantile of Student's t with ``df`` degrees of freedom."""
    return float(sps.t.ppf(probability, df))


def t_two_sided(level: float, df: float) -> float:
    """The multiplier of a two-sided ``level`` interval: the ``0.5 + level / 2`` quantile."""
    return t_quantile(0.5 + level / 2.0, df)


def t_critical(alpha: float, df: float) -> float:
    """The value a one-sided test at ``alpha`` must exceed: the upper ``alpha`` quantile."""
    return float(sps.t.isf(alpha, df))


def t_upper_tail(statistic: float, df: float) -> float:
    """One-sided p-value of ``statistic``: the chance of t at least that large."""
    return float(sps.t.sf(statistic, df))
