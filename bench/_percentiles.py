"""The time-to-effect table's promise, measured for ``bench/coverage.py``'s section
``percentiles``: each configuration's P50 and P90 interval (``report.effects.time_to_effect``,
the table and matrix rows users read) holds the true percentile at least 95 % of the time, at
the designs the study runs (10 runs: 2 sessions of 5; 20 runs), on the shapes times to effect
take: lognormal (a policy's enforcement, kube-router and Cilium on kind, 2026-12-06) and two
steps (a proxy that resyncs in batches: Cilium's 0.03 s and 0.3-0.5 s at 100 Services). An
interval open above (P90 below 36 runs) counts as covering when its lower end holds: its
promise is one-sided, at 97.5 %. Beside it: the mean's t interval on the same runs, which
users would otherwise read, against the same percentile.
"""

from __future__ import annotations

import json
import math
import warnings

import numpy as np
import pandas as pd
from scipy import stats as sps

from cnibench import stats
from cnibench.report.effects import time_to_effect

DESIGNS = (10, 20)
PERCENTILES = (50, 90)
PER_CALL = 20  # configurations per time_to_effect call


def _lognormal(rng: np.random.Generator, n: int) -> np.ndarray:
    return rng.lognormal(math.log(0.1), 0.3, n)


def _two_steps(rng: np.random.Generator, n: int) -> np.ndarray:
    fast = rng.random(n) < 0.1
    return np.where(fast, rng.normal(0.03, 0.003, n), rng.normal(0.42, 0.06, n))


def _truth(shape: str, q: float) -> float:
    if shape == "lognormal":
        return float(math.exp(math.log(0.1) + 0.3 * sps.norm.ppf(q)))
    grid = np.linspace(0.0, 1.0, 400_001)
    cdf = 0.1 * sps.norm.cdf(grid, 0.03, 0.003) + 0.9 * sps.norm.cdf(grid, 0.42, 0.06)
    return float(grid[np.searchsorted(cdf, q)])


SHAPES = {"lognormal": _lognormal, "two steps": _two_steps}


def _frame(samples: list[np.ndarray]) -> pd.DataFrame:
    """Each sample as one configuration's policy timings, in runs of sessions of 5."""
    rows = []
    for c, values in enumerate(samples):
        for i, seconds in enumerate(values):
            common = {
                "session_id": f"c{c}-s{i // 5}",
                "run_id": f"c{c}-r{i}",
                "cni": f"c{c}",
                "scenario": "policy",
                "status": "ok",
                "pair": None,
                "parameters": json.dumps({"rules": 0}),
            }
            rows.append({**common, "metric": "policy_enforcement_time", "value": seconds})
            rows.append({**common, "metric": "policy_enforcement_time_leaks", "value": 0.0})
    return pd.DataFrame(rows)


def percentile_rates(simulations: int, rng: np.random.Generator) -> tuple[list[str], bool]:
    """Coverage of the time-to-effect table's P50 and P90 intervals, beside the mean's."""
    calls = max(1, simulations // PER_CALL)
    lines = [
        f"time to effect: percentile intervals of report.effects.time_to_effect"
        f" ({calls * PER_CALL} configurations per cell; 95 % two-sided, or 97.5 % one-sided"
        " where open above)",
        f"  {'shape':<10} {'n':>3} {'pct':>4} {'covers':>7} {'margin':>6} {'open':>5}"
        f" {'mean t CI':>9}",
    ]
    ok = True
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for shape, draw in SHAPES.items():
            for n in DESIGNS:
                samples = [draw(rng, n) for _ in range(calls * PER_CALL)]
                table = pd.concat(
                    [
                        time_to_effect(_frame(samples[k : k + PER_CALL]))
                        for k in range(0, len(samples), PER_CALL)
                    ]
                )
                means = [stats.confidence_interval(s) for s in samples]
                for pct in PERCENTILES:
                    truth = _truth(shape, pct / 100)
                    rows = table[table["percentile"] == pct]
                    low, high = rows["low"].to_numpy(), rows["high"].to_numpy()
                    opened = np.isinf(high)
                    covers = float(np.mean((low <= truth) & (truth <= high)))
                    promised = 0.975 if opened.all() else 0.95
                    margin = 1.96 * math.sqrt(promised * (1 - promised) / len(rows))
                    ok = ok and covers >= promised - margin
                    mean_covers = float(np.mean([m.low <= truth <= m.high for m in means]))
                    lines.append(
                        f"  {shape:<10} {n:>3} P{pct:<3} {covers:>7.3f} {margin:>6.3f}"
                        f" {opened.mean():>5.2f} {mean_covers:>9.3f}"
                    )
    lines.append(
        "  covers = share of intervals holding the true percentile (open above: the lower end"
        " holds); open = share open above; mean t CI = the mean's interval on the same runs"
    )
    lines.append("  promised: covers >= 0.95 (0.975 where open above), within the margin")
    return lines, ok
