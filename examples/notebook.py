"""cnibench from a notebook: the session ``cnibench run`` and the pytest plugin drive, through
the same one door, :meth:`cnibench.BenchSession.run`; then the results as a DataFrame.

Each paragraph is a notebook cell. It runs on the embedded lab (root and network namespaces);
``tests/lab/test_lab_one_door.py`` runs this file as written.
"""

import cnibench
from cnibench.scenarios.profiles import profile_named

config = cnibench.SessionConfig(
    cluster="lab", cnis=("routed",), profile=profile_named("smoke"), results_dir="results"
)
with cnibench.BenchSession(config) as session:  # the lab is torn down when the cell ends
    planned = cnibench.plan_conditions(session.scenarios, ["egress"])
    outcome = session.run(planned, progress=lambda event: print(event.kind.value, event.text))
print(*outcome.lines(), sep="\n")  # skips, conditions not proven, failed runs: none, we hope
print("failed" if outcome.failed else "measured", outcome.session_dir)

df = cnibench.load_results(outcome.session_dir)  # this session only: one row per (run, metric)
ok = df[(df.status == "ok") & (df.metric == "throughput")]
summaries = {
    condition: cnibench.stats.summarize_runs(runs.value)  # geometric mean and 95 % CI
    for condition, runs in ok.groupby("condition")
}
