"""CNI definitions: :func:`cni_definition` finds a CNI's driver and asks it for its definition.

:func:`cni_definition` turns a :class:`~cnibench.backends.base.ClusterSpec` (CNI name,
encryption, options) into a :class:`CniDefinition`: what to install (a Helm chart with values,
release manifests, or objects cnibench renders itself), which kind settings the CNI needs
(kube-proxy off, pod subnet), what it can do (:class:`~cnibench.backends.base.Capability`) and
which DaemonSets/Deployments must be ready before the cluster counts as up. Pure: nothing here
talks to a cluster.

Each CNI is defined by its driver module in :mod:`cnibench.backends.kube.cnis`, which also pins
its version (``version``) and, when it has one, its offline build (``offline``). The types
drivers produce and the checks they share are in :mod:`cnibench.backends.kube.cni_types`
(re-exported here); this module sits above the driver registry.

Pinned versions were current when written and must be checked upstream before a paper run (see
REFERENCE-CNI.md); :func:`pinned_versions` lists them, and a :class:`CniVersions` passed to
:func:`cni_definition` overrides some.

Options in ``ClusterSpec.options`` are the driver's: each module's docstring lists what its
CNI takes (``mode`` and ``features`` for Cilium, ``features`` and ``egress-ip-range`` for
Antrea); the others take none.
"""

from __future__ import annotations

import dataclasses

from cnibench.backends.base import Capability, ClusterSpec
from cnibench.backends.kube import traefik
from cnibench.backends.kube.cni_types import (
    GATEWAYS,
    KIND_POD_SUBNET,
    KUBE_PROXY_MODES,
    NAPI_CHOICES,
    NGF_NAMESPACE,
    NGF_RELEASE,
    NGINX_GATEWAY_API,
    NGINX_GATEWAY_FABRIC,
    Agent,
    CniDefinition,
    CniVersions,
    HelmChart,
    Readiness,
    check_options,
    features_option,
    nginx_gateway_fabric_chart,
    refuse_wireguard,
)
from cnibench.backends.kube.cnis import DRIVERS, cni_names
from cnibench.backends.kube.gomodules import module_cache_dir
from cnibench.backends.kube.images import Images
from cnibench.backends.kube.offline.recipes import (
    GATEWAY_API_CRDS,
    GATEWAY_API_MODULE,
    OfflineVersions,
)
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
    "HelmChart",
    "Readiness",
    "check_options",
    "cni_definition",
    "features_option",
    "nginx_gateway_fabric_chart",
    "pinned_versions",
    "refuse_wireguard",
    "with_traefik",
]


def pinned_versions() -> CniVersions:
    """Every registered driver's pinned version, by ``--cni`` name, with the releases that go
    with one (e.g. ``cilium-gateway-api``): a view of the drivers' own pins, in registration
    order."""
    pins: dict[str, str] = {}
    for name, driver in DRIVERS.items():
        pins[name] = driver.version
        pins.update(driver.related_versions)
    pins.setdefault("nginx-gateway-fabric", NGINX_GATEWAY_FABRIC)
    pins.setdefault("nginx-gateway-api", NGINX_GATEWAY_API)
    return CniVersions(pins)


def with_traefik(definition: CniDefinition, spec: ClusterSpec, images: Images) -> CniDefinition:
    """``definition`` with Traefik as its Gateway API implementation: the standard CRDs of
    the Gateway API release Traefik is built against, Traefik's objects after the CNI's, its
    Deployment awaited, and traffic splitting offered.

    Raises
    ------
    cnibench.errors.ConfigError
        The CNI already has a Gateway API implementation enabled.
    """
    if definition.gateway_class:
        raise ConfigError(
            f"--cni {spec.label}: gateway=traefik beside {definition.name}'s own Gateway API"
            f" implementation ({definition.gateway_class}): choose one"
        )
    version = OfflineVersions().gateway_api
    crds_dir = ""
    if images.offline:
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
        Versions other than the drivers' own pins; ``None`` for none.
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
