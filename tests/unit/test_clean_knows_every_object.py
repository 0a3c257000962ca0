"""Issue 33, item 3: ``cnibench clean --kubeconfig`` finds everything a killed session made.

It looks in two places only: namespaces, ClusterRoles and bindings labelled
``cnibench.io/session``, and the cluster-scoped kinds the CNI drivers declare
(:func:`~cnibench.backends.kube.clean.cluster_scoped_kinds`). So every object a session
renders for a cluster must carry the session label and either name the session's namespace
(it goes with it) or be of a kind clean lists: an object without a namespace of an undeclared
kind would outlive the session unseen (or land in ``default``). Checked on what every
registered driver and cnibench's own renderers give, pure (no cluster).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

import pytest

from cnibench.backends.kube import render
from cnibench.backends.kube.clean import cluster_scoped_kinds
from cnibench.backends.kube.cnis import DRIVERS
from cnibench.backends.kube.cnis.base import ObjectScope
from cnibench.errors import ConfigError, UnsupportedError
from cnibench.policy import PRIORITY_CASES, PolicyPeer, PolicySpec, PortRange

NAMESPACE = "cnibench-s1"
SCOPE = ObjectScope(session="s1", namespace=NAMESPACE, gateway_node={"h": "gw"})
SPEC = PolicySpec(
    target=PolicyPeer("srv", "10.0.0.2"),
    allowed=(PolicyPeer("cli", "10.0.0.3"),),
    ports=(PortRange.single(80),),
)
CLEANED_RBAC = {("rbac.authorization.k8s.io/v1", "ClusterRole"),
                ("rbac.authorization.k8s.io/v1", "ClusterRoleBinding")}  # fmt: skip
"""What clean lists beside the drivers' kinds (:func:`_clean_api`), besides namespaces."""


def _driver_objects(name: str) -> Iterator[Mapping[str, Any]]:
    """Every object driver ``name`` renders for a session (what it refuses or cannot
    express is skipped)."""
    driver = DRIVERS[name]
    attempts = [
        lambda: driver.egress_objects(
            SCOPE,
            clients=["cli"],
            destination="198.18.0.9/32",
            egress_ip_range=("198.18.0.250", "198.18.0.253"),
        ),
        lambda: [
            driver.l7_policy(SCOPE, name="l7", target="srv", port=80, method="GET", path="/allowed")
        ],
        *(lambda case=case: driver.priority_objects(SCOPE, SPEC, case) for case in PRIORITY_CASES),
    ]
    for attempt in attempts:
        try:
            yield from attempt()
        except (UnsupportedError, ConfigError):  # a case or feature it cannot express
            continue


def _session_objects() -> Iterator[tuple[str, Mapping[str, Any]]]:
    for name in DRIVERS:
        for manifest in _driver_objects(name):
            yield name, manifest
    for manifest in render.monitoring_manifests(namespace=NAMESPACE, session="s1"):
        yield "monitoring", manifest
    yield "policy", render.network_policy(SPEC, name="p", namespace=NAMESPACE, session="s1")


OBJECTS = list(_session_objects())


@pytest.mark.parametrize(
    ("owner", "manifest"),
    OBJECTS,
    ids=[f"{owner}-{m['kind']}-{m['metadata']['name']}" for owner, m in OBJECTS],
)
def test_every_session_object_is_one_clean_finds(owner: str, manifest: Mapping[str, Any]) -> None:
    meta = manifest["metadata"]
    assert meta["labels"][render.SESSION_LABEL] == "s1"
    if meta.get("namespace"):
        assert meta["namespace"] == NAMESPACE  # goes with the session's namespace
    else:
        kind = (manifest["apiVersion"], manifest["kind"])
        assert kind in set(cluster_scoped_kinds()) | CLEANED_RBAC, (
            f"{owner} renders {kind} without a namespace, and clean does not look for it"
        )


def test_the_drivers_render_cluster_scoped_objects_at_all() -> None:
    """The check above would pass on nothing: it sees the egress and tier objects."""
    kinds = {m["kind"] for _, m in OBJECTS if not m["metadata"].get("namespace")}
    assert {"CiliumEgressGatewayPolicy", "Egress", "ExternalIPPool"} <= kinds
    assert {"ClusterNetworkPolicy", "ClusterRole", "ClusterRoleBinding"} <= kinds
