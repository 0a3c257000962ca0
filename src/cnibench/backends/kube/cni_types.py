"""What a CNI driver produces and checks: the definition types (:class:`CniDefinition`,
:class:`HelmChart`, :class:`Readiness`, :class:`Agent`), :class:`CniVersions` and the option
checks every driver shares.

The bottom of the CNI layer: driver modules import this, and
:mod:`cnibench.backends.kube.cni` (which finds a driver in the registry) re-exports it. It
imports nothing of the kube backend, so every module may import it. Pure: nothing here talks to
a cluster.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from cnibench.backends.base import Capability, ClusterSpec
from cnibench.errors import ConfigError

__all__ = [
    "GATEWAYS",
    "KIND_POD_SUBNET",
    "KUBE_PROXY_MODES",
    "NAPI_CHOICES",
    "NGF_NAMESPACE",
    "NGF_RELEASE",
    "NGINX_GATEWAY_API",
    "NGINX_GATEWAY_FABRIC",
    "Agent",
    "CniDefinition",
    "CniVersions",
    "ConfigLimit",
    "HelmChart",
    "Readiness",
    "check_options",
    "features_option",
    "nginx_gateway_fabric_chart",
    "refuse_wireguard",
]

NGF_RELEASE = "ngf"
NGF_NAMESPACE = "nginx-gateway"
KIND_POD_SUBNET = "10.244.0.0/16"
"""kind's default pod subnet; flannel's ``net-conf.json`` is given the same network."""


NGINX_GATEWAY_FABRIC = "2.4.2"
"""NGINX Gateway Fabric chart version (the Gateway API for CNIs without one of their own)."""
NGINX_GATEWAY_API = "v1.4.1"
"""Gateway API release NGINX Gateway Fabric is built against (2.4.x: v1.4.1, per its technical
specifications)."""


@dataclass(frozen=True)
class CniVersions:
    """Pinned versions that differ from the drivers' own (pass one to
    :func:`~cnibench.backends.kube.cni.cni_definition` to try another release).

    Each driver declares its CNI's pinned release (``version``) in its own module; a driver
    reads its version through :meth:`version`, which falls back to that pin, so
    ``CniVersions()`` means "every pin as declared".
    :func:`~cnibench.backends.kube.cni.pinned_versions` is the view of every registered
    driver's pin.

    Attributes
    ----------
    pins:
        Name -> version: a CNI's ``--cni`` name, or a release that goes with one
        (``cilium-gateway-api``, ``nginx-gateway-fabric``, ``nginx-gateway-api``).
    """

    pins: Mapping[str, str] = field(default_factory=dict)

    def version(self, name: str, default: str) -> str:
        """The version pinned for ``name`` here, else ``default`` (the driver's own)."""
        return self.pins.get(name, default)

    def __getitem__(self, name: str) -> str:
        """The version pinned for ``name``.

        Raises
        ------
        KeyError
            Nothing is pinned for ``name`` here.
        """
        return self.pins[name]


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
class ConfigLimit:
    """A bound the CNI's configuration sets on the rules of one policy, read from a key of
    one of its ConfigMaps (:func:`~cnibench.backends.kube.limits.policy_rule_limit`).

    Attributes
    ----------
    namespace, config_map, key:
        Where the value is set.
    default:
        The value when the key is absent (the CNI's own default).
    counts:
        What the value counts, said after it, e.g. ``"entries in each endpoint's policy map
        (one or more per rule)"``.
    takes:
        ``(lowest, highest)`` value the CNI takes; one outside is taken as the nearest.
    """

    namespace: str
    config_map: str
    key: str
    default: int
    counts: str
    takes: tuple[int, int] = (0, 2**31 - 1)


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
        Gateway API release (a module tag) whose standard-channel CRDs are installed and
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
    policy_limit:
        The bound the CNI's configuration sets on one policy's rules, or ``None`` where the
        datapath has none a benchmark's policy could reach.
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
    policy_limit: ConfigLimit | None = None


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
        version=versions.version("nginx-gateway-fabric", NGINX_GATEWAY_FABRIC),
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
