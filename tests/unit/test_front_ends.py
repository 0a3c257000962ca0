"""``cnibench run`` and the pytest plugin read one option table and check it with one function,
so the same bad value gets the same one-line error from both (exit 2 from the command, a
usage error from pytest), before anything starts, each naming the option as its user types it
(``--runs``, the plugin's ``--cnibench-runs``)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from cnibench.plugin import plugin_option

BAD = [
    (
        ("--cluster", "moon"),
        "unknown --cluster 'moon': choose one of auto, lab, kind, aks, existing",
    ),
    (("--cni", "weave"), "unknown --cni 'weave' for the lab: choose one of routed, vxlan"),
    (
        ("--cni", "vxlan:mtu=9000"),
        "--cni 'vxlan:mtu=9000': the lab takes only the option napi=inline|threaded, got mtu",
    ),
    (("--runs", "0"), "--runs must be a positive integer, got 0"),
    (("--runs", "many"), "--runs: 'many' is not an integer"),
    (("--duration", "soon"), "invalid duration 'soon': use e.g. 30s, 12m, 1h or 250ms"),
    (("--duration", "1.5s"), "whole number of seconds"),
    (("--duration", "1ms"), "whole number of seconds >= 1"),
    (("--duration", "1000h"), "--duration must be at most 24h, got 3600000s"),
    (("--budget", "2h"), "--budget needs --until-decided"),
    (("--report", "/etc/hostname/report.html"), "/etc/hostname is a file, not a directory"),
    (("--report", "/etc"), "--report /etc is a directory: name a file"),
    (("--profile", "turbo"), "unknown profile 'turbo'"),
    (("--precision", "0%"), "--precision '0%': it must be above 0 and below 100%"),
    (("--precision", "soon"), "invalid --precision 'soon': write a percentage such as 5%"),
    (("--max-runs", "2"), "--max-runs 2 is below the 5 runs per condition of the profile"),
]


def _message_of_cli(option: str, value: str, tmp_path: Path) -> str:
    results = tmp_path / "results"
    done = subprocess.run(
        [sys.executable, "-m", "cnibench.cli", "run", "--cluster", "lab", f"{option}={value}",
         "--scenario", "baseline", "--results-dir", str(results)],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr
    assert not results.exists()
    (line,) = done.stderr.strip().splitlines()
    assert line.startswith("cnibench: error: "), line
    return line.removeprefix("cnibench: error: ")


def _message_of_plugin(option: str, value: str, tmp_path: Path) -> str:
    suite = tmp_path / "suite"
    suite.mkdir(parents=True)
    (suite / "test_one.py").write_text("def test_one(bench):\n    pass\n")
    done = subprocess.run(
        [sys.executable, "-m", "pytest", str(suite), "-p", "no:cacheprovider", "-q",
         "--cluster=lab", f"{plugin_option(option)}={value}",
         "--cnibench-results-dir", str(tmp_path / "results")],
        capture_output=True, text=True, timeout=60, check=False, cwd=suite,
    )  # fmt: skip
    assert done.returncode == pytest.ExitCode.USAGE_ERROR, done.stdout + done.stderr
    assert "Traceback" not in done.stderr
    assert not (tmp_path / "results").exists()
    errors = [line for line in done.stderr.splitlines() if line.startswith("ERROR: ")]
    assert len(errors) == 1, done.stderr
    return errors[0].removeprefix("ERROR: ")


@pytest.mark.parametrize(
    ("argv", "message"), BAD, ids=lambda v: "=".join(v) if isinstance(v, tuple) else None
)
def test_the_command_and_the_plugin_refuse_a_bad_value_in_the_same_words(
    argv: tuple[str, str], message: str, tmp_path: Path
) -> None:
    option, value = argv
    from_cli = _message_of_cli(option, value, tmp_path / "cli")
    from_plugin = _message_of_plugin(option, value, tmp_path / "plugin")
    assert message in from_cli
    # The same words, but each option as the plugin names it: --runs is --cnibench-runs there.
    in_plugin_names = re.sub(r"--[a-z][a-z-]*", lambda m: plugin_option(m.group()), from_cli)
    assert from_plugin == in_plugin_names


def test_both_front_ends_default_to_one_profile() -> None:
    import argparse

    from cnibench.cli import _build_parser
    from cnibench.session import DEFAULT_PROFILE, SESSION_OPTIONS, add_session_options

    run = _build_parser().parse_args(["run"])
    group = argparse.ArgumentParser()
    add_session_options(group.add_argument)
    plugin_defaults = vars(group.parse_args([]))
    assert run.profile == plugin_defaults["profile"] == DEFAULT_PROFILE
    assert set(SESSION_OPTIONS) <= set(plugin_defaults)
    assert {name: getattr(run, name) for name in SESSION_OPTIONS} == {
        name: plugin_defaults[name] for name in SESSION_OPTIONS
    }
