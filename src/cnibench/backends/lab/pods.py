"""Pods of a lab: namespaces attached by veth to a node, with their workloads.

:class:`LabPods` places and removes pods (:class:`LabPod`, an
:class:`~cnibench.backends.base.Endpoint`) for :class:`~cnibench.backends.lab.cluster.LabCluster`.
"""

from __future__ import annotations

import contextlib
import json
import re
import shutil
from collections.abc import Sequence

from cnibench.backends.base import CommandResult, Endpoint, Node, NodeRole, WorkloadSpec
from cnibench.backends.lab.plan import (
    NODE_UPLINK,
    NodePlan,
    PodPlan,
    Step,
    plan_pod,
    pod_removal_steps,
    pod_steps,
    workload_processes,
)
from cnibench.backends.lab.runner import (
    ManagedProcess,
    StartedInNamespace,
    pids_in_namespaces,
    run_in_namespace,
    run_step,
    run_steps,
    stop_pids,
    wait_listening,
)
from cnibench.backends.lab.runtime import READY_TIMEOUT, LabRuntime
from cnibench.errors import ConfigError, ProvisioningError

__all__ = ["LabPod", "LabPods", "node_of"]

_POD_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,62}$")


def node_of(plan: NodePlan) -> Node:
    """The :class:`Node` a node plan describes."""
    return Node(name=plan.name, role=plan.role, ip=plan.underlay_ip)


class LabPod:
    """A pod of the lab: a namespace attached by veth to a node (an :class:`Endpoint`).

    Created by :meth:`LabCluster.place`; ``node`` is read back from the kernel (the node
    namespace the pod's veth peer lives in), not taken from the request.
    """

    def __init__(self, plan: PodPlan, node: Node, processes: Sequence[ManagedProcess]) -> None:
        self._plan = plan
        self._node = node
        self.processes: tuple[ManagedProcess, ...] = tuple(processes)

    @property
    def name(self) -> str:
        """Pod name, unique in the cluster."""
        return self._plan.name

    @property
    def node(self) -> Node:
        """The node the pod's veth is attached to."""
        return self._node

    @property
    def ip(self) -> str:
        """The pod's address."""
        return self._plan.ip

    @property
    def namespace(self) -> str:
        """The pod's network namespace."""
        return self._plan.namespace

    @property
    def plan(self) -> PodPlan:
        """Names and addresses of the pod."""
        return self._plan

    def run(self, argv: Sequence[str], *, timeout: float) -> CommandResult:
        """Run ``argv`` in the pod; kill it after ``timeout`` seconds (then ToolError)."""
        return run_in_namespace(
            self.namespace, argv, timeout=timeout, tool_label=f"pod {self.name}"
        )

    def start(self, argv: Sequence[str]) -> StartedInNamespace:
        """Start ``argv`` in the pod without waiting for it (see
        :meth:`cnibench.backends.base.Endpoint.start`); stopped by its PID, and with every
        process of the pod's namespace when the pod is removed."""
        return StartedInNamespace(self.namespace, argv, tool_label=f"pod {self.name}")

    def __repr__(self) -> str:
        return f"LabPod({self.name!r}, ip={self.ip!r}, node={self._node.name!r})"


class LabPods:
    """The pods of one lab: placement (host numbers per node), lookup, removal."""

    def __init__(self, runtime: LabRuntime) -> None:
        self._runtime = runtime
        self._pods: dict[str, LabPod] = {}
        self._used_hosts: dict[int, set[int]] = {node.index: set() for node in runtime.plan.nodes}
        self._pod_seq = 0

    def all(self) -> tuple[LabPod, ...]:
        """Pods currently placed."""
        with self._runtime.lock:
            return tuple(self._pods.values())

    def clear(self) -> None:
        """Forget every pod (their namespaces are gone: teardown)."""
        self._pods.clear()

    def node_plan(self, role: NodeRole) -> NodePlan:
        """The first node with ``role``.

        Raises
        ------
        ConfigError
            If no node has it.
        """
        plan = self._runtime.plan
        for node in plan.nodes:
            if node.role == role:
                return node
        raise ConfigError(
            f"lab {plan.lab_id} has no node with role {NodeRole(role).value!r}"
            f" (roles: {', '.join(n.role.value for n in plan.nodes)})"
        )

    def place(self, name: str, *, role: NodeRole, workloads: Sequence[WorkloadSpec] = ()) -> LabPod:
        """See :meth:`LabCluster.place`."""
        runtime = self._runtime
        if not _POD_NAME_RE.match(name):
            raise ConfigError(
                f"invalid pod name {name!r}: use up to 63 letters, digits, '_', '.', '-'"
            )
        runtime.check_alive()
        node = self.node_plan(role)
        with runtime.lock:
            if name in self._pods:
                raise ConfigError(f"a pod named {name!r} already exists in lab {runtime.lab_id}")
            used = self._used_hosts[node.index]
            host = next((h for h in range(2, 255) if h not in used), 255)
            self._pod_seq += 1
            pod_plan = plan_pod(runtime.plan, name, node, host=host, seq=self._pod_seq)
            used.add(host)
        run_dir = runtime.plan.state_dir / "pods" / name
        processes: list[ManagedProcess] = []
        try:
            specs = [p for w in workloads for p in workload_processes(pod_plan, w, run_dir)]
            run_steps(pod_steps(pod_plan))
            attached = self._attached_node(pod_plan)
            run_dir.mkdir(mode=0o755, exist_ok=True)
            for spec in specs:
                if spec.config is not None:
                    path, text = spec.config
                    path.parent.mkdir(parents=True, exist_ok=True)
                    path.write_text(text)
                processes.append(
                    runtime.start(
                        f"{name}/{spec.name}",
                        pod_plan.namespace,
                        spec.argv,
                        log_path=run_dir / f"{spec.name}.log",
                    )
                )
            for proc, spec in zip(processes, specs, strict=True):
                wait_listening(proc, pod_plan.ip, spec.port, timeout=READY_TIMEOUT)
        except BaseException:
            runtime.stop(processes)
            self._delete(pod_plan)
            raise
        pod = LabPod(pod_plan, attached, processes)
        with runtime.lock:
            self._pods[name] = pod
        runtime.record()
        return pod

    def _attached_node(self, pod: PodPlan) -> Node:
        links = json.loads(
            run_step(
                Step(
                    f"inspect the link of pod {pod.name}",
                    ("ip", "-n", pod.namespace, "-j", "link", "show", NODE_UPLINK),
                )
            )
        )
        nsid = links[0].get("link_netnsid") if links else None
        ids = json.loads(
            run_step(
                Step(
                    f"list the peer namespaces of pod {pod.name}",
                    ("ip", "-n", pod.namespace, "-j", "netns", "list-id"),
                )
            )
            or "[]"
        )
        peer = next((entry.get("name") for entry in ids if entry.get("nsid") == nsid), None)
        if nsid is None or peer is None:
            raise ProvisioningError(
                f"pod {pod.name}: cannot tell which namespace its {NODE_UPLINK} is attached to"
            )
        try:
            return node_of(self._runtime.plan.node_named(str(peer)))
        except ConfigError as exc:
            raise ProvisioningError(
                f"pod {pod.name} is attached to {peer}, which is not a node of"
                f" {self._runtime.lab_id}"
            ) from exc

    def own(self, endpoint: Endpoint) -> LabPod:
        """``endpoint`` as a pod of this lab.

        Raises
        ------
        ConfigError
            If it is not one (another lab's pod, or removed).
        """
        with self._runtime.lock:
            pod = self._pods.get(endpoint.name)
        if pod is None or pod is not endpoint:
            raise ConfigError(f"{endpoint.name!r} is not a pod of lab {self._runtime.lab_id}")
        return pod

    def at(self, ip: str) -> LabPod:
        """The pod with address ``ip``.

        Raises
        ------
        ConfigError
            If no pod has it.
        """
        with self._runtime.lock:
            for pod in self._pods.values():
                if pod.ip == ip:
                    return pod
        raise ConfigError(f"no pod of lab {self._runtime.lab_id} has address {ip}")

    def remove(self, endpoint: Endpoint) -> None:
        """See :meth:`LabCluster.remove`."""
        pod = self.own(endpoint)
        self._runtime.stop(pod.processes)
        with self._runtime.lock:
            self._pods.pop(pod.name, None)
        self._delete(pod.plan)
        self._runtime.record()

    def _delete(self, pod: PodPlan) -> None:
        leftovers = pids_in_namespaces([pod.namespace]).get(pod.namespace, [])
        if leftovers:
            stop_pids(leftovers)
        for step in pod_removal_steps(pod):
            with contextlib.suppress(ProvisioningError):
                run_step(step)
        with self._runtime.lock:
            self._used_hosts[pod.node.index].discard(int(pod.ip.rsplit(".", 1)[1]))
        shutil.rmtree(self._runtime.plan.state_dir / "pods" / pod.name, ignore_errors=True)
