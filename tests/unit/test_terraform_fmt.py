"""The AKS Terraform is canonically formatted (``terraform fmt -check``), where terraform exists.

No Azure here: the module is checked against the azurerm provider's schema by ``nox -s
aks-validate`` (tests/aks), too slow cold for this tier; the arguments python-terraform is
called with are checked in tests/unit/test_kube_render.py and test_aks_terraform.py.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

TERRAFORM_DIR = Path(__file__).resolve().parents[2] / "terraform" / "aks"


def test_aks_terraform_is_formatted(tmp_path):
    terraform = shutil.which("terraform")
    if terraform is None:
        pytest.skip("terraform is not installed: formatting not checked")
    done = subprocess.run(
        [terraform, "fmt", "-check", "-diff", "-recursive", str(TERRAFORM_DIR)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "TF_CLI_CONFIG_FILE": "/dev/null"},
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert list(TERRAFORM_DIR.glob("*.tf")), "no Terraform files found"
