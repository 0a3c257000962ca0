"""What every CNI driver shares: the :class:`CniDriver` Protocol, what a running cluster hands a
driver (:class:`ObjectScope`, :class:`AgentAccess`) and :class:`DriverBase`, whose defaults say
"this CNI has no such feature".

A driver is pure where it can be: it renders objects and parses what agents print; the
cluster (:class:`~cnibench.backends.kube.cluster.KubeCluster`) applies, deletes, lists and
executes. The places a driver reads a running cluster are :meth:`CniDriver.encryption_status` and
:meth:`CniDriver.datapath_status`, and then only through :class:`AgentAccess`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Protocol

from cnibench.errors import UnsupportedError

if TYPE_CHECKING:
    from cnibench.backends.base import ClusterSpec, EncryptionStatus
    from cnibench.backends.kube.build_recipes import OfflineRecipe
    from cnibench.backends.kube.cni_types import CniDefinition, CniVersions
    from cnibench.backends.kube.images import CniImage, Images
    from cnibench.policy import PolicySpec, PriorityCase

__all__ = ["AgentAccess", "CniDriver", "DriverBase", "ObjectScope"]


@dataclass(frozen=True)
class ObjectScope:
    """Where the objects a driver renders for a session belong.

    Attributes
    ----------
    session:
        Session id (every object is labelled with it).
    namespace:
        The session's namespace (``cnibench-<session>``).
    gateway_node:
        Labels the egress-gw node already carries that select it alone (its
        ``kubernetes.io/hostname``); ``None``: the role label ``cnibench.io/role=egress-gw``.
    """

    session: str
    namespace: str
    gateway_node: Mapping[str, str] | None = None


class AgentAccess(Protocol):
    """What a driver may read from a running cluster to give the CNI's own account of its
    encryption and data path."""

    def node_annotations(self) -> list[tuple[str, Mapping[str, str]]]:
        """``(node name, annotations)`` of every node."""
        ...

    def exec_in_agents(
        self, namespace: str, selector: str, container: str, argv: Sequence[str]
    ) -> list[tuple[str, str]]:
        """``(node name, output)`` of ``argv`` run in ``container`` of every pod matching
        the label ``selector`` in ``namespace``."""
        ...


class CniDriver(Protocol):
    """One CNI: how to install it and what its running datapath needs from cnibench.

    Every method but :meth:`definition` has a default in :class:`DriverBase` that refuses
    with :class:`~cnibench.errors.UnsupportedError`, so a driver implements only what its CNI
    offers (and declares it in the definition's capabilities).
    """

    @property
    def name(self) -> str:
        """The CNI's ``--cni`` name (its key in :data:`~cnibench.backends.kube.cnis.DRIVERS`)."""
        ...

    @property
    def version(self) -> str:
        """The CNI's pinned release (what a cluster records as its CNI version unless a
        :class:`~cnibench.backends.kube.cni_types.CniVersions` overrides it): the one
        place it is written."""
        ...

    @property
    def related_versions(self) -> Mapping[str, str]:
        """Other releases pinned with the CNI, by name (Cilium's Gateway API CRDs:
        ``cilium-gateway-api``)."""
        ...

    @property
    def own_images(self) -> tuple[CniImage, ...]:
        """The images the CNI's objects run that cnibench references itself (public and
        offline, written from :attr:`version` or the offline recipe's): registered with the
        driver, so ``CNIBENCH_IMAGE_<NAME>`` overrides each; ``()`` when the CNI's installer
        names its images."""
        ...

    @property
    def offline(self) -> OfflineRecipe | None:
        """How the offline image set builds the CNI (its recipe's ``image_name`` is one of
        :attr:`own_images`), ``None`` when it cannot."""
        ...

    @property
    def not_offline(self) -> str:
        """Why there is no offline build (when :attr:`offline` is ``None``), ``""`` if unknown."""
        ...

    @property
    def kernel_module(self) -> str:
        """A kernel module the CNI cannot run without, whatever is built (``""``: none)."""
        ...

    @property
    def cluster_scoped_kinds(self) -> tuple[tuple[str, str], ...]:
        """``(apiVersion, kind)`` of the cluster-scoped objects the driver renders (session
        labelled, so ``cnibench clean`` finds them outside the session's namespace)."""
        ...

    @property
    def egress_needs_ip_range(self) -> bool:
        """Whether :meth:`egress_objects` needs an egress IP range (the backend derives one on
        kind, else reads the cluster option or the environment)."""
        ...

    def service_proxy(self, options: Mapping[str, str]) -> str:
        """What serves ClusterIP Services with these ``--cni`` options, e.g. ``"kube-proxy
        iptables"`` or ``"cilium eBPF"``: a data-path factor the report holds equal when it
        compares two CNIs (:mod:`cnibench.report.configs`)."""
        ...

    def datapath_settings(self, values: Mapping[str, Any]) -> dict[str, str]:
        """What the CNI's installer ``values`` (its chart values, as the environment
        fingerprint records them) ask of the data path, in the words the report compares
        (``{"masquerade": "bpf", "egress gateway": "on"}``): settings the ``--cni`` label
        does not name, which two configurations of one CNI must share to be compared on one
        factor. ``{}`` when the CNI has none."""
        ...

    def datapath_status(self, access: AgentAccess) -> dict[str, str]:
        """The data-path settings the CNI's running agents report, read through ``access``,
        in the words of :meth:`datapath_settings` (plus ``"service proxy"`` where the CNI
        serves Services itself, in the words of :meth:`service_proxy`). ``{}`` when the CNI
        reports none.

        Raises
        ------
        cnibench.errors.CnibenchError
            A command in an agent fails.
        """
        ...

    def definition(
        self,
        spec: ClusterSpec,
        *,
        versions: CniVersions,
        images: Images,
        k8s_service_host: str,
    ) -> CniDefinition:
        """The CNI's definition for ``spec``, with :attr:`CniDefinition.manifests` filled when
        cnibench renders the CNI's objects itself.

        Parameters
        ----------
        spec:
            Cluster spec; ``spec.encryption`` is already known to be ``""`` or
            ``"wireguard"``.
        versions:
            Versions overriding the drivers' own pins (a driver reads its own with
            ``versions.version(self.name, self.version)``).
        images:
            Images of the objects rendered for the CNI.
        k8s_service_host:
            API server host, for CNIs that replace kube-proxy (``""`` when unknown).

        Raises
        ------
        cnibench.errors.ConfigError
            An option or encryption the CNI does not take (one line).
        """
        ...

    def manifests(self, definition: CniDefinition, images: Images) -> list[dict[str, Any]]:
        """The objects that install the CNI as ``definition`` describes it, in apply order
        (namespaces and RBAC before workloads); empty for a CNI installed by chart or release
        manifest."""
        ...

    def egress_objects(
        self,
        scope: ObjectScope,
        *,
        clients: Sequence[str],
        destination: str,
        egress_ip_range: tuple[str, str] | None,
    ) -> list[dict[str, Any]]:
        """The objects sending the pods ``clients`` to ``destination`` through the egress-gw
        node. The last one's name is the ``cnibench.io/egress`` label value the clients must
        carry.

        Raises
        ------
        cnibench.errors.UnsupportedError
            No egress gateway, or a needed egress IP range is missing.
        """
        ...

    def egress_source(self, *, gateway_ip: str, egress_ip_range: tuple[str, str] | None) -> str:
        """The source address an external host sees with the gateway on."""
        ...

    def priority_objects(
        self, scope: ObjectScope, spec: PolicySpec, case: PriorityCase
    ) -> list[dict[str, Any]]:
        """One CNI policy per layer of ``case`` (a Kubernetes deny-all, when the case has one,
        is the cluster's and not included).

        Raises
        ------
        cnibench.errors.UnsupportedError
            No policy API of its own, or a case it cannot express.
        """
        ...

    def l7_policy(
        self, scope: ObjectScope, *, name: str, target: str, port: int, method: str, path: str
    ) -> dict[str, Any]:
        """The CNI's HTTP rule allowing only ``method`` on exactly ``path`` to
        ``target:port``.

        Raises
        ------
        cnibench.errors.UnsupportedError
            No L7 policy.
        """
        ...

    def encryption_status(self, access: AgentAccess) -> EncryptionStatus:
        """The CNI's own account of its encryption, read through ``access``.

        Raises
        ------
        cnibench.errors.UnsupportedError
            The CNI cannot encrypt.
        """
        ...


class DriverBase:
    """Defaults of :class:`CniDriver` for a CNI with none of the runtime features: each
    feature method refuses with :class:`~cnibench.errors.UnsupportedError` naming the CNI."""

    name = ""
    version = ""
    related_versions: Mapping[str, str] = MappingProxyType({})
    own_images: tuple[CniImage, ...] = ()
    offline: OfflineRecipe | None = None
    not_offline = ""
    kernel_module = ""
    cluster_scoped_kinds: tuple[tuple[str, str], ...] = ()
    egress_needs_ip_range = False

    def service_proxy(self, options: Mapping[str, str]) -> str:
        """kube-proxy in the mode the ``kube-proxy`` option names (iptables by default)."""
        return f"kube-proxy {options.get('kube-proxy', 'iptables')}"

    def datapath_settings(self, values: Mapping[str, Any]) -> dict[str, str]:
        """None: the CNI's values ask nothing of the data path that its label does not say."""
        return {}

    def datapath_status(self, access: AgentAccess) -> dict[str, str]:
        """None: the CNI's agents report nothing cnibench reads."""
        return {}

    def manifests(self, definition: CniDefinition, images: Images) -> list[dict[str, Any]]:
        """None: installed by chart, release manifest, or kind itself."""
        return []

    def egress_objects(
        self,
        scope: ObjectScope,
        *,
        clients: Sequence[str],
        destination: str,
        egress_ip_range: tuple[str, str] | None,
    ) -> list[dict[str, Any]]:
        """Refused: no egress gateway."""
        raise UnsupportedError(f"{self.name} has no egress gateway")

    def egress_source(self, *, gateway_ip: str, egress_ip_range: tuple[str, str] | None) -> str:
        """The egress-gw node's address."""
        return gateway_ip

    def priority_objects(
        self, scope: ObjectScope, spec: PolicySpec, case: PriorityCase
    ) -> list[dict[str, Any]]:
        """Refused: no policy API of its own."""
        raise UnsupportedError(
            f"{self.name} has no policy API of its own: priority case {case.name} needs one"
        )

    def l7_policy(
        self, scope: ObjectScope, *, name: str, target: str, port: int, method: str, path: str
    ) -> dict[str, Any]:
        """Refused: no L7 policy."""
        raise UnsupportedError(f"{self.name} has no L7 (HTTP) policy")

    def encryption_status(self, access: AgentAccess) -> EncryptionStatus:
        """Refused: nothing to report."""
        raise UnsupportedError(f"{self.name} has no encryption to report")
