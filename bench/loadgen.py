"""Requests/s of the split load runner vs hey against the same lab split gateway (run as root).

    python bench/loadgen.py [--seconds 5] [--rounds 5]

For 100 and 1000 concurrent users/connections, runs the split scenario's load runner with each
of its engines (``epoll``, the default, and ``locust``) and hey in interleaved rounds (the order
rotates from round to round) and prints the rates and each engine's paired ratio to hey with
its 95 % interval (target for the default engine: 0.8 or more). Writes
``bench-results/loadgen.csv``.
"""

from __future__ import annotations

import argparse
import re
import statistics

from _support import in_turn, paired_ratio, write_csv
from cnibench.backends.base import ClusterSpec, NodeRole, WorkloadKind, WorkloadSpec
from cnibench.backends.lab import LabBackend
from cnibench.tools.locust_runner import ENGINES, locust_runner_argv, parse_locust_summary

USERS = (100, 1000)
TARGET = 0.8
TOOLS = (*ENGINES, "hey")


def main() -> int:
    """Provision a lab, run both load generators round by round, print the comparison."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--seconds", type=int, default=5)
    parser.add_argument("--rounds", type=int, default=5)
    options, _ = parser.parse_known_args()
    rates: dict[tuple[str, int], list[float]] = {(t, u): [] for t in TOOLS for u in USERS}
    rows: list[dict[str, object]] = []
    cluster = LabBackend().provision(ClusterSpec(cni="routed"))
    try:
        echo = (WorkloadSpec(WorkloadKind.HTTP_ECHO, 80),)
        pods = {n: cluster.place(n, role=NodeRole.SERVER, workloads=echo) for n in ("v1", "v2")}
        url = cluster.create_split({n: (p, 1) for n, p in pods.items()}, port=80)

        def runner(engine: str, users: int) -> float:
            argv = locust_runner_argv(
                url,
                users=users,
                spawn_rate=users,
                duration=options.seconds,
                out="/dev/null",
                request_timeout=10,
                engine=engine,
            )
            result = cluster.external.run(argv, timeout=options.seconds + 60)
            return parse_locust_summary(result.stdout).requests_per_second

        def hey(users: int) -> float:
            result = cluster.external.run(
                ["hey", "-z", f"{options.seconds}s", "-c", str(users), url],
                timeout=options.seconds + 60,
            )
            match = re.search(r"Requests/sec:\s+([\d.]+)", result.stdout)
            if match is None:
                raise SystemExit(f"hey printed no rate:\n{result.stdout}{result.stderr}")
            return float(match.group(1))

        for index in range(options.rounds):
            for users in USERS:
                for tool in in_turn(TOOLS, index):
                    rate = hey(users) if tool == "hey" else runner(tool, users)
                    rates[tool, users].append(rate)
                    rows.append({"round": index, "users": users, "tool": tool, "rate": rate})
                    print(
                        f"round {index + 1} users={users:5d} {tool:7s} {rate:9.1f} req/s",
                        flush=True,
                    )
    finally:
        cluster.teardown()
    print(f"\nload runner / hey on the lab split gateway, {options.rounds} interleaved rounds")
    for users in USERS:
        hey_mean = statistics.fmean(rates["hey", users])
        for engine in ENGINES:
            ratio = paired_ratio(rates[engine, users], rates["hey", users])
            verdict = "meets" if ratio.low >= TARGET else "does NOT meet"
            target = f" ({verdict} the target {TARGET})" if engine == ENGINES[0] else ""
            print(
                f"users={users:5d} {engine:6s} {statistics.fmean(rates[engine, users]):9.1f}"
                f" req/s  hey {hey_mean:9.1f} req/s  ratio {ratio}{target}"
            )
    print(f"rounds written to {write_csv('loadgen', rows)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
