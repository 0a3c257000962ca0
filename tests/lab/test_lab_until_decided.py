"""``cnibench run --until-decided`` on a REAL lab session: rounds are added at the planned looks
to the conditions whose contrasts are undecided, every run records the looks planned, and the
verdict of the results tests at 5 % over that number and agrees with where the session stopped.

The lab egress scenario on vxlan, smoke profile (2 rounds), ``--max-runs 4``: looks after 2
and 4 rounds. Two rounds cannot decide a paired contrast at 5 %/2 (a t quantile of about 25
with one degree of freedom), so the session must go on past the first look; what the second
look decides depends on the machine, and the test holds the session to its own record of it.
(About a minute: it is ``measured``, so it runs alone, on the critical path of CI.)
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from lab_support import unavailable

from cnibench import load_results, report
from suite_support import run_cnibench

pytestmark = [pytest.mark.slow, pytest.mark.measured]

RUN_TIMEOUT_S = 900
SCHEDULE = [2, 4]


@pytest.fixture(scope="module")
def until_session(tmp_path_factory: pytest.TempPathFactory) -> dict[str, object]:
    if os.geteuid() != 0:
        unavailable("the lab backend needs root")
    results = tmp_path_factory.mktemp("until-decided") / "results"
    run = run_cnibench(
        "run",
        "--cluster",
        "lab",
        "--cni",
        "vxlan",
        "--scenario",
        "egress",
        "--profile",
        "smoke",
        "--until-decided",
        "--max-runs",
        SCHEDULE[-1],
        "--results-dir",
        results,
        timeout=RUN_TIMEOUT_S,
    )
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    (session,) = [p for p in results.iterdir() if p.is_dir()]
    design = json.loads((session / "design.json").read_text())
    # The looks are said as the session goes, on its progress console (stderr).
    return {"results": results, "design": design, "output": run.stdout + run.stderr}


def test_the_session_looks_at_the_planned_rounds_and_says_where_it_stopped(until_session):
    (group,) = until_session["design"]["looks"]
    assert group["schedule"] == SCHEDULE
    looks = group["looks"]
    assert [look["rounds"] for look in looks] == SCHEDULE[: len(looks)]
    # The first look cannot decide a paired contrast at 5 %/2 from 2 rounds.
    assert looks[0]["undecided"], looks[0]
    assert len(looks) >= 2
    assert group["stopped"]
    assert (
        f"until decided, looked after {', '.join(str(x) for x in SCHEDULE[: len(looks)])}"
        in (until_session["output"])
    )


def test_only_undecided_conditions_got_more_rounds_and_runs_record_the_looks(until_session):
    df = load_results(Path(str(until_session["results"])))
    ok = df[(df["status"] == "ok") & (df["metric"] == "throughput")]
    assert (df["looks"] == len(SCHEDULE)).all()
    looks = until_session["design"]["looks"][0]["looks"]
    rounds = ok.groupby("condition")["repetition"].nunique().to_dict()
    for condition, n in rounds.items():
        # A condition ran the rounds up to the look after the last one that found it open.
        open_at = [look["rounds"] for look in looks if condition in look["undecided"]]
        following = min(SCHEDULE.index(max(open_at)) + 1, len(SCHEDULE) - 1) if open_at else 0
        assert n == SCHEDULE[following], (condition, n, looks)


def test_the_verdict_tests_each_look_at_five_percent_over_the_looks(until_session):
    df = load_results(Path(str(until_session["results"])))
    table = report.verdict(df)
    tested = table[table["p_value"].notna()]
    assert not tested.empty
    assert (tested["looks"] == len(SCHEDULE)).all()
    assert (tested["call_level"] >= 1 - 0.05 / len(SCHEDULE) - 1e-12).all()
    group = until_session["design"]["looks"][0]
    if group["stopped"].startswith("every contrast decided"):
        # Where the session found every contrast decided, its report agrees.
        feature = tested[tested["kind"] == "feature"]
        decided = feature["significant"] | feature["equivalent"] | (feature["saturated"] > 0)
        assert decided.all(), feature[["verdict"]].to_string()
