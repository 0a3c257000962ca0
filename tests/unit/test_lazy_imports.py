"""Parse-only commands stay light: the packages that re-export heavy modules import each name on
first use (:mod:`cnibench._lazy`), so the CLI's parser, ``--help`` and a bad option never load
the statistics (scipy, pandas, pyarrow: about 1.5 s of CPU per process, in every CLI call the
suite and a user's scripts make)."""

from __future__ import annotations

import ast
import importlib
import json
import subprocess
import sys
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[2] / "src"
LAZY_PACKAGES = ("cnibench.session", "cnibench.backends.lab", "cnibench.backends.lab.plan")
HEAVY = ("scipy", "pandas", "pyarrow")


def _loaded_after(code: str) -> dict[str, object]:
    """Which of :data:`HEAVY` a fresh interpreter holds after running ``code`` (and what
    ``code`` left in ``result``)."""
    script = (
        "import json, sys\nresult = None\n"
        + code
        + f"\nprint(json.dumps({{'heavy': [m for m in {HEAVY!r} if m in sys.modules],"
        " 'result': result}))"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=True
    )
    found: dict[str, object] = json.loads(done.stdout.strip().splitlines()[-1])
    return found


def _type_checking_imports(package: str) -> dict[str, str]:
    """name -> submodule, from the ``if TYPE_CHECKING:`` imports of ``package``'s
    ``__init__``."""
    path = SRC.joinpath(*package.split("."), "__init__.py")
    found: dict[str, str] = {}
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.If) and ast.unparse(node.test) == "TYPE_CHECKING":
            for stmt in node.body:
                assert isinstance(stmt, ast.ImportFrom)
                assert stmt.module
                prefix = f"{package}."
                assert stmt.module.startswith(prefix), stmt.module
                for alias in stmt.names:
                    found[alias.name] = stmt.module.removeprefix(prefix)
    return found


@pytest.mark.parametrize("package", LAZY_PACKAGES)
def test_a_lazy_package_names_each_export_once_where_it_is_defined(package: str) -> None:
    """The table of names matches what type checkers are told and what ``__all__`` says, and
    each name is the object its module defines."""
    module = importlib.import_module(package)
    table = module._MODULE_OF
    assert table == _type_checking_imports(package)
    assert sorted(module.__all__) == sorted(table)
    for name, submodule in table.items():
        assert getattr(module, name) is getattr(
            importlib.import_module(f"{package}.{submodule}"), name
        )
    with pytest.raises(AttributeError, match="no attribute 'nothing_here'"):
        module.nothing_here  # noqa: B018


def test_the_parser_and_help_load_no_statistics() -> None:
    found = _loaded_after(
        "from cnibench.cli import _build_parser\nresult = bool(_build_parser().format_help())"
    )
    assert found == {"heavy": [], "result": True}


def test_a_bad_option_is_refused_before_the_statistics_load() -> None:
    found = _loaded_after(
        "from cnibench import cli\nresult = cli.main(['run', '--profile', 'no-such-profile'])"
    )
    assert found == {"heavy": [], "result": 2}


def test_the_check_sees_the_statistics_when_a_session_is_imported() -> None:
    """The control: the same check finds scipy and pandas once the session's runner is asked
    for, so the two tests above can fail."""
    found = _loaded_after("from cnibench.session import BenchSession\nresult = 1")
    assert set(found["heavy"]) >= {"scipy", "pandas"}  # type: ignore[arg-type]
