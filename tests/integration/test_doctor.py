"""``cnibench doctor`` for real, as a subprocess: the lab rows, and the kind row's reasons.

No container engine runs here, so the kind cases put stand-in ``docker``/``kind``/``helm``
scripts first on PATH (docker answers ``info``; kind prints a real ``kind version`` line with
another version number); everything else doctor checks is this machine's own.
"""

from __future__ import annotations

import os
import re
import stat
import subprocess
import sys
from pathlib import Path

import pytest

REAL_KIND_VERSION = (
    Path(__file__).resolve().parents[2] / "fixtures" / "kind" / "version.txt"
).read_text()


def _doctor(
    path_prefix: Path | None = None, *, without: str = ""
) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "COLUMNS": "250"}
    dirs = env["PATH"].split(os.pathsep)
    if without:  # drop the directories that hold this command
        dirs = [d for d in dirs if not (Path(d) / without).exists()]
    if path_prefix is not None:
        dirs.insert(0, str(path_prefix))
    env["PATH"] = os.pathsep.join(dirs)
    return subprocess.run(
        [sys.executable, "-m", "cnibench.cli", "doctor"],
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
        env=env,
    )


def _stub(directory: Path, name: str, output: str = "") -> None:
    script = directory / name
    script.write_text(f"#!/bin/sh\nprintf '%s' '{output}'\n")
    script.chmod(script.stat().st_mode | stat.S_IXUSR)


def _row(stdout: str, what: str) -> str:
    line = next((ln for ln in stdout.splitlines() if re.match(rf"^\W*{re.escape(what)}\s", ln)), "")
    assert line, f"no {what} row in:\n{stdout}"
    return line


def test_doctor_reports_the_lab_usable_here() -> None:
    done = _doctor()
    assert done.returncode == 0, done.stderr
    assert "yes" in _row(done.stdout, "lab backend")
    assert "yes" in _row(done.stdout, "nftables")


@pytest.mark.parametrize(
    ("kind_version", "with_helm", "usable", "reason"),
    [
        ("v0.29.0", True, "no", "kind v0.29.0 is older than v0.30.0"),
        ("v0.30.0", False, "no", "helm is not on PATH"),
        ("v0.30.0", True, "yes", "kind v0.30.0"),
    ],
    ids=["kind-too-old", "no-helm", "usable"],
)
def test_doctor_kind_row(
    tmp_path: Path, kind_version: str, with_helm: bool, usable: str, reason: str
) -> None:
    _stub(tmp_path, "docker")  # answers `docker info` with exit 0: an engine is up
    _stub(tmp_path, "kind", re.sub(r"v\d+\.\d+\.\d+", kind_version, REAL_KIND_VERSION, count=1))
    if with_helm:
        _stub(tmp_path, "helm")
    done = _doctor(tmp_path, without="" if with_helm else "helm")
    assert done.returncode == 0, done.stderr
    row = _row(done.stdout, "kind")
    assert f" {usable} " in row
    assert reason in row
