"""The suite's own rules (tests/conftest.py): markers follow the folder, and the tiers whose
builds run in the background (kube, then kind) come last. One collection of the whole suite,
with each test's markers (``suite_probe``), serves every check."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from suite_support import ROOT, run_pytest


@pytest.fixture(scope="module")
def suite(tmp_path_factory: pytest.TempPathFactory) -> list[tuple[str, set[str]]]:
    """(test id, marker names) of every test, in the order the suite runs them."""
    out = tmp_path_factory.mktemp("probe") / "items.jsonl"
    done = run_pytest(
        "tests",
        "--collect-only",
        "-q",
        "-p",
        "suite_probe",
        env={"SUITE_PROBE_OUT": str(out), "PYTHONPATH": str(ROOT / "tests")},
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    items = [json.loads(line) for line in out.read_text().splitlines()]
    # The probe saw what pytest collected: the same ids, in the same order.
    assert [item["id"] for item in items] == [
        line for line in done.stdout.splitlines() if "::" in line
    ]
    return [(item["id"], set(item["markers"])) for item in items]


def _folder(test_id: str) -> str:
    return Path(test_id.split("::", 1)[0]).parts[1]


def _marked(suite: list[tuple[str, set[str]]], marker: str) -> list[str]:
    """What ``-m MARKER`` selects."""
    return [test_id for test_id, markers in suite if marker in markers]


def test_markers_select_whole_folders(suite: list[tuple[str, set[str]]]) -> None:
    every = [test_id for test_id, _ in suite]
    kube, kind, lab = (_marked(suite, marker) for marker in ("kube", "kind", "lab"))
    assert {_folder(t) for t in kube} == {"kube"}
    assert len(kube) == sum(_folder(t) == "kube" for t in every)
    assert {_folder(t) for t in kind} == {"kind"}
    assert len(kind) == sum(_folder(t) == "kind" for t in every)
    # lab: every test of tests/lab and tests/reliability, plus the lab modules of integration.
    assert {_folder(t) for t in lab} == {"lab", "reliability", "integration"}
    for folder in ("lab", "reliability"):
        assert sum(_folder(t) == folder for t in lab) == sum(_folder(t) == folder for t in every)
    assert not any(_folder(t) == "unit" for t in lab + kube + kind)


def test_kube_then_kind_run_after_every_other_tier(suite: list[tuple[str, set[str]]]) -> None:
    order = [_folder(test_id) for test_id, _ in suite]
    last = [folder for folder in order if folder in ("kube", "kind")]
    assert order[-len(last) :] == last
    assert last == sorted(last, key=("kube", "kind").index)
    assert set(last) == {"kube", "kind"}
