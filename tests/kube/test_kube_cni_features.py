"""A CNI's features are chosen on the command line (``--cni NAME:FEATURE,key=value``), in
``cnibench run`` and in the pytest plugin alike, and a scenario needing a feature that is off
is skipped with the ``--cni`` value that adds it.

Against the tier's real API server, with Cilium's workloads as stand-ins (kwok reports them
rolled out; nothing runs): the benchmark suite's split test is planned on ``--cni
cilium:gateway-api`` (it gets past the capability check and fails later, at the first thing
that needs a running pod), and skipped on plain ``--cni cilium`` with the hint.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kube_support import (
    PLACEHOLDER_IMAGE,
    REPO_ROOT,
    delete_and_wait_gone,
    role_nodes,
    stand_in_workload,
)

from cnibench.backends.base import ClusterSpec
from cnibench.backends.kube.cni import cni_definition

SPLIT_HINT = "add the feature: --cni cilium:gateway-api,l7"


@pytest.fixture(scope="module")
def cilium_stand_in(api_client: Any) -> Iterator[None]:
    """Cilium's agent, operator and Envoy as cnibench waits for them, on kwok role nodes."""
    from kubernetes import client

    from cnibench.backends.kube.addons import install_manifests, wait_rollouts

    readiness = cni_definition(ClusterSpec.from_label("cilium:gateway-api")).readiness
    objects = [stand_in_workload(item.kind, item.namespace, item.name) for item in readiness]
    with role_nodes(client.CoreV1Api(api_client), "cbt-feat"):
        try:
            install_manifests(api_client, objects, timeout=10)
            wait_rollouts(api_client, readiness, timeout=90, owner="cilium stand-in")
            yield
        finally:
            delete_and_wait_gone(api_client, objects)


def _suite(kubeconfig: Path, tmp_path: Path, cni: str) -> subprocess.CompletedProcess[str]:
    """``pytest tests/bench/test_split.py -k split --cluster=existing --cni=CNI``, as a user
    types it (outside this tier's required-tier policy, which would turn its skip red)."""
    env = {
        key: value
        for key, value in os.environ.items()
        if key != "CNIBENCH_REQUIRE" and not key.startswith("PYTEST_")
    }
    env.update(
        KUBECONFIG=str(kubeconfig),
        CNIBENCH_IMAGE_TOOLS=PLACEHOLDER_IMAGE,
        CNIBENCH_IMAGE_SOCKPERF=PLACEHOLDER_IMAGE,
    )
    return subprocess.run(
        [sys.executable, "-m", "pytest", "tests/bench/test_split.py", "-k", "split",
         "--cluster=existing", f"--cni={cni}", "--cnibench-runs=1",
         "--cnibench-results-dir", str(tmp_path), "-p", "no:cacheprovider", "-rs", "-x", "-q"],
        cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip


def test_without_the_feature_the_split_is_skipped_naming_the_option(
    kubeconfig: Path, cilium_stand_in: None, tmp_path: Path
) -> None:
    done = _suite(kubeconfig, tmp_path, "cilium")
    output = done.stdout + done.stderr
    skips = [line for line in output.splitlines() if line.startswith("SKIPPED")]
    assert skips, output
    for line in skips:
        assert "kube/cilium lacks traffic-split" in line, line
        assert SPLIT_HINT in line, line
    assert " skipped" in output.splitlines()[-1], output
    assert "failed" not in output.splitlines()[-1], output


def test_with_the_feature_the_split_is_planned_on_the_cluster(
    kubeconfig: Path, cilium_stand_in: None, tmp_path: Path
) -> None:
    """The Gateway API split runs on ``cilium:gateway-api``: no skip; it fails only where a
    real pod is needed (kwok runs none), which a one-line reason says."""
    done = _suite(kubeconfig, tmp_path, "cilium:gateway-api")
    output = done.stdout + done.stderr
    assert "lacks traffic-split" not in output, output
    assert not [line for line in output.splitlines() if line.startswith("SKIPPED")], output
    assert "test_split[cilium:gateway-api-" in output, output
    assert done.returncode == 1, output
    assert "1 failed" in output.splitlines()[-1], output


def test_an_unknown_feature_is_refused_before_anything_starts(
    kubeconfig: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    from cnibench.cli import main

    monkeypatch.setenv("KUBECONFIG", str(kubeconfig))
    results = tmp_path / "results"
    code = main(
        ["run", "--cluster", "existing", "--cni", "cilium:warp-drive", "--scenario", "split",
         "--results-dir", str(results)]
    )  # fmt: skip
    assert code == 2
    assert capsys.readouterr().err.splitlines() == [
        "cnibench: error: unknown cilium feature warp-drive: choose from egress-gateway,"
        " gateway-api, l7"
    ]
    assert not results.exists()
