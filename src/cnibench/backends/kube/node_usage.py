"""Each kind node's own CPU and memory, and the CNI agent's, read from the host's cgroups.

A kind node is a container of the engine on this machine, so it has a cgroup of its own, and
the pods the node's kubelet runs are cgroups below it. Reading those from the host gives what
node-exporter on kind cannot (it reads the shared host's ``/proc/stat``): the CPU seconds and
memory of one node, and of the pods of the CNI's agent. The numbers are exact and cumulative,
so a run's share is the difference of two readings, even for one-second runs (the kubelet's
cAdvisor refreshes only every 10 s).

A node's container is found by name (kind names nodes after their containers) and its init
process's ``/proc/<pid>/cgroup``; a pod by its UID in the cgroup directory's name (the
kubelet's systemd driver writes ``...-pod<uid with _>.slice``, the cgroupfs driver
``pod<uid>``). Where the engine is not on this machine the PIDs are not ours and nothing is
read: the usage is then empty, as on other providers.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cnibench.backends.base import ResourceUsage
from cnibench.backends.cgroupfs import CgroupLayout, process_layout, read_usage
from cnibench.errors import CnibenchError, ToolError

if TYPE_CHECKING:
    from cnibench.backends.kube.cni import Agent

__all__ = [
    "AgentPod",
    "AgentPodState",
    "KindNodeUsage",
    "agent_changes",
    "agent_pods",
    "find_pod_cgroup",
    "sum_usage",
]

_POD_SEARCH_DEPTH = 5
"""Directory levels below a node's cgroup where pod cgroups are looked for (kind: kubelet.slice
/ kubelet-kubepods.slice / kubelet-kubepods-<qos>.slice / ...-pod<uid>.slice)."""


@dataclass(frozen=True)
class AgentPod:
    """One pod of the CNI's agent: its node, name and UID."""

    node: str
    name: str
    uid: str


@dataclass(frozen=True)
class AgentPodState:
    """One agent pod as the API reports it: where it runs and how often it restarted."""

    node: str
    name: str
    uid: str
    restarts: int


def agent_pods(core: Any, agent: Agent) -> list[AgentPodState]:
    """The agent's pods now (a ``CoreV1Api``'s list of ``agent.selector`` in its namespace).

    Raises
    ------
    cnibench.errors.ToolError
        The API cannot be asked.
    """
    from kubernetes.client.exceptions import ApiException

    try:
        listed = core.list_namespaced_pod(agent.namespace, label_selector=agent.selector).items
    except ApiException as exc:
        raise ToolError(f"cannot list the {agent.name} pods: {exc.reason}") from exc
    found = []
    for pod in listed:
        statuses = pod.status.container_statuses or []
        found.append(
            AgentPodState(
                node=pod.spec.node_name or "",
                name=pod.metadata.name,
                uid=pod.metadata.uid,
                restarts=sum(int(s.restart_count or 0) for s in statuses),
            )
        )
    return sorted(found, key=lambda p: p.name)


def agent_changes(
    before: Mapping[str, tuple[str, int]], after: Mapping[str, tuple[str, int]]
) -> str:
    """What changed among agent pods (name -> (uid, restarts)) between two readings: pods
    gone, new, or restarted; ``""`` when nothing did.

    >>> agent_changes({"a": ("1", 0)}, {"a": ("1", 1), "b": ("2", 0)})
    'pod a restarted (1 restart since the run began); pod b is new'
    """
    lines = [f"pod {name} is gone" for name in sorted(set(before) - set(after))]
    for name in sorted(set(before) & set(after)):
        (uid_a, restarts_a), (uid_b, restarts_b) = before[name], after[name]
        if uid_a != uid_b:
            lines.append(f"pod {name} was replaced")
        elif restarts_b > restarts_a:
            count = restarts_b - restarts_a
            lines.append(
                f"pod {name} restarted ({count} restart{'s' * (count != 1)} since the run began)"
            )
    lines += [f"pod {name} is new" for name in sorted(set(after) - set(before))]
    return "; ".join(lines)


def find_pod_cgroup(node_dir: Path, uid: str, *, depth: int = _POD_SEARCH_DEPTH) -> Path | None:
    """The cgroup directory of the pod with ``uid`` below a node's cgroup ``node_dir``."""
    wanted = (f"pod{uid}", f"pod{uid.replace('-', '_')}")
    frontier = [node_dir]
    for _ in range(depth):
        following: list[Path] = []
        for directory in frontier:
            try:
                children = [c for c in directory.iterdir() if c.is_dir()]
            except OSError:
                continue
            for child in children:
                if any(child.name.endswith((w, w + ".slice")) for w in wanted):
                    return child
            following.extend(children)
        frontier = following
    return None


def sum_usage(usages: Iterable[ResourceUsage]) -> ResourceUsage | None:
    """Several machines' usage as one (``None`` parts stay ``None`` unless all are known)."""
    found = list(usages)
    if not found:
        return None

    def total(values: list[float | int | None]) -> float | int | None:
        return None if any(v is None for v in values) else sum(v for v in values if v is not None)

    cpu = total([u.cpu_seconds for u in found])
    memory = total([u.memory_bytes for u in found])
    return ResourceUsage(
        None if cpu is None else float(cpu), None if memory is None else int(memory)
    )


class KindNodeUsage:
    """Readings of one kind cluster's nodes and agent pods.

    Parameters
    ----------
    inspect:
        Runs ``docker inspect`` argvs and returns stdout (the provider's runner).
    proc:
        The ``/proc`` to read (tests pass a fake tree).
    """

    def __init__(
        self, inspect: Callable[[Sequence[str]], str], *, proc: Path = Path("/proc")
    ) -> None:
        self._inspect = inspect
        self._proc = proc
        self._layouts: dict[str, CgroupLayout] = {}
        self._pods: dict[str, tuple[Path, Path | None]] = {}

    def _layout(self, node: str) -> CgroupLayout | None:
        known = self._layouts.get(node)
        if known is not None and known.cpu is not None and known.cpu.is_dir():
            return known
        try:
            pid = int(self._inspect(["docker", "inspect", "--format", "{{.State.Pid}}", node]))
        except (CnibenchError, ValueError):
            return None
        if pid <= 0 or not (self._proc / str(pid)).is_dir():
            return None  # not running, or the engine's processes are not on this machine
        layout = process_layout(pid, proc=self._proc)
        if layout.cpu is None:
            return None
        self._layouts[node] = layout
        return layout

    def node(self, node: str, *, reset_peak: bool = False) -> ResourceUsage | None:
        """The node container's own usage (its working set, no cache), or ``None``."""
        layout = self._layout(node)
        if layout is None or layout.cpu is None:
            return None
        usage = read_usage(
            layout.cpu, cpu_v2=layout.cpu_v2, memory_dir=layout.memory, reset_peak=reset_peak
        )
        return None if usage is None else ResourceUsage(usage.cpu_seconds, usage.memory_bytes)

    def pod(self, pod: AgentPod) -> ResourceUsage | None:
        """One pod's usage below its node's cgroup, or ``None`` when it cannot be found."""
        layout = self._layout(pod.node)
        if layout is None or layout.cpu is None:
            return None
        dirs = self._pods.get(pod.uid)
        if dirs is None or not dirs[0].is_dir():
            cpu_dir = find_pod_cgroup(layout.cpu, pod.uid)
            if cpu_dir is None:
                return None
            memory_dir = None
            if layout.memory is not None:
                memory_dir = layout.memory / os.path.relpath(cpu_dir, layout.cpu)
            dirs = (cpu_dir, memory_dir)
            self._pods[pod.uid] = dirs
        usage = read_usage(dirs[0], cpu_v2=layout.cpu_v2, memory_dir=dirs[1])
        return None if usage is None else ResourceUsage(usage.cpu_seconds, usage.memory_bytes)

    def usage(
        self, roles: Mapping[str, str], agent: str, pods: Sequence[AgentPod]
    ) -> dict[str, ResourceUsage]:
        """Usage by name: each role (its nodes summed), and ``agent`` (its pods summed).

        Parameters
        ----------
        roles:
            Node name -> role name.
        agent:
            Name of the CNI agent (e.g. ``cilium-agent``); ``""`` for none.
        pods:
            The agent's pods.
        """
        by_role: dict[str, list[ResourceUsage]] = {}
        for node, role in roles.items():
            reading = self.node(node)
            if reading is not None:
                by_role.setdefault(role, []).append(reading)
        out = {role: u for role, found in by_role.items() if (u := sum_usage(found))}
        if agent and pods:
            readings = [self.pod(pod) for pod in pods]
            if all(r is not None for r in readings):
                total = sum_usage(r for r in readings if r is not None)
                if total is not None:
                    out[agent] = total
        return out
