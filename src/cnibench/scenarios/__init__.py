"""Scenarios: parameters, procedure, verification, measurement; written against backend Protocols.

Adding a scenario is one module with a :class:`~cnibench.scenarios.base.Scenario` subclass plus
one :func:`register_scenario` line (below for the built-ins; a user's conftest or notebook for
their own): ``cnibench run --scenario NAME``, the pytest marker of that name, the plan, the
verdict and the reports all take it from there.

The scenario modules (and, through them, the statistics: scipy and pandas) are imported on first
use of :func:`build_scenarios` or :data:`SCENARIOS`, so that a submodule such as
:mod:`.options`, which the CLI's parser needs, comes without them.
"""

from __future__ import annotations

import importlib
import inspect
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, cast

from cnibench.errors import ConfigError
from cnibench.registry import Registry
from cnibench.scenarios.base import Condition, Scenario

if TYPE_CHECKING:
    from cnibench.scenarios.options import ScenarioOptions

__all__ = [
    "SCENARIOS",
    "SCENARIO_KINDS",
    "Condition",
    "Scenario",
    "ScenarioKind",
    "build_scenarios",
    "register_scenario",
    "scenario_markers",
    "scenario_named",
    "unregister_scenario",
]

Build = Callable[["ScenarioOptions | None"], Scenario]
"""How a kind of scenario is made for a session's options (``--weights``, ``--users``, ...)."""


@dataclass(frozen=True)
class ScenarioKind:
    """A registered scenario: its name, what its pytest marker selects, and how it is made.

    ``build`` is the scenario's class or a function making it (called with the session's
    options when it has an ``options`` parameter, else with none), or a ``"module:Class"``
    path imported on first use.
    """

    name: str
    marker: str
    build: Build | type[Scenario] | str

    def make(self, options: ScenarioOptions | None) -> Scenario:
        """The scenario, configured with ``options``."""
        build: Callable[..., Scenario]
        if isinstance(self.build, str):
            module, _, attribute = self.build.partition(":")
            build = getattr(importlib.import_module(module), attribute)
        else:
            build = cast("Callable[..., Scenario]", self.build)
        takes_options = "options" in inspect.signature(build).parameters
        made = build(options) if takes_options else build()
        if made.name != self.name:
            raise ConfigError(f"scenario {self.name!r} was registered, but it makes {made.name!r}")
        return made


SCENARIO_KINDS: Registry[ScenarioKind] = Registry("scenario")
"""Every scenario cnibench knows, in the order reports and ``cnibench run`` use."""


def register_scenario(name: str, marker: str, build: Build | type[Scenario] | str) -> ScenarioKind:
    """Make a scenario known: ``--scenario NAME``, the pytest marker ``NAME`` (selecting
    what ``marker`` says), the plan and the reports then include it.

    Raises
    ------
    ValueError
        A scenario of that name is already registered.
    """
    kind = SCENARIO_KINDS.register(ScenarioKind(name, marker, build))
    globals().pop("SCENARIOS", None)  # made again, with it, on next use
    return kind


def unregister_scenario(name: str) -> None:
    """Forget the scenario ``name`` (nothing when there is none)."""
    SCENARIO_KINDS.unregister(name)
    globals().pop("SCENARIOS", None)


_BUILT_IN = "cnibench.scenarios."
register_scenario(
    "baseline",
    "pod-to-pod throughput, latency and HTTP rate (seeds 001, 004)",
    _BUILT_IN + "baseline:BaselineScenario",
)
register_scenario(
    "egress", "egress gateway on/off, source address verified (seed 000)",
    _BUILT_IN + "egress:EgressScenario",
)  # fmt: skip
register_scenario(
    "split", "weighted traffic splitting (seed 000)", _BUILT_IN + "split:SplitScenario"
)
register_scenario(
    "policy", "network policy: rule and pod scaling (seed 003)",
    _BUILT_IN + "policy:PolicyScenario",
)  # fmt: skip
register_scenario("l7", "L7 HTTP policy (seed 003)", _BUILT_IN + "l7:L7Scenario")
register_scenario(
    "priority",
    "policy precedence: Kubernetes vs CNI policies, tiers, priorities (seed 003)",
    _BUILT_IN + "priority:PriorityScenario",
)
register_scenario(
    "wireguard", "node-to-node encryption off/on, marker capture verified (seeds 002, 003)",
    _BUILT_IN + "wireguard:WireguardScenario",
)  # fmt: skip


def build_scenarios(options: ScenarioOptions | None = None) -> dict[str, Scenario]:
    """Every registered scenario by name, configured with ``options``."""
    return {kind.name: kind.make(options) for kind in SCENARIO_KINDS.view.values()}


def scenario_markers() -> dict[str, str]:
    """Each registered scenario's pytest marker and what it selects."""
    return {kind.name: kind.marker for kind in SCENARIO_KINDS.view.values()}


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
