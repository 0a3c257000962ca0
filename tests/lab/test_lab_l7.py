"""L7 policy on the lab: only the configured method and path reach the server."""

from __future__ import annotations

import pytest
from lab_support import HTTP_PORT, Lab


def status(lab: Lab, method: str, path: str) -> str:
    url = f"http://{lab.server.ip}:{HTTP_PORT}{path}"
    result = lab.client.run(
        ["curl", "-sS", "-o", "/dev/null", "-w", "%{http_code}", "-X", method, "-m", "5", url],
        timeout=10,
    )
    return result.stdout.strip()


@pytest.fixture
def l7(lab: Lab):
    lab.cluster.apply_l7_policy(lab.server, port=HTTP_PORT, method="GET", path="/public")
    try:
        yield lab
    finally:
        lab.cluster.remove_l7_policy()


@pytest.mark.parametrize(
    ("method", "path", "expected"),
    [("GET", "/public", "200"), ("POST", "/public", "403"), ("GET", "/private", "403")],
    ids=["allowed", "other-method", "other-path"],
)
@pytest.mark.parametrize("lab", ["routed"], indirect=True)
def test_l7_policy_filters_method_and_path(l7: Lab, method: str, path: str, expected: str) -> None:
    assert status(l7, method, path) == expected


@pytest.mark.parametrize("lab", ["routed"], indirect=True)
def test_without_l7_policy_every_path_is_served(lab: Lab) -> None:
    assert status(lab, "POST", "/private") == "200"
