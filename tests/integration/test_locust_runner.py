"""The split load runner for real, both engines (cnibench's epoll client and locust): virtual
users against nginx echo backends on loopback."""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from cnibench.tools.locust_runner import (
    ENGINES,
    locust_runner_argv,
    parse_locust_records,
    parse_locust_summary,
)

LOOPBACK = "127.0.0.1"
USERS = 10
SECONDS = 3.0
BOUND_S = SECONDS + 15.0
"""Wall time the whole runner process may take (start-up, run, shutdown)."""

pytestmark = pytest.mark.skipif(shutil.which("nginx") is None, reason="nginx missing")

NGINX_CONF = """\
worker_processes 1;
pid {d}/nginx.pid;
error_log {d}/error.log warn;
events {{ worker_connections 1024; }}
http {{
    access_log off;
    client_body_temp_path {d}/client_body;
    proxy_temp_path {d}/proxy;
    fastcgi_temp_path {d}/fastcgi;
    uwsgi_temp_path {d}/uwsgi;
    scgi_temp_path {d}/scgi;
    server {{
        listen {host}:{v1};
        location / {{ add_header X-Backend v1 always; return 200 "v1\\n"; }}
    }}
    server {{
        listen {host}:{v2};
        location / {{ add_header X-Backend v2 always; return 200 "v2\\n"; }}
    }}
    upstream split {{ server {host}:{v1}; server {host}:{v2}; }}
    server {{
        listen {host}:{proxy};
        location / {{ proxy_pass http://split; }}
    }}
}}
"""


@dataclass(frozen=True)
class Echo:
    """A running nginx: two named echo backends and a 1:1 proxy in front of them."""

    proxy_url: str
    v1_url: str


def free_ports(count: int) -> list[int]:
    probes = [socket.socket() for _ in range(count)]
    try:
        for probe in probes:
            probe.bind((LOOPBACK, 0))
        return [int(p.getsockname()[1]) for p in probes]
    finally:
        for probe in probes:
            probe.close()


def wait_for_port(port: int, process: subprocess.Popen[str]) -> None:
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and process.poll() is None:
        with socket.socket() as probe:
            if probe.connect_ex((LOOPBACK, port)) == 0:
                return
        time.sleep(0.05)
    raise RuntimeError(f"nginx does not listen on {LOOPBACK}:{port}")


@pytest.fixture(scope="module")
def echo(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Echo]:
    directory = tmp_path_factory.mktemp("nginx")
    v1, v2, proxy = free_ports(3)
    conf = directory / "nginx.conf"
    conf.write_text(NGINX_CONF.format(d=directory, host=LOOPBACK, v1=v1, v2=v2, proxy=proxy))
    argv = ["nginx", "-p", str(directory), "-c", str(conf), "-e", f"{directory}/error.log"]
    process = subprocess.Popen(
        [*argv, "-g", "daemon off;"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        for port in (v1, v2, proxy):
            wait_for_port(port, process)
        yield Echo(f"http://{LOOPBACK}:{proxy}/", f"http://{LOOPBACK}:{v1}/")
    finally:
        process.terminate()
        try:
            process.communicate(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.communicate()


@pytest.fixture(scope="module", params=ENGINES)
def engine(request: pytest.FixtureRequest) -> str:
    """Each engine of the runner."""
    return str(request.param)


def run_locust(argv: list[str]) -> tuple[subprocess.CompletedProcess[str], float]:
    started = time.monotonic()
    done = subprocess.run(argv, capture_output=True, text=True, timeout=BOUND_S, check=False)
    return done, time.monotonic() - started


@pytest.fixture(scope="module")
def split_run(
    echo: Echo, engine: str, tmp_path_factory: pytest.TempPathFactory
) -> tuple[subprocess.CompletedProcess[str], float, Path]:
    out = tmp_path_factory.mktemp("locust") / "records.csv"
    argv = locust_runner_argv(
        echo.proxy_url,
        users=USERS,
        spawn_rate=USERS,
        duration=SECONDS,
        out=str(out),
        engine=engine,
    )
    done, elapsed = run_locust(argv)
    return done, elapsed, out


def test_run_ends_in_bounded_time_with_success(
    split_run: tuple[subprocess.CompletedProcess[str], float, Path],
) -> None:
    done, elapsed, _ = split_run
    assert done.returncode == 0, done.stderr[-2000:]
    assert SECONDS <= elapsed < BOUND_S


def test_every_record_is_a_200_with_a_backend_name(
    split_run: tuple[subprocess.CompletedProcess[str], float, Path],
) -> None:
    _, _, out = split_run
    run = parse_locust_records(out)
    assert run.requests > 0
    assert set(run.records["status"]) == {200}
    assert set(run.records["backend"]) == {"v1", "v2"}
    assert run.failures == 0
    assert run.requests_per_second > 0


def test_records_span_the_run_duration(
    split_run: tuple[subprocess.CompletedProcess[str], float, Path],
) -> None:
    _, _, out = split_run
    times = parse_locust_records(out).records["time"]
    span = float(times.max() - times.min())
    assert SECONDS - 1.0 < span <= SECONDS + 0.5


def test_summary_agrees_with_records(
    split_run: tuple[subprocess.CompletedProcess[str], float, Path],
) -> None:
    done, _, out = split_run
    summary = parse_locust_summary(done.stdout)
    run = parse_locust_records(out)
    assert summary.requests == run.requests
    assert summary.users == USERS
    assert dict(summary.backends) == dict(run.backend_counts())
    assert summary.requests_per_second > 0


def test_records_on_stdout_summary_on_stderr(echo: Echo, engine: str) -> None:
    argv = locust_runner_argv(
        echo.v1_url, users=2, spawn_rate=2, duration=1, out="-", wait=0.01, engine=engine
    )
    done, _ = run_locust(argv)
    assert done.returncode == 0, done.stderr[-2000:]
    run = parse_locust_records(done.stdout)
    assert set(run.records["backend"]) == {"v1"}
    assert parse_locust_summary(done.stderr).requests == run.requests


def test_unreachable_target_gives_failed_records(engine: str) -> None:
    (closed,) = free_ports(1)
    argv = locust_runner_argv(
        f"http://{LOOPBACK}:{closed}/",
        users=1,
        spawn_rate=1,
        duration=1,
        out="-",
        wait=0.05,
        engine=engine,
    )
    done, elapsed = run_locust(argv)
    assert done.returncode == 0
    run = parse_locust_records(done.stdout)
    assert run.failures == run.requests > 0
    assert set(run.records["status"]) == {0}
    assert run.records["error"].str.contains("ConnectionRefused").all()
    assert elapsed < BOUND_S


@pytest.mark.parametrize("processes", [1, 3])
def test_users_are_spread_over_the_runner_processes(
    echo: Echo, engine: str, processes: int
) -> None:
    """One runner or several (started together, records merged in start order) give the same
    kind of result; the summary says how many ran and counts what the records hold."""
    argv = locust_runner_argv(
        echo.proxy_url,
        users=7,
        spawn_rate=7,
        duration=2,
        out="-",
        processes=processes,
        engine=engine,
    )
    done, elapsed = run_locust(argv)
    assert done.returncode == 0, done.stderr[-2000:]
    assert elapsed < BOUND_S
    summary_line = json.loads(done.stderr.strip().splitlines()[-1])
    assert summary_line["processes"] == processes
    assert summary_line["engine"] == engine
    assert summary_line["users"] == 7
    run = parse_locust_records(done.stdout)
    summary = parse_locust_summary(done.stderr)
    assert summary.requests == run.requests > 0
    assert dict(summary.backends) == dict(run.backend_counts())
    # One runner writes requests as they complete; merged records are ordered by start.
    assert run.records["time"].is_monotonic_increasing or processes == 1
    # Started together: the records span the run's duration, not it plus a start-up skew.
    span = float(run.records["time"].max() - run.records["time"].min())
    assert 1.0 < span <= 2.5


def test_a_child_woken_late_stops_at_the_end_its_siblings_were_given(
    echo: Echo, engine: str, tmp_path: Path
) -> None:
    """A child runner (``--barrier``) stops at the end time its parent sent, not
    ``--duration`` after it woke: on a busy machine a sibling woken late would otherwise stretch
    the merged records past the run's duration. Here it is told to end 1 s after the go, with
    ``--duration`` 8."""
    out = tmp_path / "records.csv"
    argv = locust_runner_argv(
        echo.proxy_url, users=2, spawn_rate=2, duration=8, out=str(out), processes=1, engine=engine
    )
    child = subprocess.Popen(
        [*argv, "--barrier"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert child.stdout is not None
        assert child.stdin is not None
        assert child.stdout.readline().strip() == "ready"
        went = time.time()
        child.stdin.write(f"{went + 1.0:.6f}\n")
        child.stdin.flush()
        stdout, stderr = child.communicate(timeout=BOUND_S)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
    assert child.returncode == 0, stderr[-2000:]
    assert time.time() - went < 6.0, "ran its --duration instead of stopping at the given end"
    summary = parse_locust_summary(stdout)
    assert summary.requests > 0
    assert summary.duration_s < 2.0
    run = parse_locust_records(out.read_text())
    assert float(run.records["time"].max()) <= went + 1.0 + 0.5


def test_a_silent_server_gives_timed_out_records_and_the_run_still_ends(engine: str) -> None:
    """A server that accepts and never answers: every request fails after the request timeout,
    its user reconnects, and the run ends in its bound."""
    with socket.socket() as silent:
        silent.bind((LOOPBACK, 0))
        silent.listen(64)
        port = silent.getsockname()[1]
        argv = locust_runner_argv(
            f"http://{LOOPBACK}:{port}/",
            users=2,
            spawn_rate=2,
            duration=2.5,
            out="-",
            request_timeout=0.5,
            engine=engine,
        )
        done, elapsed = run_locust(argv)
    assert done.returncode == 0, done.stderr[-2000:]
    assert elapsed < BOUND_S
    run = parse_locust_records(done.stdout)
    assert run.failures == run.requests >= 2
    assert set(run.records["status"]) == {0}
    assert run.records["error"].str.contains(r"(?i)timed? ?out").all(), run.records[
        "error"
    ].tolist()
    assert (run.records["latency_ms"] >= 450).all()
