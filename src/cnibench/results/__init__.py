"""The results store: atomic files on disk, one tidy DataFrame on the way out.

One module per job, every name imported from here:

- :mod:`~cnibench.results.layout`: where a results directory keeps what (sessions, run files,
  fingerprints, raw outputs) and how they are found; :data:`SCHEMA_VERSION`.
- :mod:`~cnibench.results.files`: one file written atomically (crash safety, leftover temporary
  files swept), encoded as strict JSON, read back checked (corrupted files, ``on_error``).
- :mod:`~cnibench.results.redaction`: :func:`redact`, which keeps secrets out of the results.
- :mod:`~cnibench.results.store`: :class:`ResultsStore`, which writes one session.
- :mod:`~cnibench.results.loading`: :func:`load_results`, every record as one tidy DataFrame.
- :mod:`~cnibench.results.environments`: :func:`environment_fingerprint` of this host and
  :func:`load_environments`.
- :mod:`~cnibench.results.export`: :func:`export_results` as CSV or Parquet.
"""

from __future__ import annotations

from cnibench.results.environments import (
    ENVIRONMENT_COLUMNS,
    environment_fingerprint,
    load_environments,
)
from cnibench.results.export import export_results
from cnibench.results.files import _SAFE_NAME_RE as _SAFE_NAME_RE
from cnibench.results.files import (
    CorruptResultsWarning,
    OnError,
    atomic_write_bytes,
    sweep_temp_files,
)
from cnibench.results.layout import SCHEMA_VERSION
from cnibench.results.loading import (
    ALL_SESSIONS,
    PARAM_PREFIX,
    RESULT_COLUMNS,
    MixedSessionsWarning,
    load_results,
    run_file_name,
    session_ids,
)
from cnibench.results.redaction import REDACTED, redact
from cnibench.results.store import ResultsStore, new_session_id

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
