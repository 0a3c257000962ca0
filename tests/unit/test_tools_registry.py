"""The registry of measurement tools: each built-in tool's declaration on captured real output,
the tools image's package list it must keep, and a tool registered here reaching every
consumer (baseline conditions, version probes, doctor) with nothing else changed."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from pathlib import Path

import pytest

from cnibench.backends.base import WorkloadKind
from cnibench.backends.kube.offline.plan import rootfs_packages
from cnibench.backends.kube.offline.recipes import ROOTFS_PACKAGES
from cnibench.backends.lab.features import parse_tool_version, version_probes
from cnibench.records import Measurement
from cnibench.scenarios.baseline import BaselineScenario
from cnibench.scenarios.profiles import profile_named
from cnibench.system import SYSTEM_TOOLS
from cnibench.tools import (
    TOOLS,
    ClientMeasurement,
    MeasurementTool,
    ToolTarget,
    VersionProbe,
    client_tools,
    debian_packages,
    parse_ab,
    parse_iperf3,
    parse_sockperf,
    parse_wrk,
    register,
    tool_names,
    unregister,
)

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"
TARGET = ToolTarget("198.19.1.4", 8080)
SMOKE = profile_named("smoke")


def fixture(path: str) -> tuple[str, str]:
    stderr = FIXTURES / f"{path}.stderr"
    return (FIXTURES / path).read_text(), stderr.read_text() if stderr.exists() else ""


def test_the_built_in_tools_in_registration_order() -> None:
    assert tool_names() == ("iperf3", "sockperf", "wrk", "ab", "curl")
    assert [tool.name for tool in client_tools()] == ["iperf3", "sockperf", "wrk", "ab"]


def test_the_tools_image_installs_the_registered_packages_first_and_in_order() -> None:
    """The offline tools image is cached under a digest of its recipe: the registry's packages
    are exactly the recipe's first ones, in its order, so building the list from the registry
    leaves the image (and its digest) as it is."""
    packages = debian_packages()
    assert packages == ("iperf3", "sockperf", "wrk", "apache2-utils", "curl")
    assert rootfs_packages()["tools"][: len(packages)] == packages
    assert not set(packages) & set(ROOTFS_PACKAGES["tools"]), "each package named once"


def test_a_registered_tool_s_package_goes_into_the_tools_image() -> None:
    toy = dataclasses.replace(TOOLS["curl"], name="toy-image-tool", package="toy-package")
    register(toy)
    try:
        assert rootfs_packages()["tools"][:6][-1] == "toy-package"
    finally:
        unregister(toy.name)
    assert "toy-package" not in rootfs_packages()["tools"]


@pytest.mark.parametrize("tool", [tool.name for tool in client_tools()])
def test_every_client_tool_talks_to_a_server_the_backends_run(tool: str) -> None:
    run = TOOLS[tool].client
    assert run is not None
    assert run.server in {kind.value for kind in WorkloadKind}


ARGV = {
    "iperf3": ["iperf3", "-c", "198.19.1.4", "-p", "8080", "-t", "2"],
    "sockperf": [
        *("taskset", "-c", "0"),  # both ends on CPU 0 (cnibench.tools.sockperf.PINNED_CPU)
        *("sockperf", "ping-pong", "-i", "198.19.1.4", "-p", "8080", "-t", "2"),
    ],
    "wrk": ["wrk", "-t", "8", "-c", "1000", "-d", "2s"],
    "ab": ["ab", "-n", "5000", "-c", "10", "http://198.19.1.4:8080/"],
}
"""The start of each client's argv for the smoke profile (2 s, ab 5000 requests, wrk 8 x 1000)."""


@pytest.mark.parametrize("tool", sorted(ARGV))
def test_a_client_argv_comes_from_the_target_and_the_profile(tool: str) -> None:
    run = TOOLS[tool].client
    assert run is not None
    argv = list(run.argv(TARGET, SMOKE))
    assert argv[: len(ARGV[tool])] == ARGV[tool]
    if tool == "wrk":
        assert argv[-1] == TARGET.url == "http://198.19.1.4:8080/"


CAPTURED = {
    "iperf3": "iperf3/tcp.json",
    "sockperf": "sockperf/udp_pingpong.txt",
    "wrk": "wrk/t8_c1000.txt",
    "ab": "ab/get_c10.txt",
}


def expected_measurements(tool: str, stdout: str, stderr: str) -> list[Measurement]:
    """What the baseline recorded for each tool before the registry, from the parsers (and
    since issue 31 the loss each tool reports: iperf3's retransmit rate, sockperf's drops)."""
    if tool == "iperf3":
        iperf = parse_iperf3(stdout, stderr=stderr)
        assert iperf.retransmits is not None
        assert iperf.mean_rtt_us is not None
        return [
            Measurement("throughput", iperf.received_bits_per_second, "bits/s"),
            Measurement("throughput_sender", iperf.sent_bits_per_second, "bits/s"),
            Measurement("retransmits", float(iperf.retransmits), "count"),
            Measurement("retransmit_rate", iperf.retransmits / (iperf.sent_bytes / 32768), "ratio"),
            Measurement("rtt_mean", iperf.mean_rtt_us, "us"),
        ]
    if tool == "sockperf":
        sockperf = parse_sockperf(stdout, stderr=stderr)
        return [
            Measurement("latency_avg", sockperf.avg_latency_us, "us"),
            Measurement("latency_p50", sockperf.p50_us, "us"),
            Measurement("latency_p99", sockperf.p99_us, "us"),
            Measurement("latency_p999", sockperf.p999_us, "us"),
            Measurement("dropped_messages", 0.0, "count"),
            Measurement("message_loss", 0.0, "ratio"),
        ]
    if tool == "wrk":
        wrk = parse_wrk(stdout, stderr=stderr)
        return [
            Measurement("requests_per_second", wrk.requests_per_second, "requests/s"),
            Measurement("latency_avg", wrk.latency_avg_us, "us"),
            Measurement("latency_p50", wrk.latency_percentiles_us[50], "us"),
            Measurement("latency_p99", wrk.latency_percentiles_us[99], "us"),
            Measurement("errors", float(wrk.errors.total), "count"),
        ]
    ab = parse_ab(stdout, stderr=stderr)
    return [
        Measurement("requests_per_second", ab.requests_per_second, "requests/s"),
        Measurement("time_per_request", ab.time_per_request_ms, "ms"),
        Measurement("failed_requests", float(ab.failed_requests), "count"),
    ]


@pytest.mark.parametrize("tool", sorted(CAPTURED))
def test_a_client_tool_measures_its_captured_output_as_the_baseline_recorded_it(
    tool: str,
) -> None:
    run = TOOLS[tool].client
    assert run is not None
    stdout, stderr = fixture(CAPTURED[tool])
    measured = list(run.measurements(stdout, stderr))
    assert measured == expected_measurements(tool, stdout, stderr)
    # Counts and loss ratios may be 0 (a loopback capture loses nothing); the rest are positive.
    assert all(m.value > 0 for m in measured if m.unit not in ("count", "ratio")), measured


@pytest.mark.parametrize("tool", [t.binary for t in TOOLS.values()])
def test_system_tools_install_every_registered_tool(tool: str) -> None:
    declared = next(t for t in TOOLS.values() if t.binary == tool)
    entries = [t for t in SYSTEM_TOOLS if t.binary == tool]
    assert [(t.package, t.purpose) for t in entries] == [(declared.package, declared.purpose)]


def test_a_tool_name_is_registered_once() -> None:
    with pytest.raises(ValueError, match="'iperf3' is already registered"):
        register(TOOLS["iperf3"])
    unregister("no-such-tool")  # nothing to remove, nothing raised
    assert "iperf3" in tool_names()


def _echo_argv(target: ToolTarget, profile: object) -> list[str]:
    return ["echo", target.address, str(target.port)]


ECHO = MeasurementTool(
    name="echo-probe",
    package="coreutils",
    purpose="tests: a registered client tool",
    version=VersionProbe("echo", ("--version",), r"echo \(GNU coreutils\) (\d+(?:\.\d+)+)"),
    client=ClientMeasurement(
        server="http-echo",
        argv=_echo_argv,
        timeout=lambda profile: 5.0,
        measurements=lambda stdout, stderr: [Measurement("echoed", float(len(stdout)), "count")],
        raw_file="echo.txt",
    ),
)
"""A client tool defined here: what a new tool module declares."""


@pytest.fixture
def echo_tool() -> Iterator[MeasurementTool]:
    register(ECHO)
    try:
        yield ECHO
    finally:
        unregister(ECHO.name)


def test_a_registered_client_tool_gets_baseline_conditions_and_a_version_probe(
    echo_tool: MeasurementTool,
) -> None:
    ids = {condition.id for condition in BaselineScenario().conditions()}
    assert {f"{p}-{load}-echo-probe" for p in ("same-node", "cross-node")
            for load in ("idle", "loaded")} <= ids  # fmt: skip
    assert version_probes()["echo-probe"] == ECHO.version
    assert parse_tool_version("echo-probe", "echo (GNU coreutils) 9.1\n") == "9.1"


def test_an_unregistered_tool_leaves_no_condition_behind() -> None:
    register(ECHO)
    unregister(ECHO.name)
    tools = {condition.parameters["tool"] for condition in BaselineScenario().conditions()}
    assert tools == {"iperf3", "sockperf", "wrk", "ab"}
    assert "echo-probe" not in version_probes()
