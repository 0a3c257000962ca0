"""The egress gateway on Kubernetes: the CNI driver's objects and the client pods' label.

:class:`KubeEgressGateway` labels the client pods ``cnibench.io/egress=<name>`` and applies
what the CNI's driver renders
(:meth:`~cnibench.backends.kube.cnis.base.CniDriver.egress_objects`): the driver's last object
is the one whose name the label carries. The source address the external host then sees is the
driver's to say (an egress IP, or the egress-gw node's address).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from cnibench.backends.base import Capability, Endpoint, NodeRole
from cnibench.backends.kube.api import api_error_message
from cnibench.backends.kube.render import HOSTNAME_LABEL
from cnibench.backends.kube.runtime import KubeRuntime
from cnibench.errors import ProvisioningError, UnsupportedError

__all__ = ["EGRESS_LABEL", "KubeEgressGateway"]

EGRESS_LABEL = "cnibench.io/egress"
"""Pod label selecting the clients of an egress gateway; its value names the driver's object."""


class KubeEgressGateway:
    """The egress objects of one session and the pods labelled for them.

    Parameters
    ----------
    runtime:
        The cluster's shared state (CNI driver, namespace, nodes, egress IP range).
    """

    def __init__(self, runtime: KubeRuntime) -> None:
        self._runtime = runtime
        self._objects: list[dict[str, Any]] = []
        self._pods: list[str] = []

    def manifests(self, clients: Sequence[str], *, destination: str) -> list[dict[str, Any]]:
        """The CNI driver's egress objects sending ``clients`` to ``destination`` via the
        gateway. The last object is always the one whose :data:`EGRESS_LABEL` value the
        clients must carry.

        Raises
        ------
        cnibench.errors.UnsupportedError
            The CNI has no egress gateway (as configured), or lacks what it needs (an egress
            IP range).
        """
        rt = self._runtime
        if Capability.EGRESS_GATEWAY not in rt.cni.capabilities:
            raise UnsupportedError(f"{rt.cni.name} has no egress gateway")
        gateway = rt.target(NodeRole.EGRESS_GW)
        if not gateway.labels:
            raise UnsupportedError(
                f"the egress-gw node {gateway.name} has no {HOSTNAME_LABEL} label, and"
                f" {rt.cni.name}'s egress gateway selects its node by a label"
            )
        return rt.driver.egress_objects(
            rt.scope,
            clients=clients,
            destination=destination,
            egress_ip_range=rt.egress_ip_range,
        )

    def expected_source(self) -> str:
        """Source address the external host sees with the gateway on, as the driver says
        (e.g. an egress IP of the range, or the egress-gw node's address)."""
        rt = self._runtime
        return rt.driver.egress_source(
            gateway_ip=rt.node(NodeRole.EGRESS_GW).ip, egress_ip_range=rt.egress_ip_range
        )

    def enable(self, clients: Sequence[Endpoint], *, destination: str) -> str:
        """Label ``clients`` and apply the CNI's egress objects (:meth:`manifests`); returns
        :meth:`expected_source`."""
        rt = self._runtime
        objects = self.manifests([c.name for c in clients], destination=destination)
        tag = {EGRESS_LABEL: objects[-1]["metadata"]["name"]}
        rt.announce_cluster_wide(objects, why=f"{rt.cni.name}'s egress gateway")
        for endpoint in clients:
            rt.core.patch_namespaced_pod(endpoint.name, rt.namespace, {"metadata": {"labels": tag}})
            self._pods.append(endpoint.name)
        rt.applier.apply_all(objects)
        self._objects.extend(objects)
        return self.expected_source()

    def disable(self) -> None:
        """Delete the egress objects and unlabel the client pods. Safe to repeat.

        Raises
        ------
        cnibench.errors.ProvisioningError
            A client pod that still exists could not be unlabelled.
        """
        from kubernetes.client.exceptions import ApiException

        rt = self._runtime
        # Last applied, first deleted: a CNI may refuse to free an address pool still in use.
        for manifest in reversed(self._objects):
            rt.applier.delete(manifest)
        self._objects.clear()
        for name in self._pods:
            try:
                rt.core.patch_namespaced_pod(
                    name, rt.namespace, {"metadata": {"labels": {EGRESS_LABEL: None}}}
                )
            except ApiException as exc:
                if exc.status != 404:
                    raise ProvisioningError(
                        f"unlabelling pod {name} failed: {api_error_message(exc)}"
                    ) from exc
        self._pods.clear()

    def delete_objects(self) -> None:
        """Delete the egress objects without touching the pods (at teardown: some are
        cluster-scoped and outlive the namespace)."""
        for manifest in self._objects:
            self._runtime.applier.delete(manifest)
        self._objects.clear()
