"""Bad input: one line naming the bad value and what is allowed, the right exit code, no
traceback, nothing written (SPEC section 9, second rule).

Every row runs the real ``cnibench`` command in a subprocess. Usage errors (exit 2) are input the
user can correct on the command line or in the environment before anything starts: unknown
names, numbers out of range, malformed lists, a path that is not a results directory, a
``--cluster`` whose prerequisites (kubeconfig, terraform, Azure credentials) are missing. A
results directory whose files are damaged is a runtime error (exit 1): the argument was right,
the data is not.

tests/unit/test_cli.py already covers unknown --cluster/--cni/--scenario/--profile and
--runs/--duration syntax; the rows here add the rest of the table and check the "what is
allowed" half of each message.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from rel_support import merge_summary

USAGE, RUNTIME = 2, 1


@dataclass(frozen=True)
class Row:
    """One bad input: argv (``{tmp}`` is replaced), expected fragments of the error line."""

    argv: tuple[str, ...]
    exit_code: int
    says: tuple[str, ...]
    env: Mapping[str, str] = field(default_factory=dict)

    @property
    def id(self) -> str:
        return " ".join(self.argv).replace("{tmp}/", "")


def _run(*extra: str, exit_code: int = USAGE, says: tuple[str, ...]) -> Row:
    return Row(("run", *extra), exit_code, says)


ARM = {
    "ARM_CLIENT_ID": "00000000-0000-0000-0000-000000000001",
    "ARM_CLIENT_SECRET": "not-a-real-secret",
    "ARM_TENANT_ID": "00000000-0000-0000-0000-000000000002",
    "ARM_SUBSCRIPTION_ID": "00000000-0000-0000-0000-000000000003",
}

ROWS = [
    _run("--cluster", "moon", says=("'moon'", "lab", "kind", "aks", "existing")),
    _run("--cluster", "lab", "--cni", "flannel", says=("'flannel'", "routed", "vxlan")),
    _run("--cluster", "lab", "--scenario", "teleport", says=("'teleport'", "egress")),
    _run("--cluster", "lab", "--profile", "turbo", says=("'turbo'", "quick")),
    _run("--cluster", "lab", "--runs", "0", says=("0", "positive")),
    _run("--cluster", "lab", "--runs", "-3", says=("-3", "positive")),
    _run("--cluster", "lab", "--duration", "0s", says=("'0s'", "positive")),
    _run("--cluster", "lab", "--duration=-10s", says=("'-10s'",)),
    _run("--cluster", "lab", "--duration", "soon", says=("'soon'",)),
    _run("--cluster", "lab", "--scenario", "split", "--weights", "v1:60", says=("'v1:60'", "=")),
    _run(
        "--cluster", "lab", "--scenario", "split", "--weights", "v1=-5,v2=10", says=("-5", ">= 0")
    ),
    _run("--cluster", "lab", "--scenario", "split", "--weights", "v1=0,v2=0", says=("all zero",)),
    _run("--cluster", "lab", "--scenario", "split", "--weights", "v1=100", says=("at least two",)),
    _run(
        "--cluster",
        "lab",
        "--scenario",
        "split",
        "--weights",
        "v1=x,v2=1",
        says=("'x'", "whole number"),
    ),
    _run("--cluster", "lab", "--scenario", "split", "--users", "0", says=("0", "1..")),
    _run("--cluster", "lab", "--scenario", "split", "--users", "1,abc", says=("'abc'",)),
    _run("--cluster", "lab", "--scenario", "policy", "--rules", "-1", says=("-1", "0..")),
    _run("--cluster", "lab", "--scenario", "policy", "--rules", "99999999", says=("99999999",)),
    _run("--cluster", "lab", "--scenario", "policy", "--clients", "0", says=("0", "1..")),
    _run("--cluster", "lab", "--scenario", "policy", "--clients", "100000", says=("100000",)),
    _run(
        "--cluster", "lab", "--scenario", "policy", "--engine", "ebpf", says=("'ebpf'", "nftables")
    ),
    Row(("report", "{tmp}/missing"), USAGE, ("missing", "does not exist")),
    Row(("report", "{tmp}/a-file"), USAGE, ("a-file", "not a directory")),
    Row(("report", "{tmp}/corrupt"), RUNTIME, ("corrupt", "x.json")),
    Row(
        ("run", "--cluster", "existing", "--scenario", "egress"),
        USAGE,
        ("/nonexistent", "KUBECONFIG"),
        {"KUBECONFIG": "/nonexistent"},
    ),
    Row(
        ("run", "--cluster", "aks", "--scenario", "egress"),
        USAGE,
        ("terraform", "PATH"),
        {**ARM, "PATH": "{nopath}"},
    ),
    Row(
        ("run", "--cluster", "aks", "--scenario", "egress"),
        USAGE,
        ("ARM_CLIENT_SECRET",),
        {"ARM_CLIENT_ID": "", "ARM_CLIENT_SECRET": "", "PATH": "{path}"},
    ),
]


def _bad_workspace(tmp: Path) -> None:
    (tmp / "a-file").write_text("not a results directory\n")
    runs = tmp / "corrupt" / "20261122T000000Z-abcdef" / "runs"
    runs.mkdir(parents=True)
    (runs / "x.json").write_text('{"session_id": "trunc')


def _path_without_terraform(tmp: Path) -> str:
    """A PATH with ``ip`` and friends but no terraform or tofu (either can apply the AKS
    module): a directory of links to /usr/bin etc. would be overkill, so keep the system
    directories and drop any holding one of them."""
    keep = [
        d
        for d in os.environ.get("PATH", "").split(os.pathsep)
        if d and not any((Path(d) / tool).exists() for tool in ("terraform", "tofu"))
    ]
    return os.pathsep.join(keep)


@pytest.mark.parametrize("row", ROWS, ids=[row.id for row in ROWS])
def test_bad_input_is_one_line_with_exit_code_and_nothing_written(tmp_path: Path, row: Row) -> None:
    _bad_workspace(tmp_path)
    results = tmp_path / "results"
    argv = [a.replace("{tmp}", str(tmp_path)) for a in row.argv]
    if argv[0] == "run":
        argv += ["--results-dir", str(results)]
    env = dict(os.environ)
    for key, value in row.env.items():
        if value == "{nopath}":
            value = _path_without_terraform(tmp_path)
        elif value == "{path}":
            value = env.get("PATH", "")
        if value:
            env[key] = value
        else:
            env.pop(key, None)
    before = sorted(p.name for p in tmp_path.iterdir())
    done = subprocess.run(
        [sys.executable, "-m", "cnibench.cli", *argv],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env=env,
        cwd=tmp_path,
    )
    lines = done.stderr.strip().splitlines()
    assert done.returncode == row.exit_code, done.stderr
    assert "Traceback" not in done.stderr + done.stdout
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith("cnibench: error: "), done.stderr
    assert [s for s in row.says if s not in lines[0]] == [], lines[0]
    # Nothing written: no results directory, no report, no new file anywhere in the workspace.
    assert sorted(p.name for p in tmp_path.iterdir()) == before
    assert not results.exists()


def test_split_backend_names_are_free_so_unknown_name_is_not_an_error() -> None:
    """Recorded decision: weights name the split's backends (``v1=60,v3=40`` makes backends
    v1 and v3), so there is no list of known names to check against."""
    from cnibench.scenarios.options import parse_weights

    assert dict(parse_weights("v1=60,v3=40")) == {"v1": 60, "v3": 40}


def test_summary_counts_the_rows() -> None:
    merge_summary(
        "bad_input",
        {
            "rows": len(ROWS),
            "usage_rows": sum(r.exit_code == USAGE for r in ROWS),
            "runtime_rows": sum(r.exit_code == RUNTIME for r in ROWS),
        },
    )
    assert len(ROWS) >= 20
