"""The README stays short and starts with its two set-up-and-go commands, every relative link in
the README and docs/ reaches a file (and heading) that exists, and every ``--option`` the docs
name is one that cnibench, its pytest plugin or ``cnibench.system`` really takes (on a pytest
command line, one pytest with the plugin takes)."""

from __future__ import annotations

import contextlib
import io
import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from cnibench import cli, study, system

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
MAX_README_LINES = 155

FENCE = re.compile(r"^```.*?^```[ \t]*$", re.S | re.M)
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
TOP_COMMAND = re.compile(r"^(python3 scripts/bootstrap\.py (\w+)) +# \S.*$")
OPTION = re.compile(r"(?<![\w-])--[a-z][a-z0-9-]*")
PYTEST_COMMAND = re.compile(r"`(?:python3? -m )?pytest( [^`]*)`|(?:^|-m )pytest( [^`\n#]*)", re.M)
"""A pytest command of the docs, a code span (which may wrap) or a code line from ``pytest`` on,
up to a comment: its arguments."""


def _doc_files() -> list[Path]:
    return [README, *sorted((ROOT / "docs").glob("*.md"))]


def _without_code_blocks(text: str) -> str:
    return FENCE.sub("", text)


def _slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = heading.strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def _anchors(path: Path) -> set[str]:
    text = _without_code_blocks(path.read_text())
    return {_slug(m.group(1)) for m in re.finditer(r"^#{1,6} +(.+?) *$", text, re.M)}


def broken_links(path: Path) -> list[str]:
    """Each relative link of ``path`` (outside code blocks) whose file, or heading, is missing."""
    broken = []
    for target in LINK.findall(_without_code_blocks(path.read_text())):
        if re.match(r"[a-z][a-z0-9+.-]*:", target):  # https:, mailto:
            continue
        file_part, _, fragment = target.partition("#")
        linked = (path.parent / file_part).resolve() if file_part else path
        if not linked.exists():
            broken.append(f"{path.name}: {target} (no such file)")
        elif fragment and linked.suffix == ".md" and fragment not in _anchors(linked):
            broken.append(f"{path.name}: {target} (no such heading)")
    return broken


def top_commands(text: str) -> list[str]:
    """The README's set-up-and-go commands: what stands between the title and the first heading
    must be exactly one ``sh`` block of two bootstrap lines, first the demo, then the tests.
    Returns the sessions named; raises AssertionError naming what changed shape."""
    lines = text.splitlines()
    assert lines[0].startswith("# "), "the README starts with its title"
    rest = lines[1:]
    head_end = next((i for i, line in enumerate(rest) if line.startswith("#")), len(rest))
    head = "\n".join(rest[:head_end])
    blocks = FENCE.findall(head)
    assert len(blocks) == 1, f"{len(blocks)} code blocks before the first heading, not 1"
    block_lines = blocks[0].splitlines()
    assert block_lines[0] == "```sh", f"the top block opens with {block_lines[0]!r}"
    assert head.lstrip("\n").startswith("```sh"), "the top block comes right after the title"
    commands = [line for line in block_lines[1:-1] if line.strip()]
    assert len(commands) == 2, f"{len(commands)} commands at the top, not 2"
    sessions = []
    for line in commands:
        match = TOP_COMMAND.match(line)
        assert match, f"top command changed shape: {line!r}"
        sessions.append(match.group(2))
    return sessions


def test_readme_is_short() -> None:
    count = len(README.read_text().splitlines())
    assert count <= MAX_README_LINES, (
        f"README.md has {count} lines (at most {MAX_README_LINES}): move details to docs/"
    )


def test_readme_opens_with_the_demo_and_the_tests_command() -> None:
    assert top_commands(README.read_text()) == ["demo", "tests"]


def test_ci_runs_the_readmes_test_command() -> None:
    """.ci/run's last command is the README's second line, as written there (its comment
    aside): CI runs what a reader runs."""
    lines = README.read_text().splitlines()
    head = lines[: next(i for i, line in enumerate(lines[1:], 1) if line.startswith("#"))]
    tests_line = [m.group(1) for line in head if (m := TOP_COMMAND.match(line))][1]
    ci = [
        line.strip()
        for line in (ROOT / ".ci" / "run").read_text().splitlines()
        if line.strip() and not line.lstrip().startswith("#")
    ]
    assert ci[-1] == tests_line
    noxfile = (ROOT / "noxfile.py").read_text()
    for session in ("demo", "tests"):
        assert re.search(rf"@nox\.session\([^)]*\)\ndef {session}\(", noxfile), session


@pytest.mark.parametrize(
    "top",
    [
        "```sh\nnox -s demo\nnox -s tests\n```\n",  # set-up dropped
        "```sh\npython3 -m pip install nox && nox -s demo     # demo\n```\n",  # one command
        "```sh\npython3 -m pip install nox && nox -s demo  # a\n```\n\n```sh\n"
        "python3 -m pip install nox && nox -s tests  # b\n```\n",  # two blocks
        "Intro first.\n\n```bash\npython3 -m pip install nox && nox -s demo  # a\n"
        "python3 -m pip install nox && nox -s tests  # b\n```\n",  # not sh
    ],
)
def test_a_top_of_another_shape_is_refused(top: str) -> None:
    with pytest.raises(AssertionError):
        top_commands(f"# cnibench\n\n{top}\n## Usage\n")


def test_relative_links_reach_files_and_headings() -> None:
    broken = [problem for path in _doc_files() for problem in broken_links(path)]
    assert not broken, "\n".join(broken)


def test_a_broken_link_is_found(tmp_path: Path) -> None:
    (tmp_path / "there.md").write_text("# There\n\n## A heading: `code`\n")
    page = tmp_path / "page.md"
    page.write_text(
        "# Page\n\n[ok](there.md) [ok](there.md#a-heading-code) [ok](#page) "
        "[web](https://example.org/x.md)\n[gone](missing.md) [gone](there.md#no-such)\n"
        "```\n[in code](also-missing.md)\n```\n"
    )
    assert broken_links(page) == [
        "page.md: missing.md (no such file)",
        "page.md: there.md#no-such (no such heading)",
    ]


def _help(main: Callable[[list[str]], int], *argv: str) -> str:
    """What ``main([*argv, "--help"])`` prints (argparse prints the help, then exits 0)."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out), pytest.raises(SystemExit) as exited:
        main([*argv, "--help"])
    assert exited.value.code == 0, argv
    return out.getvalue()


def _choices(help_text: str) -> list[str]:
    match = re.search(r"^ {2}\{([\w,-]+)\}", help_text, re.M)
    return match.group(1).split(",") if match else []


@pytest.fixture(scope="module")
def pytest_options() -> set[str]:
    """Every long option in the help of pytest with the plugin."""
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "--help", "-p", "no:cacheprovider"],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        cwd=ROOT,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return set(OPTION.findall(done.stdout))


@pytest.fixture(scope="module")
def known_options(pytest_options: set[str]) -> set[str]:
    """Every long option in the help of each ``cnibench`` command and subcommand, of
    ``python -m cnibench.system`` and ``python -m cnibench.study``, and of pytest with the
    plugin."""
    texts = [_help(cli.main), _help(system.main), _help(study.main)]
    for command in _choices(texts[0]):
        text = _help(cli.main, command)
        texts.append(text)
        texts.extend(_help(cli.main, command, sub) for sub in _choices(text))
    return {option for text in texts for option in OPTION.findall(text)} | pytest_options


def test_every_option_the_docs_name_exists(known_options: set[str]) -> None:
    assert {"--cluster", "--cnibench-compare-to", "--prepare", "--install"} <= known_options
    unknown = sorted(
        f"{path.name}: {option}"
        for path in _doc_files()
        for option in set(OPTION.findall(path.read_text()))
        if option not in known_options
    )
    assert not unknown, "options the docs name that no command takes:\n" + "\n".join(unknown)


def test_every_option_a_pytest_command_of_the_docs_names_exists(pytest_options: set[str]) -> None:
    """``cnibench run --profile`` is the plugin's ``--cnibench-profile``: an option of the
    command on a pytest line would pass the check above and fail the reader."""
    assert {"--cni", "--cluster", "--cnibench-profile"} <= pytest_options
    unknown = sorted(
        f"{path.name}: {option}"
        for path in _doc_files()
        for match in PYTEST_COMMAND.finditer(path.read_text())
        for option in OPTION.findall(match.group(1) or match.group(2))
        if option not in pytest_options
    )
    assert not unknown, "options pytest lines of the docs name that pytest lacks:\n" + "\n".join(
        unknown
    )
