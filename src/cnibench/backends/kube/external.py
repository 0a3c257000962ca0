"""The host outside a Kubernetes cluster: the egress target and where split load starts.

For kind the external host is *this* host: kind's nodes are containers on the docker network
``kind``, whose gateway address belongs to this host, so a server bound to that address is
outside the cluster yet reachable from every pod (through the node's masquerade or the egress
gateway). :func:`network_from_document` reads that address (and the subnet, whose top
addresses serve as egress IPs, see :func:`top_of_subnet_range`) from the network as the engine
describes it: asked through the Docker SDK (:func:`inspect_docker_network`), or from ``podman
network inspect kind``, which the Docker SDK cannot ask where podman has no API socket.

AKS and existing clusters have no such host unless one is configured (KubeBackend option
``external_address`` or ``$CNIBENCH_EXTERNAL_ADDRESS``); without it
:attr:`KubeCluster.external <cnibench.backends.kube.cluster.KubeCluster.external>` raises
:class:`~cnibench.errors.UnsupportedError`, which the scenario runner reports as a skip.
"""

from __future__ import annotations

import ipaddress
import json
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from cnibench.backends.base import CommandResult, EgressServerResult
from cnibench.engine.api import EngineReads
from cnibench.errors import ConfigError, ParseError, ProvisioningError, ToolError
from cnibench.tools.iperf3_server import InProcessIperf3Server
from cnibench.tools.source_echo import SourceEchoServer, serve_in_thread

__all__ = [
    "EGRESS_IP_RANGE_ENV",
    "EXTERNAL_ADDRESS_ENV",
    "KIND_NETWORK",
    "DockerNetwork",
    "HostEgressServerFuture",
    "HostExternal",
    "docker_network_inspect_argv",
    "external_address_from",
    "inspect_docker_network",
    "load_balancer_range",
    "network_from_document",
    "parse_docker_network",
    "parse_ip_range",
    "ranges_overlap",
    "top_of_subnet_range",
]

KIND_NETWORK = "kind"
"""Docker network kind puts its node containers on."""
EXTERNAL_ADDRESS_ENV = "CNIBENCH_EXTERNAL_ADDRESS"
"""Environment variable overriding the external host's address."""
EGRESS_IP_RANGE_ENV = "CNIBENCH_EGRESS_IP_RANGE"
"""Environment variable giving the egress IP range (``first-last``) of a CNI whose egress
gateway SNATs to IPs of its own."""


@dataclass(frozen=True)
class DockerNetwork:
    """The IPv4 side of a docker network.

    Attributes
    ----------
    name:
        Network name.
    subnet:
        IPv4 subnet in CIDR notation (e.g. ``172.18.0.0/16``).
    gateway:
        The host's address on that network (the bridge's address).
    """

    name: str
    subnet: str
    gateway: str


def docker_network_inspect_argv(
    network: str = KIND_NETWORK, *, engine: str = "docker"
) -> list[str]:
    """``docker network inspect NETWORK`` (``engine`` may be ``podman``, same JSON shape); only
    podman's is run (:func:`inspect_docker_network`)."""
    return [engine, "network", "inspect", network]


def parse_docker_network(text: str) -> DockerNetwork:
    """The IPv4 subnet and gateway of ``docker network inspect`` output (or podman's, the same
    shape): a JSON array with one object per network, the first read by
    :func:`network_from_document`.

    Raises
    ------
    cnibench.errors.ParseError
        Not such JSON, or the network has no IPv4 subnet.
    """
    try:
        document = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ParseError(
            f"docker network inspect output is not JSON: {exc.msg}", tool="docker", output=text
        ) from exc
    networks = document if isinstance(document, list) else [document]
    if not networks or not isinstance(networks[0], dict):
        raise ParseError("docker network inspect printed no network", tool="docker", output=text)
    return network_from_document(networks[0], output=text)


def network_from_document(network: Mapping[str, Any], *, output: str = "") -> DockerNetwork:
    """The IPv4 subnet and gateway of one network as the engine describes it (``GET
    /networks/{name}``, one element of ``docker network inspect``).

    Its ``IPAM.Config`` lists one ``{"Subnet", "Gateway"}`` entry per address family (kind's
    network is dual-stack, the IPv6 entry usually first). When ``Gateway`` is absent, docker
    uses the subnet's first host address, and so does this function.

    Parameters
    ----------
    network:
        The network's document.
    output:
        The text it came from, kept on a :class:`~cnibench.errors.ParseError` (the
        document as JSON when empty).

    Raises
    ------
    cnibench.errors.ParseError
        The network has no IPv4 subnet, or its gateway is not IPv4.
    """
    text = output or json.dumps(network, default=str)
    name = str(network.get("Name", ""))
    ipam = network.get("IPAM") or {}
    for entry in ipam.get("Config") or []:
        if not isinstance(entry, dict):
            continue
        try:
            subnet = ipaddress.ip_network(str(entry.get("Subnet", "")), strict=False)
        except ValueError:
            continue
        if not isinstance(subnet, ipaddress.IPv4Network):
            continue
        gateway = str(entry.get("Gateway") or next(subnet.hosts()))
        try:
            ipaddress.IPv4Address(gateway)
        except ValueError as exc:
            raise ParseError(
                f"docker network {name}: gateway {gateway!r} is not IPv4",
                tool="docker",
                output=text,
            ) from exc
        return DockerNetwork(name=name, subnet=str(subnet), gateway=gateway)
    raise ParseError(f"docker network {name!r} has no IPv4 subnet", tool="docker", output=text)


def inspect_docker_network(
    network: str = KIND_NETWORK,
    *,
    engine: str = "docker",
    reads: EngineReads | None = None,
    runner: Callable[[Sequence[str]], str] | None = None,
) -> DockerNetwork:
    """The IPv4 side of ``network``: asked of a docker engine through the Docker SDK, of
    podman with ``podman network inspect``.

    Parameters
    ----------
    engine:
        ``"docker"`` or ``"podman"``. podman stays the CLI: rootless and CLI-only set-ups
        have no Docker API socket for the SDK to reach.
    reads:
        The docker engine to ask (that of ``$DOCKER_HOST`` by default).
    runner:
        Runs podman's argv and returns its stdout (``subprocess.run`` by default).

    Raises
    ------
    cnibench.errors.ProvisioningError
        The engine does not answer, the command fails or the network does not exist (one
        line).
    cnibench.errors.ParseError
        The network has no IPv4 subnet.
    """
    if engine == "docker":
        return network_from_document((reads or EngineReads()).network(network))
    argv = docker_network_inspect_argv(network, engine=engine)
    if runner is not None:
        return parse_docker_network(runner(argv))
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=30, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise ProvisioningError(f"{' '.join(argv)} failed: {exc}") from exc
    if done.returncode != 0:
        tail = (done.stderr.strip().splitlines() or ["no output"])[-1]
        raise ProvisioningError(f"{' '.join(argv)} failed: {tail}")
    return parse_docker_network(done.stdout)


def parse_ip_range(text: str) -> tuple[str, str]:
    """``"first-last"`` (IPv4, ``first <= last``) as a pair; a single address is its own range.

    Raises
    ------
    cnibench.errors.ConfigError
        Not two IPv4 addresses, or ``first > last``.
    """
    first_text, _, last_text = text.strip().partition("-")
    last_text = last_text or first_text
    try:
        first = ipaddress.IPv4Address(first_text.strip())
        last = ipaddress.IPv4Address(last_text.strip())
    except ValueError:
        raise ConfigError(f"egress IP range {text!r} is not FIRST-LAST of IPv4 addresses") from None
    if first > last:
        raise ConfigError(f"egress IP range {text!r} is empty (first > last)")
    return str(first), str(last)


def top_of_subnet_range(subnet: str, count: int = 4) -> tuple[str, str]:
    """The last ``count`` host addresses of ``subnet``, as ``(first, last)``.

    Docker hands out container addresses from the bottom of a network, so the top is free for
    egress IPs on a kind network.

    Raises
    ------
    cnibench.errors.ConfigError
        ``count < 1`` or the subnet has too few host addresses.
    """
    network = ipaddress.IPv4Network(subnet, strict=False)
    if count < 1 or network.num_addresses - 2 < count + 1:
        raise ConfigError(f"subnet {subnet} cannot spare {count} egress addresses")
    last = network.broadcast_address - 1
    return str(last - (count - 1)), str(last)


def load_balancer_range(subnet: str, *, count: int = 16, reserved_top: int = 4) -> tuple[str, str]:
    """``count`` host addresses of ``subnet`` just below its top ``reserved_top`` ones.

    On kind the top four addresses are the default egress IPs (:func:`top_of_subnet_range`), so
    MetalLB's pool sits right under them: still far from the bottom, where docker hands out
    node addresses, and never overlapping the egress range.

    Returns
    -------
    tuple of str
        ``(first, last)`` IPv4 addresses.

    Raises
    ------
    cnibench.errors.ConfigError
        ``count < 1``, ``reserved_top < 0``, or the subnet is too small to leave room for the
        gateway and at least one node below the pool.
    """
    network = ipaddress.IPv4Network(subnet, strict=False)
    hosts = network.num_addresses - 2
    if count < 1 or reserved_top < 0 or hosts < count + reserved_top + 2:
        raise ConfigError(
            f"subnet {subnet} cannot spare {count} load-balancer addresses below its top"
            f" {reserved_top}"
        )
    last = network.broadcast_address - 1 - reserved_top
    return str(last - (count - 1)), str(last)


def ranges_overlap(first: tuple[str, str], second: tuple[str, str]) -> bool:
    """Whether two ``(first, last)`` IPv4 ranges share an address."""
    a_low, a_high = (ipaddress.IPv4Address(a) for a in first)
    b_low, b_high = (ipaddress.IPv4Address(b) for b in second)
    return a_low <= b_high and b_low <= a_high


def external_address_from(environ: Mapping[str, str], configured: str | None = None) -> str:
    """The configured external address: ``configured`` first, then ``$CNIBENCH_EXTERNAL_ADDRESS``;
    ``""`` when neither is set.

    Raises
    ------
    cnibench.errors.ConfigError
        The value is not an IPv4 address.
    """
    value = configured or environ.get(EXTERNAL_ADDRESS_ENV, "")
    if not value:
        return ""
    try:
        return str(ipaddress.IPv4Address(value.strip()))
    except ValueError:
        source = "external_address" if configured else EXTERNAL_ADDRESS_ENV
        raise ConfigError(f"{source}={value!r} is not an IPv4 address") from None


class HostEgressServerFuture:
    """Pending result of :meth:`HostExternal.iperf3_server_once` (an
    :class:`~cnibench.backends.base.EgressServerFuture`)."""

    def __init__(self, server: InProcessIperf3Server) -> None:
        self._server = server
        self._result: EgressServerResult | None = None

    def result(self) -> EgressServerResult:
        """Wait for the test (at most the server's timeout plus a grace period).

        Raises
        ------
        cnibench.errors.ToolError
            No client came, the test did not end in time, or libiperf failed.
        """
        if self._result is None:
            try:
                record = self._server.result()
            finally:
                self._server.stop()
            self._result = EgressServerResult(
                remote_host=record.remote_host,
                received_bits_per_second=record.received_bits_per_second,
                raw=record.raw_json,
            )
        return self._result

    def cancel(self) -> None:
        """Stop the server without waiting for a test. Safe to repeat."""
        self._server.stop()


class HostExternal:
    """This host as the external host (an :class:`~cnibench.backends.base.ExternalHost`).

    Parameters
    ----------
    ip:
        Address clients reach this host on: the kind network's gateway, or the configured
        address. Servers bind to it, so only that network reaches them.
    """

    def __init__(self, ip: str) -> None:
        self._ip = ip

    @property
    def ip(self) -> str:
        """Address of this host as pods see it."""
        return self._ip

    def run(self, argv: Sequence[str], *, timeout: float) -> CommandResult:
        """Run ``argv`` on this host, killing it after ``timeout`` seconds.

        Raises
        ------
        cnibench.errors.ToolError
            The program is missing, or it did not finish in time.
        """
        tool = argv[0] if argv else ""
        started = time.monotonic()
        try:
            done = subprocess.run(
                list(argv), capture_output=True, text=True, timeout=timeout, check=False
            )
        except subprocess.TimeoutExpired as exc:
            output = exc.stdout if isinstance(exc.stdout, str) else ""
            raise ToolError(
                f"{tool} on the external host did not finish within {timeout:g} s",
                tool=tool,
                output=output,
            ) from exc
        except OSError as exc:
            raise ToolError(f"{tool} cannot run on the external host: {exc}", tool=tool) from exc
        return CommandResult(
            argv=tuple(argv),
            returncode=done.returncode,
            stdout=done.stdout,
            stderr=done.stderr,
            duration=time.monotonic() - started,
        )

    def start_source_echo(self, *, port: int, seconds: float) -> SourceEchoServer:
        """Serve :mod:`cnibench.tools.source_echo` on ``ip:port`` in a thread of this process
        (this host is the external host); returns once it listens.

        Raises
        ------
        cnibench.errors.ToolError
            The address cannot be bound (not this host's, or the port is taken).
        """
        try:
            return serve_in_thread(self._ip, port, seconds=seconds)
        except OSError as exc:
            raise ToolError(
                f"source echo cannot listen on {self._ip}:{port}: {exc}", tool="source-echo"
            ) from exc

    def iperf3_server_once(self, *, port: int, timeout: float) -> HostEgressServerFuture:
        """Start a libiperf server on ``ip:port`` for one test; returns once it listens.

        Parameters
        ----------
        port:
            TCP port.
        timeout:
            Seconds the server waits for the test to arrive and finish.

        Raises
        ------
        cnibench.errors.ToolError
            The server did not start listening (e.g. the address is not this host's).
        """
        server = InProcessIperf3Server(port=port, bind=self._ip)
        server.start(timeout)
        return HostEgressServerFuture(server)
