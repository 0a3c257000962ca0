"""Services on the lab: a virtual IP and NodePorts in front of a pod, on every node.

:class:`LabServices` loads what :mod:`cnibench.backends.lab.service_rules` renders into every
node's namespace (as kube-proxy runs on every node: a client's own node translates the virtual
IP, the server's node a NodePort) and remembers the engine, so the Service can be replaced or
removed.
"""

from __future__ import annotations

from collections.abc import Sequence

from cnibench.backends.base import Endpoint, Service
from cnibench.backends.lab.pods import LabPods
from cnibench.backends.lab.runtime import LabRuntime
from cnibench.backends.lab.service_rules import (
    ServiceProxy,
    iptables_services_removal,
    iptables_services_restore,
    nft_services_ruleset,
    plan_service,
)
from cnibench.errors import ConfigError

__all__ = ["LAB_SERVICE_PROXIES", "LabServices"]

LAB_SERVICE_PROXIES = (ServiceProxy.IPTABLES, ServiceProxy.NFTABLES)
"""The proxies the lab programs (eBPF is a CNI's: see ``Capability.SERVICE_EBPF``)."""
_ENGINES = tuple(proxy.value for proxy in LAB_SERVICE_PROXIES)

_FEATURE = "svc"
"""The nftables table's feature name (see :meth:`LabRuntime.table`)."""


class LabServices:
    """The one Service of a lab (and the further Services loaded beside it)."""

    def __init__(self, runtime: LabRuntime, pods: LabPods) -> None:
        self._runtime = runtime
        self._pods = pods
        self._proxy: ServiceProxy | None = None

    def forget(self) -> None:
        """Forget the tables: the node namespaces are being deleted."""
        self._proxy = None

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
            for node in runtime.plan.nodes:
                what = f"load {1 + others} Service(s) with {engine.value} on {node.name}"
                if engine is ServiceProxy.IPTABLES:
                    runtime.iptables_restore(
                        node.name, what, iptables_services_restore(service, fillers), timeout=300
                    )
                else:
                    runtime.nft(
                        node.name,
                        what,
                        nft_services_ruleset(runtime.table(_FEATURE), service, fillers),
                    )
                # Set at the first node: a failure half-way still removes what was loaded.
                self._proxy = engine
        return Service(
            cluster_ip=service.cluster_ip,
            node_ip=pod.node.ip,
            ports={target: port for port, target, _ in service.ports},
            node_ports={target: node_port for _, target, node_port in service.ports},
        )

    def remove(self) -> None:
        """See :meth:`LabCluster.remove_service`."""
        runtime = self._runtime
        with runtime.lock:
            engine, self._proxy = self._proxy, None
            if engine is None:
                return
            for node in runtime.plan.nodes:
                if engine is ServiceProxy.IPTABLES:
                    what = f"remove the Services on {node.name}"
                    runtime.iptables_restore(node.name, what, iptables_services_removal())
                else:
                    runtime.drop_feature(node.name, _FEATURE, "the Services")
