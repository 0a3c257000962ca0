"""What counts as a refused request in the l7 verification (curl's ``%{http_code}``)."""

from __future__ import annotations

import pytest

from cnibench.scenarios.l7 import refused


@pytest.mark.parametrize(
    ("status", "expected"),
    [("403", True), ("000", True), ("200", False), ("404", False), ("none", False)],
    ids=["proxy-403", "reset-no-answer", "served", "not-found-is-not-policy", "curl-never-ran"],
)
def test_refused(status: str, expected: bool) -> None:
    assert refused(status) is expected
