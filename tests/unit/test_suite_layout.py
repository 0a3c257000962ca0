"""The suite's own rules (tests/conftest.py): markers follow the folder, and the tiers whose
builds run in the background (kube, then kind) come last."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _collected(*args: str) -> list[str]:
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "tests",
            "--collect-only",
            "-q",
            "-p",
            "no:cacheprovider",
            *args,
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    return [line for line in done.stdout.splitlines() if "::" in line]


def _folders(ids: list[str]) -> set[str]:
    return {Path(test_id.split("::", 1)[0]).parts[1] for test_id in ids}


def test_markers_select_whole_folders() -> None:
    every = _collected()
    kube = _collected("-m", "kube")
    kind = _collected("-m", "kind")
    lab = _collected("-m", "lab")
    assert _folders(kube) == {"kube"}
    assert len(kube) == sum(test_id.startswith("tests/kube/") for test_id in every)
    assert _folders(kind) == {"kind"}
    assert len(kind) == sum(test_id.startswith("tests/kind/") for test_id in every)
    # lab: every test of tests/lab and tests/reliability, plus the lab modules of integration.
    assert {"lab", "reliability", "integration"} == _folders(lab)
    for folder in ("lab", "reliability"):
        assert sum(t.startswith(f"tests/{folder}/") for t in lab) == sum(
            t.startswith(f"tests/{folder}/") for t in every
        )
    assert not any(t.startswith("tests/unit/") for t in lab + kube + kind)


def test_kube_then_kind_run_after_every_other_tier() -> None:
    order = [Path(test_id.split("::", 1)[0]).parts[1] for test_id in _collected()]
    last = [folder for folder in order if folder in ("kube", "kind")]
    assert order[-len(last) :] == last
    assert last == sorted(last, key=("kube", "kind").index)
    assert set(last) == {"kube", "kind"}
