"""A provisioned lab: the :class:`LabCluster` façade over the lab's features.

:class:`LabCluster` implements :class:`~cnibench.backends.base.Cluster` by delegating to one
object per feature, each holding that feature's state and sharing one
:class:`~cnibench.backends.lab.runtime.LabRuntime` (plan, lock, started processes, nft):
:class:`~cnibench.backends.lab.pods.LabPods` (pods, which implement
:class:`~cnibench.backends.base.Endpoint`), :class:`~cnibench.backends.lab.egress.LabEgressGateway`,
:class:`~cnibench.backends.lab.wireguard.LabWireGuard` (also the underlay capture),
:class:`~cnibench.backends.lab.filters.LabFilters` (policy, priority, L7),
:class:`~cnibench.backends.lab.split.LabSplit` and
:class:`~cnibench.backends.lab.monitoring.LabMonitoring`; the external host
(:class:`~cnibench.backends.lab.external.LabExternalHost`) implements
:class:`~cnibench.backends.base.ExternalHost`. Here stay provisioning, ``lab.json``, the
environment fingerprint and teardown. The plan comes from :mod:`cnibench.backends.lab.plan`;
commands and processes go through :mod:`cnibench.backends.lab.runner`. Everything created is
recorded in ``lab.json`` in the state directory, so ``cnibench clean`` can remove what a killed
process left behind.
"""

from __future__ import annotations

import atexit
import contextlib
import dataclasses
import json
import os
import shutil
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from cnibench.backends.base import (
    Capability,
    ClusterSpec,
    EncryptionStatus,
    Endpoint,
    Node,
    NodeRole,
    ResourceUsage,
    Service,
    WarmUp,
    WorkloadSpec,
)
from cnibench.backends.lab.cgroups import LabCgroups
from cnibench.backends.lab.egress import LabEgressGateway
from cnibench.backends.lab.external import LabEgressServerFuture, LabExternalHost
from cnibench.backends.lab.features import LabFeatures, probe_features, tool_versions
from cnibench.backends.lab.filters import LabFilters
from cnibench.backends.lab.monitoring import LabMonitoring
from cnibench.backends.lab.plan import (
    NODE_UPLINK,
    UNDERLAY_DEVICE_REGEX,
    VXLAN_PORT,
    VXLAN_VNI,
    LabDatapath,
    LabPlan,
    namespace_removal_step,
    namespace_steps,
    napi_steps,
    nat_steps,
    route_steps,
    sysctl_steps,
    underlay_steps,
    vxlan_steps,
)
from cnibench.backends.lab.pods import LabPod, LabPods, node_of
from cnibench.backends.lab.runner import (
    NETNS_DIR,
    ManagedProcess,
    pids_in_namespaces,
    process_start_time,
    run_step,
    run_steps,
    stop_pids,
    stop_processes,
)
from cnibench.backends.lab.runtime import LabRuntime
from cnibench.backends.lab.services import LabServices
from cnibench.backends.lab.split import LabSplit
from cnibench.backends.lab.wireguard import (
    WG_SOCKET_DIR,
    LabWireGuard,
    parse_wg_dump,
    redact_wg_dump,
)
from cnibench.backends.napi import napi_thread_pids
from cnibench.errors import CnibenchError, ProvisioningError
from cnibench.policy import PolicyEngine, PolicyRuleLimit, PolicySpec, PriorityCase
from cnibench.records import Environment
from cnibench.results import environment_fingerprint
from cnibench.signals import signals_deferred
from cnibench.waiting import wait_for

__all__ = [
    "WG_SOCKET_DIR",
    "LabCluster",
    "LabEgressServerFuture",
    "LabExternalHost",
    "LabPod",
    "parse_wg_dump",
    "redact_wg_dump",
]


_LAB_HINTS = {
    Capability.UNDERLAY_CAPTURE: "install tcpdump",
    Capability.WIREGUARD: "neither kernel WireGuard nor wireguard-go works here",
    Capability.LATENCY_EMULATION: "this kernel has no netem qdisc",
    Capability.SERVICE_EBPF: (
        "the lab's Services go through --proxy iptables or nftables; eBPF Services are a"
        " CNI's kube-proxy replacement (--cluster kind --cni cilium)"
    ),
}
"""What the host lacks for each capability the lab may not offer (``capability_hint``)."""


NAPI_ADOPT_S = 0.8
"""Seconds a machine's NAPI pollers are listed and moved again, while its cgroup refuses one,
before its CPU cannot be counted (5 listings at the pause below)."""
NAPI_ADOPT_PAUSE_S = 0.2
"""Pause between two such listings, seconds."""


class LabCluster:
    """A lab made of network namespaces on this host (a :class:`Cluster`).

    Use :meth:`cnibench.backends.lab.LabBackend.provision` to get one. Usable as a context
    manager; :meth:`teardown` removes everything (also at interpreter exit if forgotten).
    A façade: each feature is an object of its own module sharing one
    :class:`~cnibench.backends.lab.runtime.LabRuntime`, and so one lock.
    """

    def __init__(self, plan: LabPlan, spec: ClusterSpec) -> None:
        self._plan = plan
        self._spec = spec
        self._runtime = LabRuntime(plan, on_change=self._record)
        self._lock = self._runtime.lock
        self._pods = LabPods(self._runtime)
        self._wireguard = LabWireGuard(self._runtime)
        self._egress = LabEgressGateway(self._runtime, self._pods, self._wireguard)
        self._filters = LabFilters(self._runtime, self._pods)
        self._split = LabSplit(self._runtime, self._pods)
        self._services = LabServices(self._runtime, self._pods)
        self._monitoring = LabMonitoring(self._runtime)
        self._cgroups = LabCgroups(plan.lab_id)
        self._features = LabFeatures(kernel_wireguard=False, wireguard_go=False, netem=False)
        self._environment: Environment | None = None
        self._external = LabExternalHost(self._runtime)
        self._provisioned = False
        self._created = datetime.now(UTC).isoformat()
        self.recorded_pids: set[int] = self._runtime.recorded_pids
        """Every PID this lab ever started (kept after teardown, for checks)."""

    # -- Cluster protocol: identity -------------------------------------------------------

    @property
    def backend(self) -> str:
        """``"lab"``."""
        return "lab"

    @property
    def provider(self) -> str:
        """``"lab"``."""
        return "lab"

    @property
    def spec(self) -> ClusterSpec:
        """The spec this lab was provisioned for."""
        return self._spec

    @property
    def cni_version(self) -> str:
        """Kernel release: the lab's datapath is the kernel's."""
        return os.uname().release

    @property
    def capabilities(self) -> frozenset[Capability]:
        """Egress gateway, network policy (with tiers), L7 policy, traffic split, Services and
        underlay capture always (tcpdump permitting); WireGuard and latency emulation when the
        host supports them."""
        caps = {
            Capability.EXTERNAL_HOST,
            Capability.EGRESS_GATEWAY,
            Capability.NETWORK_POLICY,
            Capability.POLICY_TIERS,
            Capability.L7_POLICY,
            Capability.TRAFFIC_SPLIT,
            Capability.SERVICE_PROXY,
            Capability.SERVICE_IPTABLES,
            Capability.SERVICE_NFTABLES,
        }
        if shutil.which("tcpdump") is not None:
            caps.add(Capability.UNDERLAY_CAPTURE)
        if self._features.wireguard:
            caps.add(Capability.WIREGUARD)
        if self._features.netem:
            caps.add(Capability.LATENCY_EMULATION)
        return frozenset(caps)

    def capability_hint(self, capability: Capability) -> str:
        """What is missing on this host for ``capability`` (see ``cnibench doctor``)."""
        return _LAB_HINTS.get(capability, "")

    @property
    def nodes(self) -> tuple[Node, ...]:
        """All nodes in the order of ``spec.roles``."""
        return tuple(node_of(node) for node in self._plan.nodes)

    def node(self, role: NodeRole) -> Node:
        """The first node with ``role``.

        Raises
        ------
        ConfigError
            If no node has it.
        """
        return node_of(self._pods.node_plan(role))

    @property
    def external(self) -> LabExternalHost:
        """The external host."""
        return self._external

    # -- lab specifics ----------------------------------------------------------------------

    @property
    def lab_id(self) -> str:
        """``cb`` + six hex digits, prefix of every namespace of this lab."""
        return self._plan.lab_id

    @property
    def plan(self) -> LabPlan:
        """Names and addresses of the lab."""
        return self._plan

    @property
    def state_dir(self) -> Path:
        """Directory with ``lab.json``, keys, configs and logs."""
        return self._plan.state_dir

    @property
    def features(self) -> LabFeatures:
        """Kernel features found when the lab was provisioned."""
        return self._features

    @property
    def wireguard_implementation(self) -> str:
        """``"kernel"``, ``"wireguard-go"``, or ``""`` without encryption."""
        return self._wireguard.implementation

    @property
    def metrics_device_regex(self) -> str:
        """RE2 regex of a node's underlay interface in node-exporter's ``device`` label
        (``^eth0$``: every lab node's underlay veth is named ``eth0``, as on kind nodes)."""
        return UNDERLAY_DEVICE_REGEX

    @property
    def pods(self) -> tuple[LabPod, ...]:
        """Pods currently placed."""
        return self._pods.all()

    def __enter__(self) -> LabCluster:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.teardown()

    def __repr__(self) -> str:
        return f"LabCluster({self.lab_id!r}, {self._spec.key!r})"

    # -- provisioning -----------------------------------------------------------------------

    def provision(self) -> None:
        """Build the lab from its plan (called once by the backend).

        Raises
        ------
        ProvisioningError
            Naming the failed step; everything created so far is removed first.
        """
        if self._provisioned:
            return
        # If the state directory exists, another lab owns this id: touch nothing of it.
        self._create_state_dir()
        atexit.register(self.teardown)
        try:
            run_steps(namespace_steps(self._plan))
            self._create_cgroups()
            run_steps(sysctl_steps(self._plan))
            run_steps(underlay_steps(self._plan))
            run_steps(napi_steps(self._plan))
            self._adopt_napi_threads()
            self._features = probe_features(self._plan.underlay_namespace)
            if self._plan.encryption:
                self._wireguard.create(self._features)
            run_steps(vxlan_steps(self._plan))
            run_steps(route_steps(self._plan))
            run_steps(nat_steps(self._plan))
            self._monitoring.start()
        except BaseException as exc:
            try:
                self.teardown()
            except CnibenchError as cleanup_exc:
                exc.add_note(f"cleanup after the failure also failed: {cleanup_exc}")
            if isinstance(exc, CnibenchError):
                raise
            if isinstance(exc, OSError):
                raise ProvisioningError(f"lab {self.lab_id}: {exc}") from exc
            raise
        self._provisioned = True
        self._record()

    def _create_cgroups(self) -> None:
        """One cgroup per machine, before any process starts in it."""
        try:
            self._cgroups.create(self._plan.machines)
        except ProvisioningError:
            if self._plan.napi_threaded:
                raise  # asked for per-node CPU, which needs them
            # Without them a run's CPU is known only host-wide (from Prometheus).
            self._cgroups.remove()
            self._cgroups = LabCgroups(self.lab_id, layout=self._cgroups.layout)
        self._record()

    def _adopt_napi_threads(self) -> None:
        """Count each machine's receive threads (``napi=threaded``) as that machine's CPU."""
        if not self._plan.napi_threaded:
            return
        if not self._cgroups.available:
            raise ProvisioningError(
                f"lab {self.lab_id}: napi=threaded measures CPU per node, but no cgroup"
                " hierarchy counting CPU time (cpuacct or cgroup v2) is mounted"
            )
        for member, namespace in self._plan.machines.items():
            _adopt_napi_pollers(self._cgroups, member, namespace, lab_id=self.lab_id)

    def _create_state_dir(self) -> None:
        state = self._plan.state_dir
        try:
            state.parent.mkdir(mode=0o755, parents=True, exist_ok=True)
            state.mkdir(mode=0o700)
            for sub in ("logs", "keys", "pods", "prometheus"):
                (state / sub).mkdir(mode=0o700)
        except OSError as exc:
            raise ProvisioningError(f"create the state directory {state}: {exc}") from exc
        self._record()

    def _record(self) -> None:
        """Write ``lab.json`` atomically (what ``cnibench clean`` and people debugging read)."""
        state = self._plan.state_dir
        if not state.is_dir():
            return
        with self._lock:
            pods = self._pods.all()
            data: dict[str, Any] = {
                "lab_id": self.lab_id,
                "created": self._created,
                "owner_pid": os.getpid(),
                "owner_start_time": process_start_time(os.getpid()),
                "spec": {
                    "cni": self._spec.cni,
                    "encryption": self._spec.encryption,
                    "roles": [role.value for role in self._spec.roles],
                },
                "namespaces": [*self._plan.namespaces, *(p.namespace for p in pods)],
                "nodes": [
                    {"name": n.name, "role": n.role.value, "ip": n.underlay_ip}
                    for n in self._plan.nodes
                ],
                "pods": {
                    p.name: {"namespace": p.namespace, "ip": p.ip, "node": p.node.name}
                    for p in pods
                },
                "wg_interfaces": list(self._plan.wg_interfaces),
                "cgroups": [str(d) for d in self._cgroups.directories() if d.is_dir()],
                "wireguard_implementation": self._wireguard.implementation,
                "processes": [proc.to_json_dict() for proc in self._runtime.processes.values()],
            }
        tmp = state / "lab.json.tmp"
        with contextlib.suppress(OSError):
            tmp.write_text(json.dumps(data, indent=2))
            os.replace(tmp, state / "lab.json")

    # Processes, for the reliability tests that reach in (``_processes_named``, ``_prometheus``).

    def _processes_named(self, name: str) -> list[ManagedProcess]:
        return self._runtime.processes_named(name)

    @property
    def _prometheus(self) -> ManagedProcess | None:
        return self._monitoring.prometheus

    # -- pods -------------------------------------------------------------------------------

    def place(self, name: str, *, role: NodeRole, workloads: Sequence[WorkloadSpec] = ()) -> LabPod:
        """Create pod ``name`` on the first node with ``role`` and start ``workloads``.

        Returns once every workload listens on its TCP port (bounded wait).

        Raises
        ------
        ConfigError
            Bad or duplicate name, unknown role, node full, bad workload.
        ProvisioningError
            A command or server failed; the half-made pod is removed.
        """
        return self._pods.place(name, role=role, workloads=workloads)

    def remove(self, endpoint: Endpoint) -> None:
        """Stop the pod's workloads and delete it (its namespace and veth)."""
        self._pods.remove(endpoint)

    # -- egress gateway ---------------------------------------------------------------------

    def enable_egress_gateway(self, clients: Sequence[Endpoint], *, destination: str) -> str:
        """Route ``clients``' traffic to ``destination`` through the egress-gw node.

        Client nodes send it (in the tunnel, if any) to the gateway instead of masquerading it;
        the gateway masquerades it to its own underlay address. Replaces an earlier gateway.

        Returns
        -------
        str
            The gateway node's underlay address: the source the destination will see.

        Raises
        ------
        ConfigError
            No egress-gw node, a client that is not a pod of this lab, or a bad destination.
        """
        return self._egress.enable(clients, destination=destination)

    def disable_egress_gateway(self) -> None:
        """Remove the egress gateway's rules and routes (each node masquerades its own pods)."""
        self._egress.disable()

    # -- network policy, L7 policy, traffic split -------------------------------------------

    @property
    def policy_settle_seconds(self) -> float:
        """``0.0``: the nftables load is synchronous, a policy is enforced on return."""
        return 0.0

    @property
    def priority_settle_seconds(self) -> float:
        """``0.0``: a priority case is in force on return."""
        return 0.0

    @property
    def policy_rule_limit(self) -> PolicyRuleLimit | None:
        """``None``: an nftables chain or set holds every rule a policy may carry."""
        return None

    def apply_policy(self, spec: PolicySpec, *, engine: PolicyEngine | None = None) -> None:
        """Enforce ``spec`` in the forward path of the target pod's node with ``engine`` (one
        of :attr:`~cnibench.backends.lab.LabBackend.policy_choices`' engines; the lab needs
        one).

        ``iptables`` uses ``iptables-legacy-restore`` when present (the classic linear
        xtables datapath), else ``iptables-restore``. Replaces an earlier policy.

        Raises
        ------
        ConfigError
            No engine, or the target is not a pod of this lab.
        ProvisioningError
            The ruleset could not be loaded.
        """
        self._filters.apply_policy(spec, engine=engine)

    def remove_policy(self) -> None:
        """Remove the policy loaded by :meth:`apply_policy` (no-op without one)."""
        self._filters.remove_policy()

    def apply_priority_case(self, case: PriorityCase, spec: PolicySpec) -> None:
        """Load ``case`` as nftables chains in the reference order into the forward path of
        the target pod's node (:func:`~cnibench.backends.lab.policy.nft_priority_ruleset`);
        replaces an earlier case. The verdict of each probe is the kernel's.

        Raises
        ------
        ConfigError
            The target is not a pod of this lab.
        ProvisioningError
            The ruleset could not be loaded.
        """
        self._filters.apply_priority_case(case, spec)

    def remove_priority_case(self) -> None:
        """Remove the table loaded by :meth:`apply_priority_case` (no-op without one)."""
        self._filters.remove_priority_case()

    def apply_l7_policy(self, server: Endpoint, *, port: int, method: str, path: str) -> None:
        """Start nginx in ``server``'s node namespace and redirect ``server:port`` to it.

        Raises
        ------
        ConfigError
            Bad method or path, or ``server`` is not a pod of this lab.
        ProvisioningError
            nginx did not start or the redirect could not be loaded (nothing is left behind).
        """
        self._filters.apply_l7_policy(server, port=port, method=method, path=path)

    def remove_l7_policy(self) -> None:
        """Remove the redirect and stop the L7 proxy (no-op without one)."""
        self._filters.remove_l7_policy()

    def create_split(self, backends: Mapping[str, tuple[Endpoint, int]], *, port: int) -> str:
        """Place a gateway pod on the server node running a weighted nginx upstream over
        ``backends``, published on the node's underlay address at ``port`` (DNAT).

        Returns
        -------
        str
            ``http://<server node underlay ip>:<port>/``, reachable from the external host.

        Raises
        ------
        ConfigError
            A backend that is not a pod of this lab, a negative or all-zero weight.
        ProvisioningError
            The gateway could not be started (nothing is left behind).
        """
        return self._split.create(backends, port=port)

    def remove_split(self) -> None:
        """Remove the split gateway, its DNAT and its pod (no-op without one)."""
        self._split.remove()

    def expose(self, server: Endpoint, ports: Sequence[int], *, proxy: str, others: int) -> Service:
        """A Service in front of ``server`` on every node (virtual IP ``198.18.192.1``,
        NodePorts from 30001; TCP and UDP on each of ``ports``) after ``others`` further ones,
        programmed by ``proxy`` (``iptables``: kube-proxy's chains; ``nftables``: a map).

        Raises
        ------
        ConfigError
            An unknown proxy, a pod not of this lab, ``others`` out of range.
        ProvisioningError
            A node refused the rules (what was loaded is removed by :meth:`remove_service`).
        """
        return self._services.expose(server, ports, proxy=proxy, others=others)

    def remove_service(self) -> None:
        """Remove the Services from every node (no-op without one)."""
        self._services.remove()

    def free_service_address(self) -> str:
        """The virtual IP after the last Service's."""
        return self._services.free_address()

    def add_service(self, server: Endpoint, port: int, *, address: str) -> None:
        """One more Service at ``address`` (see :meth:`LabServices.add`)."""
        self._services.add(server, port, address=address)

    # -- verification -----------------------------------------------------------------------

    def encryption_status(self) -> EncryptionStatus:
        """WireGuard status of every node from ``wg show <if> dump``.

        Each node first opens a TCP connection to every peer's tunnel address (refused, but
        only after a round trip through the tunnel, like a ping) so that handshakes exist;
        ``peers`` counts configured peers with an endpoint, and ``detail`` has the raw dumps
        and how many handshakes completed.
        """
        return self._wireguard.status()

    def capture_underlay(self, marker: bytes, send: Sequence[str], *, source: Endpoint) -> bool:
        """Capture on the underlay bridge while ``send`` runs in ``source``; look for ``marker``.

        Raises
        ------
        cnibench.errors.ToolError
            If the capture cannot start or ``send`` fails (then nothing can be concluded).
        """
        self._runtime.check_alive()
        pod = self._pods.own(source)
        return self._wireguard.capture_underlay(pod, marker, send)

    # -- monitoring -------------------------------------------------------------------------

    def prometheus_url(self) -> str:
        """``http://127.0.0.1:<port>`` forwarding to the lab's Prometheus, once it is ready.

        Raises
        ------
        MetricsError
            If Prometheus does not become ready within 45 s.
        """
        return self._monitoring.prometheus_url()

    def resource_usage(self, *, reset_peak: bool = False) -> dict[str, ResourceUsage]:
        """CPU time and memory of each machine's cgroup (see :class:`Cluster`).

        A machine counts its own processes and its pods', and with ``napi=threaded`` the kernel
        threads that receive its packets. Without that option the receive work, forwarding
        included, runs in the softirq of whichever task sent the packet and is counted there
        (a gateway would look free), so CPU is left out (``None``) and only memory reported.
        """
        names = {f"n{node.index}": node.role.value for node in self._plan.nodes}
        names.update(ext="external", mon="monitoring")
        out: dict[str, ResourceUsage] = {}
        for member, usage in self._cgroups.usage(reset_peak=reset_peak).items():
            if not self._plan.napi_threaded:
                usage = dataclasses.replace(usage, cpu_seconds=None)
            name = names[member]
            known = out.get(name)
            out[name] = usage if known is None else _summed(known, usage)
        return out

    @property
    def warm_up(self) -> WarmUp:
        """None: a lab's first run reads as the runs after it (docs/statistics.md)."""
        return WarmUp()

    @property
    def notes(self) -> tuple[str, ...]:
        """Nothing to tell: the lab makes one namespace per role itself."""
        return ()

    def listen(self, listener: Callable[[str], None]) -> None:
        """Nothing will be told: a lab is made for one session and changes nothing of this
        host's own namespace."""

    def environment(self) -> Environment:
        """Fingerprint of the host and the lab (computed once)."""
        with self._lock:
            if self._environment is None:
                self._environment = environment_fingerprint(
                    backend=self.backend,
                    provider=self.provider,
                    cni=self._spec.cni,
                    cni_version=self.cni_version,
                    nodes={
                        node.name.removeprefix(f"{self.lab_id}-"): {
                            "role": node.role.value,
                            "ip": node.underlay_ip,
                            "cpus": os.cpu_count() or 0,
                            "shared_host": True,
                        }
                        for node in self._plan.nodes
                    },
                    cni_values=self._cni_values(),
                    tool_versions=tool_versions(),
                )
            return self._environment

    def _cni_values(self) -> dict[str, Any]:
        values: dict[str, Any] = {
            "datapath": self._plan.datapath.value,
            "encryption": self._spec.encryption,
            "pod_mtu": self._plan.pod_mtu,
            "napi": "threaded" if self._plan.napi_threaded else "inline",
            "cpu_per_node": self._cgroups.available,
        }
        if self._plan.datapath is LabDatapath.VXLAN:
            values.update(
                vxlan_vni=VXLAN_VNI, vxlan_port=VXLAN_PORT, vxlan_mtu=self._plan.vxlan_mtu
            )
        if self._plan.encryption:
            values.update(
                wireguard_implementation=self._wireguard.implementation,
                wireguard_mtu=self._plan.wg_mtu,
            )
        return values

    # -- teardown ---------------------------------------------------------------------------

    def teardown(self) -> None:
        """Remove everything the lab created; safe to call twice.

        Stops the port-forward, every process by PID (SIGTERM, bounded wait, SIGKILL), any
        other process left in a lab namespace, deletes the namespaces (and so their links),
        wireguard-go control sockets and the state directory.

        Raises
        ------
        ProvisioningError
            If something could not be removed (everything else is still removed).
        """
        with self._lock, signals_deferred():
            if self._runtime.torn_down:
                return
            self._runtime.torn_down = True
            atexit.unregister(self.teardown)
            problems: list[str] = []
            self._monitoring.stop_forward()
            stuck = stop_processes(list(self._runtime.processes.values()))
            problems += [f"process {name} did not stop" for name in stuck]
            self._runtime.processes.clear()
            # The node namespaces take the policy and priority tables with them.
            self._filters.forget_tables()
            self._services.forget()
            namespaces = self._lab_namespaces()
            leftovers = [pid for pids in pids_in_namespaces(namespaces).values() for pid in pids]
            if leftovers:
                problems += [f"pid {pid} survived SIGKILL" for pid in stop_pids(leftovers)]
            if namespaces:
                try:
                    run_step(namespace_removal_step(namespaces))
                except ProvisioningError as exc:
                    problems.append(str(exc))
            self._wireguard.remove_sockets()
            problems += [f"cgroup {d} remains" for d in self._cgroups.remove()]
            self._pods.clear()
            shutil.rmtree(self._plan.state_dir, ignore_errors=True)
            if self._plan.state_dir.exists():
                problems.append(f"state directory {self._plan.state_dir} remains")
            remaining = self._lab_namespaces()
            if remaining:
                problems.append(f"namespaces remain: {', '.join(remaining)}")
        if problems:
            raise ProvisioningError(f"teardown of lab {self.lab_id}: " + "; ".join(problems))

    def _lab_namespaces(self) -> list[str]:
        prefix = f"{self.lab_id}-"
        try:
            names = sorted(name for name in os.listdir(NETNS_DIR) if name.startswith(prefix))
        except FileNotFoundError:
            return []
        # Pods first, the underlay last: cosmetic, the kernel handles any order.
        return sorted(names, key=lambda n: (n == self._plan.underlay_namespace, n))


def _summed(a: ResourceUsage, b: ResourceUsage) -> ResourceUsage:
    """Two machines of one role as one (memory unknown if either's is)."""

    def add(x: int | None, y: int | None) -> int | None:
        return None if x is None or y is None else x + y

    cpu = None if a.cpu_seconds is None or b.cpu_seconds is None else a.cpu_seconds + b.cpu_seconds
    return ResourceUsage(
        cpu,
        add(a.memory_bytes, b.memory_bytes),
        add(a.memory_peak_bytes, b.memory_peak_bytes),
    )


def _adopt_napi_pollers(cgroups: LabCgroups, member: str, namespace: str, *, lab_id: str) -> None:
    """Move the NAPI pollers of ``namespace``'s uplink into ``member``'s cgroups.

    A poller can end between the listing and the move (the device's NAPI instances re-created)
    and its PID go to another kernel thread, which the cgroup refuses (EINVAL): the pollers are
    listed again every :data:`NAPI_ADOPT_PAUSE_S` for up to :data:`NAPI_ADOPT_S` seconds.

    Raises
    ------
    ProvisioningError
        The uplink has no poller (at once), or the cgroup still refuses one at the end (with
        the cgroup's last refusal).
    """
    netns = os.path.join(NETNS_DIR, namespace)
    refusal = ""

    def moved() -> bool:
        nonlocal refusal
        pids = napi_thread_pids(netns, [NODE_UPLINK])[NODE_UPLINK]
        if not pids:
            raise ProvisioningError(
                f"lab {lab_id}: {NODE_UPLINK} of {namespace} has no NAPI thread after"
                " threading was switched on (this kernel does not thread veth NAPI)"
            )
        try:
            cgroups.adopt(member, pids)
        except ProvisioningError as exc:
            refusal = str(exc)
            return False
        return True

    wait_for(
        moved,
        timeout=NAPI_ADOPT_S,
        what=f"the NAPI pollers of {namespace} to move into the cgroup of {member}",
        interval=NAPI_ADOPT_PAUSE_S,
        last_seen=lambda: refusal,
        error=lambda message: ProvisioningError(f"lab {lab_id}: {message}"),
    )
