"""Derive the thresholds of cnibench's outlier flag (``stats.outlier_report``, method "mad").

A run is flagged when its modified z-score (Iglewicz & Hoaglin: ``0.6745 (x - median) / MAD``,
on the logarithms of a positive quantity) exceeds a threshold that depends on the number of
runs, chosen so that a clean normal sample of that size has *any* run flagged with probability
``FAMILY_RATE`` (the Hampel identifier normalised as Davies & Gather 1993 propose). The fixed
3.5 of Iglewicz & Hoaglin flags a run in 29 % / 21 % / 13 % of clean samples at n = 3 / 5 / 10,
because the MAD of a few runs is itself very noisy.

This script prints the table ``stats._HAMPEL_THRESHOLDS`` holds (the 1 - FAMILY_RATE quantile
of the largest modified z-score of ``--samples`` seeded normal samples of each size). It takes
about a minute on a 2-core machine.

References: L. Davies and U. Gather, "The identification of multiple outliers", JASA 88 (1993)
782-792.
"""

from __future__ import annotations

import argparse
import sys

import numpy as np

FAMILY_RATE = 0.04
"""Designed rate: 4 %, so that a simulation of 2000 clean samples still shows <= 5 %."""
SIZES = (*range(3, 31), 35, 40, 50, 60, 80, 100, 150, 200)


def largest_scores(samples: int, n: int, rng: np.random.Generator) -> np.ndarray:
    """Largest |modified z-score| of each of ``samples`` standard normal samples of size n."""
    x = rng.normal(size=(samples, n))
    median = np.median(x, axis=1, keepdims=True)
    deviation = np.abs(x - median)
    mad = np.median(deviation, axis=1, keepdims=True)
    return np.asarray((0.6745 * deviation / mad).max(axis=1))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--samples", type=int, default=400_000, metavar="N", help="per size")
    parser.add_argument("--seed", type=int, default=20261127, help="random seed")
    options = parser.parse_args(argv)
    rng = np.random.default_rng(options.seed)
    print(
        f"# 1 - {FAMILY_RATE} quantile of the largest |modified z-score|,"
        f" {options.samples} normal samples per size, seed {options.seed}"
    )
    print("_HAMPEL_THRESHOLDS: dict[int, float] = {")
    for n in SIZES:
        # In blocks, so that n = 200 does not need 600 MB at once.
        block = max(1000, 4_000_000 // n)
        scores = np.concatenate(
            [
                largest_scores(min(block, options.samples - start), n, rng)
                for start in range(0, options.samples, block)
            ]
        )
        print(f"    {n}: {float(np.quantile(scores, 1.0 - FAMILY_RATE)):.3f},", flush=True)
    print("}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
