"""The lab's egress gateway: chosen pods leave the cluster through the egress-gw node.

:class:`LabEgressGateway` loads and removes the routes and NAT that
:func:`~cnibench.backends.lab.plan.plan_egress` plans, and (routed and encrypted) lets the
gateway's WireGuard peer own the destination on client nodes.
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence

from cnibench.backends.base import Endpoint, NodeRole
from cnibench.backends.lab.plan import (
    EgressPlan,
    LabDatapath,
    egress_removal_steps,
    egress_steps,
    nat_steps,
    plan_egress,
)
from cnibench.backends.lab.pods import LabPods
from cnibench.backends.lab.runner import run_step, run_steps
from cnibench.backends.lab.runtime import LabRuntime
from cnibench.backends.lab.wireguard import LabWireGuard
from cnibench.errors import CnibenchError, ProvisioningError

__all__ = ["LabEgressGateway"]


class LabEgressGateway:
    """At most one egress gateway of one lab, on or off."""

    def __init__(self, runtime: LabRuntime, pods: LabPods, wireguard: LabWireGuard) -> None:
        self._runtime = runtime
        self._pods = pods
        self._wireguard = wireguard
        self._egress: EgressPlan | None = None

    def _tunnels_need_peers(self) -> bool:
        plan = self._runtime.plan
        return plan.encryption and plan.datapath is LabDatapath.ROUTED

    def enable(self, clients: Sequence[Endpoint], *, destination: str) -> str:
        """See :meth:`LabCluster.enable_egress_gateway`."""
        runtime = self._runtime
        runtime.check_alive()
        gateway = self._pods.node_plan(NodeRole.EGRESS_GW)
        pods = [self._pods.own(client) for client in clients]
        egress = plan_egress(
            runtime.plan, gateway, [(p.node.name, p.ip) for p in pods], destination
        )
        with runtime.lock:
            self.disable()
            self._egress = egress
            try:
                if self._tunnels_need_peers():
                    self._set_wireguard(egress, enabled=True)
                run_steps(egress_steps(runtime.plan, egress))
                run_steps(nat_steps(runtime.plan, egress))
            except BaseException:
                with contextlib.suppress(CnibenchError):
                    self.disable()
                raise
        return gateway.underlay_ip

    def _set_wireguard(self, egress: EgressPlan, *, enabled: bool) -> None:
        # Cryptokey routing drops packets to addresses no peer owns: on client nodes the
        # gateway peer must also own the destination while the gateway is on.
        client_nodes = sorted({node for node, _ in egress.clients})
        extra = {egress.gateway.name: [egress.destination]} if enabled else {}
        for node_name in client_nodes:
            self._wireguard.set_peers(self._runtime.plan.node_named(node_name), extra)

    def disable(self) -> None:
        """See :meth:`LabCluster.disable_egress_gateway`."""
        plan = self._runtime.plan
        with self._runtime.lock:
            egress = self._egress
            if egress is None:
                return
            errors: list[str] = []
            steps = [*egress_removal_steps(plan, egress), *nat_steps(plan)]
            for step in steps:
                try:
                    run_step(step)
                except ProvisioningError as exc:
                    errors.append(str(exc))
            if self._tunnels_need_peers():
                try:
                    self._set_wireguard(egress, enabled=False)
                except ProvisioningError as exc:
                    errors.append(str(exc))
            self._egress = None
        if errors:
            raise ProvisioningError("disable the egress gateway: " + "; ".join(errors))
