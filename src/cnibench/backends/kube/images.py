"""Pinned container images of the Kubernetes backend: the shared ones here, each CNI's own in its
driver.

The shared images (tools, monitoring, Traefik, the kind node) are fields of :class:`Images`; a
CNI driver declares its own as :class:`CniImage` (public and offline reference, written from
the driver's one version pin), and registering the driver registers them in
:data:`CNI_IMAGES`. Images are referenced by tag (the kind node image also by digest);
override any of them with :meth:`Images.from_environment` (``CNIBENCH_IMAGE_<NAME>``, e.g.
``CNIBENCH_IMAGE_TOOLS``, or ``CNIBENCH_IMAGE_FLANNEL`` for a registered CNI image) or by
passing an :class:`Images` to the backend. Nothing here is pulled by cnibench itself: the
cluster's runtime pulls them.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from cnibench.backends.kube.resources import data_tree
from cnibench.engine.host import ENGINE_RUN_ROOT, ENGINE_RUN_VARIABLE
from cnibench.errors import ConfigError
from cnibench.registry import Registry

__all__ = [
    "CNI_IMAGES",
    "IMAGE_SETS",
    "LOCAL_BUILDS",
    "LOCAL_PREFIX",
    "LOCAL_TOOLS_IMAGE",
    "OFFLINE_IMAGES",
    "CniImage",
    "Images",
    "build_context",
    "default_image_set",
    "register_cni_image",
    "registry_reference",
    "require_pullable",
    "unregister_cni_image",
]

LOCAL_PREFIX = "localhost/"
"""Every image cnibench builds itself is named under it: no registry serves it (``kind load``
brings it to a kind cluster; ``cnibench images push`` to a registry)."""

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
class CniImage:
    """An image a CNI driver owns, declared in its module (``own_images``) from its version pin.

    Attributes
    ----------
    name:
        What overrides it: ``CNIBENCH_IMAGE_<NAME>`` (``kube_router``:
        ``CNIBENCH_IMAGE_KUBE_ROUTER``). Unique among registered CNI images and shared fields.
    public:
        Reference of the public image set; ``""`` when the CNI's installer brings its own
        (Cilium's chart).
    offline:
        Tag ``cnibench images build`` gives it (``localhost/...:<release>-offline-<recipe>``),
        ``""`` when the CNI has no offline build.
    """

    name: str
    public: str
    offline: str = ""

    @property
    def variable(self) -> str:
        """The environment variable overriding it."""
        return f"CNIBENCH_IMAGE_{self.name.upper()}"


_NOT_IMAGES = frozenset({"cni_set", "cni_overrides", "registry"})
"""Fields of :class:`Images` that are not image references."""


TRAEFIK_VERSION = "v3.6.12"
"""The Traefik release of ``gateway=traefik``, written once: the public image's tag, the offline
image's tag and the release its recipe builds (``offline.recipes.OfflineVersions``) all read
it. v3.6.12 is the newest release whose whole build closure the Go module proxy serves
(checked 2026-11-26)."""

OFFLINE_KUBERNETES_VERSION = "v1.34.4"
"""The Kubernetes release the offline kind node image is built from, written once: its tag and
its recipe (``offline.recipes.OfflineVersions``) read it."""


@dataclass(frozen=True)
class Images:
    """Images of the pods cnibench runs in a cluster: the shared ones, and which of each CNI
    driver's own (:class:`CniImage`) to take.

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
    traefik:
        Traefik (``/usr/local/bin/traefik``), the Gateway API implementation of
        ``gateway=traefik``.
    locust:
        locust (``locust`` on PATH, and ``sh``) for ``--load-engine locust`` in pods: the master
        and workers of locust's own distribution (:mod:`cnibench.tools.locust_dist`). Public:
        locust's own image of the release Debian bookworm ships (2.12.1); offline: built from
        Debian's ``python3-locust`` only when asked (``cnibench images build --load-engine
        locust``).
    kind_node:
        kind node image, pinned by tag and digest as the kind v0.30.0 release notes list it
        (the release that built it: use kind >= v0.30.0). Kubernetes v1.33, a minor every
        pinned CNI supports and the version the kube test tier's API server is built from.
    cni_set:
        Which reference of each CNI's own image the set takes: ``"public"`` or ``"offline"``.
    cni_overrides:
        CNI images set otherwise, by :attr:`CniImage.name` (``CNIBENCH_IMAGE_<NAME>``).
    registry:
        The registry cnibench's own images are pulled from (:meth:`in_registry`), ``""`` when
        they are not: kind then gets them with ``kind load``.
    """

    tools: str = LOCAL_TOOLS_IMAGE
    sockperf: str = LOCAL_TOOLS_IMAGE
    http_echo: str = "docker.io/library/nginx:1.27.5-alpine"
    prometheus: str = "quay.io/prometheus/prometheus:v3.5.0"
    node_exporter: str = "quay.io/prometheus/node-exporter:v1.9.1"
    traefik: str = f"docker.io/library/traefik:{TRAEFIK_VERSION}"
    locust: str = "docker.io/locustio/locust:2.12.1"
    kind_node: str = (
        "docker.io/kindest/node:v1.33.4"
        "@sha256:25a6018e48dfcaee478f4a59af81157a437f15e6e140bf103f85a2e7cd0cbbf2"
    )
    cni_set: str = "public"
    cni_overrides: Mapping[str, str] = dataclasses.field(default_factory=dict)
    registry: str = ""

    def __post_init__(self) -> None:
        if self.cni_set not in ("public", "offline"):
            raise ValueError(f"cni_set must be 'public' or 'offline', not {self.cni_set!r}")

    def __hash__(self) -> int:
        # Hashable like any frozen set of settings, though the overrides are a mapping.
        return hash(
            (
                *self.shared().values(),
                self.cni_set,
                *sorted(self.cni_overrides.items()),
                self.registry,
            )
        )

    @classmethod
    def from_environment(cls, environ: Mapping[str, str], *, default: str = "public") -> Images:
        """The set named by ``CNIBENCH_IMAGES`` (``public`` or ``offline``: see
        :data:`OFFLINE_IMAGES`; unset, ``default``, which a kind run takes from
        :func:`default_image_set`), each shared image overridden by ``CNIBENCH_IMAGE_<FIELD>``
        and each registered CNI image (:data:`CNI_IMAGES`) by ``CNIBENCH_IMAGE_<NAME>``.

        Raises
        ------
        cnibench.errors.ConfigError
            ``CNIBENCH_IMAGES`` names no known set.
        """
        base = image_set(environ.get("CNIBENCH_IMAGES", "") or default)
        overrides = {
            name: environ[f"CNIBENCH_IMAGE_{name.upper()}"]
            for name in base.shared()
            if f"CNIBENCH_IMAGE_{name.upper()}" in environ
        }
        # An override saying what the set already says leaves it that set (as a shared
        # field's does), so the offline set stays offline.
        cni_overrides = {
            image.name: environ[image.variable]
            for image in CNI_IMAGES.values()
            if image.variable in environ and environ[image.variable] != base.cni_image(image)
        }
        return dataclasses.replace(base, **overrides, cni_overrides=cni_overrides)

    def shared(self) -> dict[str, str]:
        """The shared images by field name, in field order (``CNIBENCH_IMAGE_<FIELD>``)."""
        return {
            f.name: getattr(self, f.name)
            for f in dataclasses.fields(self)
            if f.name not in _NOT_IMAGES
        }

    def cni_image(self, image: CniImage) -> str:
        """The reference of a CNI's own ``image`` in this set: its override, else its public
        or offline reference (:attr:`cni_set`)."""
        if image.name in self.cni_overrides:
            return self.cni_overrides[image.name]
        return image.offline if self.cni_set == "offline" else image.public

    @property
    def offline(self) -> bool:
        """Whether every image is one ``cnibench images build`` makes: nothing to pull, or,
        with :attr:`registry`, everything pulled from the registry they were pushed to."""
        if self.registry:
            return self == OFFLINE_IMAGES.in_registry(self.registry)
        return self == OFFLINE_IMAGES

    def in_registry(self, registry: str) -> Images:
        """This set with every image cnibench builds itself (``localhost/...``: shared, and
        each registered CNI's own) named in ``registry`` instead, as ``cnibench images push
        registry`` pushes it (``localhost/cnibench-tools:offline-1`` becomes
        ``registry/cnibench-tools:offline-1``); public references and the kind node image
        stay. ``registry`` is a host with an optional port and path, no scheme."""

        shared = {
            name: registry_reference(ref, registry)
            for name, ref in self.shared().items()
            if name != "kind_node"
        }
        cnis = {
            image.name: registry_reference(self.cni_image(image), registry)
            for image in CNI_IMAGES.values()
        }
        overrides = {
            name: ref
            for name, ref in cnis.items()
            if ref != self.cni_image(CNI_IMAGES[name]) or name in self.cni_overrides
        }
        return dataclasses.replace(self, **shared, cni_overrides=overrides, registry=registry)

    def local_builds(self) -> tuple[str, ...]:
        """The distinct images in use that cnibench builds itself (see :data:`LOCAL_BUILDS`),
        in field order, then any CNI image overridden with one."""
        found = (*self.shared().values(), *self.cni_overrides.values())
        return tuple(dict.fromkeys(image for image in found if image in LOCAL_BUILDS))


def registry_reference(ref: str, registry: str) -> str:
    """``ref`` as ``cnibench images push registry`` names it: an image cnibench built
    (``localhost/x:t``) becomes ``registry/x:t``; any other reference, or any with no
    ``registry``, stays as it is."""
    if not registry or not ref.startswith(LOCAL_PREFIX):
        return ref
    return f"{registry}/{ref.removeprefix(LOCAL_PREFIX)}"


_CNI_IMAGES: Registry[CniImage] = Registry("CNI image")

CNI_IMAGES: Mapping[str, CniImage] = _CNI_IMAGES.view
"""The registered CNI drivers' own images by name, in registration order: filled by
:func:`cnibench.backends.kube.cnis.register` from each driver's ``own_images`` (so
:meth:`Images.from_environment` knows their ``CNIBENCH_IMAGE_<NAME>``), never directly."""


def register_cni_image(image: CniImage) -> CniImage:
    """Add a CNI image under its name; returns it. For
    :func:`cnibench.backends.kube.cnis.register` only.

    Raises
    ------
    ValueError
        The name is taken, by a registered CNI image or a shared image (whose
        ``CNIBENCH_IMAGE_<FIELD>`` it would share).
    """
    if image.name in {f.name for f in dataclasses.fields(Images)}:
        raise ValueError(f"CNI image {image.name!r} has the name of a shared image")
    return _CNI_IMAGES.register(image)


unregister_cni_image = _CNI_IMAGES.unregister
"""Remove the CNI image registered under a name (nothing when there is none). For
:func:`cnibench.backends.kube.cnis.unregister` only."""


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
    named = {**images.shared(), **images.cni_overrides}
    # Only what no engine holds under that name unless cnibench built it there: an offline tag
    # set on purpose (a kind cluster that holds it already, reached as an existing one) stays.
    local = [name for name, image in named.items() if image in LOCAL_BUILDS]
    if local:
        variables = ", ".join(f"CNIBENCH_IMAGE_{name.upper()}" for name in local)
        raise ConfigError(
            f"--cluster {provider} cannot use the locally built {named[local[0]]}: push"
            " cnibench's images to a registry the cluster pulls from (cnibench images push"
            f" REGISTRY) and run with --image-registry REGISTRY, or set {variables}"
        )


OFFLINE_IMAGES = Images(
    tools="localhost/cnibench-tools:offline-1",
    sockperf="localhost/cnibench-tools:offline-1",
    http_echo="localhost/cnibench-tools:offline-1",
    prometheus="localhost/cnibench-prometheus:offline-1",
    node_exporter="localhost/cnibench-node-exporter:offline-1",
    traefik=f"localhost/cnibench-traefik:{TRAEFIK_VERSION}-offline-1",
    locust="localhost/cnibench-locust:2.12.1-offline-1",
    kind_node=f"localhost/cnibench-kind-node:{OFFLINE_KUBERNETES_VERSION}-offline-1",
    cni_set="offline",
)
"""The images ``cnibench images build`` makes from Debian packages and Go modules only, for
machines that reach no container registry (air-gapped labs, CI). The tools image also serves
the HTTP echo (Debian's nginx-light). Each CNI's image is its driver's offline reference
(:attr:`CniImage.offline`); those of CNIs not built ``always`` (Cilium's, kube-router's) are
built only when asked for (``cnibench images build --cni cilium --cni kube-router``). Tags end
in the build recipe's number: bump it when what goes into an image changes, so a cluster never
keeps a stale copy."""

IMAGE_SETS: Mapping[str, Images] = {"public": Images(), "offline": OFFLINE_IMAGES}
"""Image sets selectable with ``CNIBENCH_IMAGES`` (or ``--images``)."""


def default_image_set(environ: Mapping[str, str]) -> str:
    """``offline`` when ``DOCKER_HOST`` is a socket of cnibench's own engine (``cnibench engine
    up``: under :data:`~cnibench.engine.host.ENGINE_RUN_ROOT`, or the directory
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
