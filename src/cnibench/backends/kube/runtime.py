"""What every feature of a :class:`~cnibench.backends.kube.cluster.KubeCluster` shares.

:class:`KubeRuntime` holds the API clients, the session's namespace and labels, the installed
CNI (and so its driver), the pinned images, the timeouts and the nodes found at start; each
feature object (pods, egress gateway, filters, split, monitoring, encryption, capture) reads
them from one runtime, like the lab's features share one
:class:`~cnibench.backends.lab.runtime.LabRuntime`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from cnibench.backends.base import ClusterSpec, Node, NodeRole
from cnibench.backends.kube.api import Applier, api_error_message
from cnibench.backends.kube.cni import CniDefinition
from cnibench.backends.kube.cnis import DRIVERS, CniDriver
from cnibench.backends.kube.cnis.base import ObjectScope
from cnibench.backends.kube.images import Images
from cnibench.backends.kube.placement import NodeChoice
from cnibench.backends.kube.render import SESSION_LABEL, NodeTarget
from cnibench.errors import ConfigError, ProvisioningError
from cnibench.waiting import wait_for

__all__ = ["KubeRuntime", "Timeouts"]


@dataclass(frozen=True)
class Timeouts:
    """How long cluster operations may take, in seconds.

    Attributes
    ----------
    pod_ready:
        A placed pod becoming Ready (image pulls included).
    delete:
        A pod or namespace disappearing after deletion.
    monitoring:
        Prometheus becoming ready.
    """

    pod_ready: float = 300.0
    delete: float = 120.0
    monitoring: float = 300.0


class KubeRuntime:
    """The state a cluster's features share (see the module docstring).

    Parameters
    ----------
    api_client:
        :class:`kubernetes.client.ApiClient` for the cluster.
    spec:
        The spec the cluster was provisioned for.
    cni:
        The installed CNI's definition.
    session:
        Session id; names the namespace (``cnibench-<session>``) and labels everything.
    images:
        Pinned images.
    tolerations:
        Added to every pod.
    timeouts:
        Operation timeouts.
    egress_ip_range:
        ``(first, last)`` IPv4 egress IPs on the egress-gw node, or ``None``.
    announces:
        Whether cluster-wide objects are said before they are created
        (:meth:`announce_cluster_wide`): on a cluster cnibench did not create.
    """

    def __init__(
        self,
        api_client: Any,
        spec: ClusterSpec,
        cni: CniDefinition,
        *,
        session: str,
        images: Images,
        tolerations: Sequence[Mapping[str, Any]],
        timeouts: Timeouts,
        egress_ip_range: tuple[str, str] | None,
        announces: bool = False,
    ) -> None:
        from kubernetes import client

        self.api_client = api_client
        # The client's models are Optional everywhere; the server fills what we read.
        self.core: Any = client.CoreV1Api(api_client)
        self.applier = Applier(api_client)
        self.spec = spec
        self.cni = cni
        self.session = session
        self.namespace = f"cnibench-{session}"
        self.images = images
        self.tolerations = list(tolerations)
        self.timeouts = timeouts
        self.egress_ip_range = egress_ip_range
        self.nodes: list[Node] = []
        """The role nodes in the order of ``spec.roles``; empty until the cluster started."""
        self.choice: NodeChoice | None = None
        """Which node holds each role and how it was found; ``None`` until started."""
        self.announces = announces
        self.listener: Callable[[str], None] | None = None
        """Told each line of :meth:`announce_cluster_wide` (the session's progress)."""
        self.announced: list[str] = []
        """Every line :meth:`announce_cluster_wide` said, in order."""
        self._said: set[tuple[str, str]] = set()

    def announce_cluster_wide(self, manifests: Sequence[Mapping[str, Any]], *, why: str) -> None:
        """On a cluster cnibench did not create (:attr:`announces`), say which cluster-scoped
        objects of ``manifests`` are about to be created, and ``why``, before they are: they
        live outside the session's namespace, in the cluster's own space. Each object is said
        once per session; namespaced ones (in the session's namespace) are not said. Each is
        removed at teardown, and by ``cnibench clean --kubeconfig`` after a killed session
        (it carries the session label). Call it before applying ``manifests``.

        Raises
        ------
        cnibench.errors.ProvisioningError
            The server does not know an object's kind (applying it would fail the same way).
        """
        if not self.announces:
            return
        named: list[str] = []
        for manifest in manifests:
            key = (str(manifest["kind"]), str(manifest["metadata"]["name"]))
            if key in self._said or self.applier.namespaced(manifest):
                continue
            self._said.add(key)
            named.append(" ".join(key))
        if not named:
            return
        line = (
            f"creating cluster-wide {', '.join(named)} for {why} (labelled"
            f" {SESSION_LABEL}={self.session}; removed at teardown)"
        )
        self.announced.append(line)
        if self.listener is not None:
            self.listener(line)

    @property
    def driver(self) -> CniDriver:
        """The installed CNI's driver.

        Raises
        ------
        cnibench.errors.ConfigError
            No driver is registered under the CNI's name.
        """
        driver = DRIVERS.get(self.cni.name)
        if driver is None:
            raise ConfigError(f"no CNI driver is registered for {self.cni.name!r}")
        return driver

    @property
    def scope(self) -> ObjectScope:
        """Where the objects a driver renders for this session belong."""
        gateway = self.target(NodeRole.EGRESS_GW) if self.choice is not None else None
        return ObjectScope(
            session=self.session,
            namespace=self.namespace,
            gateway_node=dict(gateway.labels) if gateway and gateway.labels else None,
        )

    def target(self, role: NodeRole) -> NodeTarget:
        """How a pod lands on the ``role`` node (its hostname label, else its name); by the
        role label before the nodes are chosen.

        Raises
        ------
        cnibench.errors.ProvisioningError
            The spec has no such role.
        """
        if self.choice is None:
            return NodeTarget.role(role)
        for held in self.choice.roles:
            if held.role is role:
                return held.target
        raise ProvisioningError(f"cluster has no {role.value} node")

    def node(self, role: NodeRole) -> Node:
        """The first node with ``role``.

        Raises
        ------
        cnibench.errors.ProvisioningError
            No node has it.
        """
        for candidate in self.nodes:
            if candidate.role is role:
                return candidate
        raise ProvisioningError(f"cluster has no {role.value} node")

    def wait_gone(self, read: Callable[[], object], what: str) -> None:
        """Wait until ``read`` raises 404 (``timeouts.delete`` seconds at most).

        Raises
        ------
        cnibench.errors.ProvisioningError
            Reading failed otherwise, or ``what`` still exists at the deadline.
        """
        from kubernetes.client.exceptions import ApiException

        def gone() -> bool:
            try:
                read()
            except ApiException as exc:
                if exc.status == 404:
                    return True
                raise ProvisioningError(f"reading {what} failed: {api_error_message(exc)}") from exc
            return False

        wait_for(
            gone,
            timeout=self.timeouts.delete,
            what=f"{what} to be gone after its deletion",
            interval=0.25,
            last_seen=lambda: "it still exists",
            error=ProvisioningError,
        )
