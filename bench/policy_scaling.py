"""Cross-node throughput and new connections/s by policy rule count and engine (run as root).

    python bench/policy_scaling.py [--seconds 2] [--rules 0,100,500,1000] [--runs 5]

For each engine (iptables, nftables, nftables with a set), measures iperf3 throughput (one long
connection) and ab new connections/s (one TCP connection per request, concurrency 10) with
each rule count. The cells are interleaved: every run goes once through every (engine, rules)
pair, with the order rotated from run to run, so a machine that slows down slows every cell.
Prints, per engine and rule count, the ratio to the same engine with 0 extra rules (paired by
run) and its 95 % interval. Writes ``bench-results/policy_scaling.csv``.
"""

from __future__ import annotations

import argparse
from collections import defaultdict

from _support import in_turn, paired_ratio, write_csv
from cnibench.backends.base import ClusterSpec, NodeRole, WorkloadKind, WorkloadSpec
from cnibench.backends.lab import LabBackend
from cnibench.policy import PolicyEngine, PolicyPeer, PolicySpec, PortRange
from cnibench.scenarios.options import parse_int_list
from cnibench.tools import ab, iperf3


def main() -> int:
    """Provision a lab and measure every (engine, rules) pair ``--runs`` times."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--seconds", type=int, default=2)
    parser.add_argument("--rules", default="0,100,500,1000")
    parser.add_argument("--runs", type=int, default=5)
    options, _ = parser.parse_known_args()
    rules = parse_int_list(options.rules, name="rules", low=0, high=5000)
    if 0 not in rules:
        rules = [0, *rules]  # the reference of every ratio
    cells = [(engine, count) for engine in PolicyEngine for count in rules]
    throughput: dict[tuple[PolicyEngine, int], list[float]] = defaultdict(list)
    connections: dict[tuple[PolicyEngine, int], list[float]] = defaultdict(list)
    rows: list[dict[str, object]] = []
    cluster = LabBackend().provision(ClusterSpec(cni="routed"))
    try:
        server = cluster.place(
            "srv",
            role=NodeRole.SERVER,
            workloads=(
                WorkloadSpec(WorkloadKind.HTTP_ECHO, 80),
                WorkloadSpec(WorkloadKind.IPERF3_SERVER, 5201),
            ),
        )
        client = cluster.place("cli", role=NodeRole.CLIENT)
        for run in range(options.runs):
            for engine, count in in_turn(cells, run):
                spec = PolicySpec(
                    target=PolicyPeer("srv", server.ip),
                    allowed=(PolicyPeer("cli", client.ip),),
                    ports=(PortRange.single(80), PortRange.single(5201)),
                    extra_rules=count,
                )
                cluster.apply_policy(spec, engine=engine)
                try:
                    out = client.run(
                        iperf3.iperf3_client_argv(server.ip, duration=options.seconds),
                        timeout=options.seconds + 30,
                    )
                    bps = iperf3.parse_iperf3(out.stdout).received_bits_per_second
                    out = client.run(
                        ab.ab_argv(
                            f"http://{server.ip}/", concurrency=10, timelimit=options.seconds
                        ),
                        timeout=options.seconds + 60,
                    )
                    cps = ab.parse_ab(out.stdout).requests_per_second
                finally:
                    cluster.remove_policy()
                throughput[engine, count].append(bps)
                connections[engine, count].append(cps)
                rows.append(
                    {
                        "run": run,
                        "engine": engine.value,
                        "rules": count,
                        "throughput_bits_per_second": bps,
                        "new_connections_per_second": cps,
                    }
                )
                print(
                    f"run {run + 1}/{options.runs} {engine.value:13s} rules={count:5d}"
                    f" {bps / 1e9:6.2f} Gbit/s {cps:8.0f} conn/s",
                    flush=True,
                )
    finally:
        cluster.teardown()
    print(f"\nratio to the same engine with 0 rules ({options.runs} interleaved runs per cell)")
    for engine, count in cells:
        if count == 0:
            continue
        bps = paired_ratio(throughput[engine, count], throughput[engine, 0])
        cps = paired_ratio(connections[engine, count], connections[engine, 0])
        print(f"{engine.value:13s} rules={count:5d}  throughput {bps}  new connections/s {cps}")
    print(f"runs written to {write_csv('policy_scaling', rows)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
