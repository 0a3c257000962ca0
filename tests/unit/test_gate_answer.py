"""The regression gate of issue 32: per-metric session variance, the three-way answer, the
false-alarm rate the headline quotes from bench/coverage.py's table, and the budget plan."""

from __future__ import annotations

import math

import numpy as np
import pytest
from compare_support import Condition, run_compare, write_result_set
from scipy import stats as sps

import cnibench.report.gate.measured_rates
from cnibench.report.compare import (
    GATE_ALPHA,
    Answer,
    compare_result_sets,
    measured_false_alarm_rate,
    plan_gate,
)
from cnibench.report.gate.plan import (
    budget_plan,
    detection_power,
    difference_variance,
    variance_components,
)
from cnibench.results import load_results

NOISE = (1.0, 1.01, 0.99, 1.005, 0.995)


def _sessions(tmp_path, name, shifts, metrics, *, stamp="10"):
    """Sessions of one condition, one per shift: ``metrics[m]`` scales metric m's shift (a
    session effect of ``shift * scale`` on the log scale) over the same run noise."""
    for i, shift in enumerate(shifts):
        values = {
            metric: [100.0 * math.exp(shift * scale) * v for v in NOISE]
            for metric, scale in metrics.items()
        }
        write_result_set(
            tmp_path / name,
            [Condition(values)],
            session_id=f"20261127T{stamp}{i}000Z-{name}{i}",
        )
    return load_results(tmp_path / name, sessions="all")


# ---------------------------------------------------------------- per-metric session variance


def test_a_quiet_metric_keeps_its_own_narrow_interval_beside_a_noisy_one(tmp_path):
    """Session variance is per metric: throughput's 8 % session effects must not widen the
    interval of cpu, whose sessions agree (a pooled figure did, and under-covered the noisy
    metric at the same time)."""
    shifts = (-0.08, 0.0, 0.08)
    both = _sessions(tmp_path, "both", shifts, {"throughput": 1.0, "cpu": 0.01})
    alone = _sessions(tmp_path, "alone", shifts, {"cpu": 0.01}, stamp="11")
    cand_dir = write_result_set(
        tmp_path / "cand",
        [Condition({"throughput": [100.0 * v for v in NOISE], "cpu": [100 * v for v in NOISE]})],
        session_id="20261127T120000Z-cand",
    )
    candidate = load_results(cand_dir)
    mixed = compare_result_sets(both, candidate).frame.set_index("metric")
    single = compare_result_sets(alone, candidate).frame.set_index("metric")
    assert mixed.loc["cpu", "ci_high"] == pytest.approx(single.loc["cpu", "ci_high"])
    assert (mixed.loc["throughput", "ci_high"] / mixed.loc["throughput", "ci_low"]) > 1.2 * (
        mixed.loc["cpu", "ci_high"] / mixed.loc["cpu", "ci_low"]
    )


def test_components_by_hand_and_the_balanced_test_is_exact():
    rng = np.random.default_rng(7)
    groups = [[np.exp(rng.normal(m, 0.05, size=5)) for m in rng.normal(0, 0.03, size=3)]]
    groups.append([np.exp(rng.normal(0.0, 0.05, size=5))])  # one candidate session
    got = variance_components("throughput", groups)
    logs = [np.log(v) for v in groups[0]]
    means = np.array([v.mean() for v in logs])
    within = np.concatenate([v - v.mean() for group in groups for v in map(np.log, group)])
    assert got.spread == pytest.approx(means.var(ddof=1))
    assert got.spread_df == 2
    assert got.run_variance == pytest.approx((within**2).sum() / (4 * 4))
    assert got.session_variance == pytest.approx(max(0.0, means.var(ddof=1) - got.run_variance / 5))
    # Equal runs per session: the variance of the difference is the session means' variance
    # times 1/S_b + 1/S_c, on their own df: a t test on session means.
    variance, df = difference_variance(got, [5, 5, 5], [5])
    assert variance == pytest.approx(means.var(ddof=1) * (1 / 3 + 1))
    assert df == 2


# ---------------------------------------------------------------- the three-way answer


def test_each_metric_is_regressed_within_threshold_or_undecided(tmp_path):
    tight = [1.0, 1.001, 0.999, 1.0005, 0.9995]
    wide = [1.0, 1.04, 0.96, 1.02, 0.98]
    base = write_result_set(
        tmp_path / "base",
        [
            Condition({"throughput": [100 * v for v in tight]}, condition="lost"),
            Condition({"throughput": [100 * v for v in tight]}, condition="kept"),
            Condition({"throughput": [100 * v for v in wide]}, condition="noisy"),
        ],
        session_id="20261127T100000Z-base",
    )
    cand = write_result_set(
        tmp_path / "cand",
        [
            Condition({"throughput": [50 * v for v in tight[::-1]]}, condition="lost"),
            Condition({"throughput": [100 * v for v in tight[::-1]]}, condition="kept"),
            Condition({"throughput": [99 * v for v in wide[::-1]]}, condition="noisy"),
        ],
        session_id="20261127T110000Z-cand",
    )
    baseline, candidate = load_results(base), load_results(cand)
    # One session a side: the runs alone decide nothing, but each says what they show.
    alone = compare_result_sets(baseline, candidate).frame.set_index("condition")
    assert set(alone["answer"]) == {Answer.UNDECIDED}
    assert "regressed at the runs' noise alone" in alone.loc["lost", "decide"]
    assert "within threshold at the runs' noise alone" in alone.loc["kept", "decide"]
    # With the sessions' SD given (here: they do not differ) the gate decides.
    frame = compare_result_sets(baseline, candidate, session_sd=0.0).frame.set_index("condition")
    assert frame.loc["lost", "answer"] == Answer.REGRESSED
    assert frame.loc["kept", "answer"] == Answer.WITHIN
    assert frame.loc["noisy", "answer"] == Answer.UNDECIDED
    # What would decide the noisy one at the runs' noise: more candidate runs, and how many:
    # the fewest whose Welch interval's lower bound (95 %, today's df) would clear 0.95 if the
    # ratio stayed 0.99 and the runs as spread.
    hint = alone.loc["noisy", "decide"]
    assert "more candidate runs would make it within threshold" in hint
    assert "--session-sd" in hint
    more = int(hint.split("about ")[1].split()[0])
    var = np.log(wide).var(ddof=1)
    df = (2 * var / 5) ** 2 / (2 * (var / 5) ** 2 / 4)
    needed = (math.log(0.99) - math.log(0.95)) / sps.t.ppf(0.975, df)
    assert more == math.ceil(var / (needed**2 - var / 5)) - 5
    assert more > 0


# ---------------------------------------------------------------- the measured headline


ENTRY = {
    "baselines": 1,
    "runs": 5,
    "rate": 0.1234,
    "margin": 0.0204,
    "simulations": 1000,
    "comparisons": 20,
    "session_sd": "8 % on two tail metrics, 1 % on the rest",
    "date": "2026-11-27",
    "machine": "testhost (2 cores)",
}


def test_the_table_lookup_finds_a_design_or_the_nearest():
    other = {**ENTRY, "baselines": 3, "rate": 0.008}
    exact, nearest = measured_false_alarm_rate(1, 5, table=[ENTRY, other])
    assert (exact.rate, nearest) == (0.1234, None)
    exact, nearest = measured_false_alarm_rate(3, 8, table=[ENTRY, other])
    assert exact is None
    assert (nearest.baselines, nearest.rate) == (3, 0.008)
    assert measured_false_alarm_rate(3, 5, table=[]) == (None, None)


def test_the_headline_states_the_rate_of_its_baselines_not_the_tables(tmp_path, monkeypatch):
    """The rate printed is computed from the baselines at hand: one metric, three A/A sessions
    of five runs (equal runs: the gate's test is Student's t on the session means, 2 df), one
    candidate session. Checked against a seeded simulation of that test and its threshold,
    independent of the code's integral; the table bench/coverage.py wrote is not quoted."""
    monkeypatch.setattr(cnibench.report.gate.measured_rates, "MEASURED", (ENTRY,))
    baseline = _sessions(tmp_path, "base", (-0.02, 0.0, 0.025), {"throughput": 1.0})
    cand_dir = write_result_set(
        tmp_path / "cand",
        [Condition({"throughput": [100.0 * v for v in NOISE]})],
        session_id="20261127T120000Z-cand",
    )
    comparison = compare_result_sets(baseline, load_results(cand_dir))
    headline = comparison.headline()
    assert "12.3%" not in headline
    assert "bench/coverage.py" not in headline
    stated = comparison.false_alarm.rate
    assert f"false-alarm rate at most {100 * stated:.2g}% for these baselines" in headline
    # The truth the rate assumes: the difference of session means has the variance the gate
    # estimated, on 2 df; a false alarm is t beyond the 1 % critical value and the estimate
    # below log(0.95).
    logs = [np.log(np.array([100.0 * math.exp(s) * v for v in NOISE])) for s in (-0.02, 0, 0.025)]
    se = math.sqrt(np.var([v.mean() for v in logs], ddof=1) * (1 / 3 + 1))
    rng = np.random.default_rng(20261127)
    z = rng.standard_normal(400_000)
    t = z / np.sqrt(rng.chisquare(2, z.size) / 2)
    simulated = float(np.mean((t > sps.t.isf(GATE_ALPHA, 2)) & (z * se > -math.log(0.95))))
    assert stated == pytest.approx(simulated, abs=0.0015)
    assert 0.0 < stated < GATE_ALPHA


# ---------------------------------------------------------------- the budget plan


def test_the_plan_is_the_fewest_sessions_that_reach_the_power(tmp_path):
    baseline = _sessions(tmp_path, "base", (-0.03, 0.0, 0.035), {"throughput": 1.0})
    (plan,) = plan_gate(baseline, loss=0.10, power=0.8)
    assert plan.candidate_sessions is not None
    assert f"plan: {plan.candidate_sessions} candidate session" in plan.statement()
    components = plan.components
    # Recomputed here at the 90 % upper bound of the variances: the plan reaches 0.8 and one
    # candidate session fewer (same baseline) does not.
    upper = type(components)(
        components.metric,
        components.spread * components.spread_df / sps.chi2.ppf(0.1, components.spread_df),
        components.spread_df,
        components.run_variance * components.run_df / sps.chi2.ppf(0.1, components.run_df),
        components.run_df,
        components.mean_inverse_runs,
        components.groups,
    )
    base_runs = [5] * (3 + plan.extra_baseline_sessions)

    def power(sessions):
        return detection_power(
            upper,
            loss=0.10,
            threshold=0.05,
            baseline_runs=base_runs,
            candidate_runs=[5] * sessions,
            comparisons=1,
            alpha=GATE_ALPHA,
            extra_df=sessions - 1 + plan.extra_baseline_sessions,
        )

    assert power(plan.candidate_sessions) >= 0.8
    assert plan.candidate_sessions == 1 or power(plan.candidate_sessions - 1) < 0.8
    direct = budget_plan(
        components,
        baseline_runs=[5, 5, 5],
        groups=1,
        comparisons=1,
        threshold=0.05,
        alpha=GATE_ALPHA,
    )
    assert (direct.candidate_sessions, direct.extra_baseline_sessions) == (
        plan.candidate_sessions,
        plan.extra_baseline_sessions,
    )


def test_a_plan_needs_several_baseline_sessions(tmp_path):
    baseline = _sessions(tmp_path, "base", (0.0,), {"throughput": 1.0})
    with pytest.raises(Exception, match="two or more baseline sessions"):
        plan_gate(baseline)


def test_the_command_plans_from_the_baseline_alone(tmp_path):
    _sessions(tmp_path, "base", (-0.03, 0.0, 0.035), {"throughput": 1.0})
    done = run_compare(tmp_path / "base", "--plan", "10%")
    assert done.returncode == 0, done.stderr
    (line,) = done.stdout.splitlines()
    assert line.startswith("plan: ")
    assert "detect a 10% throughput loss with power 0.8" in line
    missing = run_compare(tmp_path / "base")
    assert missing.returncode == 2
    assert len(missing.stderr.strip().splitlines()) == 1
    assert "CANDIDATE_DIR" in missing.stderr
