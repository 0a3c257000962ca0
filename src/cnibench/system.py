"""System tools cnibench drives, the Debian packages that provide them, and their installation.

``python -m cnibench.system --install`` installs what is missing with apt when running as root
(what ``nox -s tests`` does first; ``nox -s demo`` asks ``--for lab``: only what the lab backend
runs, not the test tiers' browser, compiler or container engine), prints what it installed and
names what it could not install. The install (:func:`apt_install`) takes no recommends, enables
and starts no service and leaves the iptables alternatives as it found them. The
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
from pathlib import Path

from cnibench.tools import TOOLS

__all__ = [
    "PURPOSES",
    "SYSTEM_TOOLS",
    "Alternative",
    "AptOutcome",
    "SystemTool",
    "apt_install",
    "install_missing",
    "missing_tools",
]

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


POLICY_RC_D = Path("usr/sbin/policy-rc.d")
"""Debian's hook that ``invoke-rc.d`` and ``deb-systemd-invoke`` ask before starting a service
(policy-rc.d(8)); exit 101 is "not allowed". Relative to the root the install works on."""

POLICY_RC_D_DENY = (
    "#!/bin/sh\n# cnibench.system: no service starts during its apt-get install\nexit 101\n"
)

UNIT_LINKS = Path("etc/systemd/system")
"""Where enabling a unit leaves its symlinks (``*.wants/``, ``*.requires/``)."""

ALTERNATIVES = ("iptables", "ip6tables")
"""Link groups the install must leave as it found them: installing ``iptables`` runs
``update-alternatives`` for them."""


@dataclass(frozen=True)
class Alternative:
    """One link group's state, as ``update-alternatives --query`` prints it.

    Attributes
    ----------
    status:
        ``auto`` (the highest priority wins) or ``manual`` (chosen by someone).
    value:
        The path the link points to (``/usr/sbin/iptables-nft``).
    """

    status: str
    value: str


def parse_alternative(query: str) -> Alternative | None:
    """The ``Status:`` and ``Value:`` of ``update-alternatives --query NAME``'s output (None
    when it has no value: the group has no alternative left)."""
    # Only the header's unindented fields: the alternatives' own blocks follow, each with its
    # own unindented "Alternative:" and "Priority:", never a "Status:" or "Value:".
    fields = dict(
        line.split(": ", 1) for line in query.splitlines() if ": " in line and line[0] != " "
    )
    value = fields.get("Value", "").strip()
    if not value or value == "none":
        return None
    return Alternative(fields.get("Status", "auto").strip(), value)


def alternatives_to_restore(
    before: dict[str, Alternative | None], after: dict[str, Alternative | None]
) -> list[list[str]]:
    """``update-alternatives`` commands that put back each group ``before`` had and the
    install changed. A group that did not exist before is left as the install made it (there
    is nothing to go back to)."""
    commands = []
    for name, was in before.items():
        if was is None or after.get(name) == was:
            continue
        if was.status == "manual":
            commands.append(["update-alternatives", "--set", name, was.value])
        else:
            commands.append(["update-alternatives", "--auto", name])
    return commands


def _query_alternatives() -> dict[str, Alternative | None]:
    if shutil.which("update-alternatives") is None:
        return dict.fromkeys(ALTERNATIVES)
    states: dict[str, Alternative | None] = {}
    for name in ALTERNATIVES:
        query = subprocess.run(
            ["update-alternatives", "--query", name], capture_output=True, text=True, check=False
        )
        states[name] = parse_alternative(query.stdout) if query.returncode == 0 else None
    return states


def unit_links(root: Path) -> set[Path]:
    """The symlinks that enable units under ``root`` (``etc/systemd/system/*.wants/*`` and
    ``*.requires/*``)."""
    base = root / UNIT_LINKS
    return {
        link
        for pattern in ("*.wants/*", "*.requires/*")
        for link in base.glob(pattern)
        if link.is_symlink()
    }


def _installed_packages() -> set[str]:
    if shutil.which("dpkg-query") is None:
        return set()
    listing = subprocess.run(
        ["dpkg-query", "-W", "-f", "${db:Status-Abbrev} ${Package}\n"],
        capture_output=True,
        text=True,
        check=False,
    )
    return {line.split()[-1] for line in listing.stdout.splitlines() if line.startswith("ii ")}


@dataclass(frozen=True)
class AptOutcome:
    """What :func:`apt_install` did.

    Attributes
    ----------
    installed:
        Packages installed that were not before (the ones asked for and their dependencies).
    disabled:
        Units the install enabled, disabled again (started none: policy-rc.d).
    restored:
        The ``update-alternatives`` commands that put a link group back.
    """

    installed: tuple[str, ...]
    disabled: tuple[str, ...]
    restored: tuple[tuple[str, ...], ...]


def apt_install(packages: list[str], *, root: Path = Path("/"), quiet: bool = False) -> AptOutcome:
    """``apt-get install --no-install-recommends packages`` that leaves the machine's services
    and iptables as it found them.

    During the install a ``policy-rc.d`` that answers 101 keeps every service from starting
    (one already there is used as it is, never replaced; ours is removed afterwards, also when
    the install fails); the units the install enabled are disabled again (``systemctl
    disable``, or their symlinks removed where there is no systemctl); and the ``iptables`` and
    ``ip6tables`` alternatives, read before, are set back if the install changed them.
    cnibench starts nginx, haproxy, Prometheus and node-exporter as processes of its own in the
    lab's namespaces, never as the system's services, so it needs none enabled.

    Parameters
    ----------
    packages:
        Debian package names.
    root:
        The file-system root the install works on (``/``): where ``usr/sbin/policy-rc.d`` and
        ``etc/systemd/system`` are. The commands are found on ``PATH``: the unit tests point
        ``root`` at a temporary directory and ``PATH`` at stand-ins that record their calls.
    quiet:
        Hide apt's output.
    """
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    out = subprocess.DEVNULL if quiet else None
    packages_before = _installed_packages()
    links_before = unit_links(root)
    alternatives_before = _query_alternatives()
    policy = root / POLICY_RC_D
    ours = False
    if not policy.exists() and not policy.is_symlink():
        policy.parent.mkdir(parents=True, exist_ok=True)
        policy.write_text(POLICY_RC_D_DENY)
        policy.chmod(0o755)
        ours = True
    try:
        subprocess.run(["apt-get", "update", "-q"], check=False, env=env, stdout=out)
        subprocess.run(
            ["apt-get", "install", "-y", "-q", "--no-install-recommends", *packages],
            check=False,
            env=env,
            stdout=out,
        )
    finally:
        if ours:
            policy.unlink(missing_ok=True)
    new_links = sorted(unit_links(root) - links_before)
    units = sorted({link.name for link in new_links})
    if units and shutil.which("systemctl") is not None:
        # --root: only the unit files, the running manager is not asked (a chroot has none).
        subprocess.run(
            ["systemctl", f"--root={root}", "disable", *units],
            check=False,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
    for link in new_links:  # what systemctl left, or all where there is none
        if link.is_symlink():
            link.unlink()
    restored = alternatives_to_restore(alternatives_before, _query_alternatives())
    for command in restored:
        subprocess.run(command, check=False, stdout=subprocess.DEVNULL)
    installed = tuple(sorted(_installed_packages() - packages_before))
    return AptOutcome(installed, tuple(units), tuple(tuple(c) for c in restored))


def install_missing(*, quiet: bool = False, purpose: str = "") -> list[SystemTool]:
    """Install missing tools (those for ``purpose`` only, when given) with apt when root
    (:func:`apt_install`: no service enabled or started, iptables' alternatives kept), saying
    what it installed; return what is still missing afterwards."""
    missing = missing_tools(purpose)
    if not missing:
        return []
    if os.geteuid() != 0 or shutil.which("apt-get") is None:
        return missing
    packages = sorted({tool.package for tool in missing} | {"libiperf0"})
    outcome = apt_install(packages, quiet=quiet)
    print(_describe(outcome), flush=True)
    return missing_tools(purpose)


def _describe(outcome: AptOutcome) -> str:
    lines = [
        f"apt installed {len(outcome.installed)} packages: {' '.join(outcome.installed) or '-'}"
    ]
    if outcome.disabled:
        lines.append(f"disabled again (enabled by the install): {' '.join(outcome.disabled)}")
    lines.extend(f"set back: {' '.join(command)}" for command in outcome.restored)
    return "\n".join(lines)


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
