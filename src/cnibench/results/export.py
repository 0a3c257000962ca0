"""The tidy frame of :func:`~cnibench.results.load_results` as a CSV or Parquet file."""

from __future__ import annotations

import io
import os
from pathlib import Path

import pandas as pd

from cnibench.errors import ConfigError, ResultsError
from cnibench.results.files import OnError, atomic_write_bytes
from cnibench.results.loading import ALL_SESSIONS, load_results

__all__ = ["export_results"]


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
