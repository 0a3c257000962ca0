"""``cnibench run``'s table (``ConditionResult.summaries``) and the report
(``report.bar_summary``) show one summary of a condition, outlier policy included: every run
counts, outlying runs are flagged."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from scipy import stats as sps

from cnibench.records import Measurement, RunStatus
from cnibench.report.data import bar_summary
from cnibench.scenarios.base import Condition, Verification
from cnibench.scenarios.runner import ConditionResult, RunResult

# Eight runs near 9.4 Gbit/s and one at 2 Gbit/s (a run disturbed by something else).
VALUES = [9.41e9, 9.38e9, 9.45e9, 9.40e9, 9.36e9, 9.43e9, 9.39e9, 9.42e9, 2.0e9]
CONDITION = Condition("baseline", "cross-node-idle-iperf3", {"tool": "iperf3"})


def _result(values: list[float]) -> ConditionResult:
    runs = tuple(
        RunResult(f"r{i}", i, 0, RunStatus.OK, "", (Measurement("throughput", v, "bits/s"),))
        for i, v in enumerate(values)
    )
    return ConditionResult("baseline", "vxlan", CONDITION, Verification(True, "ok"), runs, "")


def _frame(values: list[float]) -> pd.DataFrame:
    return pd.DataFrame(
        {
            "scenario": "baseline",
            "cni": "vxlan",
            "condition": CONDITION.id,
            "metric": "throughput",
            "unit": "bits/s",
            "status": "ok",
            "value": values,
            "run_id": [f"r{i}" for i in range(len(values))],
            "time": [f"2026-11-24T00:00:{i:02d}" for i in range(len(values))],
        }
    )


def test_table_and_report_flag_the_same_outlier_and_agree() -> None:
    (table,) = _result(VALUES).summaries()
    (report,) = bar_summary(_frame(VALUES), scenario="baseline", metric="throughput").itertuples()
    assert report.flagged == ["r8"]
    assert table.flagged == 1
    assert (table.n, table.estimate, table.low, table.high) == pytest.approx(
        (report.n, report.mean, report.ci_low, report.ci_high)
    )
    # Independently: all nine runs (the flagged one too), the Student-t interval of the mean
    # logarithm, exponentiated; its centre is the geometric mean.
    logs = np.log(VALUES)
    low, high = sps.t.interval(0.95, logs.size - 1, loc=logs.mean(), scale=sps.sem(logs))
    assert table.n == 9
    assert table.estimate == pytest.approx(sps.gmean(VALUES))
    assert (table.low, table.high) == pytest.approx((math.exp(low), math.exp(high)))


def test_a_positive_quantity_never_gets_a_negative_bound_and_a_signed_one_stays_symmetric() -> None:
    # Two quick runs far apart (seed-000-like throughput): the symmetric t interval reaches
    # below zero; the summary's does not, and it still contains the estimate.
    runs = [4.2e9, 19.6e9]
    symmetric = sps.t.interval(0.95, 1, loc=np.mean(runs), scale=sps.sem(runs))
    assert symmetric[0] < 0
    (table,) = _result(runs).summaries()
    assert 0 < table.low < table.estimate < table.high
    # A signed quantity (a split error) keeps the symmetric interval around its mean.
    errors = [-0.02, 0.01, 0.03, -0.01]
    (signed,) = bar_summary(_frame(errors), scenario="baseline", metric="throughput").itertuples()
    expected = sps.t.interval(0.95, 3, loc=np.mean(errors), scale=sps.sem(errors))
    assert (signed.ci_low, signed.ci_high) == pytest.approx(expected)


def test_a_yes_no_metric_is_a_count_with_its_clopper_pearson_interval() -> None:
    # 4 of 5 probes reachable: the failure is an outcome, not an outlier to drop.
    runs = tuple(
        RunResult(f"r{i}", i, 0, RunStatus.OK, "", (Measurement("reachable", v, "bool"),))
        for i, v in enumerate([1.0, 1.0, 0.0, 1.0, 1.0])
    )
    result = ConditionResult("priority", "vxlan", CONDITION, Verification(True, "ok"), runs, "")
    (table,) = result.summaries()
    exact = sps.binomtest(4, 5).proportion_ci(0.95, method="exact")
    assert (table.successes, table.n, table.estimate) == (4, 5, pytest.approx(0.8))
    assert (table.low, table.high) == pytest.approx((exact.low, exact.high))
    assert (round(table.low, 2), round(table.high, 2)) == (0.28, 0.99)


def test_one_run_has_no_interval_in_either() -> None:
    (table,) = _result(VALUES[:1]).summaries()
    (report,) = bar_summary(
        _frame(VALUES[:1]), scenario="baseline", metric="throughput"
    ).itertuples()
    assert table.n == report.n == 1
    assert math.isnan(table.low)
    assert math.isnan(report.ci_low)


def test_a_cpu_percentage_never_gets_a_bound_above_100_in_either() -> None:
    # Runs at the ceiling (the lab's host-wide CPU during iperf3): the log-scale interval of
    # these reaches above 100 %; a share of the CPUs cannot, so both cut it at 100.
    cpu = [99.61, 100.0, 99.9, 99.2, 100.0]
    logs = np.log(cpu)
    _, high = sps.t.interval(0.95, logs.size - 1, loc=logs.mean(), scale=sps.sem(logs))
    assert math.exp(high) > 100
    runs = tuple(
        RunResult(f"r{i}", i, 0, RunStatus.OK, "", (Measurement("cpu", v, "%"),))
        for i, v in enumerate(cpu)
    )
    result = ConditionResult("baseline", "vxlan", CONDITION, Verification(True, "ok"), runs, "")
    (table,) = result.summaries()
    frame = _frame(cpu).assign(metric="cpu", unit="%")
    (report,) = bar_summary(frame, scenario="baseline", metric="cpu").itertuples()
    assert table.high == report.ci_high == 100.0
    assert table.low == pytest.approx(report.ci_low)
    assert table.low < table.estimate < 100.0
