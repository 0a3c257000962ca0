"""Why the kind study measures for five seconds, not the quick profile's one
(``cnibench.study.DURATION``): on kind here, the same flannel cluster measured in 6
interleaved rounds at 1 s and then at 10 s (docs/results/duration-kind-2026-12-06, recorded
with ``cnibench run --cluster kind --cni flannel --scenario baseline --target pod,service
--runs 6 --interleave``, ``--duration 10s`` for the second). The records are committed; what
is checked is what they give."""

from __future__ import annotations

import functools
import warnings
from pathlib import Path

import numpy as np
import pandas as pd

from cnibench import load_results, report

RESULTS = Path(__file__).resolve().parents[2] / "docs" / "results" / "duration-kind-2026-12-06"


@functools.cache
def _by_duration() -> dict[str, pd.DataFrame]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        df = load_results(RESULTS, sessions="all")
    sessions = sorted(df["session_id"].unique())
    assert len(sessions) == 2
    return {"1s": df[df["session_id"] == sessions[0]], "10s": df[df["session_id"] == sessions[1]]}


def _log_sd(df: pd.DataFrame, condition: str, metric: str) -> float:
    rows = df[
        (df["condition"] == condition)
        & (df["metric"] == metric)
        & (df["status"] == "ok")
        & (df["repetition"] >= 0)  # warm-up runs are never counted
    ]
    assert len(rows) == 6, len(rows)
    return float(np.log(rows["value"].to_numpy(dtype=float)).std(ddof=1))


def test_ten_seconds_steady_iperf3_s_throughput() -> None:
    short, long = (
        _log_sd(_by_duration()[d], "cross-node-idle-iperf3", "throughput") for d in ("1s", "10s")
    )
    assert short > 2 * long, (short, long)


def test_the_agents_cpu_interval_narrows_and_the_latency_does_not() -> None:
    widths = {}
    for duration, df in _by_duration().items():
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            table = report.verdict(df).set_index("metric")
        widths[duration] = {
            m: float(np.log(table.loc[m, "ci_high"] / table.loc[m, "ci_low"]))
            for m in ("cpu@agent", "latency_avg")
        }
    assert widths["1s"]["cpu@agent"] > 3 * widths["10s"]["cpu@agent"], widths
    assert widths["10s"]["latency_avg"] > 0.8 * widths["1s"]["latency_avg"], widths
