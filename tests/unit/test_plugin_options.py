"""The plugin's option names (issue 49): it is loaded in every pytest of the environment, so
every option it adds is ``--cnibench-NAME`` but ``--cni`` and ``--cluster``, which users type
bare (``pytest -k egress --cni=antrea``), and a bare ``--profile`` stays free for another
plugin (pytest-profiling's). The option tests run pytest in a subprocess (``pytester``), the
plugin loaded from its entry point."""

from __future__ import annotations

import re

import pytest

pytest_plugins = ["pytester"]

ANOTHER_PLUGIN = """
def pytest_addoption(parser):
    parser.addoption("--profile", action="store_true", help="as pytest-profiling adds it")
"""

BOTH_OPTIONS = """
def test_each_plugin_reads_its_own_option(pytestconfig):
    assert pytestconfig.getoption("profile") is True
    assert pytestconfig.getoption("cnibench_profile") == "smoke"
"""


def _cnibench_options(help_text: str) -> list[str]:
    """The long options of the ``cnibench benchmark suite`` group of ``pytest --help``."""
    section = help_text.split("cnibench benchmark suite:\n", 1)[1].split("\n\n", 1)[0]
    return re.findall(r"^ {2}(--[a-z][a-z0-9-]*)", section, re.M)


def test_every_option_but_cni_and_cluster_is_named_cnibench(pytester: pytest.Pytester) -> None:
    result = pytester.runpytest_subprocess("--help")
    assert result.ret == pytest.ExitCode.OK, result.stderr.str()
    options = _cnibench_options(result.stdout.str())
    assert {"--cni", "--cluster", "--cnibench-profile", "--cnibench-compare-to"} <= set(options)
    unprefixed = [o for o in options if not o.startswith("--cnibench-")]
    assert unprefixed == ["--cluster", "--cni"]  # so no --profile, --report, --runs ...


def test_another_plugins_profile_option_meets_no_clash(pytester: pytest.Pytester) -> None:
    pytester.makeconftest(ANOTHER_PLUGIN)
    pytester.makepyfile(test_profile=BOTH_OPTIONS)
    result = pytester.runpytest_subprocess("--profile", "--cnibench-profile=smoke", "--cluster=lab")
    assert result.ret == pytest.ExitCode.OK, result.stdout.str() + result.stderr.str()
    result.assert_outcomes(passed=1)


@pytest.mark.parametrize(
    ("shared", "in_the_plugin"),
    [
        ("--runs must be a positive integer", "--cnibench-runs must be a positive integer"),
        ("--precision-on needs --precision", "--cnibench-precision-on needs --cnibench-precision"),
        ("unknown --cni 'weave' for the lab", "unknown --cni 'weave' for the lab"),
        ("--cluster existing never changes", "--cluster existing never changes"),
        ("give --session-sd (e.g. 3%)", "give --cnibench-session-sd (e.g. 3%)"),
        (
            "made by cnibench images build --load-engine locust; --load-engine locust needs it",
            "made by cnibench images build --load-engine locust; --cnibench-load-engine locust"
            " needs it",
        ),
        ("as cnibench compare --session-sd)", "as cnibench compare --session-sd)"),
    ],
    ids=["option", "two-options", "cni", "cluster", "gate-option", "quoted-command", "compare"],
)
def test_shared_words_name_the_plugins_options(shared: str, in_the_plugin: str) -> None:
    """Errors, help and skip reasons of the code shared with ``cnibench run`` name the
    plugin's options; a ``cnibench COMMAND ...`` they quote keeps the command's."""
    from cnibench.plugin import in_plugin_words

    assert in_plugin_words(shared) == in_the_plugin
