"""Fixtures of the kube tier: a real kube-apiserver (+ etcd, controller-manager, scheduler, kwok).

The control plane starts once per session from the binaries ``scripts/kube-tier.sh`` caches
outside the repository. When they are missing every test here is skipped with the reason,
except when ``CNIBENCH_REQUIRE`` names ``kube`` (CI): tests/conftest.py turns those skips into
failures, so a CI machine without the tier cannot pass silently.

Third-party CRDs (Gateway API, Cilium) are installed from those projects' Go modules in the
module cache, never copied into the repository.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from kube_support import (
    CILIUM_MODULE,
    GATEWAY_API_MODULE,
    ControlPlane,
    bin_dir,
    go_module_dir,
    missing_binaries,
)

from cnibench.backends.kube.addons import AddonVersions
from cnibench.backends.kube.api import apply_manifest
from cnibench.backends.kube.providers import LIB_MODULES
from cnibench.leases import live_holders
from suite_support import KIND_TIER_LEASE

CRD_TIMEOUT = 60.0
BUILD_WAIT = 3600.0
"""How long the tier waits for ``nox -s tests``' background build of its binaries."""


def _wait_for_background_build() -> None:
    """Under ``nox -s tests`` the binaries are built in the background while the other tiers
    run (``CNIBENCH_KUBE_BUILD_STATUS`` names the file its exit status lands in): wait for
    it, and fail with the build's log when it failed."""
    status = os.environ.get("CNIBENCH_KUBE_BUILD_STATUS")
    if not status:
        return
    log = os.environ.get("CNIBENCH_KUBE_BUILD_LOG", "(no log)")
    deadline = time.monotonic() + BUILD_WAIT
    path = Path(status)
    while not path.exists():
        if time.monotonic() > deadline:
            pytest.fail(
                f"the kube tier's background build did not end in {BUILD_WAIT:.0f} s: {log}"
            )
        time.sleep(2.0)
    code = path.read_text().strip()
    if code != "0":
        pytest.fail(f"the kube tier's background build failed (exit {code}): see {log}")


@pytest.fixture(autouse=True)
def _host_lib_modules_untouched() -> Iterator[None]:
    """Providers here run with fake runners: none may create the host's /lib/modules (what a
    real kind cluster needs), or it outlives the tests."""
    before = LIB_MODULES.exists()
    kind_tier_at_start = bool(live_holders(*KIND_TIER_LEASE))
    yield
    if kind_tier_at_start or live_holders(*KIND_TIER_LEASE):
        # The kind tier ran beside this test (nox -s tests), at its start or at its end:
        # /lib/modules is its own. It holds its lease until its clean-up, which removes that
        # directory, is over: a test during which the tier ended sees the lease only at its
        # start (warm CI, 2026-12-04: the tier ended during a kube test and this check failed).
        return
    assert LIB_MODULES.exists() == before, "a kube-tier test created or removed /lib/modules"


@pytest.fixture(scope="session")
def control_plane(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ControlPlane]:
    """A running control plane (skipped with the reason when the tier's binaries are missing)."""
    _wait_for_background_build()
    missing = missing_binaries()
    if missing:
        pytest.skip(
            f"kube tier binaries missing in {bin_dir()}: {', '.join(missing)}"
            " (run: bash scripts/kube-tier.sh)"
        )
    plane = ControlPlane(tmp_path_factory.mktemp("kube-tier"), bin_dir())
    plane.start()
    try:
        yield plane
    finally:
        plane.stop()


@pytest.fixture(scope="session")
def api_client(control_plane: ControlPlane) -> Iterator[Any]:
    """A :class:`kubernetes.client.ApiClient` for the tier's API server, as cluster admin."""
    client = control_plane.api_client()
    try:
        yield client
    finally:
        client.close()


@pytest.fixture(scope="session")
def kubeconfig(control_plane: ControlPlane) -> Path:
    """Path of a kubeconfig for the tier's API server."""
    return control_plane.kubeconfig


def _install_crds(api_client: Any, directory: Path, pattern: str = "*.yaml") -> list[str]:
    from kubernetes import client

    names = []
    for path in sorted(directory.glob(pattern)):
        for document in yaml.safe_load_all(path.read_text()):
            if document and document.get("kind") == "CustomResourceDefinition":
                apply_manifest(api_client, document)
                names.append(document["metadata"]["name"])
    extensions = client.ApiextensionsV1Api(api_client)
    deadline = time.monotonic() + CRD_TIMEOUT
    for name in names:
        while True:
            crd = extensions.read_custom_resource_definition(name)
            conditions = {c.type: c.status for c in (crd.status.conditions or [])}
            if conditions.get("Established") == "True":
                break
            if time.monotonic() > deadline:
                raise RuntimeError(f"CRD {name} not Established after {CRD_TIMEOUT:.0f} s")
            time.sleep(0.2)
    return names


@pytest.fixture(scope="session")
def gateway_api_crds(api_client: Any) -> list[str]:
    """Gateway API v1.4.0 standard-channel CRDs installed from the Go module cache."""
    try:
        module = go_module_dir(GATEWAY_API_MODULE)
    except RuntimeError as exc:
        pytest.skip(f"Gateway API CRDs unavailable: {exc}")
    return _install_crds(api_client, module / "config" / "crd" / "standard")


@pytest.fixture(scope="session")
def cilium_module() -> Path:
    """Directory of the Cilium Go module (chart and CRDs) in the module cache."""
    try:
        return go_module_dir(CILIUM_MODULE)
    except RuntimeError as exc:
        pytest.skip(f"Cilium module unavailable: {exc}")


@pytest.fixture(scope="session")
def cilium_crds(api_client: Any, cilium_module: Path) -> list[str]:
    """Cilium v2 CRDs (network policies, egress gateway policies, ...) installed."""
    crd_dir = cilium_module / "pkg" / "k8s" / "apis" / "cilium.io" / "client" / "crds" / "v2"
    return _install_crds(api_client, crd_dir)


@pytest.fixture(scope="session")
def metallb_module() -> Path:
    """Directory of the Go module of the MetalLB release cnibench pins (CRDs and
    ``config/manifests/metallb-native.yaml``) in the module cache."""
    try:
        return go_module_dir(f"go.universe.tf/metallb@{AddonVersions().metallb}")
    except RuntimeError as exc:
        pytest.skip(f"MetalLB module unavailable: {exc}")


@pytest.fixture(scope="session")
def metallb_crds(api_client: Any, metallb_module: Path) -> list[str]:
    """MetalLB's CRDs (IPAddressPool, L2Advertisement, ...) installed from the module."""
    return _install_crds(api_client, metallb_module / "config" / "crd" / "bases")
