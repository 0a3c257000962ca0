"""Pinned container images of the Kubernetes backend: the one place to change them.

Images are referenced by tag (the kind node image also by digest); override any of them with
:meth:`Images.from_environment` (``CNIBENCH_IMAGE_<FIELD>``, e.g. ``CNIBENCH_IMAGE_TOOLS``) or
by passing an :class:`Images` to the backend. Nothing here is pulled by cnibench itself: the
cluster's runtime pulls them.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from cnibench.backends.kube.host import ENGINE_RUN_ROOT, ENGINE_RUN_VARIABLE
from cnibench.backends.kube.resources import data_tree
from cnibench.errors import ConfigError

__all__ = [
    "IMAGE_SETS",
    "LOCAL_BUILDS",
    "LOCAL_TOOLS_IMAGE",
    "OFFLINE_IMAGES",
    "Images",
    "build_context",
    "default_image_set",
    "require_pullable",
]

LOCAL_TOOLS_IMAGE = "localhost/cnibench-tools:bookworm-1"
"""The tools image cnibench builds from ``images/tools/Dockerfile`` (bump the tag suffix when
the Dockerfile changes, so clusters never keep a stale copy: a non-``latest`` tag is pulled
``IfNotPresent``, i.e. never for an image kind loaded)."""
LOCAL_BUILDS: Mapping[str, str] = {LOCAL_TOOLS_IMAGE: "tools"}
"""Images cnibench builds itself: reference to its folder under ``images/``."""


def build_context(image: str) -> Path:
    """The ``docker build`` context (folder with a Dockerfile) of a locally built ``image``.

    Raises
    ------
    KeyError
        ``image`` is not one of :data:`LOCAL_BUILDS`.
    """
    return data_tree("images", override_env="CNIBENCH_IMAGES_DIR") / LOCAL_BUILDS[image]


@dataclass(frozen=True)
class Images:
    """Images of the pods cnibench runs in a cluster.

    Attributes
    ----------
    tools:
        Client container of every pod and the iperf3 server: iperf3, sockperf, wrk, ab, curl,
        tcpdump. No maintained public image has them all, so the default is
        :data:`LOCAL_TOOLS_IMAGE`, built from ``images/tools/Dockerfile`` (the lab's Debian
        packages) and loaded into kind clusters; other clusters need it pushed to a registry.
    sockperf:
        Image of the sockperf servers (``sockperf`` on PATH): the tools image by default.
    http_echo:
        nginx; the echo configuration (pod name in body and ``X-Backend`` header) is written
        by the pod's command, so no custom image is needed.
    prometheus:
        Prometheus server.
    node_exporter:
        Prometheus node-exporter.
    flannel:
        flanneld (``/opt/bin/flanneld``) with a shell, iptables and iproute2.
    cilium:
        Cilium's agent, operator and init image; ``""`` (the public default) means the chart's
        own images. When set, the chart is installed with it as every Cilium image and without
        Envoy (see :mod:`cnibench.backends.kube.cnis.cilium`).
    kube_router:
        kube-router (``kube-router`` on PATH, with iptables, ipset and iproute2): the release
        image of :data:`cnibench.backends.kube.cnis.kube_router.VERSION`.
    traefik:
        Traefik (``/usr/local/bin/traefik``), the Gateway API implementation of
        ``gateway=traefik``.
    kind_node:
        kind node image, pinned by tag and digest as the kind v0.30.0 release notes list it
        (the release that built it: use kind >= v0.30.0). Kubernetes v1.33, a minor every
        pinned CNI supports and the version the kube test tier's API server is built from.
    """

    tools: str = LOCAL_TOOLS_IMAGE
    sockperf: str = LOCAL_TOOLS_IMAGE
    http_echo: str = "docker.io/library/nginx:1.27.5-alpine"
    prometheus: str = "quay.io/prometheus/prometheus:v3.5.0"
    node_exporter: str = "quay.io/prometheus/node-exporter:v1.9.1"
    flannel: str = "ghcr.io/flannel-io/flannel:v0.28.10"
    cilium: str = ""
    kube_router: str = "docker.io/cloudnativelabs/kube-router:v2.6.1"
    traefik: str = "docker.io/library/traefik:v3.6.12"
    kind_node: str = (
        "docker.io/kindest/node:v1.33.4"
        "@sha256:25a6018e48dfcaee478f4a59af81157a437f15e6e140bf103f85a2e7cd0cbbf2"
    )

    @classmethod
    def from_environment(cls, environ: Mapping[str, str], *, default: str = "public") -> Images:
        """The set named by ``CNIBENCH_IMAGES`` (``public`` or ``offline``: see
        :data:`OFFLINE_IMAGES`; unset, ``default``, which a kind run takes from
        :func:`default_image_set`), each field overridden by ``CNIBENCH_IMAGE_<FIELD>``.

        Raises
        ------
        cnibench.errors.ConfigError
            ``CNIBENCH_IMAGES`` names no known set.
        """
        base = image_set(environ.get("CNIBENCH_IMAGES", "") or default)
        overrides = {
            f.name: environ[f"CNIBENCH_IMAGE_{f.name.upper()}"]
            for f in dataclasses.fields(cls)
            if f"CNIBENCH_IMAGE_{f.name.upper()}" in environ
        }
        return dataclasses.replace(base, **overrides)

    @property
    def offline(self) -> bool:
        """Whether every image is one ``cnibench images build`` makes (nothing to pull)."""
        return self == OFFLINE_IMAGES

    def local_builds(self) -> tuple[str, ...]:
        """The distinct images in use that cnibench builds itself (see :data:`LOCAL_BUILDS`),
        in field order."""
        found = (getattr(self, f.name) for f in dataclasses.fields(self))
        return tuple(dict.fromkeys(image for image in found if image in LOCAL_BUILDS))


def require_pullable(images: Images, provider: str) -> None:
    """Refuse locally built images on a cluster that cannot receive them.

    Only kind gets cnibench's own builds (``kind load``); AKS and existing clusters pull from
    registries, so a default tools image would leave every pod in ``ImagePullBackOff`` until the
    readiness timeout. Checked before anything is created.

    Raises
    ------
    cnibench.errors.ConfigError
        ``provider`` is not ``"kind"`` and an image is one cnibench builds itself; the message
        names the variables to set.
    """
    if provider == "kind":
        return
    local = [f.name for f in dataclasses.fields(images) if getattr(images, f.name) in LOCAL_BUILDS]
    if local:
        variables = ", ".join(f"CNIBENCH_IMAGE_{name.upper()}" for name in local)
        raise ConfigError(
            f"--cluster {provider} cannot use the locally built {LOCAL_TOOLS_IMAGE}: build"
            f" images/tools/Dockerfile, push it to a registry the cluster pulls from and set"
            f" {variables}"
        )


OFFLINE_IMAGES = Images(
    tools="localhost/cnibench-tools:offline-1",
    sockperf="localhost/cnibench-tools:offline-1",
    http_echo="localhost/cnibench-tools:offline-1",
    prometheus="localhost/cnibench-prometheus:offline-1",
    node_exporter="localhost/cnibench-node-exporter:offline-1",
    flannel="localhost/cnibench-flannel:v0.28.10-offline-1",
    cilium="localhost/cnibench-cilium:v1.18.4-offline-1",
    kube_router="localhost/cnibench-kube-router:v2.1.0-offline-1",
    traefik="localhost/cnibench-traefik:v3.6.12-offline-1",
    kind_node="localhost/cnibench-kind-node:v1.34.4-offline-1",
)
"""The images ``cnibench images build`` makes from Debian packages and Go modules only, for
machines that reach no container registry (air-gapped labs, CI). The tools image also serves
the HTTP echo (Debian's nginx-light). Cilium's and kube-router's images are built only when
asked for (``cnibench images build --cni cilium --cni kube-router``); kube-router's is v2.1.0,
the only release the Go module proxy serves, which has reported security flaws: for throwaway
kind clusters only. Tags end in the build recipe's number: bump it when what
goes into an image changes, so a cluster never keeps a stale copy."""

IMAGE_SETS: Mapping[str, Images] = {"public": Images(), "offline": OFFLINE_IMAGES}
"""Image sets selectable with ``CNIBENCH_IMAGES`` (or ``--images``)."""


def default_image_set(environ: Mapping[str, str]) -> str:
    """``offline`` when ``DOCKER_HOST`` is a socket of cnibench's own engine (``cnibench engine
    up``: under :data:`~cnibench.backends.kube.host.ENGINE_RUN_ROOT`, or the directory
    ``CNIBENCH_ENGINE_RUN`` names), else ``public``.

    That engine exists for machines that reach no registry, so a kind cluster in it takes
    the set ``cnibench images build`` makes; nobody has to remember ``CNIBENCH_IMAGES=offline``.
    Only kind: an existing or AKS cluster pulls from registries whatever engine the shell has.
    """
    host = environ.get("DOCKER_HOST", "")
    if not host.startswith("unix://"):
        return "public"
    run_root = Path(environ.get(ENGINE_RUN_VARIABLE) or ENGINE_RUN_ROOT)
    socket = Path(host.removeprefix("unix://"))
    return "offline" if socket.is_relative_to(run_root) else "public"


def image_set(name: str) -> Images:
    """The image set called ``name`` (see :data:`IMAGE_SETS`).

    Raises
    ------
    cnibench.errors.ConfigError
        Unknown name (the message lists the choices).
    """
    try:
        return IMAGE_SETS[name]
    except KeyError:
        raise ConfigError(f"unknown image set {name!r}: choose {', '.join(IMAGE_SETS)}") from None
