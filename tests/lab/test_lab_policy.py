"""Network policy on the lab: every engine admits the allowed pod and blocks the others."""

from __future__ import annotations

import pytest
from lab_support import HTTP_PORT, Lab

from cnibench.policy import PolicyEngine, PolicyPeer, PolicySpec, PortRange, RulesSee

ENGINES = list(PolicyEngine)
PROBE = """
import socket, sys
s = socket.socket(); s.settimeout(1.0)
try:
    s.connect((sys.argv[1], int(sys.argv[2]))); print("open")
except OSError as exc:
    print(type(exc).__name__)
"""


def connects(pod, ip: str, port: int) -> bool:
    import sys

    result = pod.run([sys.executable, "-c", PROBE, ip, str(port)], timeout=10)
    return result.stdout.strip() == "open"


def client_only(lab: Lab, *, extra: int = 0, rules_see: RulesSee = RulesSee.NEW_CONNECTIONS):
    return PolicySpec(
        target=PolicyPeer("server", lab.server.ip),
        allowed=(PolicyPeer("client", lab.client.ip),),
        ports=(PortRange.single(HTTP_PORT),),
        extra_rules=extra,
        rules_see=rules_see,
    )


@pytest.mark.parametrize("engine", ENGINES, ids=str)
@pytest.mark.parametrize("lab", ["routed"], indirect=True)
def test_policy_admits_the_allowed_pod_and_blocks_the_neighbour(lab: Lab, engine) -> None:
    lab.cluster.apply_policy(client_only(lab, extra=100), engine=engine)
    try:
        seen = (
            connects(lab.client, lab.server.ip, HTTP_PORT),
            connects(lab.neighbour, lab.server.ip, HTTP_PORT),
        )
    finally:
        lab.cluster.remove_policy()
    assert seen == (True, False)


@pytest.mark.parametrize("engine", ENGINES, ids=str)
@pytest.mark.parametrize("lab", ["vxlan"], indirect=True)
def test_policy_blocks_ports_it_does_not_list(lab: Lab, engine) -> None:
    lab.cluster.apply_policy(client_only(lab, rules_see=RulesSee.EVERY_PACKET), engine=engine)
    try:
        blocked_port_open = connects(lab.client, lab.server.ip, 5201)
    finally:
        lab.cluster.remove_policy()
    assert not blocked_port_open


@pytest.mark.parametrize("lab", ["routed"], indirect=True)
def test_removing_the_policy_reopens_the_server(lab: Lab) -> None:
    lab.cluster.apply_policy(client_only(lab), engine=PolicyEngine.NFTABLES)
    lab.cluster.remove_policy()
    assert connects(lab.neighbour, lab.server.ip, HTTP_PORT)


@pytest.mark.parametrize("lab", ["routed"], indirect=True)
def test_probe_matrix_fails_when_the_policy_is_not_applied(lab: Lab, monkeypatch) -> None:
    from cnibench.scenarios.policy import PolicyScenario
    from cnibench.scenarios.profiles import profile_named

    scenario = PolicyScenario()
    condition = next(
        c
        for c in scenario.conditions()
        if c.parameters["policy"] == "on" and c.parameters["clients"] == 1
    )
    monkeypatch.setattr(lab.cluster, "apply_policy", lambda spec, *, engine: None)
    prepared = scenario.prepare(lab.cluster, condition, profile_named("smoke"))
    try:
        verification = scenario.verify(lab.cluster, prepared, condition)
    finally:
        scenario.cleanup(lab.cluster, prepared)
    assert not verification.ok
    assert "pol-deny->pol-srv:80=open/deny/WRONG" in str(verification.evidence["probe_matrix"])
