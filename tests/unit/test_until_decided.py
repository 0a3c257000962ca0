"""Runs until decided: the looks planned before the first run, each tested at alpha / K, the
verdict reading K from the runs, and a side that ran on after its partner stopped cut back to
the rounds both ran. Expected values are recomputed with scipy."""

from __future__ import annotations

import json
import math
from collections.abc import Sequence

import numpy as np
import pandas as pd
import pytest
from scipy import stats as sps

from cnibench import report, stats
from cnibench.errors import ConfigError
from cnibench.records import RunRecord
from cnibench.session import session_config
from cnibench.session.until import Budget, budget_allows

START = pd.Timestamp("2026-12-06T08:00:00Z")


def _rounds(
    off: Sequence[float], on: Sequence[float], *, looks: int | None
) -> list[dict[str, object]]:
    """Gateway off and on in rounds (off, on, off, on, ...); a side may have more rounds."""
    rows: list[dict[str, object]] = []
    for state, values in (("off", off), ("on", on)):
        for k, value in enumerate(values):
            row: dict[str, object] = {
                "session_id": "A",
                "run_id": f"A-{state}-r{k}",
                "time": START + pd.Timedelta(seconds=2 * k + (state == "on")),
                "scenario": "egress",
                "cni": "vxlan",
                "condition": f"gateway-{state}",
                "parameters": json.dumps({"gateway": state}),
                "repetition": k,
                "metric": "throughput",
                "value": float(value),
                "unit": "bits/s",
                "verified": True,
                "status": "ok",
            }
            if looks is not None:
                row["looks"] = looks
            rows.append(row)
    return rows


# A 2 % cost, clear at 5 % over one look (p about 0.03), not at 5 % over four looks.
OFF = [9.00e9, 9.20e9, 8.80e9, 9.10e9, 8.90e9, 9.05e9]
ON = [v * f for v, f in zip(OFF, (0.975, 1.0, 0.965, 0.995, 0.975, 0.99), strict=True)]


def test_the_looks_double_from_the_profiles_runs_to_max_runs() -> None:
    assert stats.look_schedule(5, 30) == (5, 10, 20, 30)
    assert stats.look_schedule(5, 40) == (5, 10, 20, 40)
    assert stats.look_schedule(8, 8) == (8,)
    assert stats.look_level(0.95, 4) == pytest.approx(0.9875)


@pytest.mark.parametrize(("first", "most"), [(1, 10), (5, 4), (True, 10), (5, 2.5)])
def test_a_schedule_that_cannot_be_looked_at_is_refused(first: object, most: object) -> None:
    with pytest.raises(ConfigError):
        stats.look_schedule(first, most)  # type: ignore[arg-type]


def test_one_look_is_the_fixed_design() -> None:
    fixed = report.verdict(pd.DataFrame(_rounds(OFF, ON, looks=None))).iloc[0]
    one = report.verdict(pd.DataFrame(_rounds(OFF, ON, looks=1))).iloc[0]
    assert fixed.p_value == one.p_value
    assert fixed.significant
    assert one.significant
    assert one.looks == 1


def test_four_looks_test_each_at_alpha_over_four() -> None:
    paired = sps.ttest_rel(np.log(ON), np.log(OFF))
    assert 0.0125 < paired.pvalue < 0.05  # the data decide at one look, not at four
    row = report.verdict(pd.DataFrame(_rounds(OFF, ON, looks=4))).iloc[0]
    assert row.looks == 4
    assert row.p_value == pytest.approx(paired.pvalue, rel=1e-9)
    assert row.p_adjusted == pytest.approx(min(1.0, 4 * paired.pvalue), rel=1e-9)
    assert not row.significant
    # The interval printed is the one that carries the call: at 1 - 0.05 / 4, it holds 1.
    assert row.call_level == pytest.approx(1 - 0.05 / 4)
    ci = paired.confidence_interval(1 - 0.05 / 4)
    assert row.ci_low == pytest.approx(math.exp(ci.low), rel=1e-9)
    assert row.ci_high == pytest.approx(math.exp(ci.high), rel=1e-9)
    assert row.ci_low < 1.0 < row.ci_high
    # Not a cost at four looks; its interval lies within ±5 %: the same, at that level.
    assert row.equivalent
    assert "same within ±5 %" in row.verdict
    assert "98.7 % CI" in row.verdict
    assert "n = 6 rounds, paired, run until decided (4 looks planned)" in row.verdict


def test_a_side_that_ran_on_after_its_partner_stopped_is_cut_to_the_shared_rounds() -> None:
    longer = ON + [v * 0.98 for v in OFF[:4]]
    rows = _rounds(OFF, longer, looks=3)
    row = report.verdict(pd.DataFrame(rows)).iloc[0]
    assert row.pairing == "6 rounds, paired"
    assert row.n_treatment == 6
    assert row.n_control == 6
    paired = sps.ttest_rel(np.log(ON), np.log(OFF))
    assert row.p_value == pytest.approx(paired.pvalue, rel=1e-9)
    assert "4 run(s) of one side after the other stopped left out" in row.verdict
    # In a fixed design the same records are a round without one side: unpaired, said.
    fixed = report.verdict(pd.DataFrame(_rounds(OFF, longer, looks=None))).iloc[0]
    assert fixed.pairing.startswith("unpaired: 4 round(s)")


def test_a_failed_round_inside_the_shared_rounds_still_unpairs() -> None:
    rows = [
        r
        for r in _rounds(OFF, ON, looks=4)
        if not (r["condition"] == "gateway-on" and r["repetition"] == 2)
    ]
    row = report.verdict(pd.DataFrame(rows)).iloc[0]
    assert row.pairing.startswith("unpaired: 1 round(s)")


def test_runs_record_their_looks_and_old_files_read_as_one() -> None:
    record = RunRecord(
        session_id="s",
        run_id="r",
        time="2026-12-06T08:00:00+00:00",
        backend="lab",
        provider="lab",
        cni="vxlan",
        cni_version="6.1",
        scenario="egress",
        condition="gateway-on",
        parameters={"gateway": "on"},
        repetition=0,
        metric="throughput",
        value=1.0,
        unit="bits/s",
        verified=True,
        looks=4,
    )
    data = record.to_json_dict()
    assert data["looks"] == 4
    assert RunRecord.from_json_dict(data).looks == 4
    del data["looks"]
    assert RunRecord.from_json_dict(data).looks == 1


def _options(**given: object) -> dict[str, object]:
    return {"cluster": "lab", "profile": "smoke", **given}


@pytest.mark.parametrize(
    ("given", "message"),
    [
        ({"until_decided": True, "precision": "5%"}, "give one"),
        ({"budget": "2h"}, "--budget needs --until-decided"),
        ({"until_decided": True, "budget": "30s"}, "at least 1m"),
        ({"until_decided": True, "budget": "soon"}, "invalid duration"),
    ],
)
def test_until_decided_options_that_cannot_work_are_refused(
    given: dict[str, object], message: str
) -> None:
    with pytest.raises(ConfigError, match=message):
        session_config(_options(**given))


def test_until_decided_options_are_read() -> None:
    config = session_config(_options(until_decided=True, budget="2h", max_runs="16"))
    assert config.until_decided
    assert config.budget == 7200.0
    assert config.max_runs == 16


def test_the_budget_starts_no_rounds_that_would_end_past_it() -> None:
    assert budget_allows(300.0, 60.0, 5)
    assert not budget_allows(300.0, 60.0, 6)
    assert not budget_allows(300.0, math.nan, 1)
    assert Budget(None).allows(10**6, 60.0)
    assert Budget(3600.0).allows(5, 60.0)
    assert not Budget(3600.0).allows(61, 60.0)
