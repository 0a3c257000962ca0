"""Each kind node's own CPU and memory, and the CNI agent's, read from the host's cgroups.

A kind node is a container of the engine on this machine, so it has a cgroup of its own, and
the pods the node's kubelet runs are cgroups below it. Reading those from the host gives what
node-exporter on kind cannot (it reads the shared host's ``/proc/stat``): the CPU seconds and
memory of one node, and of the pods of the CNI's agent. The numbers are exact and cumulative,
so a run's share is the difference of two readings, even for one-second runs (the kubelet's
cAdvisor refreshes only every 10 s).

A node's container is found by name (kind names nodes after their containers; its ID and init
PID asked of the engine through the Docker SDK, :class:`~.engine_api.EngineReads`) and its init
process's ``/proc/<pid>/cgroup``; a pod by its UID in the cgroup directory's name (the
kubelet's systemd driver writes ``...-pod<uid with _>.slice``, the cgroupfs driver
``pod<uid>``). Where the engine is not on this machine the PIDs are not ours and nothing is
read: the usage is then empty, as on other providers.

A node's CPU is its own only with ``napi=threaded`` (:meth:`KindNodeUsage.thread_napi`), as on
the lab: otherwise the kernel charges a packet's receive and forwarding to whichever process
sent it, often on another node, so only the node's memory is reported. Threading is switched
on at both ends of each node's link to the kind bridge (``eth0`` in the node, its peer on the
host), with TSO off so the peers see no GSO super-packets and GRO on so they poll in NAPI; the
node's ``eth0`` pollers are then counted as the node's CPU (their ``/proc/<tid>/schedstat``),
and the host-side pollers as nobody's (the bridge and the external host are not nodes).
"""

from __future__ import annotations

import os
import socket
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cnibench.backends.base import ResourceUsage
from cnibench.backends.cgroupfs import CgroupLayout, process_layout, read_usage
from cnibench.backends.napi import napi_thread_pids
from cnibench.engine.api import ContainerProcess, EngineReads
from cnibench.errors import CnibenchError, ProvisioningError, ToolError

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

NODE_LINK = "eth0"
"""A kind node's interface on the kind bridge."""
_THREAD_NODE_END = (
    f"ethtool -K {NODE_LINK} tso off gro on >/dev/null"
    # A kind node's /sys is read-only and a sysfs cannot be mounted from inside it: from the
    # host, in the node's network namespace, a private mount namespace gets a writable sysfs of
    # that network namespace, and goes with the command. The host's /sys is detached first
    # (mount(8) refuses a second "sysfs" on /sys), and the new mount shares the superblock of
    # the node's own read-only /sys, so it is remounted writable: the node's mount keeps its
    # own read-only flag (checked on kind, 2026-11-26).
    " && unshare --mount --propagation private sh -c"
    " 'umount -l /sys && mount -t sysfs cnibench-node /sys && mount -o remount,rw /sys"
    f" && echo 1 > /sys/class/net/{NODE_LINK}/threaded"
    f" && cat /sys/class/net/{NODE_LINK}/iflink'"
)
"""Run from the host in the node's network namespace: its end threaded; prints the host-side
peer's interface index."""
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


def container_root(directory: Path | None, container: str) -> Path | None:
    """The ancestor of ``directory`` (or itself) whose name holds the container's ID
    (``<id>`` with cgroupfs, ``docker-<id>.scope`` with systemd), or ``None``.

    >>> container_root(Path("/cg/cpuacct/docker/abc123/init.scope"), "abc123")
    PosixPath('/cg/cpuacct/docker/abc123')
    >>> container_root(Path("/cg/memory/system.slice/docker-abc123.scope"), "abc123")
    PosixPath('/cg/memory/system.slice/docker-abc123.scope')
    >>> container_root(Path("/cg/cpuacct/docker/other"), "abc123") is None
    True
    """
    if directory is None or not container:
        return None
    for candidate in (directory, *directory.parents):
        if container in candidate.name:
            return candidate
    return None


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

    def total(values: list[float | int | None]) -> float | int | None:  # None if any is
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
    run:
        Runs a host command's argv (``nsenter``, ``ethtool``) and returns its stdout (the
        provider's runner).
    engine:
        Where each node's container is looked up (its ID and init PID); by default the engine
        of ``$DOCKER_HOST``, which kind made the nodes in.
    proc:
        The ``/proc`` to read (tests pass a fake tree).
    """

    def __init__(
        self,
        run: Callable[[Sequence[str]], str],
        *,
        engine: EngineReads | None = None,
        proc: Path = Path("/proc"),
        sys_class_net: Path = Path("/sys/class/net"),
    ) -> None:
        self._run = run
        self._engine = engine or EngineReads()
        self._proc = proc
        self._sys_class_net = sys_class_net
        self._layouts: dict[str, CgroupLayout] = {}
        self._pods: dict[str, tuple[Path, Path | None]] = {}
        self._napi: dict[str, list[int]] = {}

    @property
    def threaded(self) -> frozenset[str]:
        """Nodes whose receive threads are counted (their CPU is their own)."""
        return frozenset(self._napi)

    def thread_napi(self, node: str) -> list[int]:
        """Make ``node`` receive in NAPI threads of its own at both ends of its link, and count
        them as its CPU from now on; returns their PIDs. Idempotent (a kept cluster is
        threaded again when reused).

        Raises
        ------
        cnibench.errors.ProvisioningError
            The node is not a container here, a step failed, or the kernel does not thread
            veth NAPI (the message names the node and the step).
        """
        pid = self._pid(node)
        if pid is None:
            raise ProvisioningError(
                f"napi=threaded: node {node} is not a container of an engine on this machine"
            )
        netns = str(self._proc / str(pid) / "ns" / "net")
        out = self._run(["nsenter", f"--net={netns}", "sh", "-c", _THREAD_NODE_END])
        try:
            peer = socket.if_indextoname(int(out.split()[-1]))
        except (OSError, ValueError, IndexError) as exc:
            raise ProvisioningError(
                f"napi=threaded: the host side of {node}'s {NODE_LINK} ({out.strip()!r}): {exc}"
            ) from exc
        self._run(["ethtool", "-K", peer, "tso", "off", "gro", "on"])
        try:
            (self._sys_class_net / peer / "threaded").write_text("1\n")
        except OSError as exc:
            raise ProvisioningError(f"napi=threaded: thread {peer} on the host: {exc}") from exc
        pids = napi_thread_pids(netns, [NODE_LINK])[NODE_LINK]
        if not pids:
            raise ProvisioningError(
                f"napi=threaded: {NODE_LINK} of node {node} has no NAPI thread after threading"
                " was switched on (this kernel does not thread veth NAPI)"
            )
        self._napi[node] = pids
        return pids

    def _threads_cpu(self, node: str) -> float | None:
        """CPU seconds of the node's receive threads (``None`` if one is gone)."""
        total = 0
        for tid in self._napi.get(node, []):
            try:
                total += int((self._proc / str(tid) / "schedstat").read_text().split()[0])
            except (OSError, ValueError, IndexError):
                return None
        return total / 1e9

    def _container(self, node: str) -> ContainerProcess | None:
        """The node's container, if it runs and its init process is one of this machine's."""
        try:
            found = self._engine.container(node)
        except CnibenchError:
            return None
        if found.pid <= 0 or not (self._proc / str(found.pid)).is_dir():
            return None  # not running, or the engine's processes are not on this machine
        return found

    def _pid(self, node: str) -> int | None:
        found = self._container(node)
        return None if found is None else found.pid

    def _layout(self, node: str) -> CgroupLayout | None:
        """The node container's own cgroups: its init process's, cut at the directory named
        after the container (systemd, the node's init, moves itself into ``init.scope``
        below it, and may do so in one hierarchy and not another)."""
        known = self._layouts.get(node)
        if known is not None and known.cpu is not None and known.cpu.is_dir():
            return known
        container = self._container(node)
        if container is None:
            return None
        found = process_layout(container.pid, proc=self._proc)
        layout = CgroupLayout(
            cpu=container_root(found.cpu, container.id),
            cpu_v2=found.cpu_v2,
            memory=container_root(found.memory, container.id),
        )
        if layout.cpu is None:
            return None
        self._layouts[node] = layout
        return layout

    def node(self, node: str) -> ResourceUsage | None:
        """The node container's own usage (its working set, no cache), or ``None``; its CPU
        (with its receive threads') only once :meth:`thread_napi` made it its own."""
        layout = self._layout(node)
        if layout is None or layout.cpu is None:
            return None
        usage = read_usage(layout.cpu, cpu_v2=layout.cpu_v2, memory_dir=layout.memory)
        if usage is None:
            return None
        cpu = None
        threads = self._threads_cpu(node) if node in self._napi else None
        if usage.cpu_seconds is not None and threads is not None:
            cpu = usage.cpu_seconds + threads
        return ResourceUsage(cpu, usage.memory_bytes)

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
        self, roles: Mapping[str, str], agents: Mapping[str, Sequence[AgentPod]]
    ) -> dict[str, ResourceUsage]:
        """Usage by name: each role (its nodes summed), and each agent (its pods summed).

        Parameters
        ----------
        roles:
            Node name -> role name.
        agents:
            Agent name (e.g. ``cilium-agent``, ``traefik``) -> its pods.
        """
        by_role: dict[str, list[ResourceUsage]] = {}
        for node, role in roles.items():
            reading = self.node(node)
            if reading is not None:
                by_role.setdefault(role, []).append(reading)
        out = {role: u for role, found in by_role.items() if (u := sum_usage(found))}
        for agent, pods in agents.items():
            readings = [self.pod(pod) for pod in pods]
            if readings and all(r is not None for r in readings):
                total = sum_usage(r for r in readings if r is not None)
                if total is not None:
                    out[agent] = total
        return out
