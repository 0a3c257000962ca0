"""Bad input on the command line: one line naming the bad value, exit 2, nothing written."""

from __future__ import annotations

import subprocess
import sys

import pytest

BAD_INPUT = [
    (["run", "--cluster", "moon"], "unknown --cluster 'moon'"),
    (["run", "--cluster", "lab", "--cni", "weave"], "unknown --cni 'weave' for the lab"),
    (["run", "--scenario", "teleport"], "unknown scenario 'teleport'"),
    (
        ["run", "--cluster", "lab", "--scenario", "egress@weave"],
        "unknown --cni 'weave' for the lab",
    ),
    (["run", "--profile", "turbo"], "unknown profile 'turbo'"),
    (["run", "--runs", "0"], "must be a positive integer, got 0"),
    (["run", "--runs", "many"], "'many' is not an integer"),
    (["run", "--duration=-5s"], "invalid duration '-5s'"),
    (["run", "--duration=1.5s"], "whole number of seconds"),
    (["run", "--cluster", "kind", "--cni", "weave"], "unknown --cni 'weave': choose one of"),
    (["explode"], "invalid choice: 'explode'"),
]


@pytest.mark.parametrize(
    ("argv", "message"), BAD_INPUT, ids=lambda v: " ".join(v) if isinstance(v, list) else None
)
def test_bad_input_is_one_line_and_exit_2(tmp_path, argv, message):
    results = tmp_path / "results"
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "cnibench.cli",
            *argv,
            *(["--results-dir", str(results)] if argv[0] == "run" else []),
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith("cnibench: error: ")
    assert message in lines[0]
    assert "Traceback" not in done.stderr
    assert not results.exists()


@pytest.mark.parametrize(
    ("n", "multiplier"),
    [(2, "12.7"), (3, "4.3")],
    ids=["two-runs", "three-runs"],
)
def test_few_runs_note_names_the_t_multiplier(n: int, multiplier: str) -> None:
    from cnibench.cli import _few_runs_note

    # Student-t 97.5 % quantiles with 1 and 2 degrees of freedom: 12.706 and 4.303.
    assert f"with n = {n} runs an interval is the mean ± {multiplier} standard errors" in (
        _few_runs_note(n)
    )


@pytest.mark.parametrize("n", [0, 1, 4, 8], ids=["no-interval", "one-run", "four", "eight"])
def test_few_runs_note_is_silent_otherwise(n: int) -> None:
    from cnibench.cli import _few_runs_note

    assert _few_runs_note(n) == ""
