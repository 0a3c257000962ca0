"""Traffic split: do weighted routes deliver the configured shares, over time and under load?

Seed 000 loaded a Gateway API route with weights 60/40 from outside the cluster with locust and
counted which backend answered each request. Here a condition is (weights, virtual users); each
run records every request (time, backend) from the external host, and reports requests per
backend, :func:`cnibench.stats.splitting_error` and :func:`cnibench.stats.windowed_shares` in
5 s windows with their distance to the reference. The load engine
(:attr:`ScenarioOptions.load_engine`, ``--load-engine epoll|locust``) is a parameter of every
condition, so each record names the engine that made its requests. The raw records are kept
(gzip + base64 CSV, :data:`LOAD_RECORDS_FILE`) so reports can redraw the windows.

On a backend whose pods can carry the load (:attr:`~cnibench.backends.base.Backend.
load_in_pods`, Kubernetes), engine ``locust`` is locust's own master/worker distribution in
client pods (:mod:`cnibench.tools.locust_dist`): one master pod and ``load_workers`` worker
pods (a condition parameter), placed at set-up. The master's exported statistics give the same
measurements (per-backend counts from the requests named after the backend that answered);
its 1 s history gives the 5 s windows. No per-request records exist there, so such a run keeps
the master's CSVs (:data:`LOCUST_STATS_FILE`, :data:`LOCUST_HISTORY_FILE`) instead of
:data:`LOAD_RECORDS_FILE`. A run whose master heard from fewer workers than asked fails.
"""

from __future__ import annotations

import base64
import gzip
import json
import math
import sys
import warnings
from collections.abc import Mapping
from concurrent.futures import Future, ThreadPoolExecutor

from cnibench import stats
from cnibench.backends.base import (
    DEFAULT_PORTS,
    Backend,
    Capability,
    Cluster,
    CommandResult,
    Endpoint,
    NodeRole,
    Placement,
    WorkloadKind,
    WorkloadSpec,
)
from cnibench.errors import ConfigError, ToolError
from cnibench.extras import require_extra
from cnibench.records import Measurement, ParamValue
from cnibench.scenarios.base import Condition, Prepared, RunOutput, Scenario, Verification
from cnibench.scenarios.options import DEFAULT_LOAD_WORKERS, DEFAULT_OPTIONS, ScenarioOptions
from cnibench.scenarios.profiles import Profile
from cnibench.tools import locust_dist
from cnibench.tools.locust_runner import (
    locust_runner_argv,
    parse_locust_records,
    parse_locust_summary,
)

__all__ = [
    "LOAD_RECORDS_FILE",
    "LOAD_SUMMARY_FILE",
    "LOCUST_HISTORY_FILE",
    "LOCUST_STATS_FILE",
    "WINDOW_SECONDS",
    "SplitScenario",
    "split_duration",
    "weights_id",
]

HTTP_PORT = DEFAULT_PORTS[WorkloadKind.HTTP_ECHO]
WINDOW_SECONDS = 5.0
LOAD_RECORDS_FILE = "load-records.csv.gz.b64"
"""Raw file of every request of a run (gzip + base64 CSV), whichever engine made them."""
LOAD_SUMMARY_FILE = "load-summary.json"
"""Raw file of the load generator's summary, its ``engine`` included."""
LOCUST_STATS_FILE = "locust-stats.csv"
"""Raw file of the locust master's statistics (load in pods)."""
LOCUST_HISTORY_FILE = "locust-stats-history.csv"
"""Raw file of the locust master's per-second history of each backend's totals."""
LOAD_MASTER = "load-master"
LOAD_WORKER = "load-worker-{}"
"""Pod names of locust's master and workers (a worker's id at the master starts with it)."""
_WORKERS_WAIT = 90.0
"""Seconds the master waits for every worker before it gives up (the run then fails)."""
_VERIFY_REQUESTS = 40
_REQUEST_TIMEOUT = 10.0
_PROBE = """
import sys, urllib.request
for _ in range(int(sys.argv[2])):
    with urllib.request.urlopen(sys.argv[1], timeout=5) as r:
        print(r.headers.get("X-Backend", ""))
"""


def weights_id(weights: Mapping[str, int]) -> str:
    """``{"v1": 60, "v2": 40}`` -> ``"v1-60-v2-40"`` (readable, test-id safe)."""
    return "-".join(f"{name}-{weight}" for name, weight in weights.items())


def split_duration(profile: Profile) -> float:
    """Seconds of load per run: twice the profile's duration, at least two 5 s windows."""
    return max(2 * WINDOW_SECONDS, 2 * profile.duration)


def _spawn_rate(users: int) -> float:
    # All users within about a second: a slower ramp would leave the first window unloaded.
    return float(max(users, 1))


class SplitScenario(Scenario):
    """Weighted gateway in front of HTTP echo backends, loaded from the external host."""

    name = "split"
    primary_metrics = ("requests_per_second", "latency_mean", "cpu", "ram")
    compares_shares_with_weights = True

    def __init__(
        self, options: ScenarioOptions | None = None, *, load_in_pods: bool = False
    ) -> None:
        self.options = options or DEFAULT_OPTIONS
        self.load_workers: int | None = None
        """Workers of locust's distribution in pods; ``None``: the load runs on this host."""
        if load_in_pods and self.options.load_engine == "locust":
            self.load_workers = self.options.load_workers or DEFAULT_LOAD_WORKERS

    def on_backend(self, backend: Backend) -> SplitScenario:
        """This scenario with engine ``locust`` run as locust's master and workers in client
        pods where ``backend`` says its pods carry the load
        (:attr:`~cnibench.backends.base.Backend.load_in_pods`).

        Raises
        ------
        cnibench.errors.ConfigError
            ``--load-workers`` for a backend whose locust runs on this host (the lab), or
            ``--load-engine locust`` there without cnibench's locust extra.
        """
        if self.options.load_workers is not None and not backend.load_in_pods:
            raise ConfigError(
                f"--load-workers {self.options.load_workers}: backend {backend.name} runs locust"
                " on this host, without workers; drop the option"
            )
        if self.options.load_engine == "locust" and not backend.load_in_pods:
            require_extra("locust", f"--load-engine locust on {backend.name}")
        return SplitScenario(self.options, load_in_pods=backend.load_in_pods)

    def conditions(self) -> list[Condition]:
        """One condition per (weights, users), e.g. ``v1-60-v2-40-u100``; the load engine is a
        parameter of each (the same for all), not part of the id, and so, with locust's
        distribution in pods, is ``load_workers``."""
        extra: dict[str, ParamValue] = {}
        if self.load_workers is not None:
            extra["load_workers"] = self.load_workers
        return [
            Condition(
                self.name,
                f"{weights_id(weights)}-u{users}",
                {
                    "weights": json.dumps(dict(weights)),
                    "users": users,
                    "load_engine": self.options.load_engine,
                    **extra,
                },
            )
            for weights in self.options.weights
            for users in self.options.users
        ]

    def headline_metrics(self, condition: Condition) -> tuple[str, ...]:
        """Each backend's observed share (the condition id names its weight), the splitting
        error (largest ``|share - weight|``), then :attr:`primary_metrics`."""
        shares = tuple(f"share@{name}" for name in _weights(condition))
        return (*shares, "max_abs_error", *self.primary_metrics)

    def required_capabilities(self, condition: Condition) -> frozenset[Capability]:
        """Traffic split."""
        return frozenset({Capability.TRAFFIC_SPLIT})

    def prepare(self, cluster: Cluster, condition: Condition, profile: Profile) -> Prepared:
        """One HTTP echo pod per backend on the server node, and the weighted gateway; with
        ``load_workers``, locust's master and worker pods on the client node, each given the
        locustfile."""
        weights = _weights(condition)
        prepared = Prepared()
        echo = (WorkloadSpec(WorkloadKind.HTTP_ECHO, HTTP_PORT),)
        try:
            for name in weights:
                prepared.endpoints[name] = cluster.place(name, role=NodeRole.SERVER, workloads=echo)
            prepared.expected["url"] = cluster.create_split(
                {name: (prepared.endpoints[name], w) for name, w in weights.items()},
                port=HTTP_PORT,
            )
            if "load_workers" in condition.parameters:
                _place_load(cluster, prepared, int(condition.parameters["load_workers"]))
        except BaseException:
            self.cleanup(cluster, prepared)
            raise
        return prepared

    def verify(self, cluster: Cluster, prepared: Prepared, condition: Condition) -> Verification:
        """Sequential requests from the external host: every weighted backend answers and a
        weight-0 backend answers none."""
        weights = _weights(condition)
        result = cluster.external.run(
            [sys.executable, "-c", _PROBE, prepared.expected["url"], str(_VERIFY_REQUESTS)],
            timeout=60,
        )
        seen: dict[str, int] = dict.fromkeys(weights, 0)
        for line in result.stdout.split():
            seen[line] = seen.get(line, 0) + 1
        evidence: dict[str, ParamValue] = {f"verify_{k}": v for k, v in seen.items()}
        if result.returncode != 0:
            return Verification(
                False, f"{condition.id}: gateway failed: {result.stderr.strip()[-200:]}", evidence
            )
        silent = [name for name, w in weights.items() if w > 0 and seen.get(name, 0) == 0]
        leaking = [name for name, w in weights.items() if w == 0 and seen.get(name, 0) > 0]
        unknown = [name for name in seen if name not in weights]
        if silent or leaking or unknown:
            return Verification(
                False,
                f"{condition.id}: silent {silent}, weight-0 answering {leaking},"
                f" unknown {unknown} in {seen}",
                evidence,
            )
        return Verification(
            True, f"{condition.id}: {_VERIFY_REQUESTS} requests -> {seen}", evidence
        )

    def measure(
        self,
        cluster: Cluster,
        prepared: Prepared,
        condition: Condition,
        profile: Profile,
        repetition: int,
    ) -> RunOutput:
        """One load run from the external host (the condition's engine); shares, splitting
        error, 5 s windows."""
        weights = _weights(condition)
        users = int(condition.parameters["users"])
        seconds = split_duration(profile)
        if "load_workers" in condition.parameters:
            return _measure_in_pods(prepared, condition, weights, users=users, seconds=seconds)
        argv = locust_runner_argv(
            prepared.expected["url"],
            users=users,
            spawn_rate=_spawn_rate(users),
            duration=seconds,
            out="-",
            request_timeout=_REQUEST_TIMEOUT,
            engine=str(condition.parameters["load_engine"]),
        )
        result = cluster.external.run(argv, timeout=seconds + _REQUEST_TIMEOUT + 60)
        summary = parse_locust_summary(result.stderr)
        run = parse_locust_records(result.stdout)
        counts = {name: int(run.backend_counts().get(name, 0)) for name in weights}
        ok = run.records[run.records["backend"].isin(list(weights))]
        raw = {
            LOAD_RECORDS_FILE: base64.b64encode(gzip.compress(result.stdout.encode())).decode(),
            LOAD_SUMMARY_FILE: json.dumps(
                {
                    "engine": summary.engine,
                    "requests": summary.requests,
                    "failures": summary.failures,
                    "requests_per_second": summary.requests_per_second,
                    "statuses": dict(summary.statuses),
                }
            ),
        }
        return _output(
            condition,
            weights,
            counts,
            ok["time"].to_numpy(),
            ok["backend"].to_numpy(dtype=str),
            headline=[
                Measurement("requests_per_second", run.requests_per_second, "requests/s"),
                Measurement("requests", float(run.requests), "count"),
                Measurement("failures", float(run.failures), "count"),
            ],
            latency_mean=float(run.records["latency_ms"].mean()),
            raw=raw,
        )

    def cleanup(self, cluster: Cluster, prepared: Prepared) -> None:
        """Remove the gateway, then the backend (and load) pods."""
        if "url" in prepared.expected:
            cluster.remove_split()
        super().cleanup(cluster, prepared)


def _output(
    condition: Condition,
    weights: Mapping[str, int],
    counts: Mapping[str, int],
    times: object,
    backends: object,
    *,
    headline: list[Measurement],
    latency_mean: float,
    raw: dict[str, str],
) -> RunOutput:
    """The run's measurements from per-backend ``counts`` and the (time, backend) pairs of its
    successful requests (``times`` in s, ``backends`` names), whichever engine made them."""
    import numpy as np

    float_weights = {name: float(w) for name, w in weights.items()}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", stats.DegenerateDataWarning)
        split = stats.splitting_error(dict(counts), float_weights)
    names = np.asarray(backends, dtype=str)
    keep = np.isin(names, list(weights))
    windows = stats.windowed_shares(
        np.asarray(times, dtype=float)[keep],
        names[keep],
        window=WINDOW_SECONDS,
        weights=float_weights,
    )
    per_window = windows.groupby("window_start")["total_variation"].first()
    measurements = [
        *headline,
        Measurement("max_abs_error", split.max_abs_error, "ratio"),
        Measurement("total_variation", split.total_variation, "ratio"),
        Measurement("p_value", split.p_value, "probability"),
        Measurement("window_distance_mean", float(per_window.mean()), "ratio"),
        Measurement("window_distance_max", float(per_window.max()), "ratio"),
        Measurement("latency_mean", latency_mean, "ms"),
    ]
    for name in weights:
        low, high = split.intervals[name]
        measurements += [
            Measurement(f"requests@{name}", float(counts[name]), "count"),
            Measurement(f"share@{name}", split.observed[name], "ratio"),
            Measurement(f"error@{name}", split.error[name], "ratio"),
            Measurement(f"share_low@{name}", low, "ratio"),
            Measurement(f"share_high@{name}", high, "ratio"),
        ]
    split_json = {
        "n": split.n,
        "counts": split.counts,
        "observed": split.observed,
        "expected": split.expected,
        "error": split.error,
        "intervals": {k: list(v) for k, v in split.intervals.items()},
        "max_abs_error": split.max_abs_error,
        "total_variation": split.total_variation,
        "g_statistic": split.g_statistic,
        "p_value": None if math.isnan(split.p_value) else split.p_value,
        "zero_weight_hits": split.zero_weight_hits,
        "method": split.method,
        "level": split.level,
    }
    raw = {
        **raw,
        "splitting-error.json": json.dumps(split_json, indent=2),
        "windows.csv": windows.to_csv(index=False),
    }
    leaks = split.zero_weight_hits
    verification = Verification(
        not leaks,
        f"{condition.id}: weight-0 backends answering: {leaks or 'none'}",
        {f"requests_{k}": v for k, v in counts.items()},
    )
    return RunOutput(measurements, raw, verification)


def _place_load(cluster: Placement, prepared: Prepared, workers: int) -> None:
    """locust's master and ``workers`` worker pods on the client node, each holding the
    locustfile of ``prepared``'s gateway URL (registered in ``prepared`` as they come, so a
    failed set-up removes those placed)."""
    spec = (WorkloadSpec(WorkloadKind.LOAD_GENERATOR, locust_dist.MASTER_PORT),)
    text = locust_dist.locustfile(prepared.expected["url"], request_timeout=_REQUEST_TIMEOUT)
    names = [LOAD_MASTER, *(LOAD_WORKER.format(i) for i in range(workers))]
    for name in names:
        pod = cluster.place(name, role=NodeRole.CLIENT, workloads=spec)
        prepared.endpoints[name] = pod
        written = pod.run(locust_dist.write_locustfile_argv(text), timeout=60)
        if written.returncode != 0:
            raise ToolError(
                f"cannot write the locustfile in pod {name}: {written.stderr.strip()[-200:]}",
                tool=locust_dist.TOOL,
            )


def _measure_in_pods(
    prepared: Prepared,
    condition: Condition,
    weights: Mapping[str, int],
    *,
    users: int,
    seconds: float,
) -> RunOutput:
    """One run of locust's own distribution: the master and every worker started at once
    in their pods, the master's CSVs read back and turned into the split's measurements."""
    master: Endpoint = prepared.endpoints[LOAD_MASTER]
    workers = int(condition.parameters["load_workers"])
    pods: list[Endpoint] = [prepared.endpoints[LOAD_WORKER.format(i)] for i in range(workers)]
    path = f"{locust_dist.LOCUST_DIR}/locustfile.py"
    prefix = f"{locust_dist.LOCUST_DIR}/run"
    timeout = seconds + _WORKERS_WAIT + _REQUEST_TIMEOUT + 60
    master_argv = locust_dist.master_argv(
        path,
        users=users,
        spawn_rate=_spawn_rate(users),
        duration=seconds,
        workers=workers,
        csv_prefix=prefix,
        workers_wait=_WORKERS_WAIT,
    )
    worker_argv = locust_dist.worker_argv(path, master_host=master.ip)
    with ThreadPoolExecutor(max_workers=workers + 1) as pool:
        led = pool.submit(master.run, master_argv, timeout=timeout)
        followers = [pool.submit(pod.run, worker_argv, timeout=timeout) for pod in pods]
        result: CommandResult = led.result()
        heard = [_worker_said(follower) for follower in followers]
    said = result.stdout + "\n" + result.stderr
    try:
        reported = locust_dist.parse_workers(said)
        locust_dist.require_workers(reported, [pod.name for pod in pods])
    except ToolError as exc:
        # What the first worker said is where a worker that never connected tells why.
        last = next((line for line in reversed(heard[0].splitlines()) if line.strip()), "")
        raise ToolError(
            f"{exc}; {pods[0].name} said: {last.strip()[-300:] or 'nothing'}",
            tool=locust_dist.TOOL,
            output="\n".join(heard)[-4000:],
        ) from exc
    stats_text = master.run(["cat", f"{prefix}_stats.csv"], timeout=60).stdout
    history_text = master.run(["cat", f"{prefix}_stats_history.csv"], timeout=60).stdout
    master_stats = locust_dist.parse_master_stats(stats_text)
    times, names = locust_dist.history_samples(history_text)
    counts = {name: int(master_stats.backends.get(name, 0)) for name in weights}
    raw = {
        LOCUST_STATS_FILE: stats_text,
        LOCUST_HISTORY_FILE: history_text,
        "locust-master.log": said[-20000:],
        LOAD_SUMMARY_FILE: json.dumps(
            {
                "engine": "locust",
                "distribution": "locust master/worker in pods",
                "master": master.name,
                "workers": list(reported),
                "requests": master_stats.requests,
                "failures": master_stats.failures,
                "requests_per_second": master_stats.requests_per_second,
            }
        ),
    }
    return _output(
        condition,
        weights,
        counts,
        times,
        names,
        headline=[
            Measurement("requests_per_second", master_stats.requests_per_second, "requests/s"),
            Measurement("requests", float(master_stats.requests), "count"),
            Measurement("failures", float(master_stats.failures), "count"),
        ],
        latency_mean=master_stats.latency_mean_ms,
        raw=raw,
    )


def _worker_said(follower: Future[CommandResult]) -> str:
    """Everything a worker's exec printed, whether it ended or failed (at its timeout, a
    worker that never reached its master is still waiting for it)."""
    failed = follower.exception()
    if failed is None:
        done = follower.result()
        return f"{done.stdout}\n{done.stderr}"
    return f"{failed}\n{getattr(failed, 'output', '') or ''}"


def _weights(condition: Condition) -> dict[str, int]:
    loaded = json.loads(str(condition.parameters["weights"]))
    return {str(k): int(v) for k, v in loaded.items()}
