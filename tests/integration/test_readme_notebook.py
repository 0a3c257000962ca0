"""The README's notebook example, and the longer one in docs/usage.md, run as written on
results of a real (short) lab run."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

from cnibench.results import MixedSessionsWarning

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.lab

DECOY = "20000101T000000Z-000000"


def _older_session(session: Path, decoy: Path) -> None:
    """A copy of ``session`` as an older session whose every value is a thousand times
    larger: pooled with the real one, it would move any interval far from the real runs."""
    shutil.copytree(session, decoy)
    for run_file in (decoy / "runs").glob("*.json"):
        document = json.loads(run_file.read_text())
        document["session_id"] = DECOY
        for record in document["records"]:
            record["session_id"] = DECOY
            if record["value"] is not None:
                record["value"] *= 1000
        run_file.write_text(json.dumps(document))


def _throughput_runs(session: Path) -> dict[tuple[str, str, str, str], list[float]]:
    """(session, scenario, cni, condition) -> the throughput of its successful runs."""
    out: dict[tuple[str, str, str, str], list[float]] = {}
    for run_file in (session / "runs").glob("*.json"):
        for record in json.loads(run_file.read_text())["records"]:
            if record["metric"] == "throughput" and record["status"] == "ok":
                key = (session.name, record["scenario"], record["cni"], record["condition"])
                out.setdefault(key, []).append(record["value"])
    return out


def test_readme_python_example_runs(tmp_path, monkeypatch):
    if os.geteuid() != 0:
        pytest.skip("the lab run behind the example needs root")
    blocks = re.findall(r"```python\n(.*?)```", (ROOT / "README.md").read_text(), re.S)
    assert len(blocks) == 1, "the README should have exactly one notebook example"
    usage = (ROOT / "docs" / "usage.md").read_text().split("## Results in Python", 1)[1]
    longer = re.findall(r"```python\n(.*?)```", usage, re.S)
    assert len(longer) == 1, "docs/usage.md's Results in Python should have one example"
    done = subprocess.run(
        [sys.executable, "-m", "cnibench.cli", "run", "--cluster", "lab", "--profile", "smoke",
         "--runs", "2", "--scenario", "egress@routed,wireguard@routed",
         "--condition", "gateway-off", "--condition", "gateway-on", "--condition", "off-rr",
         "--results-dir", str(tmp_path / "results")],
        capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    (session,) = (tmp_path / "results").iterdir()
    _older_session(session, tmp_path / "results" / DECOY)
    monkeypatch.chdir(tmp_path)  # the example reads "results/"
    short: dict[str, object] = {}
    namespace: dict[str, object] = {}
    with warnings.catch_warnings():
        # The examples must choose their session rather than pool the decoy with it.
        warnings.simplefilter("error", MixedSessionsWarning)
        exec(compile(blocks[0], "README.md", "exec"), short)  # our own README
        exec(compile(longer[0], "docs/usage.md", "exec"), namespace)  # our own docs
    # The README's: the latest session only, and its verdict.
    assert set(short["df"]["session_id"]) == {session.name}  # type: ignore[index]
    assert "egress gateway on routed" in set(short["table"]["contrast"])  # type: ignore[index]
    assert type(namespace["fig"]).__name__ == "Figure"
    # One summary per condition of the latest session, each over that condition's runs only,
    # read here from the run files themselves.
    expected = _throughput_runs(session)
    summaries = namespace["summaries"]
    assert isinstance(summaries, dict)
    assert set(summaries) == set(expected)
    for key, values in expected.items():
        assert summaries[key].n == len(values), key
        assert min(values) <= summaries[key].mean <= max(values), key
    # gateway on vs off on routed: the verdict has that contrast for throughput.
    table = namespace["table"]
    assert "egress gateway on routed" in set(table["contrast"])
