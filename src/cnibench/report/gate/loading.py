"""What the regression gate reads: result sets loaded for a comparison, the runs it may use,
how conditions match, and the candidate runs that failed.

Conditions are matched by :data:`MATCH_COLUMNS` (scenario, CNI, condition id and parameters);
CNI version, environment and options may differ, since telling those apart is what a
regression gate is for.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import pandas as pd

from cnibench.errors import ConfigError, ResultsError
from cnibench.records import RunStatus
from cnibench.report.data import ok_runs, run_values
from cnibench.report.gate.directions import gated_direction, zero_is_impossible
from cnibench.results import ALL_SESSIONS, load_results

__all__ = [
    "MATCH_COLUMNS",
    "ConditionKey",
    "FailedRun",
    "comparable_runs",
    "condition_keys",
    "condition_labels",
    "failed_candidate_runs",
    "load_result_set",
    "values_by_metric",
]

MATCH_COLUMNS: tuple[str, ...] = ("scenario", "cni", "condition", "parameters")
"""Columns of :func:`cnibench.results.load_results` that must be equal for two runs to be
compared (``parameters`` is JSON text with sorted keys)."""

ConditionKey = tuple[str, str, str, str]
"""Values of :data:`MATCH_COLUMNS` of one condition."""


def load_result_set(paths: Path | Sequence[Path], *, what: str) -> pd.DataFrame:
    """Load one or more results directories for a comparison, or say in one line why not.

    Parameters
    ----------
    paths:
        Results directories or session directories.
    what:
        How the error messages name this side, e.g. ``"baseline"``.

    Returns
    -------
    pandas.DataFrame
        The records of all of them (:func:`cnibench.results.load_results`).

    Raises
    ------
    ConfigError
        A path that does not exist or is not a directory, unreadable or corrupted results, or
        no record at all.
    """
    chosen = [paths] if isinstance(paths, Path) else list(paths)
    frames = []
    for path in chosen:
        if not path.exists():
            raise ConfigError(f"{what} results directory {path} does not exist")
        if not path.is_dir():
            raise ConfigError(f"{what} results path {path} is not a directory")
        try:
            # A baseline is every session of its directories (e.g. main's last runs).
            frames.append(load_results(path, sessions=ALL_SESSIONS))
        except ResultsError as exc:
            raise ConfigError(f"{what} results in {path} cannot be read: {exc}") from exc
    frame = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()
    if frame.empty:
        names = ", ".join(str(path) for path in chosen) or "(none)"
        raise ConfigError(f"{what} results in {names} hold no run records")
    return frame


def comparable_runs(df: pd.DataFrame) -> pd.DataFrame:
    """Rows the gate may use: successful, verified, finite, and a metric it compares.

    Parameters
    ----------
    df:
        Tidy results (:func:`cnibench.results.load_results`).

    Returns
    -------
    pandas.DataFrame
        A copy restricted to the gated metrics (:func:`gated_direction`).
    """
    rows = ok_runs(df)
    gated = rows["metric"].astype(str).map(lambda metric: gated_direction(metric) is not None)
    keep = rows["verified"].astype(bool) & gated.astype(bool)
    kept: pd.DataFrame = rows[keep].copy()
    return kept


def condition_keys(rows: pd.DataFrame) -> list[ConditionKey]:
    """The distinct conditions of ``rows`` (:data:`MATCH_COLUMNS` values), in record order."""
    keys = rows[list(MATCH_COLUMNS)].astype(str).drop_duplicates()
    return [(str(a), str(b), str(c), str(d)) for a, b, c, d in keys.itertuples(index=False)]


def _label(key: ConditionKey, ambiguous: bool = False) -> str:
    """``scenario/cni/condition``, with the parameters when the id alone is ambiguous."""
    scenario, cni, condition, parameters = key
    label = f"{scenario}/{cni}/{condition}"
    return f"{label} {parameters}" if ambiguous else label


def condition_labels(keys: Sequence[ConditionKey]) -> dict[ConditionKey, str]:
    """``scenario/cni/condition`` of each key, with the parameters where two keys would read
    the same."""
    plain = [_label(key) for key in keys]
    return {key: _label(key, plain.count(_label(key)) > 1) for key in keys}


def values_by_metric(
    rows: pd.DataFrame,
) -> dict[tuple[ConditionKey, str], tuple[list[npt.NDArray[np.float64]], str]]:
    """(condition key, metric) -> (values of each session in run order, unit)."""
    out: dict[tuple[ConditionKey, str], tuple[list[npt.NDArray[np.float64]], str]] = {}
    ordered = rows.sort_values(["time", "run_id"], kind="stable")
    values = ordered["value"].to_numpy(dtype=np.float64)
    units = ordered["unit"].astype(str).to_numpy()
    sessions = (
        ordered["session_id"].astype(str).to_numpy()
        if "session_id" in ordered.columns
        else np.full(len(ordered), "", dtype=object)
    )
    # Positions of each group's rows, in run order (groupby's indices keep the frame order).
    groups = ordered.groupby([*MATCH_COLUMNS, "metric"], sort=False).indices
    for group_key, positions in groups.items():
        parts: tuple[Any, ...] = tuple(group_key)  # type: ignore[arg-type]
        scenario, cni, condition, parameters, metric = (str(part) for part in parts)
        names = sessions[positions]
        per_session = [values[positions[names == name]] for name in dict.fromkeys(names.tolist())]
        found = sorted({str(unit) for unit in units[positions]})
        out[((scenario, cni, condition, parameters), metric)] = (
            per_session,
            found[0] if len(found) == 1 else "/".join(found),
        )
    return out


@dataclass(frozen=True)
class FailedRun:
    """A candidate run the gate does not take silently.

    Attributes
    ----------
    key:
        The condition (:data:`MATCH_COLUMNS` values).
    metric:
        The metric it recorded at 0 or not finite, or ``""`` for a run that failed as a whole.
    run_id:
        The run's id (as in the results directory).
    reason:
        Why: the run's recorded reason, ``"at 0"`` or ``"not finite"``.
    """

    key: ConditionKey
    metric: str
    run_id: str
    reason: str


def failed_candidate_runs(candidate: pd.DataFrame) -> list[FailedRun]:
    """Runs of a candidate that failed, or recorded a gated metric at an impossible 0.

    A failed attempt whose repetition was retried successfully in the same session is not
    counted, nor is a warm-up run (status ``warmup``), failed or not: it never counted. A
    metric at 0 or below where 0 is impossible (no throughput, no request, a latency or RTT
    of 0: :func:`~cnibench.report.gate.directions.zero_is_impossible`) and any non-finite
    value of a gated metric are; CPU or memory at 0 is not a failure.

    Parameters
    ----------
    candidate:
        Tidy results (:func:`cnibench.results.load_results`).

    Returns
    -------
    list of FailedRun
        In the order of the records.
    """
    if candidate.empty:
        return []
    frame = run_values(candidate).reset_index(drop=True)
    keys = frame[list(MATCH_COLUMNS)].astype(str).itertuples(index=False, name=None)
    statuses = frame["status"].astype(str).to_numpy()
    run_ids = frame["run_id"].astype(str).to_numpy()
    sessions = (
        frame["session_id"].astype(str).to_numpy()
        if "session_id" in frame.columns
        else np.full(len(frame), "", dtype=object)
    )
    repetitions = (
        frame["repetition"].astype(str).to_numpy() if "repetition" in frame.columns else run_ids
    )
    metrics = frame["metric"].astype(str).to_numpy()
    values = frame["value"].to_numpy(dtype=np.float64)
    reasons = (
        frame["reason"].astype(str).to_numpy()
        if "reason" in frame.columns
        else np.full(len(frame), "", dtype=object)
    )
    key_list: list[ConditionKey] = [(str(a), str(b), str(c), str(d)) for a, b, c, d in keys]
    succeeded = {
        (key, sessions[i], repetitions[i]) for i, key in enumerate(key_list) if statuses[i] == "ok"
    }
    out: list[FailedRun] = []
    seen: set[tuple[ConditionKey, str, str]] = set()
    for i, key in enumerate(key_list):
        if statuses[i] == RunStatus.WARMUP:
            continue
        if statuses[i] != "ok":
            if (key, sessions[i], repetitions[i]) in succeeded or (key, "", run_ids[i]) in seen:
                continue
            seen.add((key, "", run_ids[i]))
            reason = reasons[i] if reasons[i] not in ("", "nan") else statuses[i]
            out.append(FailedRun(key, "", str(run_ids[i]), f"failed: {reason}"))
            continue
        metric = str(metrics[i])
        if gated_direction(metric) is None:
            continue
        if not math.isfinite(values[i]):
            out.append(FailedRun(key, metric, str(run_ids[i]), "not finite"))
        elif values[i] <= 0.0 and zero_is_impossible(metric):
            out.append(FailedRun(key, metric, str(run_ids[i]), "at 0"))
    return out
