"""Where clusters come from: ``existing`` (a kubeconfig), ``kind`` and ``aks`` (Terraform).

A provider turns a :class:`~cnibench.backends.base.ClusterSpec` and its
:class:`~cnibench.backends.kube.cni.CniDefinition` into a kubeconfig path and context. The
command lines and configs are built by pure functions (:func:`kind_create_argv`,
:func:`cluster_hash`, :func:`aks_variables`) so tests check them exactly; only the provider
methods run anything.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import re
import shutil
import subprocess
from collections.abc import Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import yaml

from cnibench.backends.base import ClusterSpec, NodeRole
from cnibench.backends.kube.cni_types import CniDefinition
from cnibench.backends.kube.images import Images, build_context
from cnibench.backends.kube.offline import cluster_image_tags, offline_bin_dir, pod_image_tags
from cnibench.backends.kube.render import kind_cluster_config
from cnibench.backends.kube.resources import data_tree
from cnibench.engine import ENGINE_LEASE
from cnibench.engine.api import EngineReads
from cnibench.errors import ConfigError, ProvisioningError
from cnibench.leases import Lease, hold, live_holders, live_kind_holders

__all__ = [
    "AKS_CREDENTIAL_VARIABLES",
    "AKS_VARIABLES_FILE",
    "KIND_MINIMUM",
    "TERRAFORM_COMMANDS",
    "AksProvider",
    "ExistingProvider",
    "KindProvider",
    "Provider",
    "ProviderCluster",
    "add_offline_tools_to_path",
    "aks_variables",
    "check_kind_version",
    "cluster_hash",
    "forget_kind_state",
    "kind_create_argv",
    "kind_delete_argv",
    "kind_state_dir",
    "lib_modules_marker",
    "release_lib_modules",
    "terraform_command",
    "terraform_dir",
]

AKS_CREDENTIAL_VARIABLES = (
    "ARM_CLIENT_ID",
    "ARM_CLIENT_SECRET",
    "ARM_TENANT_ID",
    "ARM_SUBSCRIPTION_ID",
)
"""Azure credentials azurerm reads from the environment (never passed on a command line)."""


@dataclass(frozen=True)
class ProviderCluster:
    """A cluster a provider made available.

    Attributes
    ----------
    name:
        Cluster name.
    kubeconfig:
        Path of a kubeconfig (mode 0600; never logged).
    context:
        Context to use, ``""`` for the current one.
    created:
        Whether this call created it (``False``: reused).
    """

    name: str
    kubeconfig: Path
    context: str = ""
    created: bool = False


class Provider(Protocol):
    """Creates or finds clusters."""

    name: str

    def ensure(self, spec: ClusterSpec, cni: CniDefinition) -> ProviderCluster:
        """A cluster for ``spec`` (created or reused)."""

    def delete(self, cluster: ProviderCluster) -> None:
        """Remove a cluster this provider created."""

    def forget(self, cluster: ProviderCluster) -> None:
        """End this process's claim on a cluster it keeps (``--keep-cluster``, existing):
        after it, a ``cnibench clean`` may remove what is left of it."""


def cluster_hash(provider: str, spec: ClusterSpec, config: Mapping[str, Any]) -> str:
    """Short stable hash of (provider, spec, rendered config): equal inputs reuse a cluster."""
    identity = {
        "provider": provider,
        "cni": spec.cni,
        "encryption": spec.encryption,
        "roles": [r.value for r in spec.roles],
        "options": dict(sorted(spec.options.items())),
        "config": config,
    }
    digest = hashlib.sha256(json.dumps(identity, sort_keys=True).encode()).hexdigest()
    return digest[:10]


def kind_create_argv(name: str, config_path: Path, *, wait: str = "0s") -> list[str]:
    """``kind create cluster`` for a generated config (no wait: the CNI comes later)."""
    return [
        "kind",
        "create",
        "cluster",
        "--name",
        name,
        "--config",
        str(config_path),
        "--wait",
        wait,
    ]


KIND_MINIMUM = (0, 30, 0)
"""Oldest kind release that built the pinned node image (``Images.kind_node``)."""
_KIND_VERSION_RE = re.compile(r"\bkind v(\d+)\.(\d+)\.(\d+)")


def check_kind_version(text: str) -> None:
    """Refuse a ``kind version`` output older than :data:`KIND_MINIMUM`.

    kind node images are built for one kind release; an older kind may create nodes that never
    become ready, long after the cluster was requested. Unparsable output is accepted (kind
    then reports its own errors).

    Raises
    ------
    cnibench.errors.ProvisioningError
        The installed kind is too old (the message says which release to install).
    """
    match = _KIND_VERSION_RE.search(text)
    if match is None:
        return
    found = tuple(int(part) for part in match.groups())
    if found < KIND_MINIMUM:
        need = "v" + ".".join(str(part) for part in KIND_MINIMUM)
        have = "v" + ".".join(str(part) for part in found)
        raise ProvisioningError(
            f"kind {have} is older than {need}, the release that built the pinned node image:"
            f" go install sigs.k8s.io/kind@{need}"
        )


def kind_delete_argv(name: str) -> list[str]:
    """``kind delete cluster`` for ``name``."""
    return ["kind", "delete", "cluster", "--name", name]


class ExistingProvider:
    """Use a cluster someone else runs (``--cluster existing``).

    Parameters
    ----------
    kubeconfig:
        Path of the kubeconfig; ``$KUBECONFIG`` or ``~/.kube/config`` when ``None``.
    context:
        Context name, ``""`` for the current context.
    """

    name = "existing"

    def __init__(self, kubeconfig: Path | None = None, context: str = "") -> None:
        default = os.environ.get("KUBECONFIG", str(Path.home() / ".kube" / "config"))
        self.kubeconfig = kubeconfig or Path(default.split(os.pathsep)[0])
        self.context = context

    def ensure(self, spec: ClusterSpec, cni: CniDefinition) -> ProviderCluster:
        """The configured cluster (its CNI must already be ``cni``; nothing is installed)."""
        if not self.kubeconfig.is_file():
            raise ConfigError(f"kubeconfig {self.kubeconfig} does not exist")
        return ProviderCluster(self.context or "existing", self.kubeconfig, self.context)

    def delete(self, cluster: ProviderCluster) -> None:
        """Never deletes a cluster cnibench did not create."""

    def forget(self, cluster: ProviderCluster) -> None:
        """Holds no claim on a cluster cnibench did not create."""


KIND_CLUSTER_LEASE = "kind-cluster"
"""The lease kind (:mod:`cnibench.leases`) a session holds on each kind cluster it uses."""

KIND_STATE_VARIABLE = "CNIBENCH_KIND_STATE"
"""Environment variable naming kind's state directory (configs, kubeconfigs, the marker of a
``/lib/modules`` cnibench made); tests that drive kind with stand-ins give it their own."""


def forget_kind_state(name: str, state_dir: Path | None = None) -> None:
    """Remove what cnibench kept of kind cluster ``name`` (its config and kubeconfig in
    ``state_dir``, :func:`kind_state_dir` by default) once the cluster is deleted."""
    state = state_dir or kind_state_dir()
    for path in (state / f"{name}.yaml", state / f"{name}.kubeconfig"):
        path.unlink(missing_ok=True)


def kind_state_dir(environ: Mapping[str, str] | None = None) -> Path:
    """``$CNIBENCH_KIND_STATE``, else ``~/.cache/cnibench/kind`` (``XDG_CACHE_HOME`` and
    ``HOME`` of ``environ``, default ``os.environ``)."""
    env = os.environ if environ is None else environ
    chosen = env.get(KIND_STATE_VARIABLE)
    if chosen:
        return Path(chosen)
    cache = Path(env.get("XDG_CACHE_HOME") or Path(env.get("HOME") or Path.home()) / ".cache")
    return cache / "cnibench" / "kind"


LIB_MODULES = Path("/lib/modules")
"""What kind bind-mounts into every node (tests of the provider pass another directory)."""


def lib_modules_marker(state_dir: Path | None = None) -> Path:
    """The file that says cnibench made :data:`LIB_MODULES` for kind, in ``state_dir``
    (default :func:`kind_state_dir`)."""
    return (state_dir or kind_state_dir()) / "created-lib-modules"


class KindProvider:
    """kind clusters from generated configs, reused by config hash.

    Parameters
    ----------
    state_dir:
        Where configs and kubeconfigs are kept (:func:`kind_state_dir` by default).
    images:
        Node image and the images loaded into clusters (``CNIBENCH_IMAGES`` and
        ``CNIBENCH_IMAGE_<NAME>`` when ``None``, as the backend reads them).
    recreate:
        Delete and recreate a cluster even if one with the same hash exists.
    runner:
        Runs an argv and returns its stdout (``subprocess.run`` by default; tests pass a fake,
        since kind cannot create clusters without a container engine).
    engine:
        What cnibench itself asks the engine kind runs in (whether an image is there, the kind
        network, each node's container): the engine of ``$DOCKER_HOST`` by default, as the
        docker CLI kind runs sees it; tests pass one on a fake client.
    """

    name = "kind"

    def __init__(
        self,
        state_dir: Path | None = None,
        *,
        images: Images | None = None,
        recreate: bool = False,
        runner: Any = None,
        engine: EngineReads | None = None,
        modules_dir: Path = LIB_MODULES,
    ) -> None:
        self.state_dir = state_dir or kind_state_dir()
        self.modules_dir = modules_dir
        self.images = images or Images.from_environment(os.environ)
        self.recreate = recreate
        self._run = runner or _run
        self.engine = engine or EngineReads()
        self._leases: dict[str, list[Lease]] = {}
        if runner is None:
            add_offline_tools_to_path()

    def plan(self, spec: ClusterSpec, cni: CniDefinition) -> tuple[str, dict[str, Any]]:
        """Cluster name (``cnibench-<hash>``) and kind config for ``spec``."""
        config = kind_cluster_config("cnibench", spec, cni, images=self.images)
        name = f"cnibench-{cluster_hash(self.name, spec, config)}"
        config["name"] = name
        return name, config

    def ensure(self, spec: ClusterSpec, cni: CniDefinition) -> ProviderCluster:
        """Reuse the cluster with this config hash, or create it."""
        name, config = self.plan(spec, cni)
        check_kind_version(self._run(["kind", "version"]))
        self.state_dir.mkdir(parents=True, exist_ok=True)
        config_path = self.state_dir / f"{name}.yaml"
        kubeconfig = self.state_dir / f"{name}.kubeconfig"
        # Held before it is created: another shell's `cnibench clean` keeps a cluster (and the
        # engine it runs in) that a live session holds, also while it is being made.
        self._hold(name)
        existing = self._run(["kind", "get", "clusters"]).split()
        stopped = self._stopped_nodes(name) if name in existing else []
        if name in existing and (self.recreate or stopped):
            # A cluster with a stopped node cannot serve: its session was killed with the
            # engine (which brings the nodes back stopped), or a node died. Made again.
            others = live_holders(KIND_CLUSTER_LEASE, name)
            if others:
                why = f"has stopped node(s) {', '.join(stopped)} and " if stopped else ""
                raise ProvisioningError(
                    f"kind cluster {name} {why}is in use by cnibench process(es)"
                    f" {', '.join(map(str, others))}: not recreated under them"
                )
            self._run(kind_delete_argv(name))
            existing.remove(name)
        created = name not in existing
        if created:
            config_path.write_text(yaml.safe_dump(config, sort_keys=False))
            self._ensure_lib_modules()
            self._run(kind_create_argv(name, config_path))
        kubeconfig.write_text(self._run(["kind", "get", "kubeconfig", "--name", name]))
        kubeconfig.chmod(0o600)
        self.load_local_images(name, cni=cni.name, gateway=spec.options.get("gateway", ""))
        return ProviderCluster(name, kubeconfig, f"kind-{name}", created)

    def _stopped_nodes(self, name: str) -> list[str]:
        """The node containers of kind cluster ``name`` that are not running."""
        nodes = self._run(["kind", "get", "nodes", "--name", name]).split()
        return [node for node in nodes if self.engine.container(node).pid == 0]

    def run(self, argv: Sequence[str]) -> str:
        """Run ``argv`` (a ``kind`` or host command) as this provider does; its stdout.

        Raises
        ------
        cnibench.errors.ProvisioningError
            It failed (its last error line).
        """
        out: str = self._run(argv)
        return out

    def load_local_images(self, name: str, *, cni: str = "", gateway: str = "") -> None:
        """Build (once per host) and load into cluster ``name`` every image cnibench builds
        itself (:meth:`~cnibench.backends.kube.images.Images.local_builds`); with the offline
        set, every pod image of it (:func:`~cnibench.backends.kube.offline.cluster_image_tags`:
        a CNI's own images only into a cluster of that ``cni``), and locust's (``--load-engine
        locust`` in pods) when ``cnibench images build --load-engine locust`` made it.

        All go in with one ``kind load``: one archive, imported once into each node, so images
        that share layers (Prometheus' and node-exporter's root filesystem) carry them once.
        ``kind load`` skips nodes that already hold every image, so a reused cluster costs one
        comparison per node and image.

        Whether an image is there is asked of the engine (:meth:`EngineReads.image_id
        <cnibench.engine.api.EngineReads.image_id>`); ``docker build`` stays the
        CLI, whose BuildKit and progress output the SDK would only pass through.

        Raises
        ------
        cnibench.errors.ProvisioningError
            The engine does not answer, an offline image is not in it, or ``docker build`` or
            ``kind load`` failed (their last error line).
        """
        if self.images.registry:
            return  # the nodes pull them from the registry (--image-registry)
        if not self.images.offline:
            tags = self.images.local_builds()
            for image in tags:
                if self.engine.image_id(image) is None:
                    self._run(["docker", "build", "--tag", image, str(build_context(image))])
            self._load(name, tags)
            return
        shared = set(pod_image_tags(self.images, cnis=[]))
        own = set(pod_image_tags(self.images, cnis=[cni] if cni else [])) - shared
        extras = [gateway] if gateway else []
        # locust's image (built only with --load-engine locust) goes in when it was built.
        optional = set(pod_image_tags(self.images, cnis=["locust"])) - shared
        if self.engine.image_id(self.images.locust) is not None:
            extras.append("locust")
        tags = cluster_image_tags(self.images, cni=cni, extras=extras)
        for image in tags:
            if self.engine.image_id(image) is None:
                build = "cnibench images build"
                if image in own:  # a CNI's own: built only when asked for
                    build += f" --cni {cni}"
                elif image in optional:  # the load engine's
                    build += " --load-engine locust"
                elif image not in shared:  # the gateway's
                    build += f" --gateway {gateway}"
                raise ProvisioningError(f"offline image {image} is not in the engine: run {build}")
        self._load(name, tags)

    def _load(self, name: str, tags: Sequence[str]) -> None:
        if tags:
            self._run(["kind", "load", "docker-image", *tags, "--name", name])

    @property
    def _lib_modules_marker(self) -> Path:
        return lib_modules_marker(self.state_dir)

    def _ensure_lib_modules(self) -> None:
        """kind bind-mounts ``/lib/modules`` into every node; a kernel with everything built
        in has none. Create it empty and remember to remove it with the last cluster."""
        with _lib_modules_lock(self.state_dir):
            if self.modules_dir.exists():
                return
            self.modules_dir.mkdir(parents=True)
            self._lib_modules_marker.write_text("cnibench created /lib/modules for kind\n")

    def _release_lib_modules(self) -> None:
        """Remove the ``/lib/modules`` cnibench created once no cnibench cluster is left."""
        if not self._lib_modules_marker.is_file():
            return
        left = [
            c for c in self._run(["kind", "get", "clusters"]).split() if c.startswith("cnibench-")
        ]
        if not left:
            release_lib_modules(self.state_dir, modules_dir=self.modules_dir)

    def _hold(self, name: str) -> None:
        if name not in self._leases:
            self._leases[name] = [hold(KIND_CLUSTER_LEASE, name)]
            docker_host = os.environ.get("DOCKER_HOST", "")
            if docker_host:
                self._leases[name].append(hold(ENGINE_LEASE, docker_host))

    def forget(self, cluster: ProviderCluster) -> None:
        """Release this process's leases on a kept cluster (and its engine): the cluster stays,
        and a later ``cnibench clean`` may remove it. Safe to repeat."""
        for lease in self._leases.pop(cluster.name, []):
            lease.release()

    def delete(self, cluster: ProviderCluster) -> None:
        """``kind delete cluster`` (and the ``/lib/modules`` cnibench created, with the last),
        unless another live cnibench process holds the cluster too (two sessions of the same
        configuration share one): then only this process's claim ends."""
        self.forget(cluster)
        if live_holders(KIND_CLUSTER_LEASE, cluster.name):
            return
        self._run(kind_delete_argv(cluster.name))
        forget_kind_state(cluster.name, self.state_dir)
        self._release_lib_modules()


def terraform_dir() -> Path:
    """``terraform/aks`` of the checkout or of the installed wheel (``CNIBENCH_TERRAFORM_AKS``
    overrides it, ``CNIBENCH_TERRAFORM_DIR`` the ``terraform`` tree)."""
    override = os.environ.get("CNIBENCH_TERRAFORM_AKS", "")
    if override:
        return Path(override)
    return data_tree("terraform", override_env="CNIBENCH_TERRAFORM_DIR") / "aks"


AKS_VARIABLES_FILE = "cnibench.auto.tfvars.json"
"""The variables of a cluster, in its Terraform working copy (no credentials in them)."""

TERRAFORM_COMMANDS = ("terraform", "tofu")
"""The commands that can apply ``terraform/aks``, in the order they are looked for."""


def terraform_command(environ: Mapping[str, str] | None = None) -> str | None:
    """The command python-terraform runs, as a path: ``$CNIBENCH_TERRAFORM`` when set (a name
    on ``PATH`` or a path, e.g. ``tofu``), else the first of :data:`TERRAFORM_COMMANDS` on
    ``PATH`` (Terraform when both are there, OpenTofu when it is the only one); ``None`` when
    none is found.

    Parameters
    ----------
    environ:
        Environment whose ``CNIBENCH_TERRAFORM`` and ``PATH`` are read (``os.environ`` by
        default).
    """
    env = os.environ if environ is None else environ
    path = env.get("PATH", os.defpath)
    chosen = env.get("CNIBENCH_TERRAFORM", "")
    for name in (chosen,) if chosen else TERRAFORM_COMMANDS:
        found = shutil.which(name, path=path)
        if found:
            return found
    return None


def aks_variables(
    name: str,
    *,
    location: str,
    vm_size: str,
    kubernetes_version: str,
    roles: Sequence[NodeRole] = ClusterSpec.roles,
    node_count: int | None = None,
) -> dict[str, Any]:
    """Terraform variables of ``terraform/aks`` (no credentials: azurerm reads ``ARM_*``).

    Each role becomes a user node pool whose nodes carry ``cnibench.io/role=<role>``, with as
    many nodes as the role appears in ``roles`` (``role_nodes``); AKS's own add-ons run on a
    separate system node.

    Parameters
    ----------
    roles:
        One node per entry, as :attr:`~cnibench.backends.base.ClusterSpec.roles`.
    node_count:
        Total nodes the caller expects, checked against ``roles`` when given.

    Raises
    ------
    cnibench.errors.ConfigError
        No role, or ``node_count`` is not the number of roles.
    """
    count = len(roles) if node_count is None else node_count
    if count < 1:
        raise ConfigError(f"AKS node count must be >= 1, got {count}")
    if count != len(roles):
        raise ConfigError(f"AKS node count {count} is not the {len(roles)} roles' nodes")
    role_nodes: dict[str, int] = {}
    for role in roles:
        role_nodes[role.value] = role_nodes.get(role.value, 0) + 1
    return {
        "name": name,
        "location": location,
        "role_nodes": role_nodes,
        "vm_size": vm_size,
        "kubernetes_version": kubernetes_version,
    }


class AksProvider:
    """AKS with bring-your-own CNI through ``terraform/aks`` (python-terraform).

    Credentials come only from the environment (``ARM_*``, read by azurerm itself); the
    kubeconfig comes from the sensitive output ``kube_config_raw`` and is written with mode 0600,
    never printed or logged. Terraform's output is not logged either (it can echo secrets).

    Parameters
    ----------
    location, vm_size, kubernetes_version:
        Azure region, node size (seed 000: Standard_A2_v2) and AKS version.
    state_dir:
        Terraform working copies and kubeconfigs per cluster.
    terraform:
        A ``python_terraform.Terraform``-like factory ``(working_dir) -> object``; tests pass a
        fake, since Azure cannot be reached here.
    environ:
        Environment to check for credentials.
    """

    name = "aks"

    def __init__(
        self,
        *,
        location: str = "westeurope",
        vm_size: str = "Standard_A2_v2",
        kubernetes_version: str = "1.33",
        state_dir: Path | None = None,
        terraform: Any = None,
        environ: Mapping[str, str] | None = None,
    ) -> None:
        cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
        self.location = location
        self.vm_size = vm_size
        self.kubernetes_version = kubernetes_version
        self.state_dir = state_dir or cache / "cnibench" / "aks"
        self._terraform = terraform
        self._environ = os.environ if environ is None else environ

    def _client(self, workdir: Path) -> Any:
        if self._terraform is not None:
            return self._terraform(str(workdir))
        from python_terraform import Terraform

        command = terraform_command(self._environ)
        if command is None:
            raise ConfigError(
                "AKS needs terraform or tofu on PATH (CNIBENCH_TERRAFORM names another),"
                " and neither is there"
            )
        return Terraform(working_dir=str(workdir), terraform_bin_path=command)

    def ensure(self, spec: ClusterSpec, cni: CniDefinition) -> ProviderCluster:
        """``terraform init`` + ``apply`` (idempotent), then the kubeconfig from the output.

        Raises
        ------
        cnibench.errors.ConfigError
            An ``ARM_*`` credential variable is missing.
        cnibench.errors.ProvisioningError
            Terraform fails (its output is not included: it may contain secrets).
        """
        missing = [v for v in AKS_CREDENTIAL_VARIABLES if not self._environ.get(v)]
        if missing:
            raise ConfigError(
                f"AKS needs Azure credentials in the environment: {', '.join(missing)}"
            )
        name = f"cnibench-{cluster_hash(self.name, spec, {'vm': self.vm_size})}"
        workdir = self.state_dir / name
        if not workdir.exists():
            shutil.copytree(terraform_dir(), workdir)
        tf = self._client(workdir)
        variables = aks_variables(
            name,
            location=self.location,
            vm_size=self.vm_size,
            kubernetes_version=self.kubernetes_version,
            roles=spec.roles,
        )
        # Read by every later plan, apply and destroy in the working copy (``*.auto.tfvars.json``
        # is loaded without a flag): destroy, which gets no variables, needs them too.
        (workdir / AKS_VARIABLES_FILE).write_text(json.dumps(variables, indent=2) + "\n")
        code, _, _ = tf.init(capture_output=True)
        if code != 0:
            raise ProvisioningError(f"terraform init failed for {name} (exit {code})")
        code, _, _ = tf.apply(skip_plan=True, var=variables, capture_output=True)
        if code != 0:
            raise ProvisioningError(f"terraform apply failed for {name} (exit {code})")
        raw = tf.output("kube_config_raw")
        if not raw:
            raise ProvisioningError(f"terraform output kube_config_raw is empty for {name}")
        kubeconfig = workdir / "kubeconfig"
        kubeconfig.touch(mode=0o600)
        kubeconfig.write_text(str(raw))
        return ProviderCluster(name, kubeconfig, "", True)

    def delete(self, cluster: ProviderCluster) -> None:
        """``terraform destroy``, with the variables :meth:`ensure` left in the working copy."""
        workdir = self.state_dir / cluster.name
        tf = self._client(workdir)
        code, _, _ = tf.destroy(auto_approve=True, capture_output=True, force=None)
        if code != 0:
            raise ProvisioningError(f"terraform destroy failed for {cluster.name} (exit {code})")

    def forget(self, cluster: ProviderCluster) -> None:
        """AKS clusters hold no lease on this machine: nothing to release."""


@contextlib.contextmanager
def _lib_modules_lock(state_dir: Path) -> Iterator[None]:
    """Serialise making ``/lib/modules`` with removing it: a removal between another
    process's "it exists" and its ``kind create`` would leave dockerd to make it again,
    without the marker that says it is cnibench's."""
    state_dir.mkdir(parents=True, exist_ok=True)
    with (state_dir / "lib-modules.lock").open("a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def release_lib_modules(
    state_dir: Path | None = None,
    *,
    modules_dir: Path = LIB_MODULES,
    environ: Mapping[str, str] | None = None,
    exclude: Collection[int] = (),
) -> bool:
    """Remove ``/lib/modules`` if cnibench created it for kind (see
    :meth:`KindProvider._ensure_lib_modules`) and it is still empty; whether it was removed.
    Call it once no cnibench kind cluster is left. It stays while another live process holds
    a kind cluster or an engine (:mod:`cnibench.leases`): a session in another shell, or a
    kind test tier between its clusters, may be about to make one that needs it. The holders
    in ``exclude`` do not count (those a ``cnibench clean`` runs for).

    ``state_dir`` defaults to :func:`kind_state_dir` of ``environ`` (``os.environ``)."""
    state = state_dir or kind_state_dir(environ)
    marker = lib_modules_marker(state)
    if not marker.is_file():
        return False
    with _lib_modules_lock(state):
        if live_kind_holders(KIND_CLUSTER_LEASE, exclude=exclude) or live_kind_holders(
            ENGINE_LEASE, exclude=exclude
        ):
            return False
        if not marker.is_file():
            return False
        try:
            modules_dir.rmdir()
        except FileNotFoundError:
            pass
        except OSError:
            return False  # no longer empty: something else uses it now
        marker.unlink()
    return True


def add_offline_tools_to_path() -> None:
    """Append the offline build's tool links (``kind``, ``kubectl``) to ``$PATH`` when they
    exist, after everything already there, so installed tools keep precedence."""
    tools = str(offline_bin_dir())
    path = os.environ.get("PATH", "")
    if Path(tools).is_dir() and tools not in path.split(os.pathsep):
        os.environ["PATH"] = f"{path}{os.pathsep}{tools}" if path else tools


def _run(argv: Sequence[str]) -> str:
    if shutil.which(argv[0]) is None:
        raise ProvisioningError(f"{argv[0]} is not installed")
    try:
        done = subprocess.run(list(argv), capture_output=True, text=True, check=False, timeout=900)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise ProvisioningError(f"{' '.join(argv[:3])} failed: {exc}") from exc
    if done.returncode != 0:
        tail = done.stderr.strip().splitlines()[-1:] or [""]
        raise ProvisioningError(f"{' '.join(argv[:3])} failed: {tail[0]}")
    return done.stdout
