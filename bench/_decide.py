"""The decide issue's promises, measured by simulation through the public API
(``report.verdict``, ``stats``), for ``bench/coverage.py``'s sections ``paired``, ``families``,
``tost``, ``advice`` and ``aa-printed``.

* ``paired``: conditions in interleaved rounds with a round effect (every run of a round moved
  alike: a busy host, a filling conntrack table). Power of the verdict for a true ×1.05 at 6
  rounds (round SD 5 %, run noise 2 %), its A/A rate, and beside them Welch's test over all
  runs on the same data (the verdict before the decide issue);
* ``families``: a 130-contrast report, 26 questions of 5 metrics, 30 % of the contrasts a true
  ×0.8 (CV 10 %, 5 runs a side): the family-wise error rate per question under Holm within
  each question (what the verdict states), and the power for the ×0.8, beside Holm over the
  whole report and Benjamini-Hochberg over it;
* ``tost``: a true zero and a true 8 % effect at 10 rounds a side, CV 3 %: how often the
  verdict reads "same within ±5 %";
* ``advice``: the power the "±5 % needs about N rounds" advice delivers when followed;
* ``aa-printed``: A/A contrasts run sequentially under AR(1) drift at rho 0, 0.5 and 0.8,
  n = 5 and 10 runs a side: among the lines that print an interval, the share that excludes 1
  and the interval's mean width, and the share of lines that print none.
"""

from __future__ import annotations

import json
import math
import warnings
from collections.abc import Sequence

import numpy as np
import numpy.typing as npt
import pandas as pd

from cnibench import report, stats

LEVEL = 0.95


def _margin(rate: float, n: int) -> float:
    """Monte-Carlo 95 % half-width of a simulated rate."""
    return 1.96 * math.sqrt(max(rate * (1.0 - rate), 1e-12) / max(n, 1))


def round_rows(
    session: str,
    pair: int,
    off: Sequence[float],
    on: Sequence[float],
    *,
    sequential: bool = False,
    metric: str = "throughput",
    unit: str = "bits/s",
) -> list[dict[str, object]]:
    """Gateway off/on runs of A/B pair ``pair`` as ``cnibench run`` records them: in rounds
    (round ``i`` holds ``off[i]`` and ``on[i]``, the order alternating each round), or all
    ``off`` then all ``on`` (``sequential``)."""
    n = len(off)
    rows: list[dict[str, object]] = []
    for state, values in (("off", off), ("on", on)):
        for i, value in enumerate(values):
            if sequential:
                place = i if state == "off" else n + i
            else:
                first_off = i % 2 == 0
                place = 2 * i + (0 if (state == "off") == first_off else 1)
            rows.append(
                {
                    "session_id": session,
                    "run_id": f"{session}-{pair}-{state}-{metric}-r{i}",
                    "time": pd.Timestamp("2026-12-06T00:00:00Z") + pd.Timedelta(seconds=place),
                    "scenario": "egress",
                    "cni": "vxlan",
                    "condition": f"gateway-{state}-{pair}",
                    "parameters": json.dumps({"gateway": state, "pair": str(pair)}),
                    "repetition": i,
                    "metric": metric,
                    "value": float(value),
                    "unit": unit,
                    "verified": True,
                    "status": "ok",
                }
            )
    return rows


def _feature_rows(table: pd.DataFrame) -> pd.DataFrame:
    return table[table["kind"] == "feature"]


def paired_rates(simulations: int, rng: np.random.Generator) -> tuple[list[str], bool]:
    """Power at ×1.05 and the A/A rate of the verdict with a round effect, beside Welch."""
    rounds, round_sd, noise, effect = 6, 0.05, 0.02, 1.05
    per_call = 10
    calls = max(1, simulations // per_call)
    lines = [
        f"Paired rounds (report.verdict; {rounds} rounds, round SD {round_sd:.0%}, run noise"
        f" {noise:.0%}, one contrast per question; {calls * per_call} contrasts per cell):"
        " share called a difference",
        f"  {'true ratio':>10}  {'verdict':>8}  {'Welch':>6}",
    ]
    ok = True
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for truth in (1.0, effect):
            called = welch = total = 0
            for _ in range(calls):
                rows: list[dict[str, object]] = []
                for c in range(per_call):
                    shared = rng.normal(0.0, round_sd, rounds)
                    off = 9e9 * np.exp(shared + rng.normal(0.0, noise, rounds))
                    on = truth * 9e9 * np.exp(shared + rng.normal(0.0, noise, rounds))
                    rows += round_rows(f"s{c}", c, off, on)
                    unpaired = stats.compare(np.log(off), np.log(on), level=LEVEL)
                    welch += bool(unpaired.p_value <= 1.0 - LEVEL)
                table = _feature_rows(report.verdict(pd.DataFrame(rows)))
                called += int(table["significant"].sum())
                total += len(table)
            rate = called / total
            if truth == 1.0:
                ok = ok and rate - _margin(rate, total) <= 0.06
            else:
                ok = ok and rate + _margin(rate, total) >= 0.8
            lines.append(f"  {truth:>10.2f}  {rate:>8.3f}  {welch / total:>6.3f}")
    lines.append(
        f"  promised: power >= 0.8 at ×{effect}, A/A <= 0.06; Monte-Carlo margin near 0.05:"
        f" ±{_margin(0.05, calls * per_call):.3f}"
    )
    return lines, ok


def _bh_rejects(p: npt.NDArray[np.float64], alpha: float) -> npt.NDArray[np.bool_]:
    m = p.size
    order = np.argsort(p)
    passed = p[order] <= alpha * np.arange(1, m + 1) / m
    out = np.zeros(m, dtype=bool)
    if passed.any():
        out[order[: int(np.flatnonzero(passed).max()) + 1]] = True
    return out


def family_rates(simulations: int, rng: np.random.Generator) -> tuple[list[str], bool]:
    """Per-question FWER and power at ×0.8 for Holm within questions, over the report, and BH."""
    questions, per_question, runs, cv, effect, real = 26, 5, 5, 0.10, 0.8, 0.3
    sigma = math.sqrt(math.log1p(cv * cv))
    alpha = 1.0 - LEVEL
    families = [q for q in range(questions) for _ in range(per_question)]
    m = questions * per_question
    reports = max(1, simulations // 10)
    found = {"within": 0, "report": 0, "bh": 0}
    false_families = {"within": 0, "report": 0, "bh": 0}
    false_calls = {"within": 0, "report": 0, "bh": 0}
    calls = {"within": 0, "report": 0, "bh": 0}
    real_total = 0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for _ in range(reports):
            truth = rng.random(m) < real
            p = np.empty(m)
            for i in range(m):
                control = rng.normal(0.0, sigma, runs)
                treatment = rng.normal(math.log(effect) if truth[i] else 0.0, sigma, runs)
                p[i] = stats.compare(control, treatment, level=LEVEL).p_value
            rejected = {
                "within": stats.family_holm(p, families) <= alpha,
                "report": stats.holm_adjusted(p) <= alpha,
                "bh": _bh_rejects(p, alpha),
            }
            real_total += int(truth.sum())
            for name, hits in rejected.items():
                found[name] += int((hits & truth).sum())
                calls[name] += int(hits.sum())
                false_calls[name] += int((hits & ~truth).sum())
                wrong = hits & ~truth
                false_families[name] += len({families[i] for i in np.flatnonzero(wrong)})
    fams = reports * questions
    power = {name: found[name] / max(real_total, 1) for name in found}
    fwer = {name: false_families[name] / fams for name in found}
    fdr = {name: false_calls[name] / max(calls[name], 1) for name in found}
    ok = fwer["within"] - _margin(fwer["within"], fams) <= 0.05 and power["within"] >= 0.5
    lines = [
        f"Families ({reports} reports of {m} contrasts: {questions} questions of {per_question}"
        f" metrics, {real:.0%} a true ×{effect} at CV {cv:.0%}, {runs} runs a side):",
        f"  {'correction':<32} {'power ×0.8':>10} {'FWER per question':>18} {'FDR':>6}",
        *(
            f"  {label:<32} {power[name]:>10.3f} {fwer[name]:>18.3f} {fdr[name]:>6.3f}"
            for name, label in (
                ("within", "Holm within each question (used)"),
                ("report", "Holm over the report"),
                ("bh", "Benjamini-Hochberg over report"),
            )
        ),
        "  promised (used): FWER per question <= 0.05 (the rate the verdict states), power"
        f" >= 0.5; Monte-Carlo margin near 0.05: ±{_margin(0.05, fams):.3f}",
    ]
    return lines, ok


def tost_rates(simulations: int, rng: np.random.Generator) -> tuple[list[str], bool]:
    """How often the verdict reads "same within ±5 %" at a true 0 % and a true 8 %."""
    rounds, cv = 10, 0.03
    sigma = math.sqrt(math.log1p(cv * cv))
    per_call = 10
    calls = max(1, simulations // per_call)
    lines = [
        f"Same within ±5 % (report.verdict, {rounds} rounds a side, CV {cv:.0%}, default"
        f" margin; {calls * per_call} contrasts per cell): share read as the same",
        f"  {'true ratio':>10}  {'same':>6}",
    ]
    ok = True
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for truth in (1.0, 1.08):
            same = total = 0
            for _ in range(calls):
                rows: list[dict[str, object]] = []
                for c in range(per_call):
                    off = 9e9 * np.exp(rng.normal(0.0, sigma, rounds))
                    on = truth * 9e9 * np.exp(rng.normal(0.0, sigma, rounds))
                    rows += round_rows(f"s{c}", c, off, on)
                table = _feature_rows(report.verdict(pd.DataFrame(rows)))
                same += int(table["equivalent"].sum())
                total += len(table)
            rate = same / total
            if truth == 1.0:
                ok = ok and rate + _margin(rate, total) >= 0.8
            else:
                ok = ok and rate - _margin(rate, total) <= 0.05
            lines.append(f"  {truth:>10.2f}  {rate:>6.3f}")
    lines.append("  promised: >= 0.8 at a true 0 %, <= 0.05 at a true 8 %")
    return lines, ok


def ar1(rng: np.random.Generator, n: int, rho: float, sigma: float) -> npt.NDArray[np.float64]:
    """``n`` consecutive values of a stationary AR(1) with marginal SD ``sigma``."""
    out = np.empty(n)
    out[0] = rng.normal(0.0, sigma)
    step = sigma * math.sqrt(1.0 - rho * rho)
    for i in range(1, n):
        out[i] = rho * out[i - 1] + rng.normal(0.0, step)
    return out


PRINTED_RHOS = (0.0, 0.5, 0.8)
PRINTED_RUNS = (5, 10)


def printed_rates(simulations: int, rng: np.random.Generator) -> tuple[list[str], bool]:
    """Sequential A/A under drift: intervals excluding 1 among printed lines, the share of
    lines that print none, and the printed intervals' mean width (high - low of the ratio),
    per AR(1) coefficient and runs a side. Passes when rho 0.5 keeps <= 0.06 at every n."""
    sigma = math.sqrt(math.log1p(0.05**2))
    per_call = 10
    calls = max(1, simulations // per_call)
    lines = [
        f"Sequential A/A under AR(1) drift (report.verdict, CV 5 %; {calls * per_call} contrasts"
        " per cell): among lines that print an interval, the share excluding 1 and the mean"
        " width of the interval (high - low); and the share of lines that print none",
        f"  {'n':>3}  {'rho':>4}  {'printed, excl. 1':>16}  {'no interval':>11}  {'width':>6}",
    ]
    ok = True
    margins = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for runs in PRINTED_RUNS:
            for rho in PRINTED_RHOS:
                excluded = printed = total = 0
                width = 0.0
                for _ in range(calls):
                    rows: list[dict[str, object]] = []
                    for c in range(per_call):
                        noise = 9e9 * np.exp(ar1(rng, 2 * runs, rho, sigma))
                        rows += round_rows(f"s{c}", c, noise[:runs], noise[runs:], sequential=True)
                    table = _feature_rows(report.verdict(pd.DataFrame(rows)))
                    low = table["ci_low"].to_numpy(dtype=np.float64)
                    high = table["ci_high"].to_numpy(dtype=np.float64)
                    shown = np.isfinite(low) & np.isfinite(high)
                    excluded += int(((low > 1.0) | (high < 1.0))[shown].sum())
                    printed += int(shown.sum())
                    width += float((high - low)[shown].sum())
                    total += len(table)
                rate = excluded / max(printed, 1)
                if rho == 0.5:
                    margins.append(_margin(0.05, printed))
                    ok = ok and rate - _margin(rate, printed) <= 0.06
                mean_width = width / printed if printed else math.nan
                lines.append(
                    f"  {runs:>3}  {rho:>4.1f}  {rate:>16.3f}  {1.0 - printed / total:>11.3f}"
                    f"  {mean_width:>6.3f}"
                )
    lines.append(
        "  promised at rho 0.5: <= 0.06 among printed intervals, at each n; Monte-Carlo margin"
        f" near 0.05 there: ±{max(margins):.3f} (fewest printed lines)"
    )
    return lines, ok


def advice_rates(simulations: int, rng: np.random.Generator) -> tuple[list[str], bool]:
    """The power the verdict's "±5 % needs about N rounds" delivers when followed.

    A pilot of 5 paired rounds (true SD of the within-round log ratios 3 %) goes through
    ``report.verdict``; its line's N is followed: the power of the paired test at N rounds,
    at the question's corrected level, for a true ×1.05, is computed exactly
    (``stats.paired_power``) with the true SD. Beside it, the plug-in advice (the pilot's SD
    as if it were the truth, at the uncorrected level), as the verdict gave it before.
    """
    pilot, sd, effect = 5, 0.03, math.log(1.05)
    per_call = 10
    calls = max(1, simulations // per_call)
    delivered: list[float] = []
    plug_in: list[float] = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for _ in range(calls):
            rows: list[dict[str, object]] = []
            for c in range(per_call):
                off = 9e9 * np.exp(rng.normal(0.0, sd / math.sqrt(2.0), pilot))
                on = 9e9 * np.exp(rng.normal(0.0, sd / math.sqrt(2.0), pilot))
                rows += round_rows(f"s{c}", c, off, on)
            table = _feature_rows(report.verdict(pd.DataFrame(rows)))
            for row in table.itertuples():
                if int(row.runs_needed) < 2 or not math.isfinite(float(row.p_value)):
                    continue
                alpha = (1.0 - LEVEL) / max(int(row.family_size), 1)
                delivered.append(stats.paired_power(effect, sd, int(row.runs_needed), alpha=alpha))
    # The plug-in rule, on fresh pilots: the pilot's SD taken as the truth, alpha 0.05.
    for _ in range(len(delivered)):
        d = rng.normal(0.0, sd, pilot)
        guess = float(np.std(d, ddof=1))
        n = stats.paired_runs_needed(guess, effect, alpha=1.0 - LEVEL)
        plug_in.append(stats.paired_power(effect, sd, n, alpha=1.0 - LEVEL))
    done = np.asarray(delivered)
    old = np.asarray(plug_in)
    ok = bool(done.size) and float(np.mean(done >= 0.8)) >= 0.75
    return [
        f"Runs advice (pilot of {pilot} paired rounds, true SD of the differences {sd:.0%},"
        f" ±5 % wanted at power 0.8; {done.size} advices followed): power delivered",
        f"  {'advice':<46} {'mean power':>10} {'share >= 0.8':>12}",
        f"  {'verdict (SD 80 % upper bound, question level)':<46} {done.mean():>10.3f}"
        f" {np.mean(done >= 0.8):>12.3f}",
        f"  {'plug-in SD, uncorrected (before)':<46} {old.mean():>10.3f}"
        f" {np.mean(old >= 0.8):>12.3f}",
        "  promised: the advice delivers power >= 0.8 in at least 0.75 of pilots",
    ], ok


def _looked(rows: list[dict[str, object]], looks: int) -> list[dict[str, object]]:
    return [{**row, "looks": looks} for row in rows]


def until_decided_rates(simulations: int, rng: np.random.Generator) -> tuple[list[str], bool]:
    """``--until-decided``'s rule through ``report.verdict``: rounds added at the planned
    looks (profile 5, ``--max-runs 30``) until the contrast is a cost or "same within ±5 %";
    per-cell error and mean rounds to a decision, at two levels of run noise."""
    schedule = stats.look_schedule(5, 30)
    looks = len(schedule)
    round_sd = 0.05
    truths = (1.0, 0.95, 1.05, 1.08, 1.15)
    per_call = 25
    calls = max(1, simulations // per_call)
    total = calls * per_call
    lines = [
        f"Runs until decided (report.verdict with looks = {looks} at rounds"
        f" {', '.join(map(str, schedule))}; round SD {round_sd:.0%}; {total} contrasts per"
        " cell): share called a cost, read as same within ±5 %, left undecided, and mean"
        " rounds to the call",
        f"  {'noise':>5}  {'true ratio':>10}  {'cost':>6}  {'same':>6}  {'undecided':>9}"
        f"  {'rounds':>6}",
    ]
    ok = True
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for noise in (0.02, 0.05):
            for truth in truths:
                cost = same = rounds_used = 0
                for _ in range(calls):
                    shared = rng.normal(0.0, round_sd, (per_call, schedule[-1]))
                    off = 9e9 * np.exp(shared + rng.normal(0.0, noise, shared.shape))
                    on = truth * 9e9 * np.exp(shared + rng.normal(0.0, noise, shared.shape))
                    open_ = set(range(per_call))
                    for n in schedule:
                        rows: list[dict[str, object]] = []
                        for c in sorted(open_):
                            rows += _looked(round_rows(f"s{c}", c, off[c, :n], on[c, :n]), looks)
                        table = _feature_rows(report.verdict(pd.DataFrame(rows)))
                        for _, line in table.iterrows():
                            c = int(str(line["treatment"]).rsplit("-", 1)[1])
                            if bool(line["significant"]) or bool(line["equivalent"]):
                                cost += bool(line["significant"])
                                same += bool(line["equivalent"])
                                rounds_used += n
                                open_.discard(c)
                        if not open_:
                            break
                    rounds_used += schedule[-1] * len(open_)
                cost_rate, same_rate = cost / total, same / total
                undecided = max(0.0, 1.0 - cost_rate - same_rate)
                if truth == 1.0:
                    ok = ok and cost_rate - _margin(cost_rate, total) <= 0.05
                if abs(math.log(truth)) >= math.log(1.05) - 1e-9:
                    ok = ok and same_rate - _margin(same_rate, total) <= 0.05
                lines.append(
                    f"  {noise:>5.0%}  {truth:>10.2f}  {cost_rate:>6.3f}  {same_rate:>6.3f}"
                    f"  {undecided:>9.3f}  {rounds_used / total:>6.1f}"
                )
    lines.append(
        "  promised: per-cell error <= 0.05 (a cost at a true 1.00; same within ±5 % at a true"
        f" effect of 5 % or more); Monte-Carlo margin near 0.05: ±{_margin(0.05, total):.3f}"
    )
    return lines, ok
