"""``pip install cnibench`` is the lab, the report and the gate; Kubernetes, AKS and the
in-process locust engine come with extras (``cnibench[kube]``, ``[aks]``, ``[locust]``).
Without one, what needs it says so in one line and exits 2; the rest works.

Real: the ``cnibench`` command in a subprocess whose Python cannot import the extras' modules
(``sys.modules[name] = None``, how Python marks a module absent: ``import`` fails and
``importlib.util.find_spec`` finds nothing). tests/lab/test_lab_core_install.py installs the
core alone in a fresh virtualenv and runs the lab there.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from cnibench.errors import ConfigError
from cnibench.extras import EXTRAS, missing_modules, require_extra

ROOT = Path(__file__).resolve().parents[2]
ABSENT = [name for modules in EXTRAS.values() for name in modules]


def _without_extras(*args: str, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    code = (
        "import sys\n"
        f"for name in {ABSENT!r}:\n"
        "    sys.modules[name] = None\n"
        "from cnibench import cli\n"
        f"sys.exit(cli.main({list(args)!r}))\n"
    )
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=300, cwd=tmp_path
    )


@pytest.mark.parametrize(
    ("args", "what", "extra"),
    [
        (["run", "--cluster", "kind", "--cni", "flannel", "--scenario", "baseline"],
         "--cluster kind", "kube"),
        (["run", "--cluster", "existing", "--cni", "cilium"], "--cluster existing", "kube"),
        (["engine", "up"], "cnibench engine", "kube"),
        (["images", "build"], "cnibench images", "kube"),
    ],
)  # fmt: skip
def test_what_needs_an_extra_says_which_in_one_line(
    args: list[str], what: str, extra: str, tmp_path: Path
) -> None:
    done = _without_extras(*args, tmp_path=tmp_path)
    assert done.returncode == 2, done.stderr
    assert done.stderr.count("\n") == 1, done.stderr
    assert done.stderr.startswith(f"cnibench: error: {what} needs cnibench's {extra} extra")
    assert f"pip install 'cnibench[{extra}]'" in done.stderr


def test_the_report_and_clean_work_without_any_extra(tmp_path: Path) -> None:
    results = ROOT / "docs" / "results" / "policy-kind-2026-12-06"
    summary = tmp_path / "summary.md"
    done = _without_extras("report", str(results), "--markdown", str(summary), tmp_path=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "policy takes effect" in summary.read_text()
    done = _without_extras("clean", "--dry-run", tmp_path=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "kube extra is not installed" in done.stdout


def test_require_extra_names_the_missing_modules(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "python_terraform", None)
    assert missing_modules("aks") == ["python_terraform"]
    with pytest.raises(ConfigError) as raised:
        require_extra("aks", "--cluster aks")
    assert str(raised.value) == (
        "--cluster aks needs cnibench's aks extra, which is not installed (no"
        " python_terraform): pip install 'cnibench[aks]'"
    )
    require_extra("kube", "--cluster kind")  # installed here (the dev extra holds them all)
