"""CNI definitions: pinned versions, Helm values, capabilities and readiness, in one place.

:func:`cni_definition` turns a :class:`~cnibench.backends.base.ClusterSpec` (CNI name,
encryption, options) into a :class:`CniDefinition`: what to install (a Helm chart with values,
release manifests, or objects cnibench renders itself), which kind settings the CNI needs
(kube-proxy off, pod subnet), what it can do (:class:`~cnibench.backends.base.Capability`) and
which DaemonSets/Deployments must be ready before the cluster counts as up. Pure: nothing here
talks to a cluster.

Each CNI is defined by its driver module in :mod:`cnibench.backends.kube.cnis`; this module
holds what they share (the definition types, pinned versions, the option checks).

Versions live in :class:`CniVersions` (override by passing another instance); they were current
when written and must be checked upstream before a paper run (see REFERENCE-CNI.md).

Options in ``ClusterSpec.options`` are the driver's: each module's docstring lists what its
CNI takes (``mode`` and ``features`` for Cilium, ``features`` and ``egress-ip-range`` for
Antrea); the others take none.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from cnibench.backends.base import Capability, ClusterSpec
from cnibench.backends.kube.images import Images
from cnibench.errors import ConfigError

__all__ = [
    "GATEWAYS",
    "KIND_POD_SUBNET",
    "KUBE_PROXY_MODES",
    "NAPI_CHOICES",
    "NGF_NAMESPACE",
    "NGF_RELEASE",
    "Agent",
    "CniDefinition",
    "CniVersions",
    "HelmChart",
    "Readiness",
    "check_options",
    "cni_definition",
    "features_option",
    "nginx_gateway_fabric_chart",
    "refuse_wireguard",
]

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
    path:
        Local chart directory installed instead of ``chart`` from ``repo`` (e.g. Cilium's
        chart in its Go module, when no registry is reachable); ``""`` for none.
    """

    repo: str
    chart: str
    version: str
    release: str
    namespace: str
    values: Mapping[str, Any] = field(default_factory=dict)
    path: str = ""


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
class Agent:
    """The CNI's own per-node pods, whose CPU and memory are the CNI's cost.

    Attributes
    ----------
    name:
        What metrics call it (``cpu@<name>``, ``ram@<name>``), e.g. ``cilium-agent``.
    namespace, selector:
        Where its pods are and the label selector that finds them.
    """

    name: str
    namespace: str
    selector: str


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
    agent:
        The CNI's agent pods, or ``None`` when they are not known.
    gateway_agent:
        The pods of a Gateway API implementation cnibench installs beside the CNI (Traefik),
        whose CPU and memory are recorded the same way.
    addon_manifests:
        Objects of an add-on cnibench renders itself (Traefik for ``gateway=traefik``),
        applied after the CNI's.
    gateway_api_crds_dir:
        A local directory of the Gateway API CRDs to apply instead of downloading
        :attr:`gateway_api_crds`' release manifest (the offline image set's, in the Go module
        cache).
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
    gateway_class: str = ""
    encryption: str = ""
    gateway_api_crds: str = ""
    addon_charts: tuple[HelmChart, ...] = ()
    capability_hints: Mapping[Capability, str] = field(default_factory=dict)
    agent: Agent | None = None
    gateway_agent: Agent | None = None
    addon_manifests: tuple[Mapping[str, Any], ...] = ()
    gateway_api_crds_dir: str = ""


def refuse_wireguard(spec: ClusterSpec) -> None:
    """Refuse WireGuard encryption for a CNI that cannot encrypt.

    Raises
    ------
    cnibench.errors.ConfigError
        ``spec.encryption`` is ``"wireguard"``.
    """
    if spec.encryption == "wireguard":
        raise ConfigError(f"--cni {spec.cni} cannot encrypt with WireGuard")


def features_option(spec: ClusterSpec, allowed: Sequence[str]) -> frozenset[str] | None:
    """The ``features`` option of ``spec`` as a set (``None`` when not given).

    Raises
    ------
    cnibench.errors.ConfigError
        A feature not in ``allowed``, named with the choices.
    """
    raw = spec.options.get("features")
    if raw is None:
        return None
    features = frozenset(f.strip() for f in raw.split(",") if f.strip())
    unknown = sorted(features - set(allowed))
    if unknown:
        raise ConfigError(
            f"unknown {spec.cni} feature {', '.join(unknown)}: choose from {', '.join(allowed)}"
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


KUBE_PROXY_MODES = ("iptables", "nftables")
"""Values of the ``kube-proxy`` option every CNI that keeps kube-proxy takes on kind: the mode
kind gives kube-proxy (``networking.kubeProxyMode``; kind's default is ``iptables``)."""
NAPI_CHOICES = ("inline", "threaded")
GATEWAYS = ("traefik",)
"""Values of the ``gateway`` option every CNI without a Gateway API implementation of its own
takes: the implementation cnibench installs beside it."""
"""Values of the ``napi`` option every CNI takes on kind: ``threaded`` makes each node receive
in kernel threads of its own, counted as the node's CPU (``cpu@<role>``), as on the lab."""


def check_options(spec: ClusterSpec, allowed: frozenset[str] = frozenset()) -> None:
    """Refuse cluster options the CNI of ``spec`` does not take (every CNI takes ``napi``).

    Raises
    ------
    cnibench.errors.ConfigError
        One line naming the unknown options and, when there are any, the accepted ones; or a
        ``napi`` value that is not one of :data:`NAPI_CHOICES`.
    """
    napi = spec.options.get("napi", "inline")
    if napi not in NAPI_CHOICES:
        raise ConfigError(f"--cni {spec.cni}: napi={napi}: choose {' or '.join(NAPI_CHOICES)}")
    mode = spec.options.get("kube-proxy", "iptables")
    if mode not in KUBE_PROXY_MODES:
        raise ConfigError(
            f"--cni {spec.cni}: kube-proxy={mode}: choose {' or '.join(KUBE_PROXY_MODES)}"
        )
    gateway = spec.options.get("gateway", "")
    if gateway and gateway not in GATEWAYS:
        raise ConfigError(f"--cni {spec.cni}: gateway={gateway}: choose {', '.join(GATEWAYS)}")
    unknown_options = sorted(set(spec.options) - allowed - {"napi", "kube-proxy", "gateway"})
    if unknown_options:
        accepted = f" (it takes {', '.join(sorted(allowed))})" if allowed else ""
        raise ConfigError(
            f"--cni {spec.cni} takes no option {', '.join(unknown_options)}{accepted}"
        )


def with_traefik(definition: CniDefinition, spec: ClusterSpec, images: Images) -> CniDefinition:
    """``definition`` with Traefik as its Gateway API implementation: the standard CRDs of
    the Gateway API release Traefik is built against, Traefik's objects after the CNI's, its
    Deployment awaited, and traffic splitting offered.

    Raises
    ------
    cnibench.errors.ConfigError
        The CNI already has a Gateway API implementation enabled.
    """
    from cnibench.backends.kube import traefik
    from cnibench.backends.kube.offline.recipes import (
        GATEWAY_API_CRDS,
        GATEWAY_API_MODULE,
        OfflineVersions,
    )

    if definition.gateway_class:
        raise ConfigError(
            f"--cni {spec.label}: gateway=traefik beside {definition.name}'s own Gateway API"
            f" implementation ({definition.gateway_class}): choose one"
        )
    version = OfflineVersions().gateway_api
    crds_dir = ""
    if images.offline:
        from cnibench.backends.kube.offline.builder import module_cache_dir

        crds_dir = str(module_cache_dir(GATEWAY_API_MODULE, version) / GATEWAY_API_CRDS)
    hints: dict[Capability, str] = dict(definition.capability_hints)
    hints.pop(Capability.TRAFFIC_SPLIT, None)
    return dataclasses.replace(
        definition,
        capabilities=definition.capabilities | {Capability.TRAFFIC_SPLIT},
        readiness=(
            *definition.readiness,
            Readiness("Deployment", traefik.NAMESPACE, traefik.DEPLOYMENT),
        ),
        gateway_class=traefik.GATEWAY_CLASS,
        gateway_api_crds=version,
        gateway_api_crds_dir=crds_dir,
        addon_manifests=tuple(traefik.traefik_manifests(images.traefik)),
        capability_hints=hints,
        gateway_agent=Agent("traefik", traefik.NAMESPACE, traefik.SELECTOR),
    )


def cni_definition(
    spec: ClusterSpec,
    *,
    versions: CniVersions | None = None,
    images: Images | None = None,
    k8s_service_host: str = "",
) -> CniDefinition:
    """The :class:`CniDefinition` for ``spec``.

    Every CNI is defined by its driver in :data:`cnibench.backends.kube.cnis.DRIVERS`; this
    checks what is common (the encryption name) and finds the driver.

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
        API server host for CNIs that replace kube-proxy (see
        :func:`cnibench.backends.kube.cnis.cilium.cilium_values`).

    Raises
    ------
    cnibench.errors.ConfigError
        Unknown CNI, mode, feature, option or encryption, or encryption the CNI cannot do.
    """
    versions = versions or CniVersions()
    if spec.encryption not in ("", "wireguard"):
        raise ConfigError(f"unknown encryption {spec.encryption!r}: use '' or 'wireguard'")
    # Imported here: the driver modules import this one for CniDefinition.
    from cnibench.backends.kube.cnis import DRIVERS, cni_names

    driver = DRIVERS.get(spec.cni)
    if driver is not None:
        definition = driver.definition(
            spec,
            versions=versions,
            images=images or Images(),
            k8s_service_host=k8s_service_host,
        )
        if definition.replaces_kube_proxy and "kube-proxy" in spec.options:
            raise ConfigError(
                f"--cni {spec.label}: this configuration replaces kube-proxy, so it has no"
                " kube-proxy mode to choose"
            )
        if spec.options.get("gateway"):
            definition = with_traefik(definition, spec, images or Images())
        return definition
    raise ConfigError(f"unknown --cni {spec.cni!r}: choose one of {', '.join(cni_names())}")
