"""The egress scenario times the gateway's takeover at every set-up: from the gateway's set-up
call returning until the external host's source echo names another address than the client
node's, read by the effect probe every 10 ms from before the call. With ``--interleave`` each
round sets the gateway up again, and each round's first run carries
``egress_gateway_takeover_time``, its leaks (requests that still left from the client node's
address) and the probe's log; the gateway-off condition has nothing to time."""

from __future__ import annotations

import json
from pathlib import Path

from cnibench import load_results
from cnibench.tools.effect_probe import parse_effect_probe
from suite_support import run_cnibench

CONDITIONS = ("gateway-off", "gateway-on")


def test_an_interleaved_egress_condition_times_the_takeover_in_every_round(
    lab_backend: object, tmp_path: Path
) -> None:
    results = tmp_path / "results"
    done = run_cnibench(
        "run", "--cluster", "lab", "--cni", "routed", "--scenario", "egress",
        "--profile", "smoke", "--interleave", "--results-dir", results,
        *(arg for cid in CONDITIONS for arg in ("--condition", cid)),
        timeout=900,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    frame = load_results(results)
    assert frame.drop_duplicates("run_id").groupby("condition").size().to_dict() == {
        cid: 2 for cid in CONDITIONS
    }
    timed = frame[frame["metric"] == "egress_gateway_takeover_time"]
    assert timed.groupby("condition").size().to_dict() == {"gateway-on": 2}
    assert timed["run_id"].is_unique
    assert (timed["unit"] == "s").all()
    # The lab loads its rules before the call returns: far below the old probe's 1 s step.
    assert timed["value"].between(0.0, 1.0).all(), timed["value"].tolist()
    leaks = frame[frame["metric"] == "egress_gateway_takeover_time_leaks"]
    assert sorted(leaks["run_id"]) == sorted(timed["run_id"])
    assert (leaks["value"] == 0).all(), leaks["value"].tolist()
    for session, run_id in zip(timed["session_id"], timed["run_id"], strict=True):
        raw = results / session / "raw" / run_id / "egress_gateway_takeover_time-probe.txt"
        log = parse_effect_probe(raw.read_text())
        assert sorted(log.intervals())[len(log.intervals()) // 2] <= 0.020
        on, off = (_proof(results / session, cid) for cid in ("gateway-on", "gateway-off"))
        assert int(str(on["takeover_probe_saw_old_state"])) >= 1, on
        # Before the call the echo named the client node (the source with the gateway off),
        # then the gateway (the source the runs were proven to leave from): nothing else.
        answered = {a.answered_by for a in log.attempts if a.status == 200}
        assert answered == {off["source_expected"], on["source_expected"]}, (answered, on, off)


def _proof(session: Path, condition: str) -> dict[str, object]:
    (path,) = session.glob(f"verification-egress-*-{condition}.json")
    proof: dict[str, object] = json.loads(path.read_text())
    return proof
