"""``--load-engine``: parsed once, a parameter of every split condition, and the split records
of older results (all named after locust) still read."""

from __future__ import annotations

import pytest

from cnibench.errors import ConfigError
from cnibench.scenarios import SCENARIOS, build_scenarios
from cnibench.scenarios.options import parse_scenario_options
from cnibench.tools.locust_runner import ENGINES, parse_locust_summary


def test_the_default_engine_is_epoll_and_every_split_condition_records_it() -> None:
    conditions = SCENARIOS["split"].conditions()
    assert conditions
    assert {c.parameters["load_engine"] for c in conditions} == {"epoll"}


@pytest.mark.parametrize("engine", ENGINES)
def test_the_chosen_engine_is_a_parameter_of_each_split_condition(engine: str) -> None:
    split = build_scenarios(parse_scenario_options(load_engine=engine, users="10"))["split"]
    conditions = split.conditions()
    assert {c.parameters["load_engine"] for c in conditions} == {engine}
    # The engine is not in the id: the same condition on either engine keeps its name.
    assert all(c.id.endswith("-u10") for c in conditions)


def test_an_unknown_engine_is_one_line_naming_the_choices() -> None:
    with pytest.raises(ConfigError, match=r"^unknown --load-engine 'k6': choose epoll or locust$"):
        parse_scenario_options(load_engine="k6")


@pytest.mark.parametrize("engine", ENGINES)
def test_the_summary_names_the_engine_that_ran(engine: str) -> None:
    line = (
        '{"requests": 3, "failures": 0, "requests_per_second": 3.0, "duration_s": 1.0,'
        f' "users": 1, "engine": "{engine}", "backends": {{"v1": 3}}, "statuses": {{"200": 3}}}}'
    )
    assert parse_locust_summary(line).engine == engine
