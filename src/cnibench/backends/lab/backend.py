"""The lab backend: clusters made of network namespaces on this host."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from cnibench.backends.base import ClusterSpec, PolicyChoices
from cnibench.backends.lab.cluster import LabCluster
from cnibench.backends.lab.features import FeatureCheck, check_available, doctor_rows
from cnibench.backends.lab.plan import LabDatapath, napi_option, new_lab_id, plan_lab
from cnibench.backends.lab.runner import namespace_inode
from cnibench.errors import ConfigError, ProvisioningError
from cnibench.policy import PolicyEngine, RulesSee

__all__ = ["DEFAULT_STATE_ROOT", "LabBackend"]

DEFAULT_STATE_ROOT = Path("/run/cnibench")
"""Parent of every lab's state directory (``/run`` is cleared at boot, like the namespaces)."""
_ID_ATTEMPTS = 20


class LabBackend:
    """Provision labs (a :class:`~cnibench.backends.base.Backend`).

    Parameters
    ----------
    state_root:
        Parent directory of the labs' state directories.

    Examples
    --------
    >>> from cnibench.backends.base import ClusterSpec, PolicyChoices
    >>> with LabBackend().provision(ClusterSpec(cni="vxlan")) as cluster:  # doctest: +SKIP
    ...     pod = cluster.place("client", role=NodeRole.CLIENT)
    """

    def __init__(self, *, state_root: Path = DEFAULT_STATE_ROOT) -> None:
        self.state_root = state_root

    @property
    def name(self) -> str:
        """``"lab"``."""
        return "lab"

    @property
    def policy_choices(self) -> PolicyChoices:
        """Every :class:`~cnibench.policy.PolicyEngine` and every
        :class:`~cnibench.policy.RulesSee`: the lab renders each into its own ruleset
        (:mod:`cnibench.backends.lab.policy`)."""
        return PolicyChoices(engines=tuple(PolicyEngine), rules_see=tuple(RulesSee))

    @property
    def load_in_pods(self) -> bool:
        """False: the lab's pods are namespaces of this host, so locust runs here
        (``--load-workers`` is refused)."""
        return False

    @property
    def clusters_coexist(self) -> bool:
        """True: a lab is a few namespaces of this host, and the session keeps each until it
        ends, so the CNIs of a scenario take turns in the same rounds."""
        return True

    def available(self) -> tuple[bool, str]:
        """Whether labs can be provisioned here (root, ``ip netns``, required tools), and why
        not."""
        return check_available()

    def validate(self, specs: Sequence[ClusterSpec]) -> tuple[ClusterSpec, ...]:
        """Each spec names a datapath and takes only the options the lab honours (``napi``);
        every datapath when ``specs`` is empty.

        Raises
        ------
        cnibench.errors.ConfigError
            A name that is no datapath, or an option the lab does not take (one line).
        """
        datapaths = tuple(datapath.value for datapath in LabDatapath)
        for spec in specs:
            if spec.cni not in datapaths:
                raise ConfigError(
                    f"unknown --cni {spec.cni!r} for the lab: choose one of {', '.join(datapaths)}"
                )
            try:
                napi_option(spec.options)
            except ConfigError as exc:
                raise ConfigError(f"--cni {spec.label!r}: {exc}") from None
        return tuple(specs) or tuple(ClusterSpec(cni=name) for name in datapaths)

    def preflight(self, specs: Sequence[ClusterSpec]) -> None:
        """Nothing up front: a host that cannot run labs fails at the first provision, with
        the reason (see :meth:`available`)."""

    def unsupported(self, spec: ClusterSpec) -> str:
        """Nothing: a lab is made for every spec :meth:`validate` accepts (each lab is new,
        so no setting of anyone else's is changed)."""
        return ""

    def doctor(self) -> list[FeatureCheck]:
        """Every kernel feature and tool the lab uses, usable or not and why (see
        :func:`cnibench.backends.lab.features.doctor_rows`)."""
        return doctor_rows()

    def provision(self, spec: ClusterSpec) -> LabCluster:
        """Build a fresh lab for ``spec`` (labs are never shared between callers).

        Raises
        ------
        cnibench.errors.ConfigError
            Unknown datapath or encryption, bad roles or options (nothing is created).
        cnibench.errors.ProvisioningError
            The host cannot run labs, or a step failed (what was created is removed).
        """
        plan = plan_lab(spec, new_lab_id(), state_root=self.state_root)
        ok, reason = self.available()
        if not ok:
            raise ProvisioningError(f"the lab backend is not available: {reason}")
        for _ in range(_ID_ATTEMPTS):
            if namespace_inode(plan.underlay_namespace) is None and not plan.state_dir.exists():
                break
            plan = plan_lab(spec, new_lab_id(), state_root=self.state_root)
        else:
            raise ProvisioningError("could not find an unused lab id")
        cluster = LabCluster(plan, spec)
        cluster.provision()
        return cluster


if TYPE_CHECKING:
    from cnibench.backends.base import Backend, Cluster, Endpoint, ExternalHost
    from cnibench.backends.lab.external import LabExternalHost
    from cnibench.backends.lab.pods import LabPod

    def _implements_protocols(
        backend: LabBackend, cluster: LabCluster, pod: LabPod, external: LabExternalHost
    ) -> tuple[Backend, Cluster, Endpoint, ExternalHost]:
        # mypy proves here that the lab satisfies the Protocols scenarios are written against.
        return backend, cluster, pod, external
