"""An installed wheel carries the Kubernetes templates, the AKS Terraform and the report's
jinja2 templates.

The wheel is really built (pip + setuptools from PyPI, as a user's ``pip install`` would) and
unpacked into a directory outside the checkout; a child Python that imports cnibench from there
must find ``manifests/`` and ``terraform/aks`` inside the package and render a kind config.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
_NOT_SOURCE = (".git", ".nox", "*.egg-info", "__pycache__", ".*_cache")
"""Left out of the copy the wheel is built from, at any depth."""
_NOT_SOURCE_AT_TOP = ("build", "dist", "results")
"""Left out only at the top of the checkout: ``src/cnibench/results`` is a package."""


def _not_source(directory: str, names: list[str]) -> set[str]:
    ignored = set(shutil.ignore_patterns(*_NOT_SOURCE)(directory, names))
    if Path(directory) == REPO:
        ignored |= {name for name in names if name in _NOT_SOURCE_AT_TOP}
    return ignored


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    build = tmp_path_factory.mktemp("build")
    # pip builds in the source tree; build a copy so the checkout gets no build/ or egg-info.
    source = build / "source"
    shutil.copytree(REPO, source, ignore=_not_source)
    done = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(out), str(source)],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
        env={**os.environ, "TMPDIR": str(build)},
    )
    assert done.returncode == 0, done.stderr[-2000:]
    wheels = list(out.glob("cnibench-*.whl"))
    assert len(wheels) == 1, wheels
    return wheels[0]


def test_wheel_contains_every_template_and_terraform_file(wheel: Path) -> None:
    names = set(zipfile.ZipFile(wheel).namelist())
    expected = {
        f"cnibench/_data/{path.relative_to(REPO).as_posix()}"
        for tree in ("manifests", "terraform", "images")
        for path in (REPO / tree).rglob("*")
        if path.is_file() and ".terraform" not in path.parts
    }
    assert expected, "the checkout has no templates to compare with"
    assert expected <= names, sorted(expected - names)[:5]
    # The report's jinja2 templates ship inside the package, beside the module that loads them.
    report_templates = {
        f"cnibench/{path.relative_to(REPO / 'src' / 'cnibench').as_posix()}"
        for path in (REPO / "src" / "cnibench" / "report" / "templates").iterdir()
    }
    assert {"cnibench/report/templates/report.html", "cnibench/report/templates/report.md"} <= (
        report_templates
    )
    assert report_templates <= names, sorted(report_templates - names)


def test_installed_wheel_renders_from_its_own_data(wheel: Path, tmp_path: Path) -> None:
    target = tmp_path / "site"
    zipfile.ZipFile(wheel).extractall(target)
    probe = (
        "import json\n"
        "from cnibench.backends.base import ClusterSpec\n"
        "from cnibench.backends.kube.cni import cni_definition\n"
        "from cnibench.backends.kube.render import manifests_dir, kind_cluster_config\n"
        "from cnibench.backends.kube.providers import terraform_dir\n"
        "spec = ClusterSpec(cni='cilium')\n"
        "config = kind_cluster_config('x', spec, cni_definition(spec))\n"
        "print(json.dumps({'manifests': str(manifests_dir()),"
        " 'terraform': str(terraform_dir()), 'kind': config['kind'],"
        " 'main_tf': (terraform_dir() / 'main.tf').is_file()}))\n"
    )
    done = _run_installed(probe, target, tmp_path)
    found = json.loads(done.stdout)
    assert Path(found["manifests"]) == target / "cnibench" / "_data" / "manifests"
    assert Path(found["terraform"]) == target / "cnibench" / "_data" / "terraform" / "aks"
    assert found["kind"] == "Cluster"
    assert found["main_tf"] is True


def test_installed_wheel_loads_the_report_templates(wheel: Path, tmp_path: Path) -> None:
    target = tmp_path / "site"
    zipfile.ZipFile(wheel).extractall(target)
    probe = (
        "from cnibench.report.templating import report_templates\n"
        "templates = report_templates()\n"
        "print(templates.get_template('report.html').filename)\n"
        "print(templates.get_template('report.md').filename)\n"
    )
    done = _run_installed(probe, target, tmp_path)
    html, markdown = done.stdout.split()
    assert Path(html) == target / "cnibench" / "report" / "templates" / "report.html"
    assert Path(markdown) == target / "cnibench" / "report" / "templates" / "report.md"


def _run_installed(probe: str, target: Path, cwd: Path) -> subprocess.CompletedProcess[str]:
    """Run ``probe`` in a fresh interpreter that sees only the extracted wheel at ``target``
    (no CNIBENCH_ variable, run from ``cwd``); it must succeed."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("CNIBENCH_")}
    env["PYTHONPATH"] = str(target)
    done = subprocess.run(
        [sys.executable, "-c", probe],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        cwd=cwd,
        env=env,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return done
