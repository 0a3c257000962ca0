"""The embedded lab backend: a cluster made of Linux network namespaces on this host.

Nodes are namespaces on an underlay bridge, pods are namespaces attached to their node by veth,
an external host and a monitoring host (Prometheus) sit on the underlay. Datapaths
``routed`` (like kindnet) and ``vxlan`` (like flannel), each optionally encrypted with WireGuard
(kernel or wireguard-go). Every object carries a lab id ``cb<6 hex>`` so labs run side by side
and :func:`clean_leftovers` finds what crashed runs left.

Layout: :mod:`~cnibench.backends.lab.plan` (pure planning), :mod:`~cnibench.backends.lab.runner`
(commands and processes), :mod:`~cnibench.backends.lab.cluster` (the Cluster: a façade over
:mod:`~cnibench.backends.lab.runtime` and one module per feature: ``pods``, ``external``,
``egress``, ``wireguard``, ``filters``, ``split``, ``monitoring``),
:mod:`~cnibench.backends.lab.features` (doctor, tool versions), :mod:`~cnibench.backends.lab.clean`.

Each name is imported from its module on first use (:mod:`cnibench._lazy`): planning a lab
(:mod:`~cnibench.backends.lab.plan`) comes without the results store and its pandas.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from cnibench._lazy import lazy_exports

if TYPE_CHECKING:
    from cnibench.backends.lab.backend import (
        DEFAULT_STATE_ROOT,
        LabBackend,
    )
    from cnibench.backends.lab.clean import (
        CleanReport,
        clean_leftovers,
    )
    from cnibench.backends.lab.cluster import (
        LabCluster,
        LabEgressServerFuture,
        LabExternalHost,
        LabPod,
        parse_wg_dump,
        redact_wg_dump,
    )
    from cnibench.backends.lab.features import (
        FeatureCheck,
        LabFeatures,
        doctor_rows,
        parse_tool_version,
        tool_versions,
    )
    from cnibench.backends.lab.plan import (
        UNDERLAY_DEVICE_REGEX,
        LabDatapath,
        LabPlan,
        plan_lab,
    )

__all__ = [
    "DEFAULT_STATE_ROOT",
    "UNDERLAY_DEVICE_REGEX",
    "CleanReport",
    "FeatureCheck",
    "LabBackend",
    "LabCluster",
    "LabDatapath",
    "LabEgressServerFuture",
    "LabExternalHost",
    "LabFeatures",
    "LabPlan",
    "LabPod",
    "clean_leftovers",
    "doctor_rows",
    "parse_tool_version",
    "parse_wg_dump",
    "plan_lab",
    "redact_wg_dump",
    "tool_versions",
]

_MODULE_OF = {
    "DEFAULT_STATE_ROOT": "backend",
    "LabBackend": "backend",
    "CleanReport": "clean",
    "clean_leftovers": "clean",
    "LabCluster": "cluster",
    "LabEgressServerFuture": "cluster",
    "LabExternalHost": "cluster",
    "LabPod": "cluster",
    "parse_wg_dump": "cluster",
    "redact_wg_dump": "cluster",
    "FeatureCheck": "features",
    "LabFeatures": "features",
    "doctor_rows": "features",
    "parse_tool_version": "features",
    "tool_versions": "features",
    "UNDERLAY_DEVICE_REGEX": "plan",
    "LabDatapath": "plan",
    "LabPlan": "plan",
    "plan_lab": "plan",
}

__getattr__ = lazy_exports(__name__, _MODULE_OF)
