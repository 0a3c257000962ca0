"""The benchmark suite runs on whatever ``--cluster`` selects; in CI that is the lab."""

from __future__ import annotations

import pytest


@pytest.fixture
def profile_runs(cnibench_session):
    """Repetitions per condition of this session's profile."""
    return cnibench_session.config.profile.runs
