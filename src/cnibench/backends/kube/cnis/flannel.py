"""flannel (VXLAN backend, :data:`VERSION`), rendered by cnibench as Kubernetes objects.

flanneld runs as DaemonSet ``kube-flannel/kube-flannel-ds`` with ``--kube-subnet-mgr`` (each
node's subnet is its ``spec.podCIDR``, the network comes from ``net-conf.json`` in ConfigMap
``kube-flannel-cfg``) and ``--ip-masq`` (flanneld masquerades pod traffic leaving the pod
network). flanneld writes the node's lease to ``/run/flannel/subnet.env``
(``FLANNEL_NETWORK``, ``FLANNEL_SUBNET``, ``FLANNEL_MTU``, ``FLANNEL_IPMASQ``).

Pods are wired by the reference CNI plugins ``bridge`` + ``host-local`` (+ ``portmap``), the
way flannel's own CNI plugin delegates to ``bridge``: flannel's plugin cannot be built offline
(its Go module is not served), while kind node images carry the reference plugins. So the
container does what the plugin would do at every pod start once, at its own start
(:data:`ENTRYPOINT_SCRIPT`): it waits for ``subnet.env`` and writes
``/etc/cni/net.d/10-flannel.conflist`` with the node's subnet and MTU. A node's subnet is its
``podCIDR``, fixed for the node's life, so writing it once is enough.

The objects are written here from flannel's documentation (``Documentation/configuration.md``,
``kubernetes.md``), not copied from its release manifest. They carry
:data:`~cnibench.backends.kube.render.MANAGED_BY` but no session label: the CNI belongs to the
cluster, and ``cnibench clean`` removes only session-labelled objects.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cnibench.backends.base import Capability
from cnibench.backends.kube.build_recipes import PATH_ENV, GoBuild, ImageRecipe, OfflineRecipe
from cnibench.backends.kube.cni_types import Agent, CniDefinition, Readiness, check_options
from cnibench.backends.kube.cnis.base import DriverBase
from cnibench.backends.kube.images import CniImage
from cnibench.backends.kube.render import MANAGED_BY, service_account_rbac
from cnibench.errors import UnsupportedError

if TYPE_CHECKING:
    from cnibench.backends.base import ClusterSpec
    from cnibench.backends.kube.cni_types import CniVersions
    from cnibench.backends.kube.images import Images

__all__ = [
    "CONFLIST_NAME",
    "ENTRYPOINT_SCRIPT",
    "FLANNEL",
    "FLANNEL_OFFLINE",
    "IMAGE",
    "NAMESPACE",
    "NETWORK_NAME",
    "OFFLINE_VERSION",
    "SUBNET_WAIT_SECONDS",
    "TENCENT_VPC_MODULE",
    "TENCENT_VPC_STUB",
    "VERSION",
    "FlannelDriver",
    "conflist_template",
    "entrypoint_script",
    "flannel_go_mod",
    "flannel_image",
    "net_conf",
]

VERSION = "v0.28.10"
"""The pinned flannel release: the one whose flanneld the images run (the public set's
``ghcr.io/flannel-io/flannel`` tag and the offline build, :data:`OFFLINE_VERSION`)."""
OFFLINE_VERSION = VERSION
"""The ``github.com/flannel-io/flannel`` release the offline image set builds."""
IMAGE = CniImage(
    "flannel",
    public=f"ghcr.io/flannel-io/flannel:{VERSION}",
    offline=f"localhost/cnibench-flannel:{OFFLINE_VERSION}-offline-1",
)
"""flanneld (``/opt/bin/flanneld``) with a shell, iptables and iproute2: the release image, or
the offline build (:data:`FLANNEL_OFFLINE`); ``CNIBENCH_IMAGE_FLANNEL`` overrides it."""

NAMESPACE = "kube-flannel"
DAEMONSET = "kube-flannel-ds"
SERVICE_ACCOUNT = "flannel"
CLUSTER_ROLE = "flannel"
CONFIG_MAP = "kube-flannel-cfg"
FLANNELD = "/opt/bin/flanneld"
SUBNET_FILE = "/run/flannel/subnet.env"
CNI_CONF_DIR = "/etc/cni/net.d"
CONFLIST_NAME = "10-flannel.conflist"
"""Sorts before other CNI configs a node may hold (the runtime uses the first)."""
NETWORK_NAME = "cbr0"
"""The CNI network's name, flannel's own."""
CNI_VERSION = "1.0.0"
"""CNI spec version of the conflist: the reference plugins speak it since v1.0.0, and kind node
images carry v1.x."""
SUBNET_WAIT_SECONDS = 120
"""How long the container waits for flanneld's first ``subnet.env`` before giving up (the pod
then restarts and shows the failure)."""
POD_LABELS = {"app": "flannel", "tier": "node"}
"""The DaemonSet's selector."""
NETWORK_POLICY_HINT = (
    "flannel only connects pods and enforces no NetworkPolicy: choose another --cni for"
    " policy scenarios"
)
L7_POLICY_HINT = "flannel has no L7 policy (Cilium's needs Envoy, which cannot be built offline)"
TRAFFIC_SPLIT_HINT = (
    "flannel brings no Gateway API implementation: add one with --cni flannel:gateway=traefik"
)


def wireguard_reason(kernel_wireguard: bool) -> str:
    """Why flannel cannot encrypt here: cnibench runs its vxlan backend, and its WireGuard
    backend needs kernel WireGuard (``kernel_wireguard``: whether this kernel has it)."""
    lacks = "" if kernel_wireguard else ", which this kernel lacks"
    return (
        "flannel runs its vxlan backend here; its wireguard backend needs the wireguard kernel"
        f" module{lacks}"
    )


# Placeholders of conflist_template: JSON strings replaced by shell expansions, so the
# conflist's structure is written once, in Python, and parsed by tests.
_PLACEHOLDERS = {
    '"@IPMASQ@"': "${bridge_ip_masq}",
    '"@MTU@"': "${FLANNEL_MTU}",
    '"@SUBNET@"': '"${node_subnet}"',
    '"@NETWORK@"': '"${FLANNEL_NETWORK}"',
}


def net_conf(pod_subnet: str) -> str:
    """flannel's ``net-conf.json``: the cluster's pod network and the VXLAN backend."""
    return json.dumps({"Network": pod_subnet, "Backend": {"Type": "vxlan"}}, indent=2)


def conflist_template() -> str:
    """The conflist the entrypoint writes, as a shell here-document body.

    ``bridge`` (``cni0``, the node's gateway and pods' default route, hairpin on, the MTU
    flanneld chose for VXLAN) with ``host-local`` addresses from the node's subnet and a route
    to the whole pod network, then ``portmap`` for ``hostPort``. Expanded by the shell:
    ``node_subnet`` (``FLANNEL_SUBNET``'s network), ``FLANNEL_NETWORK``, ``FLANNEL_MTU`` and
    ``bridge_ip_masq`` (``false`` when flanneld masquerades).
    """
    conflist = {
        "name": NETWORK_NAME,
        "cniVersion": CNI_VERSION,
        "plugins": [
            {
                "type": "bridge",
                "bridge": "cni0",
                "isGateway": True,
                # As flannel's own config asks of bridge: without a default route pods reach
                # only the pod network, not Services or anything outside.
                "isDefaultGateway": True,
                "ipMasq": "@IPMASQ@",
                "hairpinMode": True,
                "mtu": "@MTU@",
                "ipam": {
                    "type": "host-local",
                    "subnet": "@SUBNET@",
                    "routes": [{"dst": "@NETWORK@"}],
                    "dataDir": "/var/lib/cni/networks",
                },
            },
            {"type": "portmap", "capabilities": {"portMappings": True}},
        ],
    }
    text = json.dumps(conflist, indent=2)
    # Everything but the placeholders must reach the file as written.
    if any(c in text for c in "$`\\"):
        raise ValueError("the conflist template holds shell-expanded characters")
    for placeholder, expansion in _PLACEHOLDERS.items():
        text = text.replace(placeholder, expansion)
    return text


def entrypoint_script(
    *, conflist_name: str = CONFLIST_NAME, subnet_wait: int = SUBNET_WAIT_SECONDS
) -> str:
    """The flannel container's ``sh -c`` script (POSIX sh: busybox, dash and bash run it).

    1. removes a ``subnet.env`` an earlier flanneld left on the node;
    2. starts ``flanneld --ip-masq --kube-subnet-mgr`` in the background;
    3. waits up to ``subnet_wait`` seconds for a ``subnet.env`` that defines
       ``FLANNEL_NETWORK``, ``FLANNEL_SUBNET`` and ``FLANNEL_MTU`` (exiting with flanneld's
       status if flanneld dies first, with 1 on timeout);
    4. writes the conflist of :func:`conflist_template` to a temporary file and renames it
       into place, so the runtime never reads half a file;
    5. waits for flanneld and exits with its status, so the pod restarts when it dies.

    ``CNIBENCH_FLANNELD``, ``CNIBENCH_SUBNET_FILE``, ``CNIBENCH_CNI_CONF_DIR`` and
    ``CNIBENCH_SUBNET_WAIT`` override the flanneld binary, ``subnet.env``'s path (also passed
    to flanneld), the CNI config directory and the wait (seconds); the pod sets none of them.
    """
    return f"""\
set -u
flanneld_bin=${{CNIBENCH_FLANNELD:-{FLANNELD}}}
subnet_file=${{CNIBENCH_SUBNET_FILE:-{SUBNET_FILE}}}
conf_dir=${{CNIBENCH_CNI_CONF_DIR:-{CNI_CONF_DIR}}}
wait_limit=${{CNIBENCH_SUBNET_WAIT:-{subnet_wait:d}}}
conflist="$conf_dir/{conflist_name}"
tmp="$conf_dir/.{conflist_name}.tmp"

log() {{ echo "cnibench-flannel: $*" >&2; }}

# Sets status to flanneld's exit status. A trapped signal ends wait early, so wait again
# until flanneld is really gone.
wait_flanneld() {{
    wait "$flanneld_pid"
    status=$?
    while kill -0 "$flanneld_pid" 2>/dev/null; do
        wait "$flanneld_pid"
        status=$?
    done
}}

give_up() {{
    log "$*: stopping flanneld"
    kill -TERM "$flanneld_pid" 2>/dev/null
    wait_flanneld
    exit 1
}}

# Run in a subshell: a broken file must not end this shell.
subnet_ready() {{
    [ -s "$subnet_file" ] || return 1
    . "$subnet_file" || return 1
    [ -n "${{FLANNEL_NETWORK:-}}" ] && [ -n "${{FLANNEL_SUBNET:-}}" ] && [ -n "${{FLANNEL_MTU:-}}" ]
}}

# FLANNEL_SUBNET is the bridge's address with the prefix (10.244.1.1/24); host-local refuses
# a subnet with host bits set, so keep the network part (10.244.1.0/24).
# Runs in a command substitution, so set and IFS changes stay there.
network_of() {{
    prefix=${{1#*/}}
    case $prefix in ''|*[!0-9]*) return 1 ;; esac
    [ "$prefix" -ge 1 ] && [ "$prefix" -le 32 ] || return 1
    set -f
    IFS=.
    set -- ${{1%/*}}
    [ "$#" -eq 4 ] || return 1
    for octet in "$@"; do
        case $octet in ''|*[!0-9]*) return 1 ;; esac
        [ "$octet" -le 255 ] || return 1
    done
    mask=$(( (0xFFFFFFFF << (32 - prefix)) & 0xFFFFFFFF ))
    net=$(( (($1 << 24) | ($2 << 16) | ($3 << 8) | $4) & mask ))
    a=$(( (net >> 24) & 255 )) b=$(( (net >> 16) & 255 ))
    c=$(( (net >> 8) & 255 )) d=$(( net & 255 ))
    echo "$a.$b.$c.$d/$prefix"
}}

rm -f "$subnet_file"
"$flanneld_bin" --ip-masq --kube-subnet-mgr --subnet-file="$subnet_file" &
flanneld_pid=$!
# As PID 1 this shell ignores TERM unless trapped: hand the kubelet's TERM to flanneld.
trap 'kill -TERM "$flanneld_pid" 2>/dev/null' TERM INT

waited=0
until (subnet_ready); do
    if ! kill -0 "$flanneld_pid" 2>/dev/null; then
        # It may have written the file between the check above and its exit.
        (subnet_ready) && break
        wait_flanneld
        log "flanneld exited with status $status before writing $subnet_file"
        [ "$status" -ne 0 ] || status=1
        exit "$status"
    fi
    [ "$waited" -lt "$wait_limit" ] || give_up "no usable $subnet_file after $wait_limit s"
    sleep 1
    waited=$((waited + 1))
done
. "$subnet_file"

case $FLANNEL_MTU in ''|*[!0-9]*) give_up "FLANNEL_MTU=$FLANNEL_MTU is not a number" ;; esac
node_subnet=$(network_of "$FLANNEL_SUBNET") ||
    give_up "FLANNEL_SUBNET=$FLANNEL_SUBNET is not an IPv4 address/prefix"
if [ "${{FLANNEL_IPMASQ:-false}}" = true ]; then bridge_ip_masq=false; else bridge_ip_masq=true; fi

mkdir -p "$conf_dir" || give_up "cannot create $conf_dir"
cat > "$tmp" <<CNIBENCH_CONFLIST || give_up "cannot write $tmp"
{conflist_template()}
CNIBENCH_CONFLIST
mv -f "$tmp" "$conflist" || give_up "cannot rename $tmp to $conflist"
log "wrote $conflist: subnet $node_subnet of $FLANNEL_NETWORK, MTU $FLANNEL_MTU"

wait_flanneld
log "flanneld exited with status $status"
exit "$status"
"""


ENTRYPOINT_SCRIPT = entrypoint_script()
"""The flannel container's script (see :func:`entrypoint_script`)."""


def _labels(**extra: str) -> dict[str, str]:
    return {**MANAGED_BY, **extra}


def _namespace() -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {
            "name": NAMESPACE,
            # flanneld needs privileged, host-network pods with host paths.
            "labels": _labels(**{"pod-security.kubernetes.io/enforce": "privileged"}),
        },
    }


def _rbac() -> list[dict[str, Any]]:
    return service_account_rbac(
        service_account=SERVICE_ACCOUNT,
        namespace=NAMESPACE,
        cluster_role=CLUSTER_ROLE,
        labels=_labels(),
        rules=[
            # flanneld finds its node through its own pod (POD_NAME, POD_NAMESPACE).
            {"apiGroups": [""], "resources": ["pods"], "verbs": ["get"]},
            {"apiGroups": [""], "resources": ["nodes"], "verbs": ["get", "list", "watch"]},
            # It publishes its VTEP (MAC, public IP) as node annotations.
            {"apiGroups": [""], "resources": ["nodes/status"], "verbs": ["patch"]},
        ],
    )


def _config_map(pod_subnet: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": CONFIG_MAP, "namespace": NAMESPACE, "labels": _labels(**POD_LABELS)},
        "data": {"net-conf.json": net_conf(pod_subnet)},
    }


def _field_env(name: str, path: str) -> dict[str, Any]:
    return {"name": name, "valueFrom": {"fieldRef": {"fieldPath": path}}}


def _daemon_set(image: str) -> dict[str, Any]:
    mounts = [
        {"name": "run", "mountPath": "/run/flannel"},
        {"name": "cni", "mountPath": CNI_CONF_DIR},
        {"name": "flannel-cfg", "mountPath": "/etc/kube-flannel/"},
        # iptables in the container and on the node (kube-proxy) share one lock.
        {"name": "xtables-lock", "mountPath": "/run/xtables.lock"},
    ]
    volumes = [
        {"name": "run", "hostPath": {"path": "/run/flannel", "type": "DirectoryOrCreate"}},
        {"name": "cni", "hostPath": {"path": CNI_CONF_DIR, "type": "DirectoryOrCreate"}},
        {"name": "flannel-cfg", "configMap": {"name": CONFIG_MAP}},
        {"name": "xtables-lock", "hostPath": {"path": "/run/xtables.lock", "type": "FileOrCreate"}},
    ]
    container = {
        "name": "kube-flannel",
        "image": image,
        "command": ["/bin/sh", "-c", ENTRYPOINT_SCRIPT],
        "env": [
            _field_env("POD_NAME", "metadata.name"),
            _field_env("POD_NAMESPACE", "metadata.namespace"),
            {"name": "EVENT_QUEUE_DEPTH", "value": "5000"},
        ],
        "resources": {"requests": {"cpu": "100m", "memory": "50Mi"}},
        # VXLAN device, routes, iptables and the bridge's sysctls on the node.
        "securityContext": {"privileged": True},
        # Ready once this node's CNI config is in place, so pods scheduled after readiness
        # find it.
        "readinessProbe": {
            "exec": {"command": ["/bin/sh", "-c", f"test -s {CNI_CONF_DIR}/{CONFLIST_NAME}"]},
            "periodSeconds": 2,
        },
        "volumeMounts": mounts,
    }
    return {
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": {"name": DAEMONSET, "namespace": NAMESPACE, "labels": _labels(**POD_LABELS)},
        "spec": {
            "selector": {"matchLabels": dict(POD_LABELS)},
            "template": {
                "metadata": {"labels": _labels(**POD_LABELS)},
                "spec": {
                    "hostNetwork": True,
                    "priorityClassName": "system-node-critical",
                    # Every node needs pod networking, whatever its taints.
                    "tolerations": [{"operator": "Exists"}],
                    "serviceAccountName": SERVICE_ACCOUNT,
                    "nodeSelector": {"kubernetes.io/os": "linux"},
                    "containers": [container],
                    "volumes": volumes,
                },
            },
        },
    }


# -- the offline build ---------------------------------------------------------------------


def flannel_go_mod(version: str) -> str:
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
            f"require github.com/flannel-io/flannel {version}",
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


def _wrapper(version: str, module: Path | None) -> dict[str, str]:
    """The wrapper module: :func:`flannel_go_mod` and the Tencent VPC stub it points at."""
    return {
        "go.mod": flannel_go_mod(version),
        "tencent-vpc-stub/go.mod": f"module {TENCENT_VPC_MODULE}\n\ngo 1.24.0\n",
        "tencent-vpc-stub/v20170312/stub.go": TENCENT_VPC_STUB,
    }


def flannel_image(tag: str) -> ImageRecipe:
    """flanneld on the shared ``netfilter`` root filesystem (a shell, iptables, iproute2)."""
    return ImageRecipe(tag=tag, rootfs="netfilter", files={FLANNELD: "flanneld"}, env=PATH_ENV)


FLANNEL_OFFLINE = OfflineRecipe(
    version=OFFLINE_VERSION,
    build=GoBuild(
        module="github.com/flannel-io/flannel",
        packages=("github.com/flannel-io/flannel",),
        flags=("-trimpath", "-ldflags", "-s -w"),
        wrapper=_wrapper,
        # flannel is a main package: nothing can import it, so `go mod tidy` cannot see it;
        # -mod=mod lets the build itself complete go.mod and go.sum. Its udp backend is cgo,
        # so this one binary links glibc (the image's Debian is the build host's release).
        env={"CGO_ENABLED": "1"},
        binary="flanneld",
    ),
    image=flannel_image,
    image_name=IMAGE.name,
    always=True,
    kernel_wireguard=True,
    recipe="flannel",
)
"""flannel's offline recipe: flanneld through a wrapper module, built with every offline image
set in the shared Go step (stamped with the version set, whose ``flannel`` is
:data:`OFFLINE_VERSION`)."""


class FlannelDriver(DriverBase):
    """flannel as a :class:`~cnibench.backends.kube.cnis.CniDriver`: VXLAN, kube subnet
    manager, no policy, no encryption, installed from :meth:`manifests`."""

    name = "flannel"
    version = VERSION
    own_images = (IMAGE,)
    offline = FLANNEL_OFFLINE

    def definition(
        self,
        spec: ClusterSpec,
        *,
        versions: CniVersions,
        images: Images,
        k8s_service_host: str = "",
    ) -> CniDefinition:
        """flannel's definition: no capabilities (it enforces no NetworkPolicy), readiness of
        ``kube-flannel/kube-flannel-ds``, and its objects in
        :attr:`~cnibench.backends.kube.cni.CniDefinition.manifests`. ``k8s_service_host`` is
        not used: flannel keeps kube-proxy.

        Raises
        ------
        cnibench.errors.ConfigError
            Any cluster option.
        cnibench.errors.UnsupportedError
            WireGuard encryption (the condition is skipped with the reason).
        """
        check_options(spec)
        if spec.encryption:
            raise UnsupportedError(wireguard_reason(Path("/sys/module/wireguard").exists()))
        base = CniDefinition(
            name=self.name,
            version=versions.version(self.name, self.version),
            capabilities=frozenset(),
            readiness=(Readiness("DaemonSet", NAMESPACE, DAEMONSET),),
            agent=Agent("flanneld", NAMESPACE, "app=flannel"),
            capability_hints={
                Capability.NETWORK_POLICY: NETWORK_POLICY_HINT,
                Capability.L7_POLICY: L7_POLICY_HINT,
                Capability.TRAFFIC_SPLIT: TRAFFIC_SPLIT_HINT,
            },
        )
        return dataclasses.replace(base, manifests=tuple(self.manifests(base, images)))

    def manifests(self, definition: CniDefinition, images: Images) -> list[dict[str, Any]]:
        """Namespace ``kube-flannel``, ServiceAccount, ClusterRole and ClusterRoleBinding
        ``flannel``, ConfigMap ``kube-flannel-cfg`` (``net-conf.json`` with
        ``definition.pod_subnet``) and DaemonSet ``kube-flannel-ds`` running
        :data:`IMAGE` as ``images`` has it, in that order."""
        return [
            _namespace(),
            *_rbac(),
            _config_map(definition.pod_subnet),
            _daemon_set(images.cni_image(IMAGE)),
        ]


FLANNEL = FlannelDriver()
"""The flannel driver (registered in :data:`~cnibench.backends.kube.cnis.DRIVERS`)."""
