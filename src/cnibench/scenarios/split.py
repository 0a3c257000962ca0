"""Traffic split: do weighted routes deliver the configured shares, over time and under load?

Seed 000 loaded a Gateway API route with weights 60/40 from outside the cluster with locust and
counted which backend answered each request. Here a condition is (weights, virtual users); each
run records every request (time, backend) from the external host, and reports requests per
backend, :func:`cnibench.stats.splitting_error` and :func:`cnibench.stats.windowed_shares` in
5 s windows with their distance to the reference. The load engine
(:attr:`ScenarioOptions.load_engine`, ``--load-engine epoll|locust``) is a parameter of every
condition, so each record names the engine that made its requests. The raw records are kept
(gzip + base64 CSV, :data:`LOAD_RECORDS_FILE`) so reports can redraw the windows.
"""

from __future__ import annotations

import base64
import gzip
import json
import math
import sys
import warnings
from collections.abc import Mapping

from cnibench import stats
from cnibench.backends.base import (
    DEFAULT_PORTS,
    Capability,
    Cluster,
    NodeRole,
    WorkloadKind,
    WorkloadSpec,
)
from cnibench.records import Measurement, ParamValue
from cnibench.scenarios.base import Condition, Prepared, RunOutput, Scenario, Verification
from cnibench.scenarios.options import DEFAULT_OPTIONS, ScenarioOptions
from cnibench.scenarios.profiles import Profile
from cnibench.tools.locust_runner import (
    locust_runner_argv,
    parse_locust_records,
    parse_locust_summary,
)

__all__ = [
    "LOAD_RECORDS_FILE",
    "LOAD_SUMMARY_FILE",
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

    def __init__(self, options: ScenarioOptions | None = None) -> None:
        self.options = options or DEFAULT_OPTIONS

    def conditions(self) -> list[Condition]:
        """One condition per (weights, users), e.g. ``v1-60-v2-40-u100``; the load engine is a
        parameter of each (the same for all), not part of the id."""
        return [
            Condition(
                self.name,
                f"{weights_id(weights)}-u{users}",
                {
                    "weights": json.dumps(dict(weights)),
                    "users": users,
                    "load_engine": self.options.load_engine,
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
        """One HTTP echo pod per backend on the server node, and the weighted gateway."""
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
        float_weights = {name: float(w) for name, w in weights.items()}
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", stats.DegenerateDataWarning)
            split = stats.splitting_error(counts, float_weights)
        ok = run.records[run.records["backend"].isin(list(weights))]
        windows = stats.windowed_shares(
            ok["time"].to_numpy(),
            ok["backend"].to_numpy(dtype=str),
            window=WINDOW_SECONDS,
            weights=float_weights,
        )
        per_window = windows.groupby("window_start")["total_variation"].first()
        measurements = [
            Measurement("requests_per_second", run.requests_per_second, "requests/s"),
            Measurement("requests", float(run.requests), "count"),
            Measurement("failures", float(run.failures), "count"),
            Measurement("max_abs_error", split.max_abs_error, "ratio"),
            Measurement("total_variation", split.total_variation, "ratio"),
            Measurement("p_value", split.p_value, "probability"),
            Measurement("window_distance_mean", float(per_window.mean()), "ratio"),
            Measurement("window_distance_max", float(per_window.max()), "ratio"),
            Measurement("latency_mean", float(run.records["latency_ms"].mean()), "ms"),
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

    def cleanup(self, cluster: Cluster, prepared: Prepared) -> None:
        """Remove the gateway, then the backend pods."""
        if "url" in prepared.expected:
            cluster.remove_split()
        super().cleanup(cluster, prepared)


def _weights(condition: Condition) -> dict[str, int]:
    loaded = json.loads(str(condition.parameters["weights"]))
    return {str(k): int(v) for k, v in loaded.items()}
