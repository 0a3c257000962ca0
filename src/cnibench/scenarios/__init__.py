"""Scenarios: parameters, procedure, verification, measurement; written against backend Protocols.

Adding a scenario is one module with a :class:`~cnibench.scenarios.base.Scenario` subclass plus
one line in :data:`SCENARIOS`.
"""

from __future__ import annotations

from cnibench.errors import ConfigError
from cnibench.scenarios.base import Condition, Scenario
from cnibench.scenarios.baseline import BaselineScenario
from cnibench.scenarios.egress import EgressScenario
from cnibench.scenarios.wireguard import WireguardScenario

__all__ = ["SCENARIOS", "Condition", "Scenario", "scenario_named"]

SCENARIOS: dict[str, Scenario] = {
    scenario.name: scenario
    for scenario in (BaselineScenario(), EgressScenario(), WireguardScenario())
}
"""Every scenario by name, in the order reports and ``cnibench run`` use."""


def scenario_named(name: str) -> Scenario:
    """The scenario called ``name``; a one-line :class:`ConfigError` names the choices."""
    try:
        return SCENARIOS[name]
    except KeyError:
        choices = ", ".join(SCENARIOS)
        raise ConfigError(f"unknown scenario {name!r}: choose one of {choices}") from None
