"""Adding a CNI is one driver module and one registration: a toy CNI defined here, registered
the way the built-in drivers are (:func:`cnibench.backends.kube.cnis.register`), goes through
the kube tier's orchestration with nothing else changed.

``cnibench run --cluster existing --cni toy --scenario priority`` runs in this process against
the tier's real API server: ``--cni toy`` is accepted, the toy's agent is waited for, the
session's pods are placed on kwok nodes, and the first probe fails at its exec (kwok runs no
container), as for the built-in CNIs (``test_kube_cli.py``). A second test provisions the toy
cluster through the library and applies a priority case: its CNI policy is the toy driver's
own object, stored by the API server and removed again.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kube_support import PLACEHOLDER_IMAGE, delete_and_wait_gone, role_nodes, stand_in_workload

from cnibench import load_results
from cnibench.backends.base import Capability, ClusterSpec
from cnibench.backends.kube import render
from cnibench.backends.kube.cni import CniDefinition, Readiness, cni_definition
from cnibench.backends.kube.cnis import DRIVERS, cni_names, register, unregister
from cnibench.backends.kube.cnis.base import DriverBase, ObjectScope
from cnibench.errors import UnsupportedError

TOY_NAMESPACE = "toy-system"
PLACEHOLDER = PLACEHOLDER_IMAGE


class ToyDriver(DriverBase):
    """A CNI that enforces NetworkPolicy and has a policy API of its own for priority cases
    (here: one plain NetworkPolicy per layer, so any API server accepts it). It records what
    it rendered, so the test can see the orchestration asked it."""

    name = "toy"
    version = "0.0.1"

    def __init__(self) -> None:
        self.rendered: list[dict[str, Any]] = []

    def definition(
        self, spec: ClusterSpec, *, versions: Any, images: Any, k8s_service_host: str = ""
    ) -> CniDefinition:
        """Policy only; readiness is the toy agent DaemonSet the test rolls out."""
        return CniDefinition(
            name=self.name,
            version=versions.version(self.name, self.version),
            capabilities=frozenset({Capability.NETWORK_POLICY}),
            readiness=(Readiness("DaemonSet", TOY_NAMESPACE, "toy-agent"),),
        )

    def priority_objects(self, scope: ObjectScope, spec: Any, case: Any) -> list[dict[str, Any]]:
        """One NetworkPolicy per layer, named after the toy."""
        objects = [
            render.network_policy(
                spec, name=f"toy-prio-{index}", namespace=scope.namespace, session=scope.session
            )
            for index, _layer in enumerate(case.layers)
        ]
        self.rendered.extend(objects)
        return objects


@pytest.fixture
def toy() -> Iterator[ToyDriver]:
    driver = ToyDriver()
    register(driver)
    try:
        yield driver
    finally:
        unregister(driver.name)


@pytest.fixture
def toy_cluster(api_client: Any, toy: ToyDriver) -> Iterator[None]:
    """kwok nodes with the three roles and the toy's agent DaemonSet rolled out on them."""
    from kubernetes import client

    from cnibench.backends.kube.addons import install_manifests, wait_rollouts

    core: Any = client.CoreV1Api(api_client)
    objects: list[dict[str, Any]] = [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": TOY_NAMESPACE}},
        stand_in_workload("DaemonSet", TOY_NAMESPACE, "toy-agent"),
    ]
    with role_nodes(core, "cbt-toy"):
        try:
            install_manifests(api_client, objects, timeout=10)
            readiness = cni_definition(ClusterSpec(cni="toy")).readiness
            wait_rollouts(api_client, readiness, timeout=90, owner="toy")
            yield
        finally:
            delete_and_wait_gone(api_client, objects)


def test_a_registered_driver_is_a_cni_everywhere_the_names_are_read(toy: ToyDriver) -> None:
    assert DRIVERS["toy"] is toy
    assert cni_names()[-1] == "toy"
    assert cni_definition(ClusterSpec(cni="toy")).capabilities == {Capability.NETWORK_POLICY}
    assert cni_definition(ClusterSpec(cni="toy")).version == "0.0.1"
    with pytest.raises(UnsupportedError, match="toy has no egress gateway"):
        toy.egress_objects(
            ObjectScope("s", "ns"), clients=["c"], destination="198.18.0.9/32", egress_ip_range=None
        )


def test_unregistered_it_is_unknown_again() -> None:
    from cnibench.errors import ConfigError

    assert "toy" not in cni_names()
    with pytest.raises(ConfigError, match="unknown --cni 'toy'"):
        cni_definition(ClusterSpec(cni="toy"))


def test_the_kube_orchestration_runs_a_toy_cni_from_one_module_and_one_line(
    api_client: Any,
    kubeconfig: Path,
    toy: ToyDriver,
    toy_cluster: None,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    from kubernetes import client

    from cnibench.cli import main

    monkeypatch.setenv("KUBECONFIG", str(kubeconfig))
    monkeypatch.setenv("CNIBENCH_IMAGE_TOOLS", PLACEHOLDER)
    monkeypatch.setenv("CNIBENCH_IMAGE_SOCKPERF", PLACEHOLDER)
    results = tmp_path / "results"
    code = main(
        ["run", "--cluster", "existing", "--cni", "toy", "--scenario", "priority",
         "--condition", "k8s-deny-and-cni-allow", "--results-dir", str(results)]
    )  # fmt: skip
    output = capsys.readouterr()
    text = output.out + output.err
    assert "Traceback" not in text, text
    assert "cnibench: error:" not in text, text
    not_verified = [line for line in text.splitlines() if line.startswith("NOT VERIFIED")]
    assert len(not_verified) == 1, text
    assert (
        "priority/k8s-deny-and-cni-allow on toy: a check could not run: exec of"
        in (not_verified[0])
    )
    assert code == 1, text
    frame = load_results(results)
    assert set(frame.cni) == {"toy"}
    policies = client.NetworkingV1Api(api_client).list_network_policy_for_all_namespaces(
        label_selector=render.SESSION_LABEL
    )
    assert policies.items == []


def test_a_toy_cluster_applies_the_toy_drivers_own_priority_objects(
    api_client: Any,
    kubeconfig: Path,
    toy: ToyDriver,
    toy_cluster: None,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """What the run above cannot reach on kwok (its first probe needs a running pod): the
    priority case's objects come from the toy driver, the API server stores them in the
    session's namespace, and removing the case and tearing down leave nothing."""
    from kubernetes import client

    from cnibench.backends.kube import ExistingProvider, KubeBackend
    from cnibench.policy import PolicyPeer, PolicySpec, PortRange, priority_case_named

    monkeypatch.setenv("CNIBENCH_IMAGE_TOOLS", PLACEHOLDER)
    monkeypatch.setenv("CNIBENCH_IMAGE_SOCKPERF", PLACEHOLDER)
    networking = client.NetworkingV1Api(api_client)
    spec = PolicySpec(
        target=PolicyPeer("srv", "10.0.0.2"),
        allowed=(PolicyPeer("cli", "10.0.0.3"),),
        ports=(PortRange.single(80),),
    )
    cluster = KubeBackend(ExistingProvider(kubeconfig)).provision(ClusterSpec.from_label("toy"))
    try:
        cluster.apply_priority_case(priority_case_named("k8s-deny-and-cni-allow"), spec)
        stored = networking.list_namespaced_network_policy(cluster.namespace).items
        assert sorted(p.metadata.name for p in stored) == ["cnibench-prio-k8s", "toy-prio-0"]
        assert [o["metadata"]["name"] for o in toy.rendered] == ["toy-prio-0"]
        cluster.remove_priority_case()
        assert networking.list_namespaced_network_policy(cluster.namespace).items == []
    finally:
        cluster.teardown()
