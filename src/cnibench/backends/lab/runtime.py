"""What every feature of a lab shares: its plan, one lock, the processes it started, nft.

:class:`LabRuntime` is handed by composition to each feature of
:class:`~cnibench.backends.lab.cluster.LabCluster` (pods, egress, WireGuard, filters, split,
monitoring). One lock for all of them: a feature that holds it may call into another.
"""

from __future__ import annotations

import shutil
import threading
from collections.abc import Callable, Sequence
from pathlib import Path

from cnibench.backends.lab.plan import LabPlan, Step
from cnibench.backends.lab.policy import nft_table_removal, policy_table
from cnibench.backends.lab.runner import ManagedProcess, run_step, start_process, stop_processes
from cnibench.errors import ProvisioningError

__all__ = ["READY_TIMEOUT", "LabRuntime", "nginx_argv"]

READY_TIMEOUT = 15.0
"""Seconds a started server gets to listen (or print that it is ready)."""


def nginx_argv(run_dir: Path) -> list[str]:
    """nginx in the foreground with ``run_dir/nginx.conf``, its prefix and error log there."""
    conf = run_dir / "nginx.conf"
    return [
        "nginx",
        "-c",
        str(conf),
        "-p",
        str(run_dir),
        "-e",
        str(run_dir / "nginx-error.log"),
        "-g",
        "daemon off;",
    ]


class LabRuntime:
    """The shared state of one lab: plan, lock, started processes, torn-down flag.

    Parameters
    ----------
    plan:
        Names and addresses of the lab.
    on_change:
        Called (without the lock held by the runtime) whenever the set of processes changed,
        so the lab can rewrite ``lab.json``.
    """

    def __init__(self, plan: LabPlan, *, on_change: Callable[[], None]) -> None:
        self.plan = plan
        self.lock = threading.RLock()
        """Guards every feature's state; reentrant, as features call each other under it."""
        self.processes: dict[int, ManagedProcess] = {}
        """Processes running now, by PID."""
        self.recorded_pids: set[int] = set()
        """Every PID this lab ever started (kept after teardown, for checks)."""
        self.torn_down = False
        self._on_change = on_change
        self._sequence = 0

    @property
    def lab_id(self) -> str:
        """``cb`` + six hex digits, prefix of every namespace of this lab."""
        return self.plan.lab_id

    def record(self) -> None:
        """Rewrite ``lab.json`` (what ``cnibench clean`` reads after a crash)."""
        self._on_change()

    def check_alive(self) -> None:
        """Raise :class:`ProvisioningError` once the lab has been torn down."""
        if self.torn_down:
            raise ProvisioningError(f"lab {self.lab_id} has been torn down")

    def next_sequence(self) -> int:
        """A number unique in this lab (names split gateways and capture files)."""
        with self.lock:
            self._sequence += 1
            return self._sequence

    def start(
        self,
        name: str,
        namespace: str,
        argv: Sequence[str],
        *,
        log_path: Path | None,
        env: dict[str, str] | None = None,
        capture: bool = False,
    ) -> ManagedProcess:
        """Start ``argv`` in ``namespace`` as process ``name`` and remember it.

        Raises
        ------
        ProvisioningError
            If the binary is not on PATH or cannot be started.
        """
        binary = argv[0]
        if shutil.which(binary) is None:
            raise ProvisioningError(f"start {name}: {binary} not found on PATH")
        proc = start_process(name, namespace, argv, log_path=log_path, env=env, capture=capture)
        with self.lock:
            self.processes[proc.pid] = proc
            self.recorded_pids.add(proc.pid)
        self.record()
        return proc

    def processes_named(self, name: str) -> list[ManagedProcess]:
        """Running processes started as ``name``."""
        with self.lock:
            return [proc for proc in self.processes.values() if proc.name == name]

    def forget(self, proc: ManagedProcess) -> None:
        """Drop ``proc`` from the running processes (it has exited)."""
        with self.lock:
            self.processes.pop(proc.pid, None)

    def stop(self, processes: Sequence[ManagedProcess]) -> list[str]:
        """Stop ``processes`` (SIGTERM, bounded wait, SIGKILL); names of those that stuck."""
        stuck = stop_processes(processes)
        for proc in processes:
            self.forget(proc)
        self.record()
        return stuck

    def log(self, name: str) -> Path:
        """Path of log ``name`` in the state directory."""
        return self.plan.state_dir / "logs" / f"{name}.log"

    def table(self, feature: str) -> str:
        """Name of the nftables table of ``feature`` (``pol``, ``prio``, ``l7``, ``split``)."""
        return policy_table(self.lab_id, feature)

    def drop_feature(
        self, node: str, feature: str, what: str, *, then_stop: Sequence[ManagedProcess] = ()
    ) -> None:
        """Remove ``feature``'s table from ``node``, then stop ``then_stop`` even if that failed
        (the way every filter, the L7 proxy and the split gateway are taken down)."""
        try:
            self.nft(node, f"remove {what} on {node}", nft_table_removal(self.table(feature)))
        finally:
            if then_stop:
                self.stop(then_stop)

    def iptables_restore(
        self, namespace: str, description: str, restore: str, *, timeout: float = 30.0
    ) -> None:
        """Load ``restore`` with ``iptables-restore`` in ``namespace``: the legacy binary where
        there is one, the kernel's linear xtables datapath rather than nftables underneath.

        Raises
        ------
        ProvisioningError
            Naming ``description``, if it is rejected.
        """
        binary = (
            "iptables-legacy-restore"
            if shutil.which("iptables-legacy-restore")
            else "iptables-restore"
        )
        run_step(
            Step(description, ("ip", "netns", "exec", namespace, binary), restore),
            timeout=timeout,
        )

    def nft(self, namespace: str, description: str, ruleset: str) -> None:
        """Load ``ruleset`` with ``nft -f -`` in ``namespace``.

        Raises
        ------
        ProvisioningError
            Naming ``description``, if nft rejects it.
        """
        run_step(Step(description, ("ip", "netns", "exec", namespace, "nft", "-f", "-"), ruleset))
