"""Where the Kubernetes backend finds its data trees (``manifests/``, ``terraform/``).

In a source checkout (editable install) they are the repository's own top-level folders, so an
edit to a template takes effect at once; an installed wheel carries copies in ``cnibench/_data``
(see ``setup.py``). An environment variable overrides both.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

__all__ = ["data_tree"]

_PACKAGE = Path(__file__).resolve().parents[2]
"""The installed ``cnibench`` package directory."""


def data_tree(name: str, *, override_env: str, environ: Mapping[str, str] | None = None) -> Path:
    """The directory of data tree ``name`` (``"manifests"`` or ``"terraform"``).

    Parameters
    ----------
    name:
        Top-level folder of the repository.
    override_env:
        Environment variable whose value, when set and non-empty, is returned as is.
    environ:
        Environment to read (``os.environ`` by default).

    Returns
    -------
    pathlib.Path
        The override, else ``<repository>/<name>`` when the package runs from a source checkout
        (a ``pyproject.toml`` two levels above the package), else ``cnibench/_data/<name>``.
    """
    environ = os.environ if environ is None else environ
    override = environ.get(override_env, "")
    if override:
        return Path(override)
    checkout = _PACKAGE.parents[1]
    if (checkout / "pyproject.toml").is_file() and (checkout / name).is_dir():
        return checkout / name
    return _PACKAGE / "_data" / name
