"""What a CNI driver may read from a running cluster, and so the CNI's account of its encryption.

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
