"""Policies on Kubernetes: NetworkPolicy, the priority cases' CNI policies and L7 rules.

:class:`KubeFilters` applies a NetworkPolicy rendered from a
:class:`~cnibench.policy.PolicySpec`; for a priority case, a Kubernetes deny-all (when the case
has one) and the CNI driver's own policy objects, one per layer
(:meth:`~cnibench.backends.kube.cnis.base.CniDriver.priority_objects`); for L7, the driver's
HTTP rule (:meth:`~cnibench.backends.kube.cnis.base.CniDriver.l7_policy`). A CNI programs what
the API server stored some time later: :data:`POLICY_SETTLE` and :data:`PRIORITY_SETTLE` say
how long the scenarios give it.
"""

from __future__ import annotations

from typing import Any

from cnibench.backends.base import Capability, Endpoint
from cnibench.backends.kube import render
from cnibench.backends.kube.runtime import KubeRuntime
from cnibench.errors import UnsupportedError
from cnibench.policy import PolicyEngine, PolicySpec, PriorityCase

__all__ = ["POLICY_SETTLE", "PRIORITY_SETTLE", "KubeFilters"]

POLICY_SETTLE = 30.0
"""Seconds a Kubernetes CNI may take to program a policy: until then a wrong probe matrix is
probed again (Cilium computes and loads the policy map a few seconds after the object is
stored)."""
PRIORITY_SETTLE = 5.0
"""Seconds a Kubernetes CNI gets to program (or unprogram) a priority case's policies before a
probe."""

_POLICY_NAME = "cnibench-policy"
_L7_NAME = "cnibench-l7"


class KubeFilters:
    """The policy objects of one session: NetworkPolicy, priority case, L7 rule.

    Parameters
    ----------
    runtime:
        The cluster's shared state (CNI and its driver, namespace, applier).
    """

    def __init__(self, runtime: KubeRuntime) -> None:
        self._runtime = runtime
        self._policy_objects: list[dict[str, Any]] = []
        self._priority_objects: list[dict[str, Any]] = []
        self._l7_objects: list[dict[str, Any]] = []

    def _require(self, capability: Capability, reason: str) -> None:
        if capability not in self._runtime.cni.capabilities:
            raise UnsupportedError(reason)

    def apply_policy(self, spec: PolicySpec, *, engine: PolicyEngine | None = None) -> None:
        """Apply a NetworkPolicy rendered from ``spec``. ``engine`` is not used: the CNI
        enforces the policy with its own datapath, so the backend offers no engine
        (:attr:`~cnibench.backends.kube.backend.KubeBackend.policy_choices`) and the policy
        scenario's conditions on Kubernetes name none.

        Raises
        ------
        cnibench.errors.UnsupportedError
            The CNI does not enforce NetworkPolicy.
        """
        rt = self._runtime
        self._require(Capability.NETWORK_POLICY, f"{rt.cni.name} does not enforce NetworkPolicy")
        self.remove_policy()
        manifest = render.network_policy(
            spec, name=_POLICY_NAME, namespace=rt.namespace, session=rt.session
        )
        rt.applier.apply(manifest)
        self._policy_objects.append(manifest)

    def remove_policy(self) -> None:
        """Delete the NetworkPolicy. Safe to repeat."""
        for manifest in self._policy_objects:
            self._runtime.applier.delete(manifest)
        self._policy_objects.clear()

    def priority_case_manifests(self, case: PriorityCase, spec: PolicySpec) -> list[dict[str, Any]]:
        """The objects :meth:`apply_priority_case` applies for ``case``: a deny-all
        NetworkPolicy when ``case.kubernetes_deny``, then the driver's CNI policies, one per
        layer.

        Raises
        ------
        cnibench.errors.UnsupportedError
            No NetworkPolicy enforcement; CNI layers on a CNI without a policy API of its own;
            a tiered or ``pass`` case without :attr:`Capability.POLICY_TIERS`; or a case the
            CNI's policy API cannot express.
        """
        rt = self._runtime
        cni = rt.cni.name
        self._require(Capability.NETWORK_POLICY, f"{cni} does not enforce NetworkPolicy")
        if case.needs_tiers:
            self._require(
                Capability.POLICY_TIERS, f"{cni} has no policy tiers: priority case {case.name}"
            )
        objects: list[dict[str, Any]] = []
        if case.kubernetes_deny:
            objects.append(
                render.deny_all_ingress(
                    spec.target.name,
                    name="cnibench-prio-k8s",
                    namespace=rt.namespace,
                    session=rt.session,
                )
            )
        if case.layers:
            objects.extend(rt.driver.priority_objects(rt.scope, spec, case))
        return objects

    def apply_priority_case(self, case: PriorityCase, spec: PolicySpec) -> None:
        """Apply :meth:`priority_case_manifests` (replacing an earlier case); on a rejected
        object, the ones already applied are deleted again.

        Raises
        ------
        cnibench.errors.UnsupportedError
            See :meth:`priority_case_manifests`.
        cnibench.errors.ProvisioningError
            The API server rejected an object.
        """
        objects = self.priority_case_manifests(case, spec)
        rt = self._runtime
        rt.announce_cluster_wide(objects, why=f"{rt.cni.name}'s policy tiers (priority cases)")
        self.remove_priority_case()
        for manifest in objects:
            self._priority_objects.append(manifest)
            try:
                self._runtime.applier.apply(manifest)
            except BaseException:
                self.remove_priority_case()
                raise

    def remove_priority_case(self) -> None:
        """Delete the case's objects (some CNIs' are cluster-scoped). Safe to repeat."""
        while self._priority_objects:
            self._runtime.applier.delete(self._priority_objects.pop())

    def delete_cluster_scoped(self) -> None:
        """Delete the priority case's objects at teardown, in the order they were applied:
        some CNIs' are cluster-scoped and outlive the namespace."""
        for manifest in self._priority_objects:
            self._runtime.applier.delete(manifest)
        self._priority_objects.clear()

    def apply_l7_policy(self, server: Endpoint, *, port: int, method: str, path: str) -> None:
        """Apply the CNI driver's HTTP rule allowing only ``method`` on ``path`` to
        ``server``'s ``port``.

        Raises
        ------
        cnibench.errors.UnsupportedError
            The CNI has no L7 (HTTP) policy.
        """
        rt = self._runtime
        self._require(Capability.L7_POLICY, f"{rt.cni.name} has no L7 (HTTP) policy")
        manifest = rt.driver.l7_policy(
            rt.scope,
            name=_L7_NAME,
            target=server.name,
            port=port,
            method=method,
            path=path,
        )
        self.remove_l7_policy()
        rt.announce_cluster_wide([manifest], why=f"{rt.cni.name}'s L7 policy")
        rt.applier.apply(manifest)
        self._l7_objects.append(manifest)

    def remove_l7_policy(self) -> None:
        """Delete the L7 policy. Safe to repeat."""
        for manifest in self._l7_objects:
            self._runtime.applier.delete(manifest)
        self._l7_objects.clear()
