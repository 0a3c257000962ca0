"""Scenarios come from one registry (``cnibench.scenarios.register_scenario``): what is
registered is what ``build_scenarios``, ``SCENARIOS``, ``scenario_named`` and the pytest
markers know, built-ins and a user's own alike."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from cnibench import scenarios
from cnibench.errors import ConfigError
from cnibench.scenarios.base import Condition, Scenario


class _Tiny(Scenario):
    name = "tiny"

    def conditions(self) -> list[Condition]:
        return [Condition("tiny", "one", {})]

    def prepare(self, cluster, condition, profile):  # type: ignore[no-untyped-def]
        raise NotImplementedError

    def verify(self, cluster, prepared, condition):  # type: ignore[no-untyped-def]
        raise NotImplementedError

    def measure(self, cluster, prepared, condition, profile, repetition):  # type: ignore[no-untyped-def]
        raise NotImplementedError


@pytest.fixture
def tiny() -> Iterator[None]:
    scenarios.register_scenario("tiny", "a tiny one", _Tiny)
    try:
        yield
    finally:
        scenarios.unregister_scenario("tiny")


def test_the_built_ins_are_registered_in_report_order() -> None:
    assert list(scenarios.SCENARIO_KINDS.names()) == [
        "baseline", "egress", "split", "policy", "l7", "priority", "wireguard",
    ]  # fmt: skip
    assert list(scenarios.build_scenarios()) == list(scenarios.SCENARIO_KINDS.names())


def test_a_registered_scenario_is_known_everywhere_and_forgotten_when_unregistered(
    tiny: None,
) -> None:
    assert isinstance(scenarios.SCENARIOS["tiny"], _Tiny)
    assert scenarios.scenario_named("tiny").name == "tiny"
    assert scenarios.scenario_markers()["tiny"] == "a tiny one"
    scenarios.unregister_scenario("tiny")
    assert "tiny" not in scenarios.SCENARIOS
    with pytest.raises(ConfigError, match="unknown scenario 'tiny'"):
        scenarios.scenario_named("tiny")


def test_a_second_registration_and_a_misnamed_scenario_are_refused(tiny: None) -> None:
    with pytest.raises(ValueError, match="already registered"):
        scenarios.register_scenario("tiny", "again", _Tiny)
    scenarios.register_scenario("small", "misnamed", _Tiny)
    try:
        with pytest.raises(ConfigError, match="registered, but it makes 'tiny'"):
            scenarios.build_scenarios()
    finally:
        scenarios.unregister_scenario("small")


def test_options_reach_the_scenarios_that_take_them() -> None:
    from cnibench.scenarios.options import ScenarioOptions

    built = scenarios.build_scenarios(ScenarioOptions(users=(7,)))
    split_users = {c.parameters.get("users") for c in built["split"].conditions()}
    assert split_users == {7}
