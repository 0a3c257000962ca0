"""Scenarios: parameters, procedure, verification, measurement; written against backend Protocols.

Adding a scenario is one module with a :class:`~cnibench.scenarios.base.Scenario` subclass plus
two lines in :func:`build_scenarios` (its import and its entry).

The scenario modules (and, through them, the statistics: scipy and pandas) are imported on first
use of :func:`build_scenarios` or :data:`SCENARIOS`, so that a submodule such as
:mod:`.options`, which the CLI's parser needs, comes without them.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from cnibench.errors import ConfigError
from cnibench.scenarios.base import Condition, Scenario

if TYPE_CHECKING:
    from cnibench.scenarios.options import ScenarioOptions

__all__ = ["SCENARIOS", "Condition", "Scenario", "build_scenarios", "scenario_named"]


def build_scenarios(options: ScenarioOptions | None = None) -> dict[str, Scenario]:
    """Every scenario by name, configured with ``options`` (``--weights``, ``--users``, ...)."""
    from cnibench.scenarios.baseline import BaselineScenario
    from cnibench.scenarios.egress import EgressScenario
    from cnibench.scenarios.l7 import L7Scenario
    from cnibench.scenarios.policy import PolicyScenario
    from cnibench.scenarios.priority import PriorityScenario
    from cnibench.scenarios.split import SplitScenario
    from cnibench.scenarios.wireguard import WireguardScenario

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


SCENARIOS: dict[str, Scenario]
"""Every scenario with default options, in the order reports and ``cnibench run`` use (made on
first use)."""


def _default_scenarios() -> dict[str, Scenario]:
    found: dict[str, Scenario] | None = globals().get("SCENARIOS")
    if found is None:
        found = globals()["SCENARIOS"] = build_scenarios()
    return found


def __getattr__(name: str) -> object:
    if name == "SCENARIOS":
        return _default_scenarios()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def scenario_named(name: str, scenarios: Mapping[str, Scenario] | None = None) -> Scenario:
    """The scenario called ``name``; a one-line :class:`ConfigError` names the choices."""
    registry = _default_scenarios() if scenarios is None else scenarios
    try:
        return registry[name]
    except KeyError:
        choices = ", ".join(registry)
        raise ConfigError(f"unknown scenario {name!r}: choose one of {choices}") from None
