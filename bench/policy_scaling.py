"""Cross-node throughput and new connections/s by policy rule count and engine (run as root).

    python bench/policy_scaling.py [--seconds 3] [--rules 0,100,500,1000]

Prints each engine's iperf3 throughput (one long connection) and ab new connections/s (one TCP
connection per request, concurrency 10) as a ratio to the same engine with 0 extra rules.
"""

from __future__ import annotations

import argparse

from cnibench.backends.base import ClusterSpec, NodeRole, WorkloadKind, WorkloadSpec
from cnibench.backends.lab import LabBackend
from cnibench.policy import PolicyEngine, PolicyPeer, PolicySpec, PortRange
from cnibench.scenarios.options import parse_int_list
from cnibench.tools import ab, iperf3


def main() -> int:
    """Provision a lab and measure every (engine, rules) pair."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--seconds", type=int, default=3)
    parser.add_argument("--rules", default="0,100,500,1000")
    options, _ = parser.parse_known_args()
    rules = parse_int_list(options.rules, name="rules", low=0, high=5000)
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
        for engine in PolicyEngine:
            base: tuple[float, float] | None = None
            for count in rules:
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
                base = base or (bps, cps)
                print(
                    f"{engine.value:13s} rules={count:5d} throughput={bps / 1e9:6.2f} Gbit/s"
                    f" (x{bps / base[0]:.3f})  new-conn={cps:8.0f}/s (x{cps / base[1]:.3f})",
                    flush=True,
                )
    finally:
        cluster.teardown()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
