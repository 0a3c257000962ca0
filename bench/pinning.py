"""What sockperf measures with its two ends left to the scheduler, and on one CPU as cnibench
runs them (run as root).

    python bench/pinning.py [--seconds 3] [--runs 10]

Two network namespaces joined by a veth pair (198.18.252.0/30), a sockperf server in one, the
client in the other: once with both ends left to the scheduler, once with both on CPU
:data:`~cnibench.tools.sockperf.PINNED_CPU`. The two kinds of run alternate (order rotated
every round), each against a server of its own kind on its own port, so a machine that changes
during the benchmark changes both. Prints, for each kind, the range of the runs' median
latency and its SD in µs (a data path's cost is µs added to every round trip: the smaller the
SD, the smaller a cost the runs can see), the medians' ratio, pinned / unpinned, and the SDs'
ratio with a 95 % interval (F distribution). Writes ``bench-results/pinning.csv``.
"""

from __future__ import annotations

import argparse
import math
import os
import statistics
import subprocess
import time

from scipy import stats as scipy_stats

from _support import in_turn, write_csv
from cnibench.tools import sockperf

ADDRESS_CLIENT = "198.18.252.1"
ADDRESS_SERVER = "198.18.252.2"
PORTS = {"unpinned": 11121, "pinned": 11122}
CPUS = {"unpinned": None, "pinned": sockperf.PINNED_CPU}
"""Where each kind runs both its ends (``None``: where the scheduler puts them)."""


def _ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True, capture_output=True, timeout=30)


def main() -> int:
    """Build the two namespaces, measure both kinds ``--runs`` times, remove what it made."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--seconds", type=int, default=3)
    parser.add_argument("--runs", type=int, default=10)
    options, _ = parser.parse_known_args()
    if len(os.sched_getaffinity(0)) < 2:
        print("pinning: needs two CPUs; skipped")
        return 0
    tag = f"cnbpin{os.getpid()}"
    client_ns, server_ns = f"{tag}c", f"{tag}s"
    servers: list[subprocess.Popen[bytes]] = []
    medians: dict[str, list[float]] = {kind: [] for kind in PORTS}
    rows: list[dict[str, object]] = []
    _ip("netns", "add", client_ns)
    try:
        _ip("netns", "add", server_ns)
        _ip("link", "add", f"{tag}a", "netns", client_ns, "type", "veth", "peer", "name",
            f"{tag}b", "netns", server_ns)  # fmt: skip
        for ns, dev, address in (
            (client_ns, f"{tag}a", ADDRESS_CLIENT),
            (server_ns, f"{tag}b", ADDRESS_SERVER),
        ):
            _ip("-n", ns, "addr", "add", f"{address}/30", "dev", dev)
            _ip("-n", ns, "link", "set", dev, "up")
        for kind, port in PORTS.items():
            argv = sockperf.sockperf_server_argv(port=port, bind=ADDRESS_SERVER, cpu=CPUS[kind])
            servers.append(
                subprocess.Popen(
                    ["ip", "netns", "exec", server_ns, *argv],
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,
                )
            )
        time.sleep(1.0)
        for run in range(options.runs):
            for kind in in_turn(list(PORTS), run):
                argv = sockperf.sockperf_pingpong_argv(
                    ADDRESS_SERVER, port=PORTS[kind], duration=options.seconds, cpu=CPUS[kind]
                )
                out = subprocess.run(
                    ["ip", "netns", "exec", client_ns, *argv],
                    capture_output=True,
                    text=True,
                    timeout=options.seconds + 30,
                    check=True,
                )
                p50 = sockperf.parse_sockperf(out.stdout, stderr=out.stderr).p50_us
                medians[kind].append(p50)
                rows.append({"run": run, "kind": kind, "latency_p50_us": p50})
                print(f"run {run + 1}/{options.runs} {kind:8s} median {p50:7.2f} µs", flush=True)
    finally:
        for server in servers:
            server.terminate()
            server.wait(timeout=10)
        for ns in (client_ns, server_ns):
            subprocess.run(["ip", "netns", "del", ns], capture_output=True, timeout=30)
    spread = {kind: statistics.stdev(values) for kind, values in medians.items()}
    print(f"\nsockperf's median latency, {options.runs} alternating runs of each kind")
    for kind, values in medians.items():
        print(f"{kind:8s} medians {min(values):.2f}-{max(values):.2f} µs, SD {spread[kind]:.2f} µs")
    level = statistics.geometric_mean(medians["pinned"]) / statistics.geometric_mean(
        medians["unpinned"]
    )
    print(f"median latency pinned / unpinned: {level:.2f}")
    df = options.runs - 1
    ratio = spread["pinned"] / spread["unpinned"]
    bound = math.sqrt(scipy_stats.f.ppf(0.975, df, df))
    print(
        f"SD pinned / unpinned: {ratio:.2f}"
        f" (95 % CI {ratio / bound:.2f}-{ratio * bound:.2f}, n = {options.runs})"
    )
    print(f"runs written to {write_csv('pinning', rows)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
