"""Retransmits shown, loss recorded, lossy runs flagged (issue 31, item 3).

Every iperf3 run records ``retransmit_rate`` (retransmitted over sent segments, a ratio) beside
``retransmits``; sockperf records the messages it counted dropped; the run tables show
retransmits right after throughput and mark a run above
:data:`~cnibench.report.data.RETRANSMIT_RATE_BOUND`; :func:`high_retransmit_runs` lists those
runs for the verdict. The iperf3 and sockperf outputs are the captured real ones in
``fixtures/``.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pandas as pd
import pytest

from cnibench.records import Measurement
from cnibench.report.data import (
    HIGH_RETRANSMIT_COLUMNS,
    RETRANSMIT_RATE_BOUND,
    high_retransmit_runs,
)
from cnibench.report.tables import retransmit_mark, table_runs
from cnibench.scenarios import build_scenarios
from cnibench.scenarios.base import with_companions
from cnibench.scenarios.policy import _retransmit_rate
from cnibench.tools import iperf3
from cnibench.tools.sockperf import sockperf_measurements

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"
TCP_SENT_BYTES = 2_640_969_728
"""``end.sum_sent.bytes`` of fixtures/iperf3/tcp.json (4 retransmits, MSS 32768)."""


def _fixture(name: str) -> str:
    return (FIXTURES / name).read_text()


def _by_metric(measurements: list[Measurement]) -> dict[str, Measurement]:
    return {m.metric: m for m in measurements}


# --- the tool adapters ----------------------------------------------------------------------


def test_iperf3_records_the_retransmit_rate_from_sent_bytes_over_the_json_s_mss() -> None:
    measured = _by_metric(iperf3.iperf3_measurements(_fixture("iperf3/tcp.json"), ""))
    # iperf 3.12 names the sender's MSS start.tcp_mss_default (32768 on loopback).
    expected = 4 / (TCP_SENT_BYTES / 32768)
    assert measured["retransmits"] == Measurement("retransmits", 4.0, "count")
    assert measured["retransmit_rate"].unit == "ratio"
    assert measured["retransmit_rate"].value == pytest.approx(expected, rel=1e-12)
    assert measured["retransmit_rate"].value == pytest.approx(4.963e-5, rel=1e-3)


def test_a_reverse_run_rates_the_server_s_retransmits_against_what_the_server_sent() -> None:
    parsed = iperf3.parse_iperf3(_fixture("iperf3/tcp_reverse_parallel2.json"))
    assert parsed.reverse
    assert parsed.retransmits == 20
    assert parsed.retransmit_rate == pytest.approx(20 / (parsed.sent_bytes / 32768))


def test_without_an_mss_in_the_json_1448_bytes_are_assumed() -> None:
    document = json.loads(_fixture("iperf3/tcp.json"))
    del document["start"]["tcp_mss_default"]
    parsed = iperf3.parse_iperf3(json.dumps(document))
    assert parsed.mss_bytes == iperf3.DEFAULT_MSS_BYTES == 1448
    assert parsed.retransmit_rate == pytest.approx(4 / (TCP_SENT_BYTES / 1448))


def test_udp_records_datagram_loss_and_no_retransmits() -> None:
    measured = _by_metric(iperf3.iperf3_measurements(_fixture("iperf3/udp.json"), ""))
    parsed = iperf3.parse_iperf3(_fixture("iperf3/udp.json"))
    assert "retransmits" not in measured
    assert "retransmit_rate" not in measured
    assert parsed.lost_percent is not None
    assert measured["datagram_loss"] == Measurement(
        "datagram_loss", parsed.lost_percent / 100, "ratio"
    )


def test_sockperf_records_the_messages_it_counted_dropped() -> None:
    measured = _by_metric(sockperf_measurements(_fixture("sockperf/udp_pingpong.txt"), ""))
    assert measured["dropped_messages"] == Measurement("dropped_messages", 0.0, "count")
    assert measured["message_loss"] == Measurement("message_loss", 0.0, "ratio")


def test_policy_rates_all_client_pods_together_weighted_by_what_each_sent() -> None:
    tcp = iperf3.parse_iperf3(_fixture("iperf3/tcp.json"))
    reverse = iperf3.parse_iperf3(_fixture("iperf3/tcp_reverse_parallel2.json"))
    udp = iperf3.parse_iperf3(_fixture("iperf3/udp.json"))
    assert tcp.segments_sent
    assert reverse.segments_sent
    pooled = (4 + 20) / (tcp.segments_sent + reverse.segments_sent)
    assert _retransmit_rate([tcp, reverse, udp]) == pytest.approx(pooled)
    assert _retransmit_rate([udp]) is None


# --- what the run table shows ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("scenario", "condition_id"),
    [
        ("baseline", "cross-node-idle-iperf3"),
        ("egress", "gateway-on"),
        ("policy", "off-cross-node-c1"),
        ("wireguard", "on-iperf3"),
    ],
    ids=["baseline", "egress", "policy", "wireguard"],
)
def test_cnibench_run_shows_retransmits_right_after_throughput(
    scenario: str, condition_id: str
) -> None:
    found = build_scenarios()[scenario]
    (condition,) = (c for c in found.conditions() if c.id == condition_id)
    shown = list(found.headline_metrics(condition))
    at = shown.index("throughput")
    assert shown[at + 1 : at + 3] == ["retransmits", "retransmit_rate"]


def test_companions_are_added_only_beside_throughput_and_only_once() -> None:
    assert with_companions(("requests_per_second", "cpu")) == ("requests_per_second", "cpu")
    assert with_companions(("retransmits", "throughput", "cpu")) == (
        "throughput",
        "retransmits",
        "retransmit_rate",
        "cpu",
    )
    split = build_scenarios()["split"]
    assert "retransmits" not in split.headline_metrics(split.conditions()[0])


# --- the flag -------------------------------------------------------------------------------


def _records(rows: list[tuple[str, str, float, str]], *, session: str = "s1") -> pd.DataFrame:
    """Tidy records ``(run_id, metric, value, status)`` of one egress condition on cilium."""
    units = {"throughput": "bits/s", "retransmits": "count", "retransmit_rate": "ratio"}
    return pd.DataFrame(
        [
            {
                "session_id": session,
                "run_id": run,
                "time": f"2026-11-27T10:00:0{run[-1]}",
                "cni": "cilium:napi=threaded",
                "scenario": "egress",
                "condition": "gateway-on",
                "metric": metric,
                "value": value,
                "unit": units.get(metric, ""),
                "status": status,
            }
            for run, metric, value, status in rows
        ]
    )


def test_runs_above_the_bound_are_listed_with_their_rate_and_nothing_else() -> None:
    frame = _records(
        [
            ("r1", "retransmit_rate", 0.0005, "ok"),
            ("r2", "retransmit_rate", 0.13, "ok"),
            ("r3", "retransmit_rate", RETRANSMIT_RATE_BOUND, "ok"),  # at the bound: not above
            ("r4", "retransmit_rate", 0.2, "failed"),  # a failed run has no values to judge
            ("r5", "throughput", 3e9, "ok"),
        ]
    )
    flagged = high_retransmit_runs(frame)
    assert (
        list(flagged.columns)
        == list(HIGH_RETRANSMIT_COLUMNS)
        == [
            "session_id",
            "run_id",
            "cni",
            "scenario",
            "condition",
            "retransmit_rate",
        ]
    )
    assert flagged.to_dict("records") == [
        {
            "session_id": "s1",
            "run_id": "r2",
            "cni": "cilium:napi=threaded",
            "scenario": "egress",
            "condition": "gateway-on",
            "retransmit_rate": 0.13,
        }
    ]


def test_records_older_than_the_rate_are_skipped_not_guessed() -> None:
    """Before issue 31 a run recorded only ``retransmits``: without its duration the segments
    sent cannot be derived, so such a run is never flagged, however many it retransmitted."""
    old = _records([("r1", "retransmits", 32000.0, "ok"), ("r1", "throughput", 3e9, "ok")])
    flagged = high_retransmit_runs(old)
    assert flagged.empty
    assert list(flagged.columns) == list(HIGH_RETRANSMIT_COLUMNS)


def test_a_real_captured_run_is_clean_at_the_bound_and_flagged_below_its_rate() -> None:
    measured = iperf3.iperf3_measurements(_fixture("iperf3/tcp.json"), "")
    frame = _records([("r1", m.metric, m.value, "ok") for m in measured if m.unit != "us"])
    assert high_retransmit_runs(frame).empty  # 0.005 % of segments: a clean run
    flagged = high_retransmit_runs(frame, bound=1e-5)
    assert flagged["run_id"].tolist() == ["r1"]
    assert flagged["retransmit_rate"].iloc[0] == pytest.approx(4 / (TCP_SENT_BYTES / 32768))


@pytest.mark.parametrize("bound", [0.0, 1.0, -0.1, math.nan], ids=["0", "1", "negative", "nan"])
def test_a_bound_that_is_not_a_share_is_refused(bound: float) -> None:
    with pytest.raises(ValueError, match="bound must be a share of segments in"):
        high_retransmit_runs(_records([]), bound=bound)


def test_the_run_table_marks_a_lossy_run_and_puts_retransmits_beside_throughput() -> None:
    frame = _records(
        [
            ("r1", "throughput", 8.1e9, "ok"),
            ("r1", "retransmits", 300.0, "ok"),
            ("r1", "retransmit_rate", 0.0004, "ok"),
            ("r2", "throughput", 3.7e9, "ok"),
            ("r2", "retransmits", 36915.0, "ok"),
            ("r2", "retransmit_rate", 0.1304, "ok"),
        ]
    )
    # Recorded out of order, as a scenario may append its retransmits last.
    frame = frame.sort_values("metric", key=lambda m: m != "retransmit_rate", kind="stable")
    table = table_runs(frame, "egress", "gateway-on")
    assert list(table.index) == ["Run 1", "Run 2 ⚠ retransmits 13 %", "Avg", "Std Dev"]
    assert list(table.columns) == [
        "throughput [bits/s]",
        "retransmits [count]",
        "retransmit_rate [ratio]",
    ]
    assert table.attrs["run_ids"] == ["r1", "r2"]


def test_the_mark_gives_the_rate_in_percent() -> None:
    assert retransmit_mark(0.1304) == "⚠ retransmits 13 %"
    assert retransmit_mark(0.0142) == "⚠ retransmits 1.4 %"
