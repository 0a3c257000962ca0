"""The policy scenario times the CNI's enforcement at every set-up: with ``--interleave`` each
round applies the policy again, and each round's first run carries ``policy_enforcement_time``
(only the run numbered 0 did before, so the kind study had n = 1 of it per condition), its
``policy_enforcement_time_leaks`` and the effect probe's log among its raw files; and the way
back, ``policy_removal_time``: from the delete call until the pod outside the policy is answered
again (the policy then goes on again for the runs, which the probe matrix proves)."""

from __future__ import annotations

import json
from pathlib import Path

from cnibench import load_results
from cnibench.tools.effect_probe import parse_effect_probe
from suite_support import run_cnibench

ON = "on-cross-node-iptables-r0-c1-new-connections"
CONDITIONS = ("off-cross-node-c1", ON)


def test_an_interleaved_policy_condition_times_the_enforcement_in_every_round(
    lab_backend: object, tmp_path: Path
) -> None:
    results = tmp_path / "results"
    done = run_cnibench(
        "run", "--cluster", "lab", "--cni", "routed", "--scenario", "policy",
        "--rules", "0", "--clients", "1", "--engine", "iptables", "--profile", "smoke",
        "--interleave", "--results-dir", results,
        *(arg for cid in CONDITIONS for arg in ("--condition", cid)),
        timeout=900,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    frame = load_results(results)
    runs = frame.drop_duplicates("run_id").groupby("condition").size().to_dict()
    assert runs == {cid: 2 for cid in CONDITIONS}
    timed = frame[frame["metric"] == "policy_enforcement_time"]
    assert timed.groupby("condition").size().to_dict() == {ON: 2}  # policy off: nothing to time
    assert timed["run_id"].is_unique
    assert (timed["value"] >= 0).all(), timed["value"].tolist()
    # The lab's rules hold once loaded: far below the old probe's 1 s step.
    assert (timed["value"] < 1.0).all(), timed["value"].tolist()
    leaks = frame[frame["metric"] == "policy_enforcement_time_leaks"]
    assert sorted(leaks["run_id"]) == sorted(timed["run_id"])
    assert (leaks["value"] == 0).all(), leaks["value"].tolist()
    for session, run_id in zip(timed["session_id"], timed["run_id"], strict=True):
        log = results / session / "raw" / run_id / "policy_enforcement_time-probe.txt"
        spacing = parse_effect_probe(log.read_text()).intervals()
        assert sorted(spacing)[len(spacing) // 2] <= 0.020
    removal = frame[frame["metric"] == "policy_removal_time"]
    assert sorted(removal["run_id"]) == sorted(timed["run_id"])  # with the enforcement's run
    assert (removal["value"] >= 0).all(), removal["value"].tolist()
    assert (removal["value"] < 1.0).all(), removal["value"].tolist()
    for session, run_id in zip(removal["session_id"], removal["run_id"], strict=True):
        log = results / session / "raw" / run_id / "policy_removal_time-probe.txt"
        attempts = parse_effect_probe(log.read_text())
        assert sorted(attempts.intervals())[len(attempts.intervals()) // 2] <= 0.020
    # The runs measured the policy on again: each set-up's proof (its probe matrix, taken
    # after the removal and the second apply) holds the pod outside it blocked.
    proofs = [
        json.loads(path.read_text()) for path in results.glob(f"*/verification-policy-*{ON}*.json")
    ]
    assert proofs
    for proof in proofs:
        assert proof["removal_probe_saw_old_state"] >= 1, proof  # blocked before the delete
        assert proof["probes_ok"] == proof["probes"], proof
    assert frame[frame["condition"] == ON]["verified"].all()
