"""cnibench: benchmark Kubernetes CNI plugins and what each feature costs.

The notebook entry points are available here::

    import cnibench
    df = cnibench.load_results("results/")
    cnibench.stats.confidence_interval(df.value)

They are loaded on first use, so that ``import cnibench`` (which pytest does for the plugin in
every session) does not pull in pandas and scipy.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from cnibench import errors, stats
    from cnibench.results import load_results

__all__ = ["__version__", "errors", "load_results", "stats"]

__version__ = "0.1.0"


def __getattr__(name: str) -> Any:
    if name in {"errors", "stats"}:
        return importlib.import_module(f"cnibench.{name}")
    if name == "load_results":
        return importlib.import_module("cnibench.results").load_results
    raise AttributeError(f"module 'cnibench' has no attribute {name!r}")
