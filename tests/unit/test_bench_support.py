"""bench/_support.py: the paired ratio every benchmark prints."""

from __future__ import annotations

import importlib.util
import math
import sys
from pathlib import Path

import numpy as np
import pytest
from scipy import stats as sps

_PATH = Path(__file__).resolve().parents[2] / "bench" / "_support.py"
_SPEC = importlib.util.spec_from_file_location("bench_support_module", _PATH)
assert _SPEC is not None
assert _SPEC.loader is not None
support = importlib.util.module_from_spec(_SPEC)
sys.modules[_SPEC.name] = support
_SPEC.loader.exec_module(support)


def test_paired_ratio_is_the_geometric_mean_with_scipys_t_interval_of_the_log_ratios() -> None:
    treatment = [9.1, 9.4, 8.8, 9.9, 9.3, 9.0]
    control = [9.5, 9.3, 9.2, 10.1, 9.6, 9.4]
    logs = np.log(np.asarray(treatment) / np.asarray(control))
    low, high = sps.t.interval(0.95, len(logs) - 1, loc=logs.mean(), scale=sps.sem(logs))
    got = support.paired_ratio(treatment, control)
    assert got.n == 6
    assert got.ratio == pytest.approx(math.exp(logs.mean()))
    assert (got.low, got.high) == pytest.approx((math.exp(low), math.exp(high)))
    assert got.low < got.ratio < got.high


def test_pairing_removes_a_drift_both_sides_share() -> None:
    # The machine slows down round by round; B is always 2 % below A.
    control = [10.0, 8.0, 6.0, 4.0, 2.0]
    treatment = [v * 0.98 for v in control]
    got = support.paired_ratio(treatment, control)
    assert got.ratio == pytest.approx(0.98)
    assert got.high - got.low == pytest.approx(0.0, abs=1e-9)
    assert got.within(1.0, 0.03)
    assert not support.paired_ratio([v * 0.9 for v in control], control).within(1.0, 0.03)


def test_bad_input_is_refused() -> None:
    with pytest.raises(ValueError, match="same number"):
        support.paired_ratio([1.0, 2.0], [1.0])
    with pytest.raises(ValueError, match="positive"):
        support.paired_ratio([1.0, 0.0], [1.0, 1.0])
    one = support.paired_ratio([2.0], [1.0])
    assert one.ratio == 2.0
    assert math.isnan(one.low)
    assert "no interval" in str(one)


def test_csv_is_written_whole(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    path = support.write_csv("demo", [{"round": 1, "a": 2.5}, {"round": 2, "a": 3.5}])
    assert path.read_text().splitlines() == ["round,a", "1,2.5", "2,3.5"]
    assert not list(path.parent.glob("*.partial"))


def test_in_turn_alternates_two_sides_and_lets_each_of_more_lead() -> None:
    in_turn = support.in_turn
    assert [in_turn("AB", i) for i in range(3)] == [["A", "B"], ["B", "A"], ["A", "B"]]
    orders = [in_turn((1, 2, 3), i) for i in range(3)]
    assert [order[0] for order in orders] == [1, 2, 3]
    assert all(sorted(order) == [1, 2, 3] for order in orders)
