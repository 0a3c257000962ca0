"""``cnibench compare --plan``'s promise, measured for ``bench/coverage.py``'s section
``gate-plan``: the allocation a plan recommends from one baseline delivers its stated power,
for the truth rather than for the baseline's own estimate, in at least 90 % of baselines.

Each simulated baseline (3 sessions of 5 runs, run CV 5 %, session-to-session SD 3 %, the
gate's 4 conditions × 5 metrics) is planned with ``report.compare.plan_gate`` for a 10 %
throughput loss at power 0.8; the plan's allocation is then scored with the *true* variance
components (``report.gate.plan.detection_power``, the same test at the same degrees of
freedom as the plan's design would have), so each baseline gives the power its plan really
delivers.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable
from dataclasses import replace

import numpy as np
import pandas as pd

from cnibench.report.compare import plan_gate
from cnibench.report.gate.plan import detection_power
from cnibench.report.gate.verdicts import GATE_ALPHA

GateSets = Callable[..., tuple[pd.DataFrame, pd.DataFrame]]


def _sigma(cv: float) -> float:
    return math.sqrt(math.log1p(cv * cv))


def gate_plan_rates(
    simulations: int, rng: np.random.Generator, gate_sets: GateSets
) -> tuple[list[str], bool]:
    """The share of baselines whose plan's allocation truly reaches the stated power."""
    runs, baselines, cv, session_sd, threshold, loss, wanted = 5, 3, 0.05, 0.03, 0.05, 0.10, 0.8
    run_variance = _sigma(cv) ** 2
    true_spread = _sigma(session_sd) ** 2 + run_variance / runs
    reached = planned = 0
    realised: list[float] = []
    sessions: list[int] = []
    for _ in range(simulations):
        pilot, _ = gate_sets(
            rng, baselines=baselines, candidates=0, runs=runs, cv=cv, session_sd=session_sd
        )
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            plans = plan_gate(pilot, loss=loss, power=wanted, threshold=threshold)
        (plan,) = [p for p in plans if p.components.metric == "throughput"]
        if plan.candidate_sessions is None:
            continue
        planned += 1
        truth = replace(plan.components, spread=true_spread, run_variance=run_variance)
        extra = plan.extra_baseline_sessions
        power = detection_power(
            truth,
            loss=loss,
            threshold=threshold,
            baseline_runs=[runs] * (baselines + extra),
            candidate_runs=[runs] * plan.candidate_sessions,
            comparisons=plan.comparisons,
            alpha=GATE_ALPHA,
            extra_df=plan.components.groups * (plan.candidate_sessions - 1 + extra),
        )
        realised.append(power)
        sessions.append(plan.candidate_sessions + extra)
        reached += power >= wanted
    share = reached / planned if planned else math.nan
    lines = [
        f"gate --plan realised (a 10 % throughput loss at power {wanted}; baselines of"
        f" {baselines} sessions × {runs} runs, run CV {100 * cv:g} %, session SD"
        f" {100 * session_sd:g} %; {simulations} baselines, {planned} with a plan)",
        f"  true power of the plan's allocation: median {np.median(realised):.3f},"
        f" 10th percentile {np.quantile(realised, 0.1):.3f}; new sessions: median"
        f" {np.median(sessions):.0f}, 90th percentile {np.quantile(sessions, 0.9):.0f}",
        f"  share of baselines whose plan reaches {wanted}: {share:.3f}; promised >= 0.90",
    ]
    margin = 1.96 * math.sqrt(max(share * (1 - share), 1e-12) / max(planned, 1))
    return lines, bool(planned) and share + margin >= 0.9
