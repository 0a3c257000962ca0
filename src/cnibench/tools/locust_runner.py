"""The split scenario's load: many virtual users against one URL, one record per request.

The split scenario needs, for every request, when it was made and which backend answered, to
compute shares per backend and per 5 s window. Two engines drive the virtual users:

* ``epoll`` (the default): cnibench's own closed-loop HTTP/1.1 client,
  :mod:`cnibench.tools.epoll_load`, one keep-alive connection per user, all in one epoll loop.
  On this project's 2-core machine it made 1.3 to 1.5 times hey's requests/s against the lab's
  split gateway, where locust made 0.4 (the gateway shares the cores with the load, so every
  cycle the load generator spends is one the gateway lacks).
* ``locust``: locust's ``FastHttpUser`` as a library, a request-event listener writing the rows;
  for those who want locust's user model (and for the comparison in ``bench/loadgen.py``).

locust monkey-patches the whole process with gevent when it is imported, so it never runs in
the caller's process: :func:`locust_runner_argv` builds the command of a child process,

    python -m cnibench.tools.locust_runner --url http://H:P/ --users 100 --spawn-rate 100 \\
        --duration 10 --backend-header X-Backend --out FILE [--engine epoll|locust]

which writes the records to ``FILE`` (``-`` for standard output) and prints one JSON summary
line (to standard output, or standard error when the records go there). One Python process
drives only as many requests as one core allows, so the users are spread over ``--processes``
runner processes (default: one per core, never more than users): the first starts one child
per share, each a whole locust run of its own, lets them all start their users at once (each
reports when locust is imported, then waits for the parent's word, which names one end time
for all, so a child woken late runs shorter rather than later), and merges their records
(ordered by start time) and summaries into one. Records are CSV with the header
``time,backend,latency_ms,status,error``:

* ``time``: when the request started, seconds since the epoch (µs resolution),
* ``backend``: the value of the backend header, or else the response body when it is one short
  line (the echo backends answer with their name), else empty,
* ``latency_ms``: the response time in ms (until the whole body was read),
* ``status``: HTTP status, 0 when no response arrived,
* ``error``: empty on success, else the failure's exception type and message.

Users wait 0 s between requests unless ``--wait`` is given, so the load is as high as the
users can make it. The run stops ``--duration`` seconds after the first user starts (the
spawn ramp included); requests in flight at that moment are dropped, and the process exits
within ``--duration`` + ``--request-timeout`` + a few seconds in every case.

:func:`parse_locust_records` reads the records into a :class:`LocustRun` (a pandas DataFrame
plus rates), :func:`parse_locust_summary` the summary line.
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import io
import json
import logging
import math
import os
import signal
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import IO, TYPE_CHECKING, Any
from urllib.parse import urlsplit

from cnibench.errors import ConfigError, ParseError, ToolError
from cnibench.tools._common import format_number, require_positive

if TYPE_CHECKING:
    import pandas as pd

__all__ = [
    "ENGINES",
    "RECORD_COLUMNS",
    "LocustRun",
    "LocustSummary",
    "locust_runner_argv",
    "main",
    "parse_locust_records",
    "parse_locust_summary",
]

TOOL = "load-runner"
"""The tool name errors carry: the runner, whichever engine it drives."""
ENGINES = ("epoll", "locust")
"""The load engines, the default first (see the module notes)."""
RECORD_COLUMNS = ("time", "backend", "latency_ms", "status", "error")
"""Columns of the record CSV, in order."""
_MODULE = "cnibench.tools.locust_runner"
_MAX_BODY_NAME = 64
"""Longest response body still taken as a backend name (bytes)."""
_STOP_GRACE_S = 5.0
_MERGE_GRACE_S = 15.0
"""Extra seconds a parent of several runners gets: their start-up and the merge."""
_RECORD_DTYPES: dict[str, str] = {
    "time": "float64",
    "backend": "str",
    "latency_ms": "float64",
    "status": "int64",
    "error": "str",
}


def locust_runner_argv(
    url: str,
    *,
    users: int,
    spawn_rate: float,
    duration: float,
    out: str,
    backend_header: str = "X-Backend",
    wait: float = 0.0,
    request_timeout: float = 5.0,
    processes: int | None = None,
    python: str | None = None,
    engine: str = ENGINES[0],
) -> list[str]:
    """Command line of the locust runner process.

    Parameters
    ----------
    url:
        Target URL (``http://host[:port]/path``).
    users:
        Virtual users (seed 000 used 1, 10, 100 and 1000).
    spawn_rate:
        Users started per second.
    duration:
        Seconds from the first user's start to the end of the run.
    out:
        File for the record CSV, or ``"-"`` for standard output.
    backend_header:
        Response header naming the backend.
    wait:
        Seconds each user waits between its requests (0: back to back).
    request_timeout:
        Seconds one request may take (connection and response) before it counts as failed.
    processes:
        Runner processes sharing the users; ``None``: one per core of the machine the runner
        runs on (at most ``users``).
    python:
        Interpreter; defaults to the one running cnibench.
    engine:
        ``epoll`` (cnibench's own client, plain ``http://`` to an address) or ``locust``.

    Returns
    -------
    list of str
        ``[python, "-P", "-m", "cnibench.tools.locust_runner", "--url", url, ...]`` (``-P``:
        the working directory stays off ``sys.path``).

    Raises
    ------
    cnibench.errors.ConfigError
        On a URL without ``http(s)://host``, or non-positive users, rates, durations and
        processes, or an unknown engine.
    """
    _check_url(url)
    if engine not in ENGINES:
        raise ConfigError(
            f"locust runner: unknown engine {engine!r}: choose {' or '.join(ENGINES)}"
        )
    if engine == "epoll" and urlsplit(url).scheme != "http":
        raise ConfigError(f"the epoll engine speaks plain http://, got {url!r}: use engine locust")
    if users < 1:
        raise ConfigError(f"locust: users must be at least 1, got {users}")
    if processes is not None and processes < 1:
        raise ConfigError(f"locust: processes must be at least 1, got {processes}")
    require_positive(spawn_rate, tool=TOOL, name="spawn_rate")
    require_positive(duration, tool=TOOL, name="duration")
    require_positive(request_timeout, tool=TOOL, name="request_timeout")
    if not math.isfinite(wait) or wait < 0:
        raise ConfigError(f"locust: wait must be zero or more seconds, got {wait!r}")
    if not out:
        raise ConfigError("locust: out must be a file path or '-'")
    argv = [python or sys.executable, "-P", "-m", _MODULE, "--url", url]
    argv += ["--users", str(users), "--spawn-rate", format_number(spawn_rate)]
    argv += ["--duration", format_number(duration), "--backend-header", backend_header]
    argv += ["--request-timeout", format_number(request_timeout), "--out", out]
    argv += ["--engine", engine]
    if wait:
        argv += ["--wait", format_number(wait)]
    if processes is not None:
        argv += ["--processes", str(processes)]
    return argv


def _check_url(url: str) -> None:
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise ConfigError(f"locust: url must look like http://host[:port]/path, got {url!r}")


@dataclass(frozen=True)
class LocustSummary:
    """The summary line of a runner process.

    Attributes
    ----------
    requests, failures:
        Requests recorded, and those that failed (no response or status >= 400).
    requests_per_second:
        ``requests`` divided by ``duration_s``.
    duration_s:
        Wall time from the first user's start to the stop, in seconds.
    users:
        Virtual users asked for.
    backends:
        Successful responses per backend name.
    statuses:
        Responses per HTTP status (0: no response).
    engine:
        The engine that made the requests (:data:`ENGINES`); empty for a summary of a runner
        older than the engines.
    """

    requests: int
    failures: int
    requests_per_second: float
    duration_s: float
    users: int
    backends: Mapping[str, int] = field(repr=False)
    statuses: Mapping[int, int] = field(repr=False)
    engine: str = ""


@dataclass(frozen=True)
class LocustRun:
    """All requests of one locust run.

    Attributes
    ----------
    records:
        One row per request with columns ``time`` (epoch s, float), ``backend`` (str),
        ``latency_ms`` (float), ``status`` (int) and ``error`` (str, empty on success), in the
        order requests completed.
    requests_per_second:
        Requests divided by the span from the first request's start to the last one's end.
    failures:
        Requests without a response or with status >= 400.
    """

    records: pd.DataFrame = field(repr=False, compare=False)
    requests_per_second: float
    failures: int

    @property
    def requests(self) -> int:
        """Number of requests recorded."""
        return len(self.records)

    def backend_counts(self) -> Mapping[str, int]:
        """Successful responses per backend name (the split scenario's observed counts)."""
        ok = self.records[_success(self.records)]
        counts = ok["backend"].value_counts()
        return MappingProxyType({str(k): int(v) for k, v in counts.items()})


def _success(records: pd.DataFrame) -> Any:
    return (records["status"] > 0) & (records["status"] < 400) & (records["error"] == "")


def parse_locust_records(source: str | Path) -> LocustRun:
    """Read the record CSV a runner process wrote.

    Parameters
    ----------
    source:
        A :class:`pathlib.Path` to the file, or the CSV text itself (a ``str``).

    Returns
    -------
    LocustRun
        The records as a DataFrame, the request rate (requests/s) and the failure count.

    Raises
    ------
    cnibench.errors.ParseError
        When the file cannot be read, the header is not ``time,backend,latency_ms,status,error``
        or a value has the wrong type.
    cnibench.errors.ToolError
        When there is not a single record (the run made no request at all).
    """
    import pandas as pd

    if isinstance(source, Path):
        try:
            text = source.read_text(encoding="utf-8")
        except OSError as exc:
            raise ParseError(f"cannot read load records {source}: {exc}", tool=TOOL) from exc
    else:
        text = source
    header = text.split("\n", 1)[0].strip()
    if header != ",".join(RECORD_COLUMNS):
        hint = " (pass a pathlib.Path to read a file)" if "\n" not in text.strip() else ""
        raise ParseError(
            f"load records must start with {','.join(RECORD_COLUMNS)!r}, got {header[:80]!r}{hint}",
            tool=TOOL,
            output=text[:2000],
        )
    try:
        records = pd.read_csv(
            io.StringIO(text),
            dtype=_RECORD_DTYPES,
            keep_default_na=False,
        )
    except (ValueError, pd.errors.ParserError) as exc:
        raise ParseError(
            f"load records are malformed: {exc}", tool=TOOL, output=text[:2000]
        ) from exc
    if records.empty:
        raise ToolError("the load runner made no request at all", tool=TOOL, output=text[:2000])
    span = float((records["time"] + records["latency_ms"] / 1000.0).max() - records["time"].min())
    failures = int((~_success(records)).sum())
    rate = len(records) / span if span > 0 else float("nan")
    return LocustRun(records=records, requests_per_second=rate, failures=failures)


def parse_locust_summary(text: str) -> LocustSummary:
    """Read the JSON summary line a runner process printed (the last JSON line of ``text``).

    Raises
    ------
    cnibench.errors.ToolError
        When the summary reports an error.
    cnibench.errors.ParseError
        When there is no summary line.
    """
    for line in reversed(text.splitlines()):
        line = line.strip()
        if not line.startswith("{"):
            continue
        try:
            item = json.loads(line)
        except json.JSONDecodeError:
            continue
        if "error" in item:
            raise ToolError(f"load runner failed: {item['error']}", tool=TOOL, output=text)
        try:
            return LocustSummary(
                requests=int(item["requests"]),
                failures=int(item["failures"]),
                requests_per_second=float(item["requests_per_second"]),
                duration_s=float(item["duration_s"]),
                users=int(item["users"]),
                backends=MappingProxyType({str(k): int(v) for k, v in item["backends"].items()}),
                statuses=MappingProxyType({int(k): int(v) for k, v in item["statuses"].items()}),
                engine=str(item.get("engine", "")),
            )
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise ParseError(f"load runner summary lacks {exc!r}", tool=TOOL, output=text) from exc
    raise ParseError("the load runner printed no summary line", tool=TOOL, output=text)


# --- the runner process -----------------------------------------------------------------------


class _RecordWriter:
    """Writes one CSV row per request and keeps the counts for the summary."""

    def __init__(self, stream: IO[str], backend_header: str) -> None:
        self._writer = csv.writer(stream, lineterminator="\n")
        self._writer.writerow(RECORD_COLUMNS)
        self._header = backend_header
        self.requests = 0
        self.failures = 0
        self.backends: dict[str, int] = {}
        self.statuses: dict[int, int] = {}
        self.write_error = ""

    def on_request(
        self,
        *,
        start_time: float,
        response_time: float,
        response: Any,
        exception: BaseException | None,
        **_: Any,
    ) -> None:
        status = int(getattr(response, "status_code", 0) or 0)
        backend = self._backend(response) if status else ""
        error = "" if exception is None else f"{type(exception).__name__}: {exception}"[:200]
        self.requests += 1
        self.statuses[status] = self.statuses.get(status, 0) + 1
        if exception is None and 0 < status < 400:
            self.backends[backend] = self.backends.get(backend, 0) + 1
        else:
            self.failures += 1
        if self.write_error:
            return
        try:
            self._writer.writerow(
                (f"{start_time:.6f}", backend, f"{response_time:.3f}", status, error)
            )
        except OSError as exc:
            # Disk full or a closed pipe: keep counting, stop writing, report it at the end.
            self.write_error = str(exc)

    def _backend(self, response: Any) -> str:
        headers = getattr(response, "headers", None)
        if headers is not None:
            value = headers.get(self._header)
            if value:
                return str(value).strip()
        try:
            body = str(response.text or "").strip()
        except Exception:  # a body that cannot be decoded names no backend
            return ""
        if body and len(body) <= _MAX_BODY_NAME and "\n" not in body:
            return body
        return ""


def _run(options: argparse.Namespace, records: IO[str]) -> dict[str, object]:
    if options.engine == "epoll":
        return _run_epoll(options, records)
    # Importing locust monkey-patches this process with gevent; that is why this runs in a
    # process of its own.
    import gevent
    from locust import FastHttpUser, constant, task
    from locust.env import Environment

    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    parts = urlsplit(options.url)
    path = parts.path or "/"
    if parts.query:
        path += "?" + parts.query

    class SplitUser(FastHttpUser):
        host = f"{parts.scheme}://{parts.netloc}"
        wait_time = constant(options.wait)
        network_timeout = options.request_timeout
        connection_timeout = options.request_timeout

        @task
        def get(self) -> None:
            self.client.get(path, name=path)

    seconds = _await_siblings(options)
    writer = _RecordWriter(records, options.backend_header)
    environment = Environment(user_classes=[SplitUser])
    environment.events.request.add_listener(writer.on_request)  # type: ignore[no-untyped-call]
    runner = environment.create_local_runner()
    started = time.time()
    runner.start(options.users, spawn_rate=options.spawn_rate)
    # Load pacing, not a wait: the users send for the run's duration, and gevent.sleep is
    # what yields this greenlet's time to them (tests/unit/test_waiting.py lists it).
    gevent.sleep(seconds)  # load pacing: the run's duration
    runner.quit()
    duration = time.time() - started
    records.flush()
    if writer.write_error:
        return {"error": f"cannot write records: {writer.write_error}"}
    return _summary(
        options,
        requests=writer.requests,
        failures=writer.failures,
        duration=duration,
        processes=1,
        backends=writer.backends,
        statuses=writer.statuses,
    )


def _run_epoll(options: argparse.Namespace, records: IO[str]) -> dict[str, object]:
    from cnibench.tools.epoll_load import EpollLoad, Record, run_epoll_load

    seconds = _await_siblings(options)
    load = EpollLoad(
        url=options.url,
        users=options.users,
        spawn_rate=options.spawn_rate,
        duration=seconds,
        backend_header=options.backend_header,
        wait=options.wait,
        request_timeout=options.request_timeout,
    )
    writer = csv.writer(records, lineterminator="\n")
    writer.writerow(RECORD_COLUMNS)
    counts = {"requests": 0, "failures": 0}
    backends: dict[str, int] = {}
    statuses: dict[int, int] = {}
    write_error = ""

    def emit(batch: list[Record]) -> None:
        nonlocal write_error
        for _, backend, _, status, error in batch:
            statuses[status] = statuses.get(status, 0) + 1
            if not error and 0 < status < 400:
                backends[backend] = backends.get(backend, 0) + 1
            else:
                counts["failures"] += 1
        counts["requests"] += len(batch)
        if write_error:
            return
        try:
            writer.writerows(
                (f"{start:.6f}", backend, f"{latency:.3f}", status, error)
                for start, backend, latency, status, error in batch
            )
        except OSError as exc:
            write_error = str(exc)

    duration = run_epoll_load(load, emit)
    records.flush()
    if write_error:
        return {"error": f"cannot write records: {write_error}"}
    return _summary(
        options,
        requests=counts["requests"],
        failures=counts["failures"],
        duration=duration,
        processes=1,
        backends=backends,
        statuses=statuses,
    )


def _shares(total: int, parts: int) -> list[int]:
    """``total`` split into ``parts`` whole shares differing by at most one."""
    return [total // parts + (1 if index < total % parts else 0) for index in range(parts)]


def _await_siblings(options: argparse.Namespace) -> float:
    """Seconds this runner loads for. A child of a parent runner (``--barrier``) says it is
    loaded, waits for the go, and stops at the end time the parent sent to every sibling, so a
    child woken late (a busy machine) runs shorter instead of later and the merged records span
    ``--duration``; any other runner loads for ``--duration``."""
    if not options.barrier:
        return float(options.duration)
    print("ready", flush=True)
    ends_at = float(sys.stdin.readline() or 0.0)
    return max(0.0, min(float(options.duration), ends_at - time.time()))


def _processes_run(processes: int) -> Any:
    """A run function spreading the users over ``processes`` child runners (see the notes)."""

    def run(options: argparse.Namespace, records: IO[str]) -> dict[str, object]:
        import subprocess
        import tempfile

        with tempfile.TemporaryDirectory(prefix="cnibench-locust-") as tmp:
            children = []
            for index, users in enumerate(_shares(options.users, processes)):
                out = Path(tmp) / f"records-{index}.csv"
                argv = locust_runner_argv(
                    options.url,
                    users=users,
                    spawn_rate=options.spawn_rate * users / options.users,
                    duration=options.duration,
                    out=str(out),
                    backend_header=options.backend_header,
                    wait=options.wait,
                    request_timeout=options.request_timeout,
                    processes=1,
                    engine=options.engine,
                )
                child = subprocess.Popen(
                    [*argv, "--barrier"],
                    stdin=subprocess.PIPE,
                    stdout=subprocess.PIPE,
                    stderr=subprocess.PIPE,
                    text=True,
                )
                children.append((child, out))
            # Each child bounds itself (its own alarm); the parent's alarm bounds these waits.
            ready = [child.stdout.readline() if child.stdout else "" for child, _ in children]
            ends_at = time.time() + options.duration  # one end for all: see _await_siblings
            for child, _ in children:
                with contextlib.suppress(OSError):  # a child that died is reported below
                    if child.stdin:
                        child.stdin.write(f"{ends_at:.6f}\n")
                        child.stdin.flush()
            summaries = []
            for (child, _), said in zip(children, ready, strict=True):
                stdout, stderr = child.communicate()
                stdout = said + stdout
                try:
                    summaries.append(parse_locust_summary(stdout))
                except (ToolError, ParseError) as exc:
                    return {"error": f"{exc} {stderr.strip()[-300:]}".strip()}
            rows: list[list[str]] = []
            for _, out in children:
                with open(out, encoding="utf-8", newline="") as part:
                    reader = csv.reader(part)
                    next(reader, None)
                    rows.extend(reader)
        rows.sort(key=lambda row: float(row[0]))
        writer = csv.writer(records, lineterminator="\n")
        writer.writerow(RECORD_COLUMNS)
        writer.writerows(rows)
        records.flush()
        return _merged(summaries, options)

    return run


def _merged(summaries: Sequence[LocustSummary], options: argparse.Namespace) -> dict[str, object]:
    """One summary of the children's: counts added, the longest duration, the rate over it."""
    requests = sum(s.requests for s in summaries)
    duration = max(s.duration_s for s in summaries)
    backends: dict[str, int] = {}
    statuses: dict[int, int] = {}
    for summary in summaries:
        for name, count in summary.backends.items():
            backends[name] = backends.get(name, 0) + count
        for status, count in summary.statuses.items():
            statuses[status] = statuses.get(status, 0) + count
    return _summary(
        options,
        requests=requests,
        failures=sum(s.failures for s in summaries),
        duration=duration,
        processes=len(summaries),
        backends=backends,
        statuses=statuses,
    )


def _summary(
    options: argparse.Namespace,
    *,
    requests: int,
    failures: int,
    duration: float,
    processes: int,
    backends: Mapping[str, int],
    statuses: Mapping[int, int],
) -> dict[str, object]:
    """The JSON summary line every engine and the merging parent print."""
    return {
        "requests": requests,
        "failures": failures,
        "requests_per_second": requests / duration if duration > 0 else 0.0,
        "duration_s": duration,
        "users": options.users,
        "spawn_rate": options.spawn_rate,
        "url": options.url,
        "processes": processes,
        "engine": options.engine,
        "backends": dict(backends),
        "statuses": {str(k): v for k, v in sorted(statuses.items())},
    }


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``python -m cnibench.tools.locust_runner`` (see the module notes).

    Returns
    -------
    int
        0 after a run (even one with failed requests), 1 when the run could not happen,
        2 on a usage error.
    """
    parser = argparse.ArgumentParser(
        prog=f"python -m {_MODULE}",
        description="Load one URL with virtual users and record every request as CSV.",
    )
    parser.add_argument("--url", required=True, help="target URL, http://host[:port]/path")
    parser.add_argument("--users", type=int, required=True, metavar="N", help="virtual users")
    parser.add_argument("--spawn-rate", type=float, required=True, metavar="N", help="users/s")
    parser.add_argument("--duration", type=float, required=True, metavar="SECONDS")
    parser.add_argument("--out", required=True, metavar="FILE", help="record CSV, '-' = stdout")
    parser.add_argument("--backend-header", default="X-Backend", metavar="NAME")
    parser.add_argument("--wait", type=float, default=0.0, metavar="SECONDS")
    parser.add_argument("--request-timeout", type=float, default=5.0, metavar="SECONDS")
    parser.add_argument(
        "--processes", type=int, default=None, metavar="N", help="default: one per core"
    )
    parser.add_argument("--engine", choices=ENGINES, default=ENGINES[0])
    parser.add_argument("--barrier", action="store_true", help=argparse.SUPPRESS)
    options = parser.parse_args(argv)
    try:
        locust_runner_argv(
            options.url,
            users=options.users,
            spawn_rate=options.spawn_rate,
            duration=options.duration,
            out=options.out,
            backend_header=options.backend_header,
            wait=options.wait,
            request_timeout=options.request_timeout,
            processes=options.processes,
            engine=options.engine,
        )
    except ConfigError as exc:
        parser.error(str(exc))
    processes = min(options.users, options.processes or os.cpu_count() or 1)
    if options.barrier and (processes != 1 or options.out == "-"):
        parser.error("--barrier is for the children of a parent runner (--processes 1, a file)")

    # Hard bound: whatever locust or gevent do, the process ends in time.
    signal.signal(signal.SIGALRM, _overrun)
    bound = options.duration + options.request_timeout + _STOP_GRACE_S
    signal.alarm(math.ceil(bound + (_MERGE_GRACE_S if processes > 1 else 0)))
    to_stdout = options.out == "-"
    summary_stream = sys.stderr if to_stdout else sys.stdout
    run = _run if processes == 1 else _processes_run(processes)
    try:
        if to_stdout:
            summary = run(options, sys.stdout)
        else:
            with open(options.out, "w", encoding="utf-8", newline="") as records:
                summary = run(options, records)
    except OSError as exc:
        print(json.dumps({"error": f"cannot write records: {exc}"}), file=summary_stream)
        return 1
    print(json.dumps(summary), file=summary_stream, flush=True)
    return 1 if "error" in summary else 0


def _overrun(signum: int, frame: object) -> None:
    print(json.dumps({"error": "the load run overran its time bound and was stopped"}), flush=True)
    os._exit(1)


if __name__ == "__main__":
    _code = main()
    sys.stdout.flush()
    sys.stderr.flush()
    # gevent's hub and locust's leftover greenlets can delay interpreter shutdown; the work and
    # its output are complete at this point.
    os._exit(_code)
