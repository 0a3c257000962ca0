"""Helpers shared by tests in every folder (importable as ``suite_support``: pytest puts tests/,
the folder of the root conftest, on ``sys.path``)."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
"""The repository (the working directory of every command these helpers run by default)."""

KIND_TIER_LEASE = ("test-tier", "kind")
"""The lease (:mod:`cnibench.leases`) the kind tier holds while it runs: ``nox -s tests`` runs
it in a pytest of its own beside the other tiers, which then leave the host's kind state
(``/lib/modules``, its engine) to it."""


def run_python(
    *args: str, cwd: Path = ROOT, timeout: float = 300, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """``python ARGS`` with this interpreter, output captured as text, never raising on exit."""
    return subprocess.run(
        [sys.executable, *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
        env=None if env is None else {**os.environ, **env},
    )


def run_pytest(
    *args: str, cwd: Path = ROOT, timeout: float = 300, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """A separate ``pytest ARGS`` (without the cache provider, so the tree stays clean)."""
    return run_python(
        "-m", "pytest", "-p", "no:cacheprovider", *args, cwd=cwd, timeout=timeout, env=env
    )


def run_cnibench(*args: object, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    """The ``cnibench`` command (``python -m cnibench.cli ARGS``)."""
    return run_python("-m", "cnibench.cli", *map(str, args), timeout=timeout)


def code_strings(tree: ast.AST) -> list[str]:
    """String constants of a module that are code, not documentation: every bare string
    statement (module, class, function and attribute docstrings) is left out."""
    documentation = {
        id(node.value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant)
    }
    return [
        node.value
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant)
        and isinstance(node.value, str)
        and id(node) not in documentation
    ]
