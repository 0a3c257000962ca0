"""The split advice's promise, measured for ``bench/coverage.py``'s section ``split-advice``:
the requests (or runs) the verdict's split line says a 5-point skew needs, followed, detect
that skew with the power the line states.

Each pilot is 5 runs of 1000 requests of a 60/40 route that really serves 55/45 (a 5-point
skew), each run's share varying around it with SD 1 or 2 points (a normal share, then
binomial requests). The pilots go through ``report.verdict`` as a split scenario's runs, and
the design its line recommends is read back from the line: "about N requests over R run(s)"
or "about K runs of M requests". That design is then followed at the truth: fresh runs of it
go through ``stats.split_test``, and a rejection at alpha 0.01 is a detection. The mean over
pilots is the power the advice really delivers; the exact power of each followed design
(``stats.split_test_power`` at the true dispersion) gives the share of pilots whose advice
reaches the stated power. Beside it, the advice as the verdict gave it before: the pilot's
floored dispersion taken as the truth (``stats.skew_detection_plan`` without
``dispersion_df``), followed the same way.
"""

from __future__ import annotations

import json
import math
import re
import warnings

import numpy as np
import pandas as pd

from cnibench import report, stats

WEIGHTS = {"v1": 60, "v2": 40}
TRUE_SHARE = 0.55
PILOT_RUNS = 5
PILOT_REQUESTS = 1000
SPREADS = (0.01, 0.02)
STATED = 0.9  # the verdict's SKEW_POWER: what its line says the design reaches
ALPHA = 0.01  # the verdict's SKEW_ALPHA
FOLLOW_UPS = 4  # simulated split tests per followed design
PER_CALL = 10  # pilots per verdict call

_REQUESTS = re.compile(r"a 5-point skew needs about (\d+) requests over (\d+) run\(s\)")
_RUNS = re.compile(r"about (\d+) runs of (\d+) requests do")


def _runs(
    rng: np.random.Generator, runs: int, requests: int, spread: float
) -> list[dict[str, int]]:
    """Per-run requests to v1 and v2 when each run's v1 share is normal around the true share
    with SD ``spread``."""
    shares = np.clip(rng.normal(TRUE_SHARE, spread, size=runs), 0.0, 1.0)
    v1 = rng.binomial(requests, shares)
    return [{"v1": int(a), "v2": requests - int(a)} for a in v1]


def _true_dispersion(requests_per_run: float, spread: float) -> float:
    """The dispersion share variation of SD ``spread`` gives runs of that many requests:
    ``1 + (m - 1) tau^2 / (p (1 - p))``."""
    return 1.0 + (requests_per_run - 1.0) * spread**2 / (TRUE_SHARE * (1.0 - TRUE_SHARE))


def _condition(pilot: int) -> str:
    return f"v1-60-v2-40-u{pilot}"


def split_rows(pilots: list[list[dict[str, int]]]) -> pd.DataFrame:
    """The pilots as a split scenario's records: one condition per pilot (they differ in
    their users, so each is its own contrast), its runs' requests per backend."""
    rows: list[dict[str, object]] = []
    for c, pilot in enumerate(pilots):
        parameters = json.dumps({"users": c, "weights": json.dumps(WEIGHTS)}, sort_keys=True)
        for i, counts in enumerate(pilot):
            for backend, count in counts.items():
                rows.append(
                    {
                        "session_id": "s1",
                        "run_id": f"s1-split-{c}-r{i}",
                        "time": pd.Timestamp("2026-12-06T00:00:00Z")
                        + pd.Timedelta(seconds=len(pilot) * c + i),
                        "scenario": "split",
                        "cni": "vxlan",
                        "condition": _condition(c),
                        "parameters": parameters,
                        "repetition": i,
                        "metric": f"requests@{backend}",
                        "value": float(count),
                        "unit": "count",
                        "verified": True,
                        "status": "ok",
                    }
                )
    return pd.DataFrame(rows)


def advised_design(line: str) -> tuple[int, float]:
    """(runs, requests per run) the verdict's split line recommends.

    Raises
    ------
    ValueError
        The line recommends neither requests nor runs.
    """
    more_requests = _REQUESTS.search(line)
    if more_requests is not None:
        total, runs = int(more_requests.group(1)), int(more_requests.group(2))
        return runs, total / runs
    more_runs = _RUNS.search(line)
    if more_runs is not None:
        return int(more_runs.group(1)), float(more_runs.group(2))
    raise ValueError(f"no split advice in: {line}")


def _plug_in_design(pilot: list[dict[str, int]]) -> tuple[int, float]:
    """The design the verdict recommended before: the pilot's floored dispersion taken as the
    true one."""
    test = stats.split_test(pilot, WEIGHTS)
    plan = stats.skew_detection_plan(
        WEIGHTS,
        runs=test.runs,
        requests_per_run=test.n / test.runs,
        dispersion=test.dispersion,
        power=STATED,
        alpha=ALPHA,
    )
    if plan.requests is not None:
        return plan.runs, plan.requests / plan.runs
    return plan.runs_needed, plan.requests_per_run


class _Followed:
    """What following one kind of advice delivered, pilot by pilot."""

    def __init__(self) -> None:
        self.detected: list[float] = []  # per pilot: share of its follow-ups that rejected
        self.exact: list[float] = []  # per pilot: split_test_power of its design at the truth
        self.requests: list[float] = []

    def follow(self, rng: np.random.Generator, design: tuple[int, float], spread: float) -> None:
        runs, per_run = design
        hits = 0
        for _ in range(FOLLOW_UPS):
            sample = _runs(rng, runs, round(per_run), spread)
            hits += stats.split_test(sample, WEIGHTS).p_value < ALPHA
        self.detected.append(hits / FOLLOW_UPS)
        self.exact.append(
            stats.split_test_power(
                WEIGHTS,
                requests=runs * per_run,
                runs=runs,
                dispersion=_true_dispersion(per_run, spread),
                alpha=ALPHA,
            )
        )
        self.requests.append(runs * per_run)

    def mean(self) -> tuple[float, float]:
        """Mean detection rate over pilots and its Monte-Carlo 95 % half-width."""
        rates = np.asarray(self.detected)
        return float(rates.mean()), 1.96 * float(rates.std(ddof=1)) / math.sqrt(rates.size)

    def row(self, label: str, spread: float) -> str:
        mean, margin = self.mean()
        exact = np.asarray(self.exact)
        return (
            f"  {100 * spread:>5.0f} pt  {label:<34} {STATED:>6.2f} {mean:>8.3f} {margin:>6.3f}"
            f" {exact.mean():>7.3f} {np.mean(exact >= STATED):>8.3f}"
            f" {np.median(self.requests):>8.0f}"
        )


def split_advice_rates(pilots: int, rng: np.random.Generator) -> tuple[list[str], bool]:
    """Stated against delivered power of the verdict's split advice, and of the plug-in
    advice before it, for ``pilots`` pilots at each spread."""
    calls = max(1, pilots // PER_CALL)
    lines = [
        f"split advice followed (report.verdict's split line, 5-point skew, 60/40 served as"
        f" 55/45; pilots of {PILOT_RUNS} runs x {PILOT_REQUESTS} requests, {calls * PER_CALL}"
        f" per spread; {FOLLOW_UPS} split tests at alpha {ALPHA:g} per followed design)",
        f"  {'spread':>8}  {'advice':<34} {'stated':>6} {'realised':>8} {'margin':>6}"
        f" {'exact':>7} {'>=stated':>8} {'requests':>8}",
    ]
    ok = True
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for spread in SPREADS:
            verdict, plug_in = _Followed(), _Followed()
            for _ in range(calls):
                batch = [_runs(rng, PILOT_RUNS, PILOT_REQUESTS, spread) for _ in range(PER_CALL)]
                table = report.verdict(split_rows(batch))
                split_lines = table[table["scale"] == "split"].set_index("treatment")["verdict"]
                for c, pilot in enumerate(batch):
                    line = str(split_lines[_condition(c)])
                    verdict.follow(rng, advised_design(line), spread)
                    plug_in.follow(rng, _plug_in_design(pilot), spread)
            mean, margin = verdict.mean()
            ok = ok and abs(mean - STATED) - margin <= 0.05
            lines.append(verdict.row("verdict (dispersion's df allowed)", spread))
            lines.append(plug_in.row("plug-in dispersion (before)", spread))
    lines.append(
        "  realised = mean share of followed designs' split tests that reject (margin: its"
        " Monte-Carlo 95 % half-width); exact = mean"
        " split_test_power of the followed design at the true dispersion; >=stated = share of"
        " pilots whose design reaches it; requests = median over pilots"
    )
    lines.append("  promised: |realised - stated| <= 0.05 for the verdict's advice")
    return lines, ok
