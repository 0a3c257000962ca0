"""The AKS module checked with OpenTofu and the azurerm provider built from Go modules.

Opt-in: ``nox -s aks-validate`` builds (or reuses) both and runs this folder with
``CNIBENCH_AKS_VALIDATE=1``; anything else leaves it uncollected (tests/conftest.py), since a
cold build takes over an hour on 2 cores. The toolchain fixture finds the cached builds current
in seconds.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from cnibench.backends.kube.offline.tofu import TofuBuilds, TofuToolchain

AKS_MODULE = Path(__file__).resolve().parents[2] / "terraform" / "aks"


@pytest.fixture(scope="session")
def toolchain() -> TofuToolchain:
    """``tofu`` and the azurerm mirror (built by the session's first step; reused here)."""
    return TofuBuilds().toolchain()


@pytest.fixture
def aks_module() -> Path:
    """The repository's ``terraform/aks``."""
    return AKS_MODULE
