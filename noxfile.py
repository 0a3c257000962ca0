"""Sessions people and CI both use: ``nox -s demo``, ``nox -s tests``, lint, typecheck, perf.

Set-up is part of each session: Python dependencies go into the session's virtualenv, system
packages (iperf3, nginx, Prometheus, ...) are installed with apt when running as root and missing
(``python -m cnibench.system --install``), and anything that could not be installed is named.
"""

from __future__ import annotations

import os
import shutil
import subprocess

import nox

nox.options.sessions = ["lint", "typecheck", "tests"]
nox.options.reuse_existing_virtualenvs = True

PREPARE_IMAGES = ("images", "build", "--cni", "cilium", "--prepare")
"""What the kind tier's image builds need that takes long and no engine (see ``tests``)."""

PYTHON = False if os.environ.get("CNIBENCH_NOX_NO_VENV") else None


def _install(session: nox.Session, extras: str = "test") -> None:
    session.install("-e", f".[{extras}]")


def _python(session: nox.Session) -> str:
    """The session's interpreter (the one cnibench is installed in)."""
    try:
        return os.path.join(session.bin, "python")
    except ValueError:  # CNIBENCH_NOX_NO_VENV: no virtualenv, the current environment
        return "python3"


def _system(session: nox.Session) -> None:
    session.run("python", "-m", "cnibench.system", "--install")


@nox.session(python=PYTHON)
def tests(session: nox.Session) -> None:
    """The whole suite: unit, integration, lab, reliability, kube (real apiserver), kind (real
    kind clusters from the offline image set, in a private engine), bench on lab."""
    _install(session)
    _system(session)
    # Kubernetes' commands (shared by the kube tier's control plane and the kind tier's node
    # image), kwok and helm, built once and cached outside the repository (cold: about 15
    # minutes on 2 cores; warm: seconds). The rest of the offline image set is prepared below.
    session.run("nice", "-n", "19", "bash", "scripts/kube-tier.sh", external=True)
    require = os.environ.get("CNIBENCH_REQUIRE", "lab,kube,kind")
    args = session.posargs or [
        "tests",
        "--cluster=lab",
        "--profile=quick",
        "-p",
        "no:cacheprovider",
        "--durations=25",
    ]
    # The kind tier runs last (tests/conftest.py) and needs the offline image set with Cilium:
    # its Go builds and root filesystems (cold: about 25 minutes of CPU) start now, niced, on
    # the CPU the other tiers leave idle; the tier's own `images build` waits for them.
    prepare = None
    if not session.posargs and "kind" in require.split(",") and os.geteuid() == 0:
        log = open(os.path.join(session.create_tmp(), "images-prepare.log"), "w")  # noqa: SIM115
        prepare = subprocess.Popen(
            ["nice", "-n", "19", _python(session), "-m", "cnibench.cli", *PREPARE_IMAGES],
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        session.log(f"offline images: preparing in the background (pid {prepare.pid}, {log.name})")
    # The kind tier's result sets are kept as artefacts of the run (load them with
    # cnibench.load_results); each run starts from an empty directory.
    kind_results = os.path.join(session.create_tmp(), "kind-results")
    shutil.rmtree(kind_results, ignore_errors=True)
    env = {"CNIBENCH_REQUIRE": require, "CNIBENCH_KIND_RESULTS": kind_results}
    try:
        session.run("python", "-m", "pytest", *args, env=env)
    finally:
        if prepare is not None and prepare.poll() is None:  # pytest ended before the kind tier
            prepare.terminate()
            prepare.wait()


@nox.session(python=PYTHON)
def lint(session: nox.Session) -> None:
    """ruff (style and bugs) and import-linter (the layer contracts of ARCHITECTURE.md)."""
    session.install("ruff>=0.5", "import-linter>=2.0")
    session.install("-e", ".", "--no-deps")
    session.run("ruff", "check", "src", "tests", "bench", "noxfile.py")
    session.run("ruff", "format", "--check", "src", "tests", "bench", "noxfile.py")
    session.run("lint-imports")


@nox.session(python=PYTHON)
def typecheck(session: nox.Session) -> None:
    """mypy --strict on src/."""
    _install(session, "dev")
    session.run("mypy")


@nox.session(python=PYTHON)
def demo(session: nox.Session) -> None:
    """Set-up, then the main job on the embedded default (lab backend), quick profile."""
    _install(session)
    _system(session)
    session.run(
        "cnibench",
        "run",
        "--cluster",
        "auto",
        "--profile",
        "quick",
        # Seed 000's four egress cases (both datapaths); baseline, WireGuard and seed 003's
        # policy precedence cases on vxlan keep the demo within 10 minutes on a fresh 2-core
        # machine (5.4 min measured without priority, warm pip cache, machine shared with CI).
        "--scenario",
        "baseline@vxlan,egress@routed+vxlan,wireguard@vxlan,priority@vxlan",
        "--report",
        "results/report.html",
        *session.posargs,
    )


@nox.session(python=PYTHON)
def perf(session: nox.Session) -> None:
    """Speed and fidelity benchmarks, each printing ratios measured side by side in one run."""
    _install(session)
    _system(session)
    for script in sorted(os.listdir("bench")):
        if script.endswith(".py") and not script.startswith("_"):
            session.run("python", os.path.join("bench", script), *session.posargs)
