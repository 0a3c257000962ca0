"""kube-router's driver: the objects cnibench renders for it, and what kube-router does with
the CNI config (checked against the rules its routing controller applies, from its docs)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from cnibench.backends.base import Capability, ClusterSpec
from cnibench.backends.kube.cni import CniVersions, cni_definition
from cnibench.backends.kube.cnis import DRIVERS
from cnibench.backends.kube.cnis.kube_router import (
    AGENT_SELECTOR,
    ARGS,
    CONFLIST_PATH,
    IMAGE,
    KUBE_ROUTER,
    conflist,
    image_version,
)
from cnibench.backends.kube.images import OFFLINE_IMAGES, Images

SPEC = ClusterSpec(cni="kube-router")


def _objects(images: Images = OFFLINE_IMAGES) -> dict[str, dict[str, Any]]:
    definition = cni_definition(SPEC, images=images)
    return {o["kind"]: o for o in definition.manifests}


def _pod_spec() -> dict[str, Any]:
    spec: dict[str, Any] = _objects()["DaemonSet"]["spec"]["template"]["spec"]
    return spec


def test_the_registry_renders_kube_router_itself_with_policy() -> None:
    definition = cni_definition(SPEC, images=OFFLINE_IMAGES)
    assert DRIVERS["kube-router"] is KUBE_ROUTER
    assert definition.manifest_urls == ()  # nothing fetched: installs with no network
    assert definition.chart is None
    assert Capability.NETWORK_POLICY in definition.capabilities
    assert Capability.EGRESS_GATEWAY not in definition.capabilities
    assert not definition.replaces_kube_proxy  # no IPVS here: kube-proxy keeps Services
    assert [o["kind"] for o in definition.manifests] == [
        "ServiceAccount",
        "ClusterRole",
        "ClusterRoleBinding",
        "ConfigMap",
        "DaemonSet",
    ]
    (readiness,) = definition.readiness
    assert (readiness.kind, readiness.namespace, readiness.name) == (
        "DaemonSet",
        "kube-system",
        "kube-router",
    )


@pytest.mark.parametrize(
    ("images", "version"),
    [(OFFLINE_IMAGES, "v2.1.0"), (Images(), "v2.6.1")],
    ids=["offline", "public"],
)
def test_the_recorded_version_is_the_one_the_image_runs(images: Images, version: str) -> None:
    assert cni_definition(SPEC, images=images, versions=CniVersions()).version == version


def test_image_version_falls_back_to_the_pin() -> None:
    assert image_version("localhost/kr:latest", "v9.9.9") == "v9.9.9"
    assert image_version("r/kr:v2.1.0-offline-1", "v9.9.9") == "v2.1.0"


def test_the_daemon_set_routes_and_enforces_but_leaves_services_to_kube_proxy() -> None:
    spec = _pod_spec()
    (container,) = spec["containers"]
    assert container["image"] == IMAGE.offline
    assert "--run-firewall=true" in container["args"]
    assert "--run-router=true" in container["args"]
    assert "--run-service-proxy=false" in container["args"]
    assert container["args"] == list(ARGS)
    env = {e["name"]: e for e in container["env"]}
    assert env["KUBE_ROUTER_CNI_CONF_FILE"]["value"] == CONFLIST_PATH
    assert env["NODE_NAME"]["valueFrom"]["fieldRef"]["fieldPath"] == "spec.nodeName"
    assert spec["hostNetwork"] is True
    assert container["securityContext"]["privileged"] is True
    labels = _objects()["DaemonSet"]["spec"]["template"]["metadata"]["labels"]
    key, value = AGENT_SELECTOR.split("=")
    assert labels[key] == value


def test_rbac_lets_it_read_policies_and_the_pods_they_select() -> None:
    objects = _objects()
    granted = {
        (group, resource): set(rule["verbs"])
        for rule in objects["ClusterRole"]["rules"]
        for group in rule["apiGroups"]
        for resource in rule["resources"]
    }
    for need in (
        ("networking.k8s.io", "networkpolicies"),
        ("", "pods"),
        ("", "namespaces"),
        ("", "nodes"),
    ):
        assert {"get", "list", "watch"} <= granted[need], need
    binding = objects["ClusterRoleBinding"]
    assert binding["subjects"][0]["name"] == objects["ServiceAccount"]["metadata"]["name"]
    assert _pod_spec()["serviceAccountName"] == objects["ServiceAccount"]["metadata"]["name"]


def test_conflist_is_a_bridge_with_host_local_ipam_kube_router_can_fill() -> None:
    """kube-router inserts the node's pod CIDR into the bridge plugin's ``ipam.ranges`` and
    refuses a conflist without a bridge plugin: the template has one, with no range yet (the
    readiness probe waits for the range kube-router writes)."""
    conf = json.loads(conflist())
    bridge = next(p for p in conf["plugins"] if p["type"] == "bridge")
    assert bridge["ipam"] == {"type": "host-local"}
    assert bridge["isDefaultGateway"] is True
    assert "subnet" not in conflist()
    probe = _pod_spec()["containers"][0]["readinessProbe"]["exec"]["command"]
    assert "subnet" in probe[-1]
    assert CONFLIST_PATH in probe[-1]


def test_the_init_container_puts_the_template_in_place_once(tmp_path: Path) -> None:
    """The init container's own script, run by a real shell with the paths moved into a
    temporary directory: it writes the template, and leaves a file kube-router filled in."""
    (init,) = _pod_spec()["initContainers"]
    script = init["command"][-1]
    cni_dir, template = tmp_path / "net.d", tmp_path / "kube-router"
    cni_dir.mkdir()
    template.mkdir()
    (template / "conflist.json").write_text(_objects()["ConfigMap"]["data"]["conflist.json"])
    local = script.replace("/etc/cni/net.d", str(cni_dir)).replace(
        "/etc/kube-router", str(template)
    )
    subprocess.run(["sh", "-c", local], check=True)
    written = cni_dir / Path(CONFLIST_PATH).name
    assert json.loads(written.read_text()) == json.loads(conflist())
    written.write_text('{"filled": "subnet"}')
    subprocess.run(["sh", "-c", local], check=True)
    assert written.read_text() == '{"filled": "subnet"}'
    assert sorted(p.name for p in cni_dir.iterdir()) == [written.name]  # no temp file left
