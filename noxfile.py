"""Sessions people and CI both use: ``nox -s demo``, ``nox -s tests``, lint, typecheck, perf.

Set-up is part of each session: Python dependencies go into the session's virtualenv, system
packages (iperf3, nginx, Prometheus, ...) are installed with apt when running as root and missing
(``python -m cnibench.system --install``), and anything that could not be installed is named.
"""

from __future__ import annotations

import os

import nox

nox.options.sessions = ["lint", "typecheck", "tests"]
nox.options.reuse_existing_virtualenvs = True

PYTHON = False if os.environ.get("CNIBENCH_NOX_NO_VENV") else None


def _install(session: nox.Session, extras: str = "test") -> None:
    session.install("-e", f".[{extras}]")


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
    # minutes on 2 cores; warm: seconds). The kind tier builds the rest of the offline image
    # set itself, through `cnibench images build`.
    session.run("nice", "-n", "19", "bash", "scripts/kube-tier.sh", external=True)
    env = {"CNIBENCH_REQUIRE": os.environ.get("CNIBENCH_REQUIRE", "lab,kube,kind")}
    args = session.posargs or [
        "tests",
        "--cluster=lab",
        "--profile=quick",
        "-p",
        "no:cacheprovider",
    ]
    session.run("python", "-m", "pytest", *args, env=env)


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
