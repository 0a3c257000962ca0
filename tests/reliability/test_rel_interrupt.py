"""Interrupting cnibench anywhere leaves nothing behind (SPEC section 9, first rule).

A real ``cnibench run --cluster lab --scenario egress --cni routed --profile smoke`` is started
and sent SIGINT (what Ctrl-C sends) or SIGTERM at seeded points spread from 0 s to the end of
the run, plus five points anchored at its end: just after the last run file appears, and just
after the teardown has stopped a monitoring process (the teardown lasts well under a second and
would otherwise rarely be hit), and two just after the first pod appears (verification, about a
second long, which the timed points can all miss). Two runs go at a time so the whole batch
stays under about five minutes on a loaded two-core machine. After each run: exit code 130 (0
when the run had already finished: counted apart), no namespace, state directory, recorded
process or Prometheus of its labs left, no unparsable results file, and what was written before
the signal loads.

The phase a signal hit is read from the outside at the moment it is sent: no lab yet (startup),
a lab without pods or verification (provisioning and Prometheus warm-up), a pod placed but the
condition not yet verified (verification), verified conditions with runs missing (measurement),
every run written but the lab still there (teardown), the lab gone (exit).

Also: a pytest bench session interrupted with SIGINT leaves nothing, and a SIGKILLed run's
leftovers are removed by ``cnibench clean``.
"""

from __future__ import annotations

import os
import random
import re
import signal
import subprocess
import time
from collections import Counter
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from rel_support import (
    EGRESS_RUN,
    STATE_ROOT,
    cb_namespaces,
    cnibench_argv,
    labs_owned_by,
    leftovers_of,
    merge_summary,
    new_leaked_namespaces,
    pid_alive,
    require_root_lab,
    run_files,
    unparsable_files,
)

from cnibench import load_results

SEED = 20261122
TIMED_POINTS = 20
TEARDOWN_POINTS = 5
VERIFICATION_POINTS = 2
EXPECTED_RUNS = 4  # egress: gateway-off and gateway-on, 2 runs each on the smoke profile
WORKERS = 2
POINTS_ENV = "CNIBENCH_RELIABILITY_POINTS"
REPO = Path(__file__).resolve().parents[2]


@dataclass(frozen=True)
class Point:
    """Where to interrupt: ``delay`` seconds after the start, or after the last run file."""

    index: int
    signum: int
    anchor: str  # "start", "last-run", "teardown" or "pods"
    delay: float

    @property
    def label(self) -> str:
        name = signal.Signals(self.signum).name
        return f"{self.index:02d}-{name}-{self.anchor}"


@dataclass
class Outcome:
    """What one interrupted run did and left."""

    point: Point
    phase: str = ""
    signalled: bool = False
    returncode: int | None = None
    elapsed: float = 0.0
    stderr: str = ""
    labs: dict[str, dict[str, Any]] = field(default_factory=dict)
    leftovers: list[str] = field(default_factory=list)
    unparsable: list[str] = field(default_factory=list)
    runs_written: int = 0
    load_error: str = ""


def _merge_labs(into: dict[str, dict[str, Any]], seen: dict[str, dict[str, Any]]) -> None:
    # The newest lab.json wins, except that every process any version recorded is kept
    # (teardown empties the list).
    for lab_id, info in seen.items():
        earlier = into.get(lab_id, {}).get("processes", [])
        pids = {entry["pid"] for entry in earlier}
        later = [e for e in info.get("processes", []) if e["pid"] not in pids]
        into[lab_id] = {**info, "processes": [*earlier, *later]}


def _teardown_started(labs: dict[str, dict[str, Any]]) -> bool:
    """Whether the lab's teardown has begun: Prometheus or an exporter it started is gone."""
    return any(
        not pid_alive(entry["pid"])
        for info in labs.values()
        for entry in info["processes"]
        if entry["name"].endswith(("/prometheus", "/node-exporter"))
    )


def _phase(pid: int, results: Path) -> str:
    labs = labs_owned_by(pid)
    runs = len(run_files(results))
    verified = len(list(results.glob("*/verification-*.json")))
    if not labs:
        return "exit" if runs or verified else "startup"
    if runs >= EXPECTED_RUNS:
        return "teardown"
    if runs < 2 * verified:
        return "measurement"
    if any(info.get("pods") for info in labs.values()):
        return "verification"
    return "provisioning" if verified == 0 else "measurement"


def run_interrupted(point: Point | None, workdir: Path, *, timeout: float = 150.0) -> Outcome:
    """Run the egress benchmark in a child, interrupt it at ``point`` (never when ``None``),
    wait for it and report what it left behind."""
    results = workdir / "results"
    outcome = Outcome(point or Point(-1, signal.SIGINT, "never", 0.0))
    stdout_path, stderr_path = workdir / "stdout.txt", workdir / "stderr.txt"
    with stdout_path.open("w") as out, stderr_path.open("w") as err:
        child = subprocess.Popen(
            cnibench_argv(*EGRESS_RUN, "--results-dir", str(results)),
            stdout=out,
            stderr=err,
            cwd=workdir,
        )
    start = time.monotonic()
    anchor_time: float | None = start if point is None or point.anchor == "start" else None
    try:
        while child.poll() is None and time.monotonic() - start < timeout:
            _merge_labs(outcome.labs, labs_owned_by(child.pid))
            now = time.monotonic()
            if (
                anchor_time is None
                and point is not None
                and point.anchor in ("last-run", "teardown")
                and len(run_files(results)) >= EXPECTED_RUNS
                and (point.anchor == "last-run" or _teardown_started(outcome.labs))
            ):
                anchor_time = now
            if (
                anchor_time is None
                and point is not None
                and point.anchor == "pods"
                and any(info.get("pods") for info in outcome.labs.values())
            ):
                anchor_time = now
            if (
                point is not None
                and not outcome.signalled
                and anchor_time is not None
                and now - anchor_time >= point.delay
            ):
                outcome.phase = _phase(child.pid, results)
                child.send_signal(point.signum)
                outcome.signalled = True
            time.sleep(0.02)
        child.wait(timeout=max(1.0, timeout - (time.monotonic() - start)))
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
    outcome.elapsed = time.monotonic() - start
    outcome.returncode = child.returncode
    outcome.stderr = stderr_path.read_text(errors="replace")
    if not outcome.signalled:
        outcome.phase = "finished"
    outcome.leftovers = leftovers_of(outcome.labs)
    if results.exists():
        outcome.unparsable = unparsable_files(results)
        outcome.runs_written = len(run_files(results))
        if outcome.runs_written:
            try:
                load_results(results)
            except Exception as exc:
                outcome.load_error = f"{type(exc).__name__}: {exc}"
    return outcome


def _points(full_run: float) -> list[Point]:
    """20 points stratified over [0, 1.15 x the uninterrupted run's length] and 5 anchored at
    the end of the run, each with SIGINT or SIGTERM (seeded)."""
    rng = random.Random(SEED)
    span = full_run * 1.15
    points = []
    for i in range(TIMED_POINTS):
        delay = span * (i + rng.random()) / TIMED_POINTS
        points.append(Point(i, rng.choice([signal.SIGINT, signal.SIGTERM]), "start", delay))
    for i in range(TEARDOWN_POINTS):
        signum = rng.choice([signal.SIGINT, signal.SIGTERM])
        # The first two count from the last run file (condition clean-up, then teardown); the
        # others from the moment teardown has stopped a monitoring process (mid-teardown).
        anchor, top = ("last-run", 0.4) if i < 2 else ("teardown", 0.02)
        delay = rng.uniform(0.0, top)
        # The first at once: the lab is still there when the last run file appears, so at
        # least one point lands in teardown however fast this machine tears a lab down (a
        # drawn delay alone landed there once in 27 points on a loaded machine).
        points.append(Point(TIMED_POINTS + i, signum, anchor, 0.0 if i == 0 else delay))
    # Verification (a pod placed, the condition not yet verified) lasts about a second, so
    # timed points could all miss it on a given machine: two count from the first pod.
    for i in range(VERIFICATION_POINTS):
        signum = rng.choice([signal.SIGINT, signal.SIGTERM])
        index = TIMED_POINTS + TEARDOWN_POINTS + i
        points.append(Point(index, signum, "pods", rng.uniform(0.0, 0.05)))
    return points


@dataclass(frozen=True)
class Batch:
    reference: Outcome
    outcomes: dict[str, Outcome]
    leaked_namespaces: set[str]


def _skip_unless_lab() -> None:
    require_root_lab()


@pytest.fixture(scope="module")
def batch(tmp_path_factory: pytest.TempPathFactory) -> Batch:
    """One uninterrupted reference run, then every interrupt point, two at a time."""
    _skip_unless_lab()
    before = cb_namespaces()
    reference_dir = tmp_path_factory.mktemp("reference")
    reference = run_interrupted(None, reference_dir)
    points = _points(reference.elapsed)
    only = os.environ.get(POINTS_ENV, "")
    if only:
        # A development knob (e.g. to see a mutant fail quickly): run only these indices.
        wanted = {int(i) for i in only.split(",")}
        points = [p for p in points if p.index in wanted]
    dirs = {p.label: tmp_path_factory.mktemp(f"point{p.index:02d}") for p in points}
    with ThreadPoolExecutor(max_workers=WORKERS) as pool:
        futures = {p.label: pool.submit(run_interrupted, p, dirs[p.label]) for p in points}
        outcomes = {label: f.result() for label, f in futures.items()}
    leaked = new_leaked_namespaces(before, ())
    phases = Counter(o.phase for o in outcomes.values())
    merge_summary(
        "interrupt",
        {
            "seed": SEED,
            "reference_run_seconds": round(reference.elapsed, 1),
            "points": len(outcomes),
            "phases": dict(phases),
            "finished_before_signal": phases.get("finished", 0),
            "signals": dict(Counter(signal.Signals(p.signum).name for p in points)),
            "exit_codes": dict(Counter(str(o.returncode) for o in outcomes.values())),
            "leaks": sum(len(o.leftovers) for o in outcomes.values()) + len(leaked),
            "unparsable_files": sum(len(o.unparsable) for o in outcomes.values()),
            "runs_written_before_signal": sum(o.runs_written for o in outcomes.values()),
            "detail": {
                label: {
                    "phase": o.phase,
                    "exit": o.returncode,
                    "seconds": round(o.elapsed, 1),
                    "runs_written": o.runs_written,
                    "leftovers": o.leftovers,
                }
                for label, o in outcomes.items()
            },
        },
    )
    return Batch(reference, outcomes, leaked)


def test_uninterrupted_reference_run_succeeds_and_leaves_nothing(batch: Batch) -> None:
    ref = batch.reference
    assert (ref.returncode, ref.runs_written, ref.leftovers) == (0, EXPECTED_RUNS, []), ref.stderr


POINT_LABELS = [p.label for p in _points(30.0)]
"""Parametrization ids only (index, signal, anchor): the delays come from the reference run."""


@pytest.mark.parametrize("index", range(len(POINT_LABELS)), ids=POINT_LABELS)
def test_interrupted_run_exits_130_and_leaves_nothing(batch: Batch, index: int) -> None:
    found = [o for o in batch.outcomes.values() if o.point.index == index]
    if not found:
        pytest.skip(f"point {index} not selected by {POINTS_ENV}")
    outcome = found[0]
    assert outcome.returncode in _allowed_exit_codes(outcome), outcome.stderr[-2000:]
    if outcome.phase != "startup":
        assert "Traceback" not in outcome.stderr, outcome.stderr[-3000:]
    assert outcome.leftovers == [], outcome.phase
    assert (outcome.unparsable, outcome.load_error) == ([], ""), outcome.phase


def _allowed_exit_codes(outcome: Outcome) -> set[int]:
    """130 once cnibench handles signals; 0 when the run finished first (also in ``exit``).

    Two windows lie outside cnibench's reach and keep Python's default behaviour (-SIGNAL, and
    for SIGINT a KeyboardInterrupt traceback while importing): ``startup`` (the interpreter is
    still importing cnibench, nothing exists yet) and ``exit`` (``main`` has returned, the lab
    is gone and every result is written; the interpreter is shutting down).
    """
    if not outcome.signalled:
        return {0}
    if outcome.phase == "exit":
        # The signal can land after the process has already exited (a zombie ignores it): the
        # run then completed normally, with everything written and nothing left.
        return {0, 130, -outcome.point.signum}
    if outcome.phase == "startup":
        return {130, -outcome.point.signum}
    return {130}


def test_interrupt_points_cover_every_phase(batch: Batch) -> None:
    phases = {o.phase for o in batch.outcomes.values()}
    assert {"provisioning", "verification", "measurement", "teardown"} <= phases, phases


def test_no_new_cb_namespace_survives_the_batch(batch: Batch) -> None:
    assert batch.leaked_namespaces == set()


# -- pytest bench session ---------------------------------------------------------------------

BENCH_DELAYS = (4.0, 12.0, 18.0)
"""Seconds after the pytest session's lab appears (set-up, measurement, later measurement).

The session lasts about 22 s here; a slower or faster machine moves the last point into the
teardown or past the end, which the exit-code check below allows for.
"""

SESSION_SUMMARY = re.compile(r"^=*\s*\d+ (passed|failed|error)[^\n]* in [\d.]+s", re.MULTILINE)
"""pytest's last line: once printed, the session is over and only interpreter exit remains."""


def _allowed_bench_exit_codes(interrupted: bool, output: str) -> set[int]:
    """2 for an interrupted pytest session, 0 for one that finished before the signal.

    A SIGINT that lands after pytest printed its summary (the interpreter is shutting down, the
    lab is gone, every result is written) keeps Python's default: the process dies by it (-2).
    """
    if not interrupted:
        return {0}
    if SESSION_SUMMARY.search(output) and "KeyboardInterrupt" not in output:
        return {0, 2, -signal.SIGINT}
    return {2}


@pytest.mark.parametrize("delay", BENCH_DELAYS, ids=[f"sigint+{d:g}s" for d in BENCH_DELAYS])
def test_interrupted_bench_session_leaves_nothing(tmp_path: Path, delay: float) -> None:
    _skip_unless_lab()
    before = cb_namespaces()
    results = tmp_path / "results"
    log = tmp_path / "pytest.txt"
    with log.open("w") as out:
        child = subprocess.Popen(
            [
                *cnibench_argv()[:1],
                "-m",
                "pytest",
                "tests/bench",
                "-k",
                "egress",
                "--cluster=lab",
                "--cni=routed",
                "--cnibench-profile=smoke",
                f"--cnibench-results-dir={results}",
                "-p",
                "no:cacheprovider",
                "-q",
            ],
            stdout=out,
            stderr=subprocess.STDOUT,
            cwd=REPO,
        )
    labs: dict[str, dict[str, Any]] = {}
    try:
        deadline = time.monotonic() + 120
        while not labs and child.poll() is None and time.monotonic() < deadline:
            labs = labs_owned_by(child.pid)
            time.sleep(0.05)
        assert labs, log.read_text()[-2000:]
        signal_at = time.monotonic() + delay
        while child.poll() is None and time.monotonic() < signal_at:
            _merge_labs(labs, labs_owned_by(child.pid))
            time.sleep(0.05)
        interrupted = child.poll() is None
        if interrupted:
            child.send_signal(signal.SIGINT)
        child.wait(timeout=120)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
    output = log.read_text(errors="replace")
    assert child.returncode in _allowed_bench_exit_codes(interrupted, output), output[-2000:]
    assert leftovers_of(labs) == [], output[-2000:]
    assert new_leaked_namespaces(before, ()) == set()
    assert unparsable_files(results) == [] if results.exists() else True


# -- SIGKILL, then cnibench clean -------------------------------------------------------------


@pytest.fixture
def killed_run(tmp_path: Path) -> Iterator[dict[str, dict[str, Any]]]:
    """A run SIGKILLed while measuring: its labs (as recorded), before any cleaning."""
    _skip_unless_lab()
    results = tmp_path / "results"
    child = subprocess.Popen(
        cnibench_argv(*EGRESS_RUN, "--results-dir", str(results)),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    labs: dict[str, dict[str, Any]] = {}
    try:
        deadline = time.monotonic() + 90
        # Kill while measuring: the lab has its Prometheus, exporters and a client pod.
        while child.poll() is None and time.monotonic() < deadline and not run_files(results):
            _merge_labs(labs, labs_owned_by(child.pid))
            time.sleep(0.05)
        _merge_labs(labs, labs_owned_by(child.pid))
        child.send_signal(signal.SIGKILL)
        child.wait(timeout=10)
        yield labs
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
        from cnibench.backends.lab import clean_leftovers

        for lab_id in labs:
            clean_leftovers(lab_id=lab_id)


def test_sigkilled_run_leaves_leftovers_that_cnibench_clean_removes(
    killed_run: dict[str, dict[str, Any]],
) -> None:
    assert killed_run, "the run never created a lab"
    left = leftovers_of(killed_run)
    assert left, "SIGKILL left nothing: the test cannot show that clean removes anything"
    done = subprocess.run(
        cnibench_argv("clean"), capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr
    assert all(lab_id in done.stdout for lab_id in killed_run), done.stdout
    assert leftovers_of(killed_run) == []
    assert not any((STATE_ROOT / lab_id).exists() for lab_id in killed_run)
