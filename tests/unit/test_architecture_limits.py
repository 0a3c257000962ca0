"""Limits the architecture keeps, read from the source with :mod:`ast` (and, for a class's
bases, from the imported classes' MRO): no class grows past :data:`MAX_CLASS_LINES`, the bodies
of its bases in cnibench counted with its own (a feature that large belongs in a module of its
own, as the lab's and the kube backend's clusters and the offline builder delegate to theirs:
mixins would only spread one large object over several modules), and no scenario asks which
backend it runs on (a difference between backends is a fact the backend states, e.g.
:attr:`~cnibench.backends.base.Policies.policy_settle_seconds`)."""

from __future__ import annotations

import ast
import importlib
import pkgutil
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


def qualified_class_lengths(source: str) -> dict[str, int]:
    """Lines of every class in ``source`` reachable by name from the module (nested in classes
    too), by ``__qualname__``, decorators included; classes inside functions are left out."""
    lengths: dict[str, int] = {}

    def visit(body: list[ast.stmt], prefix: str) -> None:
        for node in body:
            if isinstance(node, ast.ClassDef):
                first = min([node.lineno, *(d.lineno for d in node.decorator_list)])
                lengths[prefix + node.name] = (node.end_lineno or node.lineno) - first + 1
                visit(node.body, f"{prefix}{node.name}.")

    visit(ast.parse(source).body, "")
    return lengths


def lengths_with_bases(
    classes: list[type], lengths: dict[tuple[str, str], int]
) -> dict[tuple[str, str], int]:
    """Lines of each of ``classes`` with those of every base in its MRO whose body ``lengths``
    holds (by ``(module, qualname)``), each class once."""
    return {
        (cls.__module__, cls.__qualname__): sum(
            lengths.get((base.__module__, base.__qualname__), 0) for base in cls.__mro__
        )
        for cls in classes
    }


def _cnibench_classes() -> tuple[list[type], dict[tuple[str, str], int]]:
    """Every class a module of cnibench defines, and the lines of each cnibench class body."""
    classes: list[type] = []
    lengths: dict[tuple[str, str], int] = {}
    for info in pkgutil.walk_packages(cnibench.__path__, "cnibench."):
        module = importlib.import_module(info.name)
        source = Path(module.__file__ or "").read_text()
        for qualname, lines in qualified_class_lengths(source).items():
            lengths[info.name, qualname] = lines
        classes.extend(_defined_in(module, info.name))
    return classes, lengths


def _defined_in(namespace: object, module: str) -> list[type]:
    """The classes ``namespace`` (a module or a class) defines, and those nested in them."""
    found: list[type] = []
    for value in vars(namespace).values():
        if isinstance(value, type) and value.__module__ == module and value is not namespace:
            prefix = f"{namespace.__qualname__}." if isinstance(namespace, type) else ""
            if value.__qualname__ == prefix + value.__name__:
                found += [value, *_defined_in(value, module)]
    return found


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


def test_a_class_is_measured_with_its_bases_each_once() -> None:
    source = "class A:\n    x = 1\n\n\nclass B(A):\n    class Inner:\n        y = 2\n"
    assert qualified_class_lengths(source) == {"A": 2, "B": 3, "B.Inner": 2}

    class A:
        pass

    class B(A):
        pass

    class C(A):
        pass

    class D(B, C):
        pass

    lengths = {(__name__, cls.__qualname__): 10 for cls in (A, B, C, D)}
    measured = lengths_with_bases([A, D, int], lengths)
    assert measured[__name__, A.__qualname__] == 10
    assert measured[__name__, D.__qualname__] == 40  # A counted once, not through B and C
    assert measured["builtins", "int"] == 0  # no body in cnibench


def test_no_class_in_cnibench_is_longer_than_the_limit() -> None:
    too_long = [
        f"{path.relative_to(SOURCE)}: {name} has {lines} lines"
        for path in _modules(SOURCE)
        for name, lines in class_lengths(path.read_text()).items()
        if lines > MAX_CLASS_LINES
    ]
    assert not too_long, f"classes over {MAX_CLASS_LINES} lines: {too_long}"


def test_no_class_in_cnibench_is_longer_than_the_limit_with_its_bases() -> None:
    """A class made of mixins is one object: its MRO's cnibench bodies count together."""
    classes, lengths = _cnibench_classes()
    too_long = [
        f"{module}.{qualname} has {lines} lines with its bases"
        for (module, qualname), lines in sorted(lengths_with_bases(classes, lengths).items())
        if lines > MAX_CLASS_LINES
    ]
    assert not too_long, f"classes over {MAX_CLASS_LINES} lines: {too_long}"


@pytest.mark.parametrize("path", _modules(SOURCE / "scenarios"), ids=lambda p: p.name)
def test_scenarios_do_not_compare_the_backend_name(path: Path) -> None:
    found = backend_name_comparisons(path.read_text())
    assert not found, f"{path.name} compares .backend with a string on lines {found}"
