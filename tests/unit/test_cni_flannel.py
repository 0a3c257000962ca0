"""flannel's driver: the objects cnibench renders for it, the registry that finds it, and its
container's entrypoint script, run for real by ``sh`` and ``bash`` against a stand-in flanneld
(the real one needs a cluster) in a temporary directory."""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from cnibench.backends.base import Capability, ClusterSpec
from cnibench.backends.kube import render
from cnibench.backends.kube.addons import apply_order
from cnibench.backends.kube.cni import KIND_POD_SUBNET, CniVersions, cni_definition
from cnibench.backends.kube.cnis import DRIVERS
from cnibench.backends.kube.cnis.flannel import (
    ENTRYPOINT_SCRIPT,
    FLANNEL,
    IMAGE,
    NETWORK_POLICY_HINT,
    wireguard_reason,
)
from cnibench.backends.kube.images import Images
from cnibench.errors import ConfigError, UnsupportedError
from cnibench.scenarios import SCENARIOS

IMAGES = Images(cni_overrides={"flannel": "registry.example/flannel:v0.28.10-test"})
SPEC = ClusterSpec(cni="flannel")
SHELLS = [s for s in ("sh", "bash") if shutil.which(s)]
LEASE = (
    "FLANNEL_NETWORK=10.244.0.0/16\n"
    "FLANNEL_SUBNET=10.244.1.1/24\n"
    "FLANNEL_MTU=1450\n"
    "FLANNEL_IPMASQ=true\n"
)
"""A subnet.env as flanneld writes it: FLANNEL_SUBNET is the bridge's address, not the
network."""


def _definition(images: Images = IMAGES) -> Any:
    return cni_definition(SPEC, images=images)


def _by_kind(kind: str, images: Images = IMAGES) -> dict[str, Any]:
    (found,) = [m for m in _definition(images).manifests if m["kind"] == kind]
    return dict(found)


def _pod_spec() -> dict[str, Any]:
    spec: dict[str, Any] = _by_kind("DaemonSet")["spec"]["template"]["spec"]
    return spec


# -- the rendered objects --------------------------------------------------------------------


def test_objects_are_namespace_rbac_config_and_daemonset_in_that_order() -> None:
    found = [
        (m["kind"], m["metadata"].get("namespace", ""), m["metadata"]["name"])
        for m in _definition().manifests
    ]
    assert found == [
        ("Namespace", "", "kube-flannel"),
        ("ServiceAccount", "kube-flannel", "flannel"),
        ("ClusterRole", "", "flannel"),
        ("ClusterRoleBinding", "", "flannel"),
        ("ConfigMap", "kube-flannel", "kube-flannel-cfg"),
        ("DaemonSet", "kube-flannel", "kube-flannel-ds"),
    ]


def test_apply_order_keeps_the_daemonset_after_its_namespace_and_rbac() -> None:
    kinds = [m["kind"] for m in apply_order(_definition().manifests)]
    assert kinds[0] == "Namespace"
    assert kinds[-1] == "DaemonSet"


def test_objects_are_managed_by_cnibench_but_belong_to_no_session() -> None:
    # `cnibench clean` deletes only session-labelled objects: the CNI must survive it.
    for manifest in _definition().manifests:
        labels = manifest["metadata"]["labels"]
        assert render.MANAGED_BY.items() <= labels.items(), manifest["kind"]
        assert render.SESSION_LABEL not in labels, manifest["kind"]


def test_cluster_role_grants_what_flanneld_uses() -> None:
    rules = {(tuple(r["resources"]), tuple(r["verbs"])) for r in _by_kind("ClusterRole")["rules"]}
    assert rules == {
        (("pods",), ("get",)),
        (("nodes",), ("get", "list", "watch")),
        (("nodes/status",), ("patch",)),
    }
    binding = _by_kind("ClusterRoleBinding")
    assert binding["roleRef"]["name"] == "flannel"
    assert binding["subjects"] == [
        {"kind": "ServiceAccount", "name": "flannel", "namespace": "kube-flannel"}
    ]


@pytest.mark.parametrize(
    "images",
    [IMAGES, Images()],
    ids=["given", "public-default"],
)
def test_image_comes_from_the_images_passed(images: Images) -> None:
    (container,) = _by_kind("DaemonSet", images)["spec"]["template"]["spec"]["containers"]
    assert container["image"] == images.cni_image(IMAGE)


def test_cni_definition_without_images_runs_the_public_image() -> None:
    (daemon_set,) = [m for m in cni_definition(SPEC).manifests if m["kind"] == "DaemonSet"]
    (container,) = daemon_set["spec"]["template"]["spec"]["containers"]
    assert container["image"] == IMAGE.public


@pytest.mark.parametrize(
    "pod_subnet", [KIND_POD_SUBNET, "10.32.0.0/12"], ids=["kind-default", "other"]
)
def test_pod_subnet_flows_into_net_conf(pod_subnet: str) -> None:
    definition = dataclasses.replace(_definition(), pod_subnet=pod_subnet)
    (config_map,) = [m for m in FLANNEL.manifests(definition, IMAGES) if m["kind"] == "ConfigMap"]
    assert json.loads(config_map["data"]["net-conf.json"]) == {
        "Network": pod_subnet,
        "Backend": {"Type": "vxlan"},
    }


def test_daemonset_runs_privileged_on_the_host_network_of_every_node() -> None:
    spec = _pod_spec()
    assert spec["hostNetwork"] is True
    assert spec["priorityClassName"] == "system-node-critical"
    assert spec["tolerations"] == [{"operator": "Exists"}]
    assert spec["serviceAccountName"] == "flannel"
    (container,) = spec["containers"]
    assert container["securityContext"] == {"privileged": True}
    assert container["command"] == ["/bin/sh", "-c", ENTRYPOINT_SCRIPT]
    env = {e["name"]: e for e in container["env"]}
    assert env["POD_NAME"]["valueFrom"]["fieldRef"]["fieldPath"] == "metadata.name"
    assert env["POD_NAMESPACE"]["valueFrom"]["fieldRef"]["fieldPath"] == "metadata.namespace"
    assert env["EVENT_QUEUE_DEPTH"]["value"] == "5000"
    selector = _by_kind("DaemonSet")["spec"]["selector"]["matchLabels"]
    assert (
        selector.items() <= _by_kind("DaemonSet")["spec"]["template"]["metadata"]["labels"].items()
    )


def test_daemonset_mounts_the_host_paths_and_the_config() -> None:
    spec = _pod_spec()
    (container,) = spec["containers"]
    volumes = {v["name"]: v for v in spec["volumes"]}
    mounted = {
        m["mountPath"]: volumes[m["name"]].get("hostPath") or volumes[m["name"]].get("configMap")
        for m in container["volumeMounts"]
    }
    assert mounted["/run/flannel"]["path"] == "/run/flannel"
    assert mounted["/etc/cni/net.d"]["path"] == "/etc/cni/net.d"
    assert mounted["/run/xtables.lock"] == {"path": "/run/xtables.lock", "type": "FileOrCreate"}
    assert mounted["/etc/kube-flannel/"] == {"name": "kube-flannel-cfg"}


# -- the definition and the registry ---------------------------------------------------------


def test_registry_finds_the_flannel_driver() -> None:
    assert DRIVERS["flannel"] is FLANNEL
    assert FLANNEL.name == "flannel"


def test_cni_definition_for_flannel_is_the_drivers() -> None:
    versions = CniVersions({"flannel": "v0.27.0"})
    via_registry = cni_definition(SPEC, versions=versions, images=IMAGES)
    assert via_registry == FLANNEL.definition(
        SPEC, versions=versions, images=IMAGES, k8s_service_host=""
    )
    assert via_registry.version == "v0.27.0"
    assert via_registry.chart is None
    assert via_registry.manifest_urls == ()
    assert via_registry.manifests


def test_flannel_is_ready_when_its_daemonset_is() -> None:
    (readiness,) = _definition().readiness
    assert (readiness.kind, readiness.namespace, readiness.name) == (
        "DaemonSet",
        "kube-flannel",
        "kube-flannel-ds",
    )


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        (ClusterSpec(cni="flannel", options={"mode": "kpr"}), "--cni flannel takes no option"),
        (ClusterSpec(cni="weave"), "unknown --cni 'weave': choose one of"),
    ],
    ids=["option", "unknown-cni"],
)
def test_refusals_are_one_line_config_errors(spec: ClusterSpec, message: str) -> None:
    with pytest.raises(ConfigError) as raised:
        cni_definition(spec)
    assert str(raised.value).startswith(message)
    assert "\n" not in str(raised.value)


@pytest.mark.parametrize("scenario", ["policy", "priority"], ids=["policy", "priority"])
def test_policy_scenarios_lack_network_policy_on_flannel_and_say_why(scenario: str) -> None:
    # The runner skips a condition whose required capabilities the cluster lacks (a
    # KubeCluster offers its definition's), appending the cluster's hint for each; the hint
    # reaching the skip line is checked on a real API server in tests/kube/test_kube_cli.py.
    definition = _definition()
    needing_policy = [
        c
        for c in SCENARIOS[scenario].conditions()
        if Capability.NETWORK_POLICY in SCENARIOS[scenario].required_capabilities(c)
    ]
    assert needing_policy
    for condition in needing_policy:
        missing = SCENARIOS[scenario].required_capabilities(condition) - definition.capabilities
        assert Capability.NETWORK_POLICY in missing
    assert definition.capability_hints[Capability.NETWORK_POLICY] == NETWORK_POLICY_HINT
    assert "enforces no NetworkPolicy" in NETWORK_POLICY_HINT


# -- the entrypoint script, run for real ------------------------------------------------------


def _fake_flanneld(tmp_path: Path, *, lease: str | None, hold: float, status: int) -> Path:
    """A stand-in for flanneld: records its PID and argv, writes ``lease`` to the
    ``--subnet-file`` it is given (unless ``None``) after 0.3 s, stays up ``hold`` seconds
    (ended early, with 143, by TERM), then exits with ``status``."""
    if lease is not None:
        (tmp_path / "lease").write_text(lease)
    write = f'cp "{tmp_path / "lease"}" "$subnet_file"' if lease is not None else ":"
    stub = tmp_path / "flanneld"
    stub.write_text(
        "#!/bin/sh\n"
        f'echo $$ > "{tmp_path / "flanneld.pid"}"\n'
        f'printf "%s\\n" "$@" > "{tmp_path / "flanneld.args"}"\n'
        "for arg; do case $arg in --subnet-file=*) subnet_file=${arg#*=} ;; esac; done\n"
        "sleep 0.3\n"
        f"{write}\n"
        # In the background, so TERM ends the stand-in at once and no orphan keeps the
        # test's pipes open.
        f"sleep {hold} &\n"
        "trap 'kill $! 2>/dev/null; exit 143' TERM\n"
        "wait $!\n"
        f"exit {status}\n"
    )
    stub.chmod(0o755)
    return stub


def _run_entrypoint(
    tmp_path: Path, shell: str, flanneld: Path, *, wait: int = 10
) -> subprocess.CompletedProcess[str]:
    env = {
        "PATH": os.environ["PATH"],
        "CNIBENCH_FLANNELD": str(flanneld),
        "CNIBENCH_SUBNET_FILE": str(tmp_path / "run" / "subnet.env"),
        "CNIBENCH_CNI_CONF_DIR": str(tmp_path / "net.d"),
        "CNIBENCH_SUBNET_WAIT": str(wait),
    }
    (tmp_path / "run").mkdir(exist_ok=True)
    return subprocess.run(
        [shell, "-c", ENTRYPOINT_SCRIPT],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def _conflist(tmp_path: Path) -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads((tmp_path / "net.d" / "10-flannel.conflist").read_text())
    return loaded


@pytest.mark.parametrize("shell", SHELLS)
def test_entrypoint_writes_the_conflist_from_the_lease_and_exits_with_flanneld(
    tmp_path: Path, shell: str
) -> None:
    flanneld = _fake_flanneld(tmp_path, lease=LEASE, hold=1.5, status=3)
    done = _run_entrypoint(tmp_path, shell, flanneld)
    assert done.returncode == 3, done.stderr
    assert (tmp_path / "flanneld.args").read_text().split() == [
        "--ip-masq",
        "--kube-subnet-mgr",
        f"--subnet-file={tmp_path / 'run' / 'subnet.env'}",
    ]
    conflist = _conflist(tmp_path)
    assert (conflist["name"], conflist["cniVersion"]) == ("cbr0", "1.0.0")
    bridge, portmap = conflist["plugins"]
    assert bridge["type"] == "bridge"
    assert bridge["bridge"] == "cni0"
    assert bridge["isGateway"] is True
    assert bridge["hairpinMode"] is True
    assert bridge["mtu"] == 1450
    assert bridge["ipMasq"] is False  # flanneld masquerades (FLANNEL_IPMASQ=true)
    assert bridge["ipam"] == {
        "type": "host-local",
        # The network of FLANNEL_SUBNET=10.244.1.1/24: host-local refuses host bits.
        "subnet": "10.244.1.0/24",
        "routes": [{"dst": "10.244.0.0/16"}],
        "dataDir": "/var/lib/cni/networks",
    }
    assert portmap == {"type": "portmap", "capabilities": {"portMappings": True}}
    assert sorted(p.name for p in (tmp_path / "net.d").iterdir()) == ["10-flannel.conflist"]


@pytest.mark.parametrize(
    ("flannel_subnet", "network"),
    [
        ("10.244.1.129/25", "10.244.1.128/25"),
        ("172.20.5.1/12", "172.16.0.0/12"),
        ("10.0.0.7/32", "10.0.0.7/32"),
    ],
    ids=["25", "12", "32"],
)
def test_entrypoint_gives_host_local_the_network_of_the_lease(
    tmp_path: Path, flannel_subnet: str, network: str
) -> None:
    lease = LEASE.replace("10.244.1.1/24", flannel_subnet)
    done = _run_entrypoint(tmp_path, "sh", _fake_flanneld(tmp_path, lease=lease, hold=0, status=0))
    assert done.returncode == 0, done.stderr
    assert _conflist(tmp_path)["plugins"][0]["ipam"]["subnet"] == network


def test_entrypoint_lets_the_bridge_masquerade_when_flanneld_does_not(tmp_path: Path) -> None:
    lease = LEASE.replace("FLANNEL_IPMASQ=true", "FLANNEL_IPMASQ=false")
    done = _run_entrypoint(tmp_path, "sh", _fake_flanneld(tmp_path, lease=lease, hold=0, status=0))
    assert done.returncode == 0, done.stderr
    assert _conflist(tmp_path)["plugins"][0]["ipMasq"] is True


def test_entrypoint_ignores_a_lease_left_by_an_earlier_flanneld(tmp_path: Path) -> None:
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "subnet.env").write_text(LEASE.replace("10.244.1.1/24", "10.244.9.1/24"))
    done = _run_entrypoint(tmp_path, "sh", _fake_flanneld(tmp_path, lease=LEASE, hold=0, status=0))
    assert done.returncode == 0, done.stderr
    assert _conflist(tmp_path)["plugins"][0]["ipam"]["subnet"] == "10.244.1.0/24"


@pytest.mark.parametrize("shell", SHELLS)
def test_entrypoint_exits_with_flanneld_status_when_it_dies_before_its_lease(
    tmp_path: Path, shell: str
) -> None:
    started = time.monotonic()
    done = _run_entrypoint(
        tmp_path, shell, _fake_flanneld(tmp_path, lease=None, hold=1.2, status=7)
    )
    assert done.returncode == 7, done.stderr
    assert time.monotonic() - started < 8  # noticed at once, not after the 10 s wait
    assert "flanneld exited with status 7 before writing" in done.stderr
    assert not (tmp_path / "net.d").exists()


@pytest.mark.parametrize("shell", SHELLS)
def test_entrypoint_gives_up_and_stops_flanneld_without_a_lease(tmp_path: Path, shell: str) -> None:
    done = _run_entrypoint(
        tmp_path, shell, _fake_flanneld(tmp_path, lease=None, hold=60, status=0), wait=1
    )
    assert done.returncode == 1, done.stderr
    assert "no usable" in done.stderr
    pid = int((tmp_path / "flanneld.pid").read_text())
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)
    assert not (tmp_path / "net.d").exists()


@pytest.mark.parametrize(
    ("line", "replacement"),
    [
        ("FLANNEL_SUBNET=10.244.1.1/24", "FLANNEL_SUBNET=10.244.1/24"),
        ("FLANNEL_SUBNET=10.244.1.1/24", "FLANNEL_SUBNET=10.244.1.300/24"),
        ("FLANNEL_MTU=1450", "FLANNEL_MTU=auto"),
    ],
    ids=["three-octets", "octet-over-255", "mtu-not-a-number"],
)
def test_entrypoint_refuses_a_lease_it_cannot_write_as_json(
    tmp_path: Path, line: str, replacement: str
) -> None:
    lease = LEASE.replace(line, replacement)
    done = _run_entrypoint(tmp_path, "sh", _fake_flanneld(tmp_path, lease=lease, hold=60, status=0))
    assert done.returncode == 1, done.stderr
    assert f"{replacement} is not" in done.stderr
    assert not (tmp_path / "net.d" / "10-flannel.conflist").exists()


@pytest.mark.parametrize("kernel_wireguard", [False, True])
def test_wireguard_on_flannel_is_unsupported_with_the_kernels_part(
    kernel_wireguard: bool,
) -> None:
    reason = wireguard_reason(kernel_wireguard)
    assert reason.startswith("flannel runs its vxlan backend here")
    assert ("which this kernel lacks" in reason) is not kernel_wireguard
    with pytest.raises(UnsupportedError, match="wireguard kernel module"):
        cni_definition(ClusterSpec(cni="flannel", encryption="wireguard"))
