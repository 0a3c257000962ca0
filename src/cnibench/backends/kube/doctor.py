"""What ``cnibench doctor`` says about an existing cluster: reachable, which CNI, which nodes.

Every call has a short timeout, so the doctor stays quick on an unreachable server.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from cnibench.backends.base import ClusterSpec, NodeRole
from cnibench.backends.kube.api import api_error_message
from cnibench.backends.kube.backend import api_client_for
from cnibench.backends.kube.cni import Readiness, cni_definition
from cnibench.backends.kube.cnis import cni_names
from cnibench.backends.kube.placement import NodeFacts, choose_nodes
from cnibench.errors import CnibenchError

__all__ = ["existing_cluster_report"]

REQUEST_TIMEOUT = 5.0
"""Seconds each API request of the report may take."""


def _daemon_set_exists(apps: Any, item: Readiness) -> bool:
    try:
        apps.read_namespaced_daemon_set(item.name, item.namespace, _request_timeout=REQUEST_TIMEOUT)
    except Exception:  # 404, or 403 for a user without rights there: not found either way
        return False
    return True


def installed_cnis(api_client: Any) -> list[str]:
    """CNIs whose agent DaemonSet (the one cnibench waits on) exists."""
    from kubernetes import client

    apps = client.AppsV1Api(api_client)
    found = []
    for name in cni_names():
        readiness = cni_definition(ClusterSpec(cni=name)).readiness
        agent = next((r for r in readiness if r.kind == "DaemonSet"), None)
        if agent is not None and _daemon_set_exists(apps, agent):
            found.append(name)
    return found


def existing_cluster_report(kubeconfig: Path, context: str = "") -> tuple[bool, str]:
    """``(usable, why)`` for ``--cluster existing`` with ``kubeconfig``.

    Usable means: the API server answers, and a node can be found for each role (client,
    server, egress-gw) as a run would choose it
    (:func:`~cnibench.backends.kube.placement.choose_nodes`, without ``--nodes``). ``why``
    names the server version, the CNI(s) found and the nodes a run would use, or why none
    can be. Never raises for an unusable cluster; the reason is in ``why``.
    """
    from kubernetes import client

    if not kubeconfig.is_file():
        return False, f"no kubeconfig at {kubeconfig}"
    try:
        api_client = api_client_for(kubeconfig, context)
    except CnibenchError as exc:
        return False, str(exc)
    try:
        try:
            version = client.VersionApi(api_client).get_code(_request_timeout=REQUEST_TIMEOUT)
            nodes = client.CoreV1Api(api_client).list_node(_request_timeout=REQUEST_TIMEOUT)
        except Exception as exc:  # connection errors come in many types
            reason = (api_error_message(exc).splitlines() or [type(exc).__name__])[0]
            return False, f"kubeconfig {kubeconfig}: API server not reachable: {reason[:200]}"
        cnis = installed_cnis(api_client)
    finally:
        api_client.close()
    parts = [
        f"Kubernetes {version.git_version}",
        f"CNI: {', '.join(cnis)}" if cnis else "no known CNI found",
    ]
    try:
        choice = choose_nodes([NodeFacts.of_node(item) for item in nodes.items], tuple(NodeRole))
    except CnibenchError as exc:
        parts.append(str(exc))
        return False, "; ".join(parts)
    parts.append(choice.line())
    return True, "; ".join(parts)
