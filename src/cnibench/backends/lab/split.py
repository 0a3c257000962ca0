"""The lab's traffic split: a gateway pod with a weighted nginx upstream, published by DNAT.

:class:`LabSplit` places the gateway pod on the server node, starts nginx in it and publishes
it on the node's underlay address; at most one split per lab.
"""

from __future__ import annotations

from collections.abc import Mapping

from cnibench.backends.base import Endpoint, NodeRole
from cnibench.backends.lab.pods import LabPod, LabPods
from cnibench.backends.lab.policy import (
    split_dnat_ruleset,
    split_proxy_config,
)
from cnibench.backends.lab.runner import ManagedProcess, wait_listening
from cnibench.backends.lab.runtime import READY_TIMEOUT, LabRuntime, nginx_argv

__all__ = ["LabSplit"]


class LabSplit:
    """The split gateway of one lab (pod, nginx, DNAT), or none."""

    def __init__(self, runtime: LabRuntime, pods: LabPods) -> None:
        self._runtime = runtime
        self._pods = pods
        self._split: tuple[str, LabPod, ManagedProcess] | None = None

    def create(self, backends: Mapping[str, tuple[Endpoint, int]], *, port: int) -> str:
        """See :meth:`LabCluster.create_split`."""
        runtime = self._runtime
        runtime.check_alive()
        pods = {name: (self._pods.own(ep), weight) for name, (ep, weight) in backends.items()}
        self.remove()
        gw_name = f"split-gw{runtime.next_sequence()}"
        gateway = self._pods.place(gw_name, role=NodeRole.SERVER)
        node = runtime.plan.node_named(gateway.node.name)
        run_dir = runtime.plan.state_dir / "pods" / gw_name / "split"
        proc: ManagedProcess | None = None
        try:
            config = split_proxy_config(
                listen_ip=gateway.ip,
                port=port,
                backends={name: (f"{p.ip}:{port}", w) for name, (p, w) in pods.items()},
                run_dir=run_dir,
            )
            run_dir.mkdir(mode=0o755, parents=True, exist_ok=True)
            (run_dir / "nginx.conf").write_text(config)
            proc = runtime.start(
                f"{gw_name}/split-proxy",
                gateway.namespace,
                nginx_argv(run_dir),
                log_path=runtime.log(f"{gw_name}-split-proxy"),
            )
            wait_listening(proc, gateway.ip, port, timeout=READY_TIMEOUT)
            runtime.nft(
                node.name,
                f"publish the split gateway on {node.name}:{port}",
                split_dnat_ruleset(
                    table=runtime.table("split"),
                    node_ip=node.underlay_ip,
                    gateway_ip=gateway.ip,
                    port=port,
                ),
            )
        except BaseException:
            if proc is not None:
                runtime.stop([proc])
            self._pods.remove(gateway)
            raise
        with runtime.lock:
            self._split = (node.name, gateway, proc)
        return f"http://{node.underlay_ip}:{port}/"

    def remove(self) -> None:
        """See :meth:`LabCluster.remove_split`."""
        runtime = self._runtime
        with runtime.lock:
            current, self._split = self._split, None
        if current is None:
            return
        node, gateway, proc = current
        try:
            runtime.drop_feature(node, "split", "the split DNAT", then_stop=[proc])
        finally:
            self._pods.remove(gateway)
