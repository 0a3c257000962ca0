"""The Kubernetes backend: a provider's cluster, the CNI installed, a :class:`KubeCluster`."""

from __future__ import annotations

import os
import shutil
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from cnibench.backends.base import Capability, ClusterSpec, NodePins, PolicyChoices
from cnibench.backends.kube.addons import AddonVersions, install_cni, install_metallb, wait_rollouts
from cnibench.backends.kube.cluster import KubeCluster, Timeouts
from cnibench.backends.kube.cni import CniDefinition, CniVersions, cni_definition
from cnibench.backends.kube.cnis import DRIVERS, cni_names
from cnibench.backends.kube.detect import agent_daemonsets, check_cni, detect_cnis, list_daemonsets
from cnibench.backends.kube.existing import existing_refusal
from cnibench.backends.kube.external import (
    EGRESS_IP_RANGE_ENV,
    DockerNetwork,
    HostExternal,
    external_address_from,
    inspect_docker_network,
    load_balancer_range,
    parse_ip_range,
    ranges_overlap,
    top_of_subnet_range,
)
from cnibench.backends.kube.images import OFFLINE_IMAGES, Images, require_pullable
from cnibench.backends.kube.node_usage import KindNodeUsage
from cnibench.backends.kube.offline.plan import not_offline_reason
from cnibench.backends.kube.offline.status import missing_build
from cnibench.backends.kube.providers import Provider, terraform_command
from cnibench.backends.kube.render import KUBE_SESSION_LEASE
from cnibench.engine import answering_engine
from cnibench.engine.api import EngineReads
from cnibench.errors import CnibenchError, ConfigError, ProvisioningError, UnsupportedError
from cnibench.leases import hold

__all__ = ["KubeBackend", "api_client_for", "existing_cni", "wait_cni_ready"]


def api_client_for(kubeconfig: Path, context: str = "") -> Any:
    """A :class:`kubernetes.client.ApiClient` for a kubeconfig (and context)."""
    from kubernetes import client, config

    configuration = client.Configuration()
    load: Any = config.load_kube_config
    try:
        load(
            config_file=str(kubeconfig),
            context=context or None,
            client_configuration=configuration,
        )
    except (config.ConfigException, OSError) as exc:
        # The client's messages name keys and files, never their values; keep the first line.
        first = (str(exc).splitlines() or [type(exc).__name__])[0]
        raise ProvisioningError(f"kubeconfig {kubeconfig} is unusable: {first}") from exc
    except yaml.YAMLError as exc:
        # YAML errors can quote the offending text, which may be a token: give the line only.
        mark = getattr(exc, "problem_mark", None)
        where = f" (line {mark.line + 1})" if mark is not None else ""
        raise ProvisioningError(f"kubeconfig {kubeconfig} is not valid YAML{where}") from exc
    return client.ApiClient(configuration)


def wait_cni_ready(
    api_client: Any, cni: CniDefinition, *, timeout: float = 600.0, installed_now: bool = True
) -> None:
    """Wait until every :class:`~cnibench.backends.kube.cni.Readiness` workload is rolled out.

    ``installed_now=False`` (a cluster cnibench did not just install the CNI on: existing, or a
    reused kind cluster) fails at once when one of them does not exist, instead of waiting
    ``timeout`` seconds for something nobody is creating.

    Raises
    ------
    cnibench.errors.ProvisioningError
        If one is not ready within ``timeout`` seconds, or missing (named in the message).
    """
    missing = (
        ""
        if installed_now
        else f"is {cni.name} installed on this cluster? (--cni must name the CNI it runs;"
        " --recreate-cluster rebuilds a kind cluster)"
    )
    wait_rollouts(api_client, cni.readiness, timeout=timeout, owner=cni.name, missing=missing)


class KubeBackend:
    """Provision Kubernetes clusters through a provider (a
    :class:`~cnibench.backends.base.Backend`).

    Parameters
    ----------
    provider:
        :class:`~cnibench.backends.kube.providers.KindProvider`,
        :class:`~cnibench.backends.kube.providers.AksProvider` or
        :class:`~cnibench.backends.kube.providers.ExistingProvider`.
    versions, images:
        Pinned CNI versions and images.
    keep_cluster:
        Leave kind/aks clusters running at teardown (existing clusters are never deleted,
        only the session's namespace).
    timeouts:
        Cluster operation timeouts.
    external_address:
        Address of this host that pods reach (the egress target); overrides
        ``$CNIBENCH_EXTERNAL_ADDRESS`` and, on kind, the kind network's gateway. AKS and
        existing clusters have no external host without it (egress is then skipped).
    egress_ip_range:
        ``FIRST-LAST`` egress IPs, for a CNI whose egress gateway needs them (overrides
        ``$CNIBENCH_EGRESS_IP_RANGE`` and the kind default; the cluster option
        ``egress-ip-range`` overrides all).
    addon_versions:
        Pinned versions of MetalLB (kind clusters get it for LoadBalancer addresses).
    nodes:
        Nodes named for roles (``--nodes``); the other roles' nodes are chosen (see
        :func:`~cnibench.backends.kube.placement.choose_nodes`).
    """

    def __init__(
        self,
        provider: Provider,
        *,
        versions: CniVersions | None = None,
        images: Images | None = None,
        keep_cluster: bool = False,
        timeouts: Timeouts | None = None,
        external_address: str | None = None,
        egress_ip_range: str | None = None,
        addon_versions: AddonVersions | None = None,
        nodes: NodePins | None = None,
    ) -> None:
        self.provider = provider
        self.nodes = nodes or NodePins()
        self.versions = versions or CniVersions()
        self.images = images or Images.from_environment(os.environ)
        self.keep_cluster = keep_cluster
        self.timeouts = timeouts
        self.external_address = external_address_from(os.environ, external_address)
        configured_range = egress_ip_range or os.environ.get(EGRESS_IP_RANGE_ENV, "")
        self.egress_ip_range = parse_ip_range(configured_range) if configured_range else None
        self.addon_versions = addon_versions or AddonVersions()

    @property
    def deletes_clusters(self) -> bool:
        """Whether :meth:`KubeCluster.teardown` deletes the cluster: kind and AKS clusters
        unless ``keep_cluster``; existing clusters never (only the session namespace goes)."""
        return self.provider.name in ("kind", "aks") and not self.keep_cluster

    def host_side(
        self, spec: ClusterSpec, cni: CniDefinition, *, network: DockerNetwork | None = None
    ) -> tuple[HostExternal | None, tuple[str, str] | None]:
        """The external host and egress IP range for a cluster of ``spec``.

        The external address is the configured one, else (kind) the kind network's gateway,
        else none. The egress range, for a CNI whose driver's egress gateway needs one
        (:attr:`~cnibench.backends.kube.cnis.base.CniDriver.egress_needs_ip_range`), is the
        cluster option ``egress-ip-range``, else the configured one, else (kind) the top four
        addresses of the kind subnet.
        ``network`` is the kind network when already inspected.

        Raises
        ------
        cnibench.errors.ProvisioningError
            The kind network cannot be inspected when it is needed.
        """
        driver = DRIVERS.get(cni.name)
        needs_range = (
            driver is not None
            and driver.egress_needs_ip_range
            and Capability.EGRESS_GATEWAY in cni.capabilities
        )
        option = spec.options.get("egress-ip-range", "")
        egress_range = parse_ip_range(option) if option else self.egress_ip_range
        if (
            network is None
            and self.provider.name == "kind"
            and (not self.external_address or (needs_range and egress_range is None))
        ):
            network = inspect_docker_network(reads=self._engine())
        address = self.external_address or (network.gateway if network else "")
        if needs_range and egress_range is None and network is not None:
            egress_range = top_of_subnet_range(network.subnet)
        external = HostExternal(address) if address else None
        return external, egress_range if needs_range else None

    @property
    def name(self) -> str:
        """``"kube"``."""
        return "kube"

    @property
    def policy_choices(self) -> PolicyChoices:
        """None: a CNI enforces a NetworkPolicy with its own datapath (kube-router iptables and
        ipset, Cilium eBPF maps, Calico iptables or eBPF as installed), whatever engine is
        asked, and decides itself which packets its rules see (a NetworkPolicy has no such
        field; kube-router accepts established flows through conntrack before its rules, and
        how each other CNI does is its own design, not cnibench's choice). A condition naming
        either would label one measurement with a choice that did not run."""
        return PolicyChoices()

    @property
    def load_in_pods(self) -> bool:
        """True: ``--load-engine locust`` runs locust's master and ``--load-workers`` workers
        in client pods (the locust image, :attr:`~cnibench.backends.kube.images.Images.locust`)."""
        return True

    @property
    def clusters_coexist(self) -> bool:
        """False: a cluster per CNI costs minutes and a share of the machine, so each CNI's
        conditions take turns in rounds of their own."""
        return False

    def available(self) -> tuple[bool, str]:
        """Whether the provider's tools are installed (``kind``/``terraform`` or ``tofu``,
        ``helm``)."""
        needed = {"kind": ["kind", "helm"], "aks": ["helm"]}.get(self.provider.name, [])
        missing = [tool for tool in needed if shutil.which(tool) is None]
        if self.provider.name == "aks" and terraform_command() is None:
            missing.insert(0, "terraform or tofu")
        if missing:
            return False, f"missing tools: {', '.join(missing)}"
        return True, f"provider {self.provider.name}"

    def validate(self, specs: Sequence[ClusterSpec]) -> tuple[ClusterSpec, ...]:
        """Each spec's driver takes its options and features (:func:`cni_definition`); the
        first registered CNI, kind's own, when ``specs`` is empty (what a plain kind cluster
        runs).

        Raises
        ------
        cnibench.errors.ConfigError
            An unknown name, or an option or feature its driver refuses (one line).
        """
        for spec in specs:
            cni_definition(spec)  # the driver refuses options and features it does not take
        return tuple(specs) or (ClusterSpec(cni=cni_names()[0]),)

    def preflight(self, specs: Sequence[ClusterSpec]) -> None:
        """kind: the ``kind`` command is on PATH, a container engine answers (``docker info``,
        through ``DOCKER_HOST`` when set), and with the offline image set the images of
        ``specs`` (their CNIs and gateways) are built; the other providers check their own
        prerequisites when they are made.

        Raises
        ------
        cnibench.errors.ConfigError
            kind or the engine is missing, or the offline images are not built (the line names
            the ``cnibench images build`` to run).
        """
        self._push_to_registry(specs)
        if self.provider.name != "kind":
            return
        self._require_offline_build(specs)
        if shutil.which("kind") is None:
            raise ConfigError(
                "--cluster kind needs the kind command on PATH, and it is not there (install"
                " kind, or choose --cluster lab or existing)"
            )
        if not answering_engine(("docker",), timeout=10.0):
            raise ConfigError(
                "--cluster kind needs a container engine and none answers"
                f" (DOCKER_HOST={os.environ.get('DOCKER_HOST', 'unset')}): start one with"
                ' eval "$(cnibench engine up)", or choose --cluster lab or existing'
            )

    def unsupported(self, spec: ClusterSpec) -> str:
        """On an existing cluster, a setting cnibench would have to change there
        (:func:`~cnibench.backends.kube.existing.existing_refusal`: ``napi``, ``kube-proxy``,
        ``gateway``, encryption); elsewhere ``napi=threaded`` off kind, whose nodes are the
        only ones on this machine. ``""`` otherwise. Pure: asks no cluster."""
        if self.provider.name == "existing":
            refusal = existing_refusal(spec)
            if refusal:
                return refusal
        if spec.options.get("napi") == "threaded" and self.provider.name != "kind":
            return (
                f"napi=threaded needs --cluster kind (the nodes must be containers on this"
                f" machine; --cluster {self.provider.name})"
            )
        return ""

    def load_balancer_range(
        self, network: DockerNetwork, egress_range: tuple[str, str] | None
    ) -> tuple[str, str]:
        """MetalLB's address range on a kind network: 16 addresses right below the top four
        (which the default egress IP range takes).

        Raises
        ------
        cnibench.errors.ConfigError
            The subnet is too small, or a configured egress range overlaps the pool.
        """
        pool = load_balancer_range(network.subnet)
        if egress_range is not None and ranges_overlap(pool, egress_range):
            raise ConfigError(
                f"egress IP range {'-'.join(egress_range)} overlaps the MetalLB pool"
                f" {'-'.join(pool)} on the kind network {network.subnet}"
            )
        return pool

    def _node_usage(self) -> KindNodeUsage | None:
        """kind's nodes are containers of an engine on this machine: their cgroups can be
        read (the provider's engine names each node's process, its runner runs the host
        commands that thread a node's receive)."""
        if self.provider.name != "kind":
            return None
        runner = getattr(self.provider, "run", None)
        return KindNodeUsage(runner, engine=self._engine()) if callable(runner) else None

    def _engine(self) -> EngineReads:
        """What cnibench asks kind's engine itself: the provider's (tests give it a fake
        client), else the engine of ``$DOCKER_HOST``."""
        engine = getattr(self.provider, "engine", None)
        return engine if isinstance(engine, EngineReads) else EngineReads()

    def _push_to_registry(self, specs: Sequence[ClusterSpec]) -> None:
        """``--image-registry``: push cnibench's own images of ``specs`` from the engine of
        ``DOCKER_HOST`` to the registry the pods will pull them from. Without a
        ``DOCKER_HOST`` they are taken as pushed already (``cnibench images push``)."""
        registry = self.images.registry
        docker_host = os.environ.get("DOCKER_HOST", "")
        if not registry or not docker_host:
            return
        from cnibench.backends.kube.registry import push_images, pushable_tags

        cnis = _image_owners(specs)
        if self.provider.name != "kind":
            cnis = []  # the cluster runs its own CNI: only the pods' images are needed
        push_images(docker_host, pushable_tags(self.images, cnis), registry)

    def _require_offline_build(self, specs: Sequence[ClusterSpec]) -> None:
        """With the offline image set, refuse before any cluster is created when the images
        are not built: the line names the ``cnibench images build`` to run. Builds nothing."""
        if not self.images.offline:
            return
        names = _image_owners(specs)
        # With a registry the builds are still looked for under their own names in the engine.
        command = missing_build(OFFLINE_IMAGES if self.images.registry else self.images, names)
        if command:
            raise ConfigError(
                f"the offline images of this kind run are not built yet: run {command} (once per"
                " engine; nothing was created)"
            )

    def provision(self, spec: ClusterSpec) -> KubeCluster:
        """Get a cluster from the provider, install the CNI (kind/aks), start a session.

        Order on a new cluster: Gateway API CRDs when the CNI needs them (Established before
        the CNI starts), the CNI, its add-on charts, readiness, then on kind MetalLB with a
        pool from the kind network.

        Raises
        ------
        cnibench.errors.ConfigError
            Unknown CNI or options, or a locally built image on a cluster that pulls from
            registries (nothing is created); an existing cluster running another CNI than
            ``spec``'s, or a ``--nodes`` node that is missing or cannot hold the pods (nothing
            is created in the cluster).
        cnibench.errors.ProvisioningError
            With the failing step.
        cnibench.errors.UnsupportedError
            The offline image set has no build of the CNI, or the kernel lacks a module it
            needs (nothing is created).
        """
        if self.images.offline and self.provider.name != "existing":
            # Before anything is created: the offline set installs only what it could build.
            modules = [p.name for p in Path("/sys/module").glob("*")]
            reason = not_offline_reason(
                spec.cni, loaded_modules=modules, encryption=spec.encryption
            )
            if reason:
                raise UnsupportedError(reason)
        host = ""
        if self.provider.name == "kind":
            host = "cnibench-control-plane"  # replaced per cluster below
        cni = cni_definition(
            spec, versions=self.versions, images=self.images, k8s_service_host=host
        )
        require_pullable(self.images, self.provider.name)
        made = self.provider.ensure(spec, cni)
        if self.provider.name == "kind":
            cni = cni_definition(
                spec,
                versions=self.versions,
                images=self.images,
                k8s_service_host=f"{made.name}-control-plane",
            )
        provider = self.provider
        owned = self.deletes_clusters
        try:
            network = None
            if self.provider.name == "kind":
                network = inspect_docker_network(reads=self._engine())
            external, egress_range = self.host_side(spec, cni, network=network)
            api_client = api_client_for(made.kubeconfig, made.context)
            notes: list[str] = []
            if self.provider.name == "existing":
                # Before waiting on the CNI's workloads: a --cni naming another CNI than the
                # one running is refused in its own words, not as a missing workload.
                notes.append(existing_cni(api_client, spec))
            if made.created and self.provider.name != "existing":
                install_cni(api_client, cni, kubeconfig=made.kubeconfig, context=made.context)
            wait_cni_ready(api_client, cni, installed_now=made.created)
            if network is not None and not self.images.offline:
                # MetalLB comes from its release manifest; offline clusters have no
                # LoadBalancer addresses (only traffic splitting uses them).
                install_metallb(
                    api_client,
                    self.load_balancer_range(network, egress_range),
                    versions=self.addon_versions,
                )
            node_usage = self._node_usage()
            session = os.urandom(4).hex()
            # Its objects are this process's while it lives: `cnibench clean --kubeconfig` in
            # another shell keeps them (the lease ends with the process).
            session_lease = hold(KUBE_SESSION_LEASE, session)

            def release() -> None:
                session_lease.release()
                provider.delete(made)

            def kept() -> None:
                session_lease.release()
                provider.forget(made)

            cluster = KubeCluster(
                api_client,
                spec,
                cni,
                provider=self.provider.name,
                session=session,
                images=self.images,
                timeouts=self.timeouts,
                external=external,
                egress_ip_range=egress_range,
                release=release if owned else None,
                kept=None if owned else kept,
                node_usage=node_usage,
                pins=self.nodes,
                notes=notes,
                created=made.created,
            )
            cluster.start()
            if spec.options.get("napi") == "threaded":
                thread_receive(cluster, node_usage)
        except CnibenchError:
            if made.created and not self.keep_cluster:
                self.provider.delete(made)
            else:
                self.provider.forget(made)
            raise
        return cluster


def _image_owners(specs: Sequence[ClusterSpec]) -> list[str]:
    """The CNIs of ``specs`` and the gateways they name: what owns images a run needs."""
    return [spec.cni for spec in specs] + [
        spec.options["gateway"] for spec in specs if spec.options.get("gateway")
    ]


def existing_cni(api_client: Any, spec: ClusterSpec) -> str:
    """The line saying which CNI an existing cluster runs (found by its agent's DaemonSet).

    Raises
    ------
    cnibench.errors.ConfigError
        ``spec`` names another CNI than the one found (one line naming it).
    """
    try:
        daemonsets = list_daemonsets(api_client)
    except ProvisioningError as exc:  # e.g. no right to list DaemonSets in every namespace
        return f"CNI: not detected ({exc}); going on with --cni {spec.label}"
    return check_cni(spec, detect_cnis(daemonsets, agent_daemonsets()))


def thread_receive(cluster: KubeCluster, node_usage: KindNodeUsage | None) -> None:
    """``napi=threaded``: every role node receives in threads of its own, counted as its CPU.

    Raises
    ------
    cnibench.errors.ConfigError
        The cluster's nodes are not containers of an engine on this machine (not kind).
    cnibench.errors.ProvisioningError
        A node could not be threaded (see :meth:`KindNodeUsage.thread_napi`).
    """
    if node_usage is None:
        raise ConfigError(
            f"--cni {cluster.spec.label}: napi=threaded needs --cluster kind (the nodes must be"
            " containers on this machine)"
        )
    for node in cluster.nodes:
        node_usage.thread_napi(node.name)


if TYPE_CHECKING:
    from cnibench.backends.base import Backend, Cluster, Endpoint
    from cnibench.backends.kube.cluster import KubePod

    def _implements_protocols(
        backend: KubeBackend, cluster: KubeCluster, pod: KubePod
    ) -> tuple[Backend, Cluster, Endpoint]:
        # mypy proves here that the kube backend satisfies the scenarios' Protocols.
        return backend, cluster, pod
