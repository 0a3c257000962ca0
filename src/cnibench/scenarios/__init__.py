"""Scenarios: parameters, procedure, verification, measurement; written against backend Protocols.

Adding a scenario is one module with a :class:`~cnibench.scenarios.base.Scenario` subclass plus
one line in :data:`SCENARIOS`.
"""

from __future__ import annotations

from collections.abc import Mapping

from cnibench.errors import ConfigError
from cnibench.scenarios.base import Condition, Scenario
from cnibench.scenarios.baseline import BaselineScenario
from cnibench.scenarios.egress import EgressScenario
from cnibench.scenarios.l7 import L7Scenario
from cnibench.scenarios.options import ScenarioOptions
from cnibench.scenarios.policy import PolicyScenario
from cnibench.scenarios.priority import PriorityScenario
from cnibench.scenarios.split import SplitScenario
from cnibench.scenarios.wireguard import WireguardScenario

__all__ = ["SCENARIOS", "Condition", "Scenario", "build_scenarios", "scenario_named"]


def build_scenarios(options: ScenarioOptions | None = None) -> dict[str, Scenario]:
    """Every scenario by name, configured with ``options`` (``--weights``, ``--users``, ...)."""
    return {
        scenario.name: scenario
        for scenario in (
            BaselineScenario(options),
            EgressScenario(),
            SplitScenario(options),
            PolicyScenario(options),
            L7Scenario(options),
            PriorityScenario(),
            WireguardScenario(),
        )
    }


SCENARIOS: dict[str, Scenario] = build_scenarios()
"""Every scenario with default options, in the order reports and ``cnibench run`` use."""


def scenario_named(name: str, scenarios: Mapping[str, Scenario] | None = None) -> Scenario:
    """The scenario called ``name``; a one-line :class:`ConfigError` names the choices."""
    registry = SCENARIOS if scenarios is None else scenarios
    try:
        return registry[name]
    except KeyError:
        choices = ", ".join(registry)
        raise ConfigError(f"unknown scenario {name!r}: choose one of {choices}") from None
