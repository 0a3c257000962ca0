"""What cnibench itself asks an engine (a node container's ID and PID, whether an image is
there, the kind network's subnet), through the Docker SDK.

The answers come from a fake SDK client (``engine_stand_in``: unit tests have no engine); the
engine that does not answer is the real SDK on a socket nothing listens on. The kind tier asks a
real engine the same questions.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import requests

from cnibench.backends.kube.external import DockerNetwork, inspect_docker_network
from cnibench.engine.api import (
    ContainerProcess,
    EngineReads,
    engine_client,
    open_engine_client,
)
from cnibench.errors import ParseError, ProvisioningError
from engine_stand_in import FAKE_DOCKER_HOST, FakeEngineClient, fake_engine

NODE_ID = "4f" * 32
KIND_NETWORK = {
    "Name": "kind",
    "Driver": "bridge",
    "IPAM": {
        "Driver": "default",
        "Config": [
            {"Subnet": "fc00:f853:ccd:e793::/64", "Gateway": "fc00:f853:ccd:e793::1"},
            {"Subnet": "172.18.0.0/16", "Gateway": "172.18.0.1"},
        ],
    },
}


def test_a_node_containers_id_and_init_pid_are_read_in_one_request() -> None:
    client = FakeEngineClient(
        containers={"kr-worker": {"Id": NODE_ID, "State": {"Pid": 4242, "Running": True}}}
    )
    assert fake_engine(client).container("kr-worker") == ContainerProcess(NODE_ID, 4242)
    assert client.asked == [("container", "kr-worker")]
    assert client.closed == 1


def test_a_stopped_container_has_pid_zero() -> None:
    client = FakeEngineClient(containers={"n": {"Id": NODE_ID, "State": {"Pid": 0}}})
    assert fake_engine(client).container("n").pid == 0


def test_a_missing_container_is_one_line_naming_it_and_the_engine() -> None:
    client = FakeEngineClient()
    with pytest.raises(ProvisioningError) as raised:
        fake_engine(client).container("gone-worker")
    assert str(raised.value) == f"no container gone-worker in the engine at {FAKE_DOCKER_HOST}"
    assert client.closed == 1


@pytest.mark.parametrize(
    ("images", "expected"),
    [({"localhost/cnibench-tools:1": "sha256:ab"}, "sha256:ab"), ({}, None)],
    ids=["present", "absent"],
)
def test_an_image_is_present_by_its_id_and_absent_as_none(
    images: dict[str, str], expected: str | None
) -> None:
    reads = fake_engine(FakeEngineClient(images=images))
    assert reads.image_id("localhost/cnibench-tools:1") == expected


def test_the_kind_networks_ipv4_subnet_and_gateway_are_read_from_the_engine() -> None:
    client = FakeEngineClient(networks={"kind": KIND_NETWORK})
    network = inspect_docker_network(reads=fake_engine(client))
    assert network == DockerNetwork("kind", "172.18.0.0/16", "172.18.0.1")
    assert client.asked == [("network", "kind")]


def test_a_network_without_ipv4_is_a_parse_error_with_the_document() -> None:
    v6 = {"Name": "v6only", "IPAM": {"Config": [{"Subnet": "fd00::/64"}]}}
    client = FakeEngineClient(networks={"v6only": v6})
    with pytest.raises(ParseError, match="'v6only' has no IPv4 subnet") as raised:
        inspect_docker_network("v6only", reads=fake_engine(client))
    assert "fd00::/64" in raised.value.output


def test_a_missing_network_is_one_line() -> None:
    with pytest.raises(ProvisioningError, match=r"^no network kind in the engine at unix://"):
        inspect_docker_network(reads=fake_engine())


def test_podman_is_still_asked_with_its_cli() -> None:
    ran: list[list[str]] = []

    def podman(argv: list[str]) -> str:
        ran.append(list(argv))
        return '[{"Name": "kind", "IPAM": {"Config": [{"Subnet": "10.89.0.0/24"}]}}]'

    network = inspect_docker_network(engine="podman", runner=podman)
    assert network == DockerNetwork("kind", "10.89.0.0/24", "10.89.0.1")
    assert ran == [["podman", "network", "inspect", "kind"]]


def test_an_engine_that_stops_answering_mid_read_is_one_line() -> None:
    client = FakeEngineClient(failure=requests.ConnectionError("Connection aborted.\nreset"))
    with pytest.raises(ProvisioningError) as raised:
        fake_engine(client).image_id("localhost/cnibench-tools:1")
    message = str(raised.value)
    assert "\n" not in message
    assert message == (
        f"engine at {FAKE_DOCKER_HOST}: reading image localhost/cnibench-tools:1 failed:"
        " Connection aborted. reset"
    )
    assert client.closed == 1


def test_an_engine_that_does_not_answer_is_one_line(tmp_path: Path) -> None:
    """The real SDK, on a socket path nothing listens on."""
    host = f"unix://{tmp_path / 'docker.sock'}"
    with pytest.raises(ProvisioningError) as raised:
        EngineReads(host, timeout=1).container("kr-worker")
    message = str(raised.value)
    assert message.startswith(f"engine at {host} does not answer: ")
    assert "\n" not in message
    with pytest.raises(ProvisioningError, match="does not answer"), engine_client(host):
        pass
    with pytest.raises(ProvisioningError, match="does not answer"):
        open_engine_client(host, timeout=1)


def test_reads_follow_docker_host_at_each_read(monkeypatch: pytest.MonkeyPatch) -> None:
    """As the docker CLI kind runs does: the engine of ``$DOCKER_HOST`` when the read is made,
    the SDK's default socket when it is unset."""
    seen: list[str] = []

    def connect(docker_host: str) -> FakeEngineClient:
        seen.append(docker_host)
        return FakeEngineClient()

    reads = EngineReads(connect=connect)
    monkeypatch.setenv("DOCKER_HOST", "unix:///run/cnibench-engine/a/docker.sock")
    reads.image_id("x")
    monkeypatch.delenv("DOCKER_HOST")
    reads.image_id("x")
    assert seen == ["unix:///run/cnibench-engine/a/docker.sock", ""]
    assert EngineReads("tcp://10.0.0.1:2375").docker_host == "tcp://10.0.0.1:2375"
