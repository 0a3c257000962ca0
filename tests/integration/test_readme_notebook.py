"""The README's notebook example runs as written, on results of a real (short) lab run."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.lab


def test_readme_python_example_runs(tmp_path, monkeypatch):
    if os.geteuid() != 0:
        pytest.skip("the lab run behind the example needs root")
    blocks = re.findall(r"```python\n(.*?)```", (ROOT / "README.md").read_text(), re.S)
    assert len(blocks) == 1, "the README should have exactly one notebook example"
    done = subprocess.run(
        [sys.executable, "-m", "cnibench.cli", "run", "--cluster", "lab", "--profile", "quick",
         "--runs", "2", "--scenario", "egress@routed,wireguard@routed",
         "--condition", "gateway-off", "--condition", "gateway-on", "--condition", "off-rr",
         "--results-dir", str(tmp_path / "results")],
        capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    monkeypatch.chdir(tmp_path)  # the example reads "results/"
    namespace: dict[str, object] = {}
    exec(compile(blocks[0], "README.md", "exec"), namespace)  # our own README
    assert type(namespace["fig"]).__name__ == "Figure"
    # gateway on vs off on routed: the verdict has that contrast for throughput.
    table = namespace["table"]
    assert "egress gateway on routed" in set(table["contrast"])
