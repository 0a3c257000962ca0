"""What goes into each offline image: pinned versions, package lists, go.mod files, flags.

Everything here is pure (text in, text out) so tests pin it exactly; :mod:`.builder` runs it.
The sequence follows what brought a kind cluster up on a machine with no registry
(``shared/KIND-OFFLINE.md``): root filesystems from Debian packages (``mmdebstrap``), every
binary from Go modules (or ``gcc`` for pause), images made with ``docker import`` and, only where
a ``STOPSIGNAL`` is needed, a one-line legacy ``docker build``.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from cnibench.backends.kube.build_recipes import PATH_ENV, ImageRecipe
from cnibench.backends.kube.cnis.flannel import OFFLINE_VERSION as FLANNEL_OFFLINE_VERSION
from cnibench.backends.kube.images import OFFLINE_KUBERNETES_VERSION, TRAEFIK_VERSION, Images

__all__ = [
    "CNI_PLUGINS",
    "GATEWAY_API_CRDS",
    "GATEWAY_API_MODULE",
    "KUBERNETES_COMMANDS",
    "LOAD_ENGINE_ROOTFS",
    "OFFLINE_GATEWAYS",
    "OFFLINE_LOAD_ENGINES",
    "ROOTFS_PACKAGES",
    "TRAEFIK_MODULE",
    "ImageRecipe",
    "OfflineVersions",
    "containerd_config",
    "debian_mirror",
    "etcd_go_mod",
    "go_proxy",
    "kubernetes_go_mod",
    "recipe_digest",
    "runtime_images",
    "shared_image_recipes",
    "version_ldflags",
]


@dataclass(frozen=True)
class OfflineVersions:
    """Versions of everything the offline image set is built from.

    Attributes
    ----------
    kubernetes:
        ``k8s.io/kubernetes`` release: 1.34 is the last minor whose kubelet still runs on
        cgroup v1 by default, which is what the machines this is built for have.
    kind:
        ``sigs.k8s.io/kind`` release (its ``images/base`` files make the node image's base).
    etcd:
        ``go.etcd.io/etcd/server/v3`` release kubeadm 1.34 expects (image tag ``<etcd>-0``).
    coredns, pause:
        What kubeadm 1.34 deploys.
    cni_plugins:
        ``github.com/containernetworking/plugins`` release (bridge, host-local, ...).
    flannel:
        ``github.com/flannel-io/flannel`` release, pinned in the flannel driver
        (:data:`cnibench.backends.kube.cnis.flannel.OFFLINE_VERSION`): flanneld is built in
        the shared Go step, whose stamp digests this whole version set's ``repr``, which has
        always named it. The other CNIs' releases are in their drivers' offline recipes only.
    helm:
        ``helm.sh/helm/v3`` release that installs Cilium's chart (built with Cilium; the
        release the kube tier builds, ``scripts/kube-tier.sh``).
    traefik:
        ``github.com/traefik/traefik/v3`` release: the Gateway API implementation of
        ``gateway=traefik`` (its go.mod has ``replace`` directives, so it is built with its
        own module directory as the main module): ``images.TRAEFIK_VERSION``, the newest
        release whose whole build closure the Go module proxy serves; v3.7.x needs fifteen
        modules it refuses (lego v5's DNS provider SDKs and Traefik's fork of go-http-auth).
    gateway_api:
        ``sigs.k8s.io/gateway-api`` release Traefik is built against; its standard CRDs
        (``config/crd/standard``, used in place from the Go module cache) go in before it.
    debian:
        Debian suite of every root filesystem.
    """

    kubernetes: str = OFFLINE_KUBERNETES_VERSION
    kind: str = "v0.30.0"
    etcd: str = "3.6.5"
    coredns: str = "v1.12.1"
    pause: str = "3.10.1"
    cni_plugins: str = "v1.7.1"
    flannel: str = FLANNEL_OFFLINE_VERSION
    # Out of repr: the steps that do not build them digest the whole version set's repr
    # (recipe_digest), so helm's, Traefik's and Gateway API's versions must not rebuild them.
    helm: str = field(default="v3.18.6", repr=False)
    traefik: str = field(default=TRAEFIK_VERSION, repr=False)
    gateway_api: str = field(default="v1.4.0", repr=False)
    debian: str = "bookworm"

    @property
    def staging(self) -> str:
        """Version of Kubernetes' staging modules (``v1.34.4`` -> ``v0.34.4``)."""
        return "v0." + self.kubernetes.removeprefix("v1.")

    @property
    def etcd_tag(self) -> str:
        """The etcd image tag kubeadm asks for."""
        return f"{self.etcd}-0"


KUBERNETES_COMMANDS = (
    "kubeadm",
    "kubelet",
    "kubectl",
    "kube-apiserver",
    "kube-controller-manager",
    "kube-scheduler",
    "kube-proxy",
)
"""Built in one ``go build`` and shared by the kind node image and the kube test tier."""

CNI_PLUGINS = ("ipam/host-local", "main/loopback", "main/ptp", "main/bridge", "meta/portmap")
"""Reference CNI plugins the node image carries in ``/opt/cni/bin`` (flannel's pods are wired
with ``bridge`` + ``host-local``, since flannel's own plugin module is not served)."""

ROOTFS_PACKAGES: Mapping[str, tuple[str, ...]] = {
    # systemd as PID 1, containerd + runc, and what kubeadm's preflight and kube-proxy call.
    "node": (
        "systemd",
        "systemd-sysv",
        "dbus",
        "containerd",
        "runc",
        "iptables",
        "nftables",
        "conntrack",
        "iproute2",
        "ethtool",
        "util-linux",
        "mount",
        "kmod",
        "libseccomp2",
        "pigz",
        "bash",
        "ca-certificates",
        "curl",
        "jq",
        "procps",
        "socat",
        "iputils-ping",
    ),
    # kube-proxy and flanneld program iptables/nftables and routes.
    "netfilter": ("iptables", "nftables", "conntrack", "iproute2", "kmod"),
    # The lab's own tool set, so kind and lab runs measure with the same builds: the measurement
    # tools' packages come first, from the tool registry (plan.rootfs_packages); these follow.
    "tools": (
        "ca-certificates",
        "tcpdump",
        "iproute2",
        "iputils-ping",
        "procps",
        "nginx-light",
    ),
    "monitoring": ("prometheus", "prometheus-node-exporter"),
}
"""Debian packages of each shared root filesystem (``mmdebstrap --variant=minbase``); a
CNI's own are in its driver's offline recipe
(:attr:`~cnibench.backends.kube.build_recipes.OfflineRecipe.rootfs`)."""

OFFLINE_GATEWAYS = ("traefik",)
"""Gateway API implementations the offline image set builds (``--gateway traefik``)."""

OFFLINE_LOAD_ENGINES = ("locust",)
"""Load engines whose in-pod image the offline set builds only when asked
(``cnibench images build --load-engine locust``)."""

LOAD_ENGINE_ROOTFS: Mapping[str, tuple[str, ...]] = {
    # python3-zmq (locust's master/worker link) needs python3-cffi-backend-api-min/max, virtual
    # packages that debootstrap, which built these before mmdebstrap, did not resolve: their
    # provider is named here.
    "locust": ("python3-locust", "python3-cffi-backend"),
}
"""Root filesystems of the load engines' images, apart from :data:`ROOTFS_PACKAGES` (every one
of which is built with every offline set): built only with their image, so the shared steps'
digests, and CI's caches of them, stay as they were."""


def recipe_digest(*parts: object) -> str:
    """Short digest of a build's inputs: a stamp equal to it means the output is current."""
    text = json.dumps([repr(part) for part in parts], sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:12]


def go_proxy(configured: str) -> str:
    """``GOPROXY`` naming proxies only: ``direct`` and ``off`` are dropped, so Go never tries to
    fetch a vanity import path from its own host (there is no network but the proxy).

    >>> go_proxy("https://proxy.example,direct")
    'https://proxy.example'
    """
    entries = [e for e in re.split(r"[,|]", configured) if e.strip() not in ("", "direct", "off")]
    return ",".join(entries)


def debian_mirror(sources: str) -> str:
    """The main Debian archive of an apt configuration (deb822 ``.sources`` or one-line
    ``sources.list`` text): what ``mmdebstrap`` uses, so root filesystems come from the mirror
    the machine already uses.

    Returns
    -------
    str
        The first archive URI whose suites are not ``-security``; ``""`` if none is found.
    """
    for stanza in re.split(r"\n\s*\n", sources):
        fields_ = {}
        for line in stanza.splitlines():
            key, sep, value = line.partition(":")
            if sep and not line.startswith((" ", "#")):
                fields_[key.strip().lower()] = value.strip()
        if "uris" in fields_ and "security" not in fields_.get("suites", ""):
            return fields_["uris"].split()[0]
    for line in sources.splitlines():
        parts = line.split()
        if len(parts) >= 3 and parts[0] == "deb" and "security" not in parts[2]:
            uris = [p for p in parts[1:] if not p.startswith("[")]
            if uris:
                return uris[0]
    return ""


def kubernetes_go_mod(versions: OfflineVersions, upstream_go_mod: str) -> str:
    """go.mod of the wrapper module that builds Kubernetes' commands.

    ``k8s.io/kubernetes`` cannot be built with ``go install`` because its go.mod replaces the
    staging modules (``k8s.io/api``, ``k8s.io/client-go``, ...) with local paths; the wrapper
    requires it and replaces each of them with the published staging release instead.

    Parameters
    ----------
    upstream_go_mod:
        Text of ``k8s.io/kubernetes``'s own go.mod at ``versions.kubernetes``.
    """
    staging = sorted(
        set(re.findall(r"^\s*(k8s\.io/[\w.-]+)\s+=>\s+\./staging/", upstream_go_mod, re.M))
    )
    if not staging:
        raise ValueError("k8s.io/kubernetes go.mod replaces no staging module: not its go.mod?")
    lines = [
        "module cnibench.local/kubernetes",
        "",
        "go 1.24.0",
        "",
        f"require k8s.io/kubernetes {versions.kubernetes}",
        "",
        "replace (",
        *(f"\t{module} => {module} {versions.staging}" for module in staging),
        ")",
        "",
    ]
    return "\n".join(lines)


KUBERNETES_IMPORTS = "\n".join(
    [
        "//go:build tools",
        "",
        "// Package kubernetes only names the commands the wrapper module builds.",
        "package kubernetes",
        "",
        "import (",
        *(f'\t_ "k8s.io/kubernetes/cmd/{command}"' for command in KUBERNETES_COMMANDS),
        ")",
        "",
    ]
)
"""tools.go of the wrapper module: keeps the commands' packages in ``go mod tidy``'s view."""


def version_ldflags(version: str) -> str:
    """``-ldflags`` that stamp a release version as Kubernetes' own build does (kubeadm refuses
    a control plane whose version it cannot parse; clients gate features on it)."""
    minor = version.removeprefix("v1.").split(".")[0]
    flags = ["-s", "-w"]
    for package in ("k8s.io/component-base/version", "k8s.io/client-go/pkg/version"):
        flags += [
            f"-X {package}.gitVersion={version}",
            f"-X {package}.gitMajor=1",
            f"-X {package}.gitMinor={minor}",
            f"-X {package}.gitTreeState=clean",
            f"-X {package}.buildDate=1970-01-01T00:00:00Z",
        ]
    return " ".join(flags)


def etcd_go_mod(versions: OfflineVersions) -> str:
    """go.mod of the wrapper module that builds etcd (its siblings pinned to the same
    release; the server module alone would resolve them to other versions)."""
    siblings = ("api/v3", "client/pkg/v3", "client/v3", "pkg/v3")
    lines = [
        "module cnibench.local/etcd",
        "",
        "go 1.24.0",
        "",
        f"require go.etcd.io/etcd/server/v3 v{versions.etcd}",
        "",
        "replace (",
        *(f"\tgo.etcd.io/etcd/{s} => go.etcd.io/etcd/{s} v{versions.etcd}" for s in siblings),
        ")",
        "",
    ]
    return "\n".join(lines)


def containerd_config(kind_config: str, *, pause_tag: str) -> str:
    """kind's containerd config for the node image, changed for machines like this one.

    - the fuse-overlayfs proxy plugin goes (no fuse-overlayfs snapshotter is built);
    - the sandbox image is the pause tag kubeadm asks for;
    - ``restrict_oom_score_adj = true``: without CAP_SYS_RESOURCE containerd cannot lower
      ``oom_score_adj``, and on a normal machine the setting only forgoes that.
    """
    out: list[str] = []
    skipping = False
    for line in kind_config.splitlines():
        if line.startswith("[proxy_plugins"):
            skipping = True
            continue
        if skipping and line.startswith("[") and not line.startswith("[proxy_plugins"):
            skipping = False
        if skipping:
            continue
        line = re.sub(
            r'(sandbox_image\s*=\s*)"[^"]*"', rf'\1"registry.k8s.io/pause:{pause_tag}"', line
        )
        line = line.replace("restrict_oom_score_adj = false", "restrict_oom_score_adj = true")
        out.append(line)
    text = "\n".join(out) + "\n"
    if "restrict_oom_score_adj = true" not in text:
        raise ValueError("kind's containerd config has no restrict_oom_score_adj setting")
    return text


def runtime_images(versions: OfflineVersions) -> tuple[ImageRecipe, ...]:
    """The images kubeadm pulls, tagged exactly as it asks for them; they go *into* the node
    image (kind does the same), so no node ever looks for a registry."""
    k = versions.kubernetes
    control_plane = tuple(
        ImageRecipe(
            tag=f"registry.k8s.io/{command}:{k}",
            files={f"/usr/local/bin/{command}": command},
            entrypoint=(f"/usr/local/bin/{command}",),
            env=PATH_ENV,
        )
        for command in ("kube-apiserver", "kube-controller-manager", "kube-scheduler")
    )
    return (
        ImageRecipe(
            tag=f"registry.k8s.io/pause:{versions.pause}",
            files={"/pause": "pause"},
            entrypoint=("/pause",),
            user="65535:65535",
        ),
        ImageRecipe(
            tag=f"registry.k8s.io/etcd:{versions.etcd_tag}",
            files={"/usr/local/bin/etcd": "etcd"},
            cmd=("/usr/local/bin/etcd",),
            env=PATH_ENV,
        ),
        *control_plane,
        ImageRecipe(
            tag=f"registry.k8s.io/kube-proxy:{k}",
            rootfs="netfilter",
            files={"/usr/local/bin/kube-proxy": "kube-proxy"},
            env=PATH_ENV,
        ),
        ImageRecipe(
            tag=f"registry.k8s.io/coredns/coredns:{versions.coredns}",
            files={"/coredns": "coredns"},
            entrypoint=("/coredns",),
        ),
    )


MMDEBSTRAP_MERGED_USR = "/usr/share/mmdebstrap/hooks/merged-usr"
"""mmdebstrap's hook directory that sets /usr up merged as Debian 12 has it (with the
``usr-is-merged`` package, not ``usrmerge`` and its perl)."""


def mmdebstrap_argv(
    target: str, *, suite: str, mirror: str, packages: Sequence[str], cache_dir: str
) -> list[str]:
    """``mmdebstrap`` of a minimal root filesystem with ``packages`` into the directory
    ``target``, sharing one .deb cache between the root filesystems (synced in before the
    download, out after the install).

    mmdebstrap installs with apt and dpkg's unsafe I/O: for the tools set 80 s and 25
    core-seconds where debootstrap, which waits on dpkg most of its time, took 227 s and 40
    (2026-12-03, both beside a CI run).
    """
    argv = [
        "mmdebstrap",
        "--variant=minbase",
        "--mode=root",
        "--format=directory",
        f"--hook-dir={MMDEBSTRAP_MERGED_USR}",
        "--skip=download/empty",
        '--setup-hook=mkdir -p "$1"/var/cache/apt/archives',
        f"--setup-hook=sync-in {cache_dir} /var/cache/apt/archives",
        f"--customize-hook=sync-out /var/cache/apt/archives {cache_dir}",
    ]
    if packages:
        argv.append("--include=" + ",".join(packages))
    return [*argv, suite, target, mirror]


def unique(items: Iterable[str]) -> list[str]:
    """``items`` without repeats, first occurrence kept."""
    return list(dict.fromkeys(items))


TRAEFIK_MODULE = "github.com/traefik/traefik/v3"
GATEWAY_API_MODULE = "sigs.k8s.io/gateway-api"
GATEWAY_API_CRDS = "config/crd/standard"
"""Where a Gateway API release keeps its standard-channel CRDs, inside its module."""


def shared_image_recipes(images: Images) -> dict[str, ImageRecipe]:
    """Recipes of the images no CNI owns, by :class:`~cnibench.backends.kube.images.Images`
    field: the tools image (also sockperf's and the HTTP echo's in the offline set), the
    monitoring images, Traefik (built only when ``gateway=traefik`` is asked for) and locust
    (only with ``--load-engine locust``)."""
    return {
        "tools": ImageRecipe(
            tag=images.tools,
            rootfs="tools",
            cmd=("sleep", "infinity"),
            env=PATH_ENV,
            # The echo server writes conf.d/default.conf itself; Debian's default site would
            # also claim port 80.
            remove=("/etc/nginx/sites-enabled/default",),
        ),
        "prometheus": ImageRecipe(
            tag=images.prometheus,
            rootfs="monitoring",
            entrypoint=("/usr/bin/prometheus",),
            env=PATH_ENV,
        ),
        "node_exporter": ImageRecipe(
            tag=images.node_exporter,
            rootfs="monitoring",
            entrypoint=("/usr/bin/prometheus-node-exporter",),
            env=PATH_ENV,
        ),
        # A static binary (CGO off): nothing else in the image.
        "traefik": ImageRecipe(
            tag=images.traefik,
            files={"/usr/local/bin/traefik": "traefik"},
            entrypoint=("/usr/local/bin/traefik",),
        ),
        # Debian's locust (2.12.1 in bookworm) and its Python; the pods run it through exec.
        "locust": ImageRecipe(
            tag=images.locust,
            rootfs="locust",
            cmd=("sleep", "infinity"),
            env=PATH_ENV,
        ),
    }
