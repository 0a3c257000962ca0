"""The kind study's plan (``cnibench.study``): every command is one a user could type, names
conditions that exist, and the plan holds what issue 25 asks for (n >= 5, >= 3 CNI
configurations, >= 4 scenarios). The study itself runs on kind (``nox -s study``); its
committed results are checked by tests/unit/test_study_results.py."""

from __future__ import annotations

import argparse
from collections import Counter
from pathlib import Path

import pytest

from cnibench.backends.base import ClusterSpec
from cnibench.cli import _build_parser
from cnibench.scenarios import build_scenarios
from cnibench.scenarios.profiles import profile_named
from cnibench.session import plan_conditions, select_backend, session_config
from cnibench.study import PLANS, PROFILE, REFERENCE, STUDY, WHICH_CNI, commands, main

OUT = Path("docs/results/kind-test")


def _parsed(line: list[str]) -> argparse.Namespace:
    assert line[:2] == ["cnibench", "run"]
    return _build_parser().parse_args(line[1:])


@pytest.mark.parametrize(
    "line",
    [line for plan in PLANS.values() for line in commands(OUT, study=plan)],
    ids=lambda line: " ".join(line[5:6] + line[-4:]),
)
def test_each_command_parses_and_plans_exactly_its_conditions(line: list[str]) -> None:
    args = _parsed(line)
    config = session_config(vars(args))
    # Planned as the session plans them: for the backend the command selects (kind, chosen
    # without asking an engine since --cluster names it), whose policy conditions name no engine.
    backend, _ = select_backend(config.cluster, config.cnis)
    registry = {
        name: scenario.on_backend(backend)
        for name, scenario in build_scenarios(config.scenario_options).items()
    }
    planned = plan_conditions(registry, args.scenario, args.condition)
    assert Counter(p.condition.id for p in planned) == Counter(args.condition)
    assert args.cluster == "kind"
    assert Path(args.results_dir) == OUT


def test_every_configuration_keeps_its_cluster_until_its_last_part() -> None:
    lines = iter(commands(OUT))
    for configuration in STUDY:
        kept = ["--keep-cluster" in next(lines) for _ in configuration.parts]
        assert kept == [True] * (len(kept) - 1) + [False], configuration.name


def test_the_study_compares_enough_with_enough_runs() -> None:
    assert profile_named(PROFILE).runs >= 5
    cnis = [configuration.cni for configuration in STUDY]
    assert cnis[0] == REFERENCE
    assert len(set(cnis)) == len(cnis) >= 3
    scenarios = {s for c in STUDY for part in c.parts for s in part.scenarios}
    assert len(scenarios) >= 4
    assert {"baseline", "egress", "policy", "split"} <= scenarios
    # Each part says what it answers (and what it leaves out, where it cuts).
    assert all(part.why for c in STUDY for part in c.parts)


def test_print_shows_the_commands_a_user_types(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--print", "--out", str(OUT)]) == 0
    printed = capsys.readouterr().out.splitlines()
    assert len(printed) == len(commands(OUT))
    assert all(line.startswith("cnibench run --cluster kind --cni ") for line in printed)


def test_a_directory_with_results_is_refused_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "old").mkdir()
    assert main(["--out", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert "is not empty" in err


def _options(cni: str) -> dict[str, str]:
    return dict(ClusterSpec.from_label(cni).options)


def test_cilium_with_and_without_kube_proxy_replacement_differ_in_the_mode_alone() -> None:
    # Issue 48: the 2026-11-27 study's kube-proxy-replacement cluster also had the egress
    # gateway and BPF masquerading, and only the other side carried Traefik.
    cilium = [c.cni for c in STUDY if ClusterSpec.from_label(c.cni).cni == "cilium"]
    kube_proxy = [c for c in cilium if _options(c).get("mode") == "kube-proxy"]
    assert len(kube_proxy) == 1
    replacement = [
        c
        for c in cilium
        if _options(c).get("mode", "kpr") == "kpr"
        and {k: v for k, v in _options(c).items() if k != "mode"}
        == {k: v for k, v in _options(kube_proxy[0]).items() if k != "mode"}
    ]
    assert len(replacement) == 1, cilium
    # Both run the Service conditions, so the two proxies are compared where they work.
    services = {
        c.cni: {x for part in c.parts for x in part.conditions if "-service-" in x}
        for c in STUDY
        if c.cni in (kube_proxy[0], replacement[0])
    }
    assert all(services.values()), services


def test_the_egress_gateway_runs_on_a_configuration_that_asks_for_it_by_name() -> None:
    for configuration in STUDY:
        if any("egress" in part.scenarios for part in configuration.parts):
            features = _options(configuration.cni).get("features", "").split(",")
            assert "egress-gateway" in features, configuration.cni
            # Only the gateway's own contrast runs there: nothing else is compared with it.
            assert all(part.scenarios == ("egress",) for part in configuration.parts)


def test_the_egress_parts_add_rounds_until_decided_within_a_budget() -> None:
    egress = [line for line in commands(OUT) if "egress" in line]
    assert len(egress) == 2
    for line in egress:
        assert "--until-decided" in line
        args = _parsed(line)
        assert args.until_decided
        assert args.budget


def test_which_cni_runs_flannel_cilium_and_kube_router_behind_one_service_proxy() -> None:
    """Issue 49 item 2: ``nox -s kind-demo`` runs flannel, Cilium and kube-router on baseline
    and policy; with kube-proxy in front of Services on all three, a CNI contrast changes the
    CNI alone."""
    names = [ClusterSpec.from_label(c.cni).cni for c in WHICH_CNI]
    assert names == [REFERENCE, "cilium", "kube-router"]
    assert all(_options(c.cni).get("mode", "kube-proxy") == "kube-proxy" for c in WHICH_CNI)
    scenarios = {s for c in WHICH_CNI for part in c.parts for s in part.scenarios}
    assert scenarios == {"baseline", "policy"}
    # The baseline's pod-to-pod conditions run on every configuration: what the CNIs share.
    shared = set.intersection(*({x for p in c.parts for x in p.conditions} for c in WHICH_CNI))
    assert {"cross-node-idle-iperf3", "cross-node-idle-sockperf"} <= shared
    assert all(part.why for c in WHICH_CNI for part in c.parts)


def test_print_shows_the_plan_asked_for(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--plan", "which-cni", "--print", "--out", str(OUT)]) == 0
    printed = capsys.readouterr().out.splitlines()
    assert [line.split()[5] for line in printed] == [c.cni for c in WHICH_CNI]


def test_an_unknown_plan_is_refused() -> None:
    with pytest.raises(SystemExit) as exited:
        main(["--plan", "everything", "--print"])
    assert exited.value.code == 2


class _Commands:
    """Stand-in for the study's ``cnibench`` commands and private engine: each ``cnibench run``
    writes one session directory, as the real one does on kind (``nox -s study`` runs those);
    the study's own bookkeeping around them is what these tests check. ``interrupt_at``: the
    run command (counted from 1) during which Ctrl-C arrives, after it wrote its directory."""

    def __init__(
        self, out: Path, interrupt_at: int = 0, *, first: int = 1, fail_at: int = 0
    ) -> None:
        self.out = out
        self.interrupt_at = interrupt_at
        self.fail_at = fail_at
        self.first = first
        self.ran: list[str] = []

    def __call__(self, *args: str, env: object, log: object, out: Path | None = None) -> object:
        import shlex

        from cnibench import study

        before = {p.name for p in self.out.iterdir()} if self.out.exists() else set()
        if args[0] == "run":
            self.ran.append(shlex.join(["cnibench", *args]))
            (self.out / f"session-{self.first + len(self.ran) - 1:02d}").mkdir(parents=True)
            if len(self.ran) == self.interrupt_at:
                raise KeyboardInterrupt
        wrote = sorted({p.name for p in self.out.iterdir()} - before) if out else []
        failed = args[0] == "run" and len(self.ran) == self.fail_at
        return study._Step(["cnibench", *args], 1.0, int(failed), wrote)


@pytest.fixture
def stand_ins(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """No engine is started, no lease taken, the verdict is not computed (no records)."""
    from types import SimpleNamespace

    from cnibench import engine, leases, study

    monkeypatch.setattr(engine, "engine_status", lambda name: SimpleNamespace(running=True))
    monkeypatch.setattr(engine, "engine_up", lambda name: "unix:///nowhere")
    monkeypatch.setattr(leases, "hold", lambda kind, name: SimpleNamespace(release=lambda: None))
    monkeypatch.setattr(study, "verdict_markdown", lambda out: "")
    return tmp_path / "study"


def test_an_interrupted_study_resumes_where_it_stopped(
    stand_ins: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import json
    import shlex

    from cnibench import study

    out = stand_ins
    planned = [shlex.join(line) for line in commands(out)]
    first = _Commands(out, interrupt_at=3)
    monkeypatch.setattr(study, "_cli", first)
    with pytest.raises(KeyboardInterrupt):
        study.run(out, log=lambda line: None)
    account = json.loads((out / "study.json").read_text())
    assert account["finished"] is False
    assert [s["sessions"] for s in account["steps"]] == [["session-01"], ["session-02"]]

    state = study.progress(out)
    assert state.stale == ["session-03"]  # the interrupted command's
    assert state.done == set(first.ran[:2])

    second = _Commands(out, first=4)
    monkeypatch.setattr(study, "_cli", second)
    assert study.run(out, log=lambda line: None, resume=state) == 0
    assert first.ran[:2] + second.ran == planned
    account = json.loads((out / "study.json").read_text())
    assert account["finished"] is True
    runs = [s for s in account["steps"] if s["command"].startswith("cnibench run")]
    assert len(runs) == len(planned)
    written = {name for s in runs for name in s["sessions"]}
    assert written == {p.name for p in out.iterdir() if p.is_dir()}
    assert "session-03" not in written


def test_resume_refuses_another_machine_in_one_line(
    stand_ins: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Sessions of one study on two machines would make its comparisons across sessions
    compare machines too (a study resumed on another CI machine did, on 2026-12-07)."""
    import dataclasses

    from cnibench import study
    from cnibench.results import ResultsStore, environment_fingerprint

    out = stand_ins
    monkeypatch.setattr(study, "_cli", _Commands(out, interrupt_at=3))
    with pytest.raises(KeyboardInterrupt):
        study.run(out, log=lambda line: None)
    here = environment_fingerprint(backend="kube", provider="kind", cni="flannel")
    store = ResultsStore(out, session_id="session-01")
    store.write_environment(here)
    assert study.progress(out).stale == ["session-03"]  # the same machine: it resumes

    store.write_environment(dataclasses.replace(here, cpu_model="Another CPU", cni="cilium"))
    assert main(["--resume", "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert "Another CPU, " in err
    assert f"this machine is {here.cpu_model}, {here.cpu_count} CPUs" in err
    assert (out / "session-03").exists()  # nothing removed before the refusal


def test_resume_refuses_a_finished_study_and_a_directory_without_one_in_one_line(
    stand_ins: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from cnibench import study

    out = stand_ins
    assert main(["--resume", "--out", str(out)]) == 2
    assert "holds no study to resume" in capsys.readouterr().err
    monkeypatch.setattr(study, "_cli", _Commands(out))
    assert study.run(out, log=lambda line: None) == 0
    assert main(["--resume", "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert "finished study with no failed command" in err


def test_a_failed_first_part_runs_again_without_keeping_a_cluster_nothing_else_uses(
    stand_ins: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import shlex

    from cnibench import study

    out = stand_ins
    planned = [shlex.join(line) for line in commands(out)]
    assert "--keep-cluster" in planned[0]
    monkeypatch.setattr(study, "_cli", _Commands(out, fail_at=1))
    assert study.run(out, log=lambda line: None) == 1
    again = _Commands(out, first=100)
    monkeypatch.setattr(study, "_cli", again)
    assert study.run(out, log=lambda line: None, resume=study.progress(out)) == 0
    # The second part, done before, would have used the kept cluster: now nothing does.
    assert again.ran == [planned[0].replace(" --keep-cluster", "")]
    assert not (out / "session-01").exists()  # what the failed command wrote is gone


def test_ctrl_c_reaches_the_running_command_once_and_waits_for_its_clean_up(
    tmp_path: Path,
) -> None:
    """A real child that takes half a second to clean up after SIGINT or SIGTERM; the study
    is interrupted by a SIGINT to its own process, as ``kill -INT <study>`` or Ctrl-C does."""
    import os
    import signal
    import sys
    import threading

    from cnibench import study

    started, cleaned = tmp_path / "started", tmp_path / "cleaned"
    child = (
        "import pathlib, signal, sys, time\n"
        "seen = []\n"
        "def stop(*_):\n"
        "    seen.append(1)\n"
        "    time.sleep(0.5)\n"
        f"    pathlib.Path({str(cleaned)!r}).write_text(str(len(seen)))\n"
        "    sys.exit(130)\n"
        "signal.signal(signal.SIGINT, stop)\n"
        "signal.signal(signal.SIGTERM, stop)\n"
        f"pathlib.Path({str(started)!r}).write_text('')\n"
        "time.sleep(60)\n"
    )

    def interrupt() -> None:
        for _ in range(600):
            if started.exists():
                break
            threading.Event().wait(0.05)
        os.kill(os.getpid(), signal.SIGINT)

    threading.Thread(target=interrupt, daemon=True).start()
    with pytest.raises(KeyboardInterrupt):
        study._run_to_the_end([sys.executable, "-c", child], os.environ)
    assert cleaned.read_text() == "1"  # cleaned up, before the study went on, after one signal
