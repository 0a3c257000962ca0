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


# --- locust's own distribution in pods (--load-workers) -------------------------------------


class _Backend:
    def __init__(self, name: str, load_in_pods: bool) -> None:
        self.name = name
        self.load_in_pods = load_in_pods


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("0", "--load-workers: 0 is outside 1..64"),
        ("65", "--load-workers: 65 is outside 1..64"),
        ("two", "--load-workers: 'two' is not a whole number (use 1 to 64)"),
    ],
    ids=["zero", "over-64", "word"],
)
def test_load_workers_outside_the_range_are_one_line(text: str, message: str) -> None:
    with pytest.raises(ConfigError) as caught:
        parse_scenario_options(load_engine="locust", load_workers=text)
    assert str(caught.value) == message


def test_load_workers_without_locust_are_refused() -> None:
    with pytest.raises(ConfigError, match=r"^--load-workers 3 needs --load-engine locust"):
        parse_scenario_options(load_workers="3")


def test_locust_on_a_backend_with_load_in_pods_runs_two_workers_by_default() -> None:
    split = build_scenarios(parse_scenario_options(load_engine="locust", users="10"))["split"]
    planned = split.on_backend(_Backend("kube", True))  # type: ignore[arg-type]
    assert {c.parameters["load_workers"] for c in planned.conditions()} == {2}
    assert [c.id for c in planned.conditions()] == [c.id for c in split.conditions()]


def test_epoll_on_kube_stays_on_this_host() -> None:
    split = build_scenarios(parse_scenario_options(users="10"))["split"]
    planned = split.on_backend(_Backend("kube", True))  # type: ignore[arg-type]
    assert all("load_workers" not in c.parameters for c in planned.conditions())


def test_locust_on_the_lab_stays_on_this_host_and_refuses_workers() -> None:
    options = parse_scenario_options(load_engine="locust", users="10")
    planned = build_scenarios(options)["split"].on_backend(_Backend("lab", False))  # type: ignore[arg-type]
    assert all("load_workers" not in c.parameters for c in planned.conditions())
    asked = parse_scenario_options(load_engine="locust", users="10", load_workers="4")
    with pytest.raises(ConfigError, match=r"^--load-workers 4: backend lab runs locust on this"):
        build_scenarios(asked)["split"].on_backend(_Backend("lab", False))  # type: ignore[arg-type]
