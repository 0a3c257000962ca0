"""Writing one session's results: :class:`ResultsStore` and :func:`new_session_id`."""

from __future__ import annotations

import os
import secrets
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from cnibench.errors import ConfigError, ResultsError
from cnibench.records import Environment, RunRecord
from cnibench.results.files import (
    _check_name,
    _dump_json,
    _fsync_dir,
    atomic_write_bytes,
    sweep_temp_files,
)
from cnibench.results.layout import (
    _ENVIRONMENT_FILE,
    _ENVIRONMENT_SCHEMA,
    _ENVIRONMENTS_DIR,
    _RAW_DIR,
    _RUN_SCHEMA,
    _RUNS_DIR,
    SCHEMA_VERSION,
)
from cnibench.results.redaction import redact

__all__ = ["ResultsStore", "new_session_id"]


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
