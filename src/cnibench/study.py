"""The kind study: the seeds' CNI comparison reproduced on real kind clusters, with intervals.

``python -m cnibench.study`` (what ``nox -s study`` runs) starts the private engine, builds the
offline image set (warm: seconds), then runs :data:`STUDY`: plain ``cnibench run`` commands,
one or two per cluster configuration, all writing into one results directory
(``docs/results/kind-<date>/`` by default). At the end it writes the directory's report
(``report.html``), its verdict (``verdict.md``, recomputed from the records by
:func:`verdict_markdown`, so a test can check every line of it), the study's own account
(``study.json``: each command, its wall time and exit status) and drops the raw tool output
(the records, environments and verification files stay: ``cnibench.load_results`` on the
directory reproduces every line).

``python -m cnibench.study --print`` prints the commands instead, as a user would type them.
``study.json`` is written after every command, so a study stopped half-way goes on with
``--resume`` (the commands that succeeded are not run again).

What the plan holds and what it leaves out to fit about 150 minutes on a 2-core machine is
said on each :class:`Part` (``why``). Since the 2026-11-27 study (docs/findings.md, made by
the commands its ``study.json`` lists) the plan changed as issue 48 asks: Cilium with and
without kube-proxy replacement differ in the Service proxy alone, the egress gateway runs on
configurations that ask for it by name (``cilium:egress-gateway``), and the egress parts add
rounds until decided within :data:`EGRESS_BUDGET` each.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

import pandas as pd

from cnibench.errors import CnibenchError, ConfigError
from cnibench.results import (
    atomic_write_bytes,
    environment_fingerprint,
    load_environments,
    load_results,
)
from cnibench.signals import sigterm_raises_interrupt

__all__ = [
    "PLANS",
    "REFERENCE",
    "STUDY",
    "WHICH_CNI",
    "Configuration",
    "Part",
    "commands",
    "main",
    "verdict_markdown",
]

PROFILE = "quick"
"""Five runs per condition (n >= 5, as the study asks)."""

DURATION = "5s"
"""Each timed measurement's length (the quick profile's is one second). On kind here
(docs/results/duration-kind-2026-12-06, flannel, 6 interleaved rounds) iperf3's throughput
varied from run to run with a log-SD of 0.16 at one second and 0.065 at ten, and the CNI
agents' CPU interval of a contrast narrowed from ×0.28-3.97 to ×0.81-1.40; sockperf's
latency did not narrow (0.09-0.16 at either: the rounds, each set up again, differ). Five
seconds buys most of that for about half of ten seconds' time."""

REFERENCE = "flannel"
"""The CNI every other configuration is compared with: kind's usual overlay with kube-proxy in
its default iptables mode."""

ENGINE = "cnibench"
"""The private engine the study runs in (``--engine``: another engine name, e.g. one whose
images are already built)."""

IMAGES = ("--cni", "cilium", "--cni", "kube-router", "--gateway", "traefik")
"""``cnibench images build`` arguments: every image the configurations need."""

POD = ("cross-node-idle-iperf3", "cross-node-idle-sockperf")
"""Pod to pod across nodes: the CNI's own data path, bulk (iperf3) and request/response
(sockperf)."""


def _service(proxy: str, *counts: int, tool: str = "sockperf") -> tuple[str, ...]:
    return tuple(f"cross-node-idle-{tool}-service-{proxy}-{n}svc" for n in counts)


@dataclass(frozen=True)
class Part:
    """One ``cnibench run`` of the study.

    Attributes
    ----------
    scenarios:
        ``--scenario`` values.
    conditions:
        ``--condition`` ids (only these run).
    options:
        Further ``cnibench run`` arguments (``--target``, ``--services``, ``--rules`` ...).
    interleave:
        Whether the part's conditions run in alternating rounds, each set up again per
        round (``cnibench run``'s default, written out as ``--interleave``). ``False`` only
        for conditions whose scenario declares their set-up too costly to repeat
        (:meth:`~cnibench.scenarios.base.Scenario.sequential_reason`: the Service sweep), which
        ``cnibench run`` then runs sequentially by itself and records in ``design.json``.
    why:
        What the part answers, and what it leaves out.
    budget:
        ``--until-decided --budget`` value (e.g. ``"20m"``): the part adds interleaved rounds
        to its undecided feature contrasts within that wall time, cluster set-up included;
        ``""``: exactly the profile's rounds.
    """

    scenarios: tuple[str, ...]
    conditions: tuple[str, ...]
    options: tuple[str, ...] = ()
    interleave: bool = True
    why: str = ""
    budget: str = ""


@dataclass(frozen=True)
class Configuration:
    """A cluster configuration (one ``--cni`` label) and the runs made on it, in order; the
    cluster is kept between its parts and removed after the last."""

    name: str
    cni: str
    parts: tuple[Part, ...] = field(default_factory=tuple)


_SERVICES_WHY = (
    "the proxy's tables with 100 further Services in every round and 1000 in both sessions: "
    "sequential, since every round would create and delete them again (minutes each way here), "
    "so the batch's programming time has n = 1 a session there, but one more Service is timed "
    "after every run (new_service_time, n = 5 a session, 10 in all, at either size); 5000 left "
    "out for time"
)

_AGAIN_WHY = (
    "the same cluster's second session: what is compared across configurations needs two "
    "sessions a side (the session is the unit of replication there)"
)

_POLICY = ("off-cross-node-c1", *(f"on-cross-node-r{n}-c1" for n in (0, 1000)))
"""Seed 003's rule scaling: no policy, then 0 and 1000 rules (100 left out for time)."""

_SPLIT = ("v1-60-v2-40-u10", "v1-60-v2-40-u100")
"""A 60/40 split through a real Gateway at 10 and 100 users."""

_SPLIT_OPTIONS = ("--weights", "v1=60,v2=40", "--users", "10,100")


def _baseline(proxy: str, *, sweep: bool) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """Baseline conditions and options: pod to pod, and a ClusterIP with 0 and 100 further
    Services (interleaved), plus 1000 (sequential) when ``sweep``."""
    counts = (0, 100, 1000) if sweep else (0, 100)
    conditions = (*POD, *_service(proxy, *counts))
    options = ("--target", "pod,service", "--proxy", proxy)
    return conditions, (*options, "--services", ",".join(str(n) for n in counts))


def _flannel(proxy: str, cni: str, why: str) -> Configuration:
    """flannel with kube-proxy in mode ``proxy``: the baseline with the Service sweep, in two
    sessions."""
    conditions, options = _baseline(proxy, sweep=True)
    return Configuration(
        f"flannel, kube-proxy {proxy}",
        cni,
        (
            Part(("baseline",), conditions, options, why=f"{why}; {_SERVICES_WHY}"),
            Part(("baseline",), conditions, options, why=_AGAIN_WHY),
        ),
    )


def _gateway_cni(
    name: str, cni: str, proxy: str, priority: tuple[str, ...], why: str, *, sweep: bool = False
) -> Configuration:
    """A CNI with Traefik: baseline, policy and split in two sessions (all of it is compared
    across configurations), priority cases in the first, and with ``sweep`` the Service sweep's
    1000 Services in both."""
    scenarios = ("baseline", "policy", "split")
    tail = (*_POLICY, *_SPLIT)
    more = ("--rules", "0,1000", *_SPLIT_OPTIONS)
    first = second = _baseline(proxy, sweep=sweep)
    first_why = f"{why}; {_SERVICES_WHY}" if sweep else why
    return Configuration(
        name,
        cni,
        (
            Part(
                (*scenarios, "priority"),
                (*first[0], *tail, *priority),
                (*first[1], *more),
                why=first_why,
            ),
            Part(scenarios, (*second[0], *tail), (*second[1], *more), why=_AGAIN_WHY),
        ),
    )


EGRESS_BUDGET = "20m"
"""Wall time of each egress part under ``--until-decided``: its cluster (about 4 min warm), the
profile's 5 rounds (about 6 min, 2026-11-27), then about 10 min of added rounds."""

_EGRESS_WHY = (
    "seed 000's egress gateway, asked for by name: the gateway brings BPF masquerading and "
    "BPF host routing, a data path of its own, so it is a configuration apart from plain "
    "Cilium and compared only with itself, gateway on against off"
)

STUDY: tuple[Configuration, ...] = (
    _flannel("iptables", REFERENCE, "the reference: pod to pod and through a ClusterIP"),
    _flannel(
        "nftables",
        "flannel:kube-proxy=nftables",
        "kube-proxy's nftables mode against the reference's iptables",
    ),
    _gateway_cni(
        "Cilium, kube-proxy mode, Traefik",
        "cilium:gateway=traefik,mode=kube-proxy",
        "iptables",
        ("cni-allow", "k8s-deny", "k8s-deny-and-cni-allow"),
        "Cilium against the reference and kube-router with kube-proxy in front of Services on "
        "all three (so nothing but the CNI differs); seed 003's rule scaling and which policy "
        "wins, and the split through Traefik",
    ),
    _gateway_cni(
        "Cilium, kube-proxy replacement, Traefik",
        "cilium:gateway=traefik",
        "ebpf",
        ("cni-allow", "k8s-deny", "k8s-deny-and-cni-allow"),
        "seed 001's eBPF Service path against Cilium's kube-proxy mode: the two differ in the "
        "Service proxy alone (both carry Traefik and no egress gateway), and the proxy is "
        "compared on the conditions whose traffic goes to a Service",
        sweep=True,
    ),
    _gateway_cni(
        "kube-router, Traefik",
        "kube-router:gateway=traefik",
        "iptables",
        ("k8s-deny",),
        "seed 003's rule scaling on iptables + ipset against Cilium, and the split on a second "
        "CNI; kube-router has no policy of its own, so only the Kubernetes deny of the priority "
        "cases",
    ),
    Configuration(
        "Cilium, egress gateway",
        "cilium:egress-gateway",
        (
            Part(
                ("egress",),
                ("gateway-off", "gateway-on"),
                why=f"{_EGRESS_WHY}: throughput, rounds added until decided",
                budget=EGRESS_BUDGET,
            ),
        ),
    ),
    Configuration(
        "Cilium, egress gateway, per-node CPU",
        "cilium:egress-gateway,napi=threaded",
        (
            Part(
                ("egress",),
                ("gateway-off", "gateway-on"),
                why=(
                    f"{_EGRESS_WHY}: the gateway node's own CPU (napi=threaded, cnibench's "
                    "per-node CPU probe), its runs paced at one offered load so the host keeps "
                    "CPU to spare; never compared on throughput; rounds added until decided"
                ),
                budget=EGRESS_BUDGET,
            ),
        ),
    ),
)
"""The study, in the order it runs."""

_WHICH_POLICY = ("off-cross-node-c1", "on-cross-node-r0-c1")
"""The policy scenario at its quickest: no policy, and one policy of no further rules."""

WHICH_CNI: tuple[Configuration, ...] = (
    Configuration(
        "flannel, kube-proxy iptables",
        REFERENCE,
        (
            Part(
                ("baseline",),
                POD,
                why="the reference: pod to pod across nodes; flannel enforces no policy",
            ),
        ),
    ),
    Configuration(
        "Cilium, kube-proxy mode",
        "cilium:mode=kube-proxy",
        (
            Part(
                ("baseline", "policy"),
                (*POD, *_WHICH_POLICY),
                ("--rules", "0"),
                why="Cilium beside the reference with the same Service proxy, and its policy on "
                "against off",
            ),
        ),
    ),
    Configuration(
        "kube-router",
        "kube-router",
        (
            Part(
                ("baseline", "policy"),
                (*POD, *_WHICH_POLICY),
                ("--rules", "0"),
                why="kube-router beside the reference with the same Service proxy, and its "
                "policy (iptables + ipset) on against off",
            ),
        ),
    ),
)
"""``nox -s kind-demo``: which CNI, in one command and about a quarter of an hour warm: flannel,
Cilium and kube-router on pod-to-pod traffic and policy, one session each (``quick``). On kind
each configuration has a cluster of its own in turn, so a CNI against the reference is compared
across sessions: one session a side gives the estimates and says what would decide them."""

PLANS: dict[str, tuple[Configuration, ...]] = {"study": STUDY, "which-cni": WHICH_CNI}
"""The plans ``python -m cnibench.study --plan`` runs."""


def commands(out: Path, *, study: Sequence[Configuration] = STUDY) -> list[list[str]]:
    """The ``cnibench run`` argument lists of ``study`` writing into ``out``, in order."""
    lines: list[list[str]] = []
    for configuration in study:
        for index, part in enumerate(configuration.parts):
            last = index == len(configuration.parts) - 1
            line = ["cnibench", "run", "--cluster", "kind", "--cni", configuration.cni]
            line += ["--profile", PROFILE, "--duration", DURATION, "--results-dir", str(out)]
            line += [arg for name in part.scenarios for arg in ("--scenario", name)]
            line += [arg for c in part.conditions for arg in ("--condition", c)]
            line += list(part.options)
            line += ["--interleave"] * part.interleave + ["--keep-cluster"] * (not last)
            if part.budget:
                line += ["--until-decided", "--budget", part.budget]
            lines.append(line)
    return lines


def _time_span(df: pd.DataFrame) -> str:
    times = pd.to_datetime(df["time"], utc=True)
    first, last = times.min(), times.max()
    day = first.strftime("%Y-%m-%d")
    return f"{day} {first:%H:%M}-{last:%H:%M} UTC"


def verdict_markdown(directory: Path, *, reference: str = REFERENCE) -> str:
    """``verdict.md`` of a study directory, recomputed from its records: when, where and how
    many runs, then every planned contrast's line (:func:`cnibench.report.verdict`), then what
    could not be compared. A committed ``verdict.md`` equals this text, or it was edited."""
    from cnibench.report import verdict

    # One session per command, pooled on purpose: each condition ran in exactly one of them.
    df = load_results(directory, sessions="all")
    environments = load_environments(directory).drop_duplicates("environment_id")
    table = verdict(df, reference=reference, environments=environments)
    ok = df[(df["status"] == "ok") & df["verified"]]
    runs = ok.drop_duplicates("run_id")
    per_condition = runs.groupby(["cni", "scenario", "condition"]).size()
    machines = _machines(environments)
    lines = [
        "# Verdict of the kind study",
        "",
        f"Recomputed from the records in this directory by `cnibench.study.verdict_markdown`"
        f" (reference CNI `{reference}`).",
        "",
        f"- when: {_time_span(df)}",
        f"- machine: {'; '.join(machines)}",
        f"- CNI configurations: {', '.join(f'`{c}`' for c in sorted(set(runs['cni'])))}",
        f"- scenarios: {', '.join(sorted(set(runs['scenario'])))}",
        f"- verified successful runs: {len(runs)} over {len(per_condition)} conditions,"
        f" fewest per condition {per_condition.min()}",
        "",
        "## Every planned contrast, grouped by feature",
        "",
        *(f"- {line}" for line in table["verdict"]),
    ]
    notes = list(table.attrs.get("notes", []))
    if notes:
        lines += ["", "## Not compared", "", *(f"- {note}" for note in notes)]
    return "\n".join(lines) + "\n"


@dataclass
class _Step:
    command: list[str]
    seconds: float
    exit_code: int
    sessions: list[str] = field(default_factory=list)
    """The session directories the command wrote into the study's directory."""

    def record(self) -> dict[str, object]:
        """The step as ``study.json`` keeps it."""
        return {
            "command": shlex.join(self.command),
            "seconds": self.seconds,
            "exit_code": self.exit_code,
            "sessions": self.sessions,
        }


def _sessions(out: Path) -> set[str]:
    return {p.name for p in out.iterdir() if p.is_dir()} if out.is_dir() else set()


def _run_to_the_end(command: Sequence[str], env: Mapping[str, str]) -> int:
    """Run ``command``; on Ctrl-C hand it one SIGTERM, wait until it has cleaned up (its
    cluster removed), then raise. It runs in a session of its own, so that Ctrl-C, or a
    signal sent to the study alone, reaches it exactly once, from here (``subprocess.run``
    would kill it a quarter of a second later, cluster and all left behind)."""
    process = subprocess.Popen(list(command), env=dict(env), start_new_session=True)
    try:
        return process.wait()
    except KeyboardInterrupt:
        # SIGTERM: a cnibench command takes it as Ctrl-C, and unlike SIGINT it is never
        # ignored from birth (a command started in the background of a script is).
        process.send_signal(signal.SIGTERM)
        process.wait()
        raise


def _cli(
    *args: str, env: dict[str, str], log: Callable[[str], None], out: Path | None = None
) -> _Step:
    command = [sys.executable, "-m", "cnibench.cli", *args]
    log("$ cnibench " + shlex.join(args))
    before = _sessions(out) if out else set()
    started = time.monotonic()
    code = _run_to_the_end(command, env)
    seconds = round(time.monotonic() - started, 1)
    wrote = sorted(_sessions(out) - before) if out else []
    return _Step(["cnibench", *args], seconds, code, wrote)


def _account(out: Path, steps: Sequence[dict[str, object]], wall: float, *, done: bool) -> None:
    account = {
        "profile": PROFILE,
        "duration": DURATION,
        "reference": REFERENCE,
        "wall_seconds": round(wall, 1),
        "finished": done,
        "steps": list(steps),
    }
    atomic_write_bytes(out / "study.json", (json.dumps(account, indent=2) + "\n").encode())


@dataclass
class _Progress:
    """What an interrupted study's ``study.json`` says was done (``--resume``)."""

    steps: list[dict[str, object]]
    """The commands that succeeded, as recorded, in order."""
    wall: float
    """Wall time spent so far."""
    stale: list[str]
    """Session directories no succeeded command accounts for: written by a command that was
    interrupted or failed, removed before the study goes on."""

    @property
    def done(self) -> set[str]:
        """The commands not to run again."""
        return {str(step["command"]) for step in self.steps}


def progress(out: Path) -> _Progress:
    """What ``out`` holds of a study that was interrupted, or finished with a failed command
    (the commands that failed run again).

    Raises
    ------
    cnibench.errors.ConfigError
        ``out`` holds no account of a study, or one that finished with every command done.
    """
    account_file = out / "study.json"
    try:
        account = json.loads(account_file.read_text())
    except (OSError, ValueError) as exc:
        raise ConfigError(f"{out} holds no study to resume ({account_file}: {exc})") from exc
    runs = [
        s for s in account.get("steps", []) if str(s.get("command", "")).startswith("cnibench run")
    ]
    steps = [step for step in runs if step.get("exit_code") == 0]
    if account.get("finished", True) and len(steps) == len(runs):
        raise ConfigError(f"{out} holds a finished study with no failed command: nothing to resume")
    kept = {name for step in steps for name in step.get("sessions", [])}
    _check_same_machine(out, kept)
    stale = sorted(_sessions(out) - kept)
    return _Progress(steps, float(account.get("wall_seconds", 0.0)), stale)


def _machine(cpu_model: object, cpu_count: object, kernel: object) -> str:
    return f"{cpu_model}, {cpu_count} CPUs, kernel {kernel}"


def _machines(environments: pd.DataFrame) -> list[str]:
    """Each machine the fingerprints ``environments`` name, once, sorted."""
    return sorted({_machine(r.cpu_model, r.cpu_count, r.kernel) for r in environments.itertuples()})


def _check_same_machine(out: Path, sessions: set[str]) -> None:
    """Refuse to resume on a machine other than the one ``sessions`` ran on: the study's
    comparisons across sessions would then compare machines as well as configurations."""
    envs = load_environments(out, on_error="warn") if sessions else pd.DataFrame()
    if envs.empty:
        return
    theirs = _machines(envs[envs["session_id"].isin(sessions)])
    here = environment_fingerprint()
    mine = _machine(here.cpu_model, here.cpu_count, here.kernel)
    if theirs and theirs != [mine]:
        raise ConfigError(
            f"{out}'s sessions ran on {'; '.join(theirs)}, this machine is {mine}: resumed"
            " here, the study would compare machines as well as configurations (run it again"
            " into a new --out)"
        )


def finish(
    out: Path,
    steps: Sequence[dict[str, object]] | None = None,
    wall: float = 0.0,
    log: Callable[[str], None] | None = None,
) -> None:
    """The report (``report.html``, ``summary.md``), the verdict and the study's account
    (``study.json``) of a study directory; raw tool output removed (the records keep every
    measurement). ``steps=None`` (``--finish``): the account of the run that measured stays."""
    log = log or _log
    account_file = out / "study.json"
    if steps is None:
        previous = json.loads(account_file.read_text()) if account_file.exists() else {}
        recorded = [
            s for s in previous.get("steps", []) if not s["command"].startswith("cnibench report")
        ]
        wall = float(previous.get("wall_seconds", wall))
    else:
        recorded = list(steps)
    report = _cli(
        "report",
        str(out),
        "--html",
        str(out / "report.html"),
        "--markdown",
        str(out / "summary.md"),
        env=dict(os.environ),
        log=log,
    )
    recorded.append(report.record())
    atomic_write_bytes(out / "verdict.md", verdict_markdown(out).encode())
    for raw in sorted(out.glob("*/raw")):
        shutil.rmtree(raw)
    _account(out, recorded, wall, done=True)


def _log(line: str) -> None:
    print(line, flush=True)  # before the output of the command it announces


def _since(started: float) -> float:
    """Seconds of wall time since the monotonic reading ``started``."""
    return time.monotonic() - started


def _cni(line: Sequence[str]) -> str:
    return line[list(line).index("--cni") + 1]


def _rest_done(lines: Sequence[Sequence[str]], index: int, done: set[str]) -> bool:
    """Whether every later part of ``lines[index]``'s configuration (the commands that
    follow with the same ``--cni``) is in ``done``."""
    cni = _cni(lines[index])
    for line in lines[index + 1 :]:
        if _cni(line) != cni:
            break
        if shlex.join(line) not in done:
            return False
    return True


def run(
    out: Path,
    *,
    engine: str = ENGINE,
    plan: Sequence[Configuration] = STUDY,
    log: Callable[[str], None] = _log,
    resume: _Progress | None = None,
) -> int:
    """Run the whole of ``plan`` (the study) into ``out``; 0 when every command succeeded.

    ``study.json`` says after every command what has run (``"finished": false`` until the
    report is written), so a study stopped half-way (Ctrl-C, a machine needed for something
    else) goes on with ``resume`` (:func:`progress`): the commands that succeeded are not run
    again, and what the others wrote is removed first."""
    from cnibench.backends.kube.engines import engine_down
    from cnibench.engine import ENGINE_LEASE, engine_status, engine_up
    from cnibench.leases import hold

    started = time.monotonic()
    before = resume.wall if resume else 0.0
    recorded: list[dict[str, object]] = list(resume.steps) if resume else []
    done = resume.done if resume else set()
    for name in resume.stale if resume else ():
        log(f"cnibench study: removing {out / name}: no command that succeeded wrote it")
        shutil.rmtree(out / name)
    was_running = engine_status(engine).running
    log(f"$ cnibench engine up --name {engine}")
    env = {**os.environ, "DOCKER_HOST": engine_up(engine)}
    # Held for the whole study: between two of its commands no session holds the engine, and
    # another shell's `cnibench clean` must not stop it under the next one.
    lease = hold(ENGINE_LEASE, env["DOCKER_HOST"])
    failed = 0
    try:
        build = _cli("images", "build", *IMAGES, env=env, log=log)
        if build.exit_code != 0:
            return build.exit_code
        lines = commands(out, study=plan)
        for index, line in enumerate(lines):
            if shlex.join(line) in done:
                log(f"cnibench study: done before, not run again: {shlex.join(line)}")
                continue
            if "--keep-cluster" in line and _rest_done(lines, index, done):
                # No later part runs on this cluster again: keeping it would leave it
                # running beside every configuration that follows.
                line = [arg for arg in line if arg != "--keep-cluster"]
            step = _cli(*line[1:], env=env, log=log, out=out)
            failed += step.exit_code != 0
            recorded.append(step.record())
            _account(out, recorded, before + _since(started), done=False)
            log(f"cnibench study: {step.seconds:.0f} s, exit {step.exit_code}")
    finally:
        lease.release()
        if not was_running:  # the study started it: it stops it
            log(f"$ cnibench engine down --name {engine}")
            engine_down(engine)
    finish(out, recorded, before + time.monotonic() - started, log)
    log(f"cnibench study: {time.monotonic() - started:.0f} s; {failed} command(s) failed")
    return 1 if failed else 0


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m cnibench.study [--plan study|which-cni] [--print] [--out DIR] [--engine
    NAME] [--finish | --resume]``."""
    parser = argparse.ArgumentParser(prog="python -m cnibench.study", description=__doc__)
    today = datetime.now(UTC).strftime("%Y-%m-%d")
    parser.add_argument("--out", type=Path, default=Path("docs/results") / f"kind-{today}")
    parser.add_argument("--engine", default=ENGINE, help=f"private engine (default {ENGINE})")
    parser.add_argument(
        "--plan",
        choices=sorted(PLANS),
        default="study",
        help="study: the kind study (default); which-cni: flannel, Cilium and kube-router,"
        " quick (nox -s kind-demo)",
    )
    parser.add_argument("--print", action="store_true", help="print the commands only")
    parser.add_argument(
        "--finish", action="store_true", help="only write report, verdict and account of --out"
    )
    parser.add_argument(
        "--resume",
        action="store_true",
        help="go on with the study --out holds: skip the commands that succeeded",
    )
    args = parser.parse_args(argv)
    try:
        plan = PLANS[args.plan]
        if args.print:
            for line in commands(args.out, study=plan):
                print(shlex.join(line))
            return 0
        if args.finish:
            finish(args.out)
            return 0
        resume = progress(args.out) if args.resume else None
        if resume is None and args.out.exists() and any(args.out.iterdir()):
            raise ConfigError(
                f"{args.out} is not empty: the study writes a new results set"
                " (--resume goes on with a study stopped half-way)"
            )
        with sigterm_raises_interrupt():  # `kill` cleans up as Ctrl-C does
            return run(args.out, engine=args.engine, plan=plan, resume=resume)
    except CnibenchError as exc:
        print(f"cnibench study: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
