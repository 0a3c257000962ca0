"""Fidelity: does cnibench's iperf3 path report what iperf3 itself reports on the same path?

One lab (routed), one server pod and one client pod on different nodes. Each round measures the
throughput twice, in alternating order:

* through cnibench: ``Endpoint.run`` of the ``tools.iperf3`` argv builder's command plus
  ``--get-server-output``, parsed by ``tools.iperf3``'s JSON parser. The same test's report by
  the iperf3 *server* (its human-readable receiver line, carried back as text in the JSON) is
  parsed here with an independent regex: **adapter / server, the same test**, whose 95 %
  interval must lie within 1.00 ± 0.03. A ratio away from 1 means the adapter runs, reads or
  scales something else (sent instead of received, bytes for bits, one interval for the sum).
* by the ``iperf3`` CLI run directly with ``ip netns exec`` in the same pod, its own receiver
  line parsed with the same regex: **adapter / CLI, separate tests**, which also catches a
  cnibench command that loads the path differently. Separate tests differ by the machine's
  run-to-run noise: on this project's 2-core machine one test in a few runs at about 9 instead
  of 16 Gbit/s, whichever side it is, so this interval is wide and is shown for context.

Writes ``bench-results/fidelity.csv``. Run as root:
``python bench/fidelity.py [--rounds 6] [--seconds 3]``.
"""

from __future__ import annotations

import argparse
import json
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


def _receiver_bits_per_second(text: str) -> float:
    """The rate on iperf3's human-readable ``receiver`` summary line."""
    match = _RECEIVER.search(text)
    if match is None:
        raise SystemExit(f"no receiver line in iperf3 output:\n{text}")
    return float(match.group(1)) * _SCALE[match.group(2)]


def _cli_bits_per_second(namespace: str, server_ip: str, seconds: float) -> float:
    done = subprocess.run(
        ["ip", "netns", "exec", namespace, "iperf3", "-c", server_ip, "-t", f"{seconds:g}"],
        capture_output=True,
        text=True,
        timeout=seconds + 30,
        check=True,
    )
    return _receiver_bits_per_second(done.stdout)


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
        server_said: list[float] = []
        direct: list[float] = []

        def through_adapter() -> None:
            argv = iperf3.iperf3_client_argv(server.ip, port=port, duration=args.seconds)
            result = client.run([*argv, "--get-server-output"], timeout=args.seconds + 30)
            adapter.append(iperf3.parse_iperf3(result.stdout).received_bits_per_second)
            text = json.loads(result.stdout).get("server_output_text", "")
            server_said.append(_receiver_bits_per_second(text))

        def run_direct() -> None:
            direct.append(_cli_bits_per_second(client.namespace, server.ip, args.seconds))

        for index in range(args.rounds):
            for measure in in_turn((through_adapter, run_direct), index):
                measure()
    same = paired_ratio(adapter, server_said)
    separate = paired_ratio(adapter, direct)
    print(f"cross-node iperf3 on the lab, {args.rounds} interleaved rounds of {args.seconds:g} s")
    for label, values in (
        ("cnibench adapter        ", adapter),
        ("iperf3 server, same test", server_said),
        ("iperf3 CLI, own test    ", direct),
    ):
        runs = [round(v / 1e9, 3) for v in values]
        print(f"  {label}: {statistics.fmean(values) / 1e9:8.3f} Gbit/s  runs {runs}")
    verdict = "within" if same.within(1.0, 0.03) else "NOT within"
    print(f"  ratio adapter/server, same test: {same} ({verdict} the target 1.00 ± 0.03)")
    print(f"  ratio adapter/CLI, separate tests: {separate} (context: run-to-run noise)")
    path = write_csv(
        "fidelity",
        [
            {
                "round": i,
                "adapter_bits_per_second": a,
                "server_bits_per_second": s,
                "direct_bits_per_second": d,
            }
            for i, (a, s, d) in enumerate(zip(adapter, server_said, direct, strict=True))
        ],
    )
    print(f"  rounds written to {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
