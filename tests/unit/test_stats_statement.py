"""Report sentences from stats.compare: claims only what the intervals support."""

from __future__ import annotations

import warnings

from cnibench import stats


def _compare(baseline, treatment):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", stats.DegenerateDataWarning)
        return stats.compare(baseline, treatment)


def test_unbounded_relative_interval_falls_back_to_the_absolute_difference():
    # Baseline runs 1 and 100: its mean is not clearly non-zero, so the ratio has no interval.
    comparison = _compare([1.0, 100.0], [1000.0, 1010.0])
    sentence = comparison.statement("iptables", "eBPF")
    assert "inf" not in sentence
    assert sentence.startswith("eBPF is 954.5 higher than iptables")
    assert "CI of the difference" in sentence


def test_bounded_relative_interval_is_stated_in_percent():
    comparison = _compare([100.0, 101.0, 99.0, 100.5], [110.0, 111.0, 109.0, 110.5])
    sentence = comparison.statement("a", "b")
    assert sentence.startswith("b is 10.0% higher than a")
