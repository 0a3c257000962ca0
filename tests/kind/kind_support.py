"""Helpers of the kind tier (imported by its conftest and test modules)."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Mapping

import pytest

ENGINE_NAME = "cnibench-kind-tier"
"""The tier's own engine: a developer's default engine (``cnibench``) is left alone."""


def cnibench(
    *args: str, env: Mapping[str, str], timeout: float = 1800.0, check: bool = True
) -> subprocess.CompletedProcess[str]:
    """Run the real CLI (this interpreter's installation) and return what it printed."""
    done = subprocess.run(
        [sys.executable, "-m", "cnibench.cli", *args],
        env=dict(env),
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    if check and done.returncode != 0:
        pytest.fail(
            f"cnibench {' '.join(args)} exited {done.returncode}\n"
            f"--- stdout\n{done.stdout[-4000:]}\n--- stderr\n{done.stderr[-4000:]}"
        )
    return done
