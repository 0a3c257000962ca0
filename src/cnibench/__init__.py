"""cnibench: benchmark Kubernetes CNI plugins and what each feature costs.

The notebook entry points are available here::

    import cnibench
    latest = cnibench.session_ids("results/")[-1:]
    df = cnibench.load_results("results/", sessions=latest)
    runs = df[(df.condition == "gateway-on") & (df.metric == "throughput")]
    cnibench.stats.summarize_runs(runs.value)  # one condition of one CNI, never a pool

They are loaded on first use, so that ``import cnibench`` (which pytest does for the plugin in
every session) does not pull in pandas and scipy.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from cnibench import errors, stats
    from cnibench.results import load_results, session_ids

__all__ = ["__version__", "errors", "load_results", "session_ids", "stats"]

__version__ = "0.1.0"


def __getattr__(name: str) -> Any:
    if name in {"errors", "stats"}:
        return importlib.import_module(f"cnibench.{name}")
    if name in {"load_results", "session_ids"}:
        return getattr(importlib.import_module("cnibench.results"), name)
    raise AttributeError(f"module 'cnibench' has no attribute {name!r}")
