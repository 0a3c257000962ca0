"""How the verdict prints its numbers: shares, numbers and SI prefixes, and intervals rounded
outwards (:func:`interval_text`). Plain text, no knowledge of contrasts: the labels
(:mod:`cnibench.report.verdict.plan`), details (:mod:`cnibench.report.verdict.measure`) and
lines (:mod:`cnibench.report.verdict.words`) of the verdict all write their numbers here."""

from __future__ import annotations

import math
from typing import Any

import numpy as np


def percent_text(share: float) -> str:
    return f"{100.0 * share:.3g} %"


def share_text(share: float) -> str:
    return f"{100.0 * share:.1f} %"


def _fixed(value: float, digits: int, rounding: Any) -> str:
    """``value`` with ``digits`` decimals, rounded by ``rounding`` (``math.floor`` for a
    lower bound, ``math.ceil`` for an upper one), so a printed interval never looks narrower
    than it is."""
    scaled = rounding(round(value * 10.0**digits, 9)) / 10.0**digits
    return f"{scaled:.{digits}f}"


def number_text(value: float, *, digits: int = 2) -> str:
    if abs(value) >= 100:
        return f"{value:.0f}"
    if abs(value) >= 10:
        return f"{value:.1f}"
    if abs(value) >= 0.01 or value == 0:
        return f"{value:.{digits}f}"
    # Two significant digits, never in exponent notation: "CI 0.0000085-35925" reads as a
    # (uselessly wide) interval, "CI 8.5e-06-35925" as a typo.
    return np.format_float_positional(value, precision=2, fractional=False, trim="-")


def decimals(low: float, high: float) -> int:
    """Decimals that keep an interval's bounds apart (at least 2, at most 6): a narrow
    interval must not print as "1.00-1.00"."""
    digits = 2
    while digits < 6 and 10.0**-digits > high - low:
        digits += 1
    return digits


def si_prefix(magnitude: float) -> tuple[float, str]:
    """Divisor and SI prefix for numbers of this magnitude (as the run table shows them)."""
    for smallest, divisor, prefix in ((1e9, 1e9, "G"), (1e6, 1e6, "M"), (1e4, 1e3, "k")):
        if magnitude >= smallest:
            return divisor, prefix
    return 1.0, ""


def interval_text(low: float, high: float, *, null: float) -> str:
    """``"low-high"`` rounded outwards, with enough decimals that an interval excluding
    ``null`` (1 for a ratio, 0 for a difference) never prints as if it contained it:
    ``1.004-1.02``, not ``1.00-1.02``.

    Examples
    --------
    >>> interval_text(1.0004, 1.0213, null=1.0)
    '1.0004-1.0213'
    >>> interval_text(0.0689, 113.08, null=1.0)
    '0.06-114'
    """
    digits = decimals(low, high)

    def bound(value: float, d: int, rounding: Any) -> str:
        if abs(value) >= 100:
            # No decimals on a bound this large, and only on it: a wide interval's other bound,
            # 0.069 in "0.069-114", must not round outwards to 0 (a ratio's bound is positive).
            d = 0
        elif value != 0 and abs(value) < 0.01:
            # Two significant digits however small (never "0.00" for a positive bound).
            d = max(d, 1 - math.floor(math.log10(abs(value))))
        return _fixed(value, d, rounding)

    def shown(d: int) -> tuple[str, str]:
        return bound(low, d, math.floor), bound(high, d, math.ceil)

    lo, hi = shown(digits)
    while digits < 9 and (
        (low > null and float(lo) <= null) or (high < null and float(hi) >= null)
    ):
        digits += 1
        lo, hi = shown(digits)
    # "-1.2--0.8" misreads; with a negative bound the two are joined by "to".
    return f"{lo} to {hi}" if low < 0 or high < 0 else f"{lo}-{hi}"
