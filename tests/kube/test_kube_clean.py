"""``clean_kube_leftovers`` against a real API server: only session-labelled objects go.

A module of its own because cleaning removes *every* labelled namespace of the tier's server,
including those other modules' fixtures hold while their tests run.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import pytest

from cnibench.backends.kube import render
from cnibench.backends.kube.api import Applier
from cnibench.backends.kube.clean import clean_kube_leftovers
from cnibench.backends.kube.cnis.cilium import cilium_egress_gateway_policy


def _no_kind_clusters(argv: Sequence[str]) -> str:
    """Fake kind (no container engine here): there are no kind clusters."""
    return ""


@pytest.fixture
def namespaces(api_client: Any) -> Iterator[dict[str, bool]]:
    """Two labelled (leftover) and one unlabelled namespace; name to whether labelled."""
    applier = Applier(api_client)
    made = {"cnibench-left1": True, "cnibench-left2": True, "cbt-not-ours": False}
    manifests = []
    for name, labelled in made.items():
        manifest = render.namespace(name, session="gone")
        if not labelled:
            manifest["metadata"]["labels"] = {"team": "someone-else"}
        applier.apply(manifest)
        manifests.append(manifest)
    try:
        yield made
    finally:
        for manifest in manifests:
            applier.delete(manifest)


def _existing(api_client: Any) -> set[str]:
    from kubernetes import client

    core: Any = client.CoreV1Api(api_client)
    return {
        n.metadata.name for n in core.list_namespace().items if not n.metadata.deletion_timestamp
    }


def test_clean_removes_only_labelled_namespaces(
    api_client: Any, namespaces: dict[str, bool]
) -> None:
    report = clean_kube_leftovers(api_client=api_client, runner=_no_kind_clusters, timeout=60)
    left = _existing(api_client)
    assert {n for n, labelled in namespaces.items() if labelled} & left == set()
    assert "cbt-not-ours" in left
    assert "kube-system" in left
    removed = {i.name for i in report.items if i.kind == "namespace" and i.outcome == "removed"}
    assert {"cnibench-left1", "cnibench-left2"} <= removed


def test_clean_dry_run_keeps_namespaces(api_client: Any, namespaces: dict[str, bool]) -> None:
    report = clean_kube_leftovers(dry_run=True, api_client=api_client, runner=_no_kind_clusters)
    assert {"cnibench-left1", "cnibench-left2"} <= _existing(api_client)
    assert "kube: namespace cnibench-left1: would remove" in report.summary().splitlines()


@pytest.fixture
def egress_policies(api_client: Any, cilium_crds: list[str]) -> Iterator[dict[str, bool]]:
    """Two cluster-scoped CiliumEgressGatewayPolicies (real CRD): one a session left behind,
    one someone else's; name to whether labelled."""
    applier = Applier(api_client)
    made = {"cnibench-left-egress": True, "not-ours-egress": False}
    manifests = []
    for name, labelled in made.items():
        manifest = cilium_egress_gateway_policy(
            name,
            session="gone",
            namespace="cnibench-x",
            clients=["c1"],
            destinations=["198.18.0.9/32"],
        )
        if not labelled:
            manifest["metadata"]["labels"] = {"team": "someone-else"}
        applier.apply(manifest)
        manifests.append(manifest)
    try:
        yield made
    finally:
        for manifest in manifests:
            applier.delete(manifest)


def _egress_policy_names(api_client: Any) -> set[str]:
    from kubernetes import dynamic

    resource = dynamic.DynamicClient(api_client).resources.get(
        api_version="cilium.io/v2", kind="CiliumEgressGatewayPolicy"
    )
    return {o.metadata.name for o in resource.get().items}


def test_clean_removes_labelled_cluster_scoped_cni_objects(
    api_client: Any, egress_policies: dict[str, bool]
) -> None:
    dry = clean_kube_leftovers(dry_run=True, api_client=api_client, runner=_no_kind_clusters)
    assert "kube: ciliumegressgatewaypolicy cnibench-left-egress: would remove" in (
        dry.summary().splitlines()
    )
    assert set(egress_policies) <= _egress_policy_names(api_client)
    report = clean_kube_leftovers(api_client=api_client, runner=_no_kind_clusters, timeout=60)
    left = _egress_policy_names(api_client)
    assert "cnibench-left-egress" not in left
    assert "not-ours-egress" in left
    # Antrea and Calico CRDs are not served here: their kinds are skipped, not failures.
    assert not report.failed, report.summary()


def test_clean_keeps_the_namespace_of_a_live_session_in_another_process(
    api_client: Any, tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Another shell's `cnibench run` holds its session label (cnibench.leases): a real
    process holds it here, and `clean` keeps that namespace while removing a dead one's."""
    import subprocess
    import sys

    from cnibench import leases

    monkeypatch.setenv(leases.LEASES_VARIABLE, str(tmp_path / "leases"))
    applier = Applier(api_client)
    live, dead = (
        render.namespace("cnibench-live1", session="live1"),
        render.namespace("cnibench-dead1", session="dead1"),
    )
    code = (
        "import sys; from cnibench import leases;"
        f" leases.hold({render.KUBE_SESSION_LEASE!r}, 'live1'); print('held', flush=True);"
        " sys.stdin.read()"
    )
    holder = subprocess.Popen(
        [sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    try:
        assert holder.stdout is not None
        assert holder.stdout.readline().strip() == "held"
        for manifest in (live, dead):
            applier.apply(manifest)
        report = clean_kube_leftovers(api_client=api_client, runner=_no_kind_clusters, timeout=60)
        left = _existing(api_client)
        assert "cnibench-live1" in left
        assert "cnibench-dead1" not in left
        lines = report.summary().splitlines()
        assert f"kube: namespace cnibench-live1: kept: session live1 of live pid {holder.pid}" in (
            lines
        )
    finally:
        holder.kill()
        holder.wait()
        applier.delete(live)
