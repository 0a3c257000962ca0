"""Monitoring on Kubernetes: Prometheus and node-exporter in the session, and each node's own
CPU and memory.

:class:`KubeMonitoring` installs Prometheus and node-exporter on first use and reaches
Prometheus through a port-forward (:class:`~cnibench.backends.kube.pods.PodPortForward`). On
kind on this machine it also reads each role node's and the CNI agent's own cgroups
(:class:`~cnibench.backends.kube.node_usage.KindNodeUsage`) and fails a run whose agent
restarted in the middle. A cluster made for the session asks the runner for a warm-up first
(:data:`NEW_CLUSTER_WARM_UP`).
"""

from __future__ import annotations

from typing import Any

from cnibench.backends.base import NodeRole, ResourceUsage, WarmUp
from cnibench.backends.kube import render
from cnibench.backends.kube.node_usage import AgentPod, KindNodeUsage, agent_changes, agent_pods
from cnibench.backends.kube.pods import PodPortForward
from cnibench.backends.kube.runtime import KubeRuntime
from cnibench.errors import AgentRestartedError, MetricsError
from cnibench.waiting import wait_for

__all__ = ["METRICS_DEVICE_REGEX", "NEW_CLUSTER_WARM_UP", "KubeMonitoring"]

METRICS_DEVICE_REGEX = "^(eth|ens|enp).+$"
"""Node uplinks as named by kind (``eth0``) and Azure VMs (``eth0``/``ens*``)."""
NEW_CLUSTER_WARM_UP = WarmUp(
    settle_seconds=60.0, runs=1, reason="warm-up of a cluster made for this session"
)
"""What a cluster made for the session asks before its first measured run: up to 60 s for the
CNI's agents (and, with ``napi=threaded``, the role nodes) to settle, then one warm-up run
(kind, 2026-12-05: the first three runs on a new cluster read 9-16 % below the next two). A
reused or existing cluster asks nothing: its agents have long started."""


class KubeMonitoring:
    """Prometheus of one session and the nodes' own resource usage.

    Parameters
    ----------
    runtime:
        The cluster's shared state (namespace, images, nodes, CNI agents).
    node_usage:
        Reads each node's and the CNI agent's own cgroups (kind on this machine); ``None``:
        :meth:`resource_usage` is empty.
    """

    def __init__(self, runtime: KubeRuntime, node_usage: KindNodeUsage | None) -> None:
        self._runtime = runtime
        self._node_usage = node_usage
        self._agents_seen: dict[str, tuple[str, int]] = {}
        self._forward: PodPortForward | None = None
        self._cluster_objects: list[dict[str, Any]] = []

    def prometheus_url(self) -> str:
        """Install Prometheus + node-exporter on first use and return a port-forward URL.

        Raises
        ------
        cnibench.errors.MetricsError
            Prometheus is not Ready within ``timeouts.monitoring``, or cannot be forwarded to.
        """
        rt = self._runtime
        if self._forward is None:
            manifests = render.monitoring_manifests(
                namespace=rt.namespace,
                session=rt.session,
                images=rt.images,
                tolerations=rt.tolerations,
                node_addresses={node.name: node.ip for node in rt.nodes},
                prometheus_node=rt.target(NodeRole.SERVER),
            )
            rt.announce_cluster_wide(
                manifests, why="Prometheus to find node-exporter (CPU and memory per run)"
            )
            rt.applier.apply_all(manifests)
            self._cluster_objects.extend(
                m
                for m in render.monitoring_manifests(namespace=rt.namespace, session=rt.session)
                if m["kind"] in ("ClusterRole", "ClusterRoleBinding")
            )
            pod_name = self._wait_prometheus_pod()
            forward = PodPortForward(rt.api_client, rt.namespace, pod_name, render.PROMETHEUS_PORT)
            try:
                forward.check()
            except MetricsError:
                forward.close()
                raise
            self._forward = forward
        return f"http://127.0.0.1:{self._forward.local_port}"

    def _wait_prometheus_pod(self) -> str:
        rt = self._runtime
        seen = "no Prometheus pod"

        def ready_pod() -> str | None:
            nonlocal seen
            pods = rt.core.list_namespaced_pod(
                rt.namespace, label_selector="app.kubernetes.io/name=prometheus"
            ).items
            for item in pods:
                conditions = {c.type: c.status for c in (item.status.conditions or [])}
                if conditions.get("Ready") == "True":
                    return str(item.metadata.name)
                seen = f"pod {item.metadata.name} not Ready"
            return None

        return wait_for(
            ready_pod,
            timeout=rt.timeouts.monitoring,
            what=f"the Prometheus pod in {rt.namespace} to be Ready",
            interval=1.0,
            last_seen=lambda: seen,
            error=MetricsError,
        )

    def close_forward(self) -> None:
        """Stop the port-forward to Prometheus (no-op without one)."""
        if self._forward is not None:
            self._forward.close()
            self._forward = None

    def delete_cluster_scoped(self) -> None:
        """Delete Prometheus's ClusterRole and binding (they outlive the namespace)."""
        for manifest in self._cluster_objects:
            self._runtime.applier.delete(manifest)
        self._cluster_objects.clear()

    def resource_usage(self, *, reset_peak: bool = False) -> dict[str, ResourceUsage]:
        """Each role's nodes and the CNI agent's pods, as their own cgroups count them (kind
        on this machine: ``cpu@<role>``, ``cpu@<agent>``); empty elsewhere, where per-node CPU
        is node-exporter's (host-wide on kind, the VM's own on AKS).

        A reading with ``reset_peak`` starts a run; the next reading without it ends the run
        and fails it when an agent pod was replaced or restarted in between: the run did not
        measure the datapath as it was set up.

        Raises
        ------
        cnibench.errors.AgentRestartedError
            The CNI agent restarted since the run's first reading (names the pod).
        """
        if self._node_usage is None:
            return {}
        rt = self._runtime
        agents = [a for a in (rt.cni.agent, rt.cni.gateway_agent) if a is not None]
        pods = {agent.name: agent_pods(rt.core, agent) for agent in agents}
        seen = {f"{n}/{p.name}": (p.uid, p.restarts) for n, found in pods.items() for p in found}
        if not reset_peak and self._agents_seen:
            changed = agent_changes(self._agents_seen, seen)
            if changed:
                raise AgentRestartedError(f"the CNI agent restarted during the run: {changed}")
        self._agents_seen = seen
        roles = {node.name: node.role.value for node in rt.nodes}
        return self._node_usage.usage(
            roles,
            {n: [AgentPod(p.node, p.name, p.uid) for p in found] for n, found in pods.items()},
        )
