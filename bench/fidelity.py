"""Fidelity: does cnibench's iperf3 path report what iperf3 itself reports on the same path?

One lab (routed), one server pod and one client pod on different nodes. Alternating, the
throughput is measured (a) through cnibench: ``Endpoint.run`` + ``tools.iperf3`` argv builder and
JSON parser, and (b) by the ``iperf3`` CLI run directly with ``ip netns exec`` in the same pod,
its human-readable receiver line parsed here with an independent regex. Prints both means and
the paired ratio adapter/direct with its 95 % interval (target: the whole interval within
1.00 ± 0.03); a ratio away from 1 means the adapter measures or parses something else. The
order inside a round alternates, so neither side always runs first. Writes
``bench-results/fidelity.csv``.

Run as root: ``python bench/fidelity.py [--rounds 6] [--seconds 3]``.
"""

from __future__ import annotations

import argparse
import re
import statistics
import subprocess
import sys

from _support import in_turn, paired_ratio, write_csv
from cnibench.backends.base import DEFAULT_PORTS, ClusterSpec, NodeRole, WorkloadKind, WorkloadSpec
from cnibench.backends.lab import LabBackend
from cnibench.tools import iperf3

_RECEIVER = re.compile(r"([\d.]+)\s+([KMG]?)bits/sec\s+receiver")
_SCALE = {"": 1.0, "K": 1e3, "M": 1e6, "G": 1e9}


def _cli_bits_per_second(namespace: str, server_ip: str, seconds: float) -> float:
    done = subprocess.run(
        ["ip", "netns", "exec", namespace, "iperf3", "-c", server_ip, "-t", f"{seconds:g}"],
        capture_output=True,
        text=True,
        timeout=seconds + 30,
        check=True,
    )
    match = _RECEIVER.search(done.stdout)
    if match is None:
        raise SystemExit(f"no receiver line in iperf3 output:\n{done.stdout}")
    return float(match.group(1)) * _SCALE[match.group(2)]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--seconds", type=float, default=3.0)
    args, _ = parser.parse_known_args(argv)

    ok, reason = LabBackend().available()
    if not ok:
        print(f"fidelity: lab unavailable: {reason}", file=sys.stderr)
        return 1
    port = DEFAULT_PORTS[WorkloadKind.IPERF3_SERVER]
    with LabBackend().provision(ClusterSpec(cni="routed")) as cluster:
        server = cluster.place(
            "fid-srv",
            role=NodeRole.SERVER,
            workloads=(WorkloadSpec(WorkloadKind.IPERF3_SERVER, port),),
        )
        client = cluster.place("fid-cli", role=NodeRole.CLIENT)
        adapter: list[float] = []
        direct: list[float] = []

        def through_adapter() -> None:
            result = client.run(
                iperf3.iperf3_client_argv(server.ip, port=port, duration=args.seconds),
                timeout=args.seconds + 30,
            )
            adapter.append(iperf3.parse_iperf3(result.stdout).received_bits_per_second)

        def run_direct() -> None:
            direct.append(_cli_bits_per_second(client.namespace, server.ip, args.seconds))

        for index in range(args.rounds):
            for measure in in_turn((through_adapter, run_direct), index):
                measure()
    ratio = paired_ratio(adapter, direct)
    print(f"cross-node iperf3 on the lab, {args.rounds} interleaved rounds of {args.seconds:g} s")
    for label, values in (("cnibench adapter ", adapter), ("iperf3 CLI direct", direct)):
        runs = [round(v / 1e9, 3) for v in values]
        print(f"  {label}: {statistics.fmean(values) / 1e9:8.3f} Gbit/s  runs {runs}")
    verdict = "within" if ratio.within(1.0, 0.03) else "NOT within"
    print(f"  ratio adapter/direct: {ratio} ({verdict} the target 1.00 ± 0.03)")
    path = write_csv(
        "fidelity",
        [
            {"round": i, "adapter_bits_per_second": a, "direct_bits_per_second": d}
            for i, (a, d) in enumerate(zip(adapter, direct, strict=True))
        ],
    )
    print(f"  rounds written to {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
