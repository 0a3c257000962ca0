"""Reading the run files back: :func:`load_results`, one tidy DataFrame of every record."""

from __future__ import annotations

import math
import os
import warnings
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pandas as pd

from cnibench.errors import ConfigError, ResultsError
from cnibench.records import ParamValue, RunRecord
from cnibench.results.files import (
    OnError,
    _check_on_error,
    _handle,
    _json_text,
    _read_json,
)
from cnibench.results.layout import (
    _ENVIRONMENT_SCHEMA,
    _RUN_SCHEMA,
    _session_environment_files,
    _sources,
)

__all__ = [
    "ALL_SESSIONS",
    "PARAM_PREFIX",
    "RESULT_COLUMNS",
    "MixedSessionsWarning",
    "load_results",
    "run_file_name",
    "session_ids",
]


RESULT_COLUMNS: tuple[str, ...] = (
    "session_id",
    "run_id",
    "time",
    "backend",
    "provider",
    "cni",
    "cni_version",
    "scenario",
    "condition",
    "repetition",
    "pair",
    "metric",
    "value",
    "unit",
    "verified",
    "status",
    "reason",
    "environment_id",
    "options",
    "parameters",
    "looks",
)
"""Fixed leading columns of :func:`load_results`, in order.

``time`` is ``datetime64[ns, UTC]``, ``repetition`` int64, ``pair`` nullable Int64 (the
client/server pair of a ``--pairs`` run that measured a per-pair value; ``<NA>`` for the run's
own value, its aggregate, which is the only one statistics read:
:func:`cnibench.report.data.ok_runs`), ``value`` float64 (``NaN`` for failed runs),
``verified`` bool, ``options`` and ``parameters`` JSON text (keys sorted), ``looks`` int64
(:attr:`RunRecord.looks`: the looks a session run until decided planned, 1 otherwise); the
other columns are text. They are followed by one ``param_<name>`` column per scenario parameter,
sorted by name.

``run_id`` names one run in the frame. A run's id is unique within its session (its file is
``runs/<run_id>.json``), and two sessions of one configuration repeat each other's ids; in a
frame of several sessions where ids repeat, every run id is written ``<session_id>/<run_id>``
(:func:`run_file_name` gives the file name back), so ``groupby("run_id")`` never pools two
sessions' runs."""


PARAM_PREFIX = "param_"
"""Prefix of the columns that expand :attr:`RunRecord.parameters`."""


_STRING_COLUMNS = tuple(
    column
    for column in RESULT_COLUMNS
    if column not in {"time", "repetition", "pair", "value", "verified", "looks"}
)


class MixedSessionsWarning(UserWarning):
    """:func:`load_results` pooled several sessions because the caller did not choose."""


ALL_SESSIONS = "all"
"""``load_results(path, sessions="all")``: every session, pooled on purpose (no warning)."""


def _parse_time(text: str) -> datetime:
    moment = datetime.fromisoformat(text)
    # Times without an offset are taken as UTC, the only zone cnibench writes.
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)


def _read_run_file(path: Path) -> list[tuple[RunRecord, datetime]]:
    document = _read_json(path, _RUN_SCHEMA)
    items = document.get("records")
    if not isinstance(items, list):
        raise ResultsError(f"corrupted results file {path}: no list of records")
    parsed: list[tuple[RunRecord, datetime]] = []
    for index, item in enumerate(items):
        try:
            if not isinstance(item, dict):
                raise TypeError("not an object")
            record = RunRecord.from_json_dict(item)
            parsed.append((record, _parse_time(record.time)))
        except (TypeError, ValueError, KeyError) as exc:
            raise ResultsError(f"corrupted results file {path}: record #{index}: {exc}") from exc
    return parsed


def _environment_id(session_dir: Path | None, on_error: OnError) -> str:
    """The session's one fingerprint id, for records that leave theirs empty; ``""`` when the
    session has none or several (the records cannot say which cluster they ran on)."""
    files = [] if session_dir is None else _session_environment_files(session_dir)
    if len(files) != 1:
        return ""
    try:
        document = _read_json(files[0], _ENVIRONMENT_SCHEMA)
    except ResultsError as exc:
        _handle(exc, on_error)
        return ""
    return str(document.get("environment_id", ""))


def _param_column(values: list[ParamValue | None]) -> pd.Series:
    present = [value for value in values if value is not None]
    kinds = {type(value) for value in present}
    if kinds == {bool}:
        return pd.Series(values, dtype="boolean")
    if kinds == {int}:
        return pd.Series(values, dtype="Int64")
    if kinds and kinds <= {int, float}:
        return pd.Series(
            [math.nan if value is None else float(value) for value in values], dtype="float64"
        )
    if len(kinds) > 1:
        # Mixed kinds (e.g. 100 and "all") cannot share a Parquet column: keep them as text.
        return pd.Series([None if value is None else str(value) for value in values])
    return pd.Series(values, dtype=object if not present else None)


def _records_frame(rows: list[dict[str, Any]], param_names: Sequence[str]) -> pd.DataFrame:
    columns: dict[str, Any] = {
        column: pd.Series([row[column] for row in rows], dtype=str) for column in _STRING_COLUMNS
    }
    columns["time"] = pd.Series(
        pd.to_datetime([row["time"] for row in rows], utc=True), dtype="datetime64[ns, UTC]"
    )
    columns["repetition"] = pd.Series([row["repetition"] for row in rows], dtype="int64")
    columns["pair"] = pd.Series([row["pair"] for row in rows], dtype="Int64")
    columns["value"] = pd.Series([row["value"] for row in rows], dtype="float64")
    columns["verified"] = pd.Series([row["verified"] for row in rows], dtype="bool")
    columns["looks"] = pd.Series([row["looks"] for row in rows], dtype="int64")
    frame = pd.DataFrame({column: columns[column] for column in RESULT_COLUMNS})
    for name in param_names:
        frame[PARAM_PREFIX + name] = _param_column([row["params"].get(name) for row in rows])
    return frame


def session_ids(path: str | os.PathLike[str]) -> list[str]:
    """The sessions under ``path``, oldest first: the values :func:`load_results` accepts in
    ``sessions``.

    Parameters
    ----------
    path:
        As for :func:`load_results`.

    Returns
    -------
    list of str
        Session directory names (``20261122T103500Z-1a2b3c``: they begin with their UTC start
        time, so name order is time order); empty for a run file outside a session.

    Raises
    ------
    ResultsError
        If ``path`` does not exist or cannot be listed.
    """
    names = {source.session_dir.name for source in _sources(Path(path)) if source.session_dir}
    return sorted(names)


def _chosen_sessions(path: Path, sessions: Sequence[str] | str | None) -> frozenset[str] | None:
    """The session ids to keep, ``None`` for every one; unknown ids are a :class:`ConfigError`."""
    if sessions is None or sessions == ALL_SESSIONS:
        return None
    wanted = [sessions] if isinstance(sessions, str) else [str(s) for s in sessions]
    if not wanted:
        raise ConfigError("sessions=[] selects nothing: pass session ids, 'all' or None")
    known = session_ids(path)
    unknown = [s for s in wanted if s not in known]
    if unknown:
        raise ConfigError(
            f"no session {', '.join(unknown)} under {path}:"
            f" choose from {', '.join(known) or 'none'}"
        )
    return frozenset(wanted)


def _mixed_sessions_message(rows: Sequence[Mapping[str, Any]]) -> str:
    runs: dict[str, set[str]] = {}
    what: dict[str, dict[str, None]] = {}
    for row in rows:
        runs.setdefault(row["session_id"], set()).add(row["run_id"])
        what.setdefault(row["session_id"], {})[f"{row['scenario']} on {row['cni']}"] = None
    parts = [
        f"{session} ({len(runs[session])} runs: {', '.join(what[session])})"
        for session in sorted(runs)
    ]
    return (
        f"load_results pooled {len(runs)} sessions: {'; '.join(parts)}. Their conditions "
        "may differ in ways the records do not show (cluster, host load, cnibench version): "
        "pass sessions=[...] (see session_ids) to choose, or sessions='all' to pool them on "
        "purpose, and keep session_id in every groupby"
    )


def load_results(
    path: str | os.PathLike[str],
    *,
    sessions: Sequence[str] | str | None = None,
    on_error: OnError = "raise",
) -> pd.DataFrame:
    """Every record under ``path`` as one tidy DataFrame, one row per record.

    Parameters
    ----------
    path:
        A results directory holding session directories, one session directory, or one
        ``runs/<run_id>.json`` file.
    sessions:
        Which sessions to load, by id (the ``session_id`` column, the session directory's
        name; :func:`session_ids` lists them). ``None`` (default): every session, with a
        :class:`MixedSessionsWarning` when there are several. ``"all"``
        (:data:`ALL_SESSIONS`): every session, pooled on purpose, without the warning. A
        string other than ``"all"`` is one session id.
    on_error:
        ``"raise"`` (default): an unreadable or corrupted run file raises. ``"warn"``: it is
        skipped with a :class:`CorruptResultsWarning`.

    Returns
    -------
    pandas.DataFrame
        Columns :data:`RESULT_COLUMNS` (``session_id`` first), then ``param_<name>`` for
        every parameter name seen (missing where a record lacks it). Rows sorted by session,
        run time and run id, in record order within a run. Hidden and temporary files are
        ignored; a directory without results gives an empty frame with the fixed columns.
        ``environment_id`` is taken from the session's fingerprint when a record leaves it
        empty and the session has exactly one.

    Raises
    ------
    ResultsError
        If ``path`` does not exist or cannot be listed, or (``on_error="raise"``) a run file is
        unreadable, truncated, not a run file or of a newer schema; the message names the file.
    ConfigError
        If ``on_error`` is not ``"raise"`` or ``"warn"``, or ``sessions`` names a session that
        is not under ``path`` (the message lists those that are) or is empty.

    Warns
    -----
    MixedSessionsWarning
        When ``sessions`` is ``None`` and the records come from more than one session: two
        sessions are two experiments (another cluster, another day, another version), and an
        interval over both describes neither. The warning names each session with its runs,
        scenarios and CNIs.

    Examples
    --------
    >>> ids = session_ids("results/")  # doctest: +SKIP
    >>> df = load_results("results/", sessions=ids[-1:])  # the latest session  # doctest: +SKIP
    """
    _check_on_error(on_error)
    target = Path(path)
    chosen = _chosen_sessions(target, sessions)
    rows: list[dict[str, Any]] = []
    param_names: set[str] = set()
    for source in _sources(target):
        if chosen is not None and (
            source.session_dir is None or source.session_dir.name not in chosen
        ):
            continue
        session_environment: str | None = None
        for run_file in source.run_files:
            try:
                parsed = _read_run_file(run_file)
            except ResultsError as exc:
                _handle(exc, on_error)
                continue
            for record, moment in parsed:
                environment_id = record.environment_id
                if not environment_id:
                    if session_environment is None:
                        session_environment = _environment_id(source.session_dir, on_error)
                    environment_id = session_environment
                param_names.update(record.parameters)
                rows.append(
                    {
                        "session_id": record.session_id,
                        "run_id": record.run_id,
                        "time": moment,
                        "backend": record.backend,
                        "provider": record.provider,
                        "cni": record.cni,
                        "cni_version": record.cni_version,
                        "scenario": record.scenario,
                        "condition": record.condition,
                        "repetition": record.repetition,
                        "pair": record.pair,
                        "metric": record.metric,
                        "value": record.value,
                        "unit": record.unit,
                        "verified": bool(record.verified),
                        "status": record.status.value,
                        "reason": record.reason,
                        "environment_id": environment_id,
                        "options": _json_text(record.options),
                        "parameters": _json_text(record.parameters),
                        "looks": record.looks,
                        "params": record.parameters,
                    }
                )
    # Python's sort is stable: records keep their order within a run.
    rows.sort(key=lambda row: (row["session_id"], row["time"], row["run_id"]))
    if sessions is None and len({row["session_id"] for row in rows}) > 1:
        warnings.warn(_mixed_sessions_message(rows), MixedSessionsWarning, stacklevel=2)
    _qualify_repeated_run_ids(rows)
    return _records_frame(rows, sorted(param_names))


def _qualify_repeated_run_ids(rows: list[dict[str, Any]]) -> None:
    """``<session_id>/<run_id>`` for every row, where two sessions share a run id."""
    owner: dict[str, str] = {}
    repeated = False
    for row in rows:
        if owner.setdefault(row["run_id"], row["session_id"]) != row["session_id"]:
            repeated = True
            break
    if repeated:
        for row in rows:
            row["run_id"] = f"{row['session_id']}/{row['run_id']}"


def run_file_name(run_id: str) -> str:
    """The id a run's files are named by (``runs/<id>.json``, ``raw/<id>/``): ``run_id``
    without the ``<session_id>/`` :func:`load_results` adds where sessions repeat ids."""
    return run_id.rsplit("/", 1)[-1]
