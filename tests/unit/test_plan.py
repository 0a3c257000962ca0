"""One planning path: :func:`cnibench.session.plan_conditions` (pure) and
:meth:`BenchSession.plan` (the CNIs), as ``cnibench run`` and the pytest plugin use them."""

from __future__ import annotations

from pathlib import Path

import pytest

from cnibench.errors import ConfigError
from cnibench.scenarios import build_scenarios
from cnibench.scenarios.options import parse_scenario_options
from cnibench.session import BenchSession, SessionConfig, plan_conditions

pytest_plugins = ["pytester"]


def test_no_item_plans_every_condition_of_every_scenario_in_registry_order() -> None:
    registry = build_scenarios()
    planned = plan_conditions(registry)
    expected = [(s.name, c.id) for s in registry.values() for c in s.conditions()]
    assert [(p.scenario.name, p.condition.id) for p in planned] == expected
    assert not any(p.only for p in planned)


def test_items_are_comma_separated_and_may_name_their_cnis() -> None:
    planned = plan_conditions(build_scenarios(), ["egress@routed+vxlan,priority", "baseline@vxlan"])
    by_scenario = {p.scenario.name: p.only.labels for p in planned}
    assert by_scenario == {"egress": ("routed", "vxlan"), "priority": (), "baseline": ("vxlan",)}
    # The order is the order the items were given in.
    names = list(dict.fromkeys(p.scenario.name for p in planned))
    assert names == ["egress", "priority", "baseline"]


def test_condition_ids_filter_and_an_empty_match_lists_the_choices() -> None:
    registry = build_scenarios()
    planned = plan_conditions(registry, ["egress", "baseline"], ["gateway-on"])
    assert [(p.scenario.name, p.condition.id) for p in planned] == [("egress", "gateway-on")]
    with pytest.raises(ConfigError) as caught:
        plan_conditions(registry, ["egress"], ["gateway-sideways"])
    assert str(caught.value) == (
        "no condition matches --condition gateway-sideways: choose from gateway-off, gateway-on"
    )


def test_an_unknown_scenario_is_refused_with_the_choices() -> None:
    with pytest.raises(ConfigError, match=r"unknown scenario 'egres': choose one of baseline"):
        plan_conditions(build_scenarios(), ["egres"])


def test_the_session_runs_each_cni_in_turn_and_honours_named_cnis(tmp_path: Path) -> None:
    registry = build_scenarios()
    planned = plan_conditions(registry, ["egress@vxlan", "priority"])
    config = SessionConfig(cluster="lab", cnis=("routed", "vxlan"), results_dir=tmp_path)
    session = BenchSession(config, scenarios=registry)
    runs = [(r.cni, r.scenario.name, r.condition.id) for r in session.plan(planned)]
    priority = [c.id for c in registry["priority"].conditions()]
    # routed first (the first --cni), all its conditions before vxlan's: one lab at a time.
    assert runs == (
        [("routed", "priority", cid) for cid in priority]
        + [("vxlan", "egress", "gateway-off"), ("vxlan", "egress", "gateway-on")]
        + [("vxlan", "priority", cid) for cid in priority]
    )
    # The session runs the very scenario objects it was planned with.
    assert session.scenarios["egress"] is registry["egress"]


def test_a_named_cni_the_backend_does_not_offer_is_refused(tmp_path: Path) -> None:
    registry = build_scenarios()
    session = BenchSession(SessionConfig(cluster="lab", results_dir=tmp_path), scenarios=registry)
    with pytest.raises(ConfigError, match="unknown --cni 'geneve' for the lab"):
        session.plan(plan_conditions(registry, ["egress@geneve"]))


def test_the_plugin_parametrizes_a_marked_test_with_the_planned_conditions(
    pytester: pytest.Pytester,
) -> None:
    """The plugin's conditions for a scenario marker are what ``plan_conditions`` gives for the
    same options (here split weights, which change the condition ids)."""
    pytester.makepyfile(
        test_user="import pytest\n\n@pytest.mark.split\ndef test_split(cni, condition):\n    pass\n"
    )
    result = pytester.runpytest_subprocess(
        "--collect-only", "-q", "--cluster=lab", "--cni=vxlan", "--cnibench-weights=v1=70,v2=30"
    )
    assert result.ret == 0, result.stdout.str() + result.stderr.str()
    collected = [line.split("::", 1)[1] for line in result.outlines if "::" in line]
    registry = build_scenarios(parse_scenario_options(weights=["v1=70,v2=30"]))
    expected = [f"test_split[vxlan-{p.condition.id}]" for p in plan_conditions(registry, ["split"])]
    assert collected == expected
    assert any("70" in name for name in collected)
