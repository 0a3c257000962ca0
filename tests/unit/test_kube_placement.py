"""Nodes for the roles without labelling any (``--nodes``, labels, choice) and the CNI found
running on an existing cluster: the pure parts, on hand-made node facts and DaemonSet lists."""

from __future__ import annotations

import pytest

from cnibench.backends.base import ClusterSpec, NodePins, NodeRole
from cnibench.backends.kube.detect import agent_daemonsets, check_cni, detect_cnis
from cnibench.backends.kube.placement import NodeFacts, Taint, choose_nodes
from cnibench.backends.kube.render import NodeTarget, pod
from cnibench.errors import ConfigError, ProvisioningError

ROLES = (NodeRole.CLIENT, NodeRole.SERVER, NodeRole.EGRESS_GW)
CONTROL_PLANE = {"node-role.kubernetes.io/control-plane": ""}
CP_TAINT = Taint("node-role.kubernetes.io/control-plane", "", "NoSchedule")


def _node(name: str, **kwargs: object) -> NodeFacts:
    labels = {"kubernetes.io/hostname": name, **kwargs.pop("labels", {})}  # type: ignore[dict-item]
    return NodeFacts(name, labels=labels, **kwargs)  # type: ignore[arg-type]


def _placed(choice: object) -> list[tuple[str, str, str]]:
    return [(r.role.value, r.node.name, r.chosen_by.value) for r in choice.roles]  # type: ignore[attr-defined]


# -- --nodes --------------------------------------------------------------------------------


def test_nodes_option_names_a_node_per_role() -> None:
    pins = NodePins.parse("client=w1, server=w2,egress-gw=gw")
    assert dict(pins.nodes) == {
        NodeRole.CLIENT: "w1",
        NodeRole.SERVER: "w2",
        NodeRole.EGRESS_GW: "gw",
    }
    assert pins.text == "client=w1,server=w2,egress-gw=gw"
    assert not NodePins.parse(None)
    assert not NodePins.parse("")


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("client", "'client' is not ROLE=NODE"),
        ("client=", "'client=' is not ROLE=NODE"),
        ("=w1", "'=w1' is not ROLE=NODE"),
        ("router=w1", "unknown role 'router' (roles: client, server, egress-gw)"),
        ("client=w1,client=w2", "role client given twice"),
        ("client=w1,,server=w2", "'' is not ROLE=NODE"),
    ],
    ids=["no-equals", "no-node", "no-role", "unknown-role", "twice", "empty-item"],
)
def test_a_bad_nodes_option_is_one_line_naming_the_problem(text: str, words: str) -> None:
    with pytest.raises(ConfigError) as caught:
        NodePins.parse(text)
    assert words in str(caught.value)
    assert str(caught.value).startswith(f"--nodes {text!r}")
    assert "\n" not in str(caught.value)


# -- the choice -----------------------------------------------------------------------------


def test_workers_are_chosen_one_per_role_before_the_control_plane() -> None:
    nodes = [
        _node("a-cp", labels=CONTROL_PLANE),
        _node("w3"),
        _node("w1"),
        _node("w2"),
    ]
    choice = choose_nodes(nodes, ROLES)
    assert _placed(choice) == [
        ("client", "w1", "chosen"),
        ("server", "w2", "chosen"),
        ("egress-gw", "w3", "chosen"),
    ]
    assert not choice.same_node
    assert "same-node" not in choice.line()


def test_two_workers_keep_the_client_alone_and_say_the_others_share_a_node() -> None:
    choice = choose_nodes([_node("w1"), _node("w2"), _node("cp", labels=CONTROL_PLANE,
                                                          taints=(CP_TAINT,))], ROLES)  # fmt: skip
    assert _placed(choice) == [
        ("client", "w1", "chosen"),
        ("server", "w2", "chosen"),
        ("egress-gw", "w2", "chosen"),
    ]
    assert choice.same_node
    assert choice.line().endswith(
        "same-node: w2 holds server and egress-gw (their traffic never crosses nodes)"
    )


def test_an_untainted_control_plane_is_used_when_workers_run_out() -> None:
    choice = choose_nodes([_node("w1"), _node("cp", labels=CONTROL_PLANE)], ROLES)
    assert [name for _, name, _ in _placed(choice)] == ["w1", "cp", "cp"]


def test_a_single_node_cluster_holds_every_role() -> None:
    choice = choose_nodes([_node("only", labels=CONTROL_PLANE)], ROLES)
    assert {name for _, name, _ in _placed(choice)} == {"only"}
    assert choice.same_node


@pytest.mark.parametrize(
    "unusable",
    [
        _node("w0", unschedulable=True),
        _node("w0", ready=False),
        _node("w0", taints=(Taint("dedicated", "gpu", "NoSchedule"),)),
        _node("w0", taints=(Taint("maintenance", "", "NoExecute"),)),
    ],
    ids=["cordoned", "not-ready", "no-schedule", "no-execute"],
)
def test_nodes_the_pods_cannot_run_on_are_not_chosen(unusable: NodeFacts) -> None:
    choice = choose_nodes([unusable, _node("w1"), _node("w2")], ROLES)
    assert "w0" not in {name for _, name, _ in _placed(choice)}


def test_a_prefer_no_schedule_taint_does_not_keep_a_node_out() -> None:
    soft = _node("w0", taints=(Taint("spot", "true", "PreferNoSchedule"),))
    choice = choose_nodes([soft, _node("w1")], ROLES)
    assert _placed(choice)[0] == ("client", "w0", "chosen")


def test_a_tolerated_taint_does_not_keep_a_node_out() -> None:
    tainted = _node("w0", taints=(Taint("dedicated", "bench", "NoSchedule"),))
    tolerations = [{"key": "dedicated", "operator": "Equal", "value": "bench"}]
    choice = choose_nodes([tainted], ROLES, tolerations=tolerations)
    assert {name for _, name, _ in _placed(choice)} == {"w0"}


def test_when_no_node_can_hold_the_pods_each_is_named_with_its_reason() -> None:
    nodes = [
        _node("w1", taints=(Taint("dedicated", "gpu", "NoSchedule"),)),
        _node("w2", unschedulable=True),
    ]
    with pytest.raises(ProvisioningError) as caught:
        choose_nodes(nodes, ROLES)
    message = str(caught.value)
    assert "w1 has taint dedicated=gpu:NoSchedule that the benchmark pods do not tolerate" in (
        message
    )
    assert "w2 is cordoned (unschedulable)" in message
    assert "\n" not in message


def test_role_labels_come_first_as_on_the_kind_clusters_cnibench_makes() -> None:
    role = "cnibench.io/role"
    nodes = [
        _node("kind-control-plane", labels=CONTROL_PLANE, taints=(CP_TAINT,)),
        _node("kind-worker", labels={role: "egress-gw"}),
        _node("kind-worker2", labels={role: "client"}),
        _node("kind-worker3", labels={role: "server"}),
    ]
    assert _placed(choose_nodes(nodes, ROLES)) == [
        ("client", "kind-worker2", "label"),
        ("server", "kind-worker3", "label"),
        ("egress-gw", "kind-worker", "label"),
    ]


def test_a_labelled_node_still_becoming_ready_is_kept() -> None:
    """Right after its CNI rolled out, a kind node may still be NotReady for a moment."""
    node = _node(
        "kind-worker",
        labels={"cnibench.io/role": "client"},
        ready=False,
        taints=(Taint("node.kubernetes.io/not-ready", "", "NoSchedule"),),
    )
    choice = choose_nodes([node, _node("w1"), _node("w2")], ROLES)
    assert _placed(choice)[0] == ("client", "kind-worker", "label")


def test_a_labelled_node_whose_cilium_agent_is_still_starting_is_kept() -> None:
    """Cilium taints a node until its agent there is ready (the kind tier's Cilium run in
    kube-proxy mode met it): the taint goes by itself, so a labelled node keeps its role."""
    node = _node(
        "kind-worker",
        labels={"cnibench.io/role": "client"},
        taints=(Taint("node.cilium.io/agent-not-ready", "", "NoSchedule"),),
    )
    choice = choose_nodes([node, _node("w1"), _node("w2")], ROLES)
    assert _placed(choice)[0] == ("client", "kind-worker", "label")
    # Unlabelled, such a node is not chosen while another is free of the taint.
    unlabelled = _node("a0", taints=(Taint("node.cilium.io/agent-not-ready", "", "NoSchedule"),))
    assert "a0" not in {
        name
        for _, name, _ in _placed(
            choose_nodes([unlabelled, _node("w1"), _node("w2"), _node("w3")], ROLES)
        )
    }


def test_a_node_labelled_for_another_role_is_not_chosen_for_this_one() -> None:
    nodes = [_node("a", labels={"cnibench.io/role": "egress-gw"}), _node("b"), _node("c")]
    assert _placed(choose_nodes(nodes, ROLES)) == [
        ("client", "b", "chosen"),
        ("server", "c", "chosen"),
        ("egress-gw", "a", "label"),
    ]


def test_a_tainted_labelled_node_is_refused_naming_node_and_taint() -> None:
    node = _node("w9", labels={"cnibench.io/role": "server"},
                 taints=(Taint("dedicated", "db", "NoExecute"),))  # fmt: skip
    with pytest.raises(ConfigError, match=r"node w9 is labelled cnibench.io/role=server but has"
                       r" taint dedicated=db:NoExecute"):  # fmt: skip
        choose_nodes([node, _node("w1")], ROLES)


def test_pinned_nodes_win_over_labels_and_the_rest_is_chosen_around_them() -> None:
    nodes = [_node("w1"), _node("w2", labels={"cnibench.io/role": "client"}), _node("w3")]
    choice = choose_nodes(nodes, ROLES, pins=NodePins.parse("client=w3"))
    assert _placed(choice) == [
        ("client", "w3", "pinned"),
        ("server", "w1", "chosen"),
        ("egress-gw", "w1", "chosen"),
    ]


@pytest.mark.parametrize(
    ("pinned", "words"),
    [
        (_node("w1", taints=(Taint("dedicated", "gpu", "NoSchedule"),)),
         "--nodes server=w1: node w1 has taint dedicated=gpu:NoSchedule"),
        (_node("w1", unschedulable=True), "--nodes server=w1: node w1 is cordoned"),
        (_node("w1", ready=False), "--nodes server=w1: node w1 is not Ready"),
    ],
    ids=["tainted", "cordoned", "not-ready"],
)  # fmt: skip
def test_a_pinned_node_the_pods_cannot_use_is_refused_in_one_line(
    pinned: NodeFacts, words: str
) -> None:
    with pytest.raises(ConfigError) as caught:
        choose_nodes([pinned, _node("w2")], ROLES, pins=NodePins.parse("server=w1"))
    assert str(caught.value).startswith(words)
    assert "\n" not in str(caught.value)


def test_a_pinned_node_that_does_not_exist_is_named() -> None:
    with pytest.raises(ConfigError, match=r"^--nodes egress-gw=gw9: this cluster has no node gw9$"):
        choose_nodes([_node("w1")], ROLES, pins=NodePins.parse("egress-gw=gw9"))


# -- where pods land ------------------------------------------------------------------------


def test_pods_select_their_node_by_its_own_hostname_label() -> None:
    node = NodeFacts("ip-10-0-0-7.internal", labels={"kubernetes.io/hostname": "ip-10-0-0-7"})
    (held, *_) = choose_nodes([node], ROLES).roles
    manifest = pod("p", namespace="n", session="s", role=NodeRole.CLIENT, node=held.target)
    assert manifest["spec"]["nodeSelector"] == {"kubernetes.io/hostname": "ip-10-0-0-7"}
    assert "nodeName" not in manifest["spec"]


def test_a_node_without_a_hostname_label_is_targeted_by_name() -> None:
    target = NodeTarget.of_node("bare", {})
    manifest = pod("p", namespace="n", session="s", role=NodeRole.SERVER, node=target)
    assert manifest["spec"]["nodeName"] == "bare"
    assert manifest["spec"]["nodeSelector"] == {}


# -- the CNI running on an existing cluster -------------------------------------------------

EVERYDAY = [("kube-system", "kube-proxy"), ("monitoring", "node-exporter")]


@pytest.mark.parametrize(
    ("daemonsets", "expected"),
    [
        ([("kube-system", "cilium"), ("kube-system", "cilium-envoy")], ["cilium"]),
        ([("kube-flannel", "kube-flannel-ds")], ["flannel"]),
        ([("kube-system", "kube-flannel-ds-amd64")], ["flannel"]),
        ([("kube-system", "kube-router")], ["kube-router"]),
        ([("kube-system", "antrea-agent")], ["antrea"]),
        ([("calico-system", "calico-node")], ["calico"]),
        ([("kube-system", "calico-node")], ["calico"]),
        ([("kube-system", "kindnet")], ["kindnet"]),
        ([], []),
    ],
    ids=["cilium", "flannel", "flannel-old", "kube-router", "antrea", "calico-operator",
         "calico-manifest", "kindnet", "none"],
)  # fmt: skip
def test_the_cni_is_recognised_by_its_agent_daemonset(
    daemonsets: list[tuple[str, str]], expected: list[str]
) -> None:
    found = detect_cnis([*EVERYDAY, *daemonsets], agent_daemonsets())
    assert [cni for cni, _ in found] == expected


def test_a_cni_other_than_the_one_running_is_refused_naming_it() -> None:
    found = detect_cnis([("kube-system", "cilium")], agent_daemonsets())
    with pytest.raises(ConfigError, match=r"^--cni flannel: this cluster runs cilium$"):
        check_cni(ClusterSpec(cni="flannel"), found)
    assert check_cni(ClusterSpec(cni="cilium"), found) == (
        "CNI: this cluster runs cilium (DaemonSet kube-system/cilium)"
    )


def test_no_known_cni_is_said_and_the_given_one_goes_on() -> None:
    line = check_cni(ClusterSpec.from_label("cilium:mode=kpr"), detect_cnis(EVERYDAY, {}))
    assert "none of cnibench's known CNI agents runs" in line
    assert line.endswith("going on with --cni cilium:mode=kpr")
