"""Labels say what ran (issue 48, item 5): the lab's WireGuard is the kernel module where the
host has one and wireguard-go only where it has not, and each session records which in its
environment (``cni_values["wireguard_implementation"]``). The verdict's lines, the matrix, the
forest and the report's section name the one their sessions recorded, and claim neither where
the records are silent (fingerprints written before the lab recorded it) or disagree.

The sessions are the committed lab WireGuard study (docs/results/lab-wireguard-2026-11-27,
which recorded wireguard-go), with its fingerprint's record changed to what another host
would have written.
"""

from __future__ import annotations

import json
import math
import re
import shutil
from pathlib import Path

import pandas as pd
import pytest

from cnibench import report
from cnibench.report.configs import recorded_implementation
from cnibench.report.data import scenario_title
from cnibench.report.labels import feature_words, scenario_words
from cnibench.report.matrix import feature_matrix
from cnibench.results import load_environments, load_results

ROOT = Path(__file__).resolve().parents[2]
LAB_WIREGUARD = ROOT / "docs" / "results" / "lab-wireguard-2026-11-27"
ENCRYPTED = "4c8537809cc4"
"""The study's fingerprint of its cluster with WireGuard (the other one runs without)."""

KERNEL = "WireGuard (kernel module, lab)"
USERSPACE = "WireGuard (userspace wireguard-go)"
UNSAID = "WireGuard (lab)"

RECORDS = [
    pytest.param("kernel", KERNEL, id="kernel"),
    pytest.param("wireguard-go", USERSPACE, id="wireguard-go"),
    pytest.param(None, UNSAID, id="not-recorded"),
]


def _recording(environments: pd.DataFrame, implementation: str | None) -> pd.DataFrame:
    """``environments`` with the encrypted cluster's record set to ``implementation``
    (``None``: removed, as in fingerprints written before the lab recorded it)."""
    out = environments.copy()
    for index in out.index[out["environment_id"] == ENCRYPTED]:
        values = json.loads(out.at[index, "cni_values"])
        values.pop("wireguard_implementation", None)
        if implementation is not None:
            values["wireguard_implementation"] = implementation
        out.at[index, "cni_values"] = json.dumps(values)
    return out


def _study() -> tuple[pd.DataFrame, pd.DataFrame]:
    runs = load_results(LAB_WIREGUARD, sessions="all")
    environments = load_environments(LAB_WIREGUARD)
    assert ENCRYPTED in set(environments["environment_id"])
    return runs, environments


def _feature_rows(table: pd.DataFrame) -> pd.DataFrame:
    rows = table[(table["scenario"] == "wireguard") & (table["kind"] == "feature")]
    assert not rows.empty
    return rows


@pytest.mark.parametrize(("implementation", "words"), RECORDS)
def test_the_verdict_lines_name_the_wireguard_the_lab_recorded(
    implementation: str | None, words: str
) -> None:
    runs, environments = _study()
    table = report.verdict(runs, environments=_recording(environments, implementation))
    rows = _feature_rows(table)
    assert all(line.startswith(f"{words} on vxlan") for line in rows["verdict"])
    assert all(contrast.startswith(f"{words} on vxlan") for contrast in rows["contrast"])
    assert set(rows["implementation"]) == {implementation or ""}


def test_a_lab_session_that_ran_kernel_wireguard_is_never_called_wireguard_go() -> None:
    runs, environments = _study()
    table = report.verdict(runs, environments=_recording(environments, "kernel"))
    rows = _feature_rows(table)
    assert not any("wireguard-go" in line for line in table["verdict"])
    matrix = feature_matrix(table, runs=runs)
    assert set(matrix.loc[matrix["scenario"] == "wireguard", "row"]) == {KERNEL}
    figure = report.figure_forest(rows)
    labels = [" ".join(t.get_text().split()) for ax in figure.axes for t in ax.get_yticklabels()]
    assert labels
    assert all(label.startswith(f"{KERNEL} on vxlan") for label in labels)
    assert scenario_title(runs, "wireguard", verdict=table) == KERNEL
    assert scenario_title(table, "wireguard") == KERNEL


def test_without_fingerprints_the_labs_wireguard_claims_no_implementation() -> None:
    runs, _ = _study()
    table = report.verdict(runs)
    assert all(line.startswith(f"{UNSAID} on vxlan") for line in _feature_rows(table)["verdict"])
    assert scenario_title(runs, "wireguard") == UNSAID


def test_sessions_that_ran_different_wireguards_are_named_as_neither() -> None:
    runs, environments = _study()
    # Half the encrypted runs on a host with the kernel module, half on one without.
    other = "0123456789ab"
    encrypted = runs.index[runs["environment_id"] == ENCRYPTED]
    moved = runs["run_id"].isin(sorted(set(runs.loc[encrypted, "run_id"]))[::2])
    mixed_runs = runs.assign(environment_id=runs["environment_id"].mask(moved, other))
    kernel_host = _recording(environments, "kernel")
    kernel_host = kernel_host[kernel_host["environment_id"] == ENCRYPTED].assign(
        environment_id=other
    )
    mixed = pd.concat([environments, kernel_host], ignore_index=True)
    table = report.verdict(mixed_runs, environments=mixed)
    rows = _feature_rows(table)
    assert set(rows["implementation"]) == {"kernel or wireguard-go"}
    assert all(line.startswith(f"{UNSAID} on vxlan") for line in rows["verdict"])
    matrix = feature_matrix(table, runs=mixed_runs)
    assert set(matrix.loc[matrix["scenario"] == "wireguard", "row"]) == {UNSAID}
    assert scenario_title(table, "wireguard") == UNSAID


def test_a_report_of_kernel_wireguard_sessions_says_kernel_module(tmp_path: Path) -> None:
    results = tmp_path / "results"
    shutil.copytree(LAB_WIREGUARD, results, ignore=shutil.ignore_patterns("figures", "*.md"))
    (fingerprint,) = results.glob(f"*/environments/{ENCRYPTED}.json")
    document = json.loads(fingerprint.read_text())
    document["cni_values"]["wireguard_implementation"] = "kernel"
    fingerprint.write_text(json.dumps(document))
    html = report.write_report(results, html=tmp_path / "r.html").html
    assert html is not None
    text = html.read_text()
    assert f"Scenario: wireguard: {KERNEL}" in text
    assert "wireguard-go)" not in text  # no label says userspace; tool versions may name it
    alts = re.findall(r'alt="([^"]*)"', text)
    assert any(a.startswith(f"Verdict, {KERNEL}: ") for a in alts)


# --------------------------------------------------------------------------------------------
# The words themselves (pure functions)
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("implementations", "words"),
    [
        pytest.param(["kernel"], KERNEL, id="kernel"),
        pytest.param(["wireguard-go", "wireguard-go"], USERSPACE, id="wireguard-go"),
        pytest.param([], UNSAID, id="none-given"),
        pytest.param([""], UNSAID, id="not-recorded"),
        pytest.param(["kernel", "wireguard-go"], UNSAID, id="different"),
        pytest.param(["kernel", ""], UNSAID, id="kernel-and-not-recorded"),
        pytest.param(["kernel or wireguard-go"], UNSAID, id="pooled"),
    ],
)
def test_the_words_name_one_recorded_implementation_or_none(
    implementations: list[str], words: str
) -> None:
    assert feature_words("wireguard", "encryption", "lab", implementations=implementations) == (
        words
    )
    assert scenario_words("wireguard", ["lab"], implementations=implementations) == words


def test_a_clusters_wireguard_is_named_by_its_cni_whatever_is_recorded() -> None:
    assert feature_words("wireguard", "encryption", "kube", implementations=["kernel"]) == ""
    assert scenario_words("wireguard", ["kube"], implementations=["wireguard-go"]) == "wireguard"
    assert scenario_words("wireguard", ["lab", "kube"], implementations=["kernel"]) == "wireguard"


@pytest.mark.parametrize(
    ("values", "recorded"),
    [
        pytest.param([{"wireguard_implementation": "kernel"}], "kernel", id="kernel"),
        pytest.param(
            [{"wireguard_implementation": "wireguard-go"}] * 2, "wireguard-go", id="same-twice"
        ),
        pytest.param(
            [{"wireguard_implementation": "wireguard-go"}, {"wireguard_implementation": "kernel"}],
            "kernel or wireguard-go",
            id="different",
        ),
        pytest.param(
            [{"wireguard_implementation": "kernel"}, {"encryption": "wireguard"}],
            "",
            id="one-not-recorded",
        ),
        pytest.param([{"encryption": ""}], "", id="no-encryption"),
        pytest.param([], "", id="no-fingerprint"),
    ],
)
def test_recorded_implementation_reads_the_fingerprints(
    values: list[dict[str, str]], recorded: str
) -> None:
    fingerprints = [{"backend": "lab", "cni_values": json.dumps(v)} for v in values]
    assert recorded_implementation(fingerprints) == recorded


def test_a_missing_value_in_a_table_names_no_implementation() -> None:
    # A verdict read back from a file has NaN where nothing was recorded: it claims neither.
    assert feature_words("wireguard", "encryption", "lab", implementations=[math.nan]) == (
        feature_words("wireguard", "encryption", "lab", implementations=[""])
    )
    assert "kernel" not in feature_words(
        "wireguard", "encryption", "lab", implementations=["kernel", None]
    )
