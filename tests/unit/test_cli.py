"""Bad input on the command line: one line naming the bad value, exit 2, nothing written."""

from __future__ import annotations

import subprocess
import sys

import pytest

BAD_INPUT = [
    (["run", "--cluster", "moon"], "unknown --cluster 'moon'"),
    (["run", "--cluster", "lab", "--cni", "weave"], "unknown --cni 'weave' for the lab"),
    (["run", "--scenario", "teleport"], "unknown scenario 'teleport'"),
    (
        ["run", "--cluster", "lab", "--scenario", "egress@weave"],
        "unknown --cni 'weave' for the lab",
    ),
    (["run", "--profile", "turbo"], "unknown profile 'turbo'"),
    (["run", "--runs", "0"], "must be a positive integer, got 0"),
    (["run", "--runs", "many"], "'many' is not an integer"),
    (["run", "--duration=-5s"], "invalid duration '-5s'"),
    (["run", "--duration=1.5s"], "whole number of seconds"),
    (["run", "--cluster", "kind", "--cni", "weave"], "unknown --cni 'weave': choose one of"),
    (["run", "--cni", "vxlan", "--cni", "flannel"], "split them into two runs"),
    (
        ["run", "--cluster", "lab", "--interleave", "--sequential"],
        "argument --sequential: not allowed with argument --interleave",
    ),
    (["explode"], "invalid choice: 'explode'"),
    (["images", "build", "--cni", "weave"], "no offline recipe for 'weave': choose from cilium,"),
    (["run", "--target", "clusterip"], "unknown target 'clusterip'"),
    (["run", "--proxy", "ipvs"], "unknown service proxy 'ipvs'"),
    (["run", "--services", "-1"], "services"),
    (["run", "--load-engine", "k6"], "unknown --load-engine 'k6': choose epoll or locust"),
    (
        ["run", "--cluster", "lab", "--scenario", "baseline", "--condition", "nope"],
        "no condition matches --condition nope: choose from same-node-idle-iperf3,",
    ),
]


@pytest.mark.parametrize(
    ("argv", "message"), BAD_INPUT, ids=lambda v: " ".join(v) if isinstance(v, list) else None
)
def test_bad_input_is_one_line_and_exit_2(tmp_path, argv, message):
    results = tmp_path / "results"
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "cnibench.cli",
            *argv,
            *(["--results-dir", str(results)] if argv[0] == "run" else []),
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith("cnibench: error: ")
    assert message in lines[0]
    assert "Traceback" not in done.stderr
    assert not results.exists()


@pytest.mark.parametrize(
    ("n", "multiplier"),
    [(2, "12.7"), (3, "4.3")],
    ids=["two-runs", "three-runs"],
)
def test_few_runs_note_names_the_t_multiplier(n: int, multiplier: str) -> None:
    from cnibench.cli import _few_runs_note

    # Student-t 97.5 % quantiles with 1 and 2 degrees of freedom: 12.706 and 4.303.
    assert f"with n = {n} runs an interval is the mean ± {multiplier} standard errors" in (
        _few_runs_note(n)
    )


@pytest.mark.parametrize("n", [0, 1, 4, 8], ids=["no-interval", "one-run", "four", "eight"])
def test_few_runs_note_is_silent_otherwise(n: int) -> None:
    from cnibench.cli import _few_runs_note

    assert _few_runs_note(n) == ""


def _cli(argv: list[str], **kwargs: object) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "cnibench.cli", *argv],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        **kwargs,  # type: ignore[arg-type]
    )


def test_bare_cnibench_prints_the_usage_and_exits_2() -> None:
    done = _cli([])
    assert done.returncode == 2
    assert done.stdout.startswith("usage: cnibench ")
    for command in ("run", "report", "doctor", "clean", "engine", "images"):
        assert f"    {command} " in done.stdout, done.stdout
    assert "Traceback" not in done.stderr


def test_a_results_dir_that_is_a_file_is_refused_before_anything_starts(tmp_path) -> None:
    taken = tmp_path / "results"
    taken.write_text("not a directory\n")
    done = _cli(["run", "--cluster", "lab", "--scenario", "baseline", "--results-dir", str(taken)])
    assert done.returncode == 2, done.stderr
    assert done.stderr.splitlines() == [
        f"cnibench: error: results directory {taken} is a file, not a directory"
    ]
    assert taken.read_text() == "not a directory\n"


@pytest.mark.parametrize(
    ("commands", "message"),
    [
        ((), "--cluster kind needs the kind command on PATH"),
        (("kind",), "--cluster kind needs a container engine and none answers"),
    ],
    ids=["no-kind", "no-engine"],
)
def test_kind_without_kind_or_an_engine_is_refused_before_anything_starts(
    tmp_path, commands: tuple[str, ...], message: str
) -> None:
    """PATH holds only what the case names: a stand-in ``kind`` that must never run, and no
    ``docker``, so no engine can answer."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    ran = tmp_path / "ran"
    for command in commands:
        script = bin_dir / command
        script.write_text(f'#!/bin/sh\necho "$0 $*" >> {ran}\nexit 1\n')
        script.chmod(0o755)
    results = tmp_path / "results"
    done = _cli(
        ["run", "--cluster", "kind", "--scenario", "baseline", "--results-dir", str(results)],
        env={"PATH": str(bin_dir), "HOME": str(tmp_path)},
    )
    assert done.returncode == 2, done.stderr
    (line,) = done.stderr.strip().splitlines()
    assert line.startswith(f"cnibench: error: {message}"), line
    assert not ran.exists()
    assert not results.exists()


def _two_cni_results(root, session_id="20261124T000000Z-abc123"):
    from cnibench.records import RunRecord, RunStatus
    from cnibench.results import ResultsStore

    store = ResultsStore(root, session_id=session_id)
    for cni in ("routed", "vxlan"):
        run_id = f"egress-{cni}-gateway-off-r0"
        record = RunRecord(
            session_id=session_id,
            run_id=run_id,
            time="2026-11-24T00:00:00+00:00",
            backend="lab",
            provider="lab",
            cni=cni,
            cni_version="1",
            scenario="egress",
            condition="gateway-off",
            parameters={"gateway": "off"},
            repetition=0,
            metric="throughput",
            value=1e9,
            unit="bits/s",
            verified=True,
            status=RunStatus.OK,
            reason="",
        )
        store.write_run(run_id, [record])


def test_report_with_an_unknown_reference_cni_is_a_one_line_usage_error(tmp_path) -> None:
    _two_cni_results(tmp_path / "results")
    done = _cli(["report", str(tmp_path / "results"), "--reference", "flannel"])
    assert done.returncode == 2
    assert done.stderr == (
        "cnibench: error: reference CNI 'flannel' is not in the results: choose one of"
        " routed, vxlan\n"
    )
    assert not (tmp_path / "results" / "report.html").exists()


def test_report_of_one_session_names_only_that_session(tmp_path) -> None:
    _two_cni_results(tmp_path / "results", "20261124T000000Z-aaaaaa")
    _two_cni_results(tmp_path / "results", "20261124T010000Z-bbbbbb")
    markdown = tmp_path / "one.md"
    done = _cli(
        ["report", str(tmp_path / "results"), "--session", "20261124T010000Z-bbbbbb",
         "--markdown", str(markdown)]
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    text = markdown.read_text()
    assert "1 session(s)" in text
    assert "20261124T000000Z-aaaaaa" not in text
    bad = _cli(["report", str(tmp_path / "results"), "--session", "20261124T020000Z-cccccc"])
    assert bad.returncode == 2
    assert bad.stderr.count("\n") == 1
    assert "20261124T020000Z-cccccc" in bad.stderr


@pytest.mark.parametrize(
    ("extra", "said"),
    [([], "removed\n"), (["--keep-cluster"], "removed but the clusters --keep-cluster keeps\n")],
)
def test_an_interrupted_run_says_what_it_left_on_purpose(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], extra: list[str], said: str
) -> None:
    """The run itself is a stand-in that is interrupted at once: what is checked is the line."""
    import cnibench.cli as cli

    def interrupted(args: object) -> int:
        raise KeyboardInterrupt

    monkeypatch.setattr(cli, "_run", interrupted)
    assert cli._main(["run", "--cluster", "kind", *extra]) == 130
    assert (
        capsys.readouterr().err == f"cnibench: interrupted; everything this run created was {said}"
    )
