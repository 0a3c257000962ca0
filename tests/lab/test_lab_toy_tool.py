"""Adding a measurement tool is one module and one registry line: the toy tool of
``toy_tool.py``, registered here with :func:`cnibench.tools.register` as the built-in tools are
in ``cnibench/tools/__init__.py``, is listed by ``cnibench doctor`` with its version and measured
by the baseline scenario on a real lab (``cnibench run`` in this process, so it sees the
registration), its numbers and its version in the results. Nothing else in cnibench names it.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from toy_tool import CONNECTS, TOY

from cnibench import cli, load_results
from cnibench.results import load_environments
from cnibench.tools import MeasurementTool, register, unregister


@pytest.fixture
def toy() -> Iterator[MeasurementTool]:
    register(TOY)
    try:
        yield TOY
    finally:
        unregister(TOY.name)


def python3_version() -> str:
    """The version of the ``python3`` on PATH, asked without the toy's version probe."""
    done = subprocess.run(
        ["python3", "-c", "import platform; print(platform.python_version())"],
        capture_output=True, text=True, timeout=30, check=True,
    )  # fmt: skip
    return done.stdout.strip()


def test_doctor_lists_the_toy_with_its_version(
    toy: MeasurementTool, lab_backend: object, capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    monkeypatch.setenv("COLUMNS", "250")
    assert cli.main(["doctor"]) == 0
    rows = [line for line in capsys.readouterr().out.splitlines() if " toy " in line]
    assert len(rows) == 1, rows
    assert "yes" in rows[0]
    assert f"toy {python3_version()}" in rows[0]


def test_the_baseline_measures_with_the_toy_on_the_lab(
    toy: MeasurementTool, lab_backend: object, tmp_path: Path
) -> None:
    results = tmp_path / "results"
    code = cli.main(
        ["run", "--cluster", "lab", "--cni", "routed", "--scenario", "baseline",
         "--profile", "smoke", "--results-dir", str(results),
         "--condition", "cross-node-idle-toy"]
    )  # fmt: skip
    assert code == 0
    frame = load_results(results)
    assert set(frame["condition"]) == {"cross-node-idle-toy"}
    assert set(frame["param_tool"]) == {"toy"}
    assert bool(frame["verified"].all())
    assert set(frame["status"]) == {"ok"}
    runs = frame["run_id"].nunique()
    assert runs == 2  # the smoke profile
    measured = frame.set_index(["run_id", "metric"])["value"]
    for run in frame["run_id"].unique():
        assert measured[run, "connections"] == CONNECTS
        # A connect across two veths and the underlay bridge takes µs, not a second.
        assert 0 < measured[run, "connect_time_avg"] <= measured[run, "connect_time_max"] < 1e6
    raws = sorted(results.rglob("toy-connect.txt"))
    assert len(raws) == runs
    for raw in raws:
        lines = raw.read_text().splitlines()
        assert len(lines) == CONNECTS
        # Every connection was answered by the baseline's server pod.
        assert {line.split(" ", 1)[1] for line in lines} == {"bl-srv"}
    (versions,) = load_environments(results)["tool_versions"]
    assert json.loads(versions)["toy"] == python3_version()
