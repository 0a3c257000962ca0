#!/usr/bin/env bash
# Run chosen points of the interrupt batch (tests/reliability/test_rel_interrupt.py) N times in
# a row and stop at the first failing round: the evidence that a flaky window is closed.
#
#   scripts/repeat-interrupt-points.sh [ROUNDS] [POINTS]
#
# ROUNDS defaults to 20; POINTS (comma-separated indices) to 20,21,22,23,24, the points
# anchored at the end of a run (just after the last run file, and mid-teardown), where a late
# SIGINT once made Python print a KeyboardInterrupt traceback at shutdown. Each round is one
# uninterrupted reference run plus the points, two at a time (about 2 minutes here). Run it
# as root from the repository, with the test environment's Python, e.g.
#   PYTHON=.nox/tests/bin/python scripts/repeat-interrupt-points.sh
set -euo pipefail

rounds=${1:-20}
points=${2:-20,21,22,23,24}
python=${PYTHON:-python}
log_dir=$(mktemp -d)
trap 'rm -rf "$log_dir"' EXIT

for round in $(seq 1 "$rounds"); do
    started=$(date +%s)
    rm -f "$log_dir/summary.json"
    if CNIBENCH_RELIABILITY_POINTS=$points CNIBENCH_RELIABILITY_SUMMARY=$log_dir/summary.json \
        "$python" -m pytest -q -p no:cacheprovider \
        tests/reliability/test_rel_interrupt.py -k "exits_130 or reference" \
        >"$log_dir/round.log" 2>&1; then
        # Where each signal landed (phase) and how the run ended (exit code), from the batch.
        landed=$("$python" -c 'import json, sys
detail = json.load(open(sys.argv[1]))["interrupt"]["detail"]
print(", ".join("%s: %s, exit %s" % (k, v["phase"], v["exit"]) for k, v in sorted(detail.items())))' \
            "$log_dir/summary.json")
        echo "round $round/$rounds passed ($(tail -n 1 "$log_dir/round.log" | tr -d '='), $(( $(date +%s) - started )) s): $landed"
    else
        echo "round $round/$rounds FAILED:"
        tail -n 60 "$log_dir/round.log"
        exit 1
    fi
done
echo "points $points: $rounds rounds in a row passed"
