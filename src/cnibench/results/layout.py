"""Where a results directory keeps what, and how its sessions and run files are found.

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
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from cnibench.errors import ResultsError

__all__ = ["SCHEMA_VERSION"]


SCHEMA_VERSION = 1
"""Version of the run and environment file formats; readers refuse newer versions."""

_RUN_SCHEMA = "cnibench.run"
_ENVIRONMENT_SCHEMA = "cnibench.environment"
_ENVIRONMENT_FILE = "environment.json"  # one per session, by earlier versions; still read
_ENVIRONMENTS_DIR = "environments"
_RUNS_DIR = "runs"
_RAW_DIR = "raw"


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
