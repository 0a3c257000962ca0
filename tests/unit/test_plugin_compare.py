"""The pytest plugin's regression gate: ``--cnibench-compare-to DIR
--cnibench-fail-on-regression 5%``.

Each case runs a real pytest session (``pytester``, in a subprocess) whose test names a results
session the way ``Bench.run`` does (the ``cnibench_session`` user property). The results are
written by the real results store with made-up values, so no lab is needed here; the lab tier
(tests/lab/test_lab_compare.py) runs the gate on a real benchmark.
"""

from __future__ import annotations

import pytest
from compare_support import Condition, write_result_set

pytest_plugins = ["pytester"]

NOISE = (1.0, 1.01, 0.99)


def _set(path, scale):
    condition = Condition({"throughput": [scale * 1e9 * v for v in NOISE]})
    write_result_set(path, [condition], session_id="20261122T100000Z-abcdef")
    return path / "20261122T100000Z-abcdef"


@pytest.fixture
def sets(tmp_path):
    return {
        "base": _set(tmp_path / "base", 10.0).parent,
        "fast": _set(tmp_path / "fast", 10.0),
        "slow": _set(tmp_path / "slow", 5.0),
    }


def _suite(pytester, session_dir):
    """A test that reports ``session_dir`` as its results, as the ``bench`` fixture does."""
    record = (
        f"    request.node.user_properties.append(('cnibench_session', {str(session_dir)!r}))\n"
        if session_dir
        else ""
    )
    pytester.makepyfile(f"def test_benchmark(request):\n{record}    assert True\n")


def test_regression_fails_the_session_with_the_cli_lines(pytester, sets):
    _suite(pytester, sets["slow"])
    result = pytester.runpytest_subprocess(
        "--cnibench-compare-to",
        str(sets["base"]),
        "--cnibench-fail-on-regression",
        "5%",
        "--cnibench-session-sd",
        "2%",
    )
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(
        [
            "*cnibench compare*",
            "REGRESSED: 1 regression beyond 5%; 1 metric comparison of 1 condition*",
            "cnibench: REGRESSION throughput of baseline/routed/same-node-idle-iperf3: ratio 0.5*",
            "cnibench: the session fails: --cnibench-fail-on-regression found a regression",
        ]
    )


def test_regression_through_xdist_workers(pytester, sets):
    _suite(pytester, sets["slow"])
    result = pytester.runpytest_subprocess(
        "-p",
        "xdist",
        "-n",
        "2",
        "--cnibench-compare-to",
        str(sets["base"]),
        "--cnibench-fail-on-regression",
        "5%",
        "--cnibench-session-sd",
        "2%",
    )
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(["cnibench: REGRESSION throughput of *"])


def test_within_threshold_passes_and_prints_the_table(pytester, sets):
    _suite(pytester, sets["fast"])
    result = pytester.runpytest_subprocess(
        "--cnibench-compare-to",
        str(sets["base"]),
        "--cnibench-fail-on-regression",
        "0.05",
        "--cnibench-session-sd",
        "1%",
    )
    assert result.ret == pytest.ExitCode.OK
    result.stdout.fnmatch_lines(
        ["WITHIN THRESHOLD: all 1 within 5%*", "no detectable change*throughput*"]
    )


def test_undecided_fails_the_session_with_its_own_message(pytester, sets):
    """One baseline session and no --cnibench-session-sd: the gate cannot decide, so a session
    that asked to fail on a regression fails, saying it is undecided and what would decide it."""
    _suite(pytester, sets["fast"])
    result = pytester.runpytest_subprocess(
        "--cnibench-compare-to", str(sets["base"]), "--cnibench-fail-on-regression", "5%"
    )
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(
        [
            "UNDECIDED: 1 undecided at 5%, none regressed*",
            "cnibench: UNDECIDED throughput of baseline/routed/same-node-idle-iperf3: *session-sd*",
            "cnibench: the session fails: --cnibench-fail-on-regression could not decide 1"
            " comparison*",
        ]
    )
    assert "found a regression" not in result.stdout.str()


def test_compare_to_alone_reports_but_does_not_fail(pytester, sets):
    _suite(pytester, sets["slow"])
    result = pytester.runpytest_subprocess(
        "--cnibench-compare-to", str(sets["base"]), "--cnibench-session-sd", "2%"
    )
    assert result.ret == pytest.ExitCode.OK
    result.stdout.fnmatch_lines(["cnibench: REGRESSION throughput of *"])
    assert "the session fails" not in result.stdout.str()


def test_a_session_without_results_is_a_usage_error(pytester, sets):
    _suite(pytester, None)
    result = pytester.runpytest_subprocess(
        "--cnibench-compare-to", str(sets["base"]), "--cnibench-fail-on-regression", "5%"
    )
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stdout.fnmatch_lines(
        ["cnibench: error: --cnibench-compare-to: this session recorded no results to compare"]
    )


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ["--cnibench-fail-on-regression=-5%"],
            "--cnibench-fail-on-regression: invalid threshold '-5%'*",
        ),
        (["--cnibench-fail-on-regression", "5"], "*write 5% for per cent"),
        (["--cnibench-fail-on-regression", "garbage"], "*invalid threshold 'garbage'*"),
        (["--cnibench-fail-on-regression", "200%"], "*must be at most 100%"),
        (
            ["--cnibench-session-sd", "5"],
            "--cnibench-session-sd: invalid session SD '5'*write 5% for per cent",
        ),
        (
            ["--cnibench-compare-to", "{missing}"],
            "--cnibench-compare-to results directory */missing does not exist",
        ),
        (
            ["--cnibench-compare-to", "{empty}"],
            "--cnibench-compare-to results in */empty hold no run records",
        ),
    ],
    ids=[
        "negative",
        "bare-number",
        "garbage",
        "over-100",
        "bare-session-sd",
        "missing-dir",
        "empty-dir",
    ],
)
def test_bad_values_are_one_line_usage_errors(pytester, sets, tmp_path, args, message):
    (tmp_path / "empty").mkdir()
    paths = {"missing": tmp_path / "missing", "empty": tmp_path / "empty"}
    argv = [arg.format(**paths) for arg in args]
    if not any(arg.startswith("--cnibench-compare-to") for arg in argv):
        argv = ["--cnibench-compare-to", str(sets["base"]), *argv]
    _suite(pytester, sets["fast"])
    result = pytester.runpytest_subprocess(*argv)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    errors = [line for line in result.stderr.lines if line.strip()]
    assert len(errors) == 1, result.stderr.str()
    result.stderr.fnmatch_lines([f"ERROR: {message}"])


@pytest.mark.parametrize("option", ["--cnibench-fail-on-regression", "--cnibench-session-sd"])
def test_the_gate_options_need_compare_to(pytester, option):
    _suite(pytester, None)
    result = pytester.runpytest_subprocess(option, "5%")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"ERROR: {option} needs --cnibench-compare-to DIR"])
