"""Issue 24, items 1 and 2: the backend chosen from the request (without importing the other
backend), the offline image set on cnibench's own engine and its build checked before anything
is created, and ``BenchSession.run`` as the one door of the CLI, the plugin and a notebook.

No container engine may be started here: where a test needs "an engine answers" it fakes the
probe, and says so.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path
from typing import ClassVar

import pandas as pd
import pytest

from cnibench import cli
from cnibench.backends.kube.images import Images
from cnibench.session import BenchSession, SessionOutcome, select_backend

pytest_plugins = ["pytester"]

ROOT = Path(__file__).resolve().parents[2]
OWN_ENGINE = "unix:///run/cnibench-engine/cnibench/docker.sock"
"""Where ``cnibench engine up`` puts its socket (nothing listens there in these tests)."""


class _NoProcess:
    """Stands in for :class:`subprocess.Popen`: records the argv and refuses to start it, so a
    test shows that nothing (no ``kind create cluster``, no ``docker``) was run."""

    started: ClassVar[list[list[str]]] = []

    def __init__(self, argv: object, *args: object, **kwargs: object) -> None:
        self.started.append([str(a) for a in argv] if isinstance(argv, list) else [str(argv)])
        raise AssertionError(f"a process was started: {argv}")


@pytest.mark.parametrize(
    ("environ", "offline"),
    [
        ({"DOCKER_HOST": OWN_ENGINE}, True),
        ({"DOCKER_HOST": "unix:///var/run/docker.sock"}, False),
        ({}, False),
        ({"DOCKER_HOST": OWN_ENGINE, "CNIBENCH_IMAGES": "public"}, False),
        (
            {"DOCKER_HOST": "unix:///tmp/e/x/docker.sock", "CNIBENCH_ENGINE_RUN": "/tmp/e"},
            True,
        ),
    ],
    ids=["own-engine", "system-engine", "no-engine", "public-asked", "moved-run-root"],
)
def test_the_offline_image_set_is_kind_s_default_on_cnibench_s_own_engine(
    environ: dict[str, str], offline: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Faked: DOCKER_HOST names an engine socket where nothing listens (none is asked)."""
    for variable in ("DOCKER_HOST", "CNIBENCH_IMAGES", "CNIBENCH_ENGINE_RUN"):
        monkeypatch.delenv(variable, raising=False)
    for variable, value in environ.items():
        monkeypatch.setenv(variable, value)
    monkeypatch.setenv("PATH", "/usr/bin:/bin")  # restored after: the provider may extend it
    kind, _ = select_backend("kind")
    assert kind.images.offline is offline  # type: ignore[attr-defined]
    assert kind.provider.images.offline is offline  # type: ignore[attr-defined]
    existing = Images.from_environment(environ)  # what an existing or AKS cluster takes
    assert existing.offline is (environ.get("CNIBENCH_IMAGES") == "offline")


@pytest.mark.parametrize(
    ("cluster", "label", "command"),
    [
        ("kind", "flannel", "run cnibench images build (once per engine"),
        ("kind", "cilium:mode=kpr", "run cnibench images build --cni cilium (once"),
        ("auto", "flannel", "run cnibench images build (once per engine"),
    ],
    ids=["kind-flannel", "kind-cilium", "auto-flannel"],
)
def test_a_kind_run_whose_images_are_not_built_is_refused_before_anything_is_created(
    cluster: str,
    label: str,
    command: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Faked: DOCKER_HOST names cnibench's own engine's socket but nothing listens there, and
    with ``--cluster auto`` the engine probe answers "docker" (no engine may run here). Real:
    the empty build cache (``CNIBENCH_CACHE``), the CLI and the session's choice."""
    monkeypatch.setenv("DOCKER_HOST", OWN_ENGINE)
    monkeypatch.setenv("CNIBENCH_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("PATH", "/usr/bin:/bin")  # restored after: the provider may extend it
    for variable in ("CNIBENCH_IMAGES", "CNIBENCH_ENGINE_RUN", "XDG_CACHE_HOME"):
        monkeypatch.delenv(variable, raising=False)
    monkeypatch.setattr("cnibench.session.choice.container_engine", lambda: "docker")
    _NoProcess.started = []
    monkeypatch.setattr(subprocess, "Popen", _NoProcess)
    results = tmp_path / "results"
    argv = ["run", "--cluster", cluster, "--cni", label, "--scenario", "egress"]
    code = cli.main([*argv, "--results-dir", str(results)])
    err = capsys.readouterr().err
    assert code == cli.EXIT_USAGE, err
    (line,) = err.strip().splitlines()
    assert line.startswith("cnibench: error: the offline images of this kind run are not built")
    assert command in line
    assert _NoProcess.started == []  # no kind, no docker: nothing was created
    assert not results.exists()
    assert not (tmp_path / "cache").exists()  # nothing was built either


def test_importing_the_lab_imports_no_kube_module() -> None:
    """Every name of the lab package (imported on first use: the star import asks for all)."""
    done = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", "from cnibench.backends.lab import *"],
        capture_output=True, text=True, timeout=120, check=True,
    )  # fmt: skip
    # Lines read "import time: <self> | <cumulative> | <indented module name>".
    modules = [
        line.rsplit("|", 1)[1].strip()
        for line in done.stderr.splitlines()
        if line.startswith("import time:") and line.count("|") == 2
    ]
    assert "cnibench.backends.lab" in modules  # the parse found the imports
    assert [m for m in modules if m.startswith("cnibench.backends.kube")] == []


_PLANNING = """
import sys
from pathlib import Path

from cnibench import cli
from cnibench.session import BenchSession, SessionOutcome, select_backend


def run(self, planned=None, **options):
    kube = sorted(m for m in sys.modules if m.startswith("cnibench.backends.kube"))
    print("KUBE", kube)
    print("BACKEND", self.backend.name, self.cnis)
    return SessionOutcome((), (), (), (), Path(sys.argv[1]) / "none")


BenchSession.run = run
cli.main(["run", *sys.argv[2:], "--scenario", "egress", "--results-dir", sys.argv[1]])
"""


@pytest.mark.parametrize(
    "argv",
    [("--cluster", "lab", "--cni", "vxlan"), ("--cluster", "auto", "--cni", "vxlan")],
    ids=["lab", "auto"],
)
def test_planning_a_lab_run_imports_no_kube_module(argv: tuple[str, ...], tmp_path: Path) -> None:
    """``cnibench run`` up to the session's door, in a fresh interpreter: every option checked,
    the backend chosen, the session opened. Faked: ``BenchSession.run`` only reports what was
    imported (running the lab needs root; tests/lab runs it). With ``--cluster auto`` a
    ``docker`` on PATH answers ``docker info``, and must not even be asked."""
    fake_bin = tmp_path / "bin"
    fake_bin.mkdir()
    asked = tmp_path / "docker-asked"
    (fake_bin / "docker").write_text(f'#!/bin/sh\necho "$@" >> {asked}\nexit 0\n')
    (fake_bin / "docker").chmod(0o755)
    done = subprocess.run(
        [sys.executable, "-c", _PLANNING, str(tmp_path / "results"), *argv],
        capture_output=True, text=True, timeout=120, check=False,
        env={"PATH": f"{fake_bin}:/usr/bin:/bin", "PYTHONPATH": str(ROOT / "src")},
    )  # fmt: skip
    assert "BACKEND lab ('vxlan',)" in done.stdout, done.stdout + done.stderr
    assert "KUBE []" in done.stdout, done.stdout
    assert not asked.exists()


def test_the_cli_the_plugin_and_the_notebook_example_all_go_through_bench_session_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, pytester: pytest.Pytester
) -> None:
    """Each front end reaches the measurement only through ``BenchSession.run``. Faked:
    ``run`` itself, which records its caller's plan and reports every condition skipped (a
    real run needs root; tests/lab runs each front end for real). Real: the option parsing,
    the backend choice (the lab) and the session of each front end."""
    calls: list[tuple[str, ...]] = []

    def run(self: BenchSession, planned: object = None, **options: object) -> SessionOutcome:
        plan = tuple(self.plan(planned))  # type: ignore[arg-type]
        calls.append(tuple(f"{p.scenario.name}/{p.cni}/{p.condition.id}" for p in plan))
        from cnibench.session import Skipped

        skipped = tuple(
            Skipped(p.scenario.name, p.cni, "faked", (p.condition.id,), 1) for p in plan
        )
        return SessionOutcome(tuple(plan), (), skipped, (), self.store.session_dir)

    monkeypatch.setattr(BenchSession, "run", run)
    results = str(tmp_path / "results")

    argv = ["run", "--cluster", "lab", "--cni", "routed", "--scenario", "egress"]
    cli.main([*argv, "--condition", "gateway-on", "--results-dir", results])
    assert calls == [("egress/routed/gateway-on",)]

    pytester.makepyfile(
        test_suite=textwrap.dedent(
            """
            import pytest

            @pytest.mark.egress
            def test_egress(bench, condition):
                bench.run("egress", condition)
            """
        )
    )
    outcome = pytester.runpytest_inprocess(
        "-p",
        "no:cacheprovider",
        "--cluster=lab",
        "--cni=vxlan",
        f"--cnibench-results-dir={results}",
    )
    outcome.assert_outcomes(skipped=2)
    assert calls[1:] == [("egress/vxlan/gateway-off",), ("egress/vxlan/gateway-on",)]

    monkeypatch.chdir(tmp_path)
    # Nothing was measured, so the example's reading of the results gets no rows.
    records = pd.DataFrame({"status": [], "metric": [], "condition": [], "value": []})
    monkeypatch.setattr("cnibench.results.load_results", lambda path, **_: records)
    source = (ROOT / "examples" / "notebook.py").read_text()
    namespace: dict[str, object] = {}
    exec(compile(source, "examples/notebook.py", "exec"), namespace)  # our own example
    assert calls[3:] == [("egress/routed/gateway-off", "egress/routed/gateway-on")]


def test_the_plugin_asks_the_container_engine_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, pytester: pytest.Pytester
) -> None:
    """``--cluster auto`` without ``--cni``: collection and the session share one choice, so
    the engine is asked once (it was asked twice: once to parametrize, once for the session).
    Faked: the probe, which counts its calls and finds no engine (none may run here)."""
    asked: list[str] = []
    monkeypatch.setattr("cnibench.session.choice.container_engine", lambda: asked.append("?") or "")
    pytester.makepyfile(
        test_suite=textwrap.dedent(
            """
            def test_session(cnibench_session, cni):
                assert cnibench_session.backend.name == "lab"
                assert cni in cnibench_session.cnis
            """
        )
    )
    outcome = pytester.runpytest_inprocess(
        "-p", "no:cacheprovider", "--cluster=auto", f"--cnibench-results-dir={tmp_path / 'results'}"
    )
    outcome.assert_outcomes(passed=2)  # routed and vxlan, the lab's defaults
    assert asked == ["?"]


def test_the_session_decides_what_failed_and_what_was_skipped(tmp_path: Path) -> None:
    from cnibench.session import Skipped

    few = Skipped("egress", "flannel", "no egress gateway", ("gateway-on",), 2)
    many = Skipped("policy", "flannel", "no policy", tuple(f"c{i}" for i in range(5)), 8)
    skipped_only = SessionOutcome((), (), (few, many), (), tmp_path)
    assert skipped_only.failed
    assert skipped_only.lines() == [
        "skipped egress/flannel (1 of 2 conditions: gateway-on): no egress gateway",
        "skipped policy/flannel (5 of 8 conditions): no policy",
        "nothing was measured: every condition was skipped",
    ]
    line = "NOT VERIFIED egress/gateway-on: source seen"
    unproven = SessionOutcome((), (), (), (line,), tmp_path)
    assert unproven.failed
    assert unproven.lines() == [line]
