"""What goes into each offline image: pinned versions, package lists, go.mod files, flags.

Everything here is pure (text in, text out) so tests pin it exactly; :mod:`.builder` runs it.
The sequence follows what brought a kind cluster up on a machine with no registry
(``shared/KIND-OFFLINE.md``): root filesystems from Debian packages (``debootstrap``), every
binary from Go modules (or ``gcc`` for pause), images made with ``docker import`` and, only where
a ``STOPSIGNAL`` is needed, a one-line legacy ``docker build``.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, fields

from cnibench.backends.kube.images import OFFLINE_IMAGES, Images

__all__ = [
    "CILIUM_BUILD_TAGS",
    "CILIUM_MODULE",
    "CILIUM_PACKAGES",
    "CILIUM_SOURCE",
    "CNI_IMAGE_FIELDS",
    "CNI_PLUGINS",
    "GATEWAY_API_CRDS",
    "GATEWAY_API_MODULE",
    "KUBERNETES_COMMANDS",
    "KUBE_ROUTER_MODULE",
    "OFFLINE_CNIS",
    "ROOTFS_PACKAGES",
    "TRAEFIK_MODULE",
    "ImageRecipe",
    "OfflineVersions",
    "cilium_go_mod",
    "cilium_image",
    "cilium_ldflags",
    "containerd_config",
    "debian_mirror",
    "etcd_go_mod",
    "go_proxy",
    "image_recipes",
    "kube_router_go_mod",
    "kubernetes_go_mod",
    "not_offline_reason",
    "pod_image_tags",
    "recipe_digest",
    "runtime_images",
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
        ``github.com/flannel-io/flannel`` release.
    cilium:
        ``github.com/cilium/cilium`` release: its binaries, and the chart, ``bpf/`` tree and
        init scripts used in place from the Go module cache (keep it equal to
        :attr:`~cnibench.backends.kube.cni.CniVersions.cilium`).
    helm:
        ``helm.sh/helm/v3`` release that installs Cilium's chart (built with Cilium; the
        release the kube tier builds, ``scripts/kube-tier.sh``).
    kube_router:
        ``github.com/cloudnativelabs/kube-router/v2`` release: the only one the Go module proxy
        serves. Security flaws are reported for it, so it runs in throwaway kind clusters only;
        the public image set pins a current release
        (:attr:`~cnibench.backends.kube.cni.CniVersions.kube_router`).
    traefik:
        ``github.com/traefik/traefik/v3`` release: the Gateway API implementation of
        ``gateway=traefik`` (its go.mod has ``replace`` directives, so it is built with its
        own module directory as the main module). v3.6.12 is the newest release whose whole
        build closure the Go module proxy serves (checked 2026-11-26): v3.7.x needs fifteen
        modules it refuses (lego v5's DNS provider SDKs and Traefik's fork of go-http-auth).
    gateway_api:
        ``sigs.k8s.io/gateway-api`` release Traefik is built against; its standard CRDs
        (``config/crd/standard``, used in place from the Go module cache) go in before it.
    debian:
        Debian suite of every root filesystem.
    """

    kubernetes: str = "v1.34.4"
    kind: str = "v0.30.0"
    etcd: str = "3.6.5"
    coredns: str = "v1.12.1"
    pause: str = "3.10.1"
    cni_plugins: str = "v1.7.1"
    flannel: str = "v0.28.10"
    # Out of repr: the steps that do not build Cilium digest the whole version set's repr
    # (recipe_digest), so Cilium's and helm's versions must not rebuild them.
    cilium: str = field(default="v1.18.4", repr=False)
    helm: str = field(default="v3.18.6", repr=False)
    kube_router: str = field(default="v2.1.0", repr=False)
    traefik: str = field(default="v3.6.12", repr=False)
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
    # The lab's own tool set, so kind and lab runs measure with the same builds.
    "tools": (
        "iperf3",
        "sockperf",
        "wrk",
        "apache2-utils",
        "curl",
        "ca-certificates",
        "tcpdump",
        "iproute2",
        "iputils-ping",
        "procps",
        "nginx-light",
    ),
    "monitoring": ("prometheus", "prometheus-node-exporter"),
    # kube-router programs iptables (Debian's default backend, as kube-proxy's image) and
    # ipsets for NetworkPolicy, and routes and the bridge for pod routing.
    "kube-router": ("iptables", "ipset", "nftables", "conntrack", "iproute2", "kmod"),
    # The Cilium agent compiles its BPF programs at run time (clang, llc) and programs
    # netfilter, routes, ipsets and BPF objects. Debian's default iptables backend stays: the
    # upstream image's iptables-wrapper picks legacy or nft at first run, but kube-proxy in
    # these images uses the same Debian default, so both program the same tables.
    "cilium": (
        "iptables",
        "nftables",
        "conntrack",
        "iproute2",
        "kmod",
        "clang-16",
        "llvm-16",
        "bpftool",
        "ipset",
        "ca-certificates",
        "procps",
    ),
}
"""Debian packages of each root filesystem (``debootstrap --variant=minbase``)."""


OFFLINE_CNIS = ("flannel", "cilium", "kube-router")
OFFLINE_GATEWAYS = ("traefik",)
"""Gateway API implementations the offline image set builds (``--gateway traefik``)."""
"""CNIs the offline image set builds (from Go modules) and installs (cilium and kube-router
only when asked: ``cnibench images build --cni cilium --cni kube-router``)."""

_NOT_OFFLINE = {
    "kindnet": "kindnetd is a nested module of kind the Go module proxy does not serve",
    "calico": "Calico is not served by the Go module proxy",
    "antrea": "Antrea is not served by the Go module proxy",
}
_KERNEL_MODULES = {"antrea": "openvswitch"}
_KERNEL_WIREGUARD = ("flannel", "cilium")
"""Offline CNIs whose WireGuard encryption is the kernel's (kube-router has none at all)."""
"""Kernel modules a CNI cannot run without, whatever is built."""


def not_offline_reason(
    cni: str, *, loaded_modules: Iterable[str] = (), encryption: str = ""
) -> str:
    """Why ``cni`` (with ``encryption``, e.g. ``"wireguard"``) cannot run with the offline
    image set (``""`` if it can): the kernel module it needs and this host lacks
    (``loaded_modules``: names under ``/sys/module``; kind's nodes share this kernel), else
    why it is not built."""
    modules = set(loaded_modules)
    if cni not in OFFLINE_CNIS:
        module = _KERNEL_MODULES.get(cni)
        if module and module not in modules:
            return f"{cni} needs the {module} kernel module, which this kernel lacks"
        why = _NOT_OFFLINE.get(cni, f"{cni} has no offline build")
        return f"no offline image of {cni}: {why} (the public images need a registry)"
    if encryption == "wireguard" and cni in _KERNEL_WIREGUARD and "wireguard" not in modules:
        return (
            f"{cni} encryption with WireGuard needs the wireguard kernel module, which this"
            " kernel lacks"
        )
    return ""


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
    ``sources.list`` text): what ``debootstrap`` uses, so root filesystems come from the mirror
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


CILIUM_MODULE = "github.com/cilium/cilium"

CILIUM_PACKAGES: Mapping[str, str] = {
    "daemon": "/usr/bin/cilium-agent",
    "cilium-dbg": "/usr/bin/cilium-dbg",
    "cilium-health": "/usr/bin/cilium-health",
    "cilium-health/responder": "/usr/bin/cilium-health-responder",
    "plugins/cilium-cni": "/opt/cni/bin/cilium-cni",
    "operator": "/usr/bin/cilium-operator-generic",
    "tools/mount": "/usr/bin/cilium-mount",
    "tools/sysctlfix": "/usr/bin/cilium-sysctlfix",
    "bugtool": "/usr/bin/cilium-bugtool",
}
"""Package of :data:`CILIUM_MODULE` -> where the official image has the binary ``go build``
makes of it (named after the package's last element, e.g. ``responder``)."""

CILIUM_BUILD_TAGS = "osusergo,ipam_provider_operator"
"""Build tags of the official agent image; ``ipam_provider_operator`` makes the operator the
generic (cloud-less) one, ``cilium-operator-generic``."""

CILIUM_SOURCE = "cilium-src/"
"""Prefix of artefact names that are paths inside the Cilium module (used in place from the Go
module cache, never copied into cnibench)."""

CILIUM_UNSERVED_FORKS: Mapping[str, str] = {"k8s.io/apimachinery": "v0.33.3"}
"""Modules Cilium's go.mod replaces with a fork the Go module proxy does not serve (it answers
403 for ``github.com/cilium/apimachinery v0.33.3-1``) -> the upstream release the fork is
based on, which the wrapper uses instead (the fork only adds ``omitzero`` conversions)."""


def cilium_go_mod(versions: OfflineVersions, upstream_go_mod: str) -> str:
    """go.mod of the wrapper module that builds Cilium's commands.

    A dependency's ``replace`` directives do not apply to the module that requires it, so the
    wrapper repeats each of Cilium's (its forks of gobgp, controller-tools, ...); a fork in
    :data:`CILIUM_UNSERVED_FORKS` is replaced with its upstream release instead.

    Parameters
    ----------
    upstream_go_mod:
        Text of ``github.com/cilium/cilium``'s own go.mod at ``versions.cilium``.
    """
    replaced = [
        (left.split(), right.split())
        for left, _, right in (line.partition("=>") for line in _replace_lines(upstream_go_mod))
    ]
    if not replaced:
        raise ValueError("github.com/cilium/cilium go.mod replaces nothing: not its go.mod?")
    lines = [
        "module cnibench.local/cilium",
        "",
        "go 1.24.0",
        "",
        f"require {CILIUM_MODULE} {versions.cilium}",
        "",
        "replace (",
    ]
    for old, new in replaced:
        if old[0] in CILIUM_UNSERVED_FORKS:
            new = [old[0], CILIUM_UNSERVED_FORKS[old[0]]]
        lines.append(f"\t{' '.join(old)} => {' '.join(new)}")
    return "\n".join([*lines, ")", ""])


def _replace_lines(go_mod: str) -> list[str]:
    """The ``old => new`` lines of a go.mod's ``replace`` directives (one-line and blocks)."""
    found: list[str] = []
    in_block = False
    for raw in go_mod.splitlines():
        line = raw.split("//", 1)[0].strip()
        if in_block:
            if line == ")":
                in_block = False
            elif line:
                found.append(line)
        elif line.startswith("replace") and line.removeprefix("replace").strip() == "(":
            in_block = True
        elif line.startswith("replace ") and "=>" in line:
            found.append(line.removeprefix("replace").strip())
    return found


def cilium_ldflags(versions: OfflineVersions) -> str:
    """``-ldflags`` of Cilium's commands: stripped, with the release version stamped so
    ``cilium-dbg version`` and the agent report it (unstamped they say ``v-``).

    Envoy's required version (``pkg/envoy.requiredEnvoyVersionSHA``) is not stamped: the
    offline image set runs Cilium without Envoy, the only thing that checks it.
    """
    version = versions.cilium.removeprefix("v")
    return f"-s -w -X {CILIUM_MODULE}/pkg/version.ciliumVersion={version}"


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


@dataclass(frozen=True)
class ImageRecipe:
    """One image made from a root filesystem (or nothing) plus files.

    Attributes
    ----------
    tag:
        Reference to tag, exactly as pods and kubeadm ask for it.
    rootfs:
        Name in :data:`ROOTFS_PACKAGES`, or ``""`` for an image holding only ``files``.
    files:
        Path in the image -> name of a built artefact (see :mod:`.builder`).
    entrypoint, cmd:
        Exec-form entrypoint and command; empty for none.
    env:
        Environment of the image.
    user:
        ``uid:gid`` to run as, ``""`` for root.
    remove:
        Paths deleted from the root filesystem copy (e.g. nginx's default site).
    trees:
        Directory in the image -> name of a built (or module) directory copied in whole.
    links:
        Symbolic link in the image -> its target.
    """

    tag: str
    rootfs: str = ""
    files: Mapping[str, str] = field(default_factory=dict)
    entrypoint: tuple[str, ...] = ()
    cmd: tuple[str, ...] = ()
    env: Mapping[str, str] = field(default_factory=dict)
    user: str = ""
    remove: tuple[str, ...] = ()
    trees: Mapping[str, str] = field(default_factory=dict)
    links: Mapping[str, str] = field(default_factory=dict)

    def changes(self) -> list[str]:
        """``docker import --change`` instructions of this image."""
        out = [f"ENV {key}={value}" for key, value in sorted(self.env.items())]
        if self.entrypoint:
            out.append(f"ENTRYPOINT {json.dumps(list(self.entrypoint))}")
        if self.cmd:
            out.append(f"CMD {json.dumps(list(self.cmd))}")
        if self.user:
            out.append(f"USER {self.user}")
        return out


_PATH = {"PATH": "/usr/local/bin:/usr/local/sbin:/usr/bin:/usr/sbin:/bin:/sbin"}


def runtime_images(versions: OfflineVersions) -> tuple[ImageRecipe, ...]:
    """The images kubeadm pulls, tagged exactly as it asks for them; they go *into* the node
    image (kind does the same), so no node ever looks for a registry."""
    k = versions.kubernetes
    control_plane = tuple(
        ImageRecipe(
            tag=f"registry.k8s.io/{command}:{k}",
            files={f"/usr/local/bin/{command}": command},
            entrypoint=(f"/usr/local/bin/{command}",),
            env=_PATH,
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
            env=_PATH,
        ),
        *control_plane,
        ImageRecipe(
            tag=f"registry.k8s.io/kube-proxy:{k}",
            rootfs="netfilter",
            files={"/usr/local/bin/kube-proxy": "kube-proxy"},
            env=_PATH,
        ),
        ImageRecipe(
            tag=f"registry.k8s.io/coredns/coredns:{versions.coredns}",
            files={"/coredns": "coredns"},
            entrypoint=("/coredns",),
        ),
    )


CNI_IMAGE_FIELDS: Mapping[str, str] = {
    "cilium": "cilium",
    "kube_router": "kube-router",
    "traefik": "traefik",
}
"""Image fields only a cluster of that CNI needs (field -> CNI): built and loaded only when the
CNI is asked for (Cilium's image is 1.1 GB)."""


def cilium_image(tag: str) -> ImageRecipe:
    """Cilium's agent image as the official one lays it out: the binaries of
    :data:`CILIUM_PACKAGES`, the init scripts the chart runs at ``/``, the BPF sources the agent
    compiles at ``/var/lib/cilium/bpf``, and ``clang``/``llc`` on ``PATH``."""
    files = {
        inside: f"cilium/{package.rsplit('/', 1)[-1]}"
        for package, inside in CILIUM_PACKAGES.items()
    }
    for script in (
        "images/cilium/init-container.sh",
        "plugins/cilium-cni/install-plugin.sh",
        "plugins/cilium-cni/cni-uninstall.sh",
    ):
        files["/" + script.rsplit("/", 1)[-1]] = CILIUM_SOURCE + script
    return ImageRecipe(
        tag=tag,
        rootfs="cilium",
        files=files,
        trees={"/var/lib/cilium/bpf": CILIUM_SOURCE + "bpf"},
        links={
            "/usr/bin/cilium-operator": "cilium-operator-generic",
            "/usr/local/bin/clang": "/usr/bin/clang-16",
            "/usr/local/bin/llc": "/usr/bin/llc-16",
        },
        env=_PATH,
    )


def image_recipes(
    images: Images = OFFLINE_IMAGES, *, cnis: Iterable[str] | None = None
) -> tuple[ImageRecipe, ...]:
    """The images cnibench's pods run (loaded with ``kind load``), one per distinct tag of
    ``images`` except the node image (built by :mod:`.builder` from the runtime images).

    Parameters
    ----------
    images:
        The tags; an empty field (e.g. the public set's ``cilium``: the chart's own images) has
        no recipe.
    cnis:
        CNIs the images are for: a field of :data:`CNI_IMAGE_FIELDS` is left out unless its CNI
        is one of them; ``None`` keeps every field.
    """
    wanted = None if cnis is None else set(cnis)
    by_field: dict[str, ImageRecipe] = {
        "tools": ImageRecipe(
            tag=images.tools,
            rootfs="tools",
            cmd=("sleep", "infinity"),
            env=_PATH,
            # The echo server writes conf.d/default.conf itself; Debian's default site would
            # also claim port 80.
            remove=("/etc/nginx/sites-enabled/default",),
        ),
        "prometheus": ImageRecipe(
            tag=images.prometheus,
            rootfs="monitoring",
            entrypoint=("/usr/bin/prometheus",),
            env=_PATH,
        ),
        "node_exporter": ImageRecipe(
            tag=images.node_exporter,
            rootfs="monitoring",
            entrypoint=("/usr/bin/prometheus-node-exporter",),
            env=_PATH,
        ),
        "flannel": ImageRecipe(
            tag=images.flannel,
            rootfs="netfilter",
            files={"/opt/bin/flanneld": "flanneld"},
            env=_PATH,
        ),
        "cilium": cilium_image(images.cilium),
        # A static binary (CGO off): nothing else in the image.
        "traefik": ImageRecipe(
            tag=images.traefik,
            files={"/usr/local/bin/traefik": "traefik"},
            entrypoint=("/usr/local/bin/traefik",),
        ),
        "kube_router": ImageRecipe(
            tag=images.kube_router,
            rootfs="kube-router",
            files={"/usr/local/bin/kube-router": "kube-router"},
            entrypoint=("/usr/local/bin/kube-router",),
            env=_PATH,
        ),
    }
    seen: dict[str, ImageRecipe] = {}
    for f in fields(images):
        tag = getattr(images, f.name)
        if f.name == "kind_node" or not tag or tag in seen:
            continue
        only_for = CNI_IMAGE_FIELDS.get(f.name)
        if only_for and wanted is not None and only_for not in wanted:
            continue
        recipe = by_field.get(f.name)
        if recipe is None:
            # sockperf and http_echo share the tools image in the offline set.
            recipe = next((r for r in by_field.values() if r.tag == tag), None)
        if recipe is None:
            raise ValueError(f"no offline recipe for image field {f.name!r} ({tag})")
        seen[tag] = recipe
    return tuple(seen.values())


def pod_image_tags(
    images: Images = OFFLINE_IMAGES, *, cnis: Iterable[str] | None = None
) -> tuple[str, ...]:
    """Tags ``kind load`` puts into an offline cluster (every pod image, not the node; see
    :func:`image_recipes` for ``cnis``)."""
    return tuple(recipe.tag for recipe in image_recipes(images, cnis=cnis))


def debootstrap_argv(
    target: str, *, suite: str, mirror: str, packages: Sequence[str], cache_dir: str
) -> list[str]:
    """``debootstrap`` of a minimal root filesystem with ``packages`` (sharing one .deb cache)."""
    argv = ["debootstrap", "--variant=minbase", f"--cache-dir={cache_dir}"]
    if packages:
        argv.append("--include=" + ",".join(packages))
    return [*argv, suite, target, mirror]


def unique(items: Iterable[str]) -> list[str]:
    """``items`` without repeats, first occurrence kept."""
    return list(dict.fromkeys(items))


def flannel_go_mod(versions: OfflineVersions) -> str:
    """go.mod of the wrapper module that builds flanneld.

    flannel's Tencent Cloud backend imports the Tencent VPC SDK module, which the Go module
    proxy does not serve; the wrapper replaces it with :data:`TENCENT_VPC_STUB` (every call
    fails), so flanneld builds with every other backend, vxlan included.
    """
    return "\n".join(
        [
            "module cnibench.local/flannel",
            "",
            "go 1.24.0",
            "",
            f"require github.com/flannel-io/flannel {versions.flannel}",
            "",
            f"replace {TENCENT_VPC_MODULE} => ./tencent-vpc-stub",
            "",
        ]
    )


KUBE_ROUTER_MODULE = "github.com/cloudnativelabs/kube-router/v2"
TRAEFIK_MODULE = "github.com/traefik/traefik/v3"
GATEWAY_API_MODULE = "sigs.k8s.io/gateway-api"
GATEWAY_API_CRDS = "config/crd/standard"
"""Where a Gateway API release keeps its standard-channel CRDs, inside its module."""


def kube_router_go_mod(versions: OfflineVersions) -> str:
    """go.mod of the wrapper module that builds kube-router (its go.mod replaces nothing, so
    the wrapper only requires it; the build completes go.mod and go.sum itself)."""
    return "\n".join(
        [
            "module cnibench.local/kube-router",
            "",
            "go 1.24.0",
            "",
            f"require {KUBE_ROUTER_MODULE} {versions.kube_router}",
            "",
        ]
    )


TENCENT_VPC_MODULE = "github.com/tencentcloud/tencentcloud-sdk-go/tencentcloud/vpc"
"""The one dependency of flannel the module proxy does not serve."""

TENCENT_VPC_STUB = """\
// Package v20170312 stands in for the Tencent Cloud VPC SDK, which the Go module proxy does not
// serve. It has only what flannel's tencentvpc backend refers to, and every call fails: a
// flanneld built by cnibench has no Tencent Cloud backend (cnibench runs flannel with vxlan).
package v20170312

import "errors"

var errUnavailable = errors.New("the tencentvpc backend is not part of this flanneld build")

type Client struct{}

type Filter struct {
	Name   *string
	Values []*string
}

type Route struct {
	DestinationCidrBlock *string
	GatewayType          *string
	GatewayId            *string
	RouteType            *string
	RouteId              *uint64
	Enabled              *bool
}

type RouteTable struct {
	RouteTableId *string
	RouteSet     []*Route
}

type DescribeRouteTablesRequest struct{ Filters []*Filter }

type DescribeRouteTablesResponseParams struct{ RouteTableSet []*RouteTable }

type DescribeRouteTablesResponse struct {
	Response *DescribeRouteTablesResponseParams
}

type DeleteRoutesRequest struct {
	RouteTableId *string
	Routes       []*Route
}

type DeleteRoutesResponse struct{}

type CreateRoutesRequest struct {
	RouteTableId *string
	Routes       []*Route
}

type CreateRoutesResponse struct{}

func NewClientWithSecretId(secretID, secretKey, region string) (*Client, error) {
	return &Client{}, errUnavailable
}

func NewDescribeRouteTablesRequest() *DescribeRouteTablesRequest {
	return &DescribeRouteTablesRequest{}
}

func NewDeleteRoutesRequest() *DeleteRoutesRequest { return &DeleteRoutesRequest{} }

func NewCreateRoutesRequest() *CreateRoutesRequest { return &CreateRoutesRequest{} }

func (c *Client) DescribeRouteTables(
	*DescribeRouteTablesRequest,
) (*DescribeRouteTablesResponse, error) {
	return nil, errUnavailable
}

func (c *Client) DeleteRoutes(*DeleteRoutesRequest) (*DeleteRoutesResponse, error) {
	return nil, errUnavailable
}

func (c *Client) CreateRoutes(*CreateRoutesRequest) (*CreateRoutesResponse, error) {
	return nil, errUnavailable
}
"""
"""Go source of the stand-in for the Tencent VPC SDK package flannel imports (written for
cnibench from the names flannel's backend uses; no SDK code)."""
