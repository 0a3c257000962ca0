"""Which optional parts of cnibench are installed: ``pip install cnibench`` gives the lab, the
report and the gate; Kubernetes (kind, AKS, an existing cluster, the private engine and the
offline images), AKS's Terraform wrapper and the in-process locust load engine each come with
an extra (``cnibench[kube]``, ``[aks]``, ``[locust]``; ``[all]`` for every one).

What needs an extra asks :func:`require_extra` first, so a missing one is one line naming the
command to install it, never an ``ImportError`` half-way through.

>>> EXTRAS["kube"]
('kubernetes', 'docker', 'pykube')
"""

from __future__ import annotations

import importlib.util
from collections.abc import Mapping

from cnibench.errors import ConfigError

__all__ = ["EXTRAS", "missing_modules", "require_extra"]

EXTRAS: Mapping[str, tuple[str, ...]] = {
    "kube": ("kubernetes", "docker", "pykube"),
    "aks": ("python_terraform",),
    "locust": ("locust",),
}
"""Each extra of ``pyproject.toml`` and the modules it brings."""


def missing_modules(extra: str) -> list[str]:
    """The modules of ``extra`` that cannot be imported here."""
    return [name for name in EXTRAS[extra] if importlib.util.find_spec(name) is None]


def require_extra(extra: str, what: str) -> None:
    """Refuse ``what`` (``"--cluster kind"``) in one line when ``extra`` is not installed.

    Raises
    ------
    cnibench.errors.ConfigError
        Naming the missing modules and the ``pip install`` that adds them.
    """
    missing = missing_modules(extra)
    if missing:
        raise ConfigError(
            f"{what} needs cnibench's {extra} extra, which is not installed (no"
            f" {', '.join(missing)}): pip install 'cnibench[{extra}]'"
        )
