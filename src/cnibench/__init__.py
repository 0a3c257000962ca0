"""cnibench: benchmark Kubernetes CNI plugins and what each feature costs.

The notebook entry points are available here::

    import cnibench
    latest = cnibench.session_ids("results/")[-1:]
    df = cnibench.load_results("results/", sessions=latest)
    runs = df[(df.condition == "gateway-on") & (df.metric == "throughput")]
    cnibench.stats.summarize_runs(runs.value)  # one condition of one CNI, never a pool

A benchmark runs from a notebook through the one door the CLI and the plugin use too::

    config = cnibench.SessionConfig(cluster="lab", cnis=("routed",))
    with cnibench.BenchSession(config) as session:
        outcome = session.run(cnibench.plan_conditions(session.scenarios, ["egress"]))

(``examples/notebook.py`` is the whole example.) They are loaded on first use, so that
``import cnibench`` (which pytest does for the plugin in every session) does not pull in
pandas and scipy.
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
    if name in {"BenchSession", "SessionConfig", "plan_conditions"}:
        # Not imported for type checkers above: the layers below the session import this
        # package, and import-linter would read that as their importing the session.
        return getattr(importlib.import_module("cnibench.session"), name)
    raise AttributeError(f"module 'cnibench' has no attribute {name!r}")
