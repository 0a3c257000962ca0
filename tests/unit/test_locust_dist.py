"""locust's own master/worker distribution in pods: the locustfile, the master's and workers'
command lines, and the master's exported statistics read into the split's counts. The CSVs
below have the columns and rows locust 2.12 writes (``--csv``, ``--csv-full-history``)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from cnibench.errors import ConfigError, ParseError, ToolError
from cnibench.tools.locust_dist import (
    FAILED_NAME,
    WORKERS_MARKER,
    history_samples,
    locustfile,
    master_argv,
    parse_master_stats,
    parse_workers,
    require_workers,
    worker_argv,
    write_locustfile_argv,
)

# Header rows as locust writes them (one line each, as long as they are).
STATS_HEADER = (
    "Type,Name,Request Count,Failure Count,Median Response Time,Average Response Time,"
    "Min Response Time,Max Response Time,Average Content Size,Requests/s,Failures/s,"
    "50%,66%,75%,80%,90%,95%,98%,99%,99.9%,99.99%,100%"
)
STATS = (
    STATS_HEADER
    + """
GET,-failed-,7,7,3,3.5,1,9,0,0.35,0.35,3,3,4,4,9,9,9,9,9,9,9
GET,split-v1-6f7c,600,0,2,2.25,1,40,13,30.0,0.0,2,2,3,3,4,5,8,12,40,40,40
GET,split-v2-9a1b,400,0,2,2.5,1,35,13,20.0,0.0,2,2,3,3,4,5,8,12,35,35,35
,Aggregated,1007,7,2,2.36,1,40,13,50.35,0.35,2,2,3,3,4,5,8,12,40,40,40
"""
)

HISTORY_HEADER = (
    "Timestamp,User Count,Type,Name,Requests/s,Failures/s,"
    "50%,66%,75%,80%,90%,95%,98%,99%,99.9%,99.99%,100%,"
    "Total Request Count,Total Failure Count,Total Median Response Time,"
    "Total Average Response Time,Total Min Response Time,Total Max Response Time,"
    "Total Average Content Size"
)
HISTORY = (
    HISTORY_HEADER
    + """
1700000000,10,GET,split-v1-6f7c,0,0,N/A,N/A,N/A,N/A,N/A,N/A,N/A,N/A,N/A,N/A,N/A,0,0,0,0,0,0,0
1700000000,10,,Aggregated,0,0,N/A,N/A,N/A,N/A,N/A,N/A,N/A,N/A,N/A,N/A,N/A,0,0,0,0,0,0,0
1700000003,10,GET,split-v1-6f7c,3,0,2,2,3,3,4,5,8,12,40,40,40,6,0,2,2.2,1,40,13
1700000003,10,GET,split-v2-9a1b,2,0,2,2,3,3,4,5,8,12,35,35,35,4,0,2,2.5,1,35,13
1700000003,10,GET,-failed-,1,1,3,3,3,3,3,3,3,3,3,3,3,1,1,3,3,3,3,0
1700000006,10,GET,split-v1-6f7c,3,0,2,2,3,3,4,5,8,12,40,40,40,9,0,2,2.2,1,40,13
1700000006,10,,Aggregated,5,0,2,2,3,3,4,5,8,12,40,40,40,14,1,2,2.3,1,40,13
"""
)


def test_the_locustfile_is_python_with_the_host_side_user() -> None:
    text = locustfile("http://10.0.0.9:80/x?y=1", wait=0.5, request_timeout=10.0)
    tree = ast.parse(text)
    classes = [node.name for node in ast.walk(tree) if isinstance(node, ast.ClassDef)]
    assert classes == ["SplitUser"]
    assert "FastHttpUser" in text
    assert "PATH = '/x?y=1'" in text
    assert "host = 'http://10.0.0.9:80'" in text
    assert "constant(0.5)" in text
    assert "network_timeout = 10.0" in text
    assert repr(FAILED_NAME) in text
    assert repr(WORKERS_MARKER) in text


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"url": "10.0.0.9/"}, "url must look like"),
        ({"url": "http://h/", "wait": -1.0}, "wait must be"),
        ({"url": "http://h/", "request_timeout": 0.0}, "request_timeout"),
    ],
    ids=["no-scheme", "negative-wait", "zero-timeout"],
)
def test_the_locustfile_refuses_bad_parameters(kwargs: dict[str, object], message: str) -> None:
    url = str(kwargs.pop("url"))
    with pytest.raises(ConfigError, match=message):
        locustfile(url, **kwargs)  # type: ignore[arg-type]


def test_master_argv_is_headless_and_waits_for_every_worker() -> None:
    argv = master_argv(
        "/tmp/l/locustfile.py",
        users=1000,
        spawn_rate=1000.0,
        duration=19.2,
        workers=3,
        csv_prefix="/tmp/l/run",
    )
    assert argv[:4] == ["locust", "-f", "/tmp/l/locustfile.py", "--master"]
    for option, value in [
        ("--expect-workers", "3"),
        ("--users", "1000"),
        ("--spawn-rate", "1000"),
        ("--run-time", "20s"),
        ("--csv", "/tmp/l/run"),
        ("--master-bind-port", "5557"),
        ("--expect-workers-max-wait", "60"),
    ]:
        assert argv[argv.index(option) + 1] == value
    assert "--headless" in argv
    assert "--csv-full-history" in argv


@pytest.mark.parametrize("workers", [0, 65], ids=["none", "over-64"])
def test_master_argv_refuses_workers_outside_the_range(workers: int) -> None:
    with pytest.raises(ConfigError, match=r"^--load-workers: .* is outside 1\.\.64$"):
        master_argv("f", users=1, spawn_rate=1.0, duration=1.0, workers=workers, csv_prefix="p")


def test_worker_argv_names_the_master_pod() -> None:
    assert worker_argv("/tmp/l/locustfile.py", master_host="10.244.1.7") == [
        "locust",
        "-f",
        "/tmp/l/locustfile.py",
        "--worker",
        "--master-host",
        "10.244.1.7",
        "--master-port",
        "5557",
    ]


def test_master_stats_give_per_backend_successes() -> None:
    stats = parse_master_stats(STATS)
    assert stats.requests == 1007
    assert stats.failures == 7
    assert dict(stats.backends) == {"split-v1-6f7c": 600, "split-v2-9a1b": 400}
    assert stats.requests_per_second == pytest.approx(50.35)
    assert stats.latency_mean_ms == pytest.approx(2.36)


def test_master_stats_without_requests_are_a_failed_run() -> None:
    header = STATS.splitlines()[0]
    with pytest.raises(ToolError, match="no request"):
        parse_master_stats(header + "\n,Aggregated,0,0,0,0,0,0,0,0,0" + ",0" * 11 + "\n")


def test_master_stats_with_another_layout_are_refused() -> None:
    with pytest.raises(ParseError, match="Request Count"):
        parse_master_stats("Type,Name\nGET,x\n")


def test_history_places_each_backends_gain_at_the_earlier_row() -> None:
    times, names = history_samples(HISTORY)
    pairs = sorted(zip(times, names, strict=True))
    assert pairs.count((1700000000.0, "split-v1-6f7c")) == 6
    assert pairs.count((1700000003.0, "split-v2-9a1b")) == 4
    assert pairs.count((1700000003.0, "split-v1-6f7c")) == 3
    assert FAILED_NAME not in names
    assert "Aggregated" not in names
    assert len(times) == 13


def test_workers_are_read_from_the_masters_line() -> None:
    output = (
        "[2026-01-01] master/INFO/locust.main: Run time limit reached\n"
        f'{WORKERS_MARKER}["split-load-w0_ab12", "split-load-w1_cd34"]\n'
    )
    assert parse_workers(output) == ("split-load-w0_ab12", "split-load-w1_cd34")


def test_a_master_that_never_ended_names_no_workers() -> None:
    with pytest.raises(ParseError, match="named no workers"):
        parse_workers("Waiting for workers to be ready, 1 of 2 connected\n")


def test_a_master_that_gave_up_on_its_workers_fails_in_one_line() -> None:
    output = (
        "Waiting for workers to be ready, 1 of 2 connected\n"
        "master/ERROR/locust.main: Gave up waiting for workers to connect\n"
    )
    with pytest.raises(ToolError) as caught:
        parse_workers(output)
    assert str(caught.value) == (
        "fewer locust workers than asked connected to the master in time (last seen: 1 of 2"
        " connected): no result from fewer workers than asked"
    )


def test_every_worker_pod_must_have_reported() -> None:
    require_workers(["w0_1", "w1_2"], ["w0", "w1"])


def test_fewer_workers_than_asked_fail_the_run_in_one_line() -> None:
    with pytest.raises(ToolError) as caught:
        require_workers(["split-load-w0_ab12"], ["split-load-w0", "split-load-w1"])
    message = str(caught.value)
    assert "\n" not in message
    assert message.startswith("only 1 of 2 locust workers reported to the master")
    assert "split-load-w1" in message


def test_the_locustfile_is_written_by_sh_without_stdin(tmp_path) -> None:
    import subprocess

    text = locustfile("http://h/")
    argv = write_locustfile_argv(text, directory=str(tmp_path / "l"))
    subprocess.run(argv, check=True, timeout=10)
    assert (tmp_path / "l" / "locustfile.py").read_text() == text
    assert not (tmp_path / "l" / "__init__.py").exists()


_UNVERSIONED_LOCUST = """
import sys
import locust
import locust.runners
# As Debian bookworm's python3-locust 2.12.1 is built: no version at all.
locust.__version__ = locust.runners.__version__ = ""
from locust.main import main
sys.argv = ["locust", *sys.argv[1:]]
main()
"""


def test_a_locust_without_a_version_still_distributes_and_keeps_every_second(
    tmp_path: Path,
) -> None:
    """The real thing on loopback (PyPI's locust in this environment, its version emptied as
    Debian's package has it): a master and two workers loading cnibench's locustfile connect
    (without it the master refuses each worker as "pre 2.0"), and the master's history holds
    every successful request of a run shorter than 10 s. (That the history needs the locustfile's
    flush is a fact of Debian's 2.12, which flushes every 10 s and not at the end, seen in a
    chroot of the offline image's root filesystem; this locust writes it at the end too.)"""
    import socket
    import subprocess
    import sys
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    class Backend(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(200)
            self.send_header("X-Backend", "v1")
            self.send_header("Content-Length", "2")
            self.end_headers()
            self.wfile.write(b"v1")

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Backend)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    with socket.socket() as probe:  # a free port for the master
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    path = tmp_path / "locustfile.py"
    path.write_text(locustfile(f"http://127.0.0.1:{server.server_port}/", request_timeout=2.0))
    prefix = str(tmp_path / "run")
    master = master_argv(
        str(path), users=4, spawn_rate=4.0, duration=4, workers=2, csv_prefix=prefix,
        workers_wait=30,
    )[1:]  # fmt: skip
    master[master.index("--master-bind-port") + 1] = str(port)
    worker = worker_argv(str(path), master_host="127.0.0.1")[1:]
    worker[worker.index("--master-port") + 1] = str(port)
    run = [sys.executable, "-c", _UNVERSIONED_LOCUST]
    started = [
        subprocess.Popen([*run, *argv], cwd=tmp_path, stdout=subprocess.PIPE,
                         stderr=subprocess.STDOUT, text=True)
        for argv in (master, worker, worker)
    ]  # fmt: skip
    try:
        said = started[0].communicate(timeout=90)[0]
        for process in started[1:]:
            process.wait(timeout=30)
    finally:
        for process in started:
            if process.poll() is None:
                process.kill()
                process.wait()
        server.shutdown()
    assert "pre 2.0" not in said, said[-3000:]
    assert len(parse_workers(said)) == 2, said[-3000:]
    stats = parse_master_stats((tmp_path / "run_stats.csv").read_text())
    times, names = history_samples((tmp_path / "run_stats_history.csv").read_text())
    assert stats.requests > 0
    assert len(times) == stats.backends["v1"] == stats.requests - stats.failures
    assert set(names) == {"v1"}
