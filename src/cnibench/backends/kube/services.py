"""Services on Kubernetes: the baseline's ``service`` and ``nodeport`` targets.

:class:`KubeServices` puts one NodePort Service (which also has a ClusterIP) in front of a
server pod, TCP and UDP on each of its ports with one NodePort per port for both protocols, and
``others`` further ClusterIP Services selecting the same pod, so they are real entries in the
proxy's tables (kube-proxy leaves a Service without endpoints out of its NAT chains). It waits
until the Service's EndpointSlice lists the pod as ready; the scenario's check then probes
through the Service until the proxy has programmed it.

Which proxy programs the Services is the cluster's, not cnibench's choice:
:func:`service_proxy` reads it (a CNI's kube-proxy replacement is ``ebpf``; otherwise
kube-proxy's own ConfigMap says ``iptables`` or ``nftables``), and the cluster offers that one
proxy's capability, so conditions asking for another are skipped naming it.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import yaml

from cnibench.backends.base import MAX_OTHER_SERVICES, Endpoint, Service, ServiceProxy
from cnibench.backends.kube import render
from cnibench.backends.kube.api import Applier, api_error_message
from cnibench.errors import ConfigError, ProvisioningError, UnsupportedError
from cnibench.waiting import wait_for

__all__ = ["BULK_WORKERS", "KubeServices", "kube_proxy_mode", "service_proxy"]

STATIC_BAND = 256
"""Addresses at the start of the Service range that the allocator keeps for Services whose
address is chosen (Kubernetes' static band: min(max(16, size / 16), 256) addresses; a /16's
and a /20's are 256)."""
STATIC_BAND_SKIP = 32
"""Addresses of the band left to addons (the API server's Service at the first, kube-dns at
the tenth)."""

BULK_WORKERS = 8
"""Concurrent API requests when Services are created or deleted in bulk (5000 one by one take
minutes; the API server handles a few at a time well even on 2 cores)."""

_KUBE_PROXY_CONFIG = ("kube-system", "kube-proxy", "config.conf")
"""Where kube-proxy's configuration lives (kubeadm, and so kind, write it there)."""

_PROTOCOLS = ("TCP", "UDP")


def service_proxy(core: Any, *, replaces_kube_proxy: bool) -> str:
    """The proxy that programs this cluster's Services (a :class:`ServiceProxy` value), or
    ``""`` when it cannot be told (kube-proxy's ConfigMap is unreadable or names ``ipvs``).

    ``replaces_kube_proxy``: the CNI runs without kube-proxy (Cilium's kube-proxy
    replacement), so its eBPF programs the Services.
    """
    if replaces_kube_proxy:
        return ServiceProxy.EBPF.value
    mode = kube_proxy_mode(core)
    return mode if mode in (ServiceProxy.IPTABLES, ServiceProxy.NFTABLES) else ""


def kube_proxy_mode(core: Any) -> str:
    """kube-proxy's mode as its ConfigMap (``kube-system/kube-proxy``, ``config.conf``) sets
    it: ``"iptables"`` when it names none (kube-proxy's default), else the mode it names
    (``"nftables"``, ``"ipvs"``); ``""`` when there is no readable ConfigMap (no kube-proxy,
    as under a kube-proxy replacement on kind)."""
    from kubernetes.client.exceptions import ApiException

    namespace, name, key = _KUBE_PROXY_CONFIG
    try:
        config_map = core.read_namespaced_config_map(name, namespace)
    except ApiException:
        return ""
    try:
        config = yaml.safe_load((config_map.data or {}).get(key, "")) or {}
    except yaml.YAMLError:
        return ""
    return str(config.get("mode") or "iptables") if isinstance(config, dict) else ""


def proxy_hint(proxy: str) -> str:
    """Why a condition with another proxy than ``proxy`` (the cluster's) is skipped."""
    if not proxy:
        return (
            "which proxy programs this cluster's Services could not be told (kube-proxy's"
            " ConfigMap kube-system/kube-proxy is unreadable or names ipvs)"
        )
    source = (
        "the CNI's kube-proxy replacement"
        if proxy == ServiceProxy.EBPF
        else "kube-proxy's mode in kube-system/kube-proxy"
    )
    return f"this cluster's Services go through {proxy} ({source}): choose --proxy {proxy}"


class KubeServices:
    """The one measured Service of a session namespace, and the Services loaded beside it.

    Parameters
    ----------
    core:
        A ``CoreV1Api``.
    applier:
        Server-side apply of the objects.
    namespace, session:
        Where the Services go and the label they carry.
    proxy:
        The cluster's proxy (:func:`service_proxy`).
    ready_timeout:
        Seconds the Service's endpoint may take to be listed as ready.
    """

    def __init__(
        self,
        core: Any,
        applier: Applier,
        *,
        namespace: str,
        session: str,
        proxy: str,
        ready_timeout: float,
    ) -> None:
        self._core = core
        self._applier = applier
        self.namespace = namespace
        self.session = session
        self.proxy = proxy
        self.ready_timeout = ready_timeout
        self._objects: dict[str, dict[str, Any]] = {}
        """Applied Services by name, in the order they were first applied."""

    def _service(
        self, name: str, endpoint: str, ports: Sequence[Mapping[str, Any]], *, node_port: bool
    ) -> dict[str, Any]:
        return render.service(
            name,
            namespace=self.namespace,
            session=self.session,
            endpoint=endpoint,
            ports=ports,
            node_port=node_port,
        )

    def _apply(self, manifest: dict[str, Any]) -> dict[str, Any]:
        # Remembered first: a Service the server took before a later step failed is removed.
        self._objects.setdefault(manifest["metadata"]["name"], manifest)
        return self._applier.apply(manifest)

    def expose(self, server: Endpoint, ports: Sequence[int], *, proxy: str, others: int) -> Service:
        """See :meth:`cnibench.backends.base.Cluster.expose`.

        Raises
        ------
        UnsupportedError
            ``proxy`` is not the cluster's (:func:`proxy_hint` says which it is).
        ConfigError
            ``others`` out of range.
        ProvisioningError
            The server refused a Service, or the pod was not listed as its ready endpoint in
            time.
        """
        if proxy != self.proxy:
            raise UnsupportedError(proxy_hint(self.proxy))
        if not 0 <= others <= MAX_OTHER_SERVICES:
            raise ConfigError(f"others={others}: from 0 to {MAX_OTHER_SERVICES} further Services")
        self.remove()
        name = f"{server.name}-svc"
        # The further Services first, in bulk, and the measured one last: the proxy programs
        # them in the order it learns of them, so once the measured Service answers the whole
        # batch is in its tables (the scenario times that).
        self._apply_many(
            [
                self._service(
                    f"{name}-{index:05d}", server.name, [_port(ports[0], "TCP")], node_port=False
                )
                for index in range(others)
            ]
        )
        # NodePorts are allocated for TCP first, then UDP asks for the same ones, so one
        # NodePort per pod port serves both protocols (as ClusterIP ports do).
        tcp = [_port(port, "TCP") for port in ports]
        first = self._apply(self._service(name, server.name, tcp, node_port=True))
        node_ports = {
            int(entry["port"]): int(entry["nodePort"]) for entry in first["spec"]["ports"]
        }
        both = [
            {**_port(port, protocol), "nodePort": node_ports[port]}
            for port in ports
            for protocol in _PROTOCOLS
        ]
        stored = self._apply(self._service(name, server.name, both, node_port=True))
        self._wait_ready_endpoint(name, server.ip)
        return Service(
            cluster_ip=str(stored["spec"]["clusterIP"]),
            node_ip=server.node.ip,
            ports={port: port for port in ports},
            node_ports=node_ports,
        )

    def free_service_address(self) -> str:
        """See :meth:`cnibench.backends.base.Cluster.free_service_address`: the lowest address
        of the Service range's static band (its first 256, where the allocator hands out no
        address while another is free) that no Service of any namespace holds.

        Raises
        ------
        ProvisioningError
            The Services cannot be listed, or the band is full.
        """
        from kubernetes.client.exceptions import ApiException

        try:
            services = self._core.list_service_for_all_namespaces().items
            first = self._core.read_namespaced_service("kubernetes", "default").spec.cluster_ip
        except ApiException as exc:
            raise ProvisioningError(
                f"the cluster's Service addresses cannot be read: {api_error_message(exc)}"
            ) from exc
        held = {str(item.spec.cluster_ip) for item in services if item.spec is not None}
        # The API server's own Service takes the range's first address; the band's first
        # addresses are taken by addons (kube-dns at .10), so the search starts after them.
        start = ipaddress.ip_address(first)
        for offset in range(STATIC_BAND_SKIP, STATIC_BAND):
            candidate = str(start + offset)
            if candidate not in held:
                return candidate
        raise ProvisioningError(
            f"no free address among the {STATIC_BAND} after {first}: too many Services with"
            " addresses of their choosing"
        )

    def add_service(self, server: Endpoint, port: int, *, address: str) -> None:
        """See :meth:`cnibench.backends.base.Cluster.add_service`: a ClusterIP Service at
        ``address`` selecting ``server``, returning once the API server stored it (its
        EndpointSlice and the proxy's rules come after, as for any new Service).

        Raises
        ------
        ProvisioningError
            No Service of :meth:`expose` to add beside, or the server refused this one (an
            address taken meanwhile, or outside the Service range).
        """
        if not self._objects:
            raise ProvisioningError("add_service needs the Service of expose first")
        name = f"{server.name}-add-{len(self._objects):05d}"
        manifest = self._service(name, server.name, [_port(port, "TCP")], node_port=False)
        manifest["spec"]["clusterIP"] = address
        self._apply(manifest)

    def _wait_ready_endpoint(self, name: str, address: str) -> None:
        """Wait until an EndpointSlice of Service ``name`` lists ``address`` as ready."""
        from kubernetes import client
        from kubernetes.client.exceptions import ApiException

        discovery: Any = client.DiscoveryV1Api(self._core.api_client)
        seen = "no EndpointSlice"

        def listed_ready() -> bool:
            nonlocal seen
            try:
                slices = discovery.list_namespaced_endpoint_slice(
                    self.namespace, label_selector=f"kubernetes.io/service-name={name}"
                ).items
            except ApiException as exc:
                raise ProvisioningError(
                    f"EndpointSlices of Service {name} cannot be read: {api_error_message(exc)}"
                ) from exc
            for item in slices:
                for endpoint in item.endpoints or []:
                    ready = endpoint.conditions is None or endpoint.conditions.ready is not False
                    if address in (endpoint.addresses or []):
                        if ready:
                            return True
                        seen = f"{address} listed but not ready"
            return False

        wait_for(
            listed_ready,
            timeout=self.ready_timeout,
            what=f"Service {name} to list {address} as a ready endpoint",
            interval=0.5,
            last_seen=lambda: seen,
            error=ProvisioningError,
        )

    def _apply_many(self, manifests: Sequence[dict[str, Any]]) -> None:
        """Apply ``manifests`` :data:`BULK_WORKERS` at a time (the first alone, so the
        client's discovery cache is filled once)."""
        for manifest in manifests:
            self._objects.setdefault(manifest["metadata"]["name"], manifest)
        if not manifests:
            return
        self._applier.apply(manifests[0])
        with ThreadPoolExecutor(BULK_WORKERS, thread_name_prefix="cnibench-svc") as pool:
            list(pool.map(self._applier.apply, manifests[1:]))

    def remove(self) -> None:
        """Delete the Services (the further ones in bulk, the measured one last). Safe to
        repeat."""
        manifests = list(reversed(self._objects.values()))
        measured = [m for m in manifests if m["spec"].get("type") == "NodePort"]
        further = [m for m in manifests if m["spec"].get("type") != "NodePort"]
        with ThreadPoolExecutor(BULK_WORKERS, thread_name_prefix="cnibench-svc") as pool:
            list(pool.map(self._applier.delete, further))
        for manifest in measured:
            self._applier.delete(manifest)
        self._objects.clear()


def _port(port: int, protocol: str) -> dict[str, Any]:
    return {
        "name": f"{protocol.lower()}-{port}",
        "port": port,
        "targetPort": port,
        "protocol": protocol,
    }
