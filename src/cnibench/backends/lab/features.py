"""What this host offers the lab: kernel features, tools and their versions (``cnibench doctor``).

Kernel features are probed by trying them in a network namespace (creating a WireGuard link, a
netem qdisc, ...), because module files and config flags do not say whether the running kernel
accepts them. Tool versions are parsed from each tool's own version output by small pure
functions and cached per process. The measurement tools' probes and doctor rows come from their
declarations in :data:`cnibench.tools.registry.TOOLS`, so a registered tool is listed and its
version recorded with nothing added here.
"""

from __future__ import annotations

import functools
import os
import re
import shutil
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType

from cnibench.backends.lab.plan import Step, new_lab_id, validate_lab_id
from cnibench.backends.lab.runner import run_step
from cnibench.errors import ParseError, ProvisioningError
from cnibench.tools.registry import TOOLS, VERSION_NUMBER, VersionProbe

__all__ = [
    "REQUIRED_BINARIES",
    "FeatureCheck",
    "LabFeatures",
    "check_available",
    "doctor_rows",
    "parse_tool_version",
    "probe_features",
    "tool_versions",
    "version_probes",
]

REQUIRED_BINARIES: tuple[str, ...] = (
    "ip",
    "bridge",
    "sysctl",
    "nft",
    "prometheus",
    "prometheus-node-exporter",
)
"""Executables without which no lab can be provisioned."""

_VERSION = VERSION_NUMBER

_HOST_PROBES: Mapping[str, VersionProbe] = MappingProxyType(
    {
        "iproute2": VersionProbe("ip", ("-V",), r"iproute2-(?:ss)?(\d+(?:\.\d+)*)"),
        "nftables": VersionProbe("nft", ("--version",), rf"nftables v{_VERSION}"),
        "tcpdump": VersionProbe("tcpdump", ("--version",), rf"tcpdump version {_VERSION}"),
        "wireguard-tools": VersionProbe("wg", ("--version",), rf"wireguard-tools v{_VERSION}"),
        "wireguard-go": VersionProbe("wireguard-go", ("--version",), rf"wireguard-go v{_VERSION}"),
    }
)
"""The lab's own host tools (before the measurement tools in :func:`version_probes`)."""

_SERVER_PROBES: Mapping[str, VersionProbe] = MappingProxyType(
    {
        "nginx": VersionProbe("nginx", ("-v",), rf"nginx/{_VERSION}"),
        "haproxy": VersionProbe("haproxy", ("-v",), rf"HAProxy version {_VERSION}"),
        "prometheus": VersionProbe(
            "prometheus", ("--version",), rf"prometheus, version {_VERSION}"
        ),
        "node-exporter": VersionProbe(
            "prometheus-node-exporter", ("--version",), rf"node_exporter, version {_VERSION}"
        ),
    }
)
"""Servers and monitoring (after the measurement tools in :func:`version_probes`)."""


def version_probes() -> Mapping[str, VersionProbe]:
    """Tool name to its version probe: the lab's host tools, every registered measurement tool
    (:data:`cnibench.tools.registry.TOOLS`, read now) and the servers; the names are the keys
    of :func:`tool_versions`."""
    measurement = {name: tool.version for name, tool in TOOLS.items()}
    return MappingProxyType({**_HOST_PROBES, **measurement, **_SERVER_PROBES})


def parse_tool_version(tool: str, text: str) -> str:
    """The version number in ``tool``'s version output ``text`` (e.g. ``"3.12"`` for iperf3).

    Raises
    ------
    ParseError
        If ``tool`` is unknown or ``text`` holds no version.
    """
    probe = version_probes().get(tool)
    if probe is None:
        raise ParseError(f"no version probe for tool {tool!r}", tool=tool)
    return _version_in(tool, probe, text)


def _version_in(tool: str, probe: VersionProbe, text: str) -> str:
    match = re.search(probe.pattern, text)
    if match is None:
        raise ParseError(f"no {tool} version in {text[:80]!r}", tool=tool, output=text)
    return match.group(1)


@functools.cache
def _installed_version(tool: str, probe: VersionProbe) -> str | None:
    # Keyed by the probe too: a tool registered later, or under a known name with another
    # probe, is asked anew.
    if shutil.which(probe.binary) is None:
        return None
    try:
        completed = subprocess.run(
            [probe.binary, *probe.argv], capture_output=True, text=True, timeout=10, check=False
        )
        return _version_in(tool, probe, completed.stdout + completed.stderr)
    except (OSError, subprocess.TimeoutExpired, ParseError):
        return "unknown"


def tool_versions() -> dict[str, str]:
    """Version of every installed tool of :func:`version_probes` (each asked once per process).

    Missing tools are left out; a tool whose output cannot be parsed maps to ``"unknown"``.
    """
    versions = {tool: _installed_version(tool, probe) for tool, probe in version_probes().items()}
    return {tool: version for tool, version in versions.items() if version is not None}


@dataclass(frozen=True)
class LabFeatures:
    """Kernel datapath features the lab adapts to.

    Attributes
    ----------
    kernel_wireguard:
        The kernel creates ``wireguard`` links.
    wireguard_go:
        wireguard-go, ``wg`` and ``/dev/net/tun`` are usable (userspace WireGuard over TUN).
    netem:
        The kernel accepts a ``netem`` qdisc (latency emulation).
    """

    kernel_wireguard: bool
    wireguard_go: bool
    netem: bool

    @property
    def wireguard(self) -> bool:
        """Whether WireGuard tunnels can be built at all (``wg`` is needed either way)."""
        has_wg = shutil.which("wg") is not None
        return has_wg and (self.kernel_wireguard or self.wireguard_go)


def _tries(step: Step) -> tuple[bool, str]:
    try:
        run_step(step, timeout=10)
    except ProvisioningError as exc:
        # Keep what the command said, not the command line.
        return False, str(exc).rsplit("`: ", 1)[-1]
    return True, ""


def _tun_usable() -> bool:
    try:
        fd = os.open("/dev/net/tun", os.O_RDWR)
    except OSError:
        return False
    os.close(fd)
    return True


def _wireguard_go_usable() -> tuple[bool, str]:
    missing = [b for b in ("wireguard-go", "wg") if shutil.which(b) is None]
    if missing:
        return False, f"missing {', '.join(missing)} (Debian wireguard-go, wireguard-tools)"
    if not _tun_usable():
        return False, "/dev/net/tun cannot be opened"
    return True, "userspace WireGuard over TUN"


def _probe_kernel_wireguard(namespace: str) -> tuple[bool, str]:
    ok, why = _tries(
        Step(
            "create a kernel WireGuard link",
            ("ip", "-n", namespace, "link", "add", "probewg0", "type", "wireguard"),
        )
    )
    if ok:
        run_step(Step("delete the probe link", ("ip", "-n", namespace, "link", "del", "probewg0")))
    return ok, why


def _probe_netem(namespace: str) -> tuple[bool, str]:
    if shutil.which("tc") is None:
        return False, "tc (iproute2) is missing"
    ok, why = _tries(
        Step(
            "add a netem qdisc",
            (
                "ip",
                "netns",
                "exec",
                namespace,
                "tc",
                "qdisc",
                "add",
                "dev",
                "lo",
                "root",
                "netem",
                "delay",
                "1ms",
            ),
        )
    )
    if ok:
        run_step(
            Step(
                "delete the probe qdisc",
                ("ip", "netns", "exec", namespace, "tc", "qdisc", "del", "dev", "lo", "root"),
            )
        )
    return ok, why


def probe_features(namespace: str) -> LabFeatures:
    """Probe WireGuard and netem support inside existing namespace ``namespace``.

    The probes leave nothing behind in the namespace.
    """
    kernel_wg, _ = _probe_kernel_wireguard(namespace)
    wg_go, _ = _wireguard_go_usable()
    netem, _ = _probe_netem(namespace)
    return LabFeatures(kernel_wireguard=kernel_wg, wireguard_go=wg_go, netem=netem)


@dataclass(frozen=True)
class FeatureCheck:
    """One row of ``cnibench doctor``.

    Attributes
    ----------
    feature:
        What was checked (``"vxlan"``, ``"wireguard-go"``, ``"iperf3"``).
    usable:
        Whether the lab can use it here.
    reason:
        Version found, or why it is not usable.
    """

    feature: str
    usable: bool
    reason: str


def check_available() -> tuple[bool, str]:
    """Whether labs can be provisioned here: root, ``ip netns`` and the required executables.

    Returns
    -------
    tuple of (bool, str)
        Usable, and the reason when not (``"ok"`` otherwise).
    """
    if os.geteuid() != 0:
        return False, "the lab backend needs root (network namespaces, links, nftables)"
    missing = [binary for binary in REQUIRED_BINARIES if shutil.which(binary) is None]
    if missing:
        return False, f"missing executables: {', '.join(missing)}"
    try:
        completed = subprocess.run(
            ["ip", "netns", "list"], capture_output=True, text=True, timeout=10, check=False
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return False, f"`ip netns list` failed: {exc}"
    if completed.returncode != 0:
        return False, f"`ip netns list` failed: {completed.stderr.strip()}"
    return True, "ok"


def _binary_row(tool: str, probe: VersionProbe) -> FeatureCheck:
    version = _installed_version(tool, probe)
    if version is None:
        return FeatureCheck(tool, False, f"{probe.binary} not found on PATH")
    return FeatureCheck(tool, True, f"{tool} {version}")


def doctor_rows() -> list[FeatureCheck]:
    """Check every kernel feature and tool the lab uses.

    Kernel features are tried in a scratch namespace ``cb<id>-doctor`` that is deleted
    afterwards (its name matches what ``cnibench clean`` removes, should this be interrupted).

    Returns
    -------
    list of FeatureCheck
        Rows for netns, veth, bridge, vxlan, nftables, wireguard-kernel, wireguard-go, netem,
        then the tools: tcpdump, prometheus, node-exporter, every registered measurement tool
        (iperf3, sockperf, wrk, ab, curl, ...), nginx and haproxy.
    """
    if os.geteuid() == 0:
        kernel = _kernel_rows()
    else:
        kernel = [FeatureCheck(name, False, "needs root") for name in _KERNEL_FEATURES]
    wg_go, why = _wireguard_go_usable()
    rows = [row for row in kernel if row.feature != "netem"]
    rows.append(FeatureCheck("wireguard-go", wg_go, why))
    rows += [row for row in kernel if row.feature == "netem"]
    probes = version_probes()
    for tool in ("tcpdump", "prometheus", "node-exporter", *TOOLS, "nginx", "haproxy"):
        rows.append(_binary_row(tool, probes[tool]))
    return rows


_KERNEL_FEATURES = ("netns", "veth", "bridge", "vxlan", "nftables", "wireguard-kernel", "netem")


def _kernel_rows() -> list[FeatureCheck]:
    scratch = f"{validate_lab_id(new_lab_id())}-doctor"
    ok, why = _tries(Step("create a network namespace", ("ip", "netns", "add", scratch)))
    if not ok:
        return [FeatureCheck("netns", False, why)] + [
            FeatureCheck(name, False, "no network namespace") for name in _KERNEL_FEATURES[1:]
        ]
    try:
        rows = [FeatureCheck("netns", True, "ip netns works")]
        link_probes = {
            "veth": ("probev0", "type", "veth", "peer", "name", "probev1"),
            "bridge": ("probebr0", "type", "bridge"),
            "vxlan": ("probevx0", "type", "vxlan", "id", "42", "dstport", "4789"),
        }
        for name, args in link_probes.items():
            ok, why = _tries(
                Step(f"create a {name} link", ("ip", "-n", scratch, "link", "add", *args))
            )
            rows.append(FeatureCheck(name, ok, "kernel accepts it" if ok else why))
        ok, why = _tries(
            Step(
                "load a masquerade ruleset",
                ("ip", "netns", "exec", scratch, "nft", "-f", "-"),
                "table ip probe {\n chain post {\n  type nat hook postrouting priority srcnat;\n"
                "  ip saddr 198.19.0.0/16 masquerade\n }\n set s { type ipv4_addr; }\n}\n",
            )
        )
        rows.append(FeatureCheck("nftables", ok, "nat, masquerade and sets work" if ok else why))
        ok, why = _probe_kernel_wireguard(scratch)
        rows.append(
            FeatureCheck(
                "wireguard-kernel", ok, "kernel module present" if ok else f"absent ({why})"
            )
        )
        ok, why = _probe_netem(scratch)
        rows.append(
            FeatureCheck(
                "netem",
                ok,
                "sch_netem present" if ok else f"absent, latency emulation skipped ({why})",
            )
        )
        return rows
    finally:
        _tries(Step("delete the scratch namespace", ("ip", "netns", "del", scratch)))
