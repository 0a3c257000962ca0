"""What every committed kind study answers is about the CNI (issue 48): recomputed from its
records, its verdict

* compares a Service proxy (kube-proxy's modes, Cilium's eBPF replacement) only on traffic
  sent to a Service, never on pod-to-pod traffic that no proxy handles;
* compares one option of a configuration only against the configuration without it, and
  states no number where the configurations differ in more (its line says in what);
* makes no call (a cost, or "same within") from a contrast with a run that saturated the
  host's CPU, whatever the data say.
"""

from __future__ import annotations

import functools
import json
import math
import warnings
from pathlib import Path

import pandas as pd
import pytest

from cnibench import report
from cnibench.backends.base import ClusterSpec
from cnibench.report.data import saturated_runs
from cnibench.results import load_environments, load_results

ROOT = Path(__file__).resolve().parents[2]
STUDIES = sorted((ROOT / "docs" / "results").glob("kind-*"))


@functools.cache
def _study(name: str) -> tuple[pd.DataFrame, pd.DataFrame]:
    directory = ROOT / "docs" / "results" / name
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        runs = load_results(directory, sessions="all")
        table = report.verdict(runs, reference="flannel", environments=load_environments(directory))
    return runs, table


def _compared(table: pd.DataFrame) -> pd.DataFrame:
    estimates = pd.to_numeric(table["estimate"], errors="coerce")
    return table[estimates.map(math.isfinite) & ~table["verdict"].str.contains(" not compared: ")]


@pytest.mark.parametrize("study", [s.name for s in STUDIES])
def test_a_service_proxy_is_compared_only_on_traffic_to_a_service(study: str) -> None:
    _, table = _study(study)
    proxies = _compared(table[table["feature"].astype(str).str.startswith("service proxy")])
    targets = {json.loads(str(p)).get("target") for p in proxies["treatment_parameters"]}
    assert targets <= {"service", "nodeport"}, targets


@pytest.mark.parametrize("study", [s.name for s in STUDIES])
def test_an_option_is_compared_only_against_the_same_configuration_without_it(
    study: str,
) -> None:
    _, table = _study(study)
    options = _compared(table[table["kind"] == "option"])
    for cni, control in set(zip(options["cni"], options["control_cni"], strict=True)):
        mine, theirs = ClusterSpec.from_label(cni), ClusterSpec.from_label(control)
        assert mine.cni == theirs.cni, (cni, control)
        differing = {
            key
            for key in set(mine.options) | set(theirs.options)
            if mine.options.get(key) != theirs.options.get(key)
        }
        assert len(differing) == 1, (cni, control, differing)


@pytest.mark.parametrize("study", [s.name for s in STUDIES])
def test_no_call_comes_from_a_contrast_with_a_saturated_run(study: str) -> None:
    runs, table = _study(study)
    flagged = saturated_runs(runs)
    sides = set(zip(flagged["cni"], flagged["scenario"], flagged["condition"], strict=True))
    for row in table.itertuples():
        touched = {
            (row.cni, row.scenario, row.treatment),
            (row.control_cni, row.scenario, row.control),
        } & sides
        if touched:
            assert not row.significant, row.verdict
            assert not row.equivalent, row.verdict
