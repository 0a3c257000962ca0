"""A Kubernetes cluster behind the :class:`~cnibench.backends.base.Cluster` Protocol.

:class:`KubeCluster` works through the official kubernetes client only: objects come from
:mod:`cnibench.backends.kube.render` and go in by server-side apply
(:class:`~cnibench.backends.kube.api.Applier`); commands run through the exec subresource
(:func:`kubernetes.stream.stream`); Prometheus is reached through the port-forward
subresource. Everything lives in one namespace labelled ``cnibench.io/session=<id>``, plus
cluster-scoped objects carrying the same label, so :meth:`KubeCluster.teardown` and
``cnibench clean`` find all of it.
"""

from __future__ import annotations

import contextlib
import functools
import json
import socket
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from cnibench.backends.base import (
    Capability,
    ClusterSpec,
    CommandResult,
    EncryptionStatus,
    Endpoint,
    ExternalHost,
    Node,
    NodeRole,
    ResourceUsage,
    Service,
    ServiceProxy,
    WorkloadSpec,
)
from cnibench.backends.kube import capture, render
from cnibench.backends.kube.api import Applier, api_error_message, websocket_core_api
from cnibench.backends.kube.cni import CniDefinition
from cnibench.backends.kube.cnis import DRIVERS, CniDriver
from cnibench.backends.kube.cnis.base import ObjectScope
from cnibench.backends.kube.external import EXTERNAL_ADDRESS_ENV
from cnibench.backends.kube.images import Images
from cnibench.backends.kube.node_usage import AgentPod, KindNodeUsage, agent_changes, agent_pods
from cnibench.backends.kube.pykube_bridge import pykube_client
from cnibench.backends.kube.services import KubeServices, proxy_hint, service_proxy
from cnibench.errors import (
    AgentRestartedError,
    CnibenchError,
    ConfigError,
    MetricsError,
    ProvisioningError,
    ToolError,
    UnsupportedError,
)
from cnibench.policy import PolicyEngine, PolicySpec, PriorityCase
from cnibench.records import Environment
from cnibench.results import environment_fingerprint
from cnibench.waiting import wait_for

__all__ = [
    "STUCK_REASONS",
    "KubeCluster",
    "KubePod",
    "PodPortForward",
    "Timeouts",
    "exec_returncode",
    "pod_problem",
]

_POLICY_NAME = "cnibench-policy"
_L7_NAME = "cnibench-l7"
_SPLIT_GATEWAY = "cnibench-split"
_ERROR_CHANNEL = 3
"""Channel of the exec protocol that carries the final ``v1.Status``."""


@dataclass(frozen=True)
class Timeouts:
    """How long cluster operations may take, in seconds.

    Attributes
    ----------
    pod_ready:
        A placed pod becoming Ready (image pulls included).
    delete:
        A pod or namespace disappearing after deletion.
    monitoring:
        Prometheus becoming ready.
    """

    pod_ready: float = 300.0
    delete: float = 120.0
    monitoring: float = 300.0


STUCK_REASONS = frozenset(
    {"ErrImageNeverPull", "InvalidImageName", "CreateContainerConfigError", "CrashLoopBackOff"}
)
"""Container waiting reasons that do not clear by waiting: a pod showing one fails at once."""


def pod_problem(pod: Any) -> str:
    """Why a pod is not Ready, from its status: each container's waiting or terminated reason
    (init containers first) and an unschedulable pod's scheduler message; empty if none."""
    status = pod.status
    parts = []
    for scheduled in status.conditions or []:
        if scheduled.type == "PodScheduled" and scheduled.status == "False":
            parts.append(f"not scheduled: {scheduled.reason or ''} {scheduled.message or ''}")
    for container in [*(status.init_container_statuses or []), *(status.container_statuses or [])]:
        state = container.state
        if state is None:
            continue
        if state.waiting is not None and state.waiting.reason not in (None, "PodInitializing"):
            detail = f" ({state.waiting.message})" if state.waiting.message else ""
            parts.append(f"container {container.name}: {state.waiting.reason}{detail}")
        elif state.terminated is not None and state.terminated.exit_code:
            parts.append(
                f"container {container.name}: {state.terminated.reason or 'exited'}"
                f" with exit code {state.terminated.exit_code}"
            )
    return "; ".join(" ".join(part.split()) for part in parts)


def exec_returncode(status: str, *, tool: str, pod: str) -> int:
    """Exit status of an exec session from the ``v1.Status`` on its error channel.

    The API server ends every exec stream with a Status: ``Success`` (exit 0), ``Failure``
    with reason ``NonZeroExitCode`` and the code in ``details.causes[reason=ExitCode]``, or
    another ``Failure`` when the command never ran (e.g. the kubelet is unreachable).

    Raises
    ------
    cnibench.errors.ToolError
        The command never ran, or the status cannot be read; one line naming ``tool`` and
        ``pod`` and the server's reason.
    """
    try:
        document = json.loads(status) if status.strip() else {}
    except json.JSONDecodeError:
        document = {}
    if not isinstance(document, dict) or not document.get("status"):
        raise ToolError(f"exec of {tool} in pod {pod} ended without an exit status", tool=tool)
    if document["status"] == "Success":
        return 0
    if document.get("reason") == "NonZeroExitCode":
        for cause in (document.get("details") or {}).get("causes") or []:
            if cause.get("reason") == "ExitCode":
                with contextlib.suppress(TypeError, ValueError):
                    return int(cause.get("message"))
    message = " ".join(str(document.get("message") or "unknown failure").split())
    raise ToolError(f"exec of {tool} in pod {pod} failed: {message}", tool=tool)


class KubePod:
    """A pod placed by :meth:`KubeCluster.place` (an :class:`~cnibench.backends.base.Endpoint`).

    Parameters
    ----------
    name, namespace:
        The pod.
    node:
        The node it runs on, as verified from ``spec.nodeName``.
    ip:
        ``status.podIP``.
    api_client:
        Client used for exec.
    """

    def __init__(self, name: str, namespace: str, node: Node, ip: str, api_client: Any) -> None:
        self._name = name
        self.namespace = namespace
        self._node = node
        self._ip = ip
        self._api_client = api_client

    @property
    def name(self) -> str:
        """Pod name."""
        return self._name

    @property
    def node(self) -> Node:
        """Node the pod runs on."""
        return self._node

    @property
    def ip(self) -> str:
        """Pod IP."""
        return self._ip

    def run(self, argv: Sequence[str], *, timeout: float) -> CommandResult:
        """Run ``argv`` in the pod's tools container through the exec subresource.

        Raises
        ------
        cnibench.errors.ToolError
            When exec cannot start, or the command does not finish within ``timeout`` seconds
            (the stream is then closed, which ends the command's session).
        """
        from kubernetes.client.exceptions import ApiException
        from kubernetes.stream import stream

        tool = argv[0] if argv else ""
        started = time.monotonic()
        try:
            session = stream(
                websocket_core_api(self._api_client).connect_get_namespaced_pod_exec,
                self._name,
                self.namespace,
                container=render.TOOLS_CONTAINER,
                command=list(argv),
                stdin=False,
                stdout=True,
                stderr=True,
                tty=False,
                _preload_content=False,
            )
        except (ApiException, OSError) as exc:
            raise ToolError(
                f"exec of {tool} in pod {self._name} failed: {api_error_message(exc)}", tool=tool
            ) from exc
        stdout: list[str] = []
        stderr: list[str] = []
        try:
            while session.is_open():
                remaining = timeout - (time.monotonic() - started)
                if remaining <= 0:
                    raise ToolError(
                        f"{tool} in pod {self._name} did not finish within {timeout:g} s",
                        tool=tool,
                        output="".join(stdout) + "".join(stderr),
                    )
                try:
                    session.update(timeout=min(1.0, remaining))
                except Exception as exc:  # websocket and client errors have no common base
                    raise ToolError(
                        f"exec of {tool} in pod {self._name} broke off: {api_error_message(exc)}",
                        tool=tool,
                        output="".join(stdout) + "".join(stderr),
                    ) from exc
                if session.peek_stdout():
                    stdout.append(session.read_stdout())
                if session.peek_stderr():
                    stderr.append(session.read_stderr())
            returncode = exec_returncode(
                str(session.read_channel(_ERROR_CHANNEL) or ""), tool=tool, pod=self._name
            )
        finally:
            session.close()
        return CommandResult(
            argv=tuple(argv),
            returncode=returncode,
            stdout="".join(stdout),
            stderr="".join(stderr),
            duration=time.monotonic() - started,
        )


_EXTERNAL_HINT = f"set {EXTERNAL_ADDRESS_ENV} to an address of this host its pods can reach"
_PROXY_CAPABILITIES = frozenset(Capability.service_proxy(proxy) for proxy in ServiceProxy)
"""One per proxy; a cluster offers the one it runs (see :func:`service_proxy`)."""

_CAPTURE_SETTLE = 0.3
"""Seconds for the last frames to reach tcpdump's file after the sender finished."""


class PodPortForward:
    """A loopback listener whose connections are forwarded to a pod port (port-forward
    subresource); one websocket per accepted connection.

    Parameters
    ----------
    api_client:
        Client for the port-forward calls.
    namespace, pod, port:
        Where connections go.
    """

    def __init__(self, api_client: Any, namespace: str, pod: str, port: int) -> None:
        self._api_client = api_client
        self._target = (namespace, pod, port)
        self._listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._listener.bind(("127.0.0.1", 0))
        self._listener.listen(16)
        self._stopped = threading.Event()
        self._thread = threading.Thread(target=self._accept, name="cnibench-port-forward")
        self._thread.daemon = True
        self._thread.start()

    @property
    def local_port(self) -> int:
        """Port on 127.0.0.1 to connect to."""
        port: int = self._listener.getsockname()[1]
        return port

    def _accept(self) -> None:
        while not self._stopped.is_set():
            try:
                conn, _ = self._listener.accept()
            except OSError:
                return
            threading.Thread(target=self._bridge, args=(conn,), daemon=True).start()

    def _open(self) -> tuple[Any, socket.socket]:
        """One port-forward websocket and its socket for the pod port (raises what the
        client raises)."""
        from kubernetes.stream import portforward

        namespace, pod, port = self._target
        forward = portforward(
            websocket_core_api(self._api_client).connect_get_namespaced_pod_portforward,
            pod,
            namespace,
            ports=str(port),
        )
        return forward, forward.socket(port)

    def check(self) -> None:
        """Open and close one forward, so a cluster that cannot port-forward fails here, with
        the API server's reason, rather than as a client timing out on the local port.

        Raises
        ------
        cnibench.errors.MetricsError
            The API server refused or could not reach the pod's kubelet.
        """
        namespace, pod, port = self._target
        try:
            forward, remote = self._open()
        except Exception as exc:  # the client raises assorted types
            reason = (api_error_message(exc).splitlines() or [type(exc).__name__])[0]
            raise MetricsError(
                f"port-forward to pod {namespace}/{pod}:{port} failed: {reason}"
            ) from exc
        with contextlib.suppress(OSError):
            remote.close()
        forward.close()

    def _bridge(self, conn: socket.socket) -> None:
        try:
            forward, remote = self._open()
        except Exception:  # the client raises assorted types; the connection just closes
            conn.close()
            return

        def pump(src: socket.socket, dst: socket.socket) -> None:
            try:
                while data := src.recv(65536):
                    dst.sendall(data)
            except OSError:
                pass
            finally:
                for sock in (src, dst):
                    with contextlib.suppress(OSError):
                        sock.shutdown(socket.SHUT_RDWR)

        back = threading.Thread(target=pump, args=(remote, conn), daemon=True)
        back.start()
        pump(conn, remote)
        back.join(timeout=5)
        conn.close()
        forward.close()

    def close(self) -> None:
        """Stop accepting connections."""
        self._stopped.set()
        self._listener.close()


def _http_status(url: str) -> int:
    """HTTP status of one GET of ``url`` from this host (where the split load comes from), or 0
    when nothing answers in 2 s."""
    import urllib.error
    import urllib.request

    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    try:
        with opener.open(url, timeout=2.0) as answer:
            return int(answer.status)
    except urllib.error.HTTPError as exc:
        return int(exc.code)
    except (OSError, ValueError):
        return 0


def route_problem(route: Mapping[str, Any], weights: Mapping[str, int]) -> str:
    """What keeps an HTTPRoute (as the server stores it) from splitting as asked: backend
    weights other than ``weights`` (Service name -> weight), or a parent Gateway whose
    implementation has not set ``Accepted`` and ``ResolvedRefs`` to ``True``; ``""`` if
    nothing does.

    >>> route = {"spec": {"rules": [{"backendRefs": [{"name": "a", "weight": 3}]}]},
    ...          "status": {"parents": [{"conditions": [
    ...              {"type": "Accepted", "status": "True"},
    ...              {"type": "ResolvedRefs", "status": "True"}]}]}}
    >>> route_problem(route, {"a": 3})
    ''
    >>> route_problem(route, {"a": 2})
    "the route's weights are {'a': 3}, not {'a': 2}"
    """
    stored = {
        str(ref["name"]): int(ref.get("weight", 1))
        for rule in route.get("spec", {}).get("rules", [])
        for ref in rule.get("backendRefs", [])
    }
    if stored != dict(weights):
        return f"the route's weights are {stored}, not {dict(weights)}"
    parents = (route.get("status") or {}).get("parents") or []
    if not parents:
        return "no Gateway implementation has taken the route yet"
    for parent in parents:
        conditions = {c.get("type"): c for c in parent.get("conditions") or []}
        for kind in ("Accepted", "ResolvedRefs"):
            condition = conditions.get(kind, {})
            if condition.get("status") != "True":
                reason = condition.get("message") or condition.get("reason") or "not reported"
                return f"route {kind} is not True: {reason}"
    return ""


class KubeCluster:
    """A provisioned Kubernetes cluster with a CNI installed (a
    :class:`~cnibench.backends.base.Cluster`).

    Parameters
    ----------
    api_client:
        :class:`kubernetes.client.ApiClient` for the cluster.
    spec:
        The spec it was provisioned for.
    cni:
        The installed CNI's definition.
    provider:
        ``"kind"``, ``"aks"`` or ``"existing"``.
    session:
        Session id; names the namespace (``cnibench-<session>``) and labels everything.
    images:
        Pinned images.
    tolerations:
        Added to every pod (e.g. for tainted benchmark nodes).
    external:
        The external host, when the provider has one.
    timeouts:
        Operation timeouts.
    egress_ip_range:
        ``(first, last)`` IPv4 egress IPs on the egress-gw node, for a CNI whose driver
        needs them (:attr:`~cnibench.backends.kube.cnis.base.CniDriver.egress_needs_ip_range`);
        ``None``: none known, and such a CNI's egress gateway is unsupported.
    release:
        Called by :meth:`teardown` instead of deleting the namespace: it deletes the whole
        cluster (kind/aks clusters not kept). ``None`` keeps the cluster.
    node_usage:
        Reads each node's and the CNI agent's own cgroups (kind on this machine); ``None``:
        :meth:`resource_usage` is empty.
    """

    def __init__(
        self,
        api_client: Any,
        spec: ClusterSpec,
        cni: CniDefinition,
        *,
        provider: str,
        session: str,
        images: Images | None = None,
        tolerations: Sequence[Mapping[str, Any]] = (),
        external: ExternalHost | None = None,
        timeouts: Timeouts | None = None,
        egress_ip_range: tuple[str, str] | None = None,
        release: Callable[[], None] | None = None,
        node_usage: KindNodeUsage | None = None,
    ) -> None:
        from kubernetes import client

        self._api_client = api_client
        self._pykube: Any = None
        # The client's models are Optional everywhere; the server fills what we read.
        self._core: Any = client.CoreV1Api(api_client)
        self._applier = Applier(api_client)
        self._spec = spec
        self._cni = cni
        self._provider = provider
        self.session = session
        self.namespace = f"cnibench-{session}"
        self.images = images or Images()
        self.tolerations = list(tolerations)
        self._external = external
        self.timeouts = timeouts or Timeouts()
        self.egress_ip_range = egress_ip_range
        self._release = release
        self._node_usage = node_usage
        self._agents_seen: dict[str, tuple[str, int]] = {}
        self._nodes: list[Node] = []
        self._cluster_objects: list[dict[str, Any]] = []
        self._policy_objects: list[dict[str, Any]] = []
        self._priority_objects: list[dict[str, Any]] = []
        self._l7_objects: list[dict[str, Any]] = []
        self._split_objects: list[dict[str, Any]] = []
        self._egress_objects: list[dict[str, Any]] = []
        self._egress_pods: list[str] = []
        self._forward: PodPortForward | None = None
        self._capture_pods: dict[NodeRole, KubePod] = {}
        self._capture_seq = 0
        self._services: KubeServices | None = None
        self._torn_down = False

    # -- identity -------------------------------------------------------------------------
    @property
    def _driver(self) -> CniDriver:
        driver = DRIVERS.get(self._cni.name)
        if driver is None:
            raise ConfigError(f"no CNI driver is registered for {self._cni.name!r}")
        return driver

    @property
    def _scope(self) -> ObjectScope:
        return ObjectScope(session=self.session, namespace=self.namespace)

    @property
    def backend(self) -> str:
        """``"kube"``."""
        return "kube"

    @property
    def provider(self) -> str:
        """Provider that created the cluster."""
        return self._provider

    @property
    def spec(self) -> ClusterSpec:
        """The spec this cluster was provisioned for."""
        return self._spec

    @property
    def cni_version(self) -> str:
        """Pinned version of the installed CNI."""
        return self._cni.version

    @property
    def capabilities(self) -> frozenset[Capability]:
        """What the CNI declares (see :mod:`cnibench.backends.kube.cni`), plus an underlay
        capture on every CNI (a host-network pod with tcpdump)."""
        extra = {Capability.UNDERLAY_CAPTURE}
        if self._external is not None:
            extra.add(Capability.EXTERNAL_HOST)
        if self._nodes:  # started: the cluster can be asked which proxy it runs
            extra.add(Capability.SERVICE_PROXY)
            proxy = self._service_objects().proxy
            if proxy:
                extra.add(Capability.service_proxy(proxy))
        return self._cni.capabilities | extra

    def capability_hint(self, capability: Capability) -> str:
        """For the external host: which variable names it; else what the CNI's definition
        says about lacking ``capability`` (flannel: no NetworkPolicy), or ``""``."""
        if capability is Capability.EXTERNAL_HOST:
            return _EXTERNAL_HINT
        if capability in _PROXY_CAPABILITIES:
            return proxy_hint(self._service_objects().proxy)
        return self._cni.capability_hints.get(capability, "")

    @property
    def pykube(self) -> Any:
        """A pykube-ng ``HTTPClient`` for this cluster, as the same user (for users of
        pytest-kind-style APIs; cnibench itself uses the official client)."""
        if self._pykube is None:
            self._pykube = pykube_client(self._api_client)
        return self._pykube

    @property
    def metrics_device_regex(self) -> str:
        """Node uplinks as named by kind (``eth0``) and Azure VMs (``eth0``/``ens*``)."""
        return "^(eth|ens|enp).+$"

    def resource_usage(self, *, reset_peak: bool = False) -> dict[str, ResourceUsage]:
        """Each role's nodes and the CNI agent's pods, as their own cgroups count them (kind
        on this machine: ``cpu@<role>``, ``cpu@<agent>``); empty elsewhere, where per-node CPU
        is node-exporter's (host-wide on kind, the VM's own on AKS).

        A reading with ``reset_peak`` starts a run; the next reading without it ends the run
        and fails it when an agent pod was replaced or restarted in between: the run did not
        measure the datapath as it was set up.

        Raises
        ------
        cnibench.errors.AgentRestartedError
            The CNI agent restarted since the run's first reading (names the pod).
        """
        if self._node_usage is None:
            return {}
        agents = [a for a in (self._cni.agent, self._cni.gateway_agent) if a is not None]
        pods = {agent.name: agent_pods(self._core, agent) for agent in agents}
        seen = {f"{n}/{p.name}": (p.uid, p.restarts) for n, found in pods.items() for p in found}
        if not reset_peak and self._agents_seen:
            changed = agent_changes(self._agents_seen, seen)
            if changed:
                raise AgentRestartedError(f"the CNI agent restarted during the run: {changed}")
        self._agents_seen = seen
        roles = {node.name: node.role.value for node in self._nodes}
        return self._node_usage.usage(
            roles,
            {n: [AgentPod(p.node, p.name, p.uid) for p in found] for n, found in pods.items()},
        )

    # -- set-up ---------------------------------------------------------------------------
    def start(self) -> None:
        """Discover the role-labelled nodes and create the session namespace.

        Raises
        ------
        cnibench.errors.ProvisioningError
            A role of the spec has no node, or the namespace cannot be created.
        """
        self._nodes = self._discover_nodes()
        self._applier.apply(render.namespace(self.namespace, session=self.session))
        self._wait_default_service_account()

    def _discover_nodes(self) -> list[Node]:
        from kubernetes.client.exceptions import ApiException

        try:
            listed = self._core.list_node(label_selector=render.ROLE_LABEL).items
        except ApiException as exc:
            raise ProvisioningError(f"listing nodes failed: {api_error_message(exc)}") from exc
        by_role: dict[str, list[Any]] = {}
        for item in sorted(listed, key=lambda n: n.metadata.name):
            by_role.setdefault(item.metadata.labels[render.ROLE_LABEL], []).append(item)
        nodes: list[Node] = []
        for role in self._spec.roles:
            candidates = by_role.get(role.value, [])
            if not candidates:
                raise ProvisioningError(
                    f"no node labelled {render.ROLE_LABEL}={role.value}: label one"
                    f" (kubectl label node NAME {render.ROLE_LABEL}={role.value})"
                )
            item = candidates.pop(0)
            nodes.append(Node(item.metadata.name, role, _internal_ip(item)))
        return nodes

    def _wait_default_service_account(self) -> None:
        from kubernetes.client.exceptions import ApiException

        def created() -> bool:
            try:
                self._core.read_namespaced_service_account("default", self.namespace)
            except ApiException as exc:
                if exc.status != 404:
                    raise ProvisioningError(
                        f"namespace {self.namespace} has no default service account:"
                        f" {api_error_message(exc)}"
                    ) from exc
                return False
            return True

        wait_for(
            created,
            timeout=self.timeouts.delete,
            what=f"namespace {self.namespace} to get its default service account",
            interval=0.2,
            error=ProvisioningError,
        )

    @property
    def nodes(self) -> Sequence[Node]:
        """Nodes in the order of ``spec.roles``."""
        return tuple(self._nodes)

    def node(self, role: NodeRole) -> Node:
        """The first node with ``role``."""
        for candidate in self._nodes:
            if candidate.role is role:
                return candidate
        raise ProvisioningError(f"cluster has no {role.value} node")

    # -- pods -----------------------------------------------------------------------------
    def place(
        self, name: str, *, role: NodeRole, workloads: Sequence[WorkloadSpec] = ()
    ) -> KubePod:
        """Create pod ``name`` on the ``role`` node, wait until Ready, verify where it runs.

        Raises
        ------
        cnibench.errors.ProvisioningError
            The pod is rejected, fails, is not Ready within ``timeouts.pod_ready`` seconds, or
            runs on a node without the ``role`` label.
        """
        manifest = render.pod(
            name,
            namespace=self.namespace,
            session=self.session,
            role=role,
            workloads=workloads,
            images=self.images,
            tolerations=self.tolerations,
        )
        return self._start_pod(manifest, role)

    def _start_pod(self, manifest: Mapping[str, Any], role: NodeRole) -> KubePod:
        """Apply a pod manifest, wait until Ready, and check it runs on a ``role`` node."""
        name = str(manifest["metadata"]["name"])
        self._applier.apply(manifest)
        try:
            ready = self._wait_pod_ready(name)
        except ProvisioningError:
            # The pod that never came up goes, so the next condition can place its namesake.
            with contextlib.suppress(CnibenchError):
                self._delete_pod(name)
            raise
        node_name = ready.spec.node_name
        node = next((n for n in self._nodes if n.name == node_name), None)
        if node is None or node.role is not role:
            labels = self._core.read_node(node_name).metadata.labels or {}
            actual = labels.get(render.ROLE_LABEL, "none")
            if actual != role.value:
                raise ProvisioningError(
                    f"pod {name} runs on {node_name} whose role is {actual}, not {role.value}"
                )
            node = Node(node_name, role, _internal_ip(self._core.read_node(node_name)))
        return KubePod(name, self.namespace, node, ready.status.pod_ip, self._api_client)

    def _wait_pod_ready(self, name: str) -> Any:
        """The pod once Ready with an IP; a pod that cannot get there raises with the reason
        the kubelet or scheduler gives (at once when the reason cannot clear by itself)."""
        seen = "not read yet"

        def ready() -> Any:
            nonlocal seen
            current = self._core.read_namespaced_pod(name, self.namespace)
            phase = current.status.phase
            problem = pod_problem(current)
            if phase in ("Failed", "Succeeded"):
                raise ProvisioningError(
                    f"pod {name} ended ({phase}) before becoming Ready: {problem or 'no reason'}"
                )
            conditions = {c.type: c.status for c in (current.status.conditions or [])}
            if conditions.get("Ready") == "True" and current.status.pod_ip:
                return current
            if any(reason in problem for reason in STUCK_REASONS):
                raise ProvisioningError(f"pod {name} cannot start: {problem}")
            seen = f"phase {phase}{': ' + problem if problem else ''}"
            return None

        return wait_for(
            ready,
            timeout=self.timeouts.pod_ready,
            what=f"pod {name} to be Ready",
            interval=0.25,
            last_seen=lambda: seen,
            error=ProvisioningError,
        )

    def remove(self, endpoint: Endpoint) -> None:
        """Delete the pod and wait until it is gone."""
        self._delete_pod(endpoint.name)

    def _delete_pod(self, name: str) -> None:
        from kubernetes.client.exceptions import ApiException

        try:
            self._core.delete_namespaced_pod(name, self.namespace, grace_period_seconds=0)
        except ApiException as exc:
            if exc.status == 404:
                return
            raise ProvisioningError(
                f"deleting pod {name} failed: {api_error_message(exc)}"
            ) from exc
        self._wait_gone(lambda: self._core.read_namespaced_pod(name, self.namespace), f"pod {name}")

    def _wait_gone(self, read: Any, what: str) -> None:
        from kubernetes.client.exceptions import ApiException

        def gone() -> bool:
            try:
                read()
            except ApiException as exc:
                if exc.status == 404:
                    return True
                raise ProvisioningError(f"reading {what} failed: {api_error_message(exc)}") from exc
            return False

        wait_for(
            gone,
            timeout=self.timeouts.delete,
            what=f"{what} to be gone after its deletion",
            interval=0.25,
            last_seen=lambda: "it still exists",
            error=ProvisioningError,
        )

    # -- features -------------------------------------------------------------------------
    @property
    def external(self) -> ExternalHost:
        """The external host (only when the provider configured one)."""
        if self._external is None:
            raise UnsupportedError(
                f"the {self._provider} cluster has no external host: {_EXTERNAL_HINT}"
            )
        return self._external

    def egress_manifests(self, clients: Sequence[str], *, destination: str) -> list[dict[str, Any]]:
        """The CNI driver's egress objects sending ``clients`` to ``destination`` via the
        gateway (:meth:`~cnibench.backends.kube.cnis.base.CniDriver.egress_objects`). The
        last object is always the one whose ``cnibench.io/egress`` label value the clients
        must carry.

        Raises
        ------
        cnibench.errors.UnsupportedError
            The CNI has no egress gateway (as configured), or lacks what it needs (an egress
            IP range).
        """
        if Capability.EGRESS_GATEWAY not in self._cni.capabilities:
            raise UnsupportedError(f"{self._cni.name} has no egress gateway")
        return self._driver.egress_objects(
            self._scope,
            clients=clients,
            destination=destination,
            egress_ip_range=self.egress_ip_range,
        )

    def expected_egress_source(self) -> str:
        """Source address the external host sees with the gateway on, as the driver says
        (e.g. an egress IP of :attr:`egress_ip_range`, or the egress-gw node's address)."""
        return self._driver.egress_source(
            gateway_ip=self.node(NodeRole.EGRESS_GW).ip, egress_ip_range=self.egress_ip_range
        )

    def enable_egress_gateway(self, clients: Sequence[Endpoint], *, destination: str) -> str:
        """Label ``clients`` and apply the CNI's egress objects (:meth:`egress_manifests`).

        Returns
        -------
        str
            :meth:`expected_egress_source`.
        """
        objects = self.egress_manifests([c.name for c in clients], destination=destination)
        tag = {"cnibench.io/egress": objects[-1]["metadata"]["name"]}
        for endpoint in clients:
            self._core.patch_namespaced_pod(
                endpoint.name, self.namespace, {"metadata": {"labels": tag}}
            )
            self._egress_pods.append(endpoint.name)
        self._applier.apply_all(objects)
        self._egress_objects.extend(objects)
        return self.expected_egress_source()

    def disable_egress_gateway(self) -> None:
        """Delete the egress objects and unlabel the client pods. Safe to repeat."""
        from kubernetes.client.exceptions import ApiException

        # Last applied, first deleted: a CNI may refuse to free an address pool still in use.
        for manifest in reversed(self._egress_objects):
            self._applier.delete(manifest)
        self._egress_objects.clear()
        for name in self._egress_pods:
            try:
                self._core.patch_namespaced_pod(
                    name, self.namespace, {"metadata": {"labels": {"cnibench.io/egress": None}}}
                )
            except ApiException as exc:
                if exc.status != 404:
                    raise ProvisioningError(
                        f"unlabelling pod {name} failed: {api_error_message(exc)}"
                    ) from exc
        self._egress_pods.clear()

    def encryption_status(self) -> EncryptionStatus:
        """The CNI's own account of its encryption, as its driver reads it (Node annotations
        or the agents' status; :meth:`node_annotations`, :meth:`exec_in_agents`).

        Raises
        ------
        cnibench.errors.UnsupportedError
            For CNIs that cannot encrypt.
        """
        return self._driver.encryption_status(self)

    def node_annotations(self) -> list[tuple[str, Mapping[str, str]]]:
        """``(node name, annotations)`` of every node of the cluster."""
        return [
            (n.metadata.name, dict(n.metadata.annotations or {}))
            for n in self._core.list_node().items
        ]

    def exec_in_agents(
        self, namespace: str, selector: str, container: str, argv: Sequence[str]
    ) -> list[tuple[str, str]]:
        """``(node name, output)`` of ``argv`` in ``container`` of every pod matching
        ``selector`` in ``namespace`` (a CNI's agents), 30 s each.

        Raises
        ------
        cnibench.errors.ToolError
            A command fails.
        """
        agents = self._core.list_namespaced_pod(namespace, label_selector=selector)
        outputs: list[tuple[str, str]] = []
        for agent in agents.items:
            pod = KubePod(
                agent.metadata.name,
                namespace,
                Node(agent.spec.node_name, NodeRole.CLIENT, ""),
                agent.status.pod_ip or "",
                self._api_client,
            )
            outputs.append((agent.spec.node_name, _exec_in(pod, container, list(argv), timeout=30)))
        return outputs

    def capture_underlay(self, marker: bytes, send: Sequence[str], *, source: Endpoint) -> bool:
        """Capture on the uplink of ``source``'s node while ``send`` runs in ``source``; look
        for ``marker`` (see :mod:`cnibench.backends.kube.capture`).

        A host-network capture pod is placed on that node on first use; the capture runs in
        the background there, bounded by :data:`~cnibench.backends.kube.capture.CAPTURE_LIMIT`
        seconds, and is stopped by its PID.

        Raises
        ------
        cnibench.errors.ToolError
            The capture cannot start or leaves no file, or ``send`` fails (then nothing can be
            concluded).
        cnibench.errors.ProvisioningError
            The capture pod cannot be placed.
        """
        if not isinstance(source, KubePod):
            raise ConfigError(f"{source.name} is not a pod of this cluster")
        capturer = self._capture_pod(source.node.role)
        listed = capturer.run(["ip", "-o", "-4", "addr", "show"], timeout=20)
        interface = capture.uplink_interface(listed.stdout, source.node.ip)
        self._capture_seq += 1
        pcap, log = capture.capture_files(self.session, self._capture_seq)
        started = capturer.run(
            ["sh", "-c", capture.start_capture_script(interface, pcap, log)], timeout=20
        )
        pid = capture.started_pid(started.stdout)
        try:
            wait_for(
                lambda: capture.capture_started(capturer.run(["cat", log], timeout=10).stdout),
                timeout=15,
                what=f"the underlay capture on {interface} to start",
                interval=0.2,
                error=functools.partial(ToolError, tool="tcpdump"),
            )
            result = source.run(send, timeout=60)
            time.sleep(_CAPTURE_SETTLE)
        finally:
            capturer.run(["sh", "-c", capture.stop_capture_script(pid)], timeout=20)
        found = capturer.run(
            ["sh", "-c", capture.find_marker_script(marker, pcap, log)], timeout=30
        )
        answer = found.stdout.strip()
        if found.returncode != 0 or answer not in ("seen", "unseen"):
            raise ToolError(
                f"underlay capture on {source.node.name} left no result: {answer[:300]}",
                tool="tcpdump",
            )
        if result.returncode != 0:
            raise ToolError(
                f"capture_underlay: {send[0]} in pod {source.name} exited {result.returncode}:"
                f" {result.stderr.strip()[:300]}",
                tool=send[0],
                output=result.stdout + result.stderr,
            )
        return answer == "seen"

    def _capture_pod(self, role: NodeRole) -> KubePod:
        """The capture pod on the ``role`` node, placed and waited for on first use."""
        known = self._capture_pods.get(role)
        if known is not None:
            return known
        manifest = render.capture_pod(
            f"capture-{role.value}",
            namespace=self.namespace,
            session=self.session,
            role=role,
            images=self.images,
            tolerations=self.tolerations,
        )
        pod = self._start_pod(manifest, role)
        self._capture_pods[role] = pod
        return pod

    def apply_policy(self, spec: PolicySpec, *, engine: PolicyEngine) -> None:
        """Apply a NetworkPolicy rendered from ``spec``; ``engine`` is ignored (the CNI has one
        datapath) and recorded by the caller."""
        if Capability.NETWORK_POLICY not in self.capabilities:
            raise UnsupportedError(f"{self._cni.name} does not enforce NetworkPolicy")
        self.remove_policy()
        manifest = render.network_policy(
            spec, name=_POLICY_NAME, namespace=self.namespace, session=self.session
        )
        self._applier.apply(manifest)
        self._policy_objects.append(manifest)

    def remove_policy(self) -> None:
        """Delete the NetworkPolicy. Safe to repeat."""
        for manifest in self._policy_objects:
            self._applier.delete(manifest)
        self._policy_objects.clear()

    def priority_case_manifests(self, case: PriorityCase, spec: PolicySpec) -> list[dict[str, Any]]:
        """The objects :meth:`apply_priority_case` applies for ``case``: a deny-all
        NetworkPolicy when ``case.kubernetes_deny``, then the driver's CNI policies, one per
        layer (:meth:`~cnibench.backends.kube.cnis.base.CniDriver.priority_objects`).

        Raises
        ------
        cnibench.errors.UnsupportedError
            No NetworkPolicy enforcement; CNI layers on a CNI without a policy API of its own;
            a tiered or ``pass`` case without :attr:`Capability.POLICY_TIERS`; or a case the
            CNI's policy API cannot express.
        """
        cni = self._cni.name
        if Capability.NETWORK_POLICY not in self.capabilities:
            raise UnsupportedError(f"{cni} does not enforce NetworkPolicy")
        if case.needs_tiers and Capability.POLICY_TIERS not in self.capabilities:
            raise UnsupportedError(f"{cni} has no policy tiers: priority case {case.name}")
        objects: list[dict[str, Any]] = []
        if case.kubernetes_deny:
            objects.append(
                render.deny_all_ingress(
                    spec.target.name,
                    name="cnibench-prio-k8s",
                    namespace=self.namespace,
                    session=self.session,
                )
            )
        if case.layers:
            objects.extend(self._driver.priority_objects(self._scope, spec, case))
        return objects

    def apply_priority_case(self, case: PriorityCase, spec: PolicySpec) -> None:
        """Apply :meth:`priority_case_manifests` (replacing an earlier case); on a rejected
        object, the ones already applied are deleted again.

        Raises
        ------
        cnibench.errors.UnsupportedError
            See :meth:`priority_case_manifests`.
        cnibench.errors.ProvisioningError
            The API server rejected an object.
        """
        objects = self.priority_case_manifests(case, spec)
        self.remove_priority_case()
        for manifest in objects:
            self._priority_objects.append(manifest)
            try:
                self._applier.apply(manifest)
            except BaseException:
                self.remove_priority_case()
                raise

    def remove_priority_case(self) -> None:
        """Delete the case's objects (some CNIs' are cluster-scoped). Safe to repeat."""
        while self._priority_objects:
            self._applier.delete(self._priority_objects.pop())

    def apply_l7_policy(self, server: Endpoint, *, port: int, method: str, path: str) -> None:
        """Apply the CNI driver's HTTP rule allowing only ``method`` on ``path`` to
        ``server``'s ``port`` (:meth:`~cnibench.backends.kube.cnis.base.CniDriver.l7_policy`).
        """
        if Capability.L7_POLICY not in self.capabilities:
            raise UnsupportedError(f"{self._cni.name} has no L7 (HTTP) policy")
        manifest = self._driver.l7_policy(
            self._scope,
            name=_L7_NAME,
            target=server.name,
            port=port,
            method=method,
            path=path,
        )
        self.remove_l7_policy()
        self._applier.apply(manifest)
        self._l7_objects.append(manifest)

    def remove_l7_policy(self) -> None:
        """Delete the L7 policy. Safe to repeat."""
        for manifest in self._l7_objects:
            self._applier.delete(manifest)
        self._l7_objects.clear()

    def split_manifests(
        self, backends: Mapping[str, tuple[str, int]], *, port: int
    ) -> list[dict[str, Any]]:
        """Services, Gateway and HTTPRoute of a weighted split (``backends``: name to
        ``(pod name, weight)``)."""
        if not self._cni.gateway_class:
            raise UnsupportedError(f"{self._cni.name} has no Gateway API implementation enabled")
        objects = [
            render.split_service(
                f"split-{name}",
                namespace=self.namespace,
                session=self.session,
                endpoint=pod_name,
                port=port,
            )
            for name, (pod_name, _) in backends.items()
        ]
        objects.append(
            render.gateway(
                _SPLIT_GATEWAY,
                namespace=self.namespace,
                session=self.session,
                gateway_class=self._cni.gateway_class,
            )
        )
        objects.append(
            render.http_route(
                _SPLIT_GATEWAY,
                namespace=self.namespace,
                session=self.session,
                gateway_name=_SPLIT_GATEWAY,
                backends={f"split-{n}": (port, w) for n, (_, w) in backends.items()},
            )
        )
        return objects

    def create_split(self, backends: Mapping[str, tuple[Endpoint, int]], *, port: int) -> str:
        """Apply the split objects and return ``http://<gateway address>/`` once the Gateway
        has an address, its implementation accepted the HTTPRoute with every backend resolved,
        at the weights asked for (read back from the server), and the address answers a GET
        from this host with a 2xx.

        Raises
        ------
        cnibench.errors.ProvisioningError
            No address, or the route not accepted in time (with the route's own conditions),
            or stored weights that differ from those asked for.
        """
        objects = self.split_manifests(
            {n: (e.name, w) for n, (e, w) in backends.items()}, port=port
        )
        self._applier.apply_all(objects)
        self._split_objects.extend(objects)
        seen = "no status yet"

        def serving() -> str | None:
            nonlocal seen
            gateway = self._applier.apply(objects[-2], dry_run=True)
            route = self._applier.apply(objects[-1], dry_run=True)
            addresses = (gateway.get("status") or {}).get("addresses") or []
            problem = route_problem(route, {f"split-{n}": w for n, (_, w) in backends.items()})
            if addresses and not problem:
                url = f"http://{addresses[0]['value']}/"
                answer = _http_status(url)
                if 200 <= answer < 300:
                    return url
                # Accepted in status a moment before the implementation routes by it.
                problem = f"{url} answers {answer or 'nothing'}"
            seen = problem or "the Gateway has no address"
            return None

        return wait_for(
            serving,
            timeout=self.timeouts.pod_ready,
            what=f"the Gateway {_SPLIT_GATEWAY} to serve",
            interval=1.0,
            last_seen=lambda: seen,
            error=ProvisioningError,
        )

    def remove_split(self) -> None:
        """Delete the split objects. Safe to repeat."""
        for manifest in reversed(self._split_objects):
            self._applier.delete(manifest)
        self._split_objects.clear()

    def _service_objects(self) -> KubeServices:
        if self._services is None:
            self._services = KubeServices(
                self._core,
                self._applier,
                namespace=self.namespace,
                session=self.session,
                proxy=service_proxy(self._core, replaces_kube_proxy=self._cni.replaces_kube_proxy),
                ready_timeout=self.timeouts.pod_ready,
            )
        return self._services

    def expose(self, server: Endpoint, ports: Sequence[int], *, proxy: str, others: int) -> Service:
        """A NodePort Service (with its ClusterIP) in front of ``server`` and ``others`` further
        Services selecting it, through the proxy the cluster runs (see
        :mod:`cnibench.backends.kube.services`)."""
        return self._service_objects().expose(server, ports, proxy=proxy, others=others)

    def remove_service(self) -> None:
        """Delete the Services of :meth:`expose`. Safe to repeat."""
        if self._services is not None:
            self._services.remove()

    def prometheus_url(self) -> str:
        """Install Prometheus + node-exporter on first use and return a port-forward URL."""
        if self._forward is None:
            self._applier.apply_all(
                render.monitoring_manifests(
                    namespace=self.namespace,
                    session=self.session,
                    images=self.images,
                    tolerations=self.tolerations,
                    node_addresses={node.name: node.ip for node in self._nodes},
                )
            )
            self._cluster_objects.extend(
                m
                for m in render.monitoring_manifests(namespace=self.namespace, session=self.session)
                if m["kind"] in ("ClusterRole", "ClusterRoleBinding")
            )
            pod_name = self._wait_prometheus_pod()
            forward = PodPortForward(
                self._api_client, self.namespace, pod_name, render.PROMETHEUS_PORT
            )
            try:
                forward.check()
            except MetricsError:
                forward.close()
                raise
            self._forward = forward
        return f"http://127.0.0.1:{self._forward.local_port}"

    def _wait_prometheus_pod(self) -> str:
        seen = "no Prometheus pod"

        def ready_pod() -> str | None:
            nonlocal seen
            pods = self._core.list_namespaced_pod(
                self.namespace, label_selector="app.kubernetes.io/name=prometheus"
            ).items
            for item in pods:
                conditions = {c.type: c.status for c in (item.status.conditions or [])}
                if conditions.get("Ready") == "True":
                    return str(item.metadata.name)
                seen = f"pod {item.metadata.name} not Ready"
            return None

        return wait_for(
            ready_pod,
            timeout=self.timeouts.monitoring,
            what=f"the Prometheus pod in {self.namespace} to be Ready",
            interval=1.0,
            last_seen=lambda: seen,
            error=MetricsError,
        )

    def environment(self) -> Environment:
        """Host fingerprint plus nodes (role, CPUs, memory) and the CNI's Helm values."""
        described: dict[str, dict[str, str | int | float | bool]] = {}
        for node in self._nodes:
            capacity = self._core.read_node(node.name).status.capacity or {}
            described[node.name] = {
                "role": node.role.value,
                "cpu": str(capacity.get("cpu", "")),
                "memory": str(capacity.get("memory", "")),
            }
        return environment_fingerprint(
            backend="kube",
            provider=self._provider,
            cni=self._cni.name,
            cni_version=self._cni.version,
            nodes=described,
            cni_values=dict(self._cni.chart.values) if self._cni.chart else {},
        )

    def teardown(self) -> None:
        """Delete the cluster when cnibench owns it and it is not kept (``release``);
        otherwise delete the session's cluster-scoped objects and namespace and wait until
        the namespace is gone. Safe to call twice.

        Raises
        ------
        cnibench.errors.ProvisioningError
            Deleting the cluster or the namespace failed (the message names it).
        """
        from kubernetes.client.exceptions import ApiException

        if self._torn_down:
            return
        if self._forward is not None:
            self._forward.close()
            self._forward = None
        if self._release is not None:
            self._torn_down = True
            self._release()
            return
        # Cluster-scoped objects outlive the namespace: delete them explicitly.
        for manifest in (*self._egress_objects, *self._priority_objects, *self._cluster_objects):
            self._applier.delete(manifest)
        self._egress_objects.clear()
        self._priority_objects.clear()
        self._cluster_objects.clear()
        try:
            self._core.delete_namespace(self.namespace)
        except ApiException as exc:
            if exc.status != 404:
                raise ProvisioningError(
                    f"deleting namespace {self.namespace} failed: {api_error_message(exc)}"
                ) from exc
        self._wait_gone(lambda: self._core.read_namespace(self.namespace), self.namespace)
        self._torn_down = True


def _internal_ip(node: Any) -> str:
    for address in node.status.addresses or []:
        if address.type == "InternalIP":
            return str(address.address)
    return ""


def _exec_in(pod: KubePod, container: str, argv: Sequence[str], *, timeout: float) -> str:
    from kubernetes.client.exceptions import ApiException
    from kubernetes.stream import stream

    try:
        output = stream(
            websocket_core_api(pod._api_client).connect_get_namespaced_pod_exec,
            pod.name,
            pod.namespace,
            container=container,
            command=list(argv),
            stdin=False,
            stdout=True,
            stderr=True,
            tty=False,
            _request_timeout=timeout,
        )
    except (ApiException, OSError) as exc:
        raise ToolError(
            f"{argv[0]} in {pod.namespace}/{pod.name} failed: {api_error_message(exc)}",
            tool=argv[0],
        ) from exc
    return str(output)
