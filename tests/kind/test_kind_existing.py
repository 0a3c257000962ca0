"""``--cluster existing`` on a cluster cnibench did not make, which pulls cnibench's images from a
registry (issue 33, items 1 to 3).

The cluster is made by kind itself (``kind create cluster``, the offline node image, a config
written here), its CNI (flannel) applied here with kubectl, its nodes carry no
``cnibench.io/role`` label, and its containerd pulls ``localhost:<port>/...`` from a registry
running in the tier's engine on the kind network: Debian's ``docker-registry`` package in an
image built here from the tools image. Nothing is ``kind load``-ed: every pod image of the run
comes from the registry, pushed there by ``cnibench images push``. Afterwards the cluster must
hold nothing of cnibench's: namespaces, cluster-scoped objects, node labels and taints are
compared before and after.
"""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Iterator, Mapping
from pathlib import Path

import pandas as pd
import pytest
import yaml

from cnibench.backends.base import ClusterSpec
from cnibench.backends.kube.cni import cni_definition
from cnibench.backends.kube.images import OFFLINE_IMAGES
from cnibench.backends.kube.offline import offline_bin_dir
from cnibench.backends.kube.render import ROLE_LABEL
from cnibench.results import load_results

from .kind_support import cnibench, kind, retried_to_ok

CLUSTER = "byo-flannel"
"""Not ``cnibench-*``: cnibench's clean never touches it; this module deletes it."""
REGISTRY_CONTAINER = "cnibench-test-registry"
BASELINE = ("cross-node-idle-iperf3", "same-node-idle-sockperf")
"""Two baseline conditions: one across nodes, one on a node (the chosen client's)."""
OTHERS = ("gateway-off", "gateway-on", "off-cross-node-c1", "on-cross-node-r0-c1")
"""egress without and with its gateway, policy off and on: flannel has neither an egress
gateway nor a policy engine, and this cluster no external host (no CNIBENCH_EXTERNAL_ADDRESS)."""


def _docker(*args: str, env: Mapping[str, str], check: bool = True, stdin: str = "") -> str:
    done = subprocess.run(
        ["docker", *args],
        env=dict(env),
        input=stdin,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    if check and done.returncode != 0:
        pytest.fail(f"docker {' '.join(args)}: {done.stderr.strip()[-2000:]}")
    return done.stdout


def _kubectl(kubeconfig: Path, *args: str, stdin: str = "") -> str:
    program = shutil.which("kubectl") or str(offline_bin_dir() / "kubectl")
    done = subprocess.run(
        [program, "--kubeconfig", str(kubeconfig), *args],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    if done.returncode != 0:
        pytest.fail(f"kubectl {' '.join(args)}: {done.stderr.strip()[-2000:]}")
    return done.stdout


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    return port


def _registry_image(env: Mapping[str, str], workdir: Path) -> str:
    """An image serving Debian's docker-registry (its binary needs only libc: the tools image
    is its base), built in the tier's engine."""
    debs = workdir / "debs"
    debs.mkdir()
    subprocess.run(
        ["apt-get", "download", "docker-registry"],
        cwd=debs,
        check=True,
        capture_output=True,
        timeout=300,
    )
    (deb,) = debs.glob("docker-registry_*.deb")
    tree = workdir / "tree"
    subprocess.run(["dpkg-deb", "-x", str(deb), str(tree)], check=True, timeout=120)
    context = workdir / "context"
    context.mkdir()
    shutil.copy2(tree / "usr/bin/docker-registry", context / "docker-registry")
    (context / "config.yml").write_text(
        "version: 0.1\n"
        "storage:\n  filesystem:\n    rootdirectory: /var/lib/registry\n"
        "http:\n  addr: :5000\n"
    )
    (context / "Dockerfile").write_text(
        f"FROM {OFFLINE_IMAGES.tools}\n"
        "COPY docker-registry /usr/local/bin/docker-registry\n"
        "COPY config.yml /etc/cnibench-test-registry.yml\n"
        'ENTRYPOINT ["/usr/local/bin/docker-registry", "serve",'
        ' "/etc/cnibench-test-registry.yml"]\n'
    )
    tag = "localhost/cnibench-test-registry:2.8.2"
    _docker("build", "--tag", tag, str(context), env=env)
    return tag


def _cluster_config(node_image: str) -> dict[str, object]:
    """What a user writes for kind: flannel's pod subnet, kind's own CNI off, and containerd
    reading registry hosts from /etc/containerd/certs.d (kind's local-registry recipe)."""
    flannel = cni_definition(ClusterSpec(cni="flannel"))
    return {
        "kind": "Cluster",
        "apiVersion": "kind.x-k8s.io/v1alpha4",
        "networking": {"disableDefaultCNI": True, "podSubnet": flannel.pod_subnet},
        "containerdConfigPatches": [
            '[plugins."io.containerd.grpc.v1.cri".registry]\n'
            '  config_path = "/etc/containerd/certs.d"\n'
        ],
        "nodes": [
            {"role": "control-plane", "image": node_image},
            {"role": "worker", "image": node_image},
            {"role": "worker", "image": node_image},
        ],
    }


def _snapshot(kubeconfig: Path) -> dict[str, object]:
    """What a session may not leave on the cluster: namespaces, every cluster-scoped object,
    each node's labels and taints."""
    kinds = _kubectl(
        kubeconfig, "api-resources", "--namespaced=false", "--verbs=list", "-o", "name"
    ).split()
    scoped = {}
    for kind_name in kinds:
        if kind_name in ("nodes", "namespaces", "csinodes"):
            continue  # the nodes are compared by their labels and taints below
        scoped[kind_name] = sorted(_kubectl(kubeconfig, "get", kind_name, "-o", "name").split())
    nodes = json.loads(_kubectl(kubeconfig, "get", "nodes", "-o", "json"))["items"]
    return {
        "namespaces": sorted(_kubectl(kubeconfig, "get", "namespaces", "-o", "name").split()),
        "cluster-scoped": scoped,
        "labels": {n["metadata"]["name"]: n["metadata"].get("labels", {}) for n in nodes},
        "taints": {n["metadata"]["name"]: n["spec"].get("taints", []) for n in nodes},
    }


@pytest.fixture(scope="module")
def byo_cluster(offline_images: dict[str, str]) -> Iterator[dict[str, object]]:
    """A kind cluster made by kind and set up by hand, pulling from a registry in the tier's
    engine; removed with the registry at the end of the module."""
    env = offline_images
    made_modules = not Path("/lib/modules").exists()
    if made_modules:
        Path("/lib/modules").mkdir()  # as kind's users do on a kernel without modules
    workdir = Path(tempfile.mkdtemp(prefix="cnibench-byo-"))
    port = _free_port()
    try:
        registry_image = _registry_image(env, workdir)
        config = workdir / "kind.yaml"
        config.write_text(yaml.safe_dump(_cluster_config(OFFLINE_IMAGES.kind_node)))
        kind("create", "cluster", "--name", CLUSTER, "--config", str(config), env=env)
        kubeconfig = workdir / "kubeconfig"
        kubeconfig.write_text(kind("get", "kubeconfig", "--name", CLUSTER, env=env))
        _docker(
            "run", "--detach", "--name", REGISTRY_CONTAINER, "--network", "kind",
            "--publish", f"127.0.0.1:{port}:5000", registry_image, env=env,
        )  # fmt: skip
        address = _docker(
            "inspect", "--format", "{{.NetworkSettings.Networks.kind.IPAddress}}",
            REGISTRY_CONTAINER, env=env,
        ).strip()  # fmt: skip
        registry = f"localhost:{port}"
        hosts = f'server = "http://{address}:5000"\n[host."http://{address}:5000"]\n'
        hosts += '  capabilities = ["pull", "resolve"]\n'
        for node in kind("get", "nodes", "--name", CLUSTER, env=env).split():
            _docker(
                "exec", "-i", node, "sh", "-c",
                f"mkdir -p /etc/containerd/certs.d/{registry}"
                f" && cat > /etc/containerd/certs.d/{registry}/hosts.toml",
                env=env, stdin=hosts,
            )  # fmt: skip
        pushed = cnibench("images", "push", registry, env=env, timeout=900)
        exports = dict(
            line.removeprefix("export ").split("=", 1)
            for line in pushed.stdout.splitlines()
            if line.startswith("export ")
        )
        # The CNI, applied by hand as a cluster's owner would, its images from the registry.
        flannel = cni_definition(
            ClusterSpec(cni="flannel"), images=OFFLINE_IMAGES.in_registry(registry)
        )
        _kubectl(kubeconfig, "apply", "-f", "-", stdin=yaml.safe_dump_all(flannel.manifests))
        _kubectl(kubeconfig, "wait", "--for=condition=Ready", "nodes", "--all", "--timeout=300s")
        yield {"kubeconfig": kubeconfig, "registry": registry, "exports": exports}
    finally:
        kind("delete", "cluster", "--name", CLUSTER, env=env)
        _docker("rm", "--force", REGISTRY_CONTAINER, env=env, check=False)
        shutil.rmtree(workdir, ignore_errors=True)
        if (
            made_modules
            and not Path.home().joinpath(".cache/cnibench/kind/created-lib-modules").exists()
        ):
            Path("/lib/modules").rmdir()


@pytest.fixture(scope="module")
def byo_run(
    byo_cluster: dict[str, object], offline_images: dict[str, str], kind_results: Path
) -> tuple[pd.DataFrame, str, Path, dict[str, object], dict[str, object]]:
    """baseline, policy and egress with --cluster existing and --image-registry, no labels."""
    kubeconfig = byo_cluster["kubeconfig"]
    assert isinstance(kubeconfig, Path)
    before = _snapshot(kubeconfig)
    assert not any(ROLE_LABEL in labels for labels in before["labels"].values())  # type: ignore[union-attr]
    results = kind_results / "byo-flannel"
    env = {k: v for k, v in offline_images.items() if not k.startswith("CNIBENCH_IMAGE")} | {
        "KUBECONFIG": str(kubeconfig)
    }
    env.pop("CNIBENCH_IMAGES", None)  # an existing cluster's images are the registry's
    args = [
        "run", "--cluster", "existing", "--cni", "flannel", "--profile", "smoke",
        "--image-registry", str(byo_cluster["registry"]), "--results-dir", str(results),
        "--scenario", "baseline", "--scenario", "policy", "--scenario", "egress",
    ]  # fmt: skip
    for condition in BASELINE + OTHERS:
        args += ["--condition", condition]
    done = cnibench(*args, env=env, check=False, timeout=3600)
    output = done.stdout + done.stderr
    assert done.returncode == 0, output[-6000:]
    assert "Traceback" not in output
    after = _snapshot(kubeconfig)
    return load_results(results), output, results, before, after


def test_an_unlabelled_cluster_kind_made_is_measured_and_verified(
    byo_run: tuple[pd.DataFrame, str, Path, dict[str, object], dict[str, object]],
) -> None:
    everything, output, _, _, _ = byo_run
    df = retried_to_ok(everything)
    baseline = df[df["scenario"] == "baseline"]
    assert set(baseline["condition"]) == set(BASELINE)
    assert bool(df["verified"].all())
    assert set(baseline["provider"]) == {"existing"}
    gbits = baseline[baseline["metric"] == "throughput"]["value"] / 1e9
    assert len(gbits) >= 2
    assert gbits.between(0.05, 400).all(), gbits.tolist()
    assert "CNI: this cluster runs flannel (DaemonSet" in output  # detected, said


def test_what_flannel_cannot_do_is_skipped_with_its_reason(
    byo_run: tuple[pd.DataFrame, str, Path, dict[str, object], dict[str, object]],
) -> None:
    df, output, _, _, _ = byo_run
    skips = [line for line in output.splitlines() if line.startswith("skipped ")]
    egress = [line for line in skips if "egress/" in line]
    assert egress, output[-4000:]
    assert len(egress[0].split(":", 1)[-1].split()) >= 2, egress  # a reason, in words
    policy = df[df["scenario"] == "policy"]
    assert set(policy["condition"]) <= {"off-cross-node-c1"}  # "on" needs a policy engine
    assert not (df["scenario"] == "egress").any()


def test_the_nodes_chosen_are_named_in_the_environment(
    byo_run: tuple[pd.DataFrame, str, Path, dict[str, object], dict[str, object]],
    byo_cluster: dict[str, object],
) -> None:
    _, _, results, before, _ = byo_run
    (environment,) = results.glob("*/environments/*.json")  # one session, one cluster
    nodes = json.loads(environment.read_text())["nodes"]
    workers = sorted(n for n in before["labels"] if "control-plane" not in n)  # type: ignore[union-attr]
    assert sorted(nodes) == workers  # client and server on the two workers, chosen
    assert {entry["chosen_by"] for entry in nodes.values()} == {"chosen"}
    roles = {entry["role"] for entry in nodes.values()}
    assert {"client", "server"} <= {r for role in roles for r in role.split("+")}


def test_every_pod_image_came_from_the_registry(
    byo_run: tuple[pd.DataFrame, str, Path, dict[str, object], dict[str, object]],
    byo_cluster: dict[str, object],
    offline_images: dict[str, str],
) -> None:
    """No kind load: the nodes' containerd holds cnibench's tools image only under the
    registry's name, and `images push` printed the exports that name it."""
    registry = str(byo_cluster["registry"])
    exports = byo_cluster["exports"]
    assert isinstance(exports, dict)
    assert exports["CNIBENCH_IMAGE_TOOLS"] == f"{registry}/cnibench-tools:offline-1"
    workers = [
        n
        for n in kind("get", "nodes", "--name", CLUSTER, env=offline_images).split()
        if "control-plane" not in n
    ]
    for node in workers:
        held = _docker(
            "exec", node, "ctr", "--namespace", "k8s.io", "images", "list", "--quiet",
            env=offline_images,
        )  # fmt: skip
        tags = set(held.split())
        assert f"{registry}/cnibench-tools:offline-1" in tags, (node, sorted(tags))
        assert OFFLINE_IMAGES.tools not in tags  # never loaded under its local name


def test_the_cluster_holds_nothing_of_cnibench_afterwards(
    byo_run: tuple[pd.DataFrame, str, Path, dict[str, object], dict[str, object]],
) -> None:
    _, _, _, before, after = byo_run
    assert after == before
