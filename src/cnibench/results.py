"""The results store: atomic files on disk, one tidy DataFrame on the way out.

Layout of a results directory (SPEC section 7)::

    results/
      20261122T103500Z-1a2b3c/          one session (a `cnibench run` or pytest session)
        environments/<environment_id>.json
                                        the Environment fingerprint of each cluster the session
                                        ran on, written once per distinct fingerprint
                                        (older versions wrote one environment.json instead)
        runs/<run_id>.json              the RunRecords of one run (schema + list of records)
        raw/<run_id>/<name>             raw tool outputs of that run (iperf3 JSON, ...)
        <name>.json                     session-level extras (probe matrices, summaries)

Crash safety
------------
Every file is written to a hidden temporary file in its final directory
(``.<name>.tmp-<pid>-<random>``), flushed and fsynced, renamed over the final name with
:func:`os.replace` and the directory is fsynced. A reader therefore sees either the complete old
file, the complete new file or nothing; a crash (even SIGKILL or power loss) loses at most the
run being written. Raw outputs are written before the run file, so a run file never refers to
raw data that is missing. Leftover temporary files are ignored by the loaders and removed by
:func:`sweep_temp_files` (``ResultsStore.sweep_temp``, ``cnibench clean``).

Corrupted files
---------------
``load_results`` raises :class:`~cnibench.errors.ResultsError` naming the file when a run file
cannot be read or parsed (``on_error="raise"``, the default): a silently shorter data set would
bias every statistic computed from it. ``on_error="warn"`` skips such files with a
:class:`CorruptResultsWarning` instead, for salvaging what is readable. With atomic writes a
corrupted file means outside damage (disk, manual edit), never an interrupted run.
"""

from __future__ import annotations

import io
import json
import math
import os
import platform
import re
import secrets
import warnings
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

import pandas as pd

from cnibench.errors import ConfigError, ResultsError
from cnibench.records import Environment, ParamValue, RunRecord

__all__ = [
    "ALL_SESSIONS",
    "ENVIRONMENT_COLUMNS",
    "PARAM_PREFIX",
    "REDACTED",
    "RESULT_COLUMNS",
    "SCHEMA_VERSION",
    "CorruptResultsWarning",
    "MixedSessionsWarning",
    "OnError",
    "ResultsStore",
    "atomic_write_bytes",
    "environment_fingerprint",
    "export_results",
    "load_environments",
    "load_results",
    "new_session_id",
    "redact",
    "run_file_name",
    "session_ids",
    "sweep_temp_files",
]

SCHEMA_VERSION = 1
"""Version of the run and environment file formats; readers refuse newer versions."""

_RUN_SCHEMA = "cnibench.run"
_ENVIRONMENT_SCHEMA = "cnibench.environment"
_ENVIRONMENT_FILE = "environment.json"  # one per session, by earlier versions; still read
_ENVIRONMENTS_DIR = "environments"
_RUNS_DIR = "runs"
_RAW_DIR = "raw"

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
)
"""Fixed leading columns of :func:`load_results`, in order.

``time`` is ``datetime64[ns, UTC]``, ``repetition`` int64, ``pair`` nullable Int64 (the
client/server pair of a ``--pairs`` run that measured a per-pair value; ``<NA>`` for the run's
own value, its aggregate, which is the only one statistics read:
:func:`cnibench.report.data.ok_runs`), ``value`` float64 (``NaN`` for failed runs),
``verified`` bool, ``options`` and ``parameters`` JSON text (keys sorted); the other columns
are text. They are followed by one ``param_<name>`` column per scenario parameter,
sorted by name.

``run_id`` names one run in the frame. A run's id is unique within its session (its file is
``runs/<run_id>.json``), and two sessions of one configuration repeat each other's ids; in a
frame of several sessions where ids repeat, every run id is written ``<session_id>/<run_id>``
(:func:`run_file_name` gives the file name back), so ``groupby("run_id")`` never pools two
sessions' runs."""

PARAM_PREFIX = "param_"
"""Prefix of the columns that expand :attr:`RunRecord.parameters`."""

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
)
"""Columns of :func:`load_environments`; ``nodes``, ``cni_values`` and ``tool_versions`` are
JSON text."""

REDACTED = "<redacted>"
"""What :func:`redact` puts in place of a secret."""

OnError = Literal["raise", "warn"]
"""What the loaders do with an unreadable or corrupted file: raise, or warn and skip it."""

_SAFE_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
_TEMP_RE = re.compile(r"^\.(?P<name>.+)\.tmp-(?P<pid>[0-9]+)-[0-9a-f]+$")
_STRING_COLUMNS = tuple(
    column
    for column in RESULT_COLUMNS
    if column not in {"time", "repetition", "pair", "value", "verified"}
)


class CorruptResultsWarning(UserWarning):
    """A results file was skipped because it could not be read (``on_error="warn"``)."""


class MixedSessionsWarning(UserWarning):
    """:func:`load_results` pooled several sessions because the caller did not choose."""


ALL_SESSIONS = "all"
"""``load_results(path, sessions="all")``: every session, pooled on purpose (no warning)."""


# --------------------------------------------------------------------------------------------
# Atomic files
# --------------------------------------------------------------------------------------------


def _fsync_dir(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def atomic_write_bytes(path: str | os.PathLike[str], data: bytes) -> Path:
    """Write ``data`` to ``path`` so that readers never see a partial file.

    The data goes to ``.<name>.tmp-<pid>-<random>`` in the same directory, is flushed and
    fsynced, renamed over ``path`` and the directory is fsynced (so the rename survives a power
    loss). On any error the temporary file is removed.

    Parameters
    ----------
    path:
        Final file path; its directory must exist.
    data:
        The complete content.

    Returns
    -------
    Path
        ``path``.

    Raises
    ------
    ResultsError
        If the file cannot be written (permissions, full disk, missing directory).
    """
    final = Path(path)
    temp = final.with_name(f".{final.name}.tmp-{os.getpid()}-{secrets.token_hex(4)}")
    try:
        fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o666)
        try:
            with os.fdopen(fd, "wb") as handle:
                handle.write(data)
                handle.flush()
                os.fsync(handle.fileno())
            os.replace(temp, final)
        except BaseException:
            temp.unlink(missing_ok=True)
            raise
        _fsync_dir(final.parent)
    except OSError as exc:
        raise ResultsError(f"cannot write results file {final}: {exc.strerror or exc}") from exc
    return final


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def sweep_temp_files(path: str | os.PathLike[str]) -> list[Path]:
    """Remove temporary files that interrupted writes left under ``path``.

    Only files named like :func:`atomic_write_bytes`'s temporary files whose writer process no
    longer exists are removed, so a store being written by another live process is safe.

    Parameters
    ----------
    path:
        A results directory, a session directory or any directory below them.

    Returns
    -------
    list of Path
        The removed files.

    Raises
    ------
    ResultsError
        If ``path`` is not a directory or a file cannot be removed.
    """
    root = Path(path)
    if not root.is_dir():
        raise ResultsError(f"results directory {root} does not exist")
    removed: list[Path] = []
    for directory, _, files in os.walk(root):
        for name in files:
            match = _TEMP_RE.match(name)
            if match is None or _pid_alive(int(match.group("pid"))):
                continue
            temp = Path(directory, name)
            try:
                temp.unlink(missing_ok=True)
            except OSError as exc:
                raise ResultsError(f"cannot remove temporary file {temp}: {exc.strerror}") from exc
            removed.append(temp)
    return sorted(removed)


# --------------------------------------------------------------------------------------------
# JSON encoding
# --------------------------------------------------------------------------------------------


def _json_safe(value: Any, where: str) -> Any:
    """Strict-JSON form: NaN -> null, ±inf -> "inf"/"-inf", numpy scalars -> Python."""
    if isinstance(value, bool) or value is None or isinstance(value, str | int):
        return value
    if isinstance(value, float):
        if math.isnan(value):
            return None
        if math.isinf(value):
            return "inf" if value > 0 else "-inf"
        return value
    if isinstance(value, Mapping):
        return {str(key): _json_safe(item, where) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_json_safe(item, where) for item in value]
    item_method = getattr(value, "item", None)
    if callable(item_method):
        # numpy scalars (np.int64 is not an int) carry their Python value in .item().
        return _json_safe(item_method(), where)
    raise ConfigError(f"cannot store a {type(value).__name__} in {where}: {value!r}")


def _dump_json(obj: Any, where: str) -> bytes:
    text = json.dumps(_json_safe(obj, where), indent=2, allow_nan=False, ensure_ascii=False)
    return (text + "\n").encode()


def _check_name(value: str, what: str) -> str:
    if not _SAFE_NAME_RE.match(value):
        raise ConfigError(
            f"invalid {what} {value!r}: use letters, digits, '.', '_' and '-', "
            "starting with a letter or digit"
        )
    return value


# --------------------------------------------------------------------------------------------
# Secrets
# --------------------------------------------------------------------------------------------

_SECRET_SUBSTRINGS = (
    "token",
    "password",
    "passwd",
    "secret",
    "credential",
    "privatekey",
    "apikey",
    "accesskey",
    "clientkey",
    "clientcertificate",
    "kubeconfig",
    "connectionstring",
)
_SECRET_WORDS = frozenset({"key", "pwd", "sas"})
_SECRET_PREFIXES = ("arm_", "azure_")
_WORD_SPLIT_RE = re.compile(r"[^A-Za-z0-9]+|(?<=[a-z0-9])(?=[A-Z])")


def _is_secret_key(key: str) -> bool:
    lowered = key.lower()
    if lowered.startswith(_SECRET_PREFIXES):
        return True
    compact = re.sub(r"[^a-z0-9]", "", lowered)
    if any(fragment in compact for fragment in _SECRET_SUBSTRINGS):
        return True
    words = {word.lower() for word in _WORD_SPLIT_RE.split(key) if word}
    return not words.isdisjoint(_SECRET_WORDS)


def _is_secret_text(text: str) -> bool:
    lowered = text.lower()
    if "private key-----" in lowered or "client-key-data" in lowered:
        return True
    # Every kubeconfig, YAML or JSON, has these three sections.
    return all(section in lowered for section in ("clusters", "contexts", "users"))


def _redact_value(value: Any) -> Any:
    if isinstance(value, Mapping):
        return redact(value)
    if isinstance(value, list | tuple):
        return [_redact_value(item) for item in value]
    if isinstance(value, str) and _is_secret_text(value):
        return REDACTED
    return value


def redact(mapping: Mapping[str, Any]) -> dict[str, Any]:
    """Copy of ``mapping`` with every secret-looking value replaced by ``"<redacted>"``.

    A value is replaced, at any nesting depth (mappings and lists), when its key looks like a
    secret (contains token, password, secret, credential, private/api/access/client key,
    client certificate, kubeconfig, connection string; has the word ``key``, ``pwd`` or
    ``sas``; starts with ``ARM_`` or ``AZURE_``, case-insensitive) or when the value itself looks
    like a secret (a PEM private key, or kubeconfig contents). Over-redaction is accepted: a
    harmless value under a suspicious key is lost rather than a secret written.

    Parameters
    ----------
    mapping:
        E.g. Helm values or backend options.

    Returns
    -------
    dict
        A new, redacted mapping; ``mapping`` is not modified.
    """
    return {
        str(key): REDACTED if _is_secret_key(str(key)) else _redact_value(value)
        for key, value in mapping.items()
    }


# --------------------------------------------------------------------------------------------
# Writing
# --------------------------------------------------------------------------------------------


def new_session_id(now: datetime | None = None) -> str:
    """A fresh session id: UTC time to the second plus 6 random hex digits.

    Parameters
    ----------
    now:
        The time to use (default: now); converted to UTC.

    Returns
    -------
    str
        E.g. ``"20261122T103500Z-1a2b3c"``; sorts chronologically.
    """
    moment = (now or datetime.now(UTC)).astimezone(UTC)
    return f"{moment:%Y%m%dT%H%M%SZ}-{secrets.token_hex(3)}"


class ResultsStore:
    """Writes one session's files under ``<results_dir>/<session_id>/``, each atomically.

    Parameters
    ----------
    results_dir:
        Directory holding the sessions; created if missing.
    session_id:
        Name of this session's directory; default :func:`new_session_id`. An existing session
        directory is reused (its runs are kept, a run written again is replaced).

    Raises
    ------
    ConfigError
        If ``session_id`` is not a plain file name, or ``results_dir`` is a file.
    ResultsError
        If the directory cannot be created.

    Examples
    --------
    >>> store = ResultsStore("results")  # doctest: +SKIP
    >>> store.write_environment(environment_fingerprint(backend="lab"))  # doctest: +SKIP
    >>> store.write_run("egress-on-0", records, raw={"iperf3.json": output})  # doctest: +SKIP
    """

    def __init__(
        self, results_dir: str | os.PathLike[str], *, session_id: str | None = None
    ) -> None:
        self.results_dir = Path(results_dir)
        if self.results_dir.exists() and not self.results_dir.is_dir():
            raise ConfigError(f"results directory {self.results_dir} is a file, not a directory")
        self.session_id = _check_name(session_id or new_session_id(), "session id")
        self.session_dir = self.results_dir / self.session_id

    def create(self) -> Path:
        """Create the session directory (idempotent) and return it.

        Every write calls this, so the directory appears with the first record: a session
        that records nothing (bad input, interrupted set-up) leaves nothing behind.
        """
        try:
            self.results_dir.mkdir(parents=True, exist_ok=True)
            if not self.session_dir.is_dir():
                self.session_dir.mkdir()
                _fsync_dir(self.results_dir)
        except OSError as exc:
            raise ResultsError(
                f"cannot create results directory {self.session_dir}: {exc.strerror or exc}"
            ) from exc
        return self.session_dir

    def _subdir(self, *parts: str) -> Path:
        directory = self.create().joinpath(*parts)
        if not directory.is_dir():
            try:
                directory.mkdir(parents=True, exist_ok=True)
                _fsync_dir(directory.parent)
            except OSError as exc:
                raise ResultsError(
                    f"cannot create results directory {directory}: {exc.strerror or exc}"
                ) from exc
        return directory

    def run_path(self, run_id: str) -> Path:
        """Path of the run file of ``run_id`` (``runs/<run_id>.json``)."""
        return self.session_dir / _RUNS_DIR / f"{_check_name(run_id, 'run id')}.json"

    def raw_dir(self, run_id: str) -> Path:
        """Directory of the raw outputs of ``run_id`` (``raw/<run_id>/``)."""
        return self.session_dir / _RAW_DIR / _check_name(run_id, "run id")

    def write_environment(self, environment: Environment) -> Path:
        """Write the fingerprint of one cluster of the session,
        ``environments/<environment_id>.json``.

        A session that runs on several clusters (``--cni routed --cni vxlan``, or a feature
        that needs its own cluster) writes one file per distinct fingerprint, so the report
        describes each of them; writing an equal fingerprint again replaces its file.
        ``cni_values`` and ``nodes`` are passed through :func:`redact` once more, whoever built
        the fingerprint; ``environment_id`` stays the fingerprint's own id, the one the records
        refer to.

        Parameters
        ----------
        environment:
            The session's fingerprint (see :func:`environment_fingerprint`).

        Returns
        -------
        Path
            The written file.
        """
        data = environment.to_json_dict()
        data["cni_values"] = redact(data.get("cni_values", {}))
        data["nodes"] = redact(data.get("nodes", {}))
        document = {
            "schema": _ENVIRONMENT_SCHEMA,
            "schema_version": SCHEMA_VERSION,
            "session_id": self.session_id,
            **data,
        }
        return atomic_write_bytes(
            self._subdir(_ENVIRONMENTS_DIR)
            / f"{_check_name(environment.environment_id, 'id')}.json",
            _dump_json(document, "environment"),
        )

    def write_run(
        self,
        run_id: str,
        records: Sequence[RunRecord],
        raw: Mapping[str, str | bytes] | None = None,
    ) -> Path:
        """Write one run: its raw outputs first, then ``runs/<run_id>.json``.

        The run file appears only once everything else of the run is on disk, so a crash
        mid-way leaves either no trace of the run in the results or all of it.

        Parameters
        ----------
        run_id:
            The run's id, a plain file name; writing the same id again replaces the run.
        records:
            The run's records (at least one; failed runs carry ``NaN`` values). Their
            ``session_id`` and ``run_id`` must be this store's and ``run_id``.
        raw:
            Raw tool outputs, file name to content (text is written as UTF-8).

        Returns
        -------
        Path
            The run file.

        Raises
        ------
        ConfigError
            If ``run_id`` or a raw name is not a plain file name, ``records`` is empty or a
            record belongs to another session or run.
        ResultsError
            If a file cannot be written.
        """
        path = self.run_path(run_id)
        if not records:
            raise ConfigError(f"run {run_id!r} has no records to write")
        for record in records:
            if record.session_id != self.session_id or record.run_id != run_id:
                raise ConfigError(
                    f"record of session {record.session_id!r} run {record.run_id!r} "
                    f"cannot be written as session {self.session_id!r} run {run_id!r}"
                )
        if raw:
            raw_dir = self._subdir(_RAW_DIR, run_id)
            for name, content in raw.items():
                _check_name(name, "raw output name")
                data = content.encode() if isinstance(content, str) else bytes(content)
                atomic_write_bytes(raw_dir / name, data)
        document = {
            "schema": _RUN_SCHEMA,
            "schema_version": SCHEMA_VERSION,
            "session_id": self.session_id,
            "run_id": run_id,
            "written_at": datetime.now(UTC).isoformat(),
            "records": [record.to_json_dict() for record in records],
        }
        self._subdir(_RUNS_DIR)
        return atomic_write_bytes(path, _dump_json(document, f"run {run_id!r}"))

    def write_json(self, name: str, obj: Any) -> Path:
        """Write a session-level JSON file (probe matrix, summary, ...) atomically.

        Parameters
        ----------
        name:
            File name; ``.json`` is appended when it has no suffix. ``environment.json`` is
            reserved (earlier versions' fingerprint file, still read).
        obj:
            JSON-compatible data (``NaN`` is written as ``null``).

        Returns
        -------
        Path
            The written file.
        """
        _check_name(name, "file name")
        file_name = name if Path(name).suffix else f"{name}.json"
        if file_name == _ENVIRONMENT_FILE:
            raise ConfigError("environment.json is reserved: use write_environment()")
        return atomic_write_bytes(self.create() / file_name, _dump_json(obj, file_name))

    def sweep_temp(self) -> list[Path]:
        """Remove this session's leftover temporary files; see :func:`sweep_temp_files`."""
        return sweep_temp_files(self.session_dir)


# --------------------------------------------------------------------------------------------
# Reading
# --------------------------------------------------------------------------------------------


def _check_on_error(on_error: str) -> None:
    if on_error not in ("raise", "warn"):
        raise ConfigError(f"invalid on_error {on_error!r}: expected 'raise' or 'warn'")


def _is_session_dir(directory: Path) -> bool:
    return (
        (directory / _RUNS_DIR).is_dir()
        or (directory / _ENVIRONMENTS_DIR).is_dir()
        or (directory / _ENVIRONMENT_FILE).is_file()
    )


def _session_environment_files(session_dir: Path) -> list[Path]:
    """The fingerprint files of a session: ``environment.json`` of older versions, then
    ``environments/*.json`` by name."""
    files = [session_dir / _ENVIRONMENT_FILE] if (session_dir / _ENVIRONMENT_FILE).is_file() else []
    directory = session_dir / _ENVIRONMENTS_DIR
    if directory.is_dir():
        files += sorted(
            p for p in directory.iterdir() if _visible(p) and p.suffix == ".json" and p.is_file()
        )
    return files


def _visible(path: Path) -> bool:
    return not path.name.startswith(".")


@dataclass(frozen=True)
class _Source:
    """A session directory, or one run file given directly."""

    session_dir: Path | None
    run_files: tuple[Path, ...]


def _session_source(session_dir: Path) -> _Source:
    runs = session_dir / _RUNS_DIR
    files = (
        sorted(p for p in runs.iterdir() if _visible(p) and p.suffix == ".json" and p.is_file())
        if runs.is_dir()
        else []
    )
    return _Source(session_dir, tuple(files))


def _sources(path: Path) -> Iterator[_Source]:
    if not path.exists():
        raise ResultsError(f"results path {path} does not exist")
    try:
        if path.is_file():
            parent = path.parent
            session = parent.parent if parent.name == _RUNS_DIR else None
            yield _Source(session, (path,))
        elif _is_session_dir(path):
            yield _session_source(path)
        elif path.name == _RUNS_DIR and _is_session_dir(path.parent):
            yield _session_source(path.parent)
        else:
            for child in sorted(path.iterdir()):
                if _visible(child) and child.is_dir() and _is_session_dir(child):
                    yield _session_source(child)
    except OSError as exc:
        raise ResultsError(f"cannot read results path {path}: {exc.strerror or exc}") from exc


def _read_json(path: Path, schema: str) -> dict[str, Any]:
    try:
        document = json.loads(path.read_bytes())
    except OSError as exc:
        raise ResultsError(f"cannot read results file {path}: {exc.strerror or exc}") from exc
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ResultsError(f"corrupted results file {path}: {exc}") from exc
    if not isinstance(document, dict) or document.get("schema") != schema:
        raise ResultsError(f"corrupted results file {path}: not a {schema} document")
    version = document.get("schema_version")
    if not isinstance(version, int) or version < 1:
        raise ResultsError(f"corrupted results file {path}: bad schema_version {version!r}")
    if version > SCHEMA_VERSION:
        raise ResultsError(
            f"results file {path} has schema version {version}, newer than this cnibench "
            f"reads ({SCHEMA_VERSION}); upgrade cnibench"
        )
    return document


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


def _handle(error: ResultsError, on_error: OnError) -> None:
    if on_error == "raise":
        raise error
    warnings.warn(f"skipped: {error}", CorruptResultsWarning, stacklevel=3)


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


def _json_text(mapping: Mapping[str, Any]) -> str:
    return json.dumps(_json_safe(mapping, "results"), sort_keys=True, allow_nan=False)


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


def export_results(
    results: pd.DataFrame | str | os.PathLike[str],
    dest: str | os.PathLike[str],
    *,
    on_error: OnError = "raise",
) -> Path:
    """Write results as CSV or Parquet, chosen by the suffix of ``dest``, atomically.

    Parameters
    ----------
    results:
        A frame from :func:`load_results`, or a path to load it from.
    dest:
        Output file ending in ``.csv`` or ``.parquet``; parent directories are created.
    on_error:
        Passed to :func:`load_results` when ``results`` is a path.

    Returns
    -------
    Path
        ``dest``.

    Raises
    ------
    ConfigError
        If the suffix is neither ``.csv`` nor ``.parquet``.
    ResultsError
        If loading or writing fails.

    Notes
    -----
    CSV writes ``time`` as ISO 8601 with ``+00:00``; read it back with
    ``pd.read_csv(dest, parse_dates=["time"])``. Parquet keeps every dtype.
    """
    target = Path(dest)
    suffix = target.suffix.lower()
    if suffix not in (".csv", ".parquet"):
        raise ConfigError(f"cannot export results to {target}: use a .csv or .parquet file name")
    frame = (
        results
        if isinstance(results, pd.DataFrame)
        else load_results(results, sessions=ALL_SESSIONS, on_error=on_error)
    )
    try:
        if suffix == ".csv":
            data = frame.to_csv(index=False).encode()
        else:
            buffer = io.BytesIO()
            frame.to_parquet(buffer, index=False)
            data = buffer.getvalue()
    except (ValueError, TypeError, ImportError) as exc:
        raise ResultsError(f"cannot export results to {target}: {exc}") from exc
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ResultsError(f"cannot create directory {target.parent}: {exc.strerror}") from exc
    return atomic_write_bytes(target, data)


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
    )
