"""Ship ``manifests/``, ``terraform/`` and ``images/`` inside the wheel as ``cnibench/_data``.

The templates live at the top of the repository (SPEC layout), outside the Python package, so a
plain wheel would not carry them and ``--cluster kind``/``aks`` would fail after ``pip install
cnibench``. This copies them next to the package at build time; everything else is in
pyproject.toml.
"""

from __future__ import annotations

from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

DATA_TREES = ("manifests", "terraform", "images")


class BuildPyWithData(build_py):
    """``build_py`` that also copies the data trees into ``cnibench/_data``."""

    def run(self) -> None:
        super().run()
        root = Path(__file__).resolve().parent
        for name in DATA_TREES:
            source = root / name
            if source.is_dir():
                self.copy_tree(str(source), str(Path(self.build_lib) / "cnibench" / "_data" / name))


setup(cmdclass={"build_py": BuildPyWithData})
