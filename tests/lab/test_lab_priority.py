"""Priority cases on the lab: real packets through the nftables chains decide each outcome.

Every expectation below is worked out by hand from the reference order (tiered layers by tier
then priority, first match decides, ``pass`` skips to Kubernetes; then the Kubernetes deny-all;
then baseline layers; else allowed), never taken from ``reference_outcome``.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from lab_support import HTTP_PORT, Lab

from cnibench.backends.lab.policy import policy_table
from cnibench.policy import (
    PolicyPeer,
    PolicySpec,
    PortRange,
    PriorityCase,
    PriorityLayer,
    priority_case_named,
)

PROBE = """
import socket, sys
s = socket.socket(); s.settimeout(1.0)
try:
    s.connect((sys.argv[1], int(sys.argv[2]))); print("open")
except OSError as exc:
    print(type(exc).__name__)
"""

# (client named by every layer reaches the server, neighbour named by none reaches it)
BUILT_IN = {
    "cni-allow": (True, True),
    "k8s-deny": (False, False),
    "k8s-deny-and-cni-allow": (True, False),
    "tier-securityops-deny-vs-application-allow": (False, True),
    "same-tier-priority": (True, True),
    "securityops-pass-and-k8s-deny": (False, False),
}
EXTRA = {
    "k8s-deny-beats-baseline-allow": (
        PriorityCase("k8s-deny-beats-baseline-allow", True,
                     (PriorityLayer("allow", "baseline", 1),)),
        (False, False),
    ),
    "pass-skips-to-baseline-deny": (
        PriorityCase("pass-skips-to-baseline-deny", False,
                     (PriorityLayer("pass", "emergency", 1),
                      PriorityLayer("allow", "application", 1),
                      PriorityLayer("deny", "baseline", 1))),
        (False, True),
    ),
    "emergency-allow-beats-lower-number-deny": (
        PriorityCase("emergency-allow-beats-lower-number-deny", True,
                     (PriorityLayer("deny", "application", 1),
                      PriorityLayer("allow", "emergency", 9000))),
        (True, False),
    ),
}  # fmt: skip


def connects(pod, ip: str, port: int) -> bool:
    result = pod.run([sys.executable, "-c", PROBE, ip, str(port)], timeout=10)
    return result.stdout.strip() == "open"


def spec_of(lab: Lab) -> PolicySpec:
    return PolicySpec(
        target=PolicyPeer("server", lab.server.ip),
        allowed=(PolicyPeer("client", lab.client.ip),),
        ports=(PortRange.single(HTTP_PORT),),
    )


def outcome(lab: Lab, case: PriorityCase) -> tuple[bool, bool]:
    lab.cluster.apply_priority_case(case, spec_of(lab))
    try:
        return (
            connects(lab.client, lab.server.ip, HTTP_PORT),
            connects(lab.neighbour, lab.server.ip, HTTP_PORT),
        )
    finally:
        lab.cluster.remove_priority_case()


@pytest.mark.parametrize("name", list(BUILT_IN), ids=list(BUILT_IN))
@pytest.mark.parametrize("lab", ["routed"], indirect=True)
def test_built_in_case_outcome_is_the_kernels(lab: Lab, name: str) -> None:
    assert outcome(lab, priority_case_named(name)) == BUILT_IN[name]


@pytest.mark.parametrize("name", list(EXTRA), ids=list(EXTRA))
@pytest.mark.parametrize("lab", ["routed"], indirect=True)
def test_baseline_and_pass_cases_outcome_is_the_kernels(lab: Lab, name: str) -> None:
    case, expected = EXTRA[name]
    assert outcome(lab, case) == expected


@pytest.mark.parametrize("lab", ["routed"], indirect=True)
def test_removing_the_case_reopens_the_server(lab: Lab) -> None:
    lab.cluster.apply_priority_case(priority_case_named("k8s-deny"), spec_of(lab))
    lab.cluster.remove_priority_case()
    lab.cluster.remove_priority_case()  # safe to repeat
    assert connects(lab.client, lab.server.ip, HTTP_PORT)
    assert connects(lab.neighbour, lab.server.ip, HTTP_PORT)


@pytest.mark.parametrize("lab", ["routed"], indirect=True)
def test_securityops_drop_counts_and_application_allow_never_sees_the_packet(lab: Lab) -> None:
    case = priority_case_named("tier-securityops-deny-vs-application-allow")
    node = lab.server.node.name
    table = policy_table(lab.cluster.lab_id, "prio")
    lab.cluster.apply_priority_case(case, spec_of(lab))
    try:
        connects(lab.client, lab.server.ip, HTTP_PORT)
        # A lab node's network namespace is named after the node.
        dump = subprocess.run(
            ["ip", "netns", "exec", node, "nft", "-j", "list", "table", "ip", table],
            capture_output=True, text=True, timeout=10, check=True,
        ).stdout  # fmt: skip
    finally:
        lab.cluster.remove_priority_case()
    packets = {}
    for item in json.loads(dump)["nftables"]:
        rule = item.get("rule")
        if rule:
            for expr in rule["expr"]:
                if "counter" in expr:
                    packets[rule["comment"]] = expr["counter"]["packets"]
    assert packets["securityops@5:deny"] >= 1
    assert packets["application@10:allow"] == 0


@pytest.mark.parametrize("lab", ["routed"], indirect=True)
def test_removal_deletes_the_case_table(lab: Lab) -> None:
    node = lab.server.node.name
    lab.cluster.apply_priority_case(priority_case_named("k8s-deny"), spec_of(lab))
    lab.cluster.remove_priority_case()
    tables = subprocess.run(
        ["ip", "netns", "exec", node, "nft", "list", "tables"],
        capture_output=True, text=True, timeout=10, check=True,
    ).stdout  # fmt: skip
    assert policy_table(lab.cluster.lab_id, "prio") not in tables


@pytest.fixture
def blocked_before(lab: Lab):
    """The priority scenario prepared, with an unrelated policy already blocking its client."""
    from cnibench.policy import PolicyEngine
    from cnibench.scenarios.priority import PriorityScenario
    from cnibench.scenarios.profiles import profile_named

    scenario = PriorityScenario()
    condition = next(c for c in scenario.conditions() if c.id == "cni-allow")
    prepared = scenario.prepare(lab.cluster, condition, profile_named("smoke"))
    try:
        server = prepared.endpoints["server"]
        lab.cluster.apply_policy(
            PolicySpec(
                target=PolicyPeer("prio-srv", server.ip),
                allowed=(PolicyPeer("neighbour", lab.neighbour.ip),),
                ports=(PortRange.single(HTTP_PORT),),
            ),
            engine=PolicyEngine.NFTABLES,
        )
        yield scenario, condition, prepared
    finally:
        lab.cluster.remove_policy()
        scenario.cleanup(lab.cluster, prepared)


@pytest.mark.parametrize("lab", ["routed"], indirect=True)
def test_verification_fails_when_the_server_is_unreachable_before_the_case(
    lab: Lab, blocked_before
) -> None:
    scenario, condition, prepared = blocked_before
    verification = scenario.verify(lab.cluster, prepared, condition)
    assert not verification.ok
    assert "unreachable before any policy" in verification.detail
    assert "prio-cli->prio-srv:80=timeout" in str(verification.evidence["probe_matrix_before"])


@pytest.mark.parametrize("lab", ["routed"], indirect=True)
def test_run_is_unverified_when_the_server_is_unreachable_before_the_case(
    lab: Lab, blocked_before
) -> None:
    from cnibench.scenarios.profiles import profile_named

    scenario, condition, prepared = blocked_before
    output = scenario.measure(lab.cluster, prepared, condition, profile_named("smoke"), 0)
    assert output.verification is not None
    assert not output.verification.ok
    assert output.verification.evidence["before"] == "timeout"
