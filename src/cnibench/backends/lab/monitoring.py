"""The lab's monitoring: node-exporter per node, Prometheus in the monitoring namespace.

:class:`LabMonitoring` starts them at provisioning and reaches Prometheus through an in-process
port-forward (:class:`~cnibench.backends.lab.portforward.NamespacePortForward`).
"""

from __future__ import annotations

import urllib.error
import urllib.request

from cnibench.backends.lab.plan import (
    MONITOR_IP,
    NODE_EXPORTER_PORT,
    NODE_UPLINK,
    PROMETHEUS_PORT,
    VXLAN_INTERFACE,
    LabDatapath,
    NodePlan,
    prometheus_yaml,
)
from cnibench.backends.lab.portforward import NamespacePortForward
from cnibench.backends.lab.runner import NETNS_DIR, ManagedProcess, wait_listening
from cnibench.backends.lab.runtime import READY_TIMEOUT, LabRuntime
from cnibench.errors import MetricsError
from cnibench.waiting import wait_for

__all__ = ["LabMonitoring"]

_PROMETHEUS_READY_TIMEOUT = 45.0


class LabMonitoring:
    """Exporters, Prometheus and the port-forward to it, of one lab."""

    def __init__(self, runtime: LabRuntime) -> None:
        self._runtime = runtime
        self._forward: NamespacePortForward | None = None
        self._prometheus_url = ""
        self.prometheus: ManagedProcess | None = None
        """The Prometheus process, once started."""

    def start(self) -> None:
        """Start every node's exporter and Prometheus; return once the exporters listen.

        Raises
        ------
        cnibench.errors.ProvisioningError
            If one did not start.
        """
        runtime = self._runtime
        plan = runtime.plan
        exporters = [
            runtime.start(
                f"{node.name}/node-exporter",
                node.name,
                [
                    "prometheus-node-exporter",
                    f"--web.listen-address={node.underlay_ip}:{NODE_EXPORTER_PORT}",
                    "--collector.disable-defaults",
                    "--collector.cpu",
                    "--collector.meminfo",
                    "--collector.netdev",
                    "--collector.stat",
                    "--collector.loadavg",
                    "--collector.netdev.device-exclude=",
                    f"--collector.netdev.device-include={self._netdev_regex(node)}",
                ],
                log_path=runtime.log(f"{node.name}-node-exporter"),
            )
            for node in plan.nodes
        ]
        prom_dir = plan.state_dir / "prometheus"
        config = prom_dir / "prometheus.yml"
        config.write_text(prometheus_yaml(plan))
        self.prometheus = runtime.start(
            "mon/prometheus",
            plan.monitor.name,
            [
                "prometheus",
                f"--config.file={config}",
                f"--storage.tsdb.path={prom_dir / 'data'}",
                f"--web.listen-address={MONITOR_IP}:{PROMETHEUS_PORT}",
                "--storage.tsdb.retention.time=1d",
                "--log.level=warn",
            ],
            log_path=runtime.log("prometheus"),
        )
        for proc, node in zip(exporters, plan.nodes, strict=True):
            wait_listening(proc, node.underlay_ip, NODE_EXPORTER_PORT, timeout=READY_TIMEOUT)

    def _netdev_regex(self, node: NodePlan) -> str:
        # Only the uplink and tunnels: hundreds of pod veths would only add series.
        devices = [NODE_UPLINK]
        if node.wg_interface:
            devices.append(node.wg_interface)
        if self._runtime.plan.datapath is LabDatapath.VXLAN:
            devices.append(VXLAN_INTERFACE)
        return f"^({'|'.join(devices)})$"

    def prometheus_url(self) -> str:
        """See :meth:`LabCluster.prometheus_url`."""
        runtime = self._runtime
        runtime.check_alive()
        with runtime.lock:
            if self._prometheus_url and self._forward is not None and self._forward.running:
                return self._prometheus_url
            forward = NamespacePortForward(
                NETNS_DIR / runtime.plan.monitor.name, (MONITOR_IP, PROMETHEUS_PORT)
            )
            port = forward.start()
            self._forward = forward
            url = f"http://127.0.0.1:{port}"
        last = ""

        def ready() -> bool:
            nonlocal last
            prometheus = self.prometheus
            if prometheus is not None and prometheus.popen.poll() is not None:
                raise MetricsError(f"the lab's Prometheus exited: {prometheus.log_tail()}")
            try:
                with urllib.request.urlopen(f"{url}/-/ready", timeout=2) as response:
                    return bool(response.status == 200)
            except (urllib.error.URLError, OSError) as exc:
                last = str(exc)
            return False

        wait_for(
            ready,
            timeout=_PROMETHEUS_READY_TIMEOUT,
            what="the lab's Prometheus to be ready",
            interval=0.2,
            last_seen=lambda: last,
            error=MetricsError,
        )
        with runtime.lock:
            self._prometheus_url = url
        return url

    def stop_forward(self) -> None:
        """Stop the port-forward to Prometheus (teardown; no-op without one)."""
        if self._forward is not None:
            self._forward.stop()
            self._forward = None
