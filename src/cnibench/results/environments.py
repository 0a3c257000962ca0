"""Environment fingerprints: taking one of this host (:func:`environment_fingerprint`) and
reading them back (:func:`load_environments`)."""

from __future__ import annotations

import os
import platform
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pandas as pd

from cnibench.errors import ResultsError
from cnibench.records import Environment, ParamValue
from cnibench.results.files import (
    OnError,
    _check_on_error,
    _handle,
    _json_text,
    _read_json,
)
from cnibench.results.layout import (
    _ENVIRONMENT_FILE,
    _ENVIRONMENT_SCHEMA,
    _ENVIRONMENTS_DIR,
    _session_environment_files,
    _sources,
)
from cnibench.results.redaction import redact

__all__ = ["ENVIRONMENT_COLUMNS", "environment_fingerprint", "load_environments"]


ENVIRONMENT_COLUMNS: tuple[str, ...] = (
    "session_id",
    "environment_id",
    "kernel",
    "cpu_model",
    "cpu_count",
    "memory_bytes",
    "python",
    "cnibench_version",
    "backend",
    "provider",
    "cni",
    "cni_version",
    "nodes",
    "cni_values",
    "tool_versions",
    "datapath_settings",
)
"""Columns of :func:`load_environments`; ``nodes``, ``cni_values``, ``tool_versions`` and
``datapath_settings`` (what the running cluster reported, :attr:`Environment.
datapath_settings`; ``{}`` in fingerprints written before it) are JSON text."""


# --------------------------------------------------------------------------------------------
# Reading fingerprints
# --------------------------------------------------------------------------------------------


def _environment_files(path: Path) -> Iterator[Path]:
    if path.is_file() and (path.name == _ENVIRONMENT_FILE or path.parent.name == _ENVIRONMENTS_DIR):
        yield path
        return
    for source in _sources(path):
        if source.session_dir is not None:
            yield from _session_environment_files(source.session_dir)


def _session_name(file: Path) -> str:
    parent = file.parent
    return parent.parent.name if parent.name == _ENVIRONMENTS_DIR else parent.name


def load_environments(path: str | os.PathLike[str], *, on_error: OnError = "raise") -> pd.DataFrame:
    """The environment fingerprints under ``path``, one row per cluster of each session.

    Parameters
    ----------
    path:
        As for :func:`load_results`, or one fingerprint file (``environments/<id>.json``, or
        the ``environment.json`` of older versions).
    on_error:
        As for :func:`load_results`.

    Returns
    -------
    pandas.DataFrame
        Columns :data:`ENVIRONMENT_COLUMNS` (``cpu_count`` and ``memory_bytes`` int64, the
        mappings as JSON text): one row per distinct fingerprint (a session on ``routed`` and
        ``vxlan`` has two), ordered by session, then by ``environment_id``; a record's
        ``environment_id`` names its row. Sessions without a fingerprint have no row.

    Raises
    ------
    ResultsError
        If ``path`` does not exist, or (``on_error="raise"``) a file is unreadable or corrupted.
    """
    _check_on_error(on_error)
    target = Path(path)
    if not target.exists():
        raise ResultsError(f"results path {target} does not exist")
    rows: list[dict[str, Any]] = []
    for file in _environment_files(target):
        try:
            document = _read_json(file, _ENVIRONMENT_SCHEMA)
            row = {
                "session_id": str(document.get("session_id", _session_name(file))),
                "environment_id": str(document["environment_id"]),
                "kernel": str(document["kernel"]),
                "cpu_model": str(document["cpu_model"]),
                "cpu_count": int(document["cpu_count"]),
                "memory_bytes": int(document["memory_bytes"]),
                "python": str(document["python"]),
                "cnibench_version": str(document["cnibench_version"]),
                "backend": str(document.get("backend", "")),
                "provider": str(document.get("provider", "")),
                "cni": str(document.get("cni", "")),
                "cni_version": str(document.get("cni_version", "")),
                "nodes": _json_text(document.get("nodes", {})),
                "cni_values": _json_text(_cni_values(document)),
                "tool_versions": _json_text(document.get("tool_versions", {})),
                "datapath_settings": _json_text(document.get("datapath_settings", {})),
            }
        except (KeyError, TypeError, ValueError) as exc:
            _handle(ResultsError(f"corrupted results file {file}: missing or bad {exc}"), on_error)
            continue
        except ResultsError as exc:
            _handle(exc, on_error)
            continue
        rows.append(row)
    frame = pd.DataFrame(
        {
            column: pd.Series(
                [row[column] for row in rows],
                dtype="int64" if column in {"cpu_count", "memory_bytes"} else str,
            )
            for column in ENVIRONMENT_COLUMNS
        }
    )
    return frame


def _cni_values(document: Mapping[str, Any]) -> Any:
    """A fingerprint's ``cni_values``, older lab sessions' ``profile`` read as ``datapath`` (the
    name the lab's datapath has had since it stopped sharing a word with ``--profile``)."""
    values = document.get("cni_values", {})
    if document.get("backend") == "lab" and isinstance(values, dict) and "profile" in values:
        values = {("datapath" if k == "profile" else k): v for k, v in values.items()}
    return values


# --------------------------------------------------------------------------------------------
# Environment fingerprint
# --------------------------------------------------------------------------------------------


def _read_text(path: str) -> str:
    try:
        return Path(path).read_text(errors="replace")
    except OSError:
        return ""


def _cpu_model(cpuinfo: str) -> str:
    for line in cpuinfo.splitlines():
        key, _, value = line.partition(":")
        if key.strip() in ("model name", "Model", "cpu model", "Processor") and value.strip():
            return value.strip()
    return platform.processor() or platform.machine() or "unknown"


def _memory_bytes(meminfo: str) -> int:
    for line in meminfo.splitlines():
        if line.startswith("MemTotal:"):
            amount, _, unit = line.split(":", 1)[1].strip().partition(" ")
            return int(amount) * (1024 if unit.strip().lower() == "kb" else 1)
    return 0


def environment_fingerprint(
    *,
    backend: str = "",
    provider: str = "",
    cni: str = "",
    cni_version: str = "",
    nodes: Mapping[str, Mapping[str, ParamValue]] | None = None,
    cni_values: Mapping[str, Any] | None = None,
    tool_versions: Mapping[str, str] | None = None,
    datapath_settings: Mapping[str, str] | None = None,
) -> Environment:
    """Fingerprint of this host and what is benchmarked on it.

    Reads the kernel release, CPU model (``/proc/cpuinfo``), logical CPU count, total memory
    (``/proc/meminfo``), Python and cnibench versions. Environment variables are never read,
    and ``nodes`` and ``cni_values`` pass through :func:`redact`, so no credential ends up in
    the results.

    Parameters
    ----------
    backend, provider, cni, cni_version:
        What is benchmarked (see :class:`~cnibench.records.Environment`).
    nodes:
        Node name to description (role, CPUs, memory in bytes).
    cni_values:
        Helm values or lab options of the CNI.
    tool_versions:
        Tool name to version string, as reported by the backend.
    datapath_settings:
        Data-path settings as the running cluster reports them
        (:attr:`~cnibench.records.Environment.datapath_settings`).

    Returns
    -------
    Environment
        The fingerprint; ``memory_bytes`` in bytes.
    """
    import cnibench  # the package imports this module lazily; importing it here is safe

    return Environment(
        kernel=platform.release(),
        cpu_model=_cpu_model(_read_text("/proc/cpuinfo")),
        cpu_count=os.cpu_count() or 0,
        memory_bytes=_memory_bytes(_read_text("/proc/meminfo")),
        python=platform.python_version(),
        cnibench_version=cnibench.__version__,
        backend=backend,
        provider=provider,
        cni=cni,
        cni_version=cni_version,
        nodes=redact(nodes or {}),
        cni_values=redact(cni_values or {}),
        tool_versions=dict(tool_versions or {}),
        datapath_settings=dict(datapath_settings or {}),
    )
