"""The suite's own rules (tests/conftest.py): markers follow the folder, and the tiers whose
builds run in the background (kube, then kind) come last. One collection of the whole suite,
with each test's markers (``suite_probe``), serves every check."""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest

from noxfile_syntax import constant, function_node, names_in
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


DONE_WHEN = (
    "test_kind_existing.py::test_an_unlabelled_cluster_kind_made_is_measured_and_verified",
    "test_kind_existing.py::test_the_cluster_holds_nothing_of_cnibench_afterwards",
    "test_kind_existing.py::test_every_pod_image_came_from_the_registry",
    "test_kind_cilium.py::test_the_kept_cilium_cluster_reached_by_its_kubeconfig_runs_egress",
    "test_kind_flannel.py::test_pairs_record_each_pair_beside_their_sum[4pairs]",
    "test_kind_flannel.py::test_each_pair_s_pods_sit_on_the_nodes_the_placement_names[4pairs]",
    "test_kind_kube_router.py::test_locust_s_own_workers_in_client_pods_split_60_40",
    "test_kind_flannel.py::test_every_baseline_record_is_verified_and_plausible",
    "test_kind_cilium.py::test_the_external_server_sees_the_client_node_then_the_gateway_node",
)
"""Kind checks CI must keep running (issue 33's done-when list, the baseline, the egress
gateway in the path); a prefix of each test id below tests/kind/."""


def test_ci_leaves_out_only_extended_kind_checks(suite: list[tuple[str, set[str]]]) -> None:
    """The noxfile's kind tier runs ``-m KIND_TIER_SELECTION``; what that leaves out is marked
    ``kind_extended``, lives in tests/kind, is under half of the tier, and is none of the
    checks CI must keep."""
    assert constant("KIND_TIER_SELECTION") == "not kind_extended"
    assert "KIND_TIER_SELECTION" in names_in(function_node("_start_kind_tier")), (
        "the kind tier's pytest does not use the selection"
    )
    extended = _marked(suite, "kind_extended")
    kind = _marked(suite, "kind")
    assert extended, "nothing is marked kind_extended: drop the selection instead"
    assert {_folder(t) for t in extended} == {"kind"}
    assert len(extended) < len(kind) / 2
    kept = [t.removeprefix("tests/kind/") for t in kind if t not in extended]
    for wanted in DONE_WHEN:
        assert any(t.startswith(wanted) for t in kept), wanted


def _bench_conditions(*args: str) -> list[str]:
    done = run_pytest("tests/bench", "--collect-only", "-q", "--cluster=lab", *args, timeout=120)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    return [line for line in done.stdout.splitlines() if "::" in line]


def test_ci_runs_every_condition_of_the_benchmark_suite_once_on_one_datapath() -> None:
    """CI passes ``--cni=BENCH_CI_CNI`` to the pytest of the unit tier and the benchmark
    suite: the suite then keeps each of its conditions, on that datapath, and drops only the
    copies on the other one."""
    cni = constant("BENCH_CI_CNI")
    assert isinstance(cni, str)
    assert "BENCH_CI_CNI" in names_in(function_node("tests"))
    every = _bench_conditions()
    ci = _bench_conditions(f"--cni={cni}")
    datapaths = {test.split("[", 1)[1].split("-", 1)[0] for test in every}
    assert cni in datapaths, datapaths
    assert len(datapaths) > 1, datapaths

    def condition(test: str) -> str:
        head, rest = test.split("[", 1)
        return f"{head}[{rest.split('-', 1)[1]}"

    assert all(f"[{cni}-" in test for test in ci), ci
    assert sorted(map(condition, ci)) == sorted(set(map(condition, every)))


def test_ci_runs_the_readme_s_first_command_in_a_fresh_root_beside_the_kind_tier() -> None:
    """Issue 49: CI runs ``nox -s bootstrap-check``. The tests session starts it when
    ``CNIBENCH_REQUIRE`` names ``bootstrap``, which its default and ``.ci/run`` both do, and
    waits for it as for the kind tier (a failure fails the session)."""
    tests = function_node("tests")
    assert "_start_bootstrap_check" in names_in(tests)
    defaults = [
        node.value
        for node in ast.walk(tests)
        if isinstance(node, ast.Constant)
        and isinstance(node.value, str)
        and node.value.startswith("lab,")
    ]
    assert defaults, "no CNIBENCH_REQUIRE default in the tests session"
    assert all("bootstrap" in d.split(",") for d in defaults), defaults
    ci = (ROOT / ".ci" / "run").read_text()
    required = next(line for line in ci.splitlines() if "CNIBENCH_REQUIRE=" in line)
    assert "bootstrap" in required, required
    starter = function_node("_start_bootstrap_check")
    assert "bootstrap-check" in {n.value for n in ast.walk(starter) if isinstance(n, ast.Constant)}
