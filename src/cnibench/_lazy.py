"""Names of a package imported from their modules on first use (PEP 562).

A package whose ``__init__`` re-exports names of heavy modules (the statistics load scipy and
pandas) gives each one here, so that importing a light submodule (the CLI's parser needs only
the option tables) does not import the rest.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Mapping

__all__ = ["lazy_exports"]


def lazy_exports(package: str, module_of: Mapping[str, str]) -> Callable[[str], object]:
    """The module-level ``__getattr__`` of ``package``: a name of ``module_of`` (name ->
    submodule) is imported from ``package.<submodule>`` when first asked for and then kept in
    the package's namespace; any other name is an :class:`AttributeError`."""

    def attribute(name: str) -> object:
        module = module_of.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(f"{package}.{module}"), name)
        setattr(sys.modules[package], name, value)
        return value

    return attribute
