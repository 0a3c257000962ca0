"""New connections/s through a lab Service by proxy and number of Services (run as root).

    python bench/service_path.py [--seconds 2] [--services 0,1000,5000] [--runs 5]

Seed 001 puts kube-proxy's iptables mode against an eBPF replacement: iptables walks one rule
per Service port until it meets the destination, a map looks it up. On a lab with the server
pod behind a Service (virtual IP, the measured Service after every other one), ab opens one TCP
connection per request (concurrency 10) for ``--seconds`` with each proxy (``iptables``:
kube-proxy's chains; ``nftables``: a verdict map) and each number of further Services. Cells are
interleaved with the order rotated from run to run. Prints each proxy's ratio to itself with 0
further Services, and nftables / iptables at each size, paired by run with 95 % intervals.
Writes ``bench-results/service_path.csv``.
"""

from __future__ import annotations

import argparse
from collections import defaultdict

from _support import in_turn, paired_ratio, write_csv
from cnibench.backends.base import (
    MAX_OTHER_SERVICES,
    ClusterSpec,
    NodeRole,
    ServiceProxy,
    WorkloadKind,
    WorkloadSpec,
)
from cnibench.backends.lab import LabBackend
from cnibench.backends.lab.services import LAB_SERVICE_PROXIES
from cnibench.scenarios.options import parse_int_list
from cnibench.tools import ab


def main() -> int:
    """Provision a lab and measure every (proxy, services) pair ``--runs`` times."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--seconds", type=int, default=2)
    parser.add_argument("--services", default="0,1000,5000")
    parser.add_argument("--runs", type=int, default=5)
    options, _ = parser.parse_known_args()
    sizes = parse_int_list(options.services, name="services", low=0, high=MAX_OTHER_SERVICES)
    if 0 not in sizes:
        sizes = [0, *sizes]  # the reference of every ratio
    cells = [(proxy, size) for proxy in LAB_SERVICE_PROXIES for size in sizes]
    rates: dict[tuple[ServiceProxy, int], list[float]] = defaultdict(list)
    rows: list[dict[str, object]] = []
    cluster = LabBackend().provision(ClusterSpec(cni="routed"))
    try:
        server = cluster.place(
            "srv", role=NodeRole.SERVER, workloads=(WorkloadSpec(WorkloadKind.HTTP_ECHO, 80),)
        )
        client = cluster.place("cli", role=NodeRole.CLIENT)
        for run in range(options.runs):
            for proxy, size in in_turn(cells, run):
                service = cluster.expose(server, [80], proxy=proxy.value, others=size)
                try:
                    out = client.run(
                        ab.ab_argv(
                            f"http://{service.cluster_ip}:{service.ports[80]}/",
                            concurrency=10,
                            timelimit=options.seconds,
                        ),
                        timeout=options.seconds + 60,
                    )
                    rate = ab.parse_ab(out.stdout).requests_per_second
                finally:
                    cluster.remove_service()
                rates[proxy, size].append(rate)
                rows.append(
                    {
                        "run": run,
                        "proxy": proxy.value,
                        "services": size,
                        "new_connections_per_second": rate,
                    }
                )
                print(
                    f"run {run + 1}/{options.runs} {proxy.value:9s} services={size:5d}"
                    f" {rate:8.0f} conn/s",
                    flush=True,
                )
    finally:
        cluster.teardown()
    print(f"\nnew connections/s through a Service ({options.runs} interleaved runs per cell)")
    for proxy, size in cells:
        if size:
            ratio = paired_ratio(rates[proxy, size], rates[proxy, 0])
            print(f"{proxy.value:9s} services={size:5d} / services=0: {ratio}")
    for size in sizes:
        ratio = paired_ratio(rates[ServiceProxy.NFTABLES, size], rates[ServiceProxy.IPTABLES, size])
        print(f"nftables / iptables at services={size:5d}: {ratio}")
    print(f"runs written to {write_csv('service_path', rows)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
