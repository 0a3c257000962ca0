"""The measurement tools cnibench knows: one declaration per tool, read by every consumer.

A tool module declares one :class:`MeasurementTool`: its name, the executable and the Debian
package that provides it, what cnibench uses it for, how to ask it for its version, and, for a
client tool the baseline scenario runs, how one measurement runs (:class:`ClientMeasurement`:
the argv from the target and the profile, the server workload it talks to, the parse into
:class:`~cnibench.records.Measurement` values and the raw file it leaves). One
:func:`register` line in :mod:`cnibench.tools` adds it; nothing else names it:

- ``cnibench doctor`` and the environment fingerprint's tool versions
  (:func:`cnibench.backends.lab.features.tool_versions`) probe every registered tool,
- :data:`cnibench.system.SYSTEM_TOOLS` (what ``python -m cnibench.system --install`` installs)
  lists each one's package,
- the baseline scenario has one condition per client tool, placement and load,
- the offline tools image installs :func:`debian_packages`.

Everything here is pure data and pure functions: the backends run the argv (``Endpoint.run``)
and hand the output back to :attr:`ClientMeasurement.measurements`. The types the baseline
passes in (its profile, the backends' workload kinds) live in layers above this one, so the
profile is a :class:`MeasurementProfile` Protocol and the server a workload kind's value.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

from cnibench.records import Measurement
from cnibench.registry import Registry

__all__ = [
    "TOOLS",
    "VERSION_NUMBER",
    "ClientMeasurement",
    "MeasurementProfile",
    "MeasurementTool",
    "ToolTarget",
    "VersionProbe",
    "client_tools",
    "debian_packages",
    "register",
    "tool_names",
    "unregister",
]

VERSION_NUMBER = r"(\d+(?:\.\d+)+)"
"""A dotted version number as one regular-expression group (``3.12``, ``1.0.20210914``)."""


class MeasurementProfile(Protocol):
    """What a client tool may read of the session's profile
    (:class:`cnibench.scenarios.profiles.Profile` has these and more)."""

    @property
    def duration(self) -> float:
        """Seconds of each time-bound measurement (whole seconds)."""

    @property
    def ab_requests(self) -> int:
        """Requests per ab run."""

    @property
    def wrk_threads(self) -> int:
        """wrk threads."""

    @property
    def wrk_connections(self) -> int:
        """wrk connections (over all threads)."""


@dataclass(frozen=True)
class ToolTarget:
    """Where a client tool sends: the server's address as the client reaches it (a pod's, a
    Service's virtual IP or a node's) and the port that reaches the tool's server workload.

    Attributes
    ----------
    address:
        IPv4 address.
    port:
        TCP (or UDP) port at ``address``.
    """

    address: str
    port: int

    @property
    def url(self) -> str:
        """``http://address:port/``, for HTTP tools."""
        return f"http://{self.address}:{self.port}/"


@dataclass(frozen=True)
class VersionProbe:
    """How to ask a tool for its version.

    Attributes
    ----------
    binary:
        Executable (looked up on ``PATH``).
    argv:
        Arguments that make it print its version.
    pattern:
        Regular expression whose first group is the version (see :data:`VERSION_NUMBER`).
    """

    binary: str
    argv: tuple[str, ...]
    pattern: str


@dataclass(frozen=True)
class ClientMeasurement:
    """How one measurement of a client tool runs: pure functions around one ``Endpoint.run``.

    Attributes
    ----------
    server:
        Value of the server workload kind the client talks to
        (:class:`cnibench.backends.base.WorkloadKind`: ``"iperf3-server"``,
        ``"sockperf-server"``, ``"http-echo"``).
    argv:
        The client's argv from the target and the profile.
    timeout:
        Seconds the run may take, from the profile (then the backend kills it).
    measurements:
        The measurements in the tool's ``(stdout, stderr)``; raises
        :class:`~cnibench.errors.ToolError` when the tool reported a failure and
        :class:`~cnibench.errors.ParseError` when its output cannot be understood.
    raw_file:
        File name the run's stdout is kept under beside the records (``"iperf3.json"``).
    combine:
        The run's value from several clients run at once (``--pairs``): each pair's
        ``(stdout, stderr)`` in pair order to the aggregate measurements (e.g. the sum of the
        pairs' throughput), or ``None`` for a tool whose runs are not paired (the baseline
        then runs it with one client and gives its condition no ``pairs`` parameter).
    """

    server: str
    argv: Callable[[ToolTarget, MeasurementProfile], Sequence[str]]
    timeout: Callable[[MeasurementProfile], float]
    measurements: Callable[[str, str], Sequence[Measurement]]
    raw_file: str
    combine: Callable[[Sequence[tuple[str, str]]], Sequence[Measurement]] | None = None


@dataclass(frozen=True)
class MeasurementTool:
    """Everything cnibench knows about one measurement tool.

    Attributes
    ----------
    name:
        The tool's name in records (the baseline's ``tool`` parameter), in doctor and in the
        environment's tool versions, e.g. ``"iperf3"``.
    package:
        Debian package that provides :attr:`binary`.
    purpose:
        What cnibench uses it for (shown by ``cnibench doctor`` when it is missing).
    version:
        How to ask it for its version; its ``binary`` is the tool's executable.
    client:
        How the baseline scenario runs one measurement with it, or ``None`` for a tool that
        scenarios drive themselves (curl's request-response timing).
    """

    name: str
    package: str
    purpose: str
    version: VersionProbe
    client: ClientMeasurement | None = None

    @property
    def binary(self) -> str:
        """Executable name looked up on ``PATH``."""
        return self.version.binary


_TOOLS: Registry[MeasurementTool] = Registry("measurement tool")

TOOLS: Mapping[str, MeasurementTool] = _TOOLS.view
"""Registered tools by name, in registration order (the order of the baseline's conditions, of
doctor's rows and of :func:`debian_packages`)."""

register = _TOOLS.register
"""Add a tool under its name; returns it (``ValueError`` for a name already registered)."""

unregister = _TOOLS.unregister
"""Remove the tool registered under a name (nothing when there is none)."""

tool_names = _TOOLS.names
"""Every registered tool's name, in registration order."""


def client_tools() -> tuple[MeasurementTool, ...]:
    """The registered tools the baseline scenario runs: those with a
    :attr:`~MeasurementTool.client`, in registration order."""
    return tuple(tool for tool in TOOLS.values() if tool.client is not None)


def debian_packages() -> tuple[str, ...]:
    """The Debian packages of the registered tools, each once, in registration order.

    The offline tools image installs them first (``iperf3 sockperf wrk apache2-utils curl``):
    its recipe's digest names the cached image, so this order is part of that name.
    """
    return tuple(dict.fromkeys(tool.package for tool in TOOLS.values()))
