"""Helpers shared by the benchmark-suite tests (a plain module they import)."""

from __future__ import annotations


def recorded(result):
    """The records the results store holds for ``result``'s runs (read back from disk)."""
    from cnibench import load_results

    frame = load_results(result.session_dir)
    return frame[frame.run_id.isin([run.run_id for run in result.runs])]
