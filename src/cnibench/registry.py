"""A registry of named plug-ins, in registration order: what the CNI drivers
(:mod:`cnibench.backends.kube.cnis`) and the measurement tools (:mod:`cnibench.tools.registry`)
each keep, so adding one is one module plus one ``register(...)`` line."""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Generic, Protocol, TypeVar

__all__ = ["Named", "Registry"]


class Named(Protocol):
    """Anything registered: known by its name."""

    @property
    def name(self) -> str:
        """The key it is registered under."""
        ...


_T = TypeVar("_T", bound=Named)


class Registry(Generic[_T]):
    """Items by name, in registration order.

    Parameters
    ----------
    what:
        What an item is, for the error on a second registration (``"CNI driver"``).
    """

    def __init__(self, what: str) -> None:
        self._what = what
        self._items: dict[str, _T] = {}
        self.view: Mapping[str, _T] = MappingProxyType(self._items)
        """The items by name, read-only and always current."""

    def register(self, item: _T) -> _T:
        """Add ``item`` under its name; returns it.

        Raises
        ------
        ValueError
            An item of that name is already registered.
        """
        if item.name in self._items:
            raise ValueError(f"a {self._what} named {item.name!r} is already registered")
        self._items[item.name] = item
        return item

    def unregister(self, name: str) -> None:
        """Remove the item registered as ``name`` (nothing when there is none)."""
        self._items.pop(name, None)

    def names(self) -> tuple[str, ...]:
        """Every registered name, in registration order."""
        return tuple(self._items)
