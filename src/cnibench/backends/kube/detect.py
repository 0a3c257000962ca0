"""Which CNI a cluster cnibench did not make runs, from its DaemonSets.

:func:`detect_cnis` is pure: it maps ``(namespace, name)`` of DaemonSets to the CNIs whose
agent they are, by name, whatever the namespace (installs differ: Calico's operator puts
``calico-node`` in ``calico-system``, its manifest in ``kube-system``). The names come from the
drivers' own readiness workloads (:func:`agent_daemonsets`) plus :data:`OTHER_AGENT_NAMES`, the
names other installers give the same agents. :func:`check_cni` turns what was found into the
line the run prints, or refuses a ``--cni`` the cluster does not run.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from cnibench.backends.base import ClusterSpec
from cnibench.backends.kube.api import api_error_message
from cnibench.backends.kube.cni import cni_definition
from cnibench.backends.kube.cnis import cni_names
from cnibench.errors import ConfigError, ProvisioningError

__all__ = [
    "OTHER_AGENT_NAMES",
    "agent_daemonsets",
    "check_cni",
    "detect_cnis",
    "list_daemonsets",
]

OTHER_AGENT_NAMES: Mapping[str, str] = {
    "kube-flannel": "flannel",
    "kube-flannel-ds-amd64": "flannel",
    "kube-flannel-ds-arm64": "flannel",
    "canal": "calico",
}
"""DaemonSet names of CNI agents as other installers than cnibench's drivers name them (older
flannel manifests, one per architecture; Canal, which is Calico's policy over flannel)."""


def agent_daemonsets() -> dict[str, str]:
    """DaemonSet name -> CNI: each registered driver's agent DaemonSet (the first DaemonSet it
    waits on), then :data:`OTHER_AGENT_NAMES`."""
    names: dict[str, str] = {}
    for cni in cni_names():
        readiness = cni_definition(ClusterSpec(cni=cni)).readiness
        agent = next((r for r in readiness if r.kind == "DaemonSet"), None)
        if agent is not None:
            names.setdefault(agent.name, cni)
    for name, cni in OTHER_AGENT_NAMES.items():
        names.setdefault(name, cni)
    return names


def detect_cnis(
    daemonsets: Iterable[tuple[str, str]], agents: Mapping[str, str]
) -> list[tuple[str, str]]:
    """The CNIs whose agent is among ``daemonsets``, each once, as ``(cni, "namespace/name")``
    of the first DaemonSet found for it, in the order of ``daemonsets``.

    Parameters
    ----------
    daemonsets:
        ``(namespace, name)`` of every DaemonSet of the cluster.
    agents:
        DaemonSet name -> CNI (:func:`agent_daemonsets`).
    """
    found: dict[str, str] = {}
    for namespace, name in daemonsets:
        cni = agents.get(name)
        if cni is not None and cni not in found:
            found[cni] = f"{namespace}/{name}"
    return list(found.items())


def check_cni(spec: ClusterSpec, found: Sequence[tuple[str, str]]) -> str:
    """The line the run prints about the CNI found, for ``--cni`` ``spec``.

    Raises
    ------
    cnibench.errors.ConfigError
        A CNI was recognised and ``spec.cni`` is not among them (one line naming what runs).
    """
    if not found:
        return (
            f"CNI: none of cnibench's known CNI agents runs on this cluster; going on with"
            f" --cni {spec.label}"
        )
    names = [cni for cni, _ in found]
    where = ", ".join(f"{cni} (DaemonSet {daemonset})" for cni, daemonset in found)
    if spec.cni not in names:
        raise ConfigError(f"--cni {spec.label}: this cluster runs {' and '.join(names)}")
    return f"CNI: this cluster runs {where}"


def list_daemonsets(api_client: Any) -> list[tuple[str, str]]:
    """``(namespace, name)`` of every DaemonSet of the cluster.

    Raises
    ------
    cnibench.errors.ProvisioningError
        They cannot be listed (the API's reason).
    """
    from kubernetes import client
    from kubernetes.client.exceptions import ApiException

    apps: Any = client.AppsV1Api(api_client)
    try:
        listed = apps.list_daemon_set_for_all_namespaces().items
    except ApiException as exc:
        raise ProvisioningError(f"listing DaemonSets failed: {api_error_message(exc)}") from exc
    return [(str(d.metadata.namespace), str(d.metadata.name)) for d in listed]
