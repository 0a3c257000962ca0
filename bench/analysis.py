"""Speed of cnibench's traffic-split statistics against a plain Python loop, in one run.

The split scenario logs one record per request: when it completed (seconds) and which backend
answered. A long ``paper``-profile run at high load reaches millions of records, and the report
needs the per-backend splitting error plus the share of every backend in every 5 s window.

This script generates ``--records`` synthetic records (default 10 million; timestamps spread over
120 s, backends drawn 60/40 from ``v1``/``v2`` with a fixed seed), then computes the same numbers
twice on the same records and prints both times and the speed-up:

* cnibench: ``stats.windowed_shares`` (vectorised) and ``stats.splitting_error`` on the totals;
* plain Python: one loop over the records filling a dict of counts and a dict of per-window
  dicts, then the same share, error and distance arithmetic in Python.

The records are held as NumPy arrays for cnibench and as Python lists for the loop (each in its
natural form; building the lists is not timed). It checks that both paths counted exactly the
same requests per backend and per window and agree on the errors, and exits 1 if they do not.
Whether cnibench met its target (under 3 s for 10 million records) is printed, not enforced:
the machine is shared.

Run ``python bench/analysis.py --records 100000`` for a quick look.
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from cnibench import stats

WEIGHTS = {"v1": 60.0, "v2": 40.0}
TARGET_SECONDS = 3.0
TARGET_RECORDS = 10_000_000
EPOCH = 1_700_000_000.0  # Unix-time origin, so the window arithmetic sees realistic magnitudes


@dataclass(frozen=True)
class SplitNumbers:
    """What both paths compute: counts, per-window counts, errors and distances."""

    counts: dict[str, int]
    window_counts: dict[tuple[float, str], int]
    error: dict[str, float]
    window_total_variation: dict[float, float]


def synthetic_records(
    n: int, *, duration: float, seed: int
) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.str_]]:
    """Request completion times (Unix seconds, sorted) and answering backends, drawn 60/40."""
    rng = np.random.default_rng(seed)
    timestamps = EPOCH + np.sort(rng.uniform(0.0, duration, size=n))
    names = np.array(list(WEIGHTS))
    probabilities = np.array(list(WEIGHTS.values())) / sum(WEIGHTS.values())
    backends = names[rng.choice(names.size, size=n, p=probabilities)]
    return timestamps, backends


def with_cnibench(
    timestamps: npt.NDArray[np.float64], backends: npt.NDArray[np.str_], *, window: float
) -> SplitNumbers:
    """The library path: one vectorised pass for the windows, totals from the window counts."""
    frame = stats.windowed_shares(timestamps, backends, window=window, weights=WEIGHTS)
    totals = frame.groupby("backend")["count"].sum()
    counts = {str(name): int(count) for name, count in totals.items()}
    result = stats.splitting_error(counts, WEIGHTS)
    occupied = frame[frame["count"] > 0]
    window_counts = {
        (float(start), str(name)): int(count)
        for start, name, count in zip(
            occupied["window_start"], occupied["backend"], occupied["count"], strict=True
        )
    }
    per_window = frame.groupby("window_start")["total_variation"].first()
    return SplitNumbers(
        counts=counts,
        window_counts=window_counts,
        error=dict(result.error),
        window_total_variation={float(start): float(tv) for start, tv in per_window.items()},
    )


def with_plain_python(
    timestamps: list[float], backends: list[str], *, window: float
) -> SplitNumbers:
    """The straightforward path a script would take: dicts filled in one Python loop."""
    first = min(timestamps)
    counts: dict[str, int] = {}
    per_window: dict[int, dict[str, int]] = {}
    for stamp, backend in zip(timestamps, backends, strict=True):
        counts[backend] = counts.get(backend, 0) + 1
        # Same floating-point steps as the vectorised path (subtract, divide, floor).
        index = math.floor((stamp - first) / window)
        bucket = per_window.get(index)
        if bucket is None:
            bucket = per_window[index] = {}
        bucket[backend] = bucket.get(backend, 0) + 1

    weight_total = sum(WEIGHTS.values())
    reference = {name: weight / weight_total for name, weight in WEIGHTS.items()}
    total = sum(counts.values())
    error = {name: counts.get(name, 0) / total - reference[name] for name in WEIGHTS}
    window_counts: dict[tuple[float, str], int] = {}
    window_total_variation: dict[float, float] = {}
    for index in sorted(per_window):
        bucket = per_window[index]
        in_window = sum(bucket.values())
        start = index * window
        for name, count in bucket.items():
            window_counts[(start, name)] = count
        window_total_variation[start] = 0.5 * sum(
            abs(bucket.get(name, 0) / in_window - reference[name]) for name in WEIGHTS
        )
    return SplitNumbers(counts, window_counts, error, window_total_variation)


def disagreements(library: SplitNumbers, loop: SplitNumbers) -> list[str]:
    """What the two paths did not compute identically (counts) or equally (floats)."""
    problems = []
    if library.counts != loop.counts:
        problems.append(f"backend counts differ: {library.counts} vs {loop.counts}")
    if library.window_counts != loop.window_counts:
        problems.append("per-window counts differ")
    if library.error.keys() != loop.error.keys() or any(
        not math.isclose(library.error[name], loop.error[name], rel_tol=0.0, abs_tol=1e-12)
        for name in library.error
    ):
        problems.append(f"splitting errors differ: {library.error} vs {loop.error}")
    if library.window_total_variation.keys() != loop.window_total_variation.keys() or any(
        not math.isclose(value, loop.window_total_variation[start], abs_tol=1e-12)
        for start, value in library.window_total_variation.items()
    ):
        problems.append("per-window total variation differs")
    return problems


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument(
        "--records", type=int, default=TARGET_RECORDS, metavar="N", help="request records"
    )
    parser.add_argument(
        "--duration", type=float, default=120.0, metavar="S", help="span of the timestamps (s)"
    )
    parser.add_argument("--window", type=float, default=5.0, metavar="S", help="window (s)")
    parser.add_argument("--seed", type=int, default=20240601, help="random seed")
    # `nox -s perf -- ...` hands the same arguments to every bench script: ignore the others'.
    options, ignored = parser.parse_known_args(argv)
    if ignored:
        print(f"analysis.py: ignoring arguments meant for other scripts: {ignored}")
    if options.records < 1:
        parser.error(f"--records must be at least 1, got {options.records}")

    timestamps, backends = synthetic_records(
        options.records, duration=options.duration, seed=options.seed
    )
    stamp_list, backend_list = timestamps.tolist(), backends.tolist()
    # Warm-up on a few records so one-off costs (lazy imports, first calls) are not timed.
    with_cnibench(timestamps[:1000], backends[:1000], window=options.window)

    started = time.perf_counter()
    library = with_cnibench(timestamps, backends, window=options.window)
    library_seconds = time.perf_counter() - started

    started = time.perf_counter()
    loop = with_plain_python(stamp_list, backend_list, window=options.window)
    loop_seconds = time.perf_counter() - started

    problems = disagreements(library, loop)
    print(
        f"split analysis of {options.records:,} records "
        f"({options.duration:g} s, {len(library.window_total_variation)} windows of "
        f"{options.window:g} s, weights {WEIGHTS})"
    )
    print(f"  cnibench (numpy arrays):    {library_seconds:8.3f} s")
    print(f"  plain Python (lists+dicts): {loop_seconds:8.3f} s")
    print(f"  speed-up: {loop_seconds / library_seconds:.1f}x")
    print(f"  counts: {library.counts}; splitting error: {library.error}")
    print(f"  both paths agree: {'yes' if not problems else 'NO'}")
    for problem in problems:
        print(f"    {problem}")
    if options.records >= TARGET_RECORDS:
        met = library_seconds < TARGET_SECONDS
        print(
            f"  target (< {TARGET_SECONDS:g} s for {TARGET_RECORDS:,} records): "
            f"{'met' if met else 'NOT met'}"
        )
    else:
        print(
            f"  target (< {TARGET_SECONDS:g} s for {TARGET_RECORDS:,} records): not checked "
            f"with {options.records:,} records"
        )
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
