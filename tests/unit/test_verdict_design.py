"""How the runs were taken enters the verdict: sessions are a level of variance, and sides run
one after the other allow for drift. Frames are built here with the columns of
:func:`cnibench.results.load_results` the verdict reads; expected intervals are recomputed
with scipy."""

from __future__ import annotations

import json
import math
import re
from collections.abc import Sequence

import numpy as np
import pandas as pd
import pytest
from scipy import stats as sps

from cnibench import report
from cnibench.report.verdict import tested_count as _tested_count
from cnibench.scenarios.egress import EgressScenario

START = pd.Timestamp("2026-11-27T08:00:00Z")


def _run(
    session: str, cni: str, state: str, repetition: int, value: float, second: int
) -> dict[str, object]:
    return {
        "session_id": session,
        "run_id": f"{session}-{cni}-{state}-r{repetition}",
        "time": START + pd.Timedelta(seconds=second),
        "scenario": "egress",
        "cni": cni,
        "condition": f"gateway-{state}",
        "parameters": json.dumps({"gateway": state}),
        "repetition": repetition,
        "metric": "throughput",
        "value": float(value),
        "unit": "bits/s",
        "verified": True,
        "status": "ok",
    }


def _session(
    session: str,
    cni: str,
    off: Sequence[float],
    on: Sequence[float],
    *,
    sequential: bool,
    start: int = 0,
) -> list[dict[str, object]]:
    """One session of one CNI: gateway off and on, all off then all on (``sequential``) or
    in rounds (off, on, off, on, ...)."""
    rows = []
    for k, value in enumerate(off):
        rows.append(_run(session, cni, "off", k, value, start + (k if sequential else 2 * k)))
    for k, value in enumerate(on):
        second = start + (len(off) + k if sequential else 2 * k + 1)
        rows.append(_run(session, cni, "on", k, value, second))
    return rows


def _lines(table: pd.DataFrame) -> list[str]:
    return report.verdict_summary(table)[1:]


OFF = [9.0e9, 9.1e9, 8.9e9, 9.05e9, 8.95e9]
ON = [v * 0.99 for v in (9.02e9, 8.93e9, 9.08e9, 8.97e9, 9.0e9)]


def test_a_report_of_two_sessions_with_an_offset_names_the_sessions_on_the_lines_that_mix_them():
    # Session A measured vxlan, session B routed on a host 8 % faster: the CNI contrasts mix
    # the two sessions, the gateway contrasts do not.
    rows = _session("A", "vxlan", OFF, ON, sequential=False)
    rows += _session(
        "B", "routed", [v * 1.08 for v in OFF], [v * 1.08 for v in ON], sequential=False
    )
    table = report.verdict(pd.DataFrame(rows))
    lines = _lines(table)
    mixed = [line for line in lines if "routed vs reference vxlan" in line]
    assert len(mixed) == 2, lines
    for line in mixed:
        assert "across sessions B vs A" in line, line
        assert "not a detectable difference at this design" in line, line
        assert "run both sides in one session, or ≥ 2 sessions each" in line, line
    own = [line for line in lines if "gateway on" in line]
    assert own
    assert not any("session" in line for line in own), own
    cni = table[table["kind"] == "cni"]
    assert set(cni["sessions"]) == {"B vs A"}
    assert set(table.loc[table["kind"] == "feature", "sessions"]) == {"A", "B"}
    assert not cni["significant"].any()


def test_a_huge_difference_across_one_session_each_is_still_no_claim():
    rows = _session("A", "vxlan", OFF, ON, sequential=False)
    rows += _session("B", "routed", [v * 3 for v in OFF], [v * 3 for v in ON], sequential=False)
    table = report.verdict(pd.DataFrame(rows))
    cni = table[table["kind"] == "cni"]
    assert not cni["significant"].any()
    assert cni["p_value"].isna().all()
    assert all(re.search(r"×3\.00 \(n = 5 vs 5; across sessions", v) for v in cni["verdict"])


def test_sides_with_two_sessions_each_are_compared_on_their_session_means():
    rng = np.random.default_rng(7)
    rows: list[dict[str, object]] = []
    gm: dict[str, list[float]] = {"vxlan": [], "routed": []}
    for i, (session, cni, offset) in enumerate(
        (("A", "vxlan", 1.0), ("B", "routed", 1.08), ("C", "vxlan", 0.97), ("D", "routed", 1.1))
    ):
        off = 9e9 * offset * np.exp(rng.normal(0, 0.03, 5))
        on = 8e9 * offset * np.exp(rng.normal(0, 0.03, 5))
        rows += _session(session, cni, off, on, sequential=False, start=1000 * i)
        gm[cni].append(float(sps.gmean(off)))
    table = report.verdict(pd.DataFrame(rows))
    row = table[(table["kind"] == "cni") & (table["treatment"] == "gateway-off")].iloc[0]
    welch = sps.ttest_ind(np.log(gm["routed"]), np.log(gm["vxlan"]), equal_var=False)
    # routed vs vxlan is one question over both conditions: Holm over its two p-values, and
    # the interval at the level that carries the call (1 - 0.05 p / p_adj).
    question = table[table["kind"] == "cni"]
    p = sorted(question["p_value"].tolist())
    holm = [min(1.0, 2 * p[0]), min(1.0, max(2 * p[0], p[1]))]
    adjusted = holm[p.index(row.p_value)]
    assert row.p_adjusted == pytest.approx(adjusted, rel=1e-9)
    assert row.call_level == pytest.approx(1 - 0.05 * row.p_value / adjusted, rel=1e-12)
    ci = welch.confidence_interval(row.call_level)
    assert row.ci_low == pytest.approx(math.exp(ci.low), rel=1e-9)
    assert row.ci_high == pytest.approx(math.exp(ci.high), rel=1e-9)
    assert row.p_value == pytest.approx(welch.pvalue, rel=1e-9)
    assert row.sessions == "B, D vs A, C"
    assert "2 vs 2 sessions (B, D vs A, C), session-level variance" in row.verdict


def test_a_sequential_designs_line_says_so():
    rows = _session("A", "vxlan", OFF, ON, sequential=True)
    table = report.verdict(pd.DataFrame(rows))
    line = table["verdict"].iloc[0]
    assert "sequential, drift allowed for" in line, line
    assert table["design"].iloc[0] == "sequential"


def test_an_interleaved_designs_line_is_paired_by_round_and_says_nothing_of_drift():
    rows = _session("A", "vxlan", OFF, ON, sequential=False)
    row = report.verdict(pd.DataFrame(rows)).iloc[0]
    assert "sequential" not in row.verdict
    assert "drift" not in row.verdict
    assert row.design == "interleaved"
    assert row.pairing == "5 rounds, paired"
    paired = sps.ttest_rel(np.log(ON), np.log(OFF))
    ci = paired.confidence_interval(0.95)
    assert row.ci_low == pytest.approx(math.exp(ci.low), rel=1e-9)
    assert row.ci_high == pytest.approx(math.exp(ci.high), rel=1e-9)
    assert row.p_value == pytest.approx(paired.pvalue, rel=1e-9)
    assert "n = 5 rounds, paired" in row.verdict


def test_a_round_effect_drops_out_of_the_paired_interval():
    # Every round's runs moved alike by up to ±10 % (a busy host in some rounds), a true
    # cost of 3 %: Welch over all runs keeps the round effect in its error and cannot tell;
    # the rounds' pairing can.
    shifts = [1.10, 0.90, 1.05, 0.95, 1.0]
    off = [
        9e9 * s * (1 + e) for s, e in zip(shifts, (0.002, -0.001, 0.001, 0.0, -0.002), strict=True)
    ]
    on = [
        0.97 * 9e9 * s * (1 + e)
        for s, e in zip(shifts, (-0.001, 0.002, 0.0, 0.001, -0.002), strict=True)
    ]
    row = report.verdict(pd.DataFrame(_session("A", "vxlan", off, on, sequential=False))).iloc[0]
    assert sps.ttest_ind(np.log(on), np.log(off), equal_var=False).pvalue > 0.05
    assert row.significant
    assert row.ci_high < 1.0
    assert row.verdict.startswith("egress gateway on vxlan: throughput ×0.97")


def test_a_round_without_one_side_falls_back_to_welch_and_says_so():
    rows = _session("A", "vxlan", OFF, ON, sequential=False)
    rows = [r for r in rows if not (r["condition"] == "gateway-on" and r["repetition"] == 2)]
    row = report.verdict(pd.DataFrame(rows)).iloc[0]
    on = [v for k, v in enumerate(ON) if k != 2]
    welch = sps.ttest_ind(np.log(on), np.log(OFF), equal_var=False)
    assert row.p_value == pytest.approx(welch.pvalue, rel=1e-9)
    assert row.ci_low == pytest.approx(math.exp(welch.confidence_interval(0.95).low), rel=1e-9)
    assert "n = 4 vs 5; unpaired: 1 round(s) without one run of each side" in row.verdict


def test_rounds_in_any_order_within_a_round_are_interleaved():
    # Each round runs both conditions, in a shuffled order (as the kind study did).
    order = [("off", "on"), ("on", "off"), ("on", "off"), ("off", "on"), ("on", "off")]
    rows = []
    for k, pair in enumerate(order):
        for j, state in enumerate(pair):
            value = (OFF if state == "off" else ON)[k]
            rows.append(_run("A", "vxlan", state, k, value, 2 * k + j))
    assert report.verdict(pd.DataFrame(rows))["design"].iloc[0] == "interleaved"


def test_a_drifting_sequential_session_widens_the_interval_beyond_welchs():
    # Runs drifting as AR(1) with coefficient 0.4 (2 % steps), no real effect, 10 runs a
    # side, off first, then on: Welch's interval claims a difference, the sequential line
    # allows for the drift and does not.
    rng = np.random.default_rng(0)
    steps = rng.normal(0.0, 0.02, size=20)
    level = np.zeros(20)
    for i in range(20):
        level[i] = (0.4 * level[i - 1] if i else 0.0) + steps[i]
    values = 9e9 * np.exp(level)
    rows = _session("A", "vxlan", values[:10], values[10:], sequential=True)
    row = report.verdict(pd.DataFrame(rows)).iloc[0]
    welch = sps.ttest_ind(np.log(values[10:]), np.log(values[:10]), equal_var=False)
    ci = welch.confidence_interval(0.95)
    assert math.exp(ci.high) < 1.0  # what the verdict printed before
    assert row.ci_low < math.exp(ci.low)
    assert row.ci_high > math.exp(ci.high)
    assert row.ci_low <= 1.0 <= row.ci_high
    assert row.p_value > welch.pvalue
    assert "sequential, drift allowed for" in row.verdict


def test_a_steady_trend_over_sequential_sides_is_stated_without_an_interval_or_claim():
    # A host warming up: each run about 1 % above the one before, off first, then on, with no
    # real effect. Five runs a side cannot bound a difference against such a drift (the
    # widened t interval spanned orders of magnitude): the ratio is stated, with why.
    drift = 9e9 * np.exp(0.01 * np.arange(10) + np.array([0, 3, -2, 1, -1, 2, -3, 0, 1, -1]) * 1e-3)
    rows = _session("A", "vxlan", drift[:5], drift[5:], sequential=True)
    table = report.verdict(pd.DataFrame(rows))
    row = table.iloc[0]
    welch = sps.ttest_ind(np.log(drift[5:]), np.log(drift[:5]), equal_var=False)
    assert math.exp(welch.confidence_interval(0.95).low) > 1.0  # what Welch would claim
    assert math.isnan(row.ci_low)
    assert math.isnan(row.p_value)
    assert not row.significant
    assert "drift too strong for an interval" in row.verdict
    ratio = math.exp(np.mean(np.log(drift[5:])) - np.mean(np.log(drift[:5])))
    assert f"×{ratio:.2f}" in row.verdict
    assert _tested_count(table) == 0


class _YesNoEgress(EgressScenario):
    """Egress with a yes/no primary metric, to compare shares of yes across sessions."""

    primary_metrics = ("reachable",)


def test_a_yes_no_metric_across_two_sessions_a_side_compares_the_sessions_shares():
    rows: list[dict[str, object]] = []
    shares = {"A": 1.0, "C": 0.8, "B": 0.4, "D": 0.6}
    for i, (session, cni) in enumerate(
        (("A", "vxlan"), ("B", "routed"), ("C", "vxlan"), ("D", "routed"))
    ):
        yes = round(5 * shares[session])
        for k in range(5):
            for state in ("off", "on"):
                run = _run(session, cni, state, k, 1.0 if k < yes else 0.0, 1000 * i + 2 * k)
                run.update(metric="reachable", unit="bool")
                rows.append(run)
    table = report.verdict(pd.DataFrame(rows), scenarios={"egress": _YesNoEgress()})
    row = table[(table["kind"] == "cni") & (table["treatment"] == "gateway-off")].iloc[0]
    welch = sps.ttest_ind([0.4, 0.6], [1.0, 0.8], equal_var=False)
    assert row.estimate == pytest.approx(-0.4)
    assert row.p_value == pytest.approx(welch.pvalue, rel=1e-9)
    assert "session-level variance" in row.verdict
    assert "Newcombe" not in row.verdict


def test_a_treatment_run_in_one_of_two_sessions_is_compared_within_the_session_it_shares():
    # The control (gateway off) ran in sessions A and B, the treatment only in A (a sweep in
    # the first session). Across sessions that would be one session against two: no claim.
    # Within A, where an offset of B cannot reach, the 10 % cost is measured.
    rows = _session("A", "vxlan", OFF, [v * 0.9 for v in OFF], sequential=False)
    rows += [_run("B", "vxlan", "off", k, v * 1.2, 1000 + k) for k, v in enumerate(OFF)]
    table = report.verdict(pd.DataFrame(rows))
    row = table[(table["kind"] == "feature") & (table["metric"] == "throughput")].iloc[0]
    assert row.sessions == "A"
    assert row.design == "interleaved"
    assert row.n_control == 5
    assert row.ratio == pytest.approx(0.9, rel=1e-9)
    assert row.significant
    assert "within the shared session(s) A; 5 control run(s) of B left out" in row.verdict
    # the same data with B's control runs counted in: the 20 % offset would move the ratio
    welch = sps.ttest_ind(np.log([v * 0.9 for v in OFF]), np.log(OFF + [v * 1.2 for v in OFF]))
    assert row.p_value < welch.pvalue


def test_two_sessions_that_repeat_each_others_run_ids_stay_interleaved():
    # Two sessions of one configuration name their runs alike (gateway-on-r0 in both): their
    # runs must not be pooled into one position, which made interleaved rounds read as
    # sequential (and so drifting) in the kind study of 2026-11-27.
    rows = _session("A", "vxlan", OFF, ON, sequential=False)
    rows += _session("B", "vxlan", OFF, ON, sequential=False, start=1000)
    for row in rows:
        row["run_id"] = str(row["run_id"]).split("-", 1)[1]  # "vxlan-on-r0": no session
    table = report.verdict(pd.DataFrame(rows))
    row = table[(table["kind"] == "feature") & (table["metric"] == "throughput")].iloc[0]
    assert row.design == "interleaved"
    assert row.n_control == 10
    assert math.isfinite(row.ci_low)
    assert "drift" not in row.verdict


def test_per_run_sums_keep_two_sessions_runs_of_one_id_apart():
    from cnibench.report.derived import with_derived_metrics

    rows = []
    for session, client, server in (("A", 0.2, 0.3), ("B", 1.0, 2.0)):
        for role, value in (("client", client), ("server", server)):
            row = _run(session, "vxlan", "on", 0, value, 0)
            row.update(run_id="vxlan-on-r0", metric=f"cpu@{role}", unit="cores")
            rows.append(row)
    frame = with_derived_metrics(pd.DataFrame(rows))
    sums = frame[frame["metric"] == "cpu@nodes"].set_index("session_id")["value"]
    assert sums.to_dict() == pytest.approx({"A": 0.5, "B": 3.0})
