"""cnibench.metrics against a real Prometheus scraping a real node-exporter on loopback.

Both come from the Debian packages (prometheus, prometheus-node-exporter), listen on free
127.0.0.1 ports, keep their data in pytest's tmp directory and are stopped by PID.
"""

from __future__ import annotations

import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from cnibench.errors import MetricsError
from cnibench.metrics import (
    CPU_PERCENT,
    RAM_MB,
    RECEIVE_RATE,
    RECEIVE_RATE_BITS,
    MetricsClient,
    MetricsSettings,
    prometheus_config,
)

NODE_NAME = "node-a"
"""Instance label given to the node-exporter target (a hyphen tests PromQL regex escaping)."""

LOAD_SECONDS = 3.0


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _binary(name: str) -> str:
    path = shutil.which(name)
    if path is None:
        pytest.skip(f"{name} not installed (Debian package {name}); run python -m cnibench.system")
    return path


def _start(argv: list[str], log: Path) -> subprocess.Popen[bytes]:
    with log.open("wb") as handle:
        return subprocess.Popen(argv, stdout=handle, stderr=subprocess.STDOUT)


def _stop(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=10)


@dataclass(frozen=True)
class Server:
    url: str
    node_address: str


@pytest.fixture(scope="module")
def prometheus(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """node-exporter (cpu, meminfo, netdev incl. lo) and Prometheus scraping it every second."""
    exporter_binary = _binary("prometheus-node-exporter")
    prometheus_binary = _binary("prometheus")
    workdir = tmp_path_factory.mktemp("prometheus")
    node_address = f"127.0.0.1:{_free_port()}"
    prometheus_address = f"127.0.0.1:{_free_port()}"
    config = workdir / "prometheus.yml"
    config.write_text(
        prometheus_config({"node": [node_address]}, instance_names={node_address: NODE_NAME})
    )
    processes: list[subprocess.Popen[bytes]] = []
    try:
        processes.append(
            _start(
                [
                    exporter_binary,
                    f"--web.listen-address={node_address}",
                    "--collector.disable-defaults",
                    "--collector.cpu",
                    "--collector.meminfo",
                    "--collector.netdev",
                    # node-exporter hides lo by default; the test measures traffic on it.
                    "--collector.netdev.device-exclude=^$",
                ],
                workdir / "node-exporter.log",
            )
        )
        processes.append(
            _start(
                [
                    prometheus_binary,
                    f"--config.file={config}",
                    f"--storage.tsdb.path={workdir / 'data'}",
                    f"--web.listen-address={prometheus_address}",
                ],
                workdir / "prometheus.log",
            )
        )
        url = f"http://{prometheus_address}"
        with MetricsClient(url, timeout=5) as client:
            try:
                client.wait_until_ready(30)
            except MetricsError:
                logs = {p.name: p.read_text()[-2000:] for p in workdir.glob("*.log")}
                raise AssertionError(f"Prometheus did not come up: {logs}") from None
        yield Server(url=url, node_address=node_address)
    finally:
        for process in reversed(processes):
            _stop(process)


@pytest.fixture(scope="module")
def client(prometheus: Server) -> Iterator[MetricsClient]:
    with MetricsClient(prometheus.url, settings=MetricsSettings(device_regex="^lo$")) as metrics:
        yield metrics


@pytest.fixture(scope="module")
def loaded_window(client: MetricsClient) -> tuple[float, float]:
    """A window of LOAD_SECONDS during which this process keeps one core busy, waited for as
    the runner waits: CPU rates first, the scrape under way at its end stored after it."""
    client.wait_for_rates([NODE_NAME], timeout=15)
    start = time.time()
    stop = time.monotonic() + LOAD_SECONDS
    iterations = 0
    while time.monotonic() < stop and iterations < 10**9:
        iterations += 1
    end = time.time()
    client.wait_for_next_scrape([NODE_NAME], timeout=15)
    return start, end


def _meminfo_total_mb() -> float:
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("MemTotal:"):
            return int(line.split()[1]) / 1024
    raise AssertionError("no MemTotal in /proc/meminfo")


def test_cpu_percent_is_a_percentage(
    client: MetricsClient, loaded_window: tuple[float, float]
) -> None:
    value = client.reduce_window(CPU_PERCENT.render(), *loaded_window)[NODE_NAME]
    assert 0 <= value <= 100


def test_cpu_load_is_visible(client: MetricsClient, loaded_window: tuple[float, float]) -> None:
    # One of the host's cores was busy for the whole window.
    cores = len(Path("/proc/stat").read_text().split("\ncpu")) - 1
    peak = client.reduce_window(CPU_PERCENT.render(), *loaded_window, reducer="max")[NODE_NAME]
    assert peak >= 0.6 * 100 / cores


def test_ram_mb_is_within_total_memory(
    client: MetricsClient, loaded_window: tuple[float, float]
) -> None:
    value = client.reduce_window(RAM_MB.render(), *loaded_window)[NODE_NAME]
    assert 0 < value < _meminfo_total_mb()


def test_loopback_receive_rate_is_positive(
    client: MetricsClient, loaded_window: tuple[float, float]
) -> None:
    # Prometheus scraping node-exporter over lo is itself traffic on lo.
    query = RECEIVE_RATE.render(device_regex="^lo$")
    assert client.reduce_window(query, *loaded_window)[NODE_NAME] > 0


def test_bits_query_is_eight_times_bytes_query(
    client: MetricsClient, loaded_window: tuple[float, float]
) -> None:
    octets = client.query_window(RECEIVE_RATE.render(device_regex="^lo$"), *loaded_window)
    bits = client.query_window(RECEIVE_RATE_BITS.render(device_regex="^lo$"), *loaded_window)
    assert bits[NODE_NAME].values == pytest.approx([8 * v for v in octets[NODE_NAME].values])


def test_series_samples_lie_in_the_window(
    client: MetricsClient, loaded_window: tuple[float, float]
) -> None:
    series = client.query_window(RAM_MB.render(), *loaded_window, step=0.5)[NODE_NAME]
    start, end = loaded_window
    assert len(series.values) >= 2
    # Prometheus works in milliseconds: the window is rounded outwards to them.
    assert all(start - 0.001 <= stamp <= end + 0.001 for stamp in series.timestamps)


def test_run_metrics_names_each_node(
    client: MetricsClient, loaded_window: tuple[float, float]
) -> None:
    measurements = client.run_metrics(*loaded_window, instances={NODE_NAME: "client"})
    assert [(m.metric, m.unit) for m in measurements] == [
        ("cpu@client", "%"),
        ("ram@client", "MB"),
        ("receive_rate@client", "bits/s"),
    ]


def test_run_metrics_default_covers_every_instance(
    client: MetricsClient, loaded_window: tuple[float, float]
) -> None:
    metrics = [m.metric for m in client.run_metrics(*loaded_window)]
    assert metrics == [f"cpu@{NODE_NAME}", f"ram@{NODE_NAME}", f"receive_rate@{NODE_NAME}"]


def test_instance_matcher_is_exact_on_the_server(
    client: MetricsClient, loaded_window: tuple[float, float]
) -> None:
    # Unescaped, the regex "node.a" would match "node-a".
    with pytest.raises(MetricsError, match="no data"):
        client.reduce_window(CPU_PERCENT.render(instances=["node.a"]), *loaded_window)


def test_unknown_instance_raises_naming_it(
    client: MetricsClient, loaded_window: tuple[float, float]
) -> None:
    with pytest.raises(MetricsError, match="no-such-node"):
        client.run_metrics(*loaded_window, instances=["no-such-node"])


def test_bad_query_raises_with_server_reason(
    client: MetricsClient, loaded_window: tuple[float, float]
) -> None:
    with pytest.raises(MetricsError, match="parse error") as info:
        client.query_window("irate(node_cpu_seconds_total[5s]", *loaded_window)
    assert client.url in str(info.value)


def test_dead_url_raises_one_line_error_naming_url_and_query() -> None:
    url = f"http://127.0.0.1:{_free_port()}"
    now = time.time()
    with MetricsClient(url, timeout=2) as dead, pytest.raises(MetricsError) as info:
        dead.query_window("up", now - 10, now)
    message = str(info.value)
    assert url in message
    assert "`up`" in message
    assert "\n" not in message


def test_wait_until_ready_gives_up_on_dead_url() -> None:
    url = f"http://127.0.0.1:{_free_port()}"
    started = time.monotonic()
    with (
        MetricsClient(url, timeout=1) as dead,
        pytest.raises(MetricsError, match=r"waited 1.5 s for Prometheus at .* to be ready"),
    ):
        dead.wait_until_ready(1.5)
    assert time.monotonic() - started < 10


def test_proxy_from_environment_is_not_used(
    prometheus: Server, monkeypatch: pytest.MonkeyPatch
) -> None:
    dead_proxy = f"http://127.0.0.1:{_free_port()}"
    for name in ("HTTP_PROXY", "http_proxy", "HTTPS_PROXY", "https_proxy"):
        monkeypatch.setenv(name, dead_proxy)
    monkeypatch.delenv("NO_PROXY", raising=False)
    monkeypatch.delenv("no_proxy", raising=False)
    with MetricsClient(prometheus.url, timeout=5) as fresh:
        fresh.wait_until_ready(5)


def test_a_new_scrape_is_awaited_within_about_one_interval(client: MetricsClient) -> None:
    before = client.latest_scrapes([NODE_NAME])[NODE_NAME]
    started = time.monotonic()
    client.wait_for_next_scrape([NODE_NAME], timeout=15)
    took = time.monotonic() - started
    assert client.latest_scrapes([NODE_NAME])[NODE_NAME] > before
    assert took < 3.0, took  # 1 s scrape interval, room for a busy machine


def test_rates_are_awaited_for_every_instance_asked_for(client: MetricsClient) -> None:
    client.wait_for_rates([NODE_NAME], timeout=15)
    now = time.time()
    assert NODE_NAME in client.reduce_window(CPU_PERCENT.render(), now - 2, now)


@pytest.mark.parametrize(
    ("wait", "message"),
    [
        (
            lambda c: c.wait_for_next_scrape([NODE_NAME, "node-z"], timeout=1.5),
            r"waited 1\.5 s for Prometheus at .* to store a new scrape of node-a, node-z:"
            r" last seen: none yet of node-z$",
        ),
        (
            lambda c: c.wait_for_rates(["node-z", NODE_NAME], timeout=1.5),
            r"waited 1\.5 s for Prometheus at .* to have a CPU rate of node-z, node-a:"
            r" last seen: none yet for node-z$",
        ),
    ],
    ids=["scrape", "rates"],
)
def test_an_instance_prometheus_does_not_scrape_is_named_when_time_is_up(
    client: MetricsClient, wait: Any, message: str
) -> None:
    with pytest.raises(MetricsError, match=message):
        wait(client)
