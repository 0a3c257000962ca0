"""Issue 24 on a real lab: a lab datapath runs on the lab though a container engine answers,
and the notebook example (``examples/notebook.py``) measures through ``BenchSession.run``."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from lab_support import unavailable

from cnibench.backends.lab import LabBackend

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def lab_host() -> None:
    ok, reason = LabBackend().available()
    if not ok:
        unavailable(reason)


def _fake_engine(tmp_path: Path) -> tuple[dict[str, str], Path]:
    """An environment in which "a container engine answers", as after ``eval "$(cnibench
    engine up)"``. Faked, since no engine may be started beside the lead's kind clusters:
    ``docker`` is a script on PATH that answers every command (``docker info`` exits 0) and
    writes down that it was asked; DOCKER_HOST names cnibench's own engine's socket, where
    nothing listens."""
    fake_bin = tmp_path / "bin"
    fake_bin.mkdir()
    asked = tmp_path / "docker-asked"
    (fake_bin / "docker").write_text(f'#!/bin/sh\necho "$@" >> {asked}\nexit 0\n')
    (fake_bin / "docker").chmod(0o755)
    env = dict(os.environ)
    env["PATH"] = f"{fake_bin}:{env.get('PATH', '/usr/sbin:/usr/bin:/sbin:/bin')}"
    env["DOCKER_HOST"] = "unix:///run/cnibench-engine/cnibench/docker.sock"
    env["PYTHONPATH"] = str(ROOT / "src")
    env.pop("CNIBENCH_IMAGES", None)
    return env, asked


def test_a_lab_datapath_runs_on_the_lab_though_an_engine_answers(
    lab_host: None, tmp_path: Path
) -> None:
    """``cnibench run --scenario egress --cni vxlan --profile smoke`` with an engine "up" in
    the same shell (see :func:`_fake_engine` for what is faked) measures on the lab; before
    issue 24 it went to kind and failed with "unknown --cni 'vxlan'"."""
    env, asked = _fake_engine(tmp_path)
    results = tmp_path / "results"
    done = subprocess.run(
        [sys.executable, "-m", "cnibench.cli", "run", "--scenario", "egress", "--cni", "vxlan",
         "--profile", "smoke", "--results-dir", str(results)],
        capture_output=True, text=True, timeout=900, check=False, env=env,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    assert "--cluster auto: --cni vxlan runs on the embedded lab" in done.stderr
    assert not asked.exists()  # the request decided: the engine was not even asked
    (session,) = results.iterdir()
    records = [
        record
        for run_file in (session / "runs").glob("*.json")
        for record in json.loads(run_file.read_text())["records"]
    ]
    assert {(r["backend"], r["cni"]) for r in records} == {("lab", "vxlan")}
    assert {r["condition"] for r in records} == {"gateway-off", "gateway-on"}


def test_the_notebook_example_measures_through_the_session_s_run(
    lab_host: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)  # the example writes "results/"
    namespace: dict[str, object] = {}
    source = (ROOT / "examples" / "notebook.py").read_text()
    exec(compile(source, "examples/notebook.py", "exec"), namespace)  # our own example
    outcome = namespace["outcome"]
    assert not outcome.failed, outcome.lines()  # type: ignore[attr-defined]
    assert outcome.session_dir.resolve().parent == tmp_path / "results"  # type: ignore[attr-defined]
    summaries = namespace["summaries"]
    assert isinstance(summaries, dict)
    # One summary per condition, each over that condition's two smoke runs, read from the
    # run files themselves.
    runs: dict[str, list[float]] = {}
    for run_file in (outcome.session_dir / "runs").glob("*.json"):  # type: ignore[attr-defined]
        for record in json.loads(run_file.read_text())["records"]:
            if record["metric"] == "throughput" and record["status"] == "ok":
                runs.setdefault(record["condition"], []).append(record["value"])
    assert set(summaries) == set(runs) == {"gateway-off", "gateway-on"}
    for condition, values in runs.items():
        assert summaries[condition].n == len(values) == 2
