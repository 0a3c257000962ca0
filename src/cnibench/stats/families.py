"""Multiplicity by question: Holm's correction within each family, and the interval that
carries each call.

A report asks several questions at once ("what does the egress gateway cost on vxlan?",
"how does Cilium compare with flannel?"). Each is a *family* of contrasts: the metrics of one
feature on one configuration, or one CNI against its reference over the conditions of one
scenario. Correcting over the whole report instead makes every answer depend on how many other
questions happened to be asked: a ×0.8 at a CV of 10 % and 5 runs a side is detected with
probability 0.85 alone, 0.29 among 17 contrasts and 0.07 among 130; within families of five,
about 0.7 (``bench/coverage.py --sections families``).

Within a family the calls are Holm's: the family-wise error rate stays at ``1 - level`` under
any dependence between its contrasts, which share their control runs. The interval printed
beside a call must carry it: a line must never print an interval that excludes no change
beside "no detectable difference". :func:`call_levels` gives each contrast the level at which
its own interval excludes no change exactly when Holm rejects it (``1 - alpha * p / p_adj``),
which lies between the unadjusted level and Bonferroni's, and :func:`interval_at_level` moves a
Student interval to that level.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Sequence

import numpy as np
import numpy.typing as npt
from scipy import stats as sps

from cnibench.stats._validation import FloatArray, _validated_level
from cnibench.stats.contrasts import holm_adjusted

__all__ = ["call_levels", "family_holm", "family_sizes", "interval_at_level"]


def family_holm(p_values: npt.ArrayLike, families: Sequence[Hashable]) -> FloatArray:
    """Holm-adjusted p-values, each family corrected on its own.

    Parameters
    ----------
    p_values:
        One p-value per contrast (NaN: no test; left out of its family and kept NaN).
    families:
        One hashable family key per contrast, same length.

    Returns
    -------
    numpy.ndarray
        Adjusted p-values in input order.

    Raises
    ------
    ValueError
        Lengths differ, or a p-value outside [0, 1].

    Examples
    --------
    >>> family_holm([0.01, 0.04, 0.03], ["a", "a", "b"]).tolist()
    [0.02, 0.04, 0.03]
    """
    p = np.asarray(p_values, dtype=np.float64).reshape(-1)
    if p.size != len(families):
        raise ValueError(f"{p.size} p-values but {len(families)} family keys")
    out = np.full(p.shape, np.nan)
    groups: dict[Hashable, list[int]] = {}
    for index, key in enumerate(families):
        groups.setdefault(key, []).append(index)
    for members in groups.values():
        chosen = np.asarray(members, dtype=np.intp)
        out[chosen] = holm_adjusted(p[chosen])
    return out


def family_sizes(p_values: npt.ArrayLike, families: Sequence[Hashable]) -> npt.NDArray[np.intp]:
    """How many tested contrasts (finite p-value) share each contrast's family (0 for a
    contrast without a test)."""
    p = np.asarray(p_values, dtype=np.float64).reshape(-1)
    counts: dict[Hashable, int] = {}
    for value, key in zip(p, families, strict=True):
        if math.isfinite(value):
            counts[key] = counts.get(key, 0) + 1
    return np.asarray(
        [counts.get(key, 0) if math.isfinite(v) else 0 for v, key in zip(p, families, strict=True)],
        dtype=np.intp,
    )


def call_levels(p_values: npt.ArrayLike, adjusted: npt.ArrayLike, *, level: float) -> FloatArray:
    """The confidence level of the interval that carries each contrast's Holm call.

    Parameters
    ----------
    p_values, adjusted:
        Each contrast's own p-value and its Holm-adjusted one (:func:`family_holm`).
    level:
        The family's confidence level, ``1 - alpha``.

    Returns
    -------
    numpy.ndarray
        ``1 - alpha * p / p_adj`` per contrast (NaN without a test). A two-sided interval at
        this level, dual to the contrast's test, excludes no change exactly when
        ``p_adj <= alpha``: ``p <= alpha * p / p_adj``. Holm's ``p_adj`` lies between ``p``
        and ``m * p``, so the level lies between ``level`` and Bonferroni's ``1 - alpha / m``.
        Where ``p = p_adj = 0`` the level is Bonferroni's for the family.
    """
    confidence = _validated_level(level)
    alpha = 1.0 - confidence
    p = np.asarray(p_values, dtype=np.float64).reshape(-1)
    q = np.asarray(adjusted, dtype=np.float64).reshape(-1)
    if p.size != q.size:
        raise ValueError(f"{p.size} p-values but {q.size} adjusted ones")
    out = np.full(p.shape, np.nan)
    known = np.isfinite(p) & np.isfinite(q)
    with np.errstate(divide="ignore", invalid="ignore"):
        share = np.where(q > 0.0, p / q, np.nan)
    m = int(known.sum())
    share = np.where(known & ~np.isfinite(share), 1.0 / max(m, 1), share)
    out[known] = 1.0 - alpha * np.clip(share[known], 0.0, 1.0)
    return out


def interval_at_level(
    centre: float, low: float, high: float, df: float, *, level: float, to_level: float
) -> tuple[float, float]:
    """A symmetric Student interval ``low..high`` at ``level`` moved to ``to_level``.

    Parameters
    ----------
    centre, low, high:
        The estimate and its interval, on the scale the interval is symmetric on (logarithms
        for a ratio).
    df:
        Its degrees of freedom (``inf`` for a normal interval).
    level, to_level:
        The interval's level and the wanted one, both in (0, 1).

    Returns
    -------
    tuple of float
        The interval at ``to_level``: ``centre ± (half-width) * t(to) / t(from)``.
    """
    _validated_level(level)
    _validated_level(to_level)
    if not (math.isfinite(low) and math.isfinite(high)):
        return low, high
    dof = df if df > 0 else math.inf
    scale = float(sps.t.ppf(0.5 + to_level / 2.0, dof)) / float(sps.t.ppf(0.5 + level / 2.0, dof))
    return centre - (centre - low) * scale, centre + (high - centre) * scale
