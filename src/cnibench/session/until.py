"""Runs until decided (``--until-decided``): which of an interleaved block's conditions still
take part in an undecided contrast, asked of the verdict itself, so the session stops a
condition on exactly the calls its report will print.

The looks and their level are :mod:`cnibench.stats.sequential`'s; the verdict reads the looks
from the runs (:attr:`cnibench.records.RunRecord.looks`) and tests each contrast at
``alpha / looks``, before Holm's correction within its question.
"""

from __future__ import annotations

import math
import time
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from cnibench.scenarios import Scenario
from cnibench.waiting import Deadline

__all__ = ["Budget", "Look", "budget_allows", "undecided_conditions"]

DECIDABLE_KINDS = ("feature", "option", "cni")
"""The contrasts rounds can decide: between conditions of one configuration, and between a
CNI and its reference where their clusters take turns in the same rounds (the lab's; on
Kubernetes each CNI's group is a block of its own, so no CNI contrast is in one)."""

Member = tuple[str, str]
"""A condition of a block: (CNI label, condition id)."""


@dataclass(frozen=True)
class Look:
    """What one look found in a block of groups that share their rounds.

    Attributes
    ----------
    rounds:
        Rounds each condition had when the session looked.
    undecided:
        Conditions still in an undecided contrast, as (CNI, condition): the next rounds run
        these.
    contrasts:
        Undecided contrasts of the block, as their lines name them.
    saturated:
        Contrasts set aside for a saturated run: no call, and no more rounds for them.
    """

    rounds: int
    undecided: frozenset[Member]
    contrasts: tuple[str, ...]
    saturated: int = 0


def undecided_conditions(
    session_dir: Path,
    scenario: str,
    members: Sequence[Member],
    *,
    rounds: int,
    scenarios: Mapping[str, Scenario] | None = None,
) -> Look:
    """The conditions of one block (``members``: the (CNI, condition) of each) that take part
    in a contrast the verdict of the session's runs so far leaves undecided: tested, neither
    a cost nor "same within", both sides in the block. A contrast set aside for a saturated
    run has no test, so it asks for no rounds either: more rounds on a machine with no CPU to
    spare measure the machine, and the look counts them."""
    from cnibench.report.verdict import verdict
    from cnibench.results import load_environments, load_results

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        table = verdict(
            load_results(session_dir),
            scenarios=scenarios,
            environments=load_environments(session_dir, on_error="warn"),
        )
    if table.empty:
        return Look(rounds, frozenset(), ())
    ours = set(members)
    treatment = list(zip(table["cni"], table["treatment"], strict=True))
    control = list(zip(table["control_cni"], table["control"], strict=True))
    inside = pd.Series(
        [t in ours and c in ours for t, c in zip(treatment, control, strict=True)],
        index=table.index,
    )
    mine = table[(table["scenario"] == scenario) & table["kind"].isin(DECIDABLE_KINDS) & inside]
    tested = pd.to_numeric(mine["p_value"], errors="coerce").notna()
    saturated = pd.to_numeric(mine["saturated"], errors="coerce").fillna(0) > 0
    open_ = mine[tested & ~mine["significant"].astype(bool) & ~mine["equivalent"].astype(bool)]
    undecided = frozenset(zip(open_["cni"], open_["treatment"], strict=True)) | frozenset(
        zip(open_["control_cni"], open_["control"], strict=True)
    )
    names = tuple(f"{c} {m}" for c, m in zip(open_["contrast"], open_["metric"], strict=True))
    return Look(rounds, undecided, names, int(saturated.sum()))


class Budget:
    """The session's time (``--budget``) and the pace of a group's rounds: whether a look's
    rounds may start. Not a wait: nothing sleeps; the session only starts no rounds that
    would end past the budget.

    Parameters
    ----------
    seconds:
        The budget from now; ``None``: no limit (every look's rounds may start).
    """

    def __init__(self, seconds: float | None) -> None:
        self._deadline = None if seconds is None else Deadline(seconds)
        self._group_started = time.monotonic()

    def start_group(self) -> None:
        """A group's first round starts now (its pace is timed from here)."""
        self._group_started = time.monotonic()

    def round_seconds(self, rounds: int) -> float:
        """Seconds a round of the group has taken, over its first ``rounds`` rounds."""
        return (time.monotonic() - self._group_started) / max(rounds, 1)

    def allows(self, rounds: int, round_seconds: float) -> bool:
        """Whether ``rounds`` more rounds of about ``round_seconds`` each end within the
        budget; always without one."""
        if self._deadline is None:
            return True
        return budget_allows(self._deadline.remaining(), round_seconds, rounds)


def budget_allows(remaining: float, round_seconds: float, rounds: int) -> bool:
    """Whether ``rounds`` rounds of about ``round_seconds`` each fit in ``remaining`` seconds
    (never when the pace is unknown)."""
    if not math.isfinite(round_seconds) or round_seconds < 0.0:
        return False
    return rounds * round_seconds <= remaining
