"""The conflist flannel's entrypoint writes is accepted by the reference CNI plugins.

The entrypoint runs for real (``sh``) against a stand-in flanneld that writes a lease as
flanneld does; then the real ``host-local`` plugin (Debian's containernetworking-plugins, the
same plugins kind node images carry in ``/opt/cni/bin``) gets the ``bridge`` entry as the
runtime hands it over, and must allocate an address in the node's subnet with the route to
the pod network. host-local needs no root and no namespace; its state goes to a temporary
``dataDir``.
"""

from __future__ import annotations

import ipaddress
import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from cnibench.backends.kube.cnis.flannel import ENTRYPOINT_SCRIPT

PLUGIN_DIRS = (Path("/usr/lib/cni"), Path("/opt/cni/bin"))
LEASE = (
    "FLANNEL_NETWORK=10.244.0.0/16\n"
    "FLANNEL_SUBNET=10.244.3.1/24\n"
    "FLANNEL_MTU=1450\n"
    "FLANNEL_IPMASQ=true\n"
)


@pytest.fixture
def host_local() -> Path:
    for directory in PLUGIN_DIRS:
        if (directory / "host-local").is_file():
            return directory / "host-local"
    pytest.skip(
        "reference CNI plugins missing (Debian package containernetworking-plugins;"
        " python -m cnibench.system --install)"
    )


@pytest.fixture
def conflist(tmp_path: Path) -> dict[str, Any]:
    """The conflist the entrypoint writes for :data:`LEASE`."""
    (tmp_path / "lease").write_text(LEASE)
    stub = tmp_path / "flanneld"
    stub.write_text(
        "#!/bin/sh\n"
        "for arg; do case $arg in --subnet-file=*) subnet_file=${arg#*=} ;; esac; done\n"
        f'cp "{tmp_path / "lease"}" "$subnet_file"\n'
    )
    stub.chmod(0o755)
    env = {
        "PATH": os.environ["PATH"],
        "CNIBENCH_FLANNELD": str(stub),
        "CNIBENCH_SUBNET_FILE": str(tmp_path / "subnet.env"),
        "CNIBENCH_CNI_CONF_DIR": str(tmp_path / "net.d"),
    }
    done = subprocess.run(
        ["sh", "-c", ENTRYPOINT_SCRIPT], env=env, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    loaded: dict[str, Any] = json.loads((tmp_path / "net.d" / "10-flannel.conflist").read_text())
    return loaded


def _plugin(binary: Path, command: str, config: dict[str, Any]) -> subprocess.CompletedProcess[str]:
    env = {
        "PATH": os.environ["PATH"],
        "CNI_COMMAND": command,
        "CNI_CONTAINERID": "cnibench-test",
        "CNI_NETNS": "/var/run/netns/cnibench-test",  # host-local never enters it
        "CNI_IFNAME": "eth0",
        "CNI_PATH": str(binary.parent),
    }
    return subprocess.run(
        [str(binary)],
        input=json.dumps(config),
        env=env,
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )


def test_host_local_allocates_from_the_node_subnet(
    host_local: Path, conflist: dict[str, Any], tmp_path: Path
) -> None:
    bridge = next(p for p in conflist["plugins"] if p["type"] == "bridge")
    # What the runtime hands a plugin of a list: its entry plus the list's name and version.
    config = {**bridge, "name": conflist["name"], "cniVersion": conflist["cniVersion"]}
    config["ipam"] = {**bridge["ipam"], "dataDir": str(tmp_path / "ipam")}
    added = _plugin(host_local, "ADD", config)
    assert added.returncode == 0, added.stdout + added.stderr
    result = json.loads(added.stdout)
    (allocated,) = result["ips"]
    assert ipaddress.ip_interface(allocated["address"]).network == ipaddress.ip_network(
        "10.244.3.0/24"
    )
    assert allocated["gateway"] == "10.244.3.1"
    assert {"dst": "10.244.0.0/16"} in result["routes"]
    deleted = _plugin(host_local, "DEL", config)
    assert deleted.returncode == 0, deleted.stdout + deleted.stderr
