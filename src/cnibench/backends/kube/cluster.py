"""A Kubernetes cluster behind the :class:`~cnibench.backends.base.Cluster` Protocol: the
:class:`KubeCluster` façade over the cluster's features.

:class:`KubeCluster` delegates to one object per feature, each holding that feature's state and
sharing one :class:`~cnibench.backends.kube.runtime.KubeRuntime` (API clients, namespace, CNI
driver, images, nodes): :class:`~cnibench.backends.kube.pods.KubePods` (pods, which implement
:class:`~cnibench.backends.base.Endpoint`),
:class:`~cnibench.backends.kube.egress.KubeEgressGateway`,
:class:`~cnibench.backends.kube.filters.KubeFilters` (policy, priority, L7),
:class:`~cnibench.backends.kube.split.KubeSplit`,
:class:`~cnibench.backends.kube.services.KubeServices`,
:class:`~cnibench.backends.kube.monitoring.KubeMonitoring`,
:class:`~cnibench.backends.kube.agents.KubeAgentAccess` (the CNI's account of its encryption)
and :class:`~cnibench.backends.kube.capture.KubeUnderlayCapture`. Here stay the identity,
start (node discovery, the session namespace), the environment fingerprint and teardown.

It works through the official kubernetes client only: objects come from
:mod:`cnibench.backends.kube.render` and go in by server-side apply
(:class:`~cnibench.backends.kube.api.Applier`); commands run through the exec subresource;
Prometheus is reached through the port-forward subresource. Everything lives in one namespace
labelled ``cnibench.io/session=<id>``, plus cluster-scoped objects carrying the same label, so
:meth:`KubeCluster.teardown` and ``cnibench clean`` find all of it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from cnibench.backends.base import (
    Capability,
    ClusterSpec,
    EncryptionStatus,
    Endpoint,
    ExternalHost,
    Node,
    NodePins,
    NodeRole,
    ResourceUsage,
    Service,
    ServiceProxy,
    WarmUp,
    WorkloadSpec,
)
from cnibench.backends.kube import render
from cnibench.backends.kube.agents import KubeAgentAccess
from cnibench.backends.kube.api import api_error_message
from cnibench.backends.kube.capture import KubeUnderlayCapture
from cnibench.backends.kube.cni import CniDefinition
from cnibench.backends.kube.egress import KubeEgressGateway
from cnibench.backends.kube.external import EXTERNAL_ADDRESS_ENV
from cnibench.backends.kube.filters import POLICY_SETTLE, PRIORITY_SETTLE, KubeFilters
from cnibench.backends.kube.images import Images
from cnibench.backends.kube.limits import policy_rule_limit
from cnibench.backends.kube.monitoring import (
    METRICS_DEVICE_REGEX,
    NEW_CLUSTER_WARM_UP,
    KubeMonitoring,
)
from cnibench.backends.kube.node_usage import KindNodeUsage
from cnibench.backends.kube.placement import NodeChoice, NodeFacts, choose_nodes
from cnibench.backends.kube.pods import (
    STUCK_REASONS,
    KubePod,
    KubePods,
    PodPortForward,
    exec_returncode,
    pod_problem,
)
from cnibench.backends.kube.pykube_bridge import pykube_client
from cnibench.backends.kube.runtime import KubeRuntime, Timeouts
from cnibench.backends.kube.services import KubeServices, proxy_hint, service_proxy
from cnibench.backends.kube.split import KubeSplit
from cnibench.errors import ProvisioningError, UnsupportedError
from cnibench.policy import PolicyEngine, PolicyRuleLimit, PolicySpec, PriorityCase
from cnibench.records import Environment
from cnibench.results import environment_fingerprint
from cnibench.waiting import wait_for

__all__ = [
    "STUCK_REASONS",
    "KubeCluster",
    "KubePod",
    "PodPortForward",
    "Timeouts",
    "exec_returncode",
    "pod_problem",
]

_EXTERNAL_HINT = f"set {EXTERNAL_ADDRESS_ENV} to an address of this host its pods can reach"
_PROXY_CAPABILITIES = frozenset(Capability.service_proxy(proxy) for proxy in ServiceProxy)
"""One per proxy; a cluster offers the one it runs (see :func:`service_proxy`)."""


class KubeCluster:
    """A provisioned Kubernetes cluster with a CNI installed (a
    :class:`~cnibench.backends.base.Cluster`). A façade: each feature is an object of its own
    module sharing one :class:`~cnibench.backends.kube.runtime.KubeRuntime`.

    Parameters
    ----------
    api_client:
        :class:`kubernetes.client.ApiClient` for the cluster.
    spec:
        The spec it was provisioned for.
    cni:
        The installed CNI's definition.
    provider:
        ``"kind"``, ``"aks"`` or ``"existing"``.
    session:
        Session id; names the namespace (``cnibench-<session>``) and labels everything.
    images:
        Pinned images.
    tolerations:
        Added to every pod (e.g. for tainted benchmark nodes).
    external:
        The external host, when the provider has one.
    timeouts:
        Operation timeouts.
    egress_ip_range:
        ``(first, last)`` IPv4 egress IPs on the egress-gw node, for a CNI whose driver
        needs them (:attr:`~cnibench.backends.kube.cnis.base.CniDriver.egress_needs_ip_range`);
        ``None``: none known, and such a CNI's egress gateway is unsupported.
    release:
        Called by :meth:`teardown` instead of deleting the namespace: it deletes the whole
        cluster (kind/aks clusters not kept). ``None`` keeps the cluster.
    kept:
        Called by :meth:`teardown` after the session's objects are gone from a cluster it
        keeps: it ends this process's claims on it (:mod:`cnibench.leases`).
    node_usage:
        Reads each node's and the CNI agent's own cgroups (kind on this machine); ``None``:
        :meth:`resource_usage` is empty.
    pins:
        Nodes named for roles (``--nodes``); the others are chosen at :meth:`start` (see
        :func:`~cnibench.backends.kube.placement.choose_nodes`).
    notes:
        What the backend found out before (the CNI running on an existing cluster), shown
        first in :attr:`notes`.
    created:
        Whether the provider made the cluster for this session (not reused, not existing):
        it then asks for a warm-up (:attr:`warm_up`).
    """

    def __init__(
        self,
        api_client: Any,
        spec: ClusterSpec,
        cni: CniDefinition,
        *,
        provider: str,
        session: str,
        images: Images | None = None,
        tolerations: Sequence[Mapping[str, Any]] = (),
        external: ExternalHost | None = None,
        timeouts: Timeouts | None = None,
        egress_ip_range: tuple[str, str] | None = None,
        release: Callable[[], None] | None = None,
        kept: Callable[[], None] | None = None,
        node_usage: KindNodeUsage | None = None,
        pins: NodePins | None = None,
        notes: Sequence[str] = (),
        created: bool = False,
    ) -> None:
        self._runtime = KubeRuntime(
            api_client,
            spec,
            cni,
            session=session,
            images=images or Images(),
            tolerations=tolerations,
            timeouts=timeouts or Timeouts(),
            egress_ip_range=egress_ip_range,
            # A cluster cnibench did not create: what lands outside the session namespace is
            # said before it is created.
            announces=provider == "existing",
        )
        self._api_client = api_client
        self._pykube: Any = None
        self._provider = provider
        self._created = created
        self.session = session
        self.namespace = self._runtime.namespace
        self._external = external
        self._release = release
        self._kept = kept
        self._pods = KubePods(self._runtime)
        self._egress = KubeEgressGateway(self._runtime)
        self._filters = KubeFilters(self._runtime)
        self._split = KubeSplit(self._runtime)
        self._monitoring = KubeMonitoring(self._runtime, node_usage)
        self._agents = KubeAgentAccess(self._runtime)
        self._capture = KubeUnderlayCapture(self._runtime, self._pods)
        self._services: KubeServices | None = None
        self._torn_down = False
        self._pins = pins or NodePins()
        self._notes = tuple(notes)

    # -- identity -------------------------------------------------------------------------
    @property
    def backend(self) -> str:
        """``"kube"``."""
        return "kube"

    @property
    def provider(self) -> str:
        """Provider that created the cluster."""
        return self._provider

    @property
    def spec(self) -> ClusterSpec:
        """The spec this cluster was provisioned for."""
        return self._runtime.spec

    @property
    def cni_version(self) -> str:
        """Pinned version of the installed CNI."""
        return self._runtime.cni.version

    @property
    def capabilities(self) -> frozenset[Capability]:
        """What the CNI declares (see :mod:`cnibench.backends.kube.cni`), plus an underlay
        capture on every CNI (a host-network pod with tcpdump)."""
        extra = {Capability.UNDERLAY_CAPTURE}
        if self._external is not None:
            extra.add(Capability.EXTERNAL_HOST)
        if self._runtime.nodes:  # started: the cluster can be asked which proxy it runs
            extra.add(Capability.SERVICE_PROXY)
            proxy = self._service_objects().proxy
            if proxy:
                extra.add(Capability.service_proxy(proxy))
        return self._runtime.cni.capabilities | extra

    def capability_hint(self, capability: Capability) -> str:
        """For the external host: which variable names it; else what the CNI's definition
        says about lacking ``capability`` (flannel: no NetworkPolicy), or ``""``."""
        if capability is Capability.EXTERNAL_HOST:
            return _EXTERNAL_HINT
        if capability in _PROXY_CAPABILITIES:
            return proxy_hint(self._service_objects().proxy)
        return self._runtime.cni.capability_hints.get(capability, "")

    @property
    def images(self) -> Images:
        """Pinned images of the pods placed from now on."""
        return self._runtime.images

    @images.setter
    def images(self, images: Images) -> None:
        # Tests swap in an unpullable image to see a pod fail fast.
        self._runtime.images = images

    @property
    def tolerations(self) -> list[Mapping[str, Any]]:
        """Added to every pod."""
        return self._runtime.tolerations

    @property
    def timeouts(self) -> Timeouts:
        """Operation timeouts."""
        return self._runtime.timeouts

    @property
    def egress_ip_range(self) -> tuple[str, str] | None:
        """``(first, last)`` egress IPs on the egress-gw node, or ``None``."""
        return self._runtime.egress_ip_range

    @property
    def pykube(self) -> Any:
        """A pykube-ng ``HTTPClient`` for this cluster, as the same user (for users of
        pytest-kind-style APIs; cnibench itself uses the official client)."""
        if self._pykube is None:
            self._pykube = pykube_client(self._api_client)
        return self._pykube

    # -- set-up ---------------------------------------------------------------------------
    def start(self) -> None:
        """Choose a node for each role of the spec and create the session namespace: nodes are
        chosen (and a node that cannot hold the pods refused) before anything is created.

        Raises
        ------
        cnibench.errors.ConfigError
            A ``--nodes`` or role-labelled node is missing or cannot hold the pods.
        cnibench.errors.ProvisioningError
            No node can hold the pods of a role, or the namespace cannot be created.
        """
        self._runtime.choice = self._choose_nodes()
        self._runtime.nodes = [
            Node(held.node.name, held.role, held.node.address)
            for held in self._runtime.choice.roles
        ]
        self._runtime.applier.apply(render.namespace(self.namespace, session=self.session))
        self._wait_default_service_account()

    def _choose_nodes(self) -> NodeChoice:
        """Read every node (nothing is written to any) and choose (see
        :func:`~cnibench.backends.kube.placement.choose_nodes`)."""
        from kubernetes.client.exceptions import ApiException

        try:
            listed = self._runtime.core.list_node().items
        except ApiException as exc:
            raise ProvisioningError(f"listing nodes failed: {api_error_message(exc)}") from exc
        return choose_nodes(
            [NodeFacts.of_node(item) for item in listed],
            self._runtime.spec.roles,
            pins=self._pins,
            tolerations=self._runtime.tolerations,
        )

    @property
    def notes(self) -> tuple[str, ...]:
        """The CNI found running (existing clusters) and, once started, which node holds
        which role, how it was found and whether roles share a node."""
        choice = self._runtime.choice
        return (*self._notes, choice.line()) if choice is not None else self._notes

    def listen(self, listener: Callable[[str], None]) -> None:
        """Tell ``listener`` each cluster-wide object right before it is created, on an
        existing cluster (see :meth:`KubeRuntime.announce_cluster_wide`)."""
        self._runtime.listener = listener

    @property
    def announced(self) -> tuple[str, ...]:
        """Every cluster-wide object said so far (see :meth:`listen`), one line each."""
        return tuple(self._runtime.announced)

    def _wait_default_service_account(self) -> None:
        from kubernetes.client.exceptions import ApiException

        def created() -> bool:
            try:
                self._runtime.core.read_namespaced_service_account("default", self.namespace)
            except ApiException as exc:
                if exc.status != 404:
                    raise ProvisioningError(
                        f"namespace {self.namespace} has no default service account:"
                        f" {api_error_message(exc)}"
                    ) from exc
                return False
            return True

        wait_for(
            created,
            timeout=self.timeouts.delete,
            what=f"namespace {self.namespace} to get its default service account",
            interval=0.2,
            error=ProvisioningError,
        )

    # -- pods and nodes -------------------------------------------------------------------
    @property
    def nodes(self) -> Sequence[Node]:
        """Nodes in the order of ``spec.roles``."""
        return tuple(self._runtime.nodes)

    def node(self, role: NodeRole) -> Node:
        """The first node with ``role``."""
        return self._runtime.node(role)

    def place(
        self, name: str, *, role: NodeRole, workloads: Sequence[WorkloadSpec] = ()
    ) -> KubePod:
        """Create pod ``name`` on the ``role`` node once Ready (see :meth:`KubePods.place`)."""
        return self._pods.place(name, role=role, workloads=workloads)

    def remove(self, endpoint: Endpoint) -> None:
        """Delete the pod and wait until it is gone."""
        self._pods.remove(endpoint)

    @property
    def external(self) -> ExternalHost:
        """The external host (only when the provider configured one)."""
        if self._external is None:
            raise UnsupportedError(
                f"the {self._provider} cluster has no external host: {_EXTERNAL_HINT}"
            )
        return self._external

    # -- egress gateway -------------------------------------------------------------------
    def egress_manifests(self, clients: Sequence[str], *, destination: str) -> list[dict[str, Any]]:
        """The CNI driver's egress objects (see :meth:`KubeEgressGateway.manifests`)."""
        return self._egress.manifests(clients, destination=destination)

    def expected_egress_source(self) -> str:
        """Source address the external host sees with the gateway on."""
        return self._egress.expected_source()

    def enable_egress_gateway(self, clients: Sequence[Endpoint], *, destination: str) -> str:
        """Label ``clients``, apply the CNI's egress objects; the source to expect."""
        return self._egress.enable(clients, destination=destination)

    def disable_egress_gateway(self) -> None:
        """Delete the egress objects and unlabel the client pods. Safe to repeat."""
        self._egress.disable()

    # -- encryption -----------------------------------------------------------------------
    def encryption_status(self) -> EncryptionStatus:
        """The CNI's own account of its encryption (see :class:`KubeAgentAccess`)."""
        return self._agents.encryption_status()

    def node_annotations(self) -> list[tuple[str, Mapping[str, str]]]:
        """``(node name, annotations)`` of every node of the cluster."""
        return self._agents.node_annotations()

    def exec_in_agents(
        self, namespace: str, selector: str, container: str, argv: Sequence[str]
    ) -> list[tuple[str, str]]:
        """``(node name, output)`` of ``argv`` in every agent pod matching ``selector``."""
        return self._agents.exec_in_agents(namespace, selector, container, argv)

    def capture_underlay(self, marker: bytes, send: Sequence[str], *, source: Endpoint) -> bool:
        """Whether ``marker`` crossed the uplink of ``source``'s node while ``send`` ran there
        (see :class:`KubeUnderlayCapture`)."""
        return self._capture.capture_underlay(marker, send, source=source)

    # -- policies ---------------------------------------------------------------------------
    @property
    def policy_settle_seconds(self) -> float:
        """:data:`~cnibench.backends.kube.filters.POLICY_SETTLE`: the CNI programs a policy
        after the API server stored it."""
        return POLICY_SETTLE

    @property
    def priority_settle_seconds(self) -> float:
        """:data:`~cnibench.backends.kube.filters.PRIORITY_SETTLE`."""
        return PRIORITY_SETTLE

    @property
    def policy_rule_limit(self) -> PolicyRuleLimit | None:
        """The bound the CNI's configuration sets, read from its ConfigMap
        (:func:`~cnibench.backends.kube.limits.policy_rule_limit`); ``None`` for a CNI that
        names none."""
        limit = self._runtime.cni.policy_limit
        return None if limit is None else policy_rule_limit(self._runtime.core, limit)

    def apply_policy(self, spec: PolicySpec, *, engine: PolicyEngine | None = None) -> None:
        """Apply a NetworkPolicy rendered from ``spec``; the CNI enforces it with its own
        datapath (:attr:`~cnibench.backends.kube.KubeBackend.policy_choices` offers no engine,
        and one given is not used)."""
        self._filters.apply_policy(spec, engine=engine)

    def remove_policy(self) -> None:
        """Delete the NetworkPolicy. Safe to repeat."""
        self._filters.remove_policy()

    def priority_case_manifests(self, case: PriorityCase, spec: PolicySpec) -> list[dict[str, Any]]:
        """The objects of ``case`` (see :meth:`KubeFilters.priority_case_manifests`)."""
        return self._filters.priority_case_manifests(case, spec)

    def apply_priority_case(self, case: PriorityCase, spec: PolicySpec) -> None:
        """Apply the objects of ``case``, replacing an earlier case."""
        self._filters.apply_priority_case(case, spec)

    def remove_priority_case(self) -> None:
        """Delete the case's objects. Safe to repeat."""
        self._filters.remove_priority_case()

    def apply_l7_policy(self, server: Endpoint, *, port: int, method: str, path: str) -> None:
        """Apply the CNI driver's HTTP rule allowing only ``method`` on ``path``."""
        self._filters.apply_l7_policy(server, port=port, method=method, path=path)

    def remove_l7_policy(self) -> None:
        """Delete the L7 policy. Safe to repeat."""
        self._filters.remove_l7_policy()

    # -- traffic split and Services ---------------------------------------------------------
    def split_manifests(
        self, backends: Mapping[str, tuple[str, int]], *, port: int
    ) -> list[dict[str, Any]]:
        """Services, Gateway and HTTPRoute of a weighted split (see :meth:`KubeSplit.manifests`)."""
        return self._split.manifests(backends, port=port)

    def create_split(self, backends: Mapping[str, tuple[Endpoint, int]], *, port: int) -> str:
        """Apply the split; the Gateway's URL once it serves (see :meth:`KubeSplit.create`)."""
        return self._split.create(backends, port=port)

    def remove_split(self) -> None:
        """Delete the split objects. Safe to repeat."""
        self._split.remove()

    def _service_objects(self) -> KubeServices:
        if self._services is None:
            rt = self._runtime
            self._services = KubeServices(
                rt.core,
                rt.applier,
                namespace=self.namespace,
                session=self.session,
                proxy=service_proxy(rt.core, replaces_kube_proxy=rt.cni.replaces_kube_proxy),
                ready_timeout=rt.timeouts.pod_ready,
            )
        return self._services

    def expose(self, server: Endpoint, ports: Sequence[int], *, proxy: str, others: int) -> Service:
        """A NodePort Service in front of ``server`` and ``others`` further Services (see
        :mod:`cnibench.backends.kube.services`)."""
        return self._service_objects().expose(server, ports, proxy=proxy, others=others)

    def remove_service(self) -> None:
        """Delete the Services of :meth:`expose` and :meth:`add_service`. Safe to repeat."""
        if self._services is not None:
            self._services.remove()

    def free_service_address(self) -> str:
        """A ClusterIP of the range's static band that no Service holds."""
        return self._service_objects().free_service_address()

    def add_service(self, server: Endpoint, port: int, *, address: str) -> None:
        """One more ClusterIP Service at ``address`` in front of ``server`` (see
        :mod:`cnibench.backends.kube.services`)."""
        self._service_objects().add_service(server, port, address=address)

    # -- monitoring -----------------------------------------------------------------------
    def prometheus_url(self) -> str:
        """Install Prometheus + node-exporter on first use and return a port-forward URL."""
        return self._monitoring.prometheus_url()

    @property
    def metrics_device_regex(self) -> str:
        """Node uplinks as named by kind (``eth0``) and Azure VMs (``eth0``/``ens*``)."""
        return METRICS_DEVICE_REGEX

    def resource_usage(self, *, reset_peak: bool = False) -> dict[str, ResourceUsage]:
        """Each role's nodes and the CNI agent's pods by their own cgroups (kind); see
        :meth:`KubeMonitoring.resource_usage`."""
        return self._monitoring.resource_usage(reset_peak=reset_peak)

    @property
    def warm_up(self) -> WarmUp:
        """:data:`~cnibench.backends.kube.monitoring.NEW_CLUSTER_WARM_UP` on a cluster made
        for this session; nothing on one reused or existing."""
        return NEW_CLUSTER_WARM_UP if self._created else WarmUp()

    # -- environment and teardown ---------------------------------------------------------
    def environment(self) -> Environment:
        """Host fingerprint plus nodes, the CNI's Helm values and the data-path settings its
        agents and kube-proxy report (:meth:`KubeAgentAccess.datapath_settings`). Each node is
        described by its role (roles joined by ``+`` when it holds several), how it was found
        (``chosen_by``: ``label``, ``pinned`` or ``chosen``), its zone (``""`` without a
        ``topology.kubernetes.io/zone`` label), whether it holds several roles
        (``same_node``), CPUs and memory."""
        cni = self._runtime.cni
        described: dict[str, dict[str, str | int | float | bool]] = {}
        choice = self._runtime.choice
        for held in choice.roles if choice is not None else ():
            name = held.node.name
            if name in described:
                continue
            capacity = self._runtime.core.read_node(name).status.capacity or {}
            holding = [r for r in choice.roles if r.node.name == name] if choice else [held]
            described[name] = {
                "role": "+".join(r.role.value for r in holding),
                "chosen_by": "+".join(dict.fromkeys(r.chosen_by.value for r in holding)),
                "zone": held.node.zone,
                "same_node": len(holding) > 1,
                "cpu": str(capacity.get("cpu", "")),
                "memory": str(capacity.get("memory", "")),
            }
        return environment_fingerprint(
            backend="kube",
            provider=self._provider,
            cni=cni.name,
            cni_version=cni.version,
            nodes=described,
            cni_values=dict(cni.chart.values) if cni.chart else {},
            datapath_settings=self._agents.datapath_settings(),
        )

    def teardown(self) -> None:
        """Delete the cluster when cnibench owns it and it is not kept (``release``);
        otherwise delete the session's cluster-scoped objects and namespace and wait until
        the namespace is gone. Safe to call twice.

        Raises
        ------
        cnibench.errors.ProvisioningError
            Deleting the cluster or the namespace failed (the message names it).
        """
        from kubernetes.client.exceptions import ApiException

        if self._torn_down:
            return
        self._monitoring.close_forward()
        if self._release is not None:
            self._torn_down = True
            self._release()
            return
        # Cluster-scoped objects outlive the namespace: delete them explicitly.
        self._egress.delete_objects()
        self._filters.delete_cluster_scoped()
        self._monitoring.delete_cluster_scoped()
        core = self._runtime.core
        try:
            core.delete_namespace(self.namespace)
        except ApiException as exc:
            if exc.status != 404:
                raise ProvisioningError(
                    f"deleting namespace {self.namespace} failed: {api_error_message(exc)}"
                ) from exc
        self._runtime.wait_gone(lambda: core.read_namespace(self.namespace), self.namespace)
        self._torn_down = True
        if self._kept is not None:
            self._kept()
