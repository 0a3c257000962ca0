"""A benchmark session: options validated once, a backend chosen, clusters pooled, results stored.

The CLI (``cnibench run``) and the pytest plugin are thin shells over :class:`BenchSession`; both
accept the same options and produce the same results. This is the only layer that knows the
concrete backends.
"""

from __future__ import annotations

import shutil
import signal
import subprocess
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType

from cnibench.backends.base import Backend
from cnibench.errors import ConfigError
from cnibench.results import ResultsStore
from cnibench.scenarios import Condition, Scenario
from cnibench.scenarios.profiles import Profile, profile_named
from cnibench.scenarios.runner import ClusterPool, ConditionResult, ProgressCallback, Runner

__all__ = [
    "CLUSTER_CHOICES",
    "LAB_PROFILES",
    "BenchSession",
    "SessionConfig",
    "container_engine",
    "select_backend",
    "validate_cnis",
]

CLUSTER_CHOICES = ("auto", "lab", "kind", "aks", "existing")
LAB_PROFILES = ("routed", "vxlan")
"""Datapath profiles the lab offers as ``--cni``."""


@dataclass(frozen=True)
class SessionConfig:
    """Options of a benchmark session (shared by ``cnibench run`` and the pytest plugin).

    Attributes
    ----------
    cluster:
        One of :data:`CLUSTER_CHOICES`.
    cnis:
        CNIs (kube) or datapath profiles (lab); empty means the backend's defaults.
    profile:
        Repetitions and durations, with ``--runs``/``--duration`` already applied.
    results_dir:
        Directory receiving one sub-directory per session.
    keep_cluster:
        Leave clusters running at the end (kube only; labs are always removed).
    recreate_cluster:
        Do not reuse a cached cluster (kube only).
    """

    cluster: str = "auto"
    cnis: tuple[str, ...] = ()
    profile: Profile = field(default_factory=lambda: profile_named("quick"))
    results_dir: Path = Path("results")
    keep_cluster: bool = False
    recreate_cluster: bool = False


def container_engine(timeout: float = 5.0) -> str:
    """Name of a container engine that answers (``docker``/``podman``), or ``""``."""
    for engine in ("docker", "podman"):
        if shutil.which(engine) is None:
            continue
        try:
            done = subprocess.run(
                [engine, "info"], capture_output=True, timeout=timeout, check=False
            )
        except (OSError, subprocess.TimeoutExpired):
            continue
        if done.returncode == 0:
            return engine
    return ""


def select_backend(cluster: str) -> tuple[Backend, str]:
    """The backend for ``--cluster`` and a sentence saying what was picked and why."""
    if cluster not in CLUSTER_CHOICES:
        raise ConfigError(
            f"unknown --cluster {cluster!r}: choose one of {', '.join(CLUSTER_CHOICES)}"
        )
    if cluster == "auto":
        engine = container_engine()
        if engine:
            cluster = "kind"
            reason = f"--cluster auto: {engine} answers, using kind"
        else:
            cluster = "lab"
            reason = "--cluster auto: no container engine answers, using the embedded lab"
    else:
        reason = f"--cluster {cluster}"
    if cluster == "lab":
        from cnibench.backends.lab import LabBackend

        return LabBackend(), reason
    raise ConfigError(
        f"--cluster {cluster} needs the Kubernetes backend, which this version does not have "
        "yet: use --cluster lab"
    )


def validate_cnis(backend: Backend, cnis: Sequence[str]) -> tuple[str, ...]:
    """``cnis`` checked against what ``backend`` offers; its defaults when empty."""
    if backend.name == "lab":
        for cni in cnis:
            if cni not in LAB_PROFILES:
                raise ConfigError(
                    f"unknown --cni {cni!r} for the lab: choose one of {', '.join(LAB_PROFILES)}"
                )
        return tuple(dict.fromkeys(cnis)) or LAB_PROFILES
    return tuple(dict.fromkeys(cnis))


class BenchSession:
    """One benchmark session; use as a context manager so clusters are always torn down.

    SIGTERM is turned into :class:`KeyboardInterrupt` while the session is open, so a
    terminated run cleans up exactly like one interrupted with Ctrl-C.
    """

    def __init__(self, config: SessionConfig, *, progress: ProgressCallback | None = None) -> None:
        self.config = config
        self.backend, self.backend_reason = select_backend(config.cluster)
        self.cnis = validate_cnis(self.backend, config.cnis)
        self.store = ResultsStore(config.results_dir)
        self.pool = ClusterPool(self.backend)
        self.runner = Runner(self.pool, self.store, config.profile, progress=progress)
        self._previous_sigterm: object = None

    def run_condition(self, scenario: Scenario, cni: str, condition: Condition) -> ConditionResult:
        """Run one condition (see :meth:`cnibench.scenarios.runner.Runner.run_condition`)."""
        return self.runner.run_condition(scenario, cni, condition)

    def close(self) -> None:
        """Tear down every cluster of the session."""
        self.pool.teardown()

    @contextmanager
    def _sigterm_as_interrupt(self) -> Iterator[None]:
        def interrupt(signum: int, frame: FrameType | None) -> None:
            raise KeyboardInterrupt(f"signal {signum}")

        try:
            previous = signal.signal(signal.SIGTERM, interrupt)
        except ValueError:  # not the main thread: leave signal handling to the caller
            yield
            return
        try:
            yield
        finally:
            signal.signal(signal.SIGTERM, previous)

    def __enter__(self) -> BenchSession:
        self._guard = self._sigterm_as_interrupt()
        self._guard.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        try:
            self.close()
        finally:
            self._guard.__exit__(None, None, None)
