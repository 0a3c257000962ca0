"""Results where other tools look: the runs and the verdict's contrasts as CSV, Parquet, JSON
or OpenSearch bulk NDJSON (``cnibench export``), and the verdict as JSON (``--json``).

Layout of each format (``dest`` is the ``-o FILE`` of ``cnibench export``):

- ``csv``, ``parquet``: one file per table. ``dest`` holds the runs (the tidy records of
  :func:`cnibench.results.load_results`, every column, per-pair rows included); its sibling
  ``<stem>-contrasts<suffix>`` the contrasts (:func:`cnibench.report.verdict`, every column
  of :data:`~cnibench.report.verdict.VERDICT_COLUMNS`). CSV writes ``time`` as ISO 8601
  with ``+00:00`` (``pd.read_csv(dest, parse_dates=["time"])``); Parquet keeps every dtype.
- ``json``: one object ``{"schema": "cnibench.export", "version": 1, "runs": [...],
  "contrasts": [...]}``, one JSON object per row with the columns of the CSV files; ``time``
  as ISO 8601, NaN, infinities and missing values as ``null``.
- ``opensearch``: bulk NDJSON for OpenSearch's (or Elasticsearch's) ``_bulk`` API: per run
  and metric an action line ``{"index": {"_index": INDEX, "_id": "<uuid>/<run_id>/<metric>"}}``
  (so importing the same runs again replaces their documents) then the document. Only the
  run's own value of a metric is a document (the ``pair``-less row: with ``--pairs``, the
  aggregate, as every statistic counts it); per-pair values are in the other formats.

Every file is written atomically (:func:`cnibench.results.atomic_write_bytes`: a temporary file
in the same directory, then a rename), so a reader never sees half a file; an existing file
is replaced, as ``cnibench report`` replaces its HTML. Every table is built before the first
file is written. The destination's directory must exist and be writable; what it names, the
format and the suffix are checked before any result is read (:func:`check_destination`).

OpenSearch document fields, named as k8s-netperf's documents name the same thing (its
``pkg/archive`` ``Doc``) where the meaning truly matches, and with cnibench's own names
otherwise:

===================== ================================================================
``uuid``              the session id (k8s-netperf: one id per benchmark invocation)
``timestamp``         the run's start, ISO 8601 in UTC
``driver``            the measurement tool (``param_tool``: iperf3, sockperf, ...), only
                      on runs that record it
``throughput``,       ``throughput`` in Mb/s (from bits/s), only on the ``throughput``
``tputMetric``        metric's documents; ``tputMetric`` is ``"Mb/s"``
``latency``,          ``latency_p99`` in µs (from ``us`` or ``ms``), only on that metric's
``ltcyMetric``        documents; ``ltcyMetric`` is ``"usec"`` (k8s-netperf's latency is P99)
``metadata``          the environment fingerprint of the run's cluster
                      (:func:`cnibench.results.load_environments`): ``kernel`` (k8s-netperf's
                      name too), ``environment_id``, ``cpu_model``, ``cpu_count``,
                      ``memory_bytes``, ``python``, ``cnibench_version``, ``backend``,
                      ``provider``, ``cni``, ``cni_version``, ``tool_versions`` (an object),
                      ``nodes`` and ``cni_values`` (JSON text: their keys are node names and
                      Helm paths, which would each become a field of the index)
===================== ================================================================

cnibench's own names: ``run_id`` (without the session prefix), ``backend``, ``provider``,
``cni``, ``cni_version``, ``scenario``, ``condition``, ``repetition``, ``metric``, ``value``
(``null`` for a failed run), ``unit``, ``verified``, ``status``, ``reason``, ``parameters``
and ``options`` (objects). Not mapped, because the meaning differs: k8s-netperf's
``profile`` is a traffic type (``TCP_STREAM``), not cnibench's ``--profile``;
``parallelism`` counts client processes, not ``--pairs`` pods; ``service`` is a yes/no where
cnibench records ``param_target`` (pod, service, nodeport); ``platform``, ``duration``,
``samples``, ``messageSize``, ``hostNetwork`` and ``kubeletVersion`` are not recorded.
"""

from __future__ import annotations

import importlib.util
import io
import json
import math
import os
import re
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from cnibench.errors import ConfigError
from cnibench.results import (
    ALL_SESSIONS,
    ENVIRONMENT_COLUMNS,
    atomic_write_bytes,
    load_environments,
    load_results,
)

__all__ = [
    "DEFAULT_INDEX",
    "EXPORT_FORMATS",
    "ExportPaths",
    "check_destination",
    "contrast_records",
    "opensearch_bulk",
    "table_records",
    "verdict_json",
    "write_export",
]

EXPORT_FORMATS: tuple[str, ...] = ("csv", "parquet", "json", "opensearch")
"""The formats of :func:`write_export`, in the order ``--format`` lists them."""

DEFAULT_INDEX = "cnibench-results"
"""The OpenSearch index the bulk file's action lines name unless told otherwise."""

_SUFFIX_FORMAT = {".csv": "csv", ".parquet": "parquet", ".json": "json", ".ndjson": "opensearch"}
# OpenSearch refuses upper case, these characters and a leading -, _ or +; cnibench asks for less.
_INDEX_RE = re.compile(r"^[a-z0-9][a-z0-9._-]*$")
_ENVIRONMENT_FIELDS = tuple(
    field for field in ENVIRONMENT_COLUMNS if field not in ("session_id", "tool_versions")
)
"""The environment fingerprint's columns a document's ``metadata`` holds as they are
(``tool_versions`` is added as an object; the session is the document's ``uuid``)."""


@dataclass(frozen=True)
class ExportPaths:
    """Where an export goes."""

    runs: Path
    """The runs (csv, parquet), both tables (json) or the bulk file (opensearch)."""
    contrasts: Path | None
    """The contrasts' sibling file (csv, parquet); ``None`` where ``runs`` holds them."""

    def files(self) -> tuple[Path, ...]:
        """Every file of the export, the runs' first."""
        return (self.runs,) if self.contrasts is None else (self.runs, self.contrasts)


def check_destination(dest: str | os.PathLike[str], export_format: str) -> ExportPaths:
    """The files an export to ``dest`` writes, checked before any result is read.

    Raises
    ------
    ConfigError
        If the format is unknown, ``dest``'s suffix is another format's (``.csv``,
        ``.parquet``, ``.json``, ``.ndjson``), a file to write is a directory, the directory
        is missing or not writable, or ``parquet`` is asked for without pyarrow.
    """
    if export_format not in EXPORT_FORMATS:
        raise ConfigError(
            f"unknown export format {export_format!r}: choose one of {', '.join(EXPORT_FORMATS)}"
        )
    target = Path(dest)
    named = _SUFFIX_FORMAT.get(target.suffix.lower())
    if named is not None and named != export_format:
        raise ConfigError(
            f"export file {target} has the suffix of {named} files, not of {export_format}"
        )
    if export_format == "parquet" and importlib.util.find_spec("pyarrow") is None:
        raise ConfigError("the parquet format needs pyarrow: pip install 'pyarrow>=14'")
    contrasts = (
        target.with_name(f"{target.stem}-contrasts{target.suffix}")
        if export_format in ("csv", "parquet")
        else None
    )
    paths = ExportPaths(runs=target, contrasts=contrasts)
    directory = target.parent
    if not directory.is_dir():
        raise ConfigError(f"cannot write {target}: directory {directory} does not exist")
    if not os.access(directory, os.W_OK | os.X_OK):
        raise ConfigError(f"cannot write {target}: directory {directory} is not writable")
    for path in paths.files():
        if path.is_dir():
            raise ConfigError(f"cannot write {path}: it is a directory")
    return paths


def _json_value(value: Any) -> Any:
    """A cell as JSON: NaN, infinities and missing values as ``None``, times as ISO 8601."""
    if value is None or value is pd.NA or value is pd.NaT:
        return None
    if isinstance(value, pd.Timestamp):
        return value.isoformat()
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def table_records(frame: pd.DataFrame) -> list[dict[str, Any]]:
    """Each row of ``frame`` as a JSON-ready dict, columns in order (see :func:`_json_value`)."""
    columns = [str(column) for column in frame.columns]
    return [
        {column: _json_value(cell) for column, cell in zip(columns, row, strict=True)}
        for row in frame.itertuples(index=False, name=None)
    ]


def contrast_records(table: pd.DataFrame) -> list[dict[str, Any]]:
    """The verdict's contrasts (:func:`cnibench.report.verdict`) as JSON-ready dicts, one per
    row with every column: ``contrast``, ``metric``, ``estimate``, ``ratio``, ``ci_low``,
    ``ci_high``, ``call_level``, ``p_value``, ``p_adjusted``, ``significant``,
    ``equivalent``, ``question``, ``n_treatment``, ``n_control``, ``verdict``, ...; NaN as
    ``None``."""
    return table_records(table)


def verdict_json(table: pd.DataFrame) -> str:
    """The verdict as the JSON text ``--json`` prints: a list of :func:`contrast_records`."""
    return json.dumps(contrast_records(table), indent=2, allow_nan=False, ensure_ascii=False)


def _json_object(text: Any) -> Any:
    if not isinstance(text, str) or not text:
        return {}
    return json.loads(text)


def _environment_metadata(environments: pd.DataFrame) -> dict[tuple[str, str], dict[str, Any]]:
    found: dict[tuple[str, str], dict[str, Any]] = {}
    for row in table_records(environments):
        metadata = {field: row.get(field) for field in _ENVIRONMENT_FIELDS}
        metadata["tool_versions"] = _json_object(row.get("tool_versions"))
        found[(str(row["session_id"]), str(row["environment_id"]))] = metadata
    return found


def _netperf_fields(row: Mapping[str, Any]) -> dict[str, Any]:
    """k8s-netperf's ``throughput``/``tputMetric`` or ``latency``/``ltcyMetric`` where the
    metric is the one k8s-netperf reports there (see the module docstring)."""
    value, unit = row["value"], row["unit"]
    if value is None:
        return {}
    if row["metric"] == "throughput" and unit == "bits/s":
        return {"throughput": value / 1e6, "tputMetric": "Mb/s"}
    if row["metric"] == "latency_p99" and unit in ("us", "ms"):
        return {"latency": value * (1000.0 if unit == "ms" else 1.0), "ltcyMetric": "usec"}
    return {}


def _check_index(index: str) -> None:
    if not _INDEX_RE.match(index):
        raise ConfigError(
            f"invalid OpenSearch index {index!r}: use lower-case letters, digits, '.', '_' and"
            " '-', starting with a letter or digit"
        )


def opensearch_bulk(
    runs: pd.DataFrame,
    environments: pd.DataFrame,
    *,
    index: str = DEFAULT_INDEX,
) -> bytes:
    """The runs as OpenSearch bulk NDJSON: an action line, then a document, per run and metric.

    Parameters
    ----------
    runs:
        Tidy results (:func:`cnibench.results.load_results`); rows with a ``pair`` (a
        ``--pairs`` run's single pairs) are left out.
    environments:
        Fingerprints (:func:`cnibench.results.load_environments`), for each document's
        ``metadata``; a run whose fingerprint is missing gets only its ``environment_id``.
    index:
        The ``_index`` of every action line.

    Returns
    -------
    bytes
        UTF-8 NDJSON ending in a newline (the ``_bulk`` API requires it); the fields are in
        the module docstring.

    Raises
    ------
    ConfigError
        If ``index`` is not a lower-case OpenSearch index name.
    """
    _check_index(index)
    metadata = _environment_metadata(environments)
    lines: list[str] = []
    for row in table_records(runs[runs["pair"].isna()]):
        session = str(row["session_id"])
        run_id = str(row["run_id"]).removeprefix(f"{session}/")
        document: dict[str, Any] = {
            "uuid": session,
            "timestamp": row["time"],
            "run_id": run_id,
            **{
                key: row[key]
                for key in ("backend", "provider", "cni", "cni_version", "scenario", "condition")
            },
            "repetition": row["repetition"],
            "metric": row["metric"],
            "value": row["value"],
            "unit": row["unit"],
            "verified": row["verified"],
            "status": row["status"],
            "reason": row["reason"],
            "parameters": _json_object(row["parameters"]),
            "options": _json_object(row["options"]),
        }
        if row.get("param_tool") is not None:
            document["driver"] = row["param_tool"]
        document.update(_netperf_fields(row))
        environment_id = str(row["environment_id"])
        document["metadata"] = metadata.get(
            (session, environment_id), {"environment_id": environment_id}
        )
        action = {"index": {"_index": index, "_id": f"{session}/{run_id}/{row['metric']}"}}
        lines.append(json.dumps(action, allow_nan=False))
        lines.append(json.dumps(document, allow_nan=False, ensure_ascii=False))
    return "".join(f"{line}\n" for line in lines).encode()


def _table_bytes(frame: pd.DataFrame, export_format: str) -> bytes:
    if export_format == "csv":
        return frame.to_csv(index=False).encode()
    buffer = io.BytesIO()
    frame.to_parquet(buffer, index=False)
    return buffer.getvalue()


def write_export(
    results_dir: str | os.PathLike[str],
    dest: str | os.PathLike[str],
    *,
    export_format: str,
    sessions: Sequence[str] | str = ALL_SESSIONS,
    reference: str | None = None,
    margin: float | None = None,
    index: str = DEFAULT_INDEX,
) -> ExportPaths:
    """Export the results under ``results_dir`` to ``dest`` (layout: the module docstring).

    Parameters
    ----------
    results_dir:
        A results directory or one session directory.
    dest:
        The file to write (csv/parquet: the runs', beside which the contrasts' goes).
    export_format:
        One of :data:`EXPORT_FORMATS`.
    sessions:
        Which sessions (:func:`cnibench.results.load_results`); default every one, pooled on
        purpose as ``cnibench report`` does.
    reference, margin:
        The verdict's (:func:`cnibench.report.verdict`); the ``opensearch`` format has no
        contrasts and computes none.
    index:
        The OpenSearch index (``opensearch`` only).

    Returns
    -------
    ExportPaths
        The files written.

    Raises
    ------
    ConfigError
        Bad format, destination or index (:func:`check_destination`), a missing results
        directory, one without runs, or an unknown session or reference.
    ResultsError
        If a results file cannot be read or an export file cannot be written.
    """
    paths = check_destination(dest, export_format)
    source = Path(results_dir)
    if not source.is_dir():
        raise ConfigError(f"results directory {source} does not exist")
    if export_format == "opensearch":
        _check_index(index)
    runs = load_results(source, sessions=sessions)
    if runs.empty:
        raise ConfigError(f"no runs under {source}: nothing to export")
    contents: dict[Path, bytes] = {}
    with warnings.catch_warnings():  # an unreadable fingerprint: documents without it
        warnings.simplefilter("ignore")
        environments = load_environments(source, on_error="warn")
    if export_format == "opensearch":
        contents[paths.runs] = opensearch_bulk(runs, environments, index=index)
    else:
        from cnibench.report.verdict import verdict

        table = verdict(runs, reference=reference, margin=margin, environments=environments)
        if paths.contrasts is None:
            document = {
                "schema": "cnibench.export",
                "version": 1,
                "runs": table_records(runs),
                "contrasts": contrast_records(table),
            }
            text = json.dumps(document, allow_nan=False, ensure_ascii=False)
            contents[paths.runs] = text.encode()
        else:
            contents[paths.runs] = _table_bytes(runs, export_format)
            contents[paths.contrasts] = _table_bytes(table, export_format)
    for path, data in contents.items():
        atomic_write_bytes(path, data)
    return paths
