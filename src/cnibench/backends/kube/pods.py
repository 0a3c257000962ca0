"""Pods of a Kubernetes cluster: :class:`KubePods` places, waits for and deletes them.

A placed pod is a :class:`KubePod` (an :class:`~cnibench.backends.base.Endpoint`): commands run
through the exec subresource (:func:`kubernetes.stream.stream`), whose final ``v1.Status``
gives the exit code (:func:`exec_returncode`). A pod that cannot become Ready fails with the
kubelet's or scheduler's reason (:func:`pod_problem`), at once when the reason cannot clear by
waiting (:data:`STUCK_REASONS`). :class:`PodPortForward` forwards a loopback port to a pod port
(Prometheus is reached that way).
"""

from __future__ import annotations

import contextlib
import json
import socket
import threading
import time
from collections.abc import Mapping, Sequence
from typing import Any

from cnibench.backends.base import CommandResult, Endpoint, Node, NodeRole, WorkloadSpec
from cnibench.backends.kube import render
from cnibench.backends.kube.api import api_error_message, websocket_core_api
from cnibench.backends.kube.runtime import KubeRuntime
from cnibench.errors import CnibenchError, MetricsError, ProvisioningError, ToolError
from cnibench.waiting import Deadline, poll, wait_for

__all__ = [
    "STUCK_REASONS",
    "KubePod",
    "KubePods",
    "PodPortForward",
    "StartedExec",
    "exec_in_container",
    "exec_returncode",
    "internal_ip",
    "pod_problem",
]

_ERROR_CHANNEL = 3
"""Channel of the exec protocol that carries the final ``v1.Status``."""

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
    """A pod placed by :meth:`KubePods.place` (an :class:`~cnibench.backends.base.Endpoint`).

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
    container:
        The container commands run in: the tools container, or a load pod's locust container.
    """

    def __init__(
        self,
        name: str,
        namespace: str,
        node: Node,
        ip: str,
        api_client: Any,
        *,
        container: str = render.TOOLS_CONTAINER,
    ) -> None:
        self._name = name
        self.container = container
        """Where :meth:`run` executes (:func:`~cnibench.backends.kube.render.command_container`)."""
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

    @property
    def api_client(self) -> Any:
        """The client commands run through."""
        return self._api_client

    def start(self, argv: Sequence[str]) -> StartedExec:
        """Start ``argv`` in the pod through one exec session and return at once (see
        :meth:`cnibench.backends.base.Endpoint.start` and :class:`StartedExec`)."""
        return StartedExec(self, argv)

    def run(self, argv: Sequence[str], *, timeout: float) -> CommandResult:
        """Run ``argv`` in the pod's tools container (a load pod's locust container) through
        the exec subresource.

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
                container=self.container,
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
        deadline = Deadline(timeout)

        def finished() -> bool:
            """Take what arrives within a second (less at the deadline); closed: done."""
            if not session.is_open():
                return True
            try:
                session.update(timeout=min(1.0, deadline.remaining()))
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
            return not session.is_open()

        try:
            # update() itself blocks until output comes, so the wait needs no interval.
            if not poll(finished, timeout=deadline, interval=0.0):
                raise ToolError(
                    f"{tool} in pod {self._name} did not finish within {timeout:g} s",
                    tool=tool,
                    output="".join(stdout) + "".join(stderr),
                )
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


_PID_FIRST = 'echo "$$"; exec "$@"'
"""``sh -c`` script that prints the shell's PID, then execs the command in that process."""


class StartedExec:
    """A command started in a pod through one exec session, read as it prints (a
    :class:`~cnibench.backends.base.StartedCommand`).

    The command runs under ``sh``, which prints its PID and execs it in the same process, so
    :meth:`stop` ends it by that PID (through a second, short exec) before closing the session:
    a closed exec stream alone does not end a command that does not write.

    Parameters
    ----------
    pod:
        Where it runs.
    argv:
        The command.

    Raises
    ------
    cnibench.errors.ToolError
        When exec cannot start.
    """

    def __init__(self, pod: KubePod, argv: Sequence[str]) -> None:
        from kubernetes.client.exceptions import ApiException
        from kubernetes.stream import stream

        self._pod = pod
        self._argv = tuple(argv)
        self._tool = argv[0] if argv else ""
        self._begun = time.monotonic()
        try:
            self._session = stream(
                websocket_core_api(pod.api_client).connect_get_namespaced_pod_exec,
                pod.name,
                pod.namespace,
                container=pod.container,
                command=["sh", "-c", _PID_FIRST, "sh", *argv],
                stdin=False,
                stdout=True,
                stderr=True,
                tty=False,
                _preload_content=False,
            )
        except (ApiException, OSError) as exc:
            raise ToolError(
                f"exec of {self._tool} in pod {pod.name} failed: {api_error_message(exc)}",
                tool=self._tool,
            ) from exc
        self._stdout: list[str] = []
        self._stderr: list[str] = []
        self._status = ""
        self._broken = ""
        self._first = threading.Event()
        """Set once the PID and the command's first line arrived, or the session closed."""
        self._closed = threading.Event()
        self._reader = threading.Thread(target=self._read, name="cnibench-exec", daemon=True)
        self._reader.start()

    def _lines(self) -> list[str]:
        """Complete lines so far, the PID's first."""
        text = "".join(self._stdout)
        return text.split("\n")[:-1]

    def _read(self) -> None:
        session = self._session
        try:
            # update() blocks until a frame comes (or a second passes): no clock needed.
            while session.is_open():
                session.update(timeout=1.0)
                if session.peek_stdout():
                    self._stdout.append(session.read_stdout())
                    if not self._first.is_set() and len(self._lines()) >= 2:
                        self._first.set()
                if session.peek_stderr():
                    self._stderr.append(session.read_stderr())
            self._status = str(session.read_channel(_ERROR_CHANNEL) or "")
        except Exception as exc:  # websocket and client errors have no common base
            self._broken = api_error_message(exc)
        finally:
            self._closed.set()
            self._first.set()

    def _pid(self) -> int | None:
        lines = self._lines()
        return int(lines[0]) if lines and lines[0].strip().isdigit() else None

    def first_line(self, *, timeout: float) -> str:
        """See :meth:`cnibench.backends.base.StartedCommand.first_line`."""
        self._first.wait(timeout)
        lines = self._lines()
        if len(lines) >= 2:
            return lines[1]
        why = "ended" if self._closed.is_set() else f"did not print within {timeout:g} s"
        raise ToolError(
            f"{self._tool} in pod {self._pod.name} {why} without a line of output:"
            f" {' '.join(''.join(self._stderr).split())[:300] or self._broken}",
            tool=self._tool,
        )

    def wait(self, *, timeout: float) -> CommandResult:
        """See :meth:`cnibench.backends.base.StartedCommand.wait`."""
        if not self._closed.wait(timeout):
            self.stop()
            raise ToolError(
                f"{self._tool} in pod {self._pod.name} did not finish within {timeout:g} s and"
                " was stopped",
                tool=self._tool,
                output="".join(self._stdout),
            )
        if self._broken:
            raise ToolError(
                f"exec of {self._tool} in pod {self._pod.name} broke off: {self._broken}",
                tool=self._tool,
                output="".join(self._stdout) + "".join(self._stderr),
            )
        returncode = exec_returncode(self._status, tool=self._tool, pod=self._pod.name)
        text = "".join(self._stdout)
        return CommandResult(
            argv=self._argv,
            returncode=returncode,
            stdout=text.split("\n", 1)[1] if "\n" in text else "",
            stderr="".join(self._stderr),
            duration=time.monotonic() - self._begun,
        )

    def stop(self) -> None:
        """See :meth:`cnibench.backends.base.StartedCommand.stop`: ``kill -9`` of the PID
        the command printed first (a second exec), then the session closed."""
        if not self._closed.is_set():
            pid = self._pid()
            if pid is not None:
                with contextlib.suppress(ToolError):
                    self._pod.run(["sh", "-c", f"kill -9 {pid} 2>/dev/null; true"], timeout=15)
            with contextlib.suppress(Exception):  # closing a broken websocket may raise
                self._session.close()
        self._reader.join(timeout=5.0)


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


class KubePods:
    """Pods of one session: placed on a role node, waited for until Ready, deleted.

    Parameters
    ----------
    runtime:
        The cluster's shared state (namespace, images, nodes, timeouts).
    """

    def __init__(self, runtime: KubeRuntime) -> None:
        self._runtime = runtime

    def place(
        self, name: str, *, role: NodeRole, workloads: Sequence[WorkloadSpec] = ()
    ) -> KubePod:
        """Create pod ``name`` on the ``role`` node, wait until Ready, verify where it runs.

        Raises
        ------
        cnibench.errors.ProvisioningError
            The pod is rejected, fails, is not Ready within ``timeouts.pod_ready`` seconds, or
            runs on another node than the ``role`` node.
        """
        rt = self._runtime
        manifest = render.pod(
            name,
            namespace=rt.namespace,
            session=rt.session,
            role=role,
            workloads=workloads,
            images=rt.images,
            tolerations=rt.tolerations,
            node=rt.target(role),
        )
        return self.start(manifest, role, container=render.command_container(workloads))

    def start(
        self,
        manifest: Mapping[str, Any],
        role: NodeRole,
        *,
        container: str = render.TOOLS_CONTAINER,
    ) -> KubePod:
        """Apply a pod manifest, wait until Ready, and check it runs on a ``role`` node
        (raises as :meth:`place`; a pod that never came up is deleted again)."""
        rt = self._runtime
        name = str(manifest["metadata"]["name"])
        rt.applier.apply(manifest)
        try:
            ready = self._wait_ready(name)
        except ProvisioningError:
            # The pod that never came up goes, so the next condition can place its namesake.
            with contextlib.suppress(CnibenchError):
                self.delete(name)
            raise
        node_name = ready.spec.node_name
        # One node may hold several roles (same-node placement): look for this role's entry.
        node = next((n for n in rt.nodes if n.name == node_name and n.role is role), None)
        if node is None:
            labels = rt.core.read_node(node_name).metadata.labels or {}
            actual = labels.get(render.ROLE_LABEL, "none")
            if actual != role.value:
                raise ProvisioningError(
                    f"pod {name} runs on {node_name} whose role is {actual}, not {role.value}"
                )
            node = Node(node_name, role, internal_ip(rt.core.read_node(node_name)))
        return KubePod(
            name, rt.namespace, node, ready.status.pod_ip, rt.api_client, container=container
        )

    def _wait_ready(self, name: str) -> Any:
        """The pod once Ready with an IP; a pod that cannot get there raises with the reason
        the kubelet or scheduler gives (at once when the reason cannot clear by itself)."""
        rt = self._runtime
        seen = "not read yet"

        def ready() -> Any:
            nonlocal seen
            current = rt.core.read_namespaced_pod(name, rt.namespace)
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
            timeout=rt.timeouts.pod_ready,
            what=f"pod {name} to be Ready",
            interval=0.25,
            last_seen=lambda: seen,
            error=ProvisioningError,
        )

    def remove(self, endpoint: Endpoint) -> None:
        """Delete the pod and wait until it is gone."""
        self.delete(endpoint.name)

    def delete(self, name: str) -> None:
        """Delete pod ``name`` (gone already is fine) and wait until it is gone.

        Raises
        ------
        cnibench.errors.ProvisioningError
            The API server refused, or the pod outlived ``timeouts.delete``.
        """
        from kubernetes.client.exceptions import ApiException

        rt = self._runtime
        try:
            rt.core.delete_namespaced_pod(name, rt.namespace, grace_period_seconds=0)
        except ApiException as exc:
            if exc.status == 404:
                return
            raise ProvisioningError(
                f"deleting pod {name} failed: {api_error_message(exc)}"
            ) from exc
        rt.wait_gone(lambda: rt.core.read_namespaced_pod(name, rt.namespace), f"pod {name}")


def internal_ip(node: Any) -> str:
    """A Node object's ``InternalIP`` address, or ``""``."""
    for address in node.status.addresses or []:
        if address.type == "InternalIP":
            return str(address.address)
    return ""


def exec_in_container(pod: KubePod, container: str, argv: Sequence[str], *, timeout: float) -> str:
    """Output of ``argv`` run in ``container`` of ``pod`` (stdout and stderr together),
    ``timeout`` seconds at most.

    Raises
    ------
    cnibench.errors.ToolError
        Exec failed.
    """
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
