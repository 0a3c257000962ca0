"""What runs inside the lab's namespaces: the server processes of a workload (iperf3,
sockperf, nginx as an HTTP echo) with their configuration, and Prometheus' configuration.
The only part of the plan that imports the tool adapters and YAML.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from cnibench.backends.base import WorkloadKind, WorkloadSpec
from cnibench.backends.lab.plan.addresses import NODE_EXPORTER_PORT
from cnibench.backends.lab.plan.topology import LabPlan, PodPlan
from cnibench.errors import ConfigError
from cnibench.tools.iperf3 import iperf3_server_argv
from cnibench.tools.sockperf import PINNED_CPU, sockperf_server_argv

__all__ = [
    "WorkloadProcess",
    "nginx_echo_config",
    "prometheus_yaml",
    "workload_processes",
]


@dataclass(frozen=True)
class WorkloadProcess:
    """A server process a workload needs.

    Attributes
    ----------
    name:
        Process name in the lab (pid files, logs), unique within the pod.
    argv:
        Command run inside the pod namespace.
    port:
        TCP port that is listening once the process is ready.
    config:
        ``(path, text)`` of a configuration file to write first, or ``None``.
    """

    name: str
    argv: tuple[str, ...]
    port: int
    config: tuple[Path, str] | None = None


def nginx_echo_config(pod_name: str, ip: str, port: int, run_dir: Path) -> str:
    """nginx configuration of an HTTP echo answering every path with 200 and the pod's name.

    The body is ``<pod name>\\n`` and every response carries ``X-Backend: <pod name>``. Sized
    for wrk's 1000 connections: two workers with 8192 connections each; pid, temp and log paths
    live in ``run_dir`` so nothing of the host's nginx is touched.
    """
    if not re.fullmatch(r"[A-Za-z0-9_.-]+", pod_name):
        raise ConfigError(f"pod name {pod_name!r} may only contain letters, digits, '_', '.', '-'")
    # nginx creates only the last component of a temp path, so they sit directly in run_dir.
    temp = run_dir
    return "\n".join(
        [
            "worker_processes 2;",
            "worker_rlimit_nofile 20000;",
            f"pid {run_dir / 'nginx.pid'};",
            f"error_log {run_dir / 'nginx-error.log'} warn;",
            "events {",
            "  worker_connections 8192;",
            "}",
            "http {",
            "  access_log off;",
            f"  client_body_temp_path {temp}/temp-body;",
            f"  proxy_temp_path {temp}/temp-proxy;",
            f"  fastcgi_temp_path {temp}/temp-fastcgi;",
            f"  uwsgi_temp_path {temp}/temp-uwsgi;",
            f"  scgi_temp_path {temp}/temp-scgi;",
            "  keepalive_requests 100000;",
            "  server {",
            f"    listen {ip}:{port} backlog=4096;",
            "    location / {",
            "      default_type text/plain;",
            f'      add_header X-Backend "{pod_name}" always;',
            f'      return 200 "{pod_name}\\n";',
            "    }",
            "  }",
            "}",
            "",
        ]
    )


def workload_processes(
    pod: PodPlan, workload: WorkloadSpec, run_dir: Path
) -> tuple[WorkloadProcess, ...]:
    """Server processes for ``workload`` in ``pod`` (configs live in ``run_dir``).

    sockperf gets two servers on the same port, UDP (its default) and TCP, so that clients can
    use either and readiness can be checked on the TCP one.
    """
    port = workload.port
    if not 0 < port < 65536:
        raise ConfigError(f"workload port {port} is outside 1..65535")
    if workload.kind is WorkloadKind.LOAD_GENERATOR:
        raise ConfigError("the lab runs locust on this host, never in a pod (load_in_pods)")
    if workload.kind is WorkloadKind.IPERF3_SERVER:
        return (
            WorkloadProcess(
                f"iperf3-{port}",
                tuple(iperf3_server_argv(port=port, one_off=False, bind=pod.ip)),
                port,
            ),
        )
    if workload.kind is WorkloadKind.SOCKPERF_SERVER:
        return (
            WorkloadProcess(
                f"sockperf-udp-{port}",
                tuple(sockperf_server_argv(port=port, bind=pod.ip, cpu=PINNED_CPU)),
                port,
            ),
            WorkloadProcess(
                f"sockperf-tcp-{port}",
                tuple(sockperf_server_argv(port=port, bind=pod.ip, tcp=True, cpu=PINNED_CPU)),
                port,
            ),
        )
    if workload.kind is WorkloadKind.HTTP_ECHO:
        conf_dir = run_dir / f"nginx-{port}"
        conf = conf_dir / "nginx.conf"
        return (
            WorkloadProcess(
                f"nginx-{port}",
                (
                    "nginx",
                    "-c",
                    str(conf),
                    "-p",
                    str(conf_dir),
                    "-e",
                    str(conf_dir / "nginx-error.log"),
                    "-g",
                    "daemon off;",
                ),
                port,
                (conf, nginx_echo_config(pod.name, pod.ip, port, conf_dir)),
            ),
        )
    raise ConfigError(f"unknown workload kind {workload.kind!r}")


def prometheus_yaml(plan: LabPlan, *, scrape_interval: str = "1s") -> str:
    """Prometheus configuration scraping every node's node-exporter.

    Each target is labelled ``node=<node name>``, ``role=<role>`` and ``instance=<node name>``,
    so query results can be keyed by node without knowing lab addresses.
    """
    config: dict[str, Any] = {
        "global": {
            "scrape_interval": scrape_interval,
            "scrape_timeout": scrape_interval,
            "evaluation_interval": scrape_interval,
        },
        "scrape_configs": [
            {
                "job_name": "node",
                "static_configs": [
                    {
                        "targets": [f"{node.underlay_ip}:{NODE_EXPORTER_PORT}"],
                        "labels": {
                            "node": node.name,
                            "role": node.role.value,
                            "instance": node.name,
                        },
                    }
                    for node in plan.nodes
                ],
            }
        ],
    }
    return yaml.safe_dump(config, sort_keys=False)
