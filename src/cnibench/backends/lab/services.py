"""Services on the lab: a virtual IP and NodePorts in front of a pod, on every node.

:class:`LabServices` loads what :mod:`cnibench.backends.lab.service_rules` renders into every
node's namespace (as kube-proxy runs on every node: a client's own node translates the virtual
IP, the server's node a NodePort) and remembers the engine and the Services, so the Service
can be replaced or removed, and one more added (:meth:`LabServices.add`: every node's tables
loaded again with it, as kube-proxy's full sync does; a lab's Service is in force once loaded).
"""

from __future__ import annotations

import ipaddress
from collections.abc import Sequence

from cnibench.backends.base import Endpoint, Service
from cnibench.backends.lab.pods import LabPods
from cnibench.backends.lab.runtime import LabRuntime
from cnibench.backends.lab.service_rules import (
    SERVICE_RANGE,
    LabService,
    ServiceProxy,
    iptables_services_removal,
    iptables_services_restore,
    nft_services_ruleset,
    plan_service,
)
from cnibench.errors import ConfigError, ProvisioningError

__all__ = ["LAB_SERVICE_PROXIES", "LabServices"]

LAB_SERVICE_PROXIES = (ServiceProxy.IPTABLES, ServiceProxy.NFTABLES)
"""The proxies the lab programs (eBPF is a CNI's: see ``Capability.SERVICE_EBPF``)."""
_ENGINES = tuple(proxy.value for proxy in LAB_SERVICE_PROXIES)

_FEATURE = "svc"
"""The nftables table's feature name (see :meth:`LabRuntime.table`)."""


class LabServices:
    """The one Service of a lab, the further Services loaded beside it, and those added one at
    a time after it (:meth:`add`)."""

    def __init__(self, runtime: LabRuntime, pods: LabPods) -> None:
        self._runtime = runtime
        self._pods = pods
        self._proxy: ServiceProxy | None = None
        self._service: LabService | None = None
        self._others: tuple[LabService, ...] = ()

    def forget(self) -> None:
        """Forget the tables: the node namespaces are being deleted."""
        self._proxy = None
        self._service, self._others = None, ()

    def expose(self, server: Endpoint, ports: Sequence[int], *, proxy: str, others: int) -> Service:
        """See :meth:`LabCluster.expose`."""
        runtime = self._runtime
        runtime.check_alive()
        if proxy not in _ENGINES:
            choices = ", ".join(_ENGINES)
            raise ConfigError(f"the lab has no service proxy {proxy!r}: choose {choices}")
        engine = ServiceProxy(proxy)
        pod = self._pods.own(server)
        service, fillers = plan_service(f"{pod.name}-svc", [pod.ip], ports, others=others)
        with runtime.lock:
            self.remove()
            self._load(engine, service, fillers)
        return Service(
            cluster_ip=service.cluster_ip,
            node_ip=pod.node.ip,
            ports={target: port for port, target, _ in service.ports},
            node_ports={target: node_port for _, target, node_port in service.ports},
        )

    def free_address(self) -> str:
        """See :meth:`LabCluster.free_service_address`: the address after the last Service's.

        Raises
        ------
        ProvisioningError
            No Service of :meth:`expose` yet, or the lab's Service range is full.
        """
        with self._runtime.lock:
            if self._service is None:
                raise ProvisioningError("a free Service address needs the Service of expose")
            taken = {ipaddress.ip_address(s.cluster_ip) for s in (self._service, *self._others)}
        candidate = max(taken) + 1
        if candidate not in SERVICE_RANGE or candidate == SERVICE_RANGE.broadcast_address:
            raise ProvisioningError(f"the lab's Service range {SERVICE_RANGE} is full")
        return str(candidate)

    def add(self, server: Endpoint, port: int, *, address: str) -> None:
        """See :meth:`LabCluster.add_service`: the tables of every node loaded again with one
        more Service (as kube-proxy's full sync writes them), returning once every node has
        them.

        Raises
        ------
        ConfigError
            A pod not of this lab, or an address outside the lab's Service range or taken.
        ProvisioningError
            No Service of :meth:`expose` yet, or a node refused the rules.
        """
        runtime = self._runtime
        runtime.check_alive()
        pod = self._pods.own(server)
        if ipaddress.ip_address(address) not in SERVICE_RANGE:
            raise ConfigError(f"{address} is outside the lab's Service range {SERVICE_RANGE}")
        with runtime.lock:
            if self._proxy is None or self._service is None:
                raise ProvisioningError("add_service needs the Service of expose first")
            if any(s.cluster_ip == address for s in (self._service, *self._others)):
                raise ConfigError(f"Service address {address} is taken")
            added = LabService(
                f"{pod.name}-add-{len(self._others)}", address, ((port, port, 0),), (pod.ip,)
            )
            self._load(self._proxy, self._service, (*self._others, added))

    def _load(
        self, engine: ServiceProxy, service: LabService, others: tuple[LabService, ...]
    ) -> None:
        """Load ``service`` after ``others`` into every node's tables (the runtime's lock
        held)."""
        runtime = self._runtime
        for node in runtime.plan.nodes:
            what = f"load {1 + len(others)} Service(s) with {engine.value} on {node.name}"
            if engine is ServiceProxy.IPTABLES:
                runtime.iptables_restore(
                    node.name, what, iptables_services_restore(service, others), timeout=300
                )
            else:
                runtime.nft(
                    node.name, what, nft_services_ruleset(runtime.table(_FEATURE), service, others)
                )
            # Set at the first node: a failure half-way still removes what was loaded.
            self._proxy = engine
        self._service, self._others = service, others

    def remove(self) -> None:
        """See :meth:`LabCluster.remove_service`."""
        runtime = self._runtime
        with runtime.lock:
            engine, self._proxy = self._proxy, None
            self._service, self._others = None, ()
            if engine is None:
                return
            for node in runtime.plan.nodes:
                if engine is ServiceProxy.IPTABLES:
                    what = f"remove the Services on {node.name}"
                    runtime.iptables_restore(node.name, what, iptables_services_removal())
                else:
                    runtime.drop_feature(node.name, _FEATURE, "the Services")
