"""Adding a scenario is one module and one register line: the toy scenario of
``toy_scenario.py``, registered with :func:`cnibench.scenarios.register_scenario` as the
built-in ones are in ``cnibench/scenarios/__init__.py``, runs on a real lab through
``cnibench run --scenario toy`` (in this process, so it sees the registration) and through a
user's pytest suite that marks a test ``toy`` (its conftest holds the line). Nothing else in
cnibench names it."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from toy_scenario import MARKER, ToyScenario

from cnibench import cli, load_results
from cnibench.scenarios import register_scenario, unregister_scenario

pytest_plugins = ["pytester"]


@pytest.fixture
def toy() -> Iterator[None]:
    register_scenario("toy", MARKER, ToyScenario)
    try:
        yield
    finally:
        unregister_scenario("toy")


def test_cnibench_run_measures_the_toy_scenario_on_the_lab(
    toy: None, lab_backend: object, tmp_path: Path
) -> None:
    results = tmp_path / "results"
    code = cli.main(
        ["run", "--cluster", "lab", "--cni", "routed", "--scenario", "toy",
         "--profile", "smoke", "--results-dir", str(results)]
    )  # fmt: skip
    assert code == 0
    frame = load_results(results)
    assert set(frame["scenario"]) == {"toy"}
    assert bool(frame["verified"].all())
    connects = frame[(frame["metric"] == "connect_time") & (frame["status"] == "ok")]
    assert len(connects) >= 2  # the smoke profile's runs
    assert (connects["value"] > 0).all()


USER_CONFTEST = f"""
import sys
sys.path.insert(0, {str(Path(__file__).parent)!r})
from toy_scenario import MARKER, ToyScenario
from cnibench.scenarios import register_scenario

register_scenario("toy", MARKER, ToyScenario)
"""

USER_SUITE = """
import pytest

@pytest.mark.toy
def test_my_toy(bench, condition):
    result = bench.run("toy", condition)
    assert result.verified
    assert all(value > 0 for value in result.values("connect_time"))
"""


def test_a_users_suite_marks_a_test_with_the_toy_scenario(
    pytester: pytest.Pytester, tmp_path: Path
) -> None:
    pytester.makeconftest(USER_CONFTEST)
    pytester.makepyfile(test_user=USER_SUITE)
    results = tmp_path / "results"
    outcome = pytester.runpytest_subprocess(
        "--cluster=lab", "--cni=routed", "--cnibench-profile=smoke",
        f"--cnibench-results-dir={results}", "--strict-markers", "-rA",
        timeout=600,
    )  # fmt: skip
    outcome.assert_outcomes(passed=1)
    frame = load_results(results)
    assert set(frame["condition"]) == {"cross-node-connect"}
    assert bool(frame["verified"].all())
