"""The numbers a document states are re-derived from records (cnibench.report.facts)."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from cnibench import report
from cnibench.errors import ConfigError
from cnibench.report.facts import Facts, marked_facts, unmarked_numbers

START = pd.Timestamp("2026-11-27T08:00:00Z")


def _rows(cni: str, state: str, values: list[float], offset: int) -> list[dict[str, object]]:
    return [
        {
            "session_id": "A",
            "run_id": f"{cni}-{state}-{k}",
            "time": START + pd.Timedelta(seconds=offset + 2 * k),
            "scenario": "egress",
            "cni": cni,
            "condition": f"gateway-{state}",
            "parameters": json.dumps({"gateway": state}),
            "repetition": k,
            "metric": "throughput",
            "value": v,
            "unit": "bits/s",
            "verified": True,
            "status": "ok",
        }
        for k, v in enumerate(values)
    ]


@pytest.fixture(scope="module")
def facts() -> Facts:
    off = [9.0e9, 9.2e9, 8.8e9, 9.1e9, 8.9e9]
    rows = _rows("cilium:mode=kpr", "off", off, 0)
    rows += _rows("cilium:mode=kpr", "on", [v * 0.5 for v in off], 1)
    df = pd.DataFrame(rows)
    return Facts(df, report.verdict(df))


def test_a_median_is_stated_in_the_unit_asked(facts: Facts) -> None:
    off = facts.get("median cilium:mode=kpr gateway-off throughput unit=Gbit/s")
    on = facts.get("median cilium:mode=kpr gateway-on throughput unit=Mbit/s")
    assert (off, on) == ("9.00 Gbit/s", "4500 Mbit/s")
    with pytest.raises(ConfigError, match="recorded in 'bits/s', not ms"):
        facts.get("median cilium:mode=kpr gateway-off throughput unit=ms")


def test_a_contrast_is_the_verdicts_line_with_its_interval(facts: Facts) -> None:
    text = facts.get("contrast cilium:mode=kpr gateway-on throughput")
    row = facts.table[facts.table["metric"] == "throughput"].iloc[0]
    assert text.startswith("×0.50 (")
    low, high = (float(x) for x in text[len("×0.50 (") : -1].split("-"))
    assert low <= row.ci_low <= low + 0.01
    assert high - 0.01 <= row.ci_high <= high
    assert np.isclose(row.ratio, 0.5)


def test_a_key_that_selects_nothing_or_is_unknown_is_an_error(facts: Facts) -> None:
    with pytest.raises(ConfigError, match="selects 0 verdict lines"):
        facts.get("contrast flannel gateway-on throughput")
    with pytest.raises(ConfigError, match="no verified run"):
        facts.get("median flannel gateway-on throughput")
    with pytest.raises(ConfigError, match="unknown kind"):
        facts.get("mean cilium gateway-on throughput")


def test_counts_and_runs(facts: Facts) -> None:
    assert facts.get("runs cilium:mode=kpr gateway-on") == "5"
    assert facts.get("total runs") == "10"
    assert facts.get("total fewest") == "5"
    assert facts.get("when") == "2026-11-27 08:00-08:00 UTC"


def test_prose_numbers_outside_marks_are_found_and_marked_ones_are_not() -> None:
    text = (
        "The gateway keeps <!-- fact contrast x y z -->×0.50 (0.4-0.6)<!-- /fact --> of its"
        " throughput; the seed said <!-- seed -->6.3 Gbit/s<!-- /seed -->, seed 000's claim,"
        " and <!-- quoted -->0.40<!-- /quoted --> at `r1000` with a 95 % interval (<https://example.org/2024>).\n"
        "```sh\ncnibench run --runs 5\n```\n"
        "But 12 runs failed."
    )
    assert marked_facts(text) == [("contrast x y z", "×0.50 (0.4-0.6)")]
    found = unmarked_numbers(text)
    assert len(found) == 1
    assert "12 runs failed" in found[0]


def test_filled_rewrites_every_marked_number_and_nothing_else() -> None:
    from cnibench.report.facts import filled

    text = "a <!-- fact runs x y -->?<!-- /fact --> b <!-- fact total runs -->12<!-- /fact --> 7"
    answers = {"runs x y": "5", "total runs": "10"}
    assert filled(text, answers.__getitem__) == (
        "a <!-- fact runs x y -->5<!-- /fact --> b <!-- fact total runs -->10<!-- /fact --> 7"
    )


def test_holm_says_whether_the_line_is_a_detectable_difference(facts: Facts) -> None:
    row = facts.table[facts.table["metric"] == "throughput"].iloc[0]
    expected = (
        "detectable after Holm"
        if row.significant
        else f"not detectable after Holm (adjusted p = {row.p_adjusted:.2g})"
    )
    assert facts.get("holm cilium:mode=kpr gateway-on throughput") == expected
    assert facts.get("total tested") == str(int(np.isfinite(facts.table["p_value"]).sum()))


def _egress(ratio: float) -> Facts:
    off = [9.0e9, 9.2e9, 8.8e9, 9.1e9, 8.9e9, 9.05e9, 8.95e9, 9.0e9, 9.1e9, 8.9e9]
    rows = _rows("cilium", "off", off, 0)
    rows += _rows("cilium", "on", [v * ratio for v in off[::-1]], 1)
    df = pd.DataFrame(rows)
    return Facts(df, report.verdict(df))


@pytest.mark.parametrize(
    ("ratio", "words"),
    [(0.5, "lower"), (1.6, "higher"), (1.0, "the same within ±5 %")],
)
def test_a_call_states_the_direction_its_interval_gives(ratio: float, words: str) -> None:
    facts = _egress(ratio)
    row = facts.table[facts.table["metric"] == "throughput"].iloc[0]
    # The interval that carries the call lies wholly on the side the words say.
    if words == "lower":
        assert row.ci_high < 1.0
    elif words == "higher":
        assert row.ci_low > 1.0
    else:
        assert 0.95 <= row.ci_low <= row.ci_high <= 1.05
    assert facts.get("call cilium gateway-on throughput") == words


def test_a_call_the_runs_cannot_make_is_undecided() -> None:
    off = [9.0e9, 6.0e9, 12.0e9, 7.0e9, 11.0e9]
    rows = _rows("cilium", "off", off, 0) + _rows("cilium", "on", off[::-1], 1)
    df = pd.DataFrame(rows)
    facts = Facts(df, report.verdict(df))
    row = facts.table[facts.table["metric"] == "throughput"].iloc[0]
    assert row.ci_low < 0.95 < 1.05 < row.ci_high
    assert facts.get("call cilium gateway-on throughput") == "undecided"


def test_a_sentence_whose_direction_is_edited_no_longer_matches() -> None:
    facts = _egress(0.5)
    sentence = "The gateway's throughput is <!-- fact call cilium gateway-on throughput -->lower"
    sentence += "<!-- /fact --> than without it."
    for text, right in ((sentence, True), (sentence.replace("-->lower<", "-->higher<"), False)):
        ((key, shown),) = marked_facts(text)
        assert (facts.get(key) == shown) is right


def test_decided_counts_the_tested_contrasts_with_a_call() -> None:
    facts = _egress(0.5)
    table = facts.table
    calls = int((table["significant"] | table["equivalent"]).sum())
    assert calls >= 1
    assert facts.get("total decided") == str(calls)
    assert int(facts.get("total decided")) <= int(facts.get("total tested"))


def _enforcement(values: list[float], rules: int) -> list[dict[str, object]]:
    rows = []
    for k, v in enumerate(values):
        common = {
            "session_id": "A",
            "run_id": f"kr-r{rules}-{k}",
            "time": START + pd.Timedelta(seconds=3 * k),
            "scenario": "policy",
            "cni": "kube-router",
            "condition": f"on-cross-node-r{rules}-c1",
            "parameters": json.dumps({"rules": rules, "policy": "on"}),
            "repetition": k,
            "verified": True,
            "status": "ok",
        }
        rows.append({**common, "metric": "policy_enforcement_time", "value": v, "unit": "s"})
        rows.append(
            {**common, "metric": "policy_enforcement_time_leaks", "value": 1.0, "unit": "count"}
        )
    return rows


def test_an_effect_is_a_percentile_of_the_timed_changes_with_its_interval_and_n() -> None:
    times = [0.30, 0.08, 0.11, 0.09, 0.12, 0.10, 0.095, 0.105, 0.085, 0.115]
    df = pd.DataFrame(_enforcement(times, 0) + _enforcement([1.0] * 10, 1000))
    facts = Facts(df, report.verdict(df))
    text = facts.get("effect kube-router policy_enforcement_time 0")
    estimate, _, rest = text.partition(" s (")
    ordered = sorted(times)
    assert ordered[3] <= float(estimate) <= ordered[6]  # the middle of the ten, not the 1.0s
    low, _, high = rest.split(",")[0].partition("-")
    assert float(low) <= float(estimate) <= float(high)
    assert text.endswith(", n = 10)")
    # P99 of ten runs has no upper bound: open above, never a made-up one.
    assert "≥" in facts.get("effect kube-router policy_enforcement_time 0 p=99")
    with pytest.raises(ConfigError, match="selects 0 timed changes"):
        facts.get("effect kube-router policy_enforcement_time 100")
    with pytest.raises(ConfigError, match="effect CNI"):
        facts.get("effect kube-router throughput 0")


def test_direction_words_are_claims_only_inside_a_call_fact() -> None:
    from cnibench.report.facts import unmarked_claims

    text = (
        "## What the gateway costs\n\n"
        "**The seed** found that Antrea beats Cilium.\n\n"
        "The gateway's throughput is <!-- fact call c t m -->the same within ±5 %<!-- /fact -->.\n"
        "- WireGuard, said elsewhere, <!-- quoted -->0.40<!-- /quoted --> costs little.\n\n"
        "Yet kube-router wins over Cilium, and `costs` in code is no claim."
    )
    found = unmarked_claims(text)
    assert len(found) == 1
    assert "kube-router wins over Cilium" in found[0]


def test_a_span_across_midnight_names_both_dates() -> None:
    rows = _rows("cilium", "off", [9.0e9, 9.1e9], 0) + _rows("cilium", "on", [9.0e9, 9.2e9], 1)
    df = pd.DataFrame(rows)
    df.loc[df.index[-1], "time"] = pd.Timestamp("2026-11-28T00:25:00Z")
    facts = Facts(df, report.verdict(df))
    assert facts.get("when") == "2026-11-27 08:00 UTC to 2026-11-28 00:25 UTC"
