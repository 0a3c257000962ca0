"""A benchmark session: options validated once, a backend chosen, clusters pooled, results stored.

The CLI (``cnibench run``) and the pytest plugin are thin shells over :class:`BenchSession`; both
accept the same options and produce the same results. One module per job: :mod:`.config` (what
was asked), :mod:`.choice` (the backend, through :mod:`cnibench.backends.choose`: no concrete
backend is imported here), :mod:`.options` (the option table both front ends share),
:mod:`.plan` (what runs, in which order) and :mod:`.run` (the session). Everything is imported
from here.

Each name is imported from its module on first use (:mod:`cnibench._lazy`): the option
table, which the CLI's parser and the pytest plugin need, comes without the statistics that
running a session loads.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from cnibench._lazy import lazy_exports

if TYPE_CHECKING:
    from cnibench.session.choice import (
        BackendChoice,
        choose_backend,
        choose_cluster,
        container_engine,
        select_backend,
        validate_cnis,
    )
    from cnibench.session.config import (
        CLUSTER_CHOICES,
        DEFAULT_PROFILE,
        LAB_DATAPATHS,
        ClusterChoice,
        CniRequest,
        SessionConfig,
    )
    from cnibench.session.options import (
        SESSION_OPTIONS,
        add_scenario_options,
        add_session_options,
        session_config,
    )
    from cnibench.session.plan import (
        LONE_CONDITION,
        SEQUENTIAL_ASKED,
        GroupDesign,
        PlannedCondition,
        PlannedRun,
        RunDesign,
        RunOrder,
        interleaved_rounds,
        plan_conditions,
        run_design,
    )
    from cnibench.session.run import (
        BenchSession,
        EventKind,
        ProgressEvent,
        SessionOutcome,
        Skipped,
    )

__all__ = [
    "CLUSTER_CHOICES",
    "DEFAULT_PROFILE",
    "LAB_DATAPATHS",
    "LONE_CONDITION",
    "SEQUENTIAL_ASKED",
    "SESSION_OPTIONS",
    "BackendChoice",
    "BenchSession",
    "ClusterChoice",
    "CniRequest",
    "EventKind",
    "GroupDesign",
    "PlannedCondition",
    "PlannedRun",
    "ProgressEvent",
    "RunDesign",
    "RunOrder",
    "SessionConfig",
    "SessionOutcome",
    "Skipped",
    "add_scenario_options",
    "add_session_options",
    "choose_backend",
    "choose_cluster",
    "container_engine",
    "interleaved_rounds",
    "plan_conditions",
    "run_design",
    "select_backend",
    "session_config",
    "validate_cnis",
]

_MODULE_OF = {
    "BackendChoice": "choice",
    "choose_backend": "choice",
    "choose_cluster": "choice",
    "container_engine": "choice",
    "select_backend": "choice",
    "validate_cnis": "choice",
    "CLUSTER_CHOICES": "config",
    "DEFAULT_PROFILE": "config",
    "LAB_DATAPATHS": "config",
    "ClusterChoice": "config",
    "CniRequest": "config",
    "SessionConfig": "config",
    "SESSION_OPTIONS": "options",
    "add_scenario_options": "options",
    "add_session_options": "options",
    "session_config": "options",
    "LONE_CONDITION": "plan",
    "SEQUENTIAL_ASKED": "plan",
    "GroupDesign": "plan",
    "PlannedCondition": "plan",
    "PlannedRun": "plan",
    "RunDesign": "plan",
    "RunOrder": "plan",
    "interleaved_rounds": "plan",
    "plan_conditions": "plan",
    "run_design": "plan",
    "BenchSession": "run",
    "EventKind": "run",
    "ProgressEvent": "run",
    "SessionOutcome": "run",
    "Skipped": "run",
}

__getattr__ = lazy_exports(__name__, _MODULE_OF)
