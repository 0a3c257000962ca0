"""Calico: installed through the tigera-operator chart, VXLAN (cross-subnet) on kind's pod
subnet. It takes no options."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from cnibench.backends.base import Capability, EncryptionStatus
from cnibench.backends.kube import render
from cnibench.backends.kube.cni_types import (
    KIND_POD_SUBNET,
    CniDefinition,
    HelmChart,
    Readiness,
    check_options,
)
from cnibench.backends.kube.cnis.base import AgentAccess, DriverBase, ObjectScope
from cnibench.backends.kube.encryption import WireguardAnnotation, wireguard_from_annotations
from cnibench.errors import ConfigError, UnsupportedError

if TYPE_CHECKING:
    from cnibench.backends.base import ClusterSpec
    from cnibench.backends.kube.cni_types import CniVersions
    from cnibench.backends.kube.images import Images
    from cnibench.policy import PolicySpec, PriorityCase

__all__ = ["CALICO", "CALICO_WIREGUARD", "CalicoDriver", "calico_network_policy"]

CALICO_WIREGUARD = WireguardAnnotation("projectcalico.org/WireguardPublicKey", "wireguard.cali")
"""Where every calico-node publishes its node's WireGuard public key, and its tunnel interface
(Calico's encrypt-cluster-pod-traffic page)."""

_CALICO_ACTIONS = {"allow": "Allow", "deny": "Deny", "pass": "Pass"}


def calico_network_policy(
    spec: PolicySpec,
    *,
    name: str,
    namespace: str,
    session: str,
    order: float = 100.0,
    action: str = "allow",
) -> dict[str, Any]:
    """Calico NetworkPolicy (``projectcalico.org/v3``) at ``order`` allowing, denying or
    passing (``Pass``: on to the next tier) ``spec.allowed`` to ``spec.target`` on
    ``spec.ports`` (lower order is applied first).

    Raises
    ------
    cnibench.errors.ConfigError
        Unknown action or negative order.
    """
    render.check_policy_action(action)
    if order < 0:
        raise ConfigError(f"Calico policy order must be >= 0, got {order}")
    sources = ", ".join(f"'{p.name}'" for p in spec.allowed)
    ports: list[int | str] = [
        p.first if p.first == p.last else f"{p.first}:{p.last}" for p in spec.ports
    ]
    rule = {
        "action": _CALICO_ACTIONS[action],
        "protocol": spec.protocol.value.upper(),
        "source": {"selector": f"{render.ENDPOINT_LABEL} in {{{sources}}}"},
        "destination": {"ports": ports},
    }
    return render.render_template(
        "policy/calico/network-policy.yaml",
        {
            "name": name,
            "namespace": namespace,
            "labels": render.session_labels(session),
            "order": float(order),
            "selector": f"{render.ENDPOINT_LABEL} == '{spec.target.name}'",
            "ingress": [rule],
        },
    )


class CalicoDriver(DriverBase):
    """Calico's driver."""

    name = "calico"
    # The tigera-operator chart release referenced by public installs (not installed on a real
    # cluster here).
    version = "3.30.3"
    not_offline = "Calico is not served by the Go module proxy"
    cluster_scoped_kinds = (("projectcalico.org/v3", "GlobalNetworkPolicy"),)

    def definition(
        self,
        spec: ClusterSpec,
        *,
        versions: CniVersions,
        images: Images,
        k8s_service_host: str = "",
    ) -> CniDefinition:
        """The operator chart with one IP pool, capabilities (policy, tiers, WireGuard) and
        readiness (operator, then calico-node).

        Raises
        ------
        cnibench.errors.ConfigError
            Any option.
        """
        check_options(spec)
        pool = {"cidr": KIND_POD_SUBNET, "encapsulation": "VXLANCrossSubnet"}
        return CniDefinition(
            name=self.name,
            version=versions.version(self.name, self.version),
            capabilities=frozenset(
                {Capability.NETWORK_POLICY, Capability.WIREGUARD, Capability.POLICY_TIERS}
            ),
            readiness=(
                Readiness("Deployment", "tigera-operator", "tigera-operator"),
                Readiness("DaemonSet", "calico-system", "calico-node"),
            ),
            chart=HelmChart(
                repo="https://docs.tigera.io/calico/charts",
                chart="tigera-operator",
                version=f"v{versions.version(self.name, self.version)}",
                release="calico",
                namespace="tigera-operator",
                values={"installation": {"calicoNetwork": {"ipPools": [pool]}}},
            ),
            encryption=spec.encryption,
        )

    def priority_objects(
        self, scope: ObjectScope, spec: PolicySpec, case: PriorityCase
    ) -> list[dict[str, Any]]:
        """One Calico NetworkPolicy per layer, its ``order`` the layer's priority (tiers are
        not rendered).

        Raises
        ------
        cnibench.errors.UnsupportedError
            A case whose tier order differs from its priority order, or with equal
            priorities: ``order`` alone cannot express it.
        """
        by_order = sorted(case.layers, key=lambda layer: layer.priority)
        priorities = [layer.priority for layer in case.layers]
        if list(case.ordered_layers) != by_order or len(set(priorities)) < len(priorities):
            raise UnsupportedError(
                f"priority case {case.name}: Calico order alone cannot express its tiers"
            )
        return [
            calico_network_policy(
                spec,
                name=f"cnibench-prio-{index}",
                namespace=scope.namespace,
                session=scope.session,
                order=layer.priority,
                action=layer.action.value,
            )
            for index, layer in enumerate(case.layers)
        ]

    def encryption_status(self, access: AgentAccess) -> EncryptionStatus:
        """The WireGuard public key each calico-node publishes on its Node."""
        return wireguard_from_annotations(CALICO_WIREGUARD, access.node_annotations())


CALICO = CalicoDriver()
"""The driver registered in :data:`cnibench.backends.kube.cnis.DRIVERS`."""
