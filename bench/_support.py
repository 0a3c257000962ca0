"""What the benchmarks share: a paired ratio with its interval, and the CSV each one writes.

Every benchmark here measures two things side by side in interleaved rounds (A, B, A, B, ...),
so that a machine that slows down during the run slows both. The rounds are pairs: the ratio
reported is the geometric mean of the per-round ratios, and its interval the Student-t
interval of the mean log ratio, transformed back (never negative, symmetric on the log scale).
"""

from __future__ import annotations

import csv
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

from cnibench import stats

T = TypeVar("T")

OUT_DIR = Path("bench-results")
"""Where the CSVs go (relative to the working directory; ignored by git)."""


@dataclass(frozen=True)
class PairedRatio:
    """Geometric mean of ``treatment[i] / control[i]`` and its interval."""

    ratio: float
    low: float
    high: float
    n: int
    level: float = 0.95

    def within(self, target: float, tolerance: float) -> bool:
        """The whole interval lies within ``target ± tolerance``."""
        return target - tolerance <= self.low and self.high <= target + tolerance

    def __str__(self) -> str:
        if self.n < 2:
            return f"{self.ratio:.3f} (one round: no interval)"
        percent = f"{100 * self.level:g} %"
        return f"{self.ratio:.3f} ({percent} CI {self.low:.3f}-{self.high:.3f}, n = {self.n})"


def paired_ratio(
    treatment: Sequence[float], control: Sequence[float], *, level: float = 0.95
) -> PairedRatio:
    """Ratio treatment / control over paired rounds, with a log-scale t interval.

    Raises
    ------
    ValueError
        Unequal lengths, no pair, or a value that is not positive.
    """
    if len(treatment) != len(control) or not treatment:
        raise ValueError("paired_ratio needs the same number (>= 1) of rounds on each side")
    if min(*treatment, *control) <= 0:
        raise ValueError("paired_ratio needs positive values")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", stats.DegenerateDataWarning)  # one round: no interval
        paired = stats.paired_log_ratio(control, treatment, level=level)
    low, high = paired.ratio_interval
    return PairedRatio(paired.ratio, low, high, paired.n_pairs, level)


def in_turn(sides: Sequence[T], index: int) -> list[T]:
    """``sides`` in the order round ``index`` runs them: rotated by one each round, so with two
    sides the order alternates (A B, B A, ...) and with more each one leads in turn."""
    shift = index % len(sides)
    return [*sides[shift:], *sides[:shift]]


def write_csv(name: str, rows: Sequence[Mapping[str, object]]) -> Path:
    """Write ``rows`` to ``bench-results/<name>.csv`` (atomically) and return the path."""
    OUT_DIR.mkdir(exist_ok=True)
    path = OUT_DIR / f"{name}.csv"
    partial = path.with_suffix(".csv.partial")
    with partial.open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    partial.replace(path)
    return path
