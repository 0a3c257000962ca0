"""Requests/s of the locust runner vs hey against the same lab split gateway (run as root).

    python bench/loadgen.py [--seconds 5]

Prints, for 100 and 1000 concurrent users/connections, locust's and hey's rate and their ratio.
"""

from __future__ import annotations

import argparse
import re

from cnibench.backends.base import ClusterSpec, NodeRole, WorkloadKind, WorkloadSpec
from cnibench.backends.lab import LabBackend
from cnibench.tools.locust_runner import locust_runner_argv, parse_locust_summary


def main() -> int:
    """Provision a lab, run both load generators, print the comparison."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--seconds", type=int, default=5)
    options, _ = parser.parse_known_args()
    cluster = LabBackend().provision(ClusterSpec(cni="routed"))
    try:
        echo = (WorkloadSpec(WorkloadKind.HTTP_ECHO, 80),)
        pods = {n: cluster.place(n, role=NodeRole.SERVER, workloads=echo) for n in ("v1", "v2")}
        url = cluster.create_split({n: (p, 1) for n, p in pods.items()}, port=80)
        for users in (100, 1000):
            argv = locust_runner_argv(
                url,
                users=users,
                spawn_rate=users,
                duration=options.seconds,
                out="/dev/null",
                request_timeout=10,
            )
            result = cluster.external.run(argv, timeout=options.seconds + 60)
            locust = parse_locust_summary(result.stdout)
            hey = cluster.external.run(
                ["hey", "-z", f"{options.seconds}s", "-c", str(users), url],
                timeout=options.seconds + 60,
            )
            match = re.search(r"Requests/sec:\s+([\d.]+)", hey.stdout)
            hey_rps = float(match.group(1)) if match else float("nan")
            print(
                f"users={users:5d} locust={locust.requests_per_second:9.1f} req/s"
                f" (failures {locust.failures}/{locust.requests})"
                f" hey={hey_rps:9.1f} req/s locust/hey={locust.requests_per_second / hey_rps:.3f}"
            )
    finally:
        cluster.teardown()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
