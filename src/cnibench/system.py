"""System tools cnibench drives, the Debian packages that provide them, and their installation.

``python -m cnibench.system --install`` installs what is missing with apt when running as root
(what ``nox -s tests`` does first; ``nox -s demo`` asks ``--for lab``: only what the lab backend
runs, not the test tiers' browser, compiler or container engine) and names what it could not
install. The
same table feeds ``cnibench doctor``. The measurement tools' entries come from their own
declarations (:data:`cnibench.tools.registry.TOOLS`); the rest are the host tools of the lab, its
servers and the test tiers.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass

from cnibench.tools import TOOLS

__all__ = ["PURPOSES", "SYSTEM_TOOLS", "SystemTool", "install_missing", "missing_tools"]

PURPOSES = ("lab", "tests", "kind")
"""What a tool is installed for: ``lab`` (the embedded backend and the demo), ``tests`` (the
test tiers' own tools), ``kind`` (the private engine and the offline image builds)."""


@dataclass(frozen=True)
class SystemTool:
    """An executable cnibench runs, and where it comes from.

    Attributes
    ----------
    binary:
        Executable name looked up on ``PATH`` (or an absolute path).
    package:
        Debian package that provides it.
    purpose:
        What cnibench uses it for (shown by ``cnibench doctor``).
    needed_for:
        Which of :data:`PURPOSES` it is installed for (``lab``: also by the demo).
    """

    binary: str
    package: str
    purpose: str
    needed_for: str = "lab"

    def __post_init__(self) -> None:
        if self.needed_for not in PURPOSES:
            raise ValueError(f"needed_for must be one of {PURPOSES}, not {self.needed_for!r}")


SYSTEM_TOOLS: tuple[SystemTool, ...] = (
    SystemTool("ip", "iproute2", "lab: namespaces, veth, bridge, vxlan, routes"),
    SystemTool("sysctl", "procps", "lab: forwarding and reverse-path filters in namespaces"),
    SystemTool("nft", "nftables", "lab: masquerade, egress SNAT, policy engines nftables/-set"),
    SystemTool("iptables", "iptables", "lab: policy engine iptables"),
    SystemTool("conntrack", "conntrack", "lab: flush connection tracking between runs"),
    SystemTool("tcpdump", "tcpdump", "lab: capture on the underlay (WireGuard verification)"),
    SystemTool("ethtool", "ethtool", "lab: napi=threaded (GRO and TSO of the underlay veths)"),
    SystemTool("wg", "wireguard-tools", "lab: WireGuard configuration"),
    SystemTool("wireguard-go", "wireguard-go", "lab: WireGuard without the kernel module"),
    # The measurement tools, as registered when this module was imported.
    *(SystemTool(tool.binary, tool.package, tool.purpose) for tool in TOOLS.values()),
    SystemTool(
        "hey", "hey", "tests: HTTP load, reference for the locust runner benchmark", "tests"
    ),
    SystemTool("nginx", "nginx-light", "HTTP servers, echo backends, weighted split proxy"),
    SystemTool("haproxy", "haproxy", "L7 policy proxy"),
    SystemTool("prometheus", "prometheus", "metrics store"),
    SystemTool("prometheus-node-exporter", "prometheus-node-exporter", "per-node metrics"),
    SystemTool("chromium", "chromium", "tests: render the HTML report headless", "tests"),
    SystemTool("zsh", "zsh", "tests: check the zsh completion script", "tests"),
    SystemTool(
        "/usr/lib/cni/host-local",
        "containernetworking-plugins",
        "tests: flannel's CNI config read by the reference CNI plugins",
        "tests",
    ),
    SystemTool(
        "dockerd", "docker.io", "kind: the private container engine (cnibench engine up)", "kind"
    ),
    SystemTool("containerd", "containerd", "kind: the private engine's runtime", "kind"),
    SystemTool("runc", "runc", "kind: the private engine's OCI runtime", "kind"),
    SystemTool("mmdebstrap", "mmdebstrap", "kind: root filesystems of the offline images", "kind"),
    SystemTool("gcc", "gcc", "kind: the static pause binary of the offline images", "kind"),
)
"""Every executable cnibench or its tests run, with its package: the lab's host tools, each
measurement tool of :data:`cnibench.tools.registry.TOOLS` registered by the time this module is
imported (the built-in ones), then servers, monitoring and the test tiers' tools."""


def _present(tool: SystemTool) -> bool:
    return shutil.which(tool.binary) is not None


def missing_tools(purpose: str = "") -> list[SystemTool]:
    """Tools from :data:`SYSTEM_TOOLS` that are not on ``PATH`` (only those needed for
    ``purpose``, one of :data:`PURPOSES`, when given)."""
    return [
        tool
        for tool in SYSTEM_TOOLS
        if not _present(tool) and (not purpose or tool.needed_for == purpose)
    ]


def install_missing(*, quiet: bool = False, purpose: str = "") -> list[SystemTool]:
    """Install missing tools (those for ``purpose`` only, when given) with apt when root;
    return what is still missing afterwards."""
    missing = missing_tools(purpose)
    if not missing:
        return []
    if os.geteuid() != 0 or shutil.which("apt-get") is None:
        return missing
    packages = sorted({tool.package for tool in missing} | {"libiperf0"})
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    out = subprocess.DEVNULL if quiet else None
    subprocess.run(["apt-get", "update", "-q"], check=False, env=env, stdout=out)
    subprocess.run(
        ["apt-get", "install", "-y", "-q", "--no-install-recommends", *packages],
        check=False,
        env=env,
        stdout=out,
    )
    return missing_tools(purpose)


def main(argv: list[str] | None = None) -> int:
    """Command line: report (and with ``--install`` install) missing system tools."""
    parser = argparse.ArgumentParser(prog="python -m cnibench.system")
    parser.add_argument("--install", action="store_true", help="apt-get install what is missing")
    parser.add_argument(
        "--for",
        dest="purpose",
        choices=PURPOSES,
        default="",
        help="only the tools needed for this (lab: the embedded backend and the demo;"
        " default: everything, the test tiers included)",
    )
    args = parser.parse_args(argv)
    purpose = args.purpose
    still_missing = install_missing(purpose=purpose) if args.install else missing_tools(purpose)
    for tool in still_missing:
        print(f"missing: {tool.binary} (Debian package {tool.package}) needed for {tool.purpose}")
    if not still_missing:
        print("system tools: all present")
    return 0


if __name__ == "__main__":
    sys.exit(main())
