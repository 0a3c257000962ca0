"""Antrea: installed from its Helm chart with the Egress and L7NetworkPolicy feature gates.

Options of ``--cni antrea``: ``features`` (``gateway-api``: Antrea has no Gateway API of its
own, so NGINX Gateway Fabric is installed after it, Gateway API CRDs first, GatewayClass
``nginx``) and ``egress-ip-range`` (``FIRST-LAST`` IPv4 addresses for the ExternalIPPool on
the egress-gw node; the first is the egress IP; without it kind clusters use the top of the
kind network's subnet).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from cnibench.backends.base import Capability, EncryptionStatus, NodeRole
from cnibench.backends.kube import render
from cnibench.backends.kube.cni_types import (
    NGF_NAMESPACE,
    NGF_RELEASE,
    NGINX_GATEWAY_API,
    CniDefinition,
    HelmChart,
    Readiness,
    check_options,
    features_option,
    nginx_gateway_fabric_chart,
)
from cnibench.backends.kube.cnis.base import AgentAccess, DriverBase, ObjectScope
from cnibench.backends.kube.encryption import WireguardAnnotation, wireguard_from_annotations
from cnibench.backends.kube.external import parse_ip_range
from cnibench.errors import ConfigError, UnsupportedError
from cnibench.policy import TIERS

if TYPE_CHECKING:
    from cnibench.backends.base import ClusterSpec
    from cnibench.backends.kube.cni_types import CniVersions
    from cnibench.backends.kube.images import Images
    from cnibench.policy import PolicySpec, PriorityCase

__all__ = [
    "ANTREA",
    "ANTREA_FEATURES",
    "ANTREA_TIERS",
    "ANTREA_WIREGUARD",
    "AntreaDriver",
    "antrea_cluster_network_policy",
    "antrea_egress",
    "antrea_external_ip_pool",
    "antrea_l7_policy",
]

ANTREA_FEATURES = ("gateway-api",)

ANTREA_WIREGUARD = WireguardAnnotation("node.antrea.io/wireguard-public-key", "antrea-wg0")
"""Where every agent publishes its node's WireGuard public key, and its tunnel interface
(Antrea's docs/traffic-encryption.md)."""


def antrea_external_ip_pool(
    name: str,
    *,
    session: str,
    first_ip: str,
    last_ip: str,
    gateway_node: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """ExternalIPPool (``crd.antrea.io/v1beta1``) of egress IPs hosted by the egress-gw node,
    selected by ``gateway_node`` (labels it carries; default: the role label)."""
    return render.render_template(
        "egress/antrea/external-ip-pool.yaml",
        {
            "name": name,
            "labels": render.session_labels(session),
            "ip_ranges": [{"start": first_ip, "end": last_ip}],
            "gateway_node_labels": dict(
                gateway_node or {render.ROLE_LABEL: NodeRole.EGRESS_GW.value}
            ),
        },
    )


def antrea_egress(
    name: str, *, session: str, namespace: str, pool: str, egress_ip: str = ""
) -> dict[str, Any]:
    """Egress (``crd.antrea.io/v1beta1``) applying ``pool`` to the session's pods labelled
    ``cnibench.io/egress=<name>`` in ``namespace``.

    Parameters
    ----------
    egress_ip:
        Address of ``pool`` to SNAT to (``spec.egressIP``), so the source the external host
        sees is known in advance; ``""`` lets Antrea pick one from the pool.
    """
    manifest = render.render_template(
        "egress/antrea/egress.yaml",
        {
            "name": name,
            "labels": render.session_labels(session),
            "namespace_labels": {"kubernetes.io/metadata.name": namespace},
            "pod_labels": {render.SESSION_LABEL: session, "cnibench.io/egress": name},
            "pool": pool,
        },
    )
    if egress_ip:
        manifest["spec"]["egressIP"] = egress_ip
    return manifest


ANTREA_TIERS: Mapping[str, int] = TIERS
"""Antrea's built-in tiers and their priorities (lower is evaluated first): the tiers priority
cases are written in (:data:`cnibench.policy.TIERS`) are Antrea's own."""


_ANTREA_ACTIONS = {"allow": "Allow", "deny": "Drop", "pass": "Pass"}


def antrea_cluster_network_policy(
    spec: PolicySpec,
    *,
    name: str,
    namespace: str,
    session: str,
    tier: str = "application",
    priority: float = 5.0,
    action: str = "allow",
) -> dict[str, Any]:
    """ClusterNetworkPolicy (``crd.antrea.io/v1beta1``) in ``tier`` at ``priority`` allowing
    (``Allow``), dropping (``Drop``) or passing on (``Pass``: skip the remaining Antrea policies
    of the non-baseline tiers, on to Kubernetes NetworkPolicy) ``spec.allowed`` to
    ``spec.target`` on ``spec.ports``.

    Parameters
    ----------
    tier:
        One of :data:`ANTREA_TIERS`.
    priority:
        Policy priority within the tier, 1.0 .. 10000.0 (lower first).

    Raises
    ------
    cnibench.errors.ConfigError
        Unknown tier or action, or priority out of range.
    """
    render.check_policy_action(action)
    if tier not in ANTREA_TIERS:
        raise ConfigError(f"unknown Antrea tier {tier!r}: choose {', '.join(ANTREA_TIERS)}")
    if not 1.0 <= priority <= 10000.0:
        raise ConfigError(f"Antrea policy priority {priority} is outside 1.0..10000.0")
    namespace_labels = {"kubernetes.io/metadata.name": namespace}
    rule = {
        "name": f"{action}-{spec.target.name}",
        "action": _ANTREA_ACTIONS[action],
        "from": [
            {
                "namespaceSelector": {"matchLabels": namespace_labels},
                "podSelector": {"matchLabels": {render.ENDPOINT_LABEL: p.name}},
            }
            for p in spec.allowed
        ],
        "ports": render.l4_ports(spec),
    }
    return render.render_template(
        "policy/antrea/cluster-network-policy.yaml",
        {
            "name": name,
            "labels": render.session_labels(session),
            "tier": tier,
            "priority": float(priority),
            "namespace_labels": namespace_labels,
            "target_labels": {render.ENDPOINT_LABEL: spec.target.name},
            "ingress": [rule],
        },
    )


def antrea_l7_policy(
    name: str, *, namespace: str, session: str, target: str, port: int, method: str, path: str
) -> dict[str, Any]:
    """Antrea NetworkPolicy allowing only ``method`` on exactly ``path`` to ``target:port``
    (``l7Protocols: [{http: {method, path}}]``; Antrea matches ``path`` as a glob only when it
    contains ``*``, so a plain path means exactly that path)."""
    values = render.l7_values(name, namespace, session, target, path)
    if "*" in path:
        raise ConfigError(f"L7 policy path {path!r}: '*' would make Antrea match a glob")
    return render.render_template(
        "l7/antrea/http-policy.yaml",
        {
            **values,
            "rule_name": f"allow-http-{method.lower()}",
            "port": port,
            "http": {"method": method.upper(), "path": path},
        },
    )


class AntreaDriver(DriverBase):
    """Antrea's driver (see the module docstring for its options)."""

    name = "antrea"
    # 2.4.x (2.4.5 released in March 2026) is referenced by public installs; not installed on
    # a real cluster here.
    version = "2.4.3"
    not_offline = "Antrea is not served by the Go module proxy"
    kernel_module = "openvswitch"
    cluster_scoped_kinds = (
        ("crd.antrea.io/v1beta1", "Egress"),
        ("crd.antrea.io/v1beta1", "ExternalIPPool"),
        ("crd.antrea.io/v1beta1", "ClusterNetworkPolicy"),
    )
    egress_needs_ip_range = True

    def definition(
        self,
        spec: ClusterSpec,
        *,
        versions: CniVersions,
        images: Images,
        k8s_service_host: str = "",
    ) -> CniDefinition:
        """Chart values (feature gates, WireGuard mode), capabilities (policy, tiers, egress,
        WireGuard, L7; traffic splitting with ``gateway-api``) and readiness.

        Raises
        ------
        cnibench.errors.ConfigError
            An unknown option or feature, or an unreadable ``egress-ip-range``.
        """
        check_options(spec, frozenset({"egress-ip-range", "features"}))
        if "egress-ip-range" in spec.options:
            parse_ip_range(spec.options["egress-ip-range"])
        config: dict[str, Any] = {
            "featureGates": {"Egress": True, "L7NetworkPolicy": True},
            "disableTXChecksumOffload": True,
        }
        if spec.encryption == "wireguard":
            config["trafficEncryptionMode"] = "wireGuard"
        gateway_api = "gateway-api" in (features_option(spec, ANTREA_FEATURES) or ())
        caps = {
            Capability.NETWORK_POLICY,
            Capability.EGRESS_GATEWAY,
            Capability.WIREGUARD,
            Capability.L7_POLICY,
            Capability.POLICY_TIERS,
        }
        readiness = [
            Readiness("DaemonSet", "kube-system", "antrea-agent"),
            Readiness("Deployment", "kube-system", "antrea-controller"),
        ]
        if gateway_api:
            caps.add(Capability.TRAFFIC_SPLIT)
            readiness.append(
                Readiness("Deployment", NGF_NAMESPACE, f"{NGF_RELEASE}-nginx-gateway-fabric")
            )
        return CniDefinition(
            name=self.name,
            version=versions.version(self.name, self.version),
            capabilities=frozenset(caps),
            readiness=tuple(readiness),
            chart=HelmChart(
                repo="https://charts.antrea.io",
                chart="antrea",
                version=versions.version(self.name, self.version),
                release="antrea",
                namespace="kube-system",
                values=config,
            ),
            encryption=spec.encryption,
            gateway_class="nginx" if gateway_api else "",
            gateway_api_crds=(
                versions.version("nginx-gateway-api", NGINX_GATEWAY_API) if gateway_api else ""
            ),
            addon_charts=(nginx_gateway_fabric_chart(versions),) if gateway_api else (),
            capability_hints={}
            if gateway_api
            else {Capability.TRAFFIC_SPLIT: "add the feature: --cni antrea:gateway-api"},
        )

    def egress_objects(
        self,
        scope: ObjectScope,
        *,
        clients: Sequence[str],
        destination: str,
        egress_ip_range: tuple[str, str] | None,
    ) -> list[dict[str, Any]]:
        """An ExternalIPPool of ``egress_ip_range`` on the egress-gw node, then an Egress
        with the range's first address as ``egressIP``. Antrea's Egress (v1beta1) has no
        destination field, so it applies to all traffic leaving the cluster.

        Raises
        ------
        cnibench.errors.UnsupportedError
            No egress IP range.
        """
        if egress_ip_range is None:
            raise UnsupportedError(
                "antrea egress needs an egress IP range: cluster option"
                " egress-ip-range=FIRST-LAST or $CNIBENCH_EGRESS_IP_RANGE (kind: derived"
                " from the kind network)"
            )
        first, last = egress_ip_range
        pool = f"cnibench-pool-{scope.session}"
        return [
            antrea_external_ip_pool(
                pool,
                session=scope.session,
                first_ip=first,
                last_ip=last,
                gateway_node=scope.gateway_node,
            ),
            antrea_egress(
                f"cnibench-egress-{scope.session}",
                session=scope.session,
                namespace=scope.namespace,
                pool=pool,
                egress_ip=first,
            ),
        ]

    def egress_source(self, *, gateway_ip: str, egress_ip_range: tuple[str, str] | None) -> str:
        """The egress IP (first of the range), or the gateway node's address without one."""
        return egress_ip_range[0] if egress_ip_range is not None else gateway_ip

    def priority_objects(
        self, scope: ObjectScope, spec: PolicySpec, case: PriorityCase
    ) -> list[dict[str, Any]]:
        """One ClusterNetworkPolicy per layer: tier and priority map one to one. The objects
        are cluster-scoped, so their names carry the session's namespace."""
        return [
            antrea_cluster_network_policy(
                spec,
                name=f"{scope.namespace}-prio-{index}",
                namespace=scope.namespace,
                session=scope.session,
                tier=layer.tier,
                priority=layer.priority,
                action=layer.action.value,
            )
            for index, layer in enumerate(case.layers)
        ]

    def l7_policy(
        self, scope: ObjectScope, *, name: str, target: str, port: int, method: str, path: str
    ) -> dict[str, Any]:
        """An Antrea NetworkPolicy with ``l7Protocols`` (its L7 engine rejects other
        requests)."""
        return antrea_l7_policy(
            name,
            namespace=scope.namespace,
            session=scope.session,
            target=target,
            port=port,
            method=method,
            path=path,
        )

    def encryption_status(self, access: AgentAccess) -> EncryptionStatus:
        """The WireGuard public key each agent publishes on its Node."""
        return wireguard_from_annotations(ANTREA_WIREGUARD, access.node_annotations())


ANTREA = AntreaDriver()
"""The driver registered in :data:`cnibench.backends.kube.cnis.DRIVERS`."""
