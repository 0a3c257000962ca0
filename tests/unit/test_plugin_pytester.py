"""The pytest plugin as a user's own suite meets it: a test file in an empty directory, run by
``pytester`` in a subprocess, with the plugin loaded from its entry point (no conftest)."""

from __future__ import annotations

import pytest

pytest_plugins = ["pytester"]

USER_SUITE = """
import pytest

@pytest.mark.egress
def test_my_egress(bench, cni, condition):
    bench.run("egress", condition)

def test_plain_helper():
    assert True
"""


def _ids(result: pytest.RunResult) -> list[str]:
    return sorted(line.split("::", 1)[1] for line in result.outlines if "::" in line)


def test_a_marked_test_gets_the_scenarios_conditions_for_each_cni(
    pytester: pytest.Pytester,
) -> None:
    pytester.makepyfile(test_user=USER_SUITE)
    result = pytester.runpytest_subprocess(
        "--collect-only", "-q", "--cluster=lab", "--cni=vxlan", "--cni=routed"
    )
    assert result.ret == 0, result.stdout.str() + result.stderr.str()
    assert _ids(result) == sorted(
        [
            f"test_my_egress[{cni}-gateway-{state}]"
            for cni in ("vxlan", "routed")
            for state in ("off", "on")
        ]
        + ["test_plain_helper"]
    )


def test_k_selects_one_condition(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_user=USER_SUITE)
    result = pytester.runpytest_subprocess(
        "--collect-only", "-q", "--cluster=lab", "--cni=vxlan", "-k", "gateway-on"
    )
    assert result.ret == 0, result.stderr.str()
    assert _ids(result) == ["test_my_egress[vxlan-gateway-on]"]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--cluster=lab", "--cni=warp"), "warp"),
        (
            ("--cluster=lab", "--cni=vxlan", "--cnibench-reference=routed"),
            "--cnibench-reference 'routed'",
        ),
        (("--cluster=lab", "--cnibench-runs=0"), "--cnibench-runs"),
        (("--cluster=moon",), "moon"),
    ],
    ids=["unknown-cni", "reference-not-a-session-cni", "runs-zero", "unknown-cluster"],
)
def test_bad_options_end_with_one_usage_line_and_no_traceback(
    pytester: pytest.Pytester, args: tuple[str, ...], message: str
) -> None:
    pytester.makepyfile(test_user=USER_SUITE)
    result = pytester.runpytest_subprocess("--collect-only", "-q", *args)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    errors = [line for line in result.errlines if line.startswith("ERROR:")]
    assert len(errors) == 1, result.errlines
    assert message in errors[0]
    assert "Traceback" not in result.stdout.str() + result.stderr.str()


def test_the_missions_own_command_without_an_engine_says_what_is_missing(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``pytest -k egress --cni=antrea`` where no engine answers and no cluster is named: one
    line naming what Antrea needs, what is missing and what to run instead (issue 11 item 5)."""
    monkeypatch.delenv("DOCKER_HOST", raising=False)
    pytester.makepyfile(test_user=USER_SUITE)
    result = pytester.runpytest_subprocess("-q", "-k", "egress", "--cni=antrea")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    errors = [line for line in result.errlines if line.startswith("ERROR:")]
    assert len(errors) == 1, result.errlines
    assert "'antrea' needs a Kubernetes cluster" in errors[0]
    assert "no container engine answers" in errors[0]
    assert "cnibench engine up" in errors[0]
    assert "Traceback" not in result.stdout.str() + result.stderr.str()
