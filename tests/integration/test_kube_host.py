"""The kube backend's host side: the external host, egress IP ranges, kind clean-up.

Pure parsers run on hand-written samples; :class:`HostExternal` runs a real libiperf server and
a real iperf3 client on loopback. kind and docker cannot run here (no container engine): where
they would be called, a fake runner (named ``fake_*``) records the argv and answers, and a fake
Docker SDK client (``engine_stand_in``) answers what cnibench asks the engine itself.
"""

from __future__ import annotations

import json
import socket
from collections.abc import Callable, Sequence
from pathlib import Path

import pytest

from cnibench.backends.base import ClusterSpec
from cnibench.backends.kube.backend import KubeBackend
from cnibench.backends.kube.clean import clean_kube_leftovers
from cnibench.backends.kube.cni import cni_definition
from cnibench.backends.kube.external import (
    HostExternal,
    external_address_from,
    parse_docker_network,
    parse_ip_range,
    top_of_subnet_range,
)
from cnibench.backends.kube.providers import ExistingProvider, KindProvider
from cnibench.errors import ConfigError, ParseError, ProvisioningError, ToolError
from engine_stand_in import FakeEngineClient, fake_engine

DATA = Path(__file__).resolve().parents[2] / "fixtures" / "kind"
KIND_NETWORK_JSON = (DATA / "docker-network-inspect-kind.json").read_text()


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


# -- docker network inspect --------------------------------------------------------------------


def test_kind_network_gives_ipv4_gateway_and_subnet() -> None:
    # Sample written by hand in the shape `docker network inspect` documents (dual-stack kind).
    network = parse_docker_network(KIND_NETWORK_JSON)
    assert (network.name, network.subnet, network.gateway) == (
        "kind",
        "172.18.0.0/16",
        "172.18.0.1",
    )


def test_missing_gateway_is_the_first_host_address() -> None:
    document = json.loads(KIND_NETWORK_JSON)
    document[0]["IPAM"]["Config"] = [{"Subnet": "172.19.0.0/16"}]
    assert parse_docker_network(json.dumps(document)).gateway == "172.19.0.1"


@pytest.mark.parametrize(
    "text",
    [
        "not json",
        "[]",
        json.dumps([{"Name": "v6only", "IPAM": {"Config": [{"Subnet": "fd00::/64"}]}}]),
    ],
    ids=["not-json", "no-network", "ipv6-only"],
)
def test_unusable_network_inspect_output_is_a_parse_error(text: str) -> None:
    with pytest.raises(ParseError):
        parse_docker_network(text)


# -- egress IP ranges and the external address ------------------------------------------------


def test_top_of_subnet_range_avoids_broadcast() -> None:
    assert top_of_subnet_range("172.18.0.0/16", 4) == ("172.18.255.251", "172.18.255.254")


@pytest.mark.parametrize(
    ("text", "expected"),
    [("172.18.0.200-172.18.0.209", ("172.18.0.200", "172.18.0.209")),
     ("172.18.0.7", ("172.18.0.7", "172.18.0.7"))],
    ids=["range", "single"],
)  # fmt: skip
def test_parse_ip_range(text: str, expected: tuple[str, str]) -> None:
    assert parse_ip_range(text) == expected


@pytest.mark.parametrize(
    "text", ["172.18.0.9-172.18.0.1", "a-b", ""], ids=["reversed", "words", "empty"]
)
def test_bad_ip_range_is_a_config_error(text: str) -> None:
    with pytest.raises(ConfigError):
        parse_ip_range(text)


def test_external_address_option_beats_environment() -> None:
    environ = {"CNIBENCH_EXTERNAL_ADDRESS": "198.18.0.9"}
    assert external_address_from(environ) == "198.18.0.9"
    assert external_address_from(environ, "198.18.0.10") == "198.18.0.10"
    assert external_address_from({}) == ""


def test_external_address_must_be_ipv4() -> None:
    with pytest.raises(ConfigError, match="CNIBENCH_EXTERNAL_ADDRESS"):
        external_address_from({"CNIBENCH_EXTERNAL_ADDRESS": "gateway"})


def test_antrea_accepts_only_the_egress_range_option() -> None:
    spec = ClusterSpec(cni="antrea", options={"egress-ip-range": "172.18.0.9-172.18.0.1"})
    with pytest.raises(ConfigError, match="first > last"):
        cni_definition(spec)
    with pytest.raises(ConfigError, match="egress-ip-range"):
        cni_definition(ClusterSpec(cni="antrea", options={"mode": "x"}))


# -- KubeBackend.host_side: kind with a fake engine, others without ---------------------------


def _kind_backend(client: FakeEngineClient, **options: str) -> KubeBackend:
    def fake_kind(argv: Sequence[str]) -> str:
        raise AssertionError(f"host_side ran {argv}")

    provider = KindProvider(runner=fake_kind, engine=fake_engine(client))
    return KubeBackend(provider, **options)


def _kind_engine() -> FakeEngineClient:
    """An engine whose ``kind`` network is the sample's (``docker network inspect`` prints
    the list of what ``GET /networks/kind`` answers)."""
    return FakeEngineClient(networks={"kind": json.loads(KIND_NETWORK_JSON)[0]})


def test_kind_external_host_is_the_kind_gateway(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CNIBENCH_EXTERNAL_ADDRESS", raising=False)
    monkeypatch.delenv("CNIBENCH_EGRESS_IP_RANGE", raising=False)
    engine = _kind_engine()
    spec = ClusterSpec(cni="antrea")
    external, egress = _kind_backend(engine).host_side(spec, cni_definition(spec))
    assert external is not None
    assert external.ip == "172.18.0.1"
    assert egress == ("172.18.255.251", "172.18.255.254")
    assert engine.asked == [("network", "kind")]


def test_configured_addresses_skip_docker(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CNIBENCH_EGRESS_IP_RANGE", raising=False)
    engine = _kind_engine()
    spec = ClusterSpec(cni="antrea", options={"egress-ip-range": "172.18.0.240-172.18.0.241"})
    backend = _kind_backend(engine, external_address="198.18.0.5")
    external, egress = backend.host_side(spec, cni_definition(spec))
    assert external is not None
    assert external.ip == "198.18.0.5"
    assert egress == ("172.18.0.240", "172.18.0.241")
    assert engine.asked == []


def test_existing_cluster_has_no_external_host_unless_configured(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.delenv("CNIBENCH_EXTERNAL_ADDRESS", raising=False)
    spec = ClusterSpec(cni="cilium")
    backend = KubeBackend(ExistingProvider(tmp_path / "kubeconfig"))
    assert backend.host_side(spec, cni_definition(spec)) == (None, None)
    monkeypatch.setenv("CNIBENCH_EXTERNAL_ADDRESS", "198.18.0.7")
    external, _ = KubeBackend(ExistingProvider(tmp_path / "k")).host_side(
        spec, cni_definition(spec)
    )
    assert external is not None
    assert external.ip == "198.18.0.7"


# -- HostExternal: real libiperf server and iperf3 client on loopback -------------------------


def test_host_external_server_sees_the_client_address() -> None:
    host = HostExternal("127.0.0.1")
    port = _free_port()
    future = host.iperf3_server_once(port=port, timeout=15)
    client = host.run(["iperf3", "-c", "127.0.0.1", "-p", str(port), "-t", "1"], timeout=20)
    assert client.returncode == 0, client.stderr
    result = future.result()
    assert result.remote_host == "127.0.0.1"
    assert result.received_bits_per_second > 0


def test_host_external_server_refuses_a_foreign_address() -> None:
    # Binding fails locally (198.18.0.77 is no address of this host): no packet is sent.
    with pytest.raises(ToolError, match="did not start listening"):
        HostExternal("198.18.0.77").iperf3_server_once(port=_free_port(), timeout=5)


def test_host_external_run_is_bounded_in_time() -> None:
    with pytest.raises(ToolError, match=r"within 0\.3 s"):
        HostExternal("127.0.0.1").run(["sleep", "5"], timeout=0.3)


# -- kind part of clean-up with a fake kind ----------------------------------------------------


def _fake_kind(
    clusters: str, calls: list[list[str]], fail: str = ""
) -> Callable[[Sequence[str]], str]:
    def fake_kind(argv: Sequence[str]) -> str:
        calls.append(list(argv))
        if fail and argv[-1] == fail:
            raise ProvisioningError(f"kind delete cluster failed: {fail} is busy")
        return clusters if argv[1] == "get" else ""

    return fake_kind


def test_clean_deletes_only_cnibench_kind_clusters() -> None:
    calls: list[list[str]] = []
    fake = _fake_kind("cnibench-3f9a1c2b7d\nkind\nmy-dev\ncnibench-0a1b2c3d4e\n", calls)
    report = clean_kube_leftovers(runner=fake)
    deleted = [c[-1] for c in calls if c[:3] == ["kind", "delete", "cluster"]]
    assert deleted == ["cnibench-3f9a1c2b7d", "cnibench-0a1b2c3d4e"]
    assert report.summary().splitlines() == [
        "kube: kind-cluster cnibench-3f9a1c2b7d: removed",
        "kube: kind-cluster cnibench-0a1b2c3d4e: removed",
    ]


def test_clean_dry_run_deletes_nothing() -> None:
    calls: list[list[str]] = []
    report = clean_kube_leftovers(dry_run=True, runner=_fake_kind("cnibench-aa\n", calls))
    assert calls == [["kind", "get", "clusters"]]
    assert report.summary() == "kube: kind-cluster cnibench-aa: would remove"


def test_clean_reports_a_failed_deletion_as_an_item() -> None:
    calls: list[list[str]] = []
    fake = _fake_kind("cnibench-aa cnibench-bb", calls, fail="cnibench-aa")
    report = clean_kube_leftovers(runner=fake)
    assert [i.name for i in report.failed] == ["cnibench-aa"]
    assert "is busy" in report.summary().splitlines()[0]
    assert report.items[1].outcome == "removed"


# -- teardown policy and secrets ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("provider", "keep", "deletes"),
    [("kind", False, True), ("kind", True, False), ("existing", False, False)],
    ids=["kind", "kind-kept", "existing"],
)
def test_which_clusters_teardown_deletes(
    tmp_path: Path, provider: str, keep: bool, deletes: bool
) -> None:
    made = KindProvider(tmp_path) if provider == "kind" else ExistingProvider(tmp_path / "k")
    assert KubeBackend(made, keep_cluster=keep).deletes_clusters is deletes


TOKEN = "fake-token-9f2e1d"


@pytest.mark.parametrize(
    "text",
    [
        "apiVersion: v1\nkind: Config\nusers:\n- name: u\n  user: {token: " + TOKEN + "}\n"
        "current-context: missing\n",
        "apiVersion: v1\nusers:\n- name: u\n  user: {token: " + TOKEN + "\n",
    ],
    ids=["unknown-context", "broken-yaml"],
)
def test_unusable_kubeconfig_error_hides_the_token(tmp_path: Path, text: str) -> None:
    from cnibench.backends.kube.backend import api_client_for

    path = tmp_path / "kubeconfig"
    path.write_text(text)
    with pytest.raises(ProvisioningError) as caught:
        api_client_for(path)
    assert TOKEN not in str(caught.value)
    assert "\n" not in str(caught.value)


class _FailingFakeTerraform:
    """Fake python_terraform.Terraform (Azure is unreachable) whose apply fails and echoes
    the secret, as a real failing terraform may."""

    def __init__(self, working_dir: str) -> None:
        self.working_dir = working_dir

    def init(self, **kwargs: object) -> tuple[int, str, str]:
        return 0, "", ""

    def apply(self, **kwargs: object) -> tuple[int, str, str]:
        return 1, "", "Error: client_secret=arm-secret-5c1e rejected"


def test_failing_aks_provider_does_not_echo_credentials(tmp_path: Path) -> None:
    from cnibench.backends.kube.providers import AKS_CREDENTIAL_VARIABLES, AksProvider

    environ = dict.fromkeys(AKS_CREDENTIAL_VARIABLES, "x")
    environ["ARM_CLIENT_SECRET"] = "arm-secret-5c1e"
    provider = AksProvider(state_dir=tmp_path, terraform=_FailingFakeTerraform, environ=environ)
    spec = ClusterSpec(cni="cilium")
    with pytest.raises(ProvisioningError, match="terraform apply failed") as caught:
        provider.ensure(spec, cni_definition(spec))
    assert "arm-secret-5c1e" not in str(caught.value)
    assert "arm-secret-5c1e" not in repr(caught.value.__cause__)
