"""The lab's external host: a namespace on the underlay, the egress target.

:class:`LabExternalHost` implements :class:`~cnibench.backends.base.ExternalHost`; its one-shot
iperf3 server answers with a :class:`LabEgressServerFuture`.
"""

from __future__ import annotations

import subprocess
from collections.abc import Sequence

from cnibench.backends.base import CommandResult, EgressServerResult
from cnibench.backends.lab.runner import (
    ManagedProcess,
    StartedInNamespace,
    run_in_namespace,
    wait_for_output,
)
from cnibench.backends.lab.runtime import READY_TIMEOUT, LabRuntime
from cnibench.errors import ProvisioningError, ToolError
from cnibench.tools.iperf3_server import (
    READY_PREFIX,
    iperf3_server_process_argv,
    parse_iperf3_server_record,
)
from cnibench.tools.source_echo import READY as SOURCE_ECHO_READY
from cnibench.tools.source_echo import source_echo_argv

__all__ = ["LabEgressServerFuture", "LabExternalHost"]


class LabEgressServerFuture:
    """Pending result of :meth:`LabExternalHost.iperf3_server_once`."""

    def __init__(
        self, runtime: LabRuntime, process: ManagedProcess, timeout: float, stderr: str
    ) -> None:
        self._runtime = runtime
        self._process = process
        self._timeout = timeout
        self._stderr = stderr
        self._result: EgressServerResult | None = None

    def result(self) -> EgressServerResult:
        """Wait (at most the server's timeout plus a grace period) for the test's report.

        Raises
        ------
        cnibench.errors.ToolError
            If no test arrived, the server failed, or it had to be killed.
        """
        if self._result is not None:
            return self._result
        popen = self._process.popen
        try:
            out, err = popen.communicate(timeout=self._timeout + 15.0)
        except subprocess.TimeoutExpired:
            self._runtime.stop([self._process])
            raise ToolError(
                f"external iperf3 server did not report within {self._timeout + 15.0:g} s",
                tool="iperf3-server",
            ) from None
        finally:
            self._runtime.forget(self._process)
        stderr = self._stderr + err.decode(errors="replace")
        record = parse_iperf3_server_record(out.decode(errors="replace"), stderr=stderr)
        self._result = EgressServerResult(
            remote_host=record.remote_host,
            received_bits_per_second=record.received_bits_per_second,
            raw=record.raw_json,
        )
        return self._result

    def cancel(self) -> None:
        """Stop the server process without waiting for a test. Safe to repeat."""
        if self._result is None and self._process.popen.poll() is None:
            self._runtime.stop([self._process])
        self._runtime.forget(self._process)


class LabExternalHost:
    """The external host namespace on the underlay: the egress target."""

    def __init__(self, runtime: LabRuntime) -> None:
        self._runtime = runtime

    @property
    def ip(self) -> str:
        """Underlay address of the external host."""
        return self._runtime.plan.external.ip

    @property
    def namespace(self) -> str:
        """Network namespace of the external host."""
        return self._runtime.plan.external.name

    def run(self, argv: Sequence[str], *, timeout: float) -> CommandResult:
        """Run ``argv`` on the external host; kill it after ``timeout`` seconds (ToolError)."""
        return run_in_namespace(self.namespace, argv, timeout=timeout, tool_label="external host")

    def start_source_echo(self, *, port: int, seconds: float) -> StartedInNamespace:
        """Serve :mod:`cnibench.tools.source_echo` in the external namespace (this interpreter
        runs it there); returns once it listens.

        Raises
        ------
        cnibench.errors.ToolError
            It did not start (its error output says why).
        """
        argv = source_echo_argv(self.ip, port, seconds=seconds)
        started = StartedInNamespace(self.namespace, argv, tool_label="external host")
        try:
            line = started.first_line(timeout=READY_TIMEOUT)
        except ToolError:
            started.stop()
            raise
        if line != SOURCE_ECHO_READY:
            started.stop()
            raise ToolError(f"source echo on the external host said {line!r}", tool="source-echo")
        return started

    def iperf3_server_once(self, *, port: int, timeout: float) -> LabEgressServerFuture:
        """Start a libiperf server for one test; returns once it listens.

        Parameters
        ----------
        port:
            TCP port on the external host's address.
        timeout:
            Seconds the server waits for the test to arrive and finish.

        Raises
        ------
        cnibench.errors.ToolError
            If the server does not come up.
        """
        name = f"ext/iperf3-server-{port}"
        # A server whose result was never collected (its client failed) would hold the port
        # until its own timeout; the new test replaces it.
        self._runtime.stop(self._runtime.processes_named(name))
        argv = iperf3_server_process_argv(port=port, bind=self.ip, timeout=timeout)
        proc = self._runtime.start(name, self.namespace, argv, log_path=None, capture=True)
        try:
            stderr = wait_for_output(proc, READY_PREFIX, timeout=READY_TIMEOUT)
        except ProvisioningError as exc:
            self._runtime.stop([proc])
            raise ToolError(
                f"external iperf3 server did not start: {exc}", tool="iperf3-server"
            ) from exc
        return LabEgressServerFuture(self._runtime, proc, timeout, stderr)
