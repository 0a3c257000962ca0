"""Cilium: installed from its Helm chart, in the two set-ups seed 001 compares.

Options of ``--cni cilium``: ``mode`` (``kpr``, the default: eBPF kube-proxy replacement with
kind's ``kubeProxyMode: none``; or ``kube-proxy``, iptables kube-proxy kept) and ``features``
(comma-separated subset of :data:`CILIUM_FEATURES`; default ``l7`` in both modes, so that
``cilium`` and ``cilium:mode=kube-proxy`` differ in the Service proxy alone). The egress
gateway and Gateway API need kube-proxy replacement, and the egress gateway BPF masquerading,
which it alone switches on (:func:`cilium_values`): with it, Cilium also routes in BPF on the
host, a data path of its own, so a configuration asks for it by name
(``cilium:egress-gateway``). ``gateway-api`` needs the Gateway API CRDs installed *before*
Cilium (:attr:`~cnibench.backends.kube.cni.CniDefinition.gateway_api_crds`): cilium-operator
looks for them once at start and otherwise leaves Gateway API off.

With the offline image set (``CNIBENCH_IMAGES=offline``, or ``CNIBENCH_IMAGE_CILIUM`` set)
the chart is the one inside Cilium's Go module (``install/kubernetes/cilium`` in the module
cache, where ``cnibench images build --cni cilium`` put it) and every Cilium image is the one
built from that module. That build has no Envoy, so L7 policy and traffic splitting (the
``l7`` and ``gateway-api`` features) are not offered.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from cnibench.backends.base import Capability, EncryptionStatus, NodeRole
from cnibench.backends.kube import render
from cnibench.backends.kube.build_recipes import PATH_ENV, GoBuild, ImageRecipe, OfflineRecipe
from cnibench.backends.kube.cni_types import (
    Agent,
    CniDefinition,
    ConfigLimit,
    HelmChart,
    Readiness,
    check_options,
    features_option,
)
from cnibench.backends.kube.cnis.base import AgentAccess, DriverBase, ObjectScope
from cnibench.backends.kube.gomodules import module_cache_dir
from cnibench.backends.kube.images import CniImage
from cnibench.engine.host import lacks_capability
from cnibench.errors import ConfigError

if TYPE_CHECKING:
    from cnibench.backends.base import ClusterSpec
    from cnibench.backends.kube.cni_types import CniVersions
    from cnibench.backends.kube.images import Images
    from cnibench.policy import PolicySpec, PriorityCase

__all__ = [
    "CHART_CAPABILITIES",
    "CILIUM",
    "CILIUM_BUILD_TAGS",
    "CILIUM_FEATURES",
    "CILIUM_MODES",
    "CILIUM_MODULE",
    "CILIUM_OFFLINE",
    "CILIUM_PACKAGES",
    "CILIUM_POLICY_MAP",
    "CILIUM_SOURCE",
    "GATEWAY_API_VERSION",
    "IMAGE",
    "VERSION",
    "CiliumDriver",
    "cilium_egress_gateway_policy",
    "cilium_go_mod",
    "cilium_image",
    "cilium_l7_policy",
    "cilium_ldflags",
    "cilium_network_policy",
    "cilium_values",
    "parse_cilium_datapath",
    "parse_cilium_encryption",
]

VERSION = "1.18.4"
"""The pinned Cilium release (Helm chart and Go module; checked to be published, November
2026): the chart and Go module the kube tier renders, and what the offline image set builds
(as module tag ``v1.18.4``)."""
GATEWAY_API_VERSION = "v1.2.0"
"""Gateway API release whose standard CRDs go in before Cilium: the one Cilium's own
documentation requires (``Documentation/network/servicemesh/gateway-api/installation.rst`` of
1.18.4 names v1.2.0). Newer CRDs may carry versions the operator does not know."""

CILIUM_MODES = ("kpr", "kube-proxy")
CILIUM_FEATURES = ("egress-gateway", "gateway-api", "l7")
_NEEDS_KPR = frozenset({"egress-gateway", "gateway-api"})
_NEEDS_ENVOY = frozenset({"gateway-api", "l7"})

CHART_CAPABILITIES = {
    "ciliumAgent": (
        "CHOWN",
        "KILL",
        "NET_ADMIN",
        "NET_RAW",
        "IPC_LOCK",
        "SYS_MODULE",
        "SYS_ADMIN",
        "SYS_RESOURCE",
        "DAC_OVERRIDE",
        "FOWNER",
        "SETGID",
        "SETUID",
    ),
    "cleanCiliumState": ("NET_ADMIN", "SYS_MODULE", "SYS_ADMIN", "SYS_RESOURCE"),
}
"""``securityContext.capabilities`` defaults of the Cilium 1.18.4 chart
(``install/kubernetes/cilium/values.yaml`` of the Go module) for the containers that ask for
``SYS_RESOURCE``."""


def _features(spec: ClusterSpec, mode: str, *, envoy: bool) -> frozenset[str]:
    features = features_option(spec, CILIUM_FEATURES)
    if features is None:
        # The same in both modes: a mode changes the Service proxy and nothing else.
        defaults = {"l7"}
        return frozenset(defaults if envoy else defaults - _NEEDS_ENVOY)
    needs_kpr = sorted(features & _NEEDS_KPR)
    if mode != "kpr" and needs_kpr:
        raise ConfigError(
            f"cilium feature {', '.join(needs_kpr)} needs mode=kpr (kube-proxy replacement)"
        )
    needs_envoy = sorted(features & _NEEDS_ENVOY)
    if not envoy and needs_envoy:
        raise ConfigError(
            f"cilium feature {', '.join(needs_envoy)} needs Envoy, which the offline image set"
            " does not build"
        )
    return features


_FEATURE_OF = {
    Capability.EGRESS_GATEWAY: "egress-gateway",
    Capability.L7_POLICY: "l7",
    Capability.TRAFFIC_SPLIT: "gateway-api",
}


def _feature_hints(features: frozenset[str], mode: str, *, envoy: bool) -> dict[Capability, str]:
    """For each feature capability missing, the ``--cni`` value that adds it (in kpr mode
    when the feature needs it), or why it cannot be had."""
    hints: dict[Capability, str] = {}
    for capability, feature in _FEATURE_OF.items():
        if feature in features:
            continue
        if feature in _NEEDS_ENVOY and not envoy:
            hints[capability] = f"cilium {feature} needs Envoy, which the offline set lacks"
            continue
        wanted = sorted(features | {feature})
        note = ""
        if mode != "kpr" and feature in _NEEDS_KPR:
            note = " (kube-proxy replacement: the default mode)"
        elif mode != "kpr":
            wanted.append(f"mode={mode}")
        hints[capability] = f"add the feature: --cni cilium:{','.join(wanted)}{note}"
    return hints


def _without_sys_resource() -> dict[str, list[str]]:
    return {
        container: [cap for cap in caps if cap != "SYS_RESOURCE"]
        for container, caps in CHART_CAPABILITIES.items()
    }


def _offline_values(image: str) -> dict[str, Any]:
    """Every Cilium image is ``image`` (never pulled), and what would need another image is
    off: Envoy, Hubble, node-init, pre-flight, the clustermesh API server, SPIRE."""
    own = {"override": image, "pullPolicy": "Never", "useDigest": False}
    return {
        "image": dict(own),
        "operator": {"image": dict(own)},
        "certgen": {"image": {"override": image, "pullPolicy": "Never"}},
        "envoy": {"enabled": False},
        "l7Proxy": False,
        "hubble": {"enabled": False, "relay": {"enabled": False}, "ui": {"enabled": False}},
        "nodeinit": {"enabled": False},
        "preflight": {"enabled": False},
        "clustermesh": {"useAPIServer": False},
        "authentication": {"mutual": {"spire": {"enabled": False}}},
    }


def cilium_values(
    *,
    mode: str,
    features: frozenset[str],
    wireguard: bool,
    k8s_service_host: str = "",
    k8s_service_port: int = 6443,
    image: str = "",
    drop_sys_resource: bool = False,
) -> dict[str, Any]:
    """Helm values of the Cilium chart for a mode and feature set.

    Parameters
    ----------
    mode:
        ``"kpr"`` or ``"kube-proxy"``.
    features:
        Subset of :data:`CILIUM_FEATURES`. ``egress-gateway`` also switches on BPF
        masquerading (``bpf.masquerade``), which Cilium's egress gateway needs; without it
        masquerading stays in iptables in both modes, so that the mode alone decides the
        Service proxy (BPF masquerading under kube-proxy replacement also moves host routing
        into BPF).
    wireguard:
        Encrypt pod-to-pod traffic with WireGuard (UDP 51871).
    k8s_service_host, k8s_service_port:
        API server address the agents use without kube-proxy (kind:
        ``<cluster>-control-plane`` and 6443); omitted when empty.
    image:
        One image for agent, operator and certgen (the offline build), used as it is and
        never pulled; with it Envoy, Hubble, node-init, pre-flight, the clustermesh API server
        and SPIRE are off. ``""``: the chart's own images.
    drop_sys_resource:
        Ask for the chart's default capabilities (:data:`CHART_CAPABILITIES`) without
        ``SYS_RESOURCE``: where the container runtime's bounding set lacks it, runc refuses
        to start a container that asks for it.

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
        "bpf": {"masquerade": "egress-gateway" in features},
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
    if image:
        offline = _offline_values(image)
        offline["operator"] = {**values["operator"], **offline["operator"]}
        values.update(offline)
    if drop_sys_resource:
        values["securityContext"] = {"capabilities": _without_sys_resource()}
    return values


def module_chart_dir(version: str) -> Path:
    """Cilium's chart inside its Go module in the module cache (``install/kubernetes/cilium``
    of ``github.com/cilium/cilium@v<version>``; ``version`` as the chart names it, with or
    without the ``v`` of the module's tag)."""
    tag = "v" + version.removeprefix("v")
    return module_cache_dir(CILIUM_MODULE, tag) / "install" / "kubernetes" / "cilium"


def host_lacks_sys_resource() -> bool:
    """Whether this host's bounding set lacks ``CAP_SYS_RESOURCE`` (so do kind's nodes)."""
    return lacks_capability()


def cilium_egress_gateway_policy(
    name: str,
    *,
    session: str,
    namespace: str,
    clients: Sequence[str],
    destinations: Sequence[str],
    gateway_node: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """CiliumEgressGatewayPolicy sending ``clients``' traffic to ``destinations`` through the
    egress-gw node, selected by ``gateway_node`` (labels it carries; default: the role label)
    (``cilium.io/v2``, cluster-scoped; one policy per client pod because ``podSelector``
    matches labels, and the endpoint label differs per pod)."""
    if not clients or not destinations:
        raise ConfigError("an egress gateway policy needs clients and destination CIDRs")
    return render.render_template(
        "egress/cilium/egress-gateway-policy.yaml",
        {
            "name": name,
            "labels": render.session_labels(session),
            "pod_labels": {
                "io.kubernetes.pod.namespace": namespace,
                render.SESSION_LABEL: session,
                "cnibench.io/egress": name,
            },
            "destinations": list(destinations),
            "gateway_node_labels": dict(
                gateway_node or {render.ROLE_LABEL: NodeRole.EGRESS_GW.value}
            ),
        },
    )


def cilium_network_policy(
    spec: PolicySpec, *, name: str, namespace: str, session: str, action: str = "allow"
) -> dict[str, Any]:
    """CiliumNetworkPolicy (``cilium.io/v2``) allowing or denying ``spec.allowed`` to
    ``spec.target`` on ``spec.ports``.

    Cilium has no policy priority: a deny (``ingressDeny``) always wins over an allow.

    Raises
    ------
    cnibench.errors.ConfigError
        Unknown action, or ``pass`` (Cilium has no pass action).
    """
    if render.check_policy_action(action) == "pass":
        raise ConfigError("CiliumNetworkPolicy has no pass action (use allow or deny)")
    protocol = spec.protocol.value.upper()
    ports: list[dict[str, Any]] = []
    for port in spec.ports:
        entry: dict[str, Any] = {"port": str(port.first), "protocol": protocol}
        if port.last != port.first:
            entry["endPort"] = port.last
        ports.append(entry)
    rule = {
        "fromEndpoints": [{"matchLabels": {render.ENDPOINT_LABEL: p.name}} for p in spec.allowed],
        "toPorts": [{"ports": ports}],
    }
    manifest = render.render_template(
        "policy/cilium/network-policy.yaml",
        {
            "name": name,
            "namespace": namespace,
            "labels": render.session_labels(session),
            "target_labels": {render.ENDPOINT_LABEL: spec.target.name},
        },
    )
    manifest["spec"]["ingress" if action == "allow" else "ingressDeny"] = [rule]
    return manifest


def cilium_l7_policy(
    name: str, *, namespace: str, session: str, target: str, port: int, method: str, path: str
) -> dict[str, Any]:
    """CiliumNetworkPolicy allowing only ``method`` on exactly ``path`` to ``target:port``."""
    return render.render_template(
        "l7/cilium/http-policy.yaml",
        {
            **render.l7_values(name, namespace, session, target, path),
            "port": str(port),
            # Cilium matches path as a regular expression: anchor it to mean "exactly".
            "http_rules": [{"method": method.upper(), "path": f"^{_regex_escape(path)}$"}],
        },
    )


def _regex_escape(text: str) -> str:
    return "".join(f"\\{c}" if c in r".^$*+?()[]{}|\\" else c for c in text)


_WG_RE = re.compile(
    r"^Encryption:\s+Wireguard\s+\[(?P<body>.*)\]\s*$", re.IGNORECASE | re.MULTILINE
)


_STATUS_LINE = re.compile(r"^(?P<key>[A-Za-z][A-Za-z ]*?):[ \t]+(?P<value>\S.*?)\s*$", re.MULTILINE)

_KPR_WORDS: Mapping[str, str] = MappingProxyType(
    {"true": "true", "strict": "true", "false": "false", "disabled": "false", "partial": "partial"}
)
"""``KubeProxyReplacement:`` words of Cilium 1.16-1.18 (``True``/``False``) and of older
releases (``Strict``/``Partial``/``Disabled``), as :func:`parse_cilium_datapath` records them."""


def parse_cilium_datapath(text: str) -> dict[str, str]:
    """The data-path settings one Cilium agent reports in ``cilium-dbg status``.

    Read from three lines of the status (the first word after the colon, lower-cased):
    ``KubeProxyReplacement:    True   [eth0 ...]`` (``True``/``False``; releases before 1.16
    printed ``Strict``/``Partial``/``Disabled``), the host routing, printed as ``Routing:
    Network: Tunnel [vxlan]   Host: BPF`` since 1.16 and as ``Host Routing:  Legacy`` before,
    and ``Masquerading:  BPF   [eth0] ...`` (``BPF``, ``IPTables`` or ``Disabled``).

    Parameters
    ----------
    text:
        The status output (``fixtures/cilium/`` holds examples).

    Returns
    -------
    dict
        ``"kube-proxy replacement"`` (``"true"``, ``"false"`` or ``"partial"``), ``"host
        routing"`` (``"bpf"`` or ``"legacy"``) and ``"masquerade"`` (``"bpf"``,
        ``"iptables"`` or ``"off"``), each only when its line is there; a value Cilium prints
        that these words do not cover is kept lower-cased, so it differs from every other.
    """
    lines = {m.group("key").strip().lower(): m.group("value") for m in _STATUS_LINE.finditer(text)}
    settings: dict[str, str] = {}
    kpr = lines.get("kubeproxyreplacement", "").split()
    if kpr:
        settings["kube-proxy replacement"] = _KPR_WORDS.get(kpr[0].lower(), kpr[0].lower())
    host = re.search(r"\bHost:\s*(\S+)", lines.get("routing", ""))
    legacy = lines.get("host routing", "").split()
    if host or legacy:
        settings["host routing"] = (host.group(1) if host else legacy[0]).lower()
    masquerading = lines.get("masquerading", "").split()
    if masquerading:
        word = masquerading[0].lower()
        settings["masquerade"] = "off" if word == "disabled" else word
    return settings


def parse_cilium_encryption(text: str) -> tuple[bool, str, int]:
    """Encryption state from ``cilium-dbg status`` output.

    Cilium prints a line such as ``Encryption: Wireguard [NodeEncryption: Disabled, cilium_wg0
    (Pubkey: ..., Port: 51871, Peers: 2)]`` when WireGuard is on and ``Encryption: Disabled``
    otherwise.

    Returns
    -------
    tuple
        ``(enabled, interface, peers)``; ``(False, "", 0)`` when WireGuard is not reported.
    """
    match = _WG_RE.search(text)
    if not match:
        return False, "", 0
    body = match.group("body")
    interface = re.search(r"(cilium_wg\d+)", body)
    peers = re.search(r"Peers:\s*(\d+)", body)
    return True, interface.group(1) if interface else "", int(peers.group(1)) if peers else 0


# -- the offline build ---------------------------------------------------------------------

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


def cilium_go_mod(version: str, upstream_go_mod: str) -> str:
    """go.mod of the wrapper module that builds Cilium's commands.

    A dependency's ``replace`` directives do not apply to the module that requires it, so the
    wrapper repeats each of Cilium's (its forks of gobgp, controller-tools, ...); a fork in
    :data:`CILIUM_UNSERVED_FORKS` is replaced with its upstream release instead.

    Parameters
    ----------
    upstream_go_mod:
        Text of ``github.com/cilium/cilium``'s own go.mod at ``version`` (a module tag,
        ``v1.18.4``).
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
        f"require {CILIUM_MODULE} {version}",
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


def cilium_ldflags(version: str) -> str:
    """``-ldflags`` of Cilium's commands: stripped, with the release version stamped so
    ``cilium-dbg version`` and the agent report it (unstamped they say ``v-``).

    Envoy's required version (``pkg/envoy.requiredEnvoyVersionSHA``) is not stamped: the
    offline image set runs Cilium without Envoy, the only thing that checks it.
    """
    return f"-s -w -X {CILIUM_MODULE}/pkg/version.ciliumVersion={version.removeprefix('v')}"


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
        env=PATH_ENV,
    )


_CILIUM_RECIPE = "cilium-1"
"""Bumped when the way Cilium is built changes without its version changing."""

_ROOTFS: Mapping[str, tuple[str, ...]] = {
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


def _wrapper(version: str, module: Path | None) -> dict[str, str]:
    """The wrapper module: go.mod from Cilium's own (see :func:`cilium_go_mod`), and Cilium's
    own go.sum (verified with its module), which vouches for its forks the checksum database
    does not know (it answers 404 for ``github.com/cilium/gobgp/v3``)."""
    if module is None:
        raise ValueError("Cilium's wrapper module is made from Cilium's own go.mod")
    return {
        "go.mod": cilium_go_mod(version, (module / "go.mod").read_text()),
        "go.sum": (module / "go.sum").read_text(),
        "doc.go": "// Package cilium only holds the go.mod that builds Cilium's commands.\n"
        "package cilium\n",
    }


def cilium_offline(version: str) -> OfflineRecipe:
    """Cilium's offline recipe for module tag ``version``: its commands in one ``go build``
    (compilation shared between them; cold, about 10 minutes on 2 cores), the ``cilium`` root
    filesystem, and :func:`cilium_image`; helm is built beside it to install the chart."""
    packages = tuple(f"{CILIUM_MODULE}/{package}" for package in CILIUM_PACKAGES)
    ldflags = cilium_ldflags(version)
    return OfflineRecipe(
        version=version,
        build=GoBuild(
            module=CILIUM_MODULE,
            packages=packages,
            flags=("-tags", CILIUM_BUILD_TAGS, "-ldflags", ldflags),
            wrapper=_wrapper,
            # A list, as the stamps of existing caches were made with.
            digest_inputs=(_CILIUM_RECIPE, version, ldflags, CILIUM_BUILD_TAGS, list(packages)),
            reads_module=True,
        ),
        image=cilium_image,
        image_name="cilium",
        rootfs=_ROOTFS,
        needs_helm=True,
        kernel_wireguard=True,
        source_prefix=CILIUM_SOURCE,
        artefact_prefix="cilium/",
        recipe="cilium",
        build_minutes=10,
    )


CILIUM_OFFLINE = cilium_offline("v" + VERSION)
"""Cilium's offline recipe: the pinned release, built from its Go module."""
IMAGE = CniImage(
    CILIUM_OFFLINE.image_name,
    public="",
    offline=f"localhost/cnibench-cilium:{CILIUM_OFFLINE.version}-offline-1",
)
"""Cilium's agent, operator and init image: none in the public set (the chart's own images),
the offline build (:data:`CILIUM_OFFLINE`) in the offline set. When ``images`` has one (or
``CNIBENCH_IMAGE_CILIUM`` sets one), the chart is installed with it as every Cilium image and
without Envoy."""


CILIUM_POLICY_MAP = ConfigLimit(
    namespace="kube-system",
    config_map="cilium-config",
    key="bpf-policy-map-max",
    default=16384,
    counts="entries in each endpoint's policy map (one or more per rule)",
    takes=(1 << 8, 1 << 16),
)
"""Cilium's per-endpoint policy map: one entry per allowed (identity, protocol, port prefix),
so a rule of one peer and one port range aligned to its size (cnibench's non-matching rules:
8 ports from a multiple of 8) takes one entry. 16384 by default (Cilium's eBPF maps table);
the agent takes 256 to 65536 and raises or lowers a value outside to the nearest."""


class CiliumDriver(DriverBase):
    """Cilium's driver (see the module docstring for its options).

    Parameters
    ----------
    chart_dir:
        Version -> local chart directory, used with the offline image set
        (:func:`module_chart_dir` by default).
    lacks_sys_resource:
        Whether containers may not ask for ``CAP_SYS_RESOURCE``, asked with the offline
        image set only (:func:`host_lacks_sys_resource` by default: the offline set runs on
        this host's kind, while a remote cluster's nodes are not this host).
    """

    name = "cilium"
    version = VERSION
    related_versions: Mapping[str, str] = MappingProxyType(
        {"cilium-gateway-api": GATEWAY_API_VERSION}
    )
    own_images = (IMAGE,)
    offline = CILIUM_OFFLINE
    cluster_scoped_kinds = (
        ("cilium.io/v2", "CiliumEgressGatewayPolicy"),
        ("cilium.io/v2", "CiliumClusterwideNetworkPolicy"),
    )

    def __init__(
        self,
        *,
        chart_dir: Callable[[str], Path] = module_chart_dir,
        lacks_sys_resource: Callable[[], bool] = host_lacks_sys_resource,
    ) -> None:
        self._chart_dir = chart_dir
        self._lacks_sys_resource = lacks_sys_resource

    def service_proxy(self, options: Mapping[str, str]) -> str:
        """Cilium's eBPF kube-proxy replacement in ``mode=kpr`` (the default), else kube-proxy
        in the mode the ``kube-proxy`` option names."""
        if options.get("mode", "kpr") == "kpr":
            return "cilium eBPF"
        return f"kube-proxy {options.get('kube-proxy', 'iptables')}"

    def datapath_settings(self, values: Mapping[str, Any]) -> dict[str, str]:
        """What the chart ``values`` ask of the data path: ``"kube-proxy replacement"``
        (``"true"``/``"false"``), ``"masquerade"`` (``"bpf"``, or ``"iptables"``, Cilium's
        default implementation) and ``"egress gateway"`` (``"on"``/``"off"``); each only
        when the values set it."""
        asked: dict[str, str] = {}
        kpr = values.get("kubeProxyReplacement")
        if isinstance(kpr, bool):
            asked["kube-proxy replacement"] = "true" if kpr else "false"
        bpf = values.get("bpf")
        if isinstance(bpf, Mapping) and isinstance(bpf.get("masquerade"), bool):
            asked["masquerade"] = "bpf" if bpf["masquerade"] else "iptables"
        egress = values.get("egressGateway")
        if isinstance(egress, Mapping) and isinstance(egress.get("enabled"), bool):
            asked["egress gateway"] = "on" if egress["enabled"] else "off"
        return asked

    def datapath_status(self, access: AgentAccess) -> dict[str, str]:
        """``cilium-dbg status`` in the agent of every node (:func:`parse_cilium_datapath`),
        with ``"service proxy"`` ``"cilium eBPF"`` where the agents replace kube-proxy. A
        setting the agents report differently is recorded as each node's value
        (``"bpf (node-a), legacy (node-b)"``), which equals no single value."""
        outputs = access.exec_in_agents(
            "kube-system", "k8s-app=cilium", "cilium-agent", ["cilium-dbg", "status"]
        )
        per_node = {node: parse_cilium_datapath(output) for node, output in outputs}
        settings: dict[str, str] = {}
        for key in sorted({key for reported in per_node.values() for key in reported}):
            seen = {node: reported.get(key, "unreported") for node, reported in per_node.items()}
            values = set(seen.values())
            settings[key] = (
                values.pop()
                if len(values) == 1
                else ", ".join(f"{value} ({node})" for node, value in sorted(seen.items()))
            )
        if settings.get("kube-proxy replacement") == "true":
            settings["service proxy"] = self.service_proxy({"mode": "kpr"})
        return settings

    def definition(
        self,
        spec: ClusterSpec,
        *,
        versions: CniVersions,
        images: Images,
        k8s_service_host: str = "",
    ) -> CniDefinition:
        """Chart, capabilities (policy and WireGuard always; egress gateway, L7 policy and
        traffic splitting with their features) and readiness (agent, operator, and Envoy
        when a feature needs it). With an image of Cilium's own (:data:`IMAGE` as ``images``
        has it: the offline set's, or an override) the chart comes from the Go module and
        there is no Envoy.

        Raises
        ------
        cnibench.errors.ConfigError
            An unknown mode, feature or option, or a feature the mode cannot have.
        """
        check_options(spec, frozenset({"mode", "features"}))
        version = versions.version(self.name, self.version)
        mode = spec.options.get("mode", "kpr")
        if mode not in CILIUM_MODES:
            raise ConfigError(f"unknown cilium mode {mode!r}: choose {', '.join(CILIUM_MODES)}")
        # The offline set is the one place Cilium's own image is set by default.
        own_image = images.cni_image(IMAGE)
        features = _features(spec, mode, envoy=not own_image)
        caps = {Capability.NETWORK_POLICY, Capability.WIREGUARD}
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
            name=self.name,
            version=version,
            capabilities=frozenset(caps),
            readiness=tuple(readiness),
            chart=HelmChart(
                repo="https://helm.cilium.io",
                chart="cilium",
                version=version,
                release="cilium",
                namespace="kube-system",
                values=cilium_values(
                    mode=mode,
                    features=features,
                    wireguard=spec.encryption == "wireguard",
                    k8s_service_host=k8s_service_host,
                    image=own_image,
                    drop_sys_resource=bool(own_image) and self._lacks_sys_resource(),
                ),
                path=str(self._chart_dir(version)) if own_image else "",
            ),
            replaces_kube_proxy=mode == "kpr",
            gateway_class="cilium" if "gateway-api" in features else "",
            encryption=spec.encryption,
            gateway_api_crds=(
                versions.version("cilium-gateway-api", GATEWAY_API_VERSION)
                if "gateway-api" in features
                else ""
            ),
            capability_hints=_feature_hints(features, mode, envoy=not own_image),
            agent=Agent("cilium-agent", "kube-system", "k8s-app=cilium"),
            policy_limit=CILIUM_POLICY_MAP,
        )

    def egress_objects(
        self,
        scope: ObjectScope,
        *,
        clients: Sequence[str],
        destination: str,
        egress_ip_range: tuple[str, str] | None,
    ) -> list[dict[str, Any]]:
        """One CiliumEgressGatewayPolicy limited to ``destination``; with no ``egressIP``,
        Cilium SNATs to the gateway node's address (the default :meth:`egress_source`)."""
        return [
            cilium_egress_gateway_policy(
                f"cnibench-egress-{scope.session}",
                session=scope.session,
                namespace=scope.namespace,
                clients=clients,
                destinations=[destination],
                gateway_node=scope.gateway_node,
            )
        ]

    def priority_objects(
        self, scope: ObjectScope, spec: PolicySpec, case: PriorityCase
    ) -> list[dict[str, Any]]:
        """One CiliumNetworkPolicy per layer. Cilium has neither tiers nor priorities (a deny
        always wins), so a case needing tiers is refused by the cluster before it gets here
        (the definition declares no :attr:`Capability.POLICY_TIERS`)."""
        return [
            cilium_network_policy(
                spec,
                name=f"cnibench-prio-{index}",
                namespace=scope.namespace,
                session=scope.session,
                action=layer.action.value,
            )
            for index, layer in enumerate(case.layers)
        ]

    def l7_policy(
        self, scope: ObjectScope, *, name: str, target: str, port: int, method: str, path: str
    ) -> dict[str, Any]:
        """A CiliumNetworkPolicy with an HTTP rule (Envoy answers 403 to other requests)."""
        return cilium_l7_policy(
            name,
            namespace=scope.namespace,
            session=scope.session,
            target=target,
            port=port,
            method=method,
            path=path,
        )

    def encryption_status(self, access: AgentAccess) -> EncryptionStatus:
        """``cilium-dbg status`` in the agent of every node: on when every agent reports
        WireGuard (:func:`parse_cilium_encryption`)."""
        outputs = access.exec_in_agents(
            "kube-system", "k8s-app=cilium", "cilium-agent", ["cilium-dbg", "status"]
        )
        interfaces: dict[str, str] = {}
        peers: dict[str, int] = {}
        enabled = bool(outputs)
        for node, output in outputs:
            on, interface, count = parse_cilium_encryption(output)
            enabled = enabled and on
            if on:
                interfaces[node] = interface
                peers[node] = count
        return EncryptionStatus(
            enabled=enabled,
            kind="wireguard" if enabled else "",
            interfaces=interfaces,
            peers=peers,
            detail="\n".join(f"{node}: {output.strip()}" for node, output in outputs),
        )


CILIUM = CiliumDriver()
"""The driver registered in :data:`cnibench.backends.kube.cnis.DRIVERS`."""
