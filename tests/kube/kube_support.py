"""A real Kubernetes control plane for the kube tier: etcd, kube-apiserver,
kube-controller-manager, kube-scheduler and kwok, as child processes on loopback.

The binaries come from ``scripts/kube-tier.sh`` (built from Go modules, cached outside the
repository), etcd 3.6 too (from the offline builder). Everything runs as a child of the test process
on free loopback ports, with state in a temporary directory, and is stopped by PID.
Pods never run here: kwok only pretends (it marks pods Running and gives them an IP).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import socket
import ssl
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import yaml

K8S_VERSION = "v1.34.4"
GATEWAY_API_MODULE = "sigs.k8s.io/gateway-api@v1.4.0"
CILIUM_MODULE = "github.com/cilium/cilium@v1.18.4"
CONTROL_PLANE_BINARIES = (
    "kube-apiserver",
    "kube-controller-manager",
    "kube-scheduler",
    "kwok",
)
KWOK_NODE_ANNOTATION = ("kwok.x-k8s.io/node", "fake")
"""kwok manages only nodes carrying this annotation (never a real node)."""
STARTUP_TIMEOUT = 120.0
"""Seconds the control plane may take to become ready (the apiserver needs ~10-20 s here)."""
REPO_ROOT = Path(__file__).resolve().parents[2]


def bin_dir() -> Path:
    """Directory holding the tier's binaries (``CNIBENCH_KUBE_BIN`` overrides)."""
    override = os.environ.get("CNIBENCH_KUBE_BIN")
    if override:
        return Path(override)
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    root = Path(os.environ.get("CNIBENCH_KUBE_CACHE") or cache / "cnibench" / "kube")
    return root / K8S_VERSION / "bin"


def etcd_binary() -> str | None:
    """etcd 3.6 from the offline build (linked into :func:`bin_dir` by kube-tier.sh); an
    API server of 1.34 with Debian's etcd 3.4 disables RequestWatchProgress, so kwok's
    watch-list streams end and deleted pods are never finalized."""
    built = bin_dir() / "etcd"
    return str(built) if built.is_file() else None


def missing_binaries() -> list[str]:
    """Names of the tier's binaries that are not available (empty when all are)."""
    missing = [name for name in CONTROL_PLANE_BINARIES if not (bin_dir() / name).is_file()]
    if etcd_binary() is None:
        missing.append("etcd (built by scripts/kube-tier.sh)")
    if shutil.which("openssl") is None:
        missing.append("openssl")
    return missing


def go_binary() -> str | None:
    """The Go toolchain (PATH first, then /usr/local/go)."""
    found = shutil.which("go")
    if found:
        return found
    fallback = Path("/usr/local/go/bin/go")
    return str(fallback) if fallback.is_file() else None


def go_module_dir(module: str, *, timeout: float = 300.0) -> Path:
    """Directory of ``module`` (``path@version``) in the Go module cache, downloaded if needed.

    Raises
    ------
    RuntimeError
        If Go is missing or the download fails.
    """
    go = go_binary()
    if go is None:
        raise RuntimeError("the Go toolchain is not installed")
    done = subprocess.run(
        [go, "mod", "download", "-json", module],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
        env={**os.environ, "GOFLAGS": "-mod=mod", "GOTOOLCHAIN": "local"},
        cwd="/",
    )
    try:
        info = json.loads(done.stdout)
    except json.JSONDecodeError:
        info = {}
    if done.returncode != 0 or "Dir" not in info:
        raise RuntimeError(f"go mod download {module} failed: {info.get('Error') or done.stderr}")
    return Path(info["Dir"])


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nobody listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def kwok_node(
    name: str,
    *,
    address: str,
    labels: Mapping[str, str] | None = None,
    taints: Sequence[Mapping[str, str]] = (),
) -> dict[str, Any]:
    """A Node kwok manages, whose kubelet endpoint is a closed port on loopback ``address``:
    any exec, log or port-forward dial the API server makes to it is refused at once and never
    leaves this host.

    Raises
    ------
    AssertionError
        ``address`` is not a loopback address.
    """
    assert address.startswith("127."), f"kwok nodes must have loopback addresses: {address}"
    node: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "annotations": {KWOK_NODE_ANNOTATION[0]: KWOK_NODE_ANNOTATION[1]},
            # A kubelet labels its node with its hostname; kwok registers none, so the node
            # gets the label a kubelet would give it (pods select their node by it).
            "labels": {"kubernetes.io/hostname": name, **(labels or {})},
        },
        "status": {
            "addresses": [{"type": "InternalIP", "address": address}],
            "daemonEndpoints": {"kubeletEndpoint": {"Port": free_port()}},
        },
    }
    if taints:
        node["spec"] = {"taints": [dict(t) for t in taints]}
    return node


def wait_kwok_nodes_ready(
    core: Any, names: Sequence[str], *, taints: Sequence[Mapping[str, str]], timeout: float = 60
) -> None:
    """Wait until kwok marks each node Ready, then set its taints to ``taints``.

    The not-ready taint added at creation is only lifted by the node lifecycle controller,
    which the tier does not run, hence the explicit taints.
    """
    deadline = time.monotonic() + timeout
    for name in names:
        while True:
            node = core.read_node(name)
            ready = {c.type: c.status for c in (node.status.conditions or [])}.get("Ready")
            if ready == "True":
                break
            assert time.monotonic() < deadline, f"kwok did not mark {name} Ready"
            time.sleep(0.2)
        core.patch_node(name, {"spec": {"taints": list(taints)}})


def delete_and_wait_gone(
    api_client: Any, manifests: Sequence[Mapping[str, Any]], *, timeout: float = 90.0
) -> None:
    """Delete ``manifests`` (absent ones are fine) and wait until their Namespaces are gone,
    so a later test can create them again (a Terminating namespace refuses new objects).

    Raises
    ------
    AssertionError
        A namespace still exists after ``timeout`` seconds.
    """
    from kubernetes import client
    from kubernetes.client.exceptions import ApiException

    from cnibench.backends.kube.api import Applier

    applier = Applier(api_client)
    for manifest in reversed(manifests):
        applier.delete(manifest)
    core = client.CoreV1Api(api_client)
    deadline = time.monotonic() + timeout
    for manifest in manifests:
        if manifest["kind"] != "Namespace":
            continue
        name = manifest["metadata"]["name"]
        while True:
            try:
                core.read_namespace(name)
            except ApiException as exc:
                if exc.status == 404:
                    break
                raise
            assert time.monotonic() < deadline, f"namespace {name} was not deleted in time"
            time.sleep(0.5)


@dataclass
class _Child:
    name: str
    process: subprocess.Popen[bytes]
    log: IO[bytes]
    log_path: Path


class ControlPlane:
    """etcd + kube-apiserver + controller-manager + scheduler + kwok under one directory.

    Parameters
    ----------
    workdir:
        Empty directory for certificates, tokens, etcd data and logs.
    binaries:
        Directory of the Kubernetes and kwok binaries.
    """

    def __init__(self, workdir: Path, binaries: Path) -> None:
        self.workdir = workdir
        self.binaries = binaries
        self.token = os.urandom(16).hex()
        self.apiserver_port = free_port()
        self.kubeconfig = workdir / "kubeconfig.yaml"
        self._children: list[_Child] = []

    @property
    def server(self) -> str:
        """HTTPS URL of the API server."""
        return f"https://127.0.0.1:{self.apiserver_port}"

    def start(self) -> None:
        """Start every component and wait until the API server is ready and kwok runs.

        Raises
        ------
        RuntimeError
            If a component exits or the API server is not ready in time (logs attached).
        """
        try:
            self._start()
        except BaseException:
            self.stop()
            raise

    def _start(self) -> None:
        certs = self.workdir / "certs"
        certs.mkdir()
        sa_key = certs / "sa.key"
        sa_pub = certs / "sa.pub"
        subprocess.run(
            ["openssl", "genrsa", "-out", str(sa_key), "2048"], check=True, capture_output=True
        )
        subprocess.run(
            ["openssl", "rsa", "-in", str(sa_key), "-pubout", "-out", str(sa_pub)],
            check=True,
            capture_output=True,
        )
        tokens = self.workdir / "tokens.csv"
        tokens.write_text(f'{self.token},cnibench-admin,cnibench-admin,"system:masters"\n')
        tokens.chmod(0o600)
        etcd_client, etcd_peer = free_port(), free_port()
        self._spawn(
            "etcd",
            [
                str(etcd_binary()),
                "--name=cnibench",
                f"--data-dir={self.workdir / 'etcd'}",
                f"--listen-client-urls=http://127.0.0.1:{etcd_client}",
                f"--advertise-client-urls=http://127.0.0.1:{etcd_client}",
                f"--listen-peer-urls=http://127.0.0.1:{etcd_peer}",
                f"--initial-advertise-peer-urls=http://127.0.0.1:{etcd_peer}",
                f"--initial-cluster=cnibench=http://127.0.0.1:{etcd_peer}",
                "--log-level=warn",
            ],
        )
        self._spawn(
            "kube-apiserver",
            [
                str(self.binaries / "kube-apiserver"),
                f"--etcd-servers=http://127.0.0.1:{etcd_client}",
                f"--secure-port={self.apiserver_port}",
                "--bind-address=127.0.0.1",
                "--advertise-address=127.0.0.1",
                f"--cert-dir={certs}",
                f"--token-auth-file={tokens}",
                "--authorization-mode=RBAC",
                "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
                f"--service-account-key-file={sa_pub}",
                f"--service-account-signing-key-file={sa_key}",
                "--service-cluster-ip-range=10.96.0.0/16",
                "--allow-privileged=true",
                "--v=0",
            ],
        )
        self._wait_ready()
        self._write_kubeconfig(certs / "apiserver.crt")
        for name, extra in (
            (
                "kube-controller-manager",
                [
                    "--controllers=*,-nodeipam,-nodelifecycle,-serviceaccount-token",
                    "--leader-elect=false",
                    "--secure-port=0",
                    "--use-service-account-credentials=false",
                ],
            ),
            ("kube-scheduler", ["--leader-elect=false", "--secure-port=0"]),
            (
                "kwok",
                [
                    "--manage-all-nodes=false",
                    "--manage-nodes-with-annotation-selector="
                    f"{KWOK_NODE_ANNOTATION[0]}={KWOK_NODE_ANNOTATION[1]}",
                    f"--server-address=127.0.0.1:{free_port()}",
                ],
            ),
        ):
            self._spawn(
                name, [str(self.binaries / name), f"--kubeconfig={self.kubeconfig}", *extra]
            )
        time.sleep(1.0)
        self._check_alive()

    def _spawn(self, name: str, argv: Sequence[str]) -> None:
        log_path = self.workdir / f"{name}.log"
        log = log_path.open("wb")
        process = subprocess.Popen(
            list(argv),
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            cwd=self.workdir,
        )
        self._children.append(_Child(name, process, log, log_path))

    def _write_kubeconfig(self, ca_file: Path) -> None:
        """Kubeconfig that verifies the server against the self-signed certificate
        kube-apiserver wrote to ``--cert-dir`` (its SANs include 127.0.0.1)."""
        config: dict[str, Any] = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [
                {
                    "name": "tier",
                    "cluster": {"server": self.server, "certificate-authority": str(ca_file)},
                }
            ],
            "users": [{"name": "admin", "user": {"token": self.token}}],
            "contexts": [{"name": "tier", "context": {"cluster": "tier", "user": "admin"}}],
            "current-context": "tier",
        }
        self.kubeconfig.write_text(yaml.safe_dump(config))
        self.kubeconfig.chmod(0o600)

    def _check_alive(self) -> None:
        for child in self._children:
            if child.process.poll() is not None:
                raise RuntimeError(
                    f"{child.name} exited with {child.process.returncode}: {self.log_tail(child)}"
                )

    def log_tail(self, child: _Child, size: int = 2000) -> str:
        """The last ``size`` characters of a component's log."""
        child.log.flush()
        return child.log_path.read_bytes()[-size:].decode(errors="replace")

    def _wait_ready(self) -> None:
        # The certificate may not be written yet: readiness is probed without verification;
        # every client afterwards verifies it (see _write_kubeconfig).
        context = ssl.create_default_context()
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
        request = urllib.request.Request(
            f"{self.server}/readyz", headers={"Authorization": f"Bearer {self.token}"}
        )
        deadline = time.monotonic() + STARTUP_TIMEOUT
        last = ""
        while time.monotonic() < deadline:
            self._check_alive()
            try:
                with urllib.request.urlopen(request, timeout=5, context=context) as answer:
                    if answer.status == 200:
                        return
            except (urllib.error.URLError, OSError) as exc:
                last = str(exc)
            time.sleep(0.5)
        raise RuntimeError(f"kube-apiserver not ready after {STARTUP_TIMEOUT:.0f} s: {last}")

    def api_client(self) -> Any:
        """A :class:`kubernetes.client.ApiClient` authenticated as cluster admin."""
        from kubernetes import client, config

        configuration = client.Configuration()
        config.load_kube_config(
            config_file=str(self.kubeconfig), client_configuration=configuration
        )
        return client.ApiClient(configuration)

    def stop(self) -> None:
        """Stop every component by PID, newest first (SIGTERM, then SIGKILL after 10 s)."""
        for child in reversed(self._children):
            if child.process.poll() is None:
                child.process.terminate()
                try:
                    child.process.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    child.process.kill()
                    child.process.wait(timeout=10)
            child.log.close()
        self._children.clear()


PLACEHOLDER_IMAGE = "registry.invalid/cnibench/placeholder:0"
"""An image no node ever pulls (kwok runs nothing): stand-ins and CLI runs name it."""
ROLE_LOOPBACK = {"127.0.0.2", "127.0.0.3", "127.0.0.4"}


@contextlib.contextmanager
def role_nodes(core: Any, prefix: str) -> Iterator[list[str]]:
    """One kwok node per cnibench role (client, server, egress-gw), Ready and untainted, on
    loopback addresses; deleted on exit."""
    from cnibench.backends.base import NodeRole
    from cnibench.backends.kube.render import ROLE_LABEL

    names: list[str] = []
    try:
        for index, role in enumerate((NodeRole.CLIENT, NodeRole.SERVER, NodeRole.EGRESS_GW)):
            name = f"{prefix}-{role.value}"
            labels = {ROLE_LABEL: role.value, "type": "kwok"}
            core.create_node(kwok_node(name, address=f"127.0.0.{index + 2}", labels=labels))
            names.append(name)
        wait_kwok_nodes_ready(core, names, taints=[])
        for name in names:
            # Guard: every dial the API server makes to this "kubelet" must stay on loopback.
            status = core.read_node(name).status
            assert {a.address for a in status.addresses} <= ROLE_LOOPBACK, status.addresses
        yield names
    finally:
        for name in names:
            core.delete_node(name)


def stand_in_workload(kind: str, namespace: str, name: str) -> dict[str, Any]:
    """A Deployment (one replica) or DaemonSet named like a CNI's own, running the placeholder
    image: kwok reports it rolled out, so cnibench's readiness check of that CNI passes."""
    labels = {"app": name}
    template = {
        "metadata": {"labels": labels},
        "spec": {"containers": [{"name": name, "image": PLACEHOLDER_IMAGE}]},
    }
    spec: dict[str, Any] = {"selector": {"matchLabels": labels}, "template": template}
    if kind == "Deployment":
        spec["replicas"] = 1
    return {
        "apiVersion": "apps/v1",
        "kind": kind,
        "metadata": {"name": name, "namespace": namespace},
        "spec": spec,
    }


@contextlib.contextmanager
def kube_proxy_configmap(core: Any, mode: str) -> Iterator[None]:
    """kube-proxy's ConfigMap as kubeadm (and so kind) writes it, with ``mode``; deleted on
    exit. The tier runs no kube-proxy: this only tells cnibench which proxy a cluster has."""
    body = {
        "metadata": {"name": "kube-proxy", "namespace": "kube-system"},
        "data": {"config.conf": f"apiVersion: kubeproxy.config.k8s.io/v1alpha1\nmode: {mode}\n"},
    }
    core.create_namespaced_config_map("kube-system", body)
    try:
        yield
    finally:
        core.delete_namespaced_config_map("kube-proxy", "kube-system")


@contextlib.contextmanager
def cni_stand_in(api_client: Any, cni: str, *, timeout: float = 90.0) -> Iterator[None]:
    """What cnibench waits on for ``cni`` (its readiness workloads, in their namespaces),
    rolled out on the kwok nodes with the placeholder image; on exit they are deleted and
    waited for until gone, so the next module's stand-in of the same CNI does not meet a
    Terminating namespace (which refuses new objects and then vanishes under them). The
    tier's stand-in for a cluster that already runs that CNI."""

    from cnibench.backends.base import ClusterSpec
    from cnibench.backends.kube.addons import install_manifests, wait_rollouts
    from cnibench.backends.kube.cni import cni_definition

    readiness = cni_definition(ClusterSpec(cni=cni)).readiness
    # kube-system is always there and may not be deleted (Cilium's workloads live in it).
    namespaces = sorted({item.namespace for item in readiness} - {"kube-system"})
    objects: list[dict[str, Any]] = [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}} for ns in namespaces
    ]
    objects += [stand_in_workload(item.kind, item.namespace, item.name) for item in readiness]
    try:
        install_manifests(api_client, objects, timeout=10)
        wait_rollouts(api_client, readiness, timeout=timeout, owner=f"{cni} stand-in")
        yield
    finally:
        delete_and_wait_gone(api_client, objects)
