"""The Kubernetes backend: a provider's cluster, the CNI installed, a :class:`KubeCluster`."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from cnibench.backends.base import ClusterSpec
from cnibench.backends.kube.cluster import KubeCluster, Timeouts
from cnibench.backends.kube.cni import CniDefinition, CniVersions, cni_definition
from cnibench.backends.kube.external import (
    EGRESS_IP_RANGE_ENV,
    DockerNetwork,
    HostExternal,
    external_address_from,
    inspect_docker_network,
    parse_ip_range,
    top_of_subnet_range,
)
from cnibench.backends.kube.helm import helm_install_argv, write_values
from cnibench.backends.kube.images import Images
from cnibench.backends.kube.providers import Provider, ProviderCluster
from cnibench.errors import CnibenchError, ProvisioningError

__all__ = ["KubeBackend", "api_client_for", "wait_cni_ready"]


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


def wait_cni_ready(api_client: Any, cni: CniDefinition, *, timeout: float = 600.0) -> None:
    """Wait until every :class:`~cnibench.backends.kube.cni.Readiness` workload is rolled out.

    Raises
    ------
    cnibench.errors.ProvisioningError
        If one is not ready within ``timeout`` seconds (named in the message).
    """
    from kubernetes import client
    from kubernetes.client.exceptions import ApiException

    apps: Any = client.AppsV1Api(api_client)
    deadline = time.monotonic() + timeout
    for item in cni.readiness:
        while True:
            try:
                if item.kind == "DaemonSet":
                    status = apps.read_namespaced_daemon_set(item.name, item.namespace).status
                    ready = bool(status.desired_number_scheduled) and (
                        status.number_ready == status.desired_number_scheduled
                    )
                else:
                    status = apps.read_namespaced_deployment(item.name, item.namespace).status
                    ready = bool(status.available_replicas)
            except ApiException as exc:
                if exc.status != 404:
                    raise ProvisioningError(
                        f"{item.kind} {item.namespace}/{item.name}: HTTP {exc.status}"
                    ) from exc
                ready = False
            if ready:
                break
            if time.monotonic() > deadline:
                raise ProvisioningError(
                    f"{cni.name}: {item.kind} {item.namespace}/{item.name} not ready after"
                    f" {timeout:g} s"
                )
            time.sleep(2.0)


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
        ``FIRST-LAST`` addresses for Antrea egress (overrides ``$CNIBENCH_EGRESS_IP_RANGE``
        and the kind default; the cluster option ``egress-ip-range`` overrides all).
    network_runner:
        Runs ``docker network inspect`` (argv to stdout); tests pass a fake.
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
        network_runner: Callable[[Sequence[str]], str] | None = None,
    ) -> None:
        self.provider = provider
        self.versions = versions or CniVersions()
        self.images = images or Images.from_environment(os.environ)
        self.keep_cluster = keep_cluster
        self.timeouts = timeouts
        self.external_address = external_address_from(os.environ, external_address)
        configured_range = egress_ip_range or os.environ.get(EGRESS_IP_RANGE_ENV, "")
        self.egress_ip_range = parse_ip_range(configured_range) if configured_range else None
        self._network_runner = network_runner

    @property
    def deletes_clusters(self) -> bool:
        """Whether :meth:`KubeCluster.teardown` deletes the cluster: kind and AKS clusters
        unless ``keep_cluster``; existing clusters never (only the session namespace goes)."""
        return self.provider.name in ("kind", "aks") and not self.keep_cluster

    def host_side(
        self, spec: ClusterSpec, cni: CniDefinition
    ) -> tuple[HostExternal | None, tuple[str, str] | None]:
        """The external host and Antrea egress IP range for a cluster of ``spec``.

        The external address is the configured one, else (kind) the kind network's gateway,
        else none. The egress range is the cluster option ``egress-ip-range``, else the
        configured one, else (kind, Antrea) the top four addresses of the kind subnet.

        Raises
        ------
        cnibench.errors.ProvisioningError
            The kind network cannot be inspected when it is needed.
        """
        network: DockerNetwork | None = None
        needs_range = cni.egress_api == "antrea"
        option = spec.options.get("egress-ip-range", "")
        egress_range = parse_ip_range(option) if option else self.egress_ip_range
        if self.provider.name == "kind" and (
            not self.external_address or (needs_range and egress_range is None)
        ):
            network = inspect_docker_network(runner=self._network_runner)
        address = self.external_address or (network.gateway if network else "")
        if needs_range and egress_range is None and network is not None:
            egress_range = top_of_subnet_range(network.subnet)
        external = HostExternal(address) if address else None
        return external, egress_range if needs_range else None

    @property
    def name(self) -> str:
        """``"kube"``."""
        return "kube"

    def available(self) -> tuple[bool, str]:
        """Whether the provider's tools are installed (``kind``/``terraform``, ``helm``)."""
        needed = {"kind": ["kind", "helm"], "aks": ["terraform", "helm"]}.get(
            self.provider.name, []
        )
        missing = [tool for tool in needed if shutil.which(tool) is None]
        if missing:
            return False, f"missing tools: {', '.join(missing)}"
        return True, f"provider {self.provider.name}"

    def provision(self, spec: ClusterSpec) -> KubeCluster:
        """Get a cluster from the provider, install the CNI (kind/aks), start a session.

        Raises
        ------
        cnibench.errors.ConfigError
            Unknown CNI or options (nothing is created).
        cnibench.errors.ProvisioningError
            With the failing step.
        """
        host = ""
        if self.provider.name == "kind":
            host = "cnibench-control-plane"  # replaced per cluster below
        cni = cni_definition(spec, versions=self.versions, k8s_service_host=host)
        made = self.provider.ensure(spec, cni)
        if self.provider.name == "kind":
            cni = cni_definition(
                spec, versions=self.versions, k8s_service_host=f"{made.name}-control-plane"
            )
        provider = self.provider
        owned = self.deletes_clusters
        try:
            external, egress_range = self.host_side(spec, cni)
            api_client = api_client_for(made.kubeconfig, made.context)
            if made.created and self.provider.name != "existing":
                self._install_cni(cni, made)
            wait_cni_ready(api_client, cni)
            cluster = KubeCluster(
                api_client,
                spec,
                cni,
                provider=self.provider.name,
                session=os.urandom(4).hex(),
                images=self.images,
                timeouts=self.timeouts,
                external=external,
                egress_ip_range=egress_range,
                release=(lambda: provider.delete(made)) if owned else None,
            )
            cluster.start()
        except CnibenchError:
            if made.created and not self.keep_cluster:
                self.provider.delete(made)
            raise
        return cluster

    def _install_cni(self, cni: CniDefinition, made: ProviderCluster) -> None:
        if cni.chart is None:
            if not cni.manifest_urls:
                return
            if shutil.which("kubectl") is None:
                raise ProvisioningError(f"installing {cni.name} needs kubectl")
            for url in cni.manifest_urls:
                _checked(["kubectl", "--kubeconfig", str(made.kubeconfig), "apply", "-f", url])
            return
        with tempfile.TemporaryDirectory(prefix="cnibench-helm-") as tmp:
            values = write_values(cni.chart, Path(tmp))
            _checked(
                helm_install_argv(
                    cni.chart, values, kubeconfig=made.kubeconfig, context=made.context
                )
            )


def _checked(argv: list[str]) -> None:
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=900, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise ProvisioningError(f"{argv[0]} {argv[1]} failed: {exc}") from exc
    if done.returncode != 0:
        tail = (done.stderr.strip().splitlines() or [""])[-1]
        raise ProvisioningError(f"{argv[0]} {argv[1]} failed: {tail}")


if TYPE_CHECKING:
    from cnibench.backends.base import Backend, Cluster, Endpoint
    from cnibench.backends.kube.cluster import KubePod

    def _implements_protocols(
        backend: KubeBackend, cluster: KubeCluster, pod: KubePod
    ) -> tuple[Backend, Cluster, Endpoint]:
        # mypy proves here that the kube backend satisfies the scenarios' Protocols.
        return backend, cluster, pod
