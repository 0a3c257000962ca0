"""The pytest plugin: selection by -k and --cni, option validation (no cluster needed)."""

from __future__ import annotations

import subprocess

import pytest

from suite_support import run_pytest


def _pytest(*args: str) -> subprocess.CompletedProcess[str]:
    return run_pytest(*args, timeout=120)


def test_k_egress_with_one_cni_selects_exactly_the_egress_cases():
    done = _pytest(
        "tests/bench", "--collect-only", "-q", "-k", "egress", "--cluster=lab", "--cni=vxlan"
    )
    assert done.returncode == 0, done.stdout + done.stderr
    selected = sorted(line for line in done.stdout.splitlines() if "::" in line)
    assert selected == [
        "tests/bench/test_egress.py::test_egress[vxlan-gateway-off]",
        "tests/bench/test_egress.py::test_egress[vxlan-gateway-on]",
    ]


def test_cni_defaults_to_both_lab_profiles():
    done = _pytest("tests/bench/test_egress.py", "--collect-only", "-q", "--cluster=lab")
    assert done.returncode == 0, done.stdout + done.stderr
    ids = {line.split("[", 1)[1].rstrip("]") for line in done.stdout.splitlines() if "::" in line}
    assert ids == {
        "routed-gateway-off",
        "routed-gateway-on",
        "vxlan-gateway-off",
        "vxlan-gateway-on",
    }


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--cluster=moon"], "unknown --cluster 'moon'"),
        (["--cnibench-profile=turbo"], "unknown profile 'turbo'"),
        (["--cnibench-runs=0"], "--cnibench-runs must be a positive integer, got 0"),
        (["--cnibench-duration=soon"], "invalid duration 'soon'"),
        (["--cluster=lab", "--cni=weave"], "unknown --cni 'weave' for the lab"),
        (
            ["--cluster=lab", "--cni=vxlan", "--cnibench-reference=routed"],
            "--cnibench-reference 'routed' is not one of the CNIs of this session: vxlan",
        ),
    ],
    ids=["cluster", "profile", "runs", "duration", "cni", "reference"],
)
def test_bad_options_are_usage_errors(args, message):
    done = _pytest("tests/bench", "--collect-only", "-q", *args)
    assert done.returncode in (2, 4), done.stdout + done.stderr
    assert message in done.stdout + done.stderr
    assert "Traceback" not in done.stdout + done.stderr
