"""Which backend serves a ``--cluster`` request, and the ``--cni`` names each one runs.

The one module above the concrete backends that knows them: a session asks it which cluster
serves a request (:func:`choose_cluster`, the ``auto`` rule included), for a backend
(:func:`make_backend`), for the names (:func:`lab_datapaths`, :func:`kube_cni_names`) and for
an engine (:func:`container_engine`), and imports neither backend package itself (an
import-linter contract in pyproject.toml). Each backend then checks its own ``--cni`` values
(:meth:`~cnibench.backends.base.Backend.validate`) and what it needs before anything starts
(:meth:`~cnibench.backends.base.Backend.preflight`). Only the chosen backend's package is
imported, and the kube registry only when a name is not a lab datapath; the lab's datapath names
come from :mod:`~cnibench.backends.lab.plan.addresses`, which imports only the standard library
and :mod:`cnibench.errors`, whichever backend is chosen.
"""

from __future__ import annotations

import enum
import os
from collections.abc import Callable, Sequence

from cnibench.backends.base import Backend, ClusterSpec, NodePins
from cnibench.backends.lab.plan.addresses import LabDatapath
from cnibench.errors import ConfigError
from cnibench.extras import missing_modules, require_extra

__all__ = [
    "BACKEND_CLUSTERS",
    "CLUSTER_CHOICES",
    "ClusterChoice",
    "check_names",
    "choose_cluster",
    "container_engine",
    "kube_cni_names",
    "lab_datapaths",
    "make_backend",
]


class ClusterChoice(enum.StrEnum):
    """``--cluster``: where a session benchmarks. Checked once, by :meth:`parse`, when the
    options become a session's configuration; everything after takes this type and checks
    nothing (a member equals its text, ``ClusterChoice.LAB == "lab"``)."""

    AUTO = "auto"
    """The lab or kind, chosen from the request (:func:`choose_cluster`)."""
    LAB = "lab"
    KIND = "kind"
    AKS = "aks"
    EXISTING = "existing"
    """The cluster ``KUBECONFIG`` names."""

    @classmethod
    def parse(cls, text: str) -> ClusterChoice:
        """The choice ``text`` names.

        Raises
        ------
        cnibench.errors.ConfigError
            Not one of :data:`CLUSTER_CHOICES` (one line listing them).
        """
        if text not in CLUSTER_CHOICES:
            raise ConfigError(
                f"unknown --cluster {text!r}: choose one of {', '.join(CLUSTER_CHOICES)}"
            )
        return cls(text)


CLUSTER_CHOICES = tuple(choice.value for choice in ClusterChoice)
"""The ``--cluster`` values, in the order help and errors list them."""

BACKEND_CLUSTERS = tuple(c.value for c in ClusterChoice if c is not ClusterChoice.AUTO)
"""The ``--cluster`` values that name a backend (``auto`` is resolved by
:func:`choose_cluster`)."""


def choose_cluster(
    cluster: ClusterChoice, specs: Sequence[ClusterSpec], *, engine: Callable[[], str] | None = None
) -> tuple[ClusterChoice, str]:
    """Which ``--cluster`` serves the ``--cni`` ``specs``, and a sentence saying why.

    With ``--cluster auto``: lab datapaths select the lab (no engine is asked); Kubernetes
    CNIs select kind when a container engine answers; no ``--cni`` selects kind when an engine
    answers, else the lab. Pure but for ``engine``, called at most once: it names the
    container engine that answers, or returns ``""`` (default :func:`container_engine`; tests
    pass a fake).

    Raises
    ------
    cnibench.errors.ConfigError
        Lab datapaths and Kubernetes CNIs in one request (the line says how to split them);
        Kubernetes CNIs with ``auto`` and no engine (the line names ``cnibench engine up``, or
        that a name is unknown).
    """
    datapaths = lab_datapaths()
    lab = tuple(dict.fromkeys(s.cni for s in specs if s.cni in datapaths))
    kube = tuple(dict.fromkeys(s.cni for s in specs if s.cni not in datapaths))
    if lab and kube:
        raise ConfigError(
            f"--cni {', '.join(lab)} (lab) and --cni {', '.join(kube)} (Kubernetes) cannot share"
            " a session, which runs on one backend: split them into two runs, cnibench run"
            f" {' '.join(f'--cni {name}' for name in lab)} ... and cnibench run"
            f" {' '.join(f'--cni {name}' for name in kube)} ..."
        )
    if cluster != ClusterChoice.AUTO:
        return cluster, f"--cluster {cluster}"
    if lab:
        return ClusterChoice.LAB, f"--cluster auto: --cni {', '.join(lab)} runs on the embedded lab"
    answering = (engine or container_engine)()
    if answering:
        return ClusterChoice.KIND, f"--cluster auto: {answering} answers, using kind"
    if kube:
        check_names(specs, backend="")  # misspelt: unknown, not a missing cluster
        raise ConfigError(
            f"--cni {kube[0]!r} needs a Kubernetes cluster and none is at hand: no container"
            ' engine answers for kind (start one: eval "$(cnibench engine up)", then'
            " cnibench images build) and no --cluster existing was given (set KUBECONFIG);"
            f" or measure a lab datapath: --cni {' / '.join(datapaths)}"
        )
    return ClusterChoice.LAB, "--cluster auto: no container engine answers, using the embedded lab"


def lab_datapaths() -> tuple[str, ...]:
    """The datapaths the lab offers as ``--cni`` (``("routed", "vxlan")``)."""
    return tuple(datapath.value for datapath in LabDatapath)


def kube_cni_names() -> tuple[str, ...]:
    """Every ``--cni`` name the kube backend knows, in registration order (the first is what a
    plain kind cluster runs). Imports the kube registry."""
    from cnibench.backends.kube.cnis import cni_names

    return cni_names()


def container_engine(timeout: float = 5.0) -> str:
    """Name of a container engine that answers (``docker``/``podman``), or ``""`` (also
    without the kube extra, which every use of one needs)."""
    if missing_modules("kube"):
        return ""
    from cnibench.engine import answering_engine

    return answering_engine(timeout=timeout)


def check_names(specs: Sequence[ClusterSpec], *, backend: str) -> None:
    """Refuse a ``--cni`` name that ``backend`` (``"lab"``, ``"kube"``, or ``""`` while none
    could be chosen) cannot run, in one line saying what to choose instead: a Kubernetes CNI
    on the lab, a lab datapath on a cluster, or a name neither knows. Imports the kube
    registry only for a name that is not a lab datapath.

    Raises
    ------
    cnibench.errors.ConfigError
        One line naming the value and the choices.
    """
    datapaths = lab_datapaths()
    others = [spec.cni for spec in specs if spec.cni not in datapaths]
    if backend == "lab":
        if not others:
            return
        name = others[0]
        if name in kube_cni_names():
            raise ConfigError(
                f"--cni {name!r} is a Kubernetes CNI and --cluster lab runs lab"
                f" datapaths: choose --cni {' / '.join(datapaths)}, or --cluster"
                " kind or existing"
            )
        raise ConfigError(
            f"unknown --cni {name!r} for the lab: choose one of {', '.join(datapaths)}"
        )
    known = kube_cni_names()
    for spec in specs:
        if backend and spec.cni in datapaths:
            raise ConfigError(
                f"--cni {spec.cni!r} is a lab datapath and a Kubernetes cluster runs"
                f" Kubernetes CNIs: choose --cluster lab, or --cni {' / '.join(known)}"
            )
        if spec.cni not in known and spec.cni not in datapaths:
            choices = f"one of {', '.join(known)}"
            if not backend:
                choices = (
                    f"a lab datapath ({', '.join(datapaths)}) or a Kubernetes CNI"
                    f" ({', '.join(known)})"
                )
            raise ConfigError(f"unknown --cni {spec.cni!r}: choose {choices}")


def make_backend(
    cluster: str,
    *,
    keep_cluster: bool = False,
    recreate_cluster: bool = False,
    nodes: NodePins | None = None,
    image_registry: str = "",
) -> Backend:
    """The backend of ``cluster`` (one of :data:`BACKEND_CLUSTERS`), made with what it needs
    from the environment (kind's image set, AKS's credentials, the existing cluster's
    kubeconfig), each checked here in one line before anything starts.

    Raises
    ------
    cnibench.errors.ConfigError
        ``nodes`` (``--nodes``) or ``image_registry`` (``--image-registry``: cnibench's own
        images pulled from it, pushed there first from ``DOCKER_HOST`` when one is set) on the
        lab, which has neither Kubernetes nodes nor pods; AKS without
        Terraform/OpenTofu or credentials; an existing cluster without a kubeconfig; an
        unknown ``cluster``.
    """
    if cluster not in BACKEND_CLUSTERS:
        raise ConfigError(f"--cluster {cluster!r}: choose one of {', '.join(BACKEND_CLUSTERS)}")
    if cluster == "lab":
        if image_registry:
            raise ConfigError(
                f"--image-registry {image_registry}: the lab runs no pods (use --cluster"
                " existing, kind or aks)"
            )
        if nodes:
            raise ConfigError(
                f"--nodes {nodes.text}: names Kubernetes nodes, and this session runs on the lab"
                " (use --cluster existing, kind or aks)"
            )
        from cnibench.backends.lab import LabBackend

        return LabBackend()
    require_extra("kube", f"--cluster {cluster}")
    from cnibench.backends.kube import AksProvider, ExistingProvider, KindProvider, KubeBackend
    from cnibench.backends.kube.images import Images, default_image_set

    images = None
    if cluster == "kind" or image_registry:
        # On cnibench's own engine the offline set is kind's default (CNIBENCH_IMAGES wins),
        # and what a registry is given from.
        images = Images.from_environment(os.environ, default=default_image_set(os.environ))
    if image_registry:
        from cnibench.backends.kube.registry import check_registry

        assert images is not None
        images = images.in_registry(check_registry(image_registry))
    provider: KindProvider | AksProvider | ExistingProvider
    if cluster == "kind":
        provider = KindProvider(images=images, recreate=recreate_cluster)
    elif cluster == "aks":
        _check_aks_prerequisites()
        provider = AksProvider()
    else:
        provider = ExistingProvider()
        if not provider.kubeconfig.is_file():
            raise ConfigError(
                f"--cluster existing: kubeconfig {provider.kubeconfig} does not exist"
                " (set KUBECONFIG to a readable kubeconfig)"
            )
    return KubeBackend(provider, images=images, keep_cluster=keep_cluster, nodes=nodes)


def _check_aks_prerequisites() -> None:
    """Fail before anything starts when ``--cluster aks`` cannot work here (one-line error)."""
    require_extra("aks", "--cluster aks")
    from cnibench.backends.kube.providers import AKS_CREDENTIAL_VARIABLES, terraform_command

    if terraform_command() is None:
        raise ConfigError(
            "--cluster aks needs terraform or tofu on PATH (or CNIBENCH_TERRAFORM naming one),"
            " and neither is there (install Terraform or OpenTofu, or choose --cluster lab, kind"
            " or existing)"
        )
    missing = [name for name in AKS_CREDENTIAL_VARIABLES if not os.environ.get(name)]
    if missing:
        raise ConfigError(
            f"--cluster aks needs Azure credentials in the environment: {', '.join(missing)}"
        )
