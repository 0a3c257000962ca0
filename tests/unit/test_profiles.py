from __future__ import annotations

import pytest

from cnibench.errors import ConfigError
from cnibench.scenarios.profiles import PROFILES, parse_duration, profile_named


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("720s", 720.0), ("12m", 720.0), ("1.5h", 5400.0), ("250ms", 0.25), ("30", 30.0)],
    ids=["seconds", "minutes", "hours", "milliseconds", "bare"],
)
def test_parse_duration(text, seconds):
    assert parse_duration(text) == pytest.approx(seconds)


@pytest.mark.parametrize("text", ["", "fast", "-3s", "0s", "3d"], ids=repr)
def test_parse_duration_rejects(text):
    with pytest.raises(ConfigError, match="duration"):
        parse_duration(text)


def test_unknown_profile_names_the_choices():
    with pytest.raises(
        ConfigError, match=r"unknown profile 'fast': choose one of smoke, quick, standard, paper"
    ):
        profile_named("fast")


def test_overrides_apply_to_every_timed_tool():
    profile = PROFILES["standard"].with_overrides(runs=3, duration=7.0)
    assert (profile.runs, profile.duration, profile.egress_duration) == (3, 7.0, 7.0)
    assert PROFILES["standard"].runs == 5


@pytest.mark.parametrize("runs", [0, -1], ids=["zero", "negative"])
def test_overrides_reject_non_positive_runs(runs):
    with pytest.raises(ConfigError, match="--runs"):
        PROFILES["quick"].with_overrides(runs=runs)


def test_paper_profile_uses_seed_000_egress_setting():
    # Seed 000: 8 runs of 12 minutes for the egress measurements.
    assert (PROFILES["paper"].runs, PROFILES["paper"].egress_duration) == (8, 720.0)


def test_quick_makes_five_runs_and_smoke_two_shorter_and_fewer_than_standard():
    # quick: enough runs for an interval worth reading (issue 13); smoke: the suite's two runs.
    quick, smoke, standard = (PROFILES[name] for name in ("quick", "smoke", "standard"))
    assert quick.runs >= 5
    assert smoke.runs == 2
    assert quick.runs * quick.duration <= standard.runs * standard.duration
    assert quick.duration >= 1  # the tools take whole seconds
