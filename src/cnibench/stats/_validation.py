"""Input checks every :mod:`cnibench.stats` module shares, one place per kind of input (values,
levels, options, weights, counts), and the warning for valid but degenerate data."""

from __future__ import annotations

import math
import warnings
from collections.abc import Mapping, Sequence
from typing import Literal, TypeAlias

import numpy as np
import numpy.typing as npt

from cnibench.errors import ConfigError, InsufficientDataError

FloatArray: TypeAlias = npt.NDArray[np.float64]
IntArray: TypeAlias = npt.NDArray[np.int64]
RandomSource: TypeAlias = "np.random.Generator | int | None"
BootstrapMethod: TypeAlias = Literal["BCa", "percentile", "basic"]


class DegenerateDataWarning(RuntimeWarning):
    """Data were valid but too degenerate for the statistic (one value, zero variance, ...).

    The function that warns still returns a result, whose degenerate form it documents.
    """


def _validated_values(values: npt.ArrayLike, name: str) -> FloatArray:
    """Return ``values`` as a 1-D float array, or raise InsufficientDataError saying why not."""
    try:
        array = np.asarray(values, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise InsufficientDataError(f"{name} must be numbers: {exc}") from exc
    if array.ndim != 1:
        raise InsufficientDataError(
            f"{name} must be a one-dimensional sequence, got shape {array.shape}"
        )
    if array.size == 0:
        raise InsufficientDataError(f"{name} is empty: at least one value is needed")
    # A sum is finite only if every term is (NaN and inf propagate), and it needs no temporary
    # array; the element-wise check runs only when the sum is not finite (or overflowed).
    if not math.isfinite(float(np.add.reduce(array))):
        bad = np.flatnonzero(~np.isfinite(array))
        if bad.size:
            raise InsufficientDataError(
                f"{name} contains {bad.size} NaN or infinite value(s), "
                f"the first at index {int(bad[0])} ({float(array[bad[0]])!r})"
            )
    return array


def _shown(value: object) -> str:
    """repr() of a user value, with NumPy scalars shown as the plain Python number."""
    return repr(value.item() if isinstance(value, np.generic) else value)


def _validated_level(level: float) -> float:
    """Return ``level`` as a float in (0, 1), or raise ConfigError."""
    if isinstance(level, bool) or not isinstance(level, int | float | np.integer | np.floating):
        raise ConfigError(f"level must be a number strictly between 0 and 1, got {_shown(level)}")
    value = float(level)
    if not 0.0 < value < 1.0:
        raise ConfigError(
            f"level must be strictly between 0 and 1 (e.g. 0.95), got {_shown(level)}"
        )
    return value


def _validated_choice(value: str, allowed: Sequence[str], name: str) -> str:
    if value not in allowed:
        choices = ", ".join(repr(choice) for choice in allowed)
        raise ConfigError(f"{name} must be one of {choices}, got {_shown(value)}")
    return value


def _validated_positive(value: float, name: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float | np.integer | np.floating):
        raise ConfigError(f"{name} must be a positive number, got {_shown(value)}")
    number = float(value)
    if not (math.isfinite(number) and number > 0.0):
        raise ConfigError(f"{name} must be a positive finite number, got {_shown(value)}")
    return number


def _validated_weights(weights: Mapping[str, float] | Sequence[float]) -> dict[str, float]:
    """Return the weights normalised to sum 1, or raise ConfigError naming the bad backend."""
    named: Mapping[str, float] = (
        weights
        if isinstance(weights, Mapping)
        else {f"#{index}": weight for index, weight in enumerate(weights)}
    )
    if not named:
        raise ConfigError("weights are empty: at least one backend needs a weight")
    clean: dict[str, float] = {}
    for name, weight in named.items():
        if not isinstance(name, str):
            raise ConfigError(f"backend names must be strings, got {name!r}")
        try:
            number = float(weight)
        except (TypeError, ValueError) as exc:
            raise ConfigError(
                f"weight of backend {name!r} is not a number: {_shown(weight)}"
            ) from exc
        if not math.isfinite(number) or number < 0.0:
            raise ConfigError(
                f"weight of backend {name!r} must be a finite number >= 0, got {_shown(weight)}"
            )
        clean[name] = number
    total = sum(clean.values())
    if total <= 0.0:
        raise ConfigError(f"weights are all zero ({clean}): at least one must be positive")
    return {name: weight / total for name, weight in clean.items()}


def _validated_counts(counts: Mapping[str, int]) -> dict[str, int]:
    """Return the counts as ints, or raise InsufficientDataError naming the bad backend."""
    if not counts:
        raise InsufficientDataError("counts are empty: no backend was observed")
    clean: dict[str, int] = {}
    for name, count in counts.items():
        if not isinstance(name, str):
            raise InsufficientDataError(f"backend names must be strings, got {name!r}")
        try:
            number = float(count)
        except (TypeError, ValueError) as exc:
            raise InsufficientDataError(
                f"count of backend {name!r} is not a number: {_shown(count)}"
            ) from exc
        if not (math.isfinite(number) and number >= 0.0 and number.is_integer()):
            raise InsufficientDataError(
                f"count of backend {name!r} must be a whole number >= 0, got {_shown(count)}"
            )
        clean[name] = int(number)
    if sum(clean.values()) == 0:
        raise InsufficientDataError(f"no requests were counted ({clean}): nothing to compare")
    return clean


def _same_backends(counted: Sequence[str], weighted: Mapping[str, float]) -> None:
    """Raise ConfigError naming the first backend that only one side knows."""
    without_weight = [name for name in counted if name not in weighted]
    if without_weight:
        raise ConfigError(
            f"backend {without_weight[0]!r} has requests but no weight "
            f"(weights name {sorted(weighted)})"
        )
    not_counted = [name for name in weighted if name not in set(counted)]
    if not_counted:
        raise ConfigError(
            f"backend {not_counted[0]!r} has a weight but no count "
            f"(counts name {sorted(counted)}; give it a count of 0)"
        )


def _warn(message: str) -> None:
    # stacklevel 3: the warning points at the caller of the public function.
    warnings.warn(message, DegenerateDataWarning, stacklevel=3)


def _validated_resamples(n_resamples: int) -> int:
    if isinstance(n_resamples, bool) or not isinstance(n_resamples, int | np.integer):
        raise ConfigError(f"n_resamples must be a positive integer, got {_shown(n_resamples)}")
    if n_resamples < 1:
        raise ConfigError(f"n_resamples must be a positive integer, got {_shown(n_resamples)}")
    return int(n_resamples)


def _validated_rng(rng: RandomSource) -> np.random.Generator:
    try:
        return np.random.default_rng(rng)
    except (TypeError, ValueError) as exc:
        raise ConfigError(
            f"rng must be a numpy.random.Generator, an integer seed or None, got {_shown(rng)}"
        ) from exc
