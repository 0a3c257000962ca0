"""The split scenario's load from locust's own master/worker distribution, run in pods.

Where one load machine is not enough (thousands of users), ``--load-engine locust`` on a
backend whose pods can run it (:attr:`cnibench.backends.base.Backend.load_in_pods`) starts one
``locust --master`` and W ``locust --worker`` processes in the benchmark's client pods; locust
itself shares the users out and gathers the statistics. cnibench adds no distribution of its
own: this module only writes the locustfile and the command lines, and reads what the master
exported. Pure functions, as every tool adapter (the scenario runs them through
:meth:`~cnibench.backends.base.Endpoint.run`).

The locustfile (:func:`locustfile`) is the host-side engine's user
(:mod:`cnibench.tools.locust_runner`): a ``FastHttpUser`` sending GET requests back to back
(``constant(wait)``), with the same request timeout. Each successful request is named in
locust's statistics after the backend that answered it (the ``X-Backend`` header, else a
one-line body, as the host-side engine reads it), each failed one :data:`FAILED_NAME`, so the
master's per-name rows are the per-backend counts. On the master it also collects the id of
every worker that reported statistics (locust names a worker ``<hostname>_<uuid>``, and a pod's
hostname is its name) and prints them as one line starting with :data:`WORKERS_MARKER` when
it quits.

Locust version: Debian bookworm's ``python3-locust`` 2.12 (the offline image); every option
used here (``--expect-workers-max-wait``, ``--csv``, ``--csv-full-history``) is in it.
"""

from __future__ import annotations

import csv
import io
import json
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from urllib.parse import urlsplit

from cnibench.errors import ConfigError, ParseError, ToolError
from cnibench.tools._common import format_number, require_positive

__all__ = [
    "FAILED_NAME",
    "LOCUST_DIR",
    "MASTER_PORT",
    "MAX_WORKERS",
    "UNVERSIONED",
    "WORKERS_MARKER",
    "MasterStats",
    "history_samples",
    "locustfile",
    "master_argv",
    "parse_master_stats",
    "parse_workers",
    "require_workers",
    "worker_argv",
    "write_locustfile_argv",
]

TOOL = "locust"
MASTER_PORT = 5557
"""Port the master listens on for its workers (locust's default)."""
MAX_WORKERS = 64
"""Most workers ``--load-workers`` asks for."""
FAILED_NAME = "-failed-"
"""Name of every failed request in the master's statistics (no backend answered it)."""
WORKERS_MARKER = "cnibench-locust-workers "
"""Start of the line the master prints: a JSON list of the workers that reported."""
UNVERSIONED = "0-unversioned"
"""The version master and workers tell each other when their locust has none: Debian
bookworm's ``python3-locust`` 2.12.1 (the offline image) was built without one
(``locust.__version__ == ""``), and a master refuses a worker whose version is empty ("An old
(pre 2.0) worker tried to connect"), so no worker ever connected (kind, 2026-11-28)."""
_AGGREGATED = "Aggregated"
_MAX_BODY_NAME = 64

_LOCUSTFILE = '''\
"""cnibench's split load for locust's own master/worker distribution (written by cnibench)."""
import json

import locust.runners
import locust.stats
from locust import FastHttpUser, constant, events, task
from locust.runners import MasterRunner

# The master's history is read once the run ends: write out each second's rows as they come
# (by default every 10 s, and a run's last seconds never).
locust.stats.CSV_STATS_FLUSH_INTERVAL_SEC = 0

if not locust.runners.__version__:
    # A build that lost its version (Debian's python3-locust 2.12.1 says "") sends it empty,
    # and the master refuses such a worker as "pre 2.0". Master and workers load this file.
    locust.runners.__version__ = {unversioned!r}

PATH = {path!r}
BACKEND_HEADER = {header!r}
FAILED = {failed!r}
MARKER = {marker!r}
_reported = set()


def _backend(response):
    headers = getattr(response, "headers", None) or {{}}
    value = headers.get(BACKEND_HEADER) if hasattr(headers, "get") else None
    if value:
        return str(value).strip()
    try:
        body = str(response.text or "").strip()
    except Exception:
        return ""
    return body if body and len(body) <= {max_body} and "\\n" not in body else ""


class SplitUser(FastHttpUser):
    host = {host!r}
    wait_time = constant({wait!r})
    network_timeout = {timeout!r}
    connection_timeout = {timeout!r}

    @task
    def get(self):
        with self.client.get(PATH, name=FAILED, catch_response=True) as response:
            status = int(getattr(response, "status_code", 0) or 0)
            if 0 < status < 400 and not getattr(response, "error", None):
                response.request_meta["name"] = _backend(response) or "-unnamed-"
                response.success()
            else:
                response.failure("status %d" % status)


@events.worker_report.add_listener
def _worker_reported(client_id, data, **kwargs):
    _reported.add(client_id)


@events.quitting.add_listener
def _say_workers(environment, **kwargs):
    if isinstance(environment.runner, MasterRunner):
        print(MARKER + json.dumps(sorted(_reported)), flush=True)
'''


def locustfile(
    url: str,
    *,
    backend_header: str = "X-Backend",
    wait: float = 0.0,
    request_timeout: float = 5.0,
) -> str:
    """Text of the locustfile master and workers load (see the module notes).

    Parameters
    ----------
    url:
        Target URL (``http://host[:port]/path``): its origin is the users' host, its path and
        query what they GET.
    backend_header:
        Response header naming the backend.
    wait:
        Seconds each user waits between requests (0: back to back).
    request_timeout:
        Seconds one request may take (connection and response).

    Raises
    ------
    cnibench.errors.ConfigError
        A URL without ``http(s)://host``, a negative wait or a non-positive timeout.
    """
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise ConfigError(f"locust: url must look like http://host[:port]/path, got {url!r}")
    if not math.isfinite(wait) or wait < 0:
        raise ConfigError(f"locust: wait must be zero or more seconds, got {wait!r}")
    require_positive(request_timeout, tool=TOOL, name="request_timeout")
    path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    return _LOCUSTFILE.format(
        path=path,
        header=backend_header,
        failed=FAILED_NAME,
        marker=WORKERS_MARKER,
        unversioned=UNVERSIONED,
        max_body=_MAX_BODY_NAME,
        host=f"{parts.scheme}://{parts.netloc}",
        wait=float(wait),
        timeout=float(request_timeout),
    )


LOCUST_DIR = "/tmp/cnibench-locust"
"""Folder of the locustfile and the master's CSVs in a load pod (no ``__init__.py``: locust
imports the file as a module of its own)."""


def write_locustfile_argv(text: str, *, directory: str = LOCUST_DIR) -> list[str]:
    """Command that writes ``text`` to ``<directory>/locustfile.py`` in a pod (through exec,
    which has no standard input: the text is an argument of ``sh``)."""
    script = 'mkdir -p "$1" && printf "%s" "$2" > "$1/locustfile.py"'
    return ["sh", "-c", script, "sh", directory, text]


def _check_workers(workers: int) -> None:
    if not 1 <= workers <= MAX_WORKERS:
        raise ConfigError(f"--load-workers: {workers} is outside 1..{MAX_WORKERS}")


def master_argv(
    locustfile_path: str,
    *,
    users: int,
    spawn_rate: float,
    duration: float,
    workers: int,
    csv_prefix: str,
    workers_wait: float = 60.0,
) -> list[str]:
    """Command line of the headless master.

    Parameters
    ----------
    locustfile_path:
        Where :func:`locustfile`'s text was written in the master's pod.
    users, spawn_rate:
        Virtual users in all, and users started per second (locust shares both out).
    duration:
        Seconds of load (``--run-time``, whole seconds, rounded up).
    workers:
        Workers that must connect before the users start (``--expect-workers``).
    csv_prefix:
        ``--csv`` prefix: the master writes ``<prefix>_stats.csv`` and, with the full history,
        ``<prefix>_stats_history.csv`` (a row per name per second).
    workers_wait:
        Seconds the master waits for its workers before it gives up
        (``--expect-workers-max-wait``).

    Raises
    ------
    cnibench.errors.ConfigError
        Non-positive users, rates or durations, or workers outside 1..:data:`MAX_WORKERS`.
    """
    if users < 1:
        raise ConfigError(f"locust: users must be at least 1, got {users}")
    _check_workers(workers)
    require_positive(spawn_rate, tool=TOOL, name="spawn_rate")
    require_positive(duration, tool=TOOL, name="duration")
    require_positive(workers_wait, tool=TOOL, name="workers_wait")
    return [
        "locust",
        "-f",
        locustfile_path,
        "--master",
        "--master-bind-port",
        str(MASTER_PORT),
        "--headless",
        "--expect-workers",
        str(workers),
        "--expect-workers-max-wait",
        str(math.ceil(workers_wait)),
        "--users",
        str(users),
        "--spawn-rate",
        format_number(spawn_rate),
        "--run-time",
        f"{math.ceil(duration)}s",
        "--csv",
        csv_prefix,
        "--csv-full-history",
        "--only-summary",
        "--exit-code-on-error",
        "0",
    ]


def worker_argv(locustfile_path: str, *, master_host: str) -> list[str]:
    """Command line of one worker, connecting to the master's pod at ``master_host``."""
    if not master_host:
        raise ConfigError("locust: a worker needs the master's address")
    return [
        "locust",
        "-f",
        locustfile_path,
        "--worker",
        "--master-host",
        master_host,
        "--master-port",
        str(MASTER_PORT),
    ]


@dataclass(frozen=True)
class MasterStats:
    """What the master's ``<prefix>_stats.csv`` says of one run.

    Attributes
    ----------
    requests, failures:
        All requests, and those that failed (no response, or status >= 400).
    requests_per_second:
        The master's own rate over the run (its ``Aggregated`` row's ``Requests/s``).
    latency_mean_ms:
        Mean response time in ms over every request.
    backends:
        Successful responses per backend name (the rows other than :data:`FAILED_NAME`).
    """

    requests: int
    failures: int
    requests_per_second: float
    latency_mean_ms: float
    backends: Mapping[str, int] = field(repr=False)


def _rows(text: str, *, what: str, needed: Sequence[str]) -> list[dict[str, str]]:
    reader = csv.DictReader(io.StringIO(text))
    missing = [name for name in needed if name not in (reader.fieldnames or ())]
    if missing:
        raise ParseError(
            f"locust {what} lacks the column(s) {', '.join(missing)}", tool=TOOL, output=text[:2000]
        )
    return list(reader)


def parse_master_stats(text: str) -> MasterStats:
    """Read the master's ``<prefix>_stats.csv``.

    Raises
    ------
    cnibench.errors.ParseError
        A missing column or ``Aggregated`` row, or a value that is not a number.
    cnibench.errors.ToolError
        The run made no request at all.
    """
    needed = ("Name", "Request Count", "Failure Count", "Average Response Time", "Requests/s")
    rows = _rows(text, what="stats", needed=needed)
    try:
        total = next(row for row in rows if row["Name"] == _AGGREGATED)
        requests = int(total["Request Count"])
        failures = int(total["Failure Count"])
        backends = {
            row["Name"]: int(row["Request Count"]) - int(row["Failure Count"])
            for row in rows
            if row["Name"] not in (_AGGREGATED, FAILED_NAME)
        }
        rate = float(total["Requests/s"])
        latency = float(total["Average Response Time"])
    except StopIteration:
        raise ParseError("locust stats have no Aggregated row", tool=TOOL, output=text) from None
    except (TypeError, ValueError) as exc:
        raise ParseError(f"locust stats are malformed: {exc}", tool=TOOL, output=text) from exc
    if requests == 0:
        raise ToolError("locust's workers made no request at all", tool=TOOL, output=text)
    return MasterStats(
        requests=requests,
        failures=failures,
        requests_per_second=rate,
        latency_mean_ms=latency,
        backends=MappingProxyType({k: v for k, v in backends.items() if v > 0}),
    )


def history_samples(text: str) -> tuple[list[float], list[str]]:
    """The master's ``<prefix>_stats_history.csv`` (``--csv-full-history``) as one
    (time, backend) pair per successful request, for
    :func:`cnibench.stats.windowed_shares`.

    The history holds each name's running totals once a second (workers report every 3 s),
    not each request: the successes a backend gained between two rows are placed at the
    earlier row's time (s since the epoch), so a window's share is that of the requests the
    master heard of in it.

    Raises
    ------
    cnibench.errors.ParseError
        A missing column or a value that is not a number.
    """
    needed = ("Timestamp", "Name", "Total Request Count", "Total Failure Count")
    rows = _rows(text, what="stats history", needed=needed)
    last: dict[str, tuple[float, int]] = {}
    times: list[float] = []
    names: list[str] = []
    try:
        for row in sorted(rows, key=lambda r: float(r["Timestamp"])):
            name = row["Name"]
            if name in (_AGGREGATED, FAILED_NAME):
                continue
            when = float(row["Timestamp"])
            ok = int(row["Total Request Count"]) - int(row["Total Failure Count"])
            since, before = last.get(name, (when, 0))
            gained = ok - before
            if gained > 0:
                times.extend([since] * gained)
                names.extend([name] * gained)
            last[name] = (when, max(ok, before))
    except (TypeError, ValueError) as exc:
        raise ParseError(f"locust stats history is malformed: {exc}", tool=TOOL) from exc
    return times, names


def parse_workers(output: str) -> tuple[str, ...]:
    """The workers that reported to the master, from the line the locustfile prints there
    (:data:`WORKERS_MARKER`); each is ``<pod name>_<uuid>``.

    Raises
    ------
    cnibench.errors.ToolError
        The master gave up waiting for its workers (``--expect-workers-max-wait``): one line.
    cnibench.errors.ParseError
        No such line otherwise (the master did not run the locustfile to its end).
    """
    for line in reversed(output.splitlines()):
        _, marker, rest = line.partition(WORKERS_MARKER)
        if marker:
            try:
                return tuple(str(worker) for worker in json.loads(rest))
            except (json.JSONDecodeError, TypeError) as exc:
                raise ParseError(
                    f"locust master's worker line is malformed: {exc}", tool=TOOL
                ) from exc
    if "Gave up waiting for workers" in output:
        seen = re.findall(r"(\d+ of \d+) connected", output)
        last = f" (last seen: {seen[-1]} connected)" if seen else ""
        raise ToolError(
            f"fewer locust workers than asked connected to the master in time{last}: no result"
            " from fewer workers than asked",
            tool=TOOL,
            output=output[-2000:],
        )
    raise ParseError(
        "the locust master named no workers (it did not reach its end)",
        tool=TOOL,
        output=output[-2000:],
    )


def require_workers(workers: Sequence[str], pods: Sequence[str]) -> None:
    """Refuse a result made by fewer workers than asked: every pod in ``pods`` must have a
    worker among ``workers`` (the ids the master reported).

    Raises
    ------
    cnibench.errors.ToolError
        One line naming how many connected and which pods' workers did not.
    """
    missing = [pod for pod in pods if not any(w.startswith(f"{pod}_") for w in workers)]
    if missing:
        raise ToolError(
            f"only {len(pods) - len(missing)} of {len(pods)} locust workers reported to the"
            f" master (none from {', '.join(missing)}): no result from fewer workers than asked",
            tool=TOOL,
        )
