"""What ``cnibench`` prints for other programs and shells: ``--version``, ``completion bash|zsh``
and the verdict as JSON (``--json`` on ``report`` and ``run``)."""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
from importlib.metadata import version
from pathlib import Path

import pytest

from cnibench import cli, report
from cnibench.cli import run as run_command
from cnibench.cli.completion import completion_script
from cnibench.cli.parser import _build_parser
from cnibench.results import load_results

ROOT = Path(__file__).resolve().parents[2]
SESSION_DIR = ROOT / "docs" / "results" / "kind-2026-11-27" / "20261127T154725Z-7745a0"


def _cli(*argv: str, **kwargs: object) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "cnibench.cli", *argv],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        **kwargs,  # type: ignore[arg-type]
    )


def test_version_prints_the_program_and_the_installed_version() -> None:
    done = _cli("--version")
    assert done.returncode == 0, done.stderr
    assert done.stdout == f"cnibench {version('cnibench')}\n"
    assert done.stderr == ""


def _subcommands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    (action,) = (a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return dict(action.choices)


def test_the_bash_script_names_every_subcommand_and_bash_accepts_it(tmp_path) -> None:
    done = _cli("completion", "bash")
    assert done.returncode == 0, done.stderr
    script = done.stdout
    parser = _build_parser()
    for name, sub in _subcommands(parser).items():
        assert f"        {name})" in script, name
        for action in sub._actions:
            for option in action.option_strings:
                if option.startswith("--"):
                    assert option in script, f"{name} {option}"
    for name in ("up", "down", "status", "build", "list", "push", "prune"):
        assert f"                {name})" in script, name
    path = tmp_path / "cnibench.bash"
    path.write_text(script)
    checked = subprocess.run(["bash", "-n", str(path)], capture_output=True, text=True, check=False)
    assert checked.returncode == 0, checked.stderr


def _complete(script: Path, *words: str) -> list[str]:
    """What bash offers for the last of ``words`` (``""``: a new word), the script sourced."""
    line = " ".join(f"'{w}'" for w in words)
    program = (
        f"source {script}; COMP_WORDS=(cnibench {line}); COMP_CWORD={len(words)};"
        ' _cnibench; printf "%s\\n" "${COMPREPLY[@]}"'
    )
    done = subprocess.run(["bash", "-c", program], capture_output=True, text=True, check=True)
    return [word for word in done.stdout.splitlines() if word]


@pytest.mark.parametrize(
    ("words", "offered"),
    [
        (("ex",), ["export"]),
        (("export", "results/", "--format", ""), ["csv", "parquet", "json", "opensearch"]),
        (("report", "--ht"), ["--html"]),
        (("engine", ""), ["up", "down", "status"]),
        (("engine", "down", "--p"), ["--purge"]),
        (("completion", ""), ["bash", "zsh"]),
        (("report", ""), []),  # a directory: bash completes file names
    ],
    ids=["command", "option-choices", "option", "subcommand", "sub-option", "positional", "file"],
)
def test_the_bash_script_completes(tmp_path, words, offered) -> None:
    script = tmp_path / "cnibench.bash"
    script.write_text(completion_script(_build_parser(), "bash"))
    assert _complete(script, *words) == offered


def test_the_zsh_script_is_the_bash_one_under_bashcompinit(tmp_path) -> None:
    script = completion_script(_build_parser(), "zsh")
    assert script.startswith("#compdef cnibench\n")
    assert "bashcompinit" in script
    assert script.endswith(completion_script(_build_parser(), "bash"))
    path = tmp_path / "_cnibench"
    path.write_text(script)
    zsh = shutil.which("zsh")
    if zsh is None:
        pytest.skip("zsh is not installed here; bash -n checked the bash script")
    checked = subprocess.run([zsh, "-n", str(path)], capture_output=True, text=True, check=False)
    assert checked.returncode == 0, checked.stderr


def test_report_json_is_the_verdict_and_nothing_else_on_stdout(tmp_path) -> None:
    done = _cli("report", str(SESSION_DIR), "--json", "--markdown", str(tmp_path / "s.md"))
    assert done.returncode == 0, done.stderr
    contrasts = json.loads(done.stdout)
    table = report.verdict(load_results(SESSION_DIR, sessions="all"))
    assert len(contrasts) == len(table)
    assert [row["contrast"] for row in contrasts] == table["contrast"].tolist()
    assert "What each feature costs" in done.stderr  # the human output, on stderr
    assert f"wrote {tmp_path / 's.md'}" in done.stderr
    assert (tmp_path / "s.md").exists()


def test_report_json_alone_writes_no_default_html(tmp_path) -> None:
    results = tmp_path / "results"
    shutil.copytree(SESSION_DIR, results / SESSION_DIR.name)
    done = _cli("report", str(results), "--json")
    assert done.returncode == 0, done.stderr
    assert isinstance(json.loads(done.stdout), list)
    assert not (results / "report.html").exists()


def test_run_json_sends_everything_but_the_verdict_to_stderr(monkeypatch, capfd) -> None:
    """A stand-in for the session (a real one needs the lab or a cluster, which unit tests do
    not start): it prints the way a run does, from Python and from a child process writing to
    file descriptor 1, and returns the verdict of a committed session."""
    table = report.verdict(load_results(SESSION_DIR, sessions="all"))

    def session(args: argparse.Namespace) -> tuple[int, object]:
        print("the per-condition table")
        subprocess.run(["echo", "a tool's own output"], check=True)
        return 0, table

    monkeypatch.setattr(run_command, "_run_session", session)
    assert cli.main(["run", "--json"]) == 0
    out, err = capfd.readouterr()
    contrasts = json.loads(out)
    assert len(contrasts) == len(table)
    assert "the per-condition table" in err
    assert "a tool's own output" in err


def test_run_json_of_a_run_without_results_is_an_empty_list(monkeypatch, capfd) -> None:
    monkeypatch.setattr(run_command, "_run_session", lambda args: (1, None))
    assert cli.main(["run", "--json"]) == 1
    out, _ = capfd.readouterr()
    assert json.loads(out) == []
