"""A benchmark session: options validated once, a backend chosen, clusters pooled, results stored.

The CLI (``cnibench run``) and the pytest plugin are thin shells over :class:`BenchSession`; both
accept the same options and produce the same results. One module per job: :mod:`.config` (what
was asked), :mod:`.choice` (the backend, through :mod:`cnibench.backends.choose`: no concrete
backend is imported here), :mod:`.options` (the option table both front ends share),
:mod:`.plan` (what runs, in which order) and :mod:`.run` (the session). Everything is imported
from here.
"""

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
