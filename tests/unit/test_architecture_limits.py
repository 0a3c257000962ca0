"""Limits the architecture keeps, read from the source with :mod:`ast`: no class grows past
:data:`MAX_CLASS_LINES` (a feature that large belongs in a module of its own, as the lab's and
the kube backend's clusters delegate to theirs), and no scenario asks which backend it runs on
(a difference between backends is a fact the backend states, e.g.
:attr:`~cnibench.backends.base.Policies.policy_settle_seconds`)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import cnibench

SOURCE = Path(cnibench.__file__).parent
MAX_CLASS_LINES = 600


def _modules(under: Path) -> list[Path]:
    return sorted(under.rglob("*.py"))


def class_lengths(source: str) -> dict[str, int]:
    """Lines of every class in ``source`` (nested ones too), decorators included."""
    lengths: dict[str, int] = {}
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ClassDef):
            first = min([node.lineno, *(d.lineno for d in node.decorator_list)])
            lengths[node.name] = (node.end_lineno or node.lineno) - first + 1
    return lengths


def _names_a_string(node: ast.expr) -> bool:
    """A string constant, or a tuple, list or set holding one."""
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        return any(_names_a_string(element) for element in node.elts)
    return isinstance(node, ast.Constant) and isinstance(node.value, str)


def backend_name_comparisons(source: str) -> list[int]:
    """Lines comparing an attribute named ``backend`` with a string constant (``==``, ``!=``,
    ``in``, ``not in``, either side)."""
    lines = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.Compare):
            continue
        operands = [node.left, *node.comparators]
        names_backend = any(isinstance(o, ast.Attribute) and o.attr == "backend" for o in operands)
        if names_backend and any(_names_a_string(o) for o in operands):
            lines.append(node.lineno)
    return lines


def test_the_checks_see_what_they_look_for() -> None:
    long_class = "class Big:\n" + "    x = 1\n" * 700
    assert class_lengths(long_class) == {"Big": 701}
    assert backend_name_comparisons("ok = cluster.backend == 'lab'\n") == [1]
    assert backend_name_comparisons("ok = 'kube' != c.backend\n") == [1]
    assert backend_name_comparisons("ok = c.backend in ('lab', 'kube')\n") == [1]
    assert backend_name_comparisons("ok = c.policy_settle_seconds == 0.0\n") == []


def test_no_class_in_cnibench_is_longer_than_the_limit() -> None:
    too_long = [
        f"{path.relative_to(SOURCE)}: {name} has {lines} lines"
        for path in _modules(SOURCE)
        for name, lines in class_lengths(path.read_text()).items()
        if lines > MAX_CLASS_LINES
    ]
    assert not too_long, f"classes over {MAX_CLASS_LINES} lines: {too_long}"


@pytest.mark.parametrize("path", _modules(SOURCE / "scenarios"), ids=lambda p: p.name)
def test_scenarios_do_not_compare_the_backend_name(path: Path) -> None:
    found = backend_name_comparisons(path.read_text())
    assert not found, f"{path.name} compares .backend with a string on lines {found}"
