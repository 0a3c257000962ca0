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
    "CNI_PLUGINS",
    "KUBERNETES_COMMANDS",
    "OFFLINE_CNIS",
    "ROOTFS_PACKAGES",
    "ImageRecipe",
    "OfflineVersions",
    "containerd_config",
    "debian_mirror",
    "etcd_go_mod",
    "go_proxy",
    "image_recipes",
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
}
"""Debian packages of each root filesystem (``debootstrap --variant=minbase``)."""


OFFLINE_CNIS = ("flannel",)
"""CNIs the offline image set builds (from Go modules) and installs."""

_NOT_OFFLINE = {
    "kindnet": "kindnetd is a nested module of kind the Go module proxy does not serve",
    "calico": "Calico is not served by the Go module proxy",
    "kube-router": "kube-router is not served by the Go module proxy",
    "antrea": "Antrea is not served by the Go module proxy",
    "cilium": "building Cilium from its Go module is not in the offline set yet",
}
_KERNEL_MODULES = {"antrea": "openvswitch"}
"""Kernel modules a CNI cannot run without, whatever is built."""


def not_offline_reason(cni: str, *, loaded_modules: Iterable[str] = ()) -> str:
    """Why ``cni`` cannot run with the offline image set (``""`` if it can): the kernel
    module it needs and this host lacks (``loaded_modules``: names under ``/sys/module``),
    else why it is not built."""
    if cni in OFFLINE_CNIS:
        return ""
    module = _KERNEL_MODULES.get(cni)
    if module and module not in set(loaded_modules):
        return f"{cni} needs the {module} kernel module, which this kernel lacks"
    why = _NOT_OFFLINE.get(cni, f"{cni} has no offline build")
    return f"no offline image of {cni}: {why} (the public images need a registry)"


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
    """

    tag: str
    rootfs: str = ""
    files: Mapping[str, str] = field(default_factory=dict)
    entrypoint: tuple[str, ...] = ()
    cmd: tuple[str, ...] = ()
    env: Mapping[str, str] = field(default_factory=dict)
    user: str = ""
    remove: tuple[str, ...] = ()

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


def image_recipes(images: Images = OFFLINE_IMAGES) -> tuple[ImageRecipe, ...]:
    """The images cnibench's pods run (loaded with ``kind load``), one per distinct tag of
    ``images`` except the node image (built by :mod:`.builder` from the runtime images)."""
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
    }
    seen: dict[str, ImageRecipe] = {}
    for f in fields(images):
        tag = getattr(images, f.name)
        if f.name == "kind_node" or tag in seen:
            continue
        recipe = by_field.get(f.name)
        if recipe is None:
            # sockperf and http_echo share the tools image in the offline set.
            recipe = next((r for r in by_field.values() if r.tag == tag), None)
        if recipe is None:
            raise ValueError(f"no offline recipe for image field {f.name!r} ({tag})")
        seen[tag] = recipe
    return tuple(seen.values())


def pod_image_tags(images: Images = OFFLINE_IMAGES) -> tuple[str, ...]:
    """Tags ``kind load`` puts into an offline cluster (every pod image, not the node)."""
    return tuple(recipe.tag for recipe in image_recipes(images))


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
