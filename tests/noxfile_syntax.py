"""The noxfile read as a syntax tree (importable as ``noxfile_syntax``, like ``suite_support``):
the test virtualenv has no nox, and a check read from the code cannot be passed by a comment."""

from __future__ import annotations

import ast
from functools import cache

from suite_support import ROOT

__all__ = ["constant", "function_node", "names_in", "noxfile"]


@cache
def noxfile() -> ast.Module:
    """The syntax tree of the repository's ``noxfile.py``."""
    return ast.parse((ROOT / "noxfile.py").read_text())


def function_node(name: str) -> ast.FunctionDef:
    """The module-level function ``name``."""
    found = [n for n in noxfile().body if isinstance(n, ast.FunctionDef) and n.name == name]
    assert len(found) == 1, f"the noxfile has {len(found)} functions named {name}"
    return found[0]


def constant(name: str) -> object:
    """The literal value of the module-level assignment to ``name``."""
    for node in noxfile().body:
        if isinstance(node, ast.Assign) and [getattr(t, "id", "") for t in node.targets] == [name]:
            return ast.literal_eval(node.value)
    raise AssertionError(f"the noxfile has no {name}")


def names_in(node: ast.AST) -> set[str]:
    """Every name ``node`` reads or writes."""
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}
