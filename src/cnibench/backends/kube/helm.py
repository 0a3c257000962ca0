"""Helm command lines for installing a CNI chart (pure: argv and values files only)."""

from __future__ import annotations

from pathlib import Path

import yaml

from cnibench.backends.kube.cni_types import HelmChart

__all__ = ["helm_install_argv", "helm_template_argv", "write_values"]


def write_values(chart: HelmChart, directory: Path) -> Path:
    """Write ``chart.values`` to ``<directory>/<release>-values.yaml`` and return the path."""
    path = directory / f"{chart.release}-values.yaml"
    path.write_text(yaml.safe_dump(dict(chart.values), sort_keys=True))
    return path


def helm_install_argv(
    chart: HelmChart, values_file: Path, *, kubeconfig: Path, context: str = ""
) -> list[str]:
    """``helm upgrade --install`` of the pinned chart version from its repository (or an
    ``oci://`` chart, which takes no ``--repo``; or a local chart directory, whose version is
    the directory's), waiting for nothing (readiness is checked by cnibench, per
    :class:`~cnibench.backends.kube.cni.Readiness`)."""
    if chart.path:
        source = [chart.path]
    elif chart.chart.startswith("oci://"):
        source = [chart.chart, "--version", chart.version]
    else:
        source = [chart.chart, "--repo", chart.repo, "--version", chart.version]
    argv = [
        "helm",
        "upgrade",
        "--install",
        chart.release,
        *source,
        "--namespace",
        chart.namespace,
        "--create-namespace",
        "--values",
        str(values_file),
        "--kubeconfig",
        str(kubeconfig),
    ]
    if context:
        argv += ["--kube-context", context]
    return argv


def helm_template_argv(
    chart_dir: Path, values_file: Path, *, release: str, namespace: str, kube_version: str = ""
) -> list[str]:
    """``helm template`` of a local chart directory (validates values against the chart's
    ``values.schema.json``; no cluster needed)."""
    argv = [
        "helm",
        "template",
        release,
        str(chart_dir),
        "--namespace",
        namespace,
        "--values",
        str(values_file),
    ]
    if kube_version:
        argv += ["--kube-version", kube_version]
    return argv
