"""Filters in a node's forward path: network policy, priority cases, the L7 proxy.

:class:`LabFilters` loads what :mod:`cnibench.backends.lab.policy` renders into the node of the
target pod and remembers it, so each kind can be replaced or removed.
"""

from __future__ import annotations

from cnibench.backends.base import Endpoint
from cnibench.backends.lab.pods import LabPods
from cnibench.backends.lab.policy import (
    L7_PROXY_PORT,
    iptables_policy_removal,
    iptables_policy_restore,
    l7_proxy_config,
    l7_redirect_ruleset,
    nft_policy_ruleset,
    nft_priority_ruleset,
)
from cnibench.backends.lab.runner import ManagedProcess, wait_listening
from cnibench.backends.lab.runtime import READY_TIMEOUT, LabRuntime, nginx_argv
from cnibench.errors import ConfigError
from cnibench.policy import PolicyEngine, PolicySpec, PriorityCase

__all__ = ["LabFilters"]


class LabFilters:
    """The policy, priority case and L7 proxy loaded in one lab (at most one of each)."""

    def __init__(self, runtime: LabRuntime, pods: LabPods) -> None:
        self._runtime = runtime
        self._pods = pods
        self._policy: tuple[str, PolicyEngine] | None = None
        self._priority_node: str | None = None
        self._l7: tuple[str, ManagedProcess] | None = None

    def forget_tables(self) -> None:
        """Forget the policy and priority tables: their node namespaces are being deleted."""
        self._policy = None
        self._priority_node = None

    def _target_node(self, spec: PolicySpec) -> str:
        """Name of the node whose forward path a policy on ``spec.target`` goes into."""
        self._runtime.check_alive()
        return self._pods.at(spec.target.ip).node.name

    def apply_policy(self, spec: PolicySpec, *, engine: PolicyEngine | None = None) -> None:
        """See :meth:`LabCluster.apply_policy`."""
        if engine is None:
            raise ConfigError(
                "the lab enforces a policy with a named engine:"
                f" {', '.join(e.value for e in PolicyEngine)}"
            )
        runtime = self._runtime
        node = self._target_node(spec)
        engine = PolicyEngine(engine)
        with runtime.lock:
            self.remove_policy()
            if engine is PolicyEngine.IPTABLES:
                runtime.iptables_restore(
                    node,
                    f"load the iptables policy of {spec.target.name} on {node}",
                    iptables_policy_restore(spec),
                    timeout=120,
                )
            else:
                runtime.nft(
                    node,
                    f"load the {engine.value} policy of {spec.target.name} on {node}",
                    nft_policy_ruleset(spec, table=runtime.table("pol"), engine=engine),
                )
            self._policy = (node, engine)

    def remove_policy(self) -> None:
        """See :meth:`LabCluster.remove_policy`."""
        runtime = self._runtime
        with runtime.lock:
            if self._policy is None:
                return
            node, engine = self._policy
            self._policy = None
            if engine is PolicyEngine.IPTABLES:
                runtime.iptables_restore(
                    node, f"remove the iptables policy on {node}", iptables_policy_removal()
                )
            else:
                runtime.drop_feature(node, "pol", "the policy table")

    def apply_priority_case(self, case: PriorityCase, spec: PolicySpec) -> None:
        """See :meth:`LabCluster.apply_priority_case`."""
        runtime = self._runtime
        node = self._target_node(spec)
        ruleset = nft_priority_ruleset(case, spec, table=runtime.table("prio"))
        with runtime.lock:
            self.remove_priority_case()
            runtime.nft(node, f"load priority case {case.name} on {node}", ruleset)
            self._priority_node = node

    def remove_priority_case(self) -> None:
        """See :meth:`LabCluster.remove_priority_case`."""
        runtime = self._runtime
        with runtime.lock:
            node, self._priority_node = self._priority_node, None
            if node is None:
                return
            runtime.drop_feature(node, "prio", "the priority case table")

    def apply_l7_policy(self, server: Endpoint, *, port: int, method: str, path: str) -> None:
        """See :meth:`LabCluster.apply_l7_policy`."""
        runtime = self._runtime
        runtime.check_alive()
        pod = self._pods.own(server)
        node = pod.node.name
        run_dir = runtime.plan.state_dir / "l7"
        config = l7_proxy_config(
            server_ip=pod.ip, server_port=port, method=method, path=path, run_dir=run_dir
        )
        self.remove_l7_policy()
        run_dir.mkdir(mode=0o755, exist_ok=True)
        (run_dir / "nginx.conf").write_text(config)
        proc = runtime.start(
            f"{node}/l7-proxy", node, nginx_argv(run_dir), log_path=runtime.log("l7-proxy")
        )
        try:
            wait_listening(proc, "0.0.0.0", L7_PROXY_PORT, timeout=READY_TIMEOUT)
            runtime.nft(
                node,
                f"redirect {pod.name}:{port} to the L7 proxy on {node}",
                l7_redirect_ruleset(table=runtime.table("l7"), server_ip=pod.ip, server_port=port),
            )
        except BaseException:
            runtime.stop([proc])
            raise
        with runtime.lock:
            self._l7 = (node, proc)

    def remove_l7_policy(self) -> None:
        """See :meth:`LabCluster.remove_l7_policy`."""
        runtime = self._runtime
        with runtime.lock:
            current, self._l7 = self._l7, None
        if current is None:
            return
        node, proc = current
        runtime.drop_feature(node, "l7", "the L7 redirect", then_stop=[proc])
