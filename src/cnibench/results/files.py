"""One results file: written atomically, encoded as strict JSON, read back checked.

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

import json
import math
import os
import re
import secrets
import warnings
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

from cnibench.errors import ConfigError, ResultsError
from cnibench.results.layout import SCHEMA_VERSION

__all__ = ["CorruptResultsWarning", "OnError", "atomic_write_bytes", "sweep_temp_files"]


OnError = Literal["raise", "warn"]
"""What the loaders do with an unreadable or corrupted file: raise, or warn and skip it."""


_SAFE_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
_TEMP_RE = re.compile(r"^\.(?P<name>.+)\.tmp-(?P<pid>[0-9]+)-[0-9a-f]+$")


class CorruptResultsWarning(UserWarning):
    """A results file was skipped because it could not be read (``on_error="warn"``)."""


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


def _json_text(mapping: Mapping[str, Any]) -> str:
    return json.dumps(_json_safe(mapping, "results"), sort_keys=True, allow_nan=False)


# --------------------------------------------------------------------------------------------
# Reading back
# --------------------------------------------------------------------------------------------


def _check_on_error(on_error: str) -> None:
    if on_error not in ("raise", "warn"):
        raise ConfigError(f"invalid on_error {on_error!r}: expected 'raise' or 'warn'")


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


def _handle(error: ResultsError, on_error: OnError) -> None:
    if on_error == "raise":
        raise error
    warnings.warn(f"skipped: {error}", CorruptResultsWarning, stacklevel=3)
