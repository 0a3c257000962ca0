"""What a CNI driver may read from a running cluster, and so the CNI's account of its encryption
and of its data-path settings.

:class:`KubeAgentAccess` implements :class:`~cnibench.backends.kube.cnis.base.AgentAccess` (the
Nodes' annotations; a command in each of the CNI's agent pods) and hands itself to the driver's
:meth:`~cnibench.backends.kube.cnis.base.CniDriver.encryption_status`. It lives apart from
:mod:`cnibench.backends.kube.encryption`, which drivers import for parsing: this module needs the
driver registry, and so would make that import circular.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from cnibench.backends.base import EncryptionStatus, Node, NodeRole
from cnibench.backends.kube.pods import KubePod, exec_in_container
from cnibench.backends.kube.runtime import KubeRuntime
from cnibench.backends.kube.services import kube_proxy_mode
from cnibench.errors import CnibenchError

__all__ = ["AGENT_EXEC_TIMEOUT", "KubeAgentAccess"]

AGENT_EXEC_TIMEOUT = 30.0
"""Seconds a command in one agent pod may take (:meth:`KubeAgentAccess.exec_in_agents`)."""


class KubeAgentAccess:
    """The cluster as a CNI driver may read it (an
    :class:`~cnibench.backends.kube.cnis.base.AgentAccess`).

    Parameters
    ----------
    runtime:
        The cluster's shared state (API clients, the CNI's driver).
    """

    def __init__(self, runtime: KubeRuntime) -> None:
        self._runtime = runtime

    def encryption_status(self) -> EncryptionStatus:
        """The CNI's own account of its encryption, as its driver reads it (Node annotations
        or the agents' status).

        Raises
        ------
        cnibench.errors.UnsupportedError
            For CNIs that cannot encrypt.
        """
        return self._runtime.driver.encryption_status(self)

    def datapath_settings(self) -> dict[str, str]:
        """The data-path settings the running cluster reports, not what was asked: the CNI's
        agents through its driver (:meth:`~cnibench.backends.kube.cnis.base.CniDriver.
        datapath_status`, e.g. Cilium's kube-proxy replacement, host routing and
        masquerading), and ``"service proxy"`` from kube-proxy's ConfigMap
        (``"kube-proxy iptables"``) where the CNI serves no Services itself. What cannot be
        read is left out (``{}`` at worst): the fingerprint is taken for the record, never a
        reason to stop a run."""
        from kubernetes.client.exceptions import ApiException

        rt = self._runtime
        try:
            settings = dict(rt.driver.datapath_status(self))
        except (CnibenchError, ApiException):
            settings = {}
        if "service proxy" not in settings:
            mode = kube_proxy_mode(rt.core)
            if mode:
                settings["service proxy"] = f"kube-proxy {mode}"
        return settings

    def node_annotations(self) -> list[tuple[str, Mapping[str, str]]]:
        """``(node name, annotations)`` of every node of the cluster."""
        return [
            (n.metadata.name, dict(n.metadata.annotations or {}))
            for n in self._runtime.core.list_node().items
        ]

    def exec_in_agents(
        self, namespace: str, selector: str, container: str, argv: Sequence[str]
    ) -> list[tuple[str, str]]:
        """``(node name, output)`` of ``argv`` in ``container`` of every pod matching
        ``selector`` in ``namespace`` (a CNI's agents), :data:`AGENT_EXEC_TIMEOUT` s each.

        Raises
        ------
        cnibench.errors.ToolError
            A command fails.
        """
        rt = self._runtime
        agents = rt.core.list_namespaced_pod(namespace, label_selector=selector)
        outputs: list[tuple[str, str]] = []
        for agent in agents.items:
            pod = KubePod(
                agent.metadata.name,
                namespace,
                Node(agent.spec.node_name, NodeRole.CLIENT, ""),
                agent.status.pod_ip or "",
                rt.api_client,
            )
            output = exec_in_container(pod, container, list(argv), timeout=AGENT_EXEC_TIMEOUT)
            outputs.append((agent.spec.node_name, output))
        return outputs
