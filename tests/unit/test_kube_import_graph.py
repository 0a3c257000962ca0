"""The modules of the kube backend form an import DAG: no cycle, not even through an import
inside a function (a function-level import would hide a cycle, not remove it).

The graph is read from the source with :mod:`ast`: every ``import`` and ``from ... import``,
wherever it is, except under ``if TYPE_CHECKING:`` (never executed). ``from a.b import c`` is an
edge to module ``a.b.c`` when that is a module, else to ``a.b``.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path

import pytest

import cnibench

PACKAGE = "cnibench.backends.kube"


def module_files(root: Path) -> dict[str, Path]:
    """Dotted module name -> file, for every ``.py`` under ``root`` (a package's is its
    ``__init__.py``)."""
    found = {}
    for path in root.rglob("*.py"):
        parts = path.relative_to(root.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        found[name] = path
    return found


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _imports(nodes: Iterable[ast.AST], module: str, files: Mapping[str, Path]) -> Iterator[str]:
    """Every module imported by ``nodes`` (recursively), outside ``if TYPE_CHECKING:``."""
    for node in nodes:
        if isinstance(node, ast.If) and _is_type_checking(node.test):
            yield from _imports(node.orelse, module, files)
            continue
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                # Relative to the module's package (a package's own for its __init__).
                anchor = module.split(".")
                if files[module].name != "__init__.py":
                    anchor = anchor[:-1]
                anchor = anchor[: len(anchor) - (node.level - 1)]
                base = ".".join([*anchor, base] if base else anchor)
            for alias in node.names:
                full = f"{base}.{alias.name}"
                yield full if full in files else base
        yield from _imports(ast.iter_child_nodes(node), module, files)


def import_graph(files: Mapping[str, Path], package: str) -> dict[str, set[str]]:
    """Module -> the modules of ``package`` it imports (see the module docstring)."""
    graph: dict[str, set[str]] = {}
    for name, path in files.items():
        if name != package and not name.startswith(package + "."):
            continue
        tree = ast.parse(path.read_text(), filename=str(path))
        graph[name] = {
            target
            for target in _imports(tree.body, name, files)
            if target in files and target != name and target.startswith(package)
        }
    return graph


def cycles(graph: Mapping[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in sorted(graph.get(node, ())):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def _describe(component: list[str], graph: Mapping[str, set[str]]) -> str:
    lines = [f"cycle of {len(component)} modules:"]
    for member in component:
        inside = sorted(t for t in graph[member] if t in component)
        lines.append(f"  {member} -> {', '.join(inside)}")
    return "\n".join(lines)


@pytest.mark.parametrize("package", [PACKAGE, "cnibench"])
def test_the_imports_form_a_dag(package: str) -> None:
    """The kube backend (where the last circle was), and the whole of cnibench."""
    root = Path(cnibench.__file__).parent
    graph = import_graph(module_files(root), package)
    assert f"{PACKAGE}.cni" in graph
    assert f"{PACKAGE}.cnis.cilium" in graph
    found = cycles(graph)
    assert not found, "\n".join(_describe(c, graph) for c in found)


@pytest.mark.parametrize(
    ("where", "cyclic"),
    [
        ("import pkg.a\n", False),
        ("def f():\n    import pkg.a\n", True),
        ("def f():\n    from pkg import a\n", True),
        ("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import pkg.a\n", False),
        ("if TYPE_CHECKING:\n    pass\nelse:\n    from pkg.a import thing\n", True),
    ],
    ids=["no-back-edge", "function-level", "from-package", "type-checking", "else-branch"],
)
def test_a_cycle_through_any_executed_import_is_found(
    where: str, cyclic: bool, tmp_path: Path
) -> None:
    """``pkg.a`` imports ``pkg.b``; ``pkg.b`` imports ``pkg.a`` back as ``where`` says (the
    first case imports ``pkg.a`` from ``pkg.c`` instead)."""
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "a.py").write_text("from pkg.b import thing\n")
    (package / "b.py").write_text("thing = 1\n" + (where if cyclic else ""))
    (package / "c.py").write_text(where if not cyclic else "")
    graph = import_graph(module_files(package), "pkg")
    assert graph["pkg.a"] == {"pkg.b"}
    assert (cycles(graph) == [["pkg.a", "pkg.b"]]) is cyclic
