"""The benchmark suite runs on whatever ``--cluster`` selects; in CI that is the lab.

A module may keep a subset of the conditions the plugin parametrizes it with by defining
``in_suite(condition, planned)``; the others are deselected here, at collection, rather than
skipped, so a required tier (``CNIBENCH_REQUIRE``) never reads a planned omission as a failure.
"""

from __future__ import annotations

from collections import defaultdict

import pytest


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    planned: dict[object, list] = defaultdict(list)
    for item in items:
        condition = _condition(item)
        if condition is not None and hasattr(getattr(item, "module", None), "in_suite"):
            planned[item.module].append(condition)
    if not planned:
        return
    kept, dropped = [], []
    for item in items:
        module = getattr(item, "module", None)
        condition = _condition(item)
        if module in planned and not module.in_suite(condition, planned[module]):
            dropped.append(item)
        else:
            kept.append(item)
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = kept


def _condition(item: pytest.Item):
    callspec = getattr(item, "callspec", None)
    return callspec.params.get("condition") if callspec is not None else None


@pytest.fixture
def profile_runs(cnibench_session):
    """Repetitions per condition of this session's profile."""
    return cnibench_session.config.profile.runs
