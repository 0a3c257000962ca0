"""``terraform/aks`` against the real azurerm schema, offline, and proof the check can fail:
a copy with one attribute misspelt must fail ``tofu validate``, naming the attribute."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from cnibench.backends.kube.offline.tofu import TofuToolchain, check_module


def test_the_aks_module_inits_validates_and_passes_its_tofu_tests(
    toolchain: TofuToolchain, aks_module: Path, tmp_path: Path
) -> None:
    check = check_module(toolchain, aks_module, tmp_path / "aks")
    if not check.ok:
        pytest.fail("\n".join(f"$ tofu {s.command}\n{s.output}" for s in check.steps))
    lock = (check.workdir / ".terraform.lock.hcl").read_text()
    assert f'version     = "{toolchain.azurerm_version}"' in lock
    assert "registry.opentofu.org/hashicorp/azurerm" in lock


def test_a_misspelt_attribute_fails_validate_and_is_named(
    toolchain: TofuToolchain, aks_module: Path, tmp_path: Path
) -> None:
    planted = tmp_path / "planted"
    shutil.copytree(aks_module, planted)
    main_tf = planted / "main.tf"
    text = main_tf.read_text()
    assert text.count("network_plugin ") == 1
    main_tf.write_text(text.replace("network_plugin ", "network_plugn "))
    check = check_module(toolchain, planted, tmp_path / "work")
    failed = check.failed
    assert failed is not None, "the planted copy passed every step"
    assert failed.command == "validate", [(s.command, s.returncode) for s in check.steps]
    assert "network_plugn" in failed.output
    assert "Unsupported argument" in failed.output
