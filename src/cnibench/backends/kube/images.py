"""Pinned container images of the Kubernetes backend: the one place to change them.

Images are referenced by tag (the kind node image also by digest); override any of them with
:meth:`Images.from_environment` (``CNIBENCH_IMAGE_<FIELD>``, e.g. ``CNIBENCH_IMAGE_TOOLS``) or
by passing an :class:`Images` to the backend. Nothing here is pulled by cnibench itself: the
cluster's runtime pulls them.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass

__all__ = ["Images"]


@dataclass(frozen=True)
class Images:
    """Images of the pods cnibench runs in a cluster.

    Attributes
    ----------
    tools:
        Client pod and iperf3 server: netshoot carries iperf3, curl, ab, tcpdump.
    sockperf:
        Image with ``sockperf`` on PATH. No maintained public image is known, so it defaults
        to ``""`` and a sockperf workload is refused with a clear error until one is set.
    http_echo:
        nginx; the echo configuration (pod name in body and ``X-Backend`` header) is written
        by the pod's command, so no custom image is needed.
    prometheus:
        Prometheus server.
    node_exporter:
        Prometheus node-exporter.
    kind_node:
        kind node image, pinned by tag and digest as the kind v0.30.0 release notes list it
        (the release that built it: use kind >= v0.30.0). Kubernetes v1.33, a minor every
        pinned CNI supports and the version the kube test tier's API server is built from.
    """

    tools: str = "docker.io/nicolaka/netshoot:v0.13"
    sockperf: str = ""
    http_echo: str = "docker.io/library/nginx:1.27.5-alpine"
    prometheus: str = "quay.io/prometheus/prometheus:v3.5.0"
    node_exporter: str = "quay.io/prometheus/node-exporter:v1.9.1"
    kind_node: str = (
        "docker.io/kindest/node:v1.33.4"
        "@sha256:25a6018e48dfcaee478f4a59af81157a437f15e6e140bf103f85a2e7cd0cbbf2"
    )

    @classmethod
    def from_environment(cls, environ: Mapping[str, str]) -> Images:
        """Defaults overridden by ``CNIBENCH_IMAGE_<FIELD>`` variables of ``environ``."""
        overrides = {
            f.name: environ[f"CNIBENCH_IMAGE_{f.name.upper()}"]
            for f in dataclasses.fields(cls)
            if f"CNIBENCH_IMAGE_{f.name.upper()}" in environ
        }
        return cls(**overrides)
