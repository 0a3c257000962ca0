"""Which backend a session runs on, chosen once from what was asked, and its ``--cni`` values
checked against it (:func:`choose_backend`). The concrete backends are
:mod:`cnibench.backends.choose`'s to make; each validates and preflights its own requests."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from cnibench.backends import choose
from cnibench.backends.base import Backend, ClusterSpec, NodePins
from cnibench.errors import ConfigError
from cnibench.session.config import ClusterChoice, CniRequest, SessionConfig


def container_engine(timeout: float = 5.0) -> str:
    """Name of a container engine that answers (``docker``/``podman``), or ``""``."""
    return choose.container_engine(timeout=timeout)


def choose_cluster(
    cluster: ClusterChoice, cnis: CniRequest, *, engine: Callable[[], str] | None = None
) -> tuple[ClusterChoice, str]:
    """Which ``--cluster`` serves ``cnis``, and a sentence saying why: the backends' own rule
    (:func:`cnibench.backends.choose.choose_cluster`, ``auto`` included), asked once per
    session; ``engine`` (default :func:`container_engine`) is called at most once.

    Raises
    ------
    cnibench.errors.ConfigError
        As :func:`cnibench.backends.choose.choose_cluster`.
    """
    return choose.choose_cluster(cluster, cnis.specs, engine=engine or container_engine)


def select_backend(
    cluster: ClusterChoice,
    cnis: CniRequest | None = None,
    *,
    keep_cluster: bool = False,
    recreate_cluster: bool = False,
    engine: Callable[[], str] | None = None,
    nodes: NodePins | None = None,
    image_registry: str = "",
) -> tuple[Backend, str]:
    """The backend for ``--cluster`` and ``cnis`` (see :func:`choose_cluster`) and a sentence
    saying what was picked and why. Only the chosen backend's package is imported.

    Raises
    ------
    cnibench.errors.ConfigError
        As :func:`choose_cluster`; ``nodes`` (``--nodes``) on the lab, which has no
        Kubernetes nodes to name.
    """
    cluster, reason = choose_cluster(cluster, cnis or CniRequest(), engine=engine)
    backend = choose.make_backend(
        cluster,
        keep_cluster=keep_cluster,
        recreate_cluster=recreate_cluster,
        nodes=nodes,
        image_registry=image_registry,
    )
    return backend, reason


def validate_cnis(backend: Backend, cnis: CniRequest) -> tuple[ClusterSpec, ...]:
    """The session's CNIs: ``cnis`` checked against what ``backend`` offers, names and
    options, the one check of ``--cni`` values (:func:`choose_backend` makes it once per
    session; :meth:`BenchSession.plan` once for a CNI only a ``--scenario`` item names). The
    specs are ``cnis``'s own, not parsed again; the backend's defaults when it is empty.

    On the lab nothing of the kube backend is imported unless a name is not a datapath (then
    only to say whether it is a Kubernetes CNI or unknown).

    Raises
    ------
    cnibench.errors.ConfigError
        One line naming the value and what ``backend`` offers instead.
    """
    choose.check_names(cnis.specs, backend=backend.name)
    return backend.validate(cnis.specs)


@dataclass(frozen=True)
class BackendChoice:
    """What :func:`choose_backend` decided for a session, once: the backend, why, and the
    session's CNIs, checked against it (the specs parsed from ``--cni``, or the backend's
    defaults)."""

    backend: Backend
    reason: str
    specs: tuple[ClusterSpec, ...]

    @property
    def cnis(self) -> tuple[str, ...]:
        """The session's CNIs as results record them (each spec's ``--cni`` label)."""
        return tuple(spec.label for spec in self.specs)


def choose_backend(
    config: SessionConfig, *, engine: Callable[[], str] | None = None
) -> BackendChoice:
    """The backend of a session and its checked CNIs, before anything is created: the
    backend chosen from the request (:func:`choose_cluster`), ``--cni`` checked against it
    (:func:`validate_cnis`), ``--reference`` checked against those CNIs, and on kind with the
    offline image set the build checked (:func:`_require_offline_build`).

    Both front ends call it once (the plugin keeps the choice for its session), so the
    container engine is asked at most once.

    Raises
    ------
    cnibench.errors.ConfigError
        One line naming the problem and what to do.
    """
    backend, reason = select_backend(
        config.cluster,
        config.cnis,
        keep_cluster=config.keep_cluster,
        recreate_cluster=config.recreate_cluster,
        engine=engine,
        nodes=config.nodes,
        image_registry=config.image_registry,
    )
    choice = BackendChoice(backend, reason, validate_cnis(backend, config.cnis))
    if config.reference is not None and config.reference not in choice.cnis:
        raise ConfigError(
            f"--reference {config.reference!r} is not one of the CNIs of this session:"
            f" {', '.join(choice.cnis)}"
        )
    return choice
