"""CNI definitions: pinned versions, Helm values, capabilities and readiness, in one place.

:func:`cni_definition` turns a :class:`~cnibench.backends.base.ClusterSpec` (CNI name,
encryption, options) into a :class:`CniDefinition`: what to install (a Helm chart with values,
release manifests, or objects cnibench renders itself), which kind settings the CNI needs
(kube-proxy off, pod subnet), what it can do (:class:`~cnibench.backends.base.Capability`) and
which DaemonSets/Deployments must be ready before the cluster counts as up. Pure: nothing here
talks to a cluster.

CNIs with a driver module in :mod:`cnibench.backends.kube.cnis` (flannel) are defined there;
the others still have their branch in :func:`cni_definition`.

Versions live in :class:`CniVersions` (override by passing another instance); they were current
when written and must be checked upstream before a paper run (see REFERENCE-CNI.md).

Options understood in ``ClusterSpec.options``:

``mode`` (cilium)
    ``kpr`` (default: eBPF kube-proxy replacement, kind ``kubeProxyMode: none``) or
    ``kube-proxy`` (iptables kube-proxy kept), the two set-ups seed 001 compares.
``features`` (cilium)
    Comma-separated subset of ``egress-gateway``, ``gateway-api``, ``l7``; default
    ``egress-gateway,l7`` in ``kpr`` mode and ``l7`` with kube-proxy (the egress gateway and
    Gateway API need kube-proxy replacement). ``gateway-api`` needs the Gateway API CRDs
    installed *before* Cilium (:attr:`CniDefinition.gateway_api_crds`): cilium-operator looks
    for them once at start and otherwise leaves Gateway API off.
``features`` (antrea)
    ``gateway-api``: Antrea has no Gateway API of its own, so NGINX Gateway Fabric is
    installed after it (Gateway API CRDs first, GatewayClass ``nginx``).
``egress-ip-range`` (antrea)
    ``FIRST-LAST`` IPv4 addresses for the ExternalIPPool on the egress-gw node; the first is
    the egress IP. Without it kind clusters use the top of the kind network's subnet.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from cnibench.backends.base import Capability, ClusterSpec
from cnibench.backends.kube.images import Images
from cnibench.errors import ConfigError

__all__ = [
    "ANTREA_FEATURES",
    "CILIUM_FEATURES",
    "CILIUM_MODES",
    "CNI_NAMES",
    "CniDefinition",
    "CniVersions",
    "HelmChart",
    "Readiness",
    "check_options",
    "cilium_values",
    "cni_definition",
    "nginx_gateway_fabric_chart",
]

CNI_NAMES = ("kindnet", "cilium", "antrea", "calico", "flannel", "kube-router")
CILIUM_MODES = ("kpr", "kube-proxy")
CILIUM_FEATURES = ("egress-gateway", "gateway-api", "l7")
ANTREA_FEATURES = ("gateway-api",)
NGF_RELEASE = "ngf"
NGF_NAMESPACE = "nginx-gateway"
KIND_POD_SUBNET = "10.244.0.0/16"
"""kind's default pod subnet; flannel's ``net-conf.json`` is given the same network."""


@dataclass(frozen=True)
class CniVersions:
    """Pinned CNI versions (override by passing another instance to :func:`cni_definition`).

    Attributes
    ----------
    cilium, antrea, calico, flannel, kube_router:
        Release versions (Helm chart version or release tag). Each was checked to be a
        published release (November 2026): Cilium 1.18.4's Go module and chart are what the
        kube tier renders; Antrea 2.4.x (2.4.5 released in March 2026), tigera-operator chart
        v3.30.3 and kube-router v2.6.1 are referenced by public installs. flannel v0.28.10 is
        the release whose flanneld :attr:`~cnibench.backends.kube.images.Images.flannel`
        runs (keep the two in step: this one is only recorded, the image is what runs). None
        was installed on a real cluster here.
    cilium_gateway_api:
        Gateway API release whose standard CRDs go in before Cilium: the one Cilium's own
        documentation requires (``Documentation/network/servicemesh/gateway-api/
        installation.rst`` of 1.18.4 names v1.2.0). Newer CRDs may carry versions the
        operator does not know.
    nginx_gateway_fabric:
        NGINX Gateway Fabric chart version (the Gateway API for CNIs without one).
    nginx_gateway_api:
        Gateway API release NGINX Gateway Fabric is built against (2.4.x: v1.4.1, per its
        technical specifications).
    """

    cilium: str = "1.18.4"
    antrea: str = "2.4.3"
    calico: str = "3.30.3"
    flannel: str = "v0.28.10"
    kube_router: str = "v2.6.1"
    cilium_gateway_api: str = "v1.2.0"
    nginx_gateway_fabric: str = "2.4.2"
    nginx_gateway_api: str = "v1.4.1"


@dataclass(frozen=True)
class HelmChart:
    """A Helm release to install.

    Attributes
    ----------
    repo:
        Chart repository URL; empty when ``chart`` is an ``oci://`` reference.
    chart:
        Chart name in that repository, or an ``oci://`` reference.
    version:
        Chart version.
    release:
        Release name.
    namespace:
        Namespace of the release.
    values:
        Helm values (recorded in the environment fingerprint; never secrets).
    """

    repo: str
    chart: str
    version: str
    release: str
    namespace: str
    values: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Readiness:
    """A workload that must be fully rolled out before the CNI counts as ready.

    Attributes
    ----------
    kind:
        ``"DaemonSet"`` or ``"Deployment"``.
    namespace, name:
        Where it is.
    """

    kind: str
    namespace: str
    name: str


@dataclass(frozen=True)
class CniDefinition:
    """How to install a CNI and what it offers.

    Attributes
    ----------
    name, version:
        CNI and its pinned version.
    capabilities:
        Features scenarios may use.
    readiness:
        Workloads to wait for after installing.
    chart:
        Helm release to install, or ``None`` (manifests or kind's default).
    manifest_urls:
        Release manifests to apply when there is no chart.
    manifests:
        Objects cnibench renders itself (a driver's
        :meth:`~cnibench.backends.kube.cnis.CniDriver.manifests`), server-side applied when
        there is neither a chart nor a manifest URL. Pure data: installing needs no network.
    replaces_kube_proxy:
        Whether kind must be created with ``kubeProxyMode: none``.
    disable_default_cni:
        Whether kind's own CNI (kindnet) must be off.
    pod_subnet:
        Pod CIDR the CNI expects.
    egress_api:
        Which egress objects to render: ``"cilium"``, ``"antrea"`` or ``""``.
    gateway_class:
        GatewayClass for traffic splitting, ``""`` without Gateway API.
    encryption:
        ``"wireguard"`` or ``""``.
    gateway_api_crds:
        Gateway API release (e.g. ``v1.2.0``) whose standard-channel CRDs are installed and
        Established *before* the CNI chart; ``""`` for none.
    addon_charts:
        Helm releases installed after the CNI chart (NGINX Gateway Fabric); their workloads
        are in :attr:`readiness` too.
    capability_hints:
        For a capability the CNI lacks, a few words on why or what to use instead; appended
        to the reason a scenario needing it is skipped.
    """

    name: str
    version: str
    capabilities: frozenset[Capability]
    readiness: tuple[Readiness, ...]
    chart: HelmChart | None = None
    manifest_urls: tuple[str, ...] = ()
    manifests: tuple[Mapping[str, Any], ...] = ()
    replaces_kube_proxy: bool = False
    disable_default_cni: bool = True
    pod_subnet: str = KIND_POD_SUBNET
    egress_api: str = ""
    gateway_class: str = ""
    encryption: str = ""
    gateway_api_crds: str = ""
    addon_charts: tuple[HelmChart, ...] = ()
    capability_hints: Mapping[Capability, str] = field(default_factory=dict)


def _feature_set(spec: ClusterSpec, mode: str) -> frozenset[str]:
    raw = spec.options.get("features")
    if raw is None:
        return frozenset({"egress-gateway", "l7"} if mode == "kpr" else {"l7"})
    features = frozenset(f.strip() for f in raw.split(",") if f.strip())
    unknown = sorted(features - set(CILIUM_FEATURES))
    if unknown:
        raise ConfigError(
            f"unknown cilium feature {', '.join(unknown)}: choose from {', '.join(CILIUM_FEATURES)}"
        )
    needs_kpr = sorted(features & {"egress-gateway", "gateway-api"})
    if mode != "kpr" and needs_kpr:
        raise ConfigError(
            f"cilium feature {', '.join(needs_kpr)} needs mode=kpr (kube-proxy replacement)"
        )
    return features


def _antrea_features(spec: ClusterSpec) -> frozenset[str]:
    raw = spec.options.get("features", "")
    features = frozenset(f.strip() for f in raw.split(",") if f.strip())
    unknown = sorted(features - set(ANTREA_FEATURES))
    if unknown:
        raise ConfigError(
            f"unknown antrea feature {', '.join(unknown)}: choose from {', '.join(ANTREA_FEATURES)}"
        )
    return features


def nginx_gateway_fabric_chart(versions: CniVersions | None = None) -> HelmChart:
    """NGINX Gateway Fabric's Helm release: the OCI chart into ``nginx-gateway``, creating
    GatewayClass ``nginx`` (its Deployment is ``ngf-nginx-gateway-fabric``).

    Both names follow the chart's templates (read in its source, not rendered here: the chart
    is only on ghcr.io): ``gatewayclass.yaml`` names the class
    ``.Values.nginxGateway.gatewayClassName``, and the Deployment takes the chart's full name,
    ``<release>-nginx-gateway-fabric`` unless the release name contains the chart name."""
    versions = versions or CniVersions()
    return HelmChart(
        repo="",
        chart="oci://ghcr.io/nginx/charts/nginx-gateway-fabric",
        version=versions.nginx_gateway_fabric,
        release=NGF_RELEASE,
        namespace=NGF_NAMESPACE,
        values={"nginxGateway": {"gatewayClassName": "nginx"}},
    )


def cilium_values(
    *,
    mode: str,
    features: frozenset[str],
    wireguard: bool,
    k8s_service_host: str = "",
    k8s_service_port: int = 6443,
) -> dict[str, Any]:
    """Helm values of the Cilium chart for a mode and feature set.

    Parameters
    ----------
    mode:
        ``"kpr"`` or ``"kube-proxy"``.
    features:
        Subset of :data:`CILIUM_FEATURES`.
    wireguard:
        Encrypt pod-to-pod traffic with WireGuard (UDP 51871).
    k8s_service_host, k8s_service_port:
        API server address the agents use without kube-proxy (kind:
        ``<cluster>-control-plane`` and 6443); omitted when empty.

    Returns
    -------
    dict
        Values accepted by the chart's ``values.schema.json``.
    """
    kpr = mode == "kpr"
    values: dict[str, Any] = {
        "ipam": {"mode": "kubernetes"},
        "kubeProxyReplacement": kpr,
        "routingMode": "tunnel",
        "tunnelProtocol": "vxlan",
        "bpf": {"masquerade": kpr},
        "l7Proxy": "l7" in features or "gateway-api" in features,
        "egressGateway": {"enabled": "egress-gateway" in features},
        "gatewayAPI": {"enabled": "gateway-api" in features},
        "encryption": {"enabled": wireguard, "type": "wireguard"},
        "prometheus": {"enabled": True},
        "operator": {"replicas": 1, "prometheus": {"enabled": True}},
        "hubble": {"enabled": False},
    }
    if kpr and k8s_service_host:
        values["k8sServiceHost"] = k8s_service_host
        values["k8sServicePort"] = k8s_service_port
    return values


def check_options(spec: ClusterSpec, allowed: frozenset[str] = frozenset()) -> None:
    """Refuse cluster options the CNI of ``spec`` does not take.

    Raises
    ------
    cnibench.errors.ConfigError
        One line naming the unknown options and, when there are any, the accepted ones.
    """
    unknown_options = sorted(set(spec.options) - allowed)
    if unknown_options:
        accepted = f" (it takes {', '.join(sorted(allowed))})" if allowed else ""
        raise ConfigError(
            f"--cni {spec.cni} takes no option {', '.join(unknown_options)}{accepted}"
        )


def cni_definition(
    spec: ClusterSpec,
    *,
    versions: CniVersions | None = None,
    images: Images | None = None,
    k8s_service_host: str = "",
) -> CniDefinition:
    """The :class:`CniDefinition` for ``spec``.

    A CNI with a driver in :data:`cnibench.backends.kube.cnis.DRIVERS` is defined by it; the
    others by the branches here (until they move to drivers too).

    Parameters
    ----------
    spec:
        Cluster spec (CNI name, encryption, options).
    versions:
        Pinned versions; :class:`CniVersions` defaults when ``None``.
    images:
        Images of the objects cnibench renders for the CNI (flannel's DaemonSet);
        :class:`~cnibench.backends.kube.images.Images` defaults when ``None`` (the
        environment is not read here: the backend passes its own).
    k8s_service_host:
        API server host for CNIs that replace kube-proxy (see :func:`cilium_values`).

    Raises
    ------
    cnibench.errors.ConfigError
        Unknown CNI, mode, feature, option or encryption, or encryption the CNI cannot do.
    """
    versions = versions or CniVersions()
    if spec.encryption not in ("", "wireguard"):
        raise ConfigError(f"unknown encryption {spec.encryption!r}: use '' or 'wireguard'")
    # Imported here: the driver modules import this one for CniDefinition.
    from cnibench.backends.kube.cnis import DRIVERS

    driver = DRIVERS.get(spec.cni)
    if driver is not None:
        return driver.definition(
            spec,
            versions=versions,
            images=images or Images(),
            k8s_service_host=k8s_service_host,
        )
    wireguard = spec.encryption == "wireguard"
    policy = {Capability.NETWORK_POLICY}
    if spec.cni == "cilium":
        mode = spec.options.get("mode", "kpr")
        if mode not in CILIUM_MODES:
            raise ConfigError(f"unknown cilium mode {mode!r}: choose {', '.join(CILIUM_MODES)}")
        features = _feature_set(spec, mode)
        caps = set(policy) | {Capability.WIREGUARD}
        if "egress-gateway" in features:
            caps.add(Capability.EGRESS_GATEWAY)
        if "l7" in features:
            caps.add(Capability.L7_POLICY)
        if "gateway-api" in features:
            caps.add(Capability.TRAFFIC_SPLIT)
        readiness = [
            Readiness("DaemonSet", "kube-system", "cilium"),
            Readiness("Deployment", "kube-system", "cilium-operator"),
        ]
        if "l7" in features or "gateway-api" in features:
            readiness.append(Readiness("DaemonSet", "kube-system", "cilium-envoy"))
        return CniDefinition(
            name="cilium",
            version=versions.cilium,
            capabilities=frozenset(caps),
            readiness=tuple(readiness),
            chart=HelmChart(
                repo="https://helm.cilium.io",
                chart="cilium",
                version=versions.cilium,
                release="cilium",
                namespace="kube-system",
                values=cilium_values(
                    mode=mode,
                    features=features,
                    wireguard=wireguard,
                    k8s_service_host=k8s_service_host,
                ),
            ),
            replaces_kube_proxy=mode == "kpr",
            egress_api="cilium" if "egress-gateway" in features else "",
            gateway_class="cilium" if "gateway-api" in features else "",
            encryption=spec.encryption,
            gateway_api_crds=versions.cilium_gateway_api if "gateway-api" in features else "",
        )
    check_options(
        spec, frozenset({"egress-ip-range", "features"}) if spec.cni == "antrea" else frozenset()
    )
    if "egress-ip-range" in spec.options:
        from cnibench.backends.kube.external import parse_ip_range

        parse_ip_range(spec.options["egress-ip-range"])
    if spec.cni == "antrea":
        config: dict[str, Any] = {"featureGates": {"Egress": True, "L7NetworkPolicy": True}}
        config["disableTXChecksumOffload"] = True
        if wireguard:
            config["trafficEncryptionMode"] = "wireGuard"
        gateway_api = "gateway-api" in _antrea_features(spec)
        antrea_caps = policy | {
            Capability.EGRESS_GATEWAY,
            Capability.WIREGUARD,
            Capability.L7_POLICY,
            Capability.POLICY_TIERS,
        }
        antrea_ready = [
            Readiness("DaemonSet", "kube-system", "antrea-agent"),
            Readiness("Deployment", "kube-system", "antrea-controller"),
        ]
        if gateway_api:
            antrea_caps.add(Capability.TRAFFIC_SPLIT)
            antrea_ready.append(
                Readiness("Deployment", NGF_NAMESPACE, f"{NGF_RELEASE}-nginx-gateway-fabric")
            )
        return CniDefinition(
            name="antrea",
            version=versions.antrea,
            capabilities=frozenset(antrea_caps),
            readiness=tuple(antrea_ready),
            chart=HelmChart(
                repo="https://charts.antrea.io",
                chart="antrea",
                version=versions.antrea,
                release="antrea",
                namespace="kube-system",
                values=config,
            ),
            egress_api="antrea",
            encryption=spec.encryption,
            gateway_class="nginx" if gateway_api else "",
            gateway_api_crds=versions.nginx_gateway_api if gateway_api else "",
            addon_charts=(nginx_gateway_fabric_chart(versions),) if gateway_api else (),
        )
    if wireguard and spec.cni != "calico":
        raise ConfigError(f"--cni {spec.cni} cannot encrypt with WireGuard")
    if spec.cni == "calico":
        return CniDefinition(
            name="calico",
            version=versions.calico,
            capabilities=frozenset(policy | {Capability.WIREGUARD, Capability.POLICY_TIERS}),
            readiness=(
                Readiness("Deployment", "tigera-operator", "tigera-operator"),
                Readiness("DaemonSet", "calico-system", "calico-node"),
            ),
            chart=HelmChart(
                repo="https://docs.tigera.io/calico/charts",
                chart="tigera-operator",
                version=f"v{versions.calico}",
                release="calico",
                namespace="tigera-operator",
                values={
                    "installation": {
                        "calicoNetwork": {
                            "ipPools": [
                                {"cidr": KIND_POD_SUBNET, "encapsulation": "VXLANCrossSubnet"}
                            ]
                        }
                    }
                },
            ),
            encryption=spec.encryption,
        )
    if spec.cni == "kube-router":
        return CniDefinition(
            name="kube-router",
            version=versions.kube_router,
            capabilities=frozenset(policy),
            readiness=(Readiness("DaemonSet", "kube-system", "kube-router"),),
            manifest_urls=(
                "https://raw.githubusercontent.com/cloudnativelabs/kube-router/"
                f"{versions.kube_router}/daemonset/generic-kuberouter.yaml",
            ),
        )
    if spec.cni == "kindnet":
        return CniDefinition(
            name="kindnet",
            version="kind",
            capabilities=frozenset(policy),
            readiness=(Readiness("DaemonSet", "kube-system", "kindnet"),),
            disable_default_cni=False,
        )
    raise ConfigError(f"unknown --cni {spec.cni!r}: choose one of {', '.join(CNI_NAMES)}")
