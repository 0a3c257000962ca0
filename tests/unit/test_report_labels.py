"""Short labels: only the parts that tell labels apart, wrapped at their separators."""

from __future__ import annotations

import pytest

from cnibench.report.labels import (
    common_parts,
    distinct_labels,
    shorten_cni_labels,
    wrap_label,
)

# The kind study's CNI configurations (docs/results/kind-2026-11-27).
STUDY_CNIS = [
    "flannel",
    "flannel:kube-proxy=nftables",
    "cilium:napi=threaded",
    "cilium:gateway=traefik,mode=kube-proxy",
    "kube-router:gateway=traefik",
]


@pytest.mark.parametrize(
    ("labels", "expected"),
    [
        (
            ["cilium:gateway=traefik,mode=kube-proxy", "cilium:gateway=traefik,mode=ebpf"],
            ["cilium:mode=kube-proxy", "cilium:mode=ebpf"],
        ),
        (
            ["cilium:gateway=traefik,napi=threaded", "kube-router:gateway=traefik"],
            ["cilium:napi=threaded", "kube-router"],
        ),
        (["cilium:napi=threaded", "flannel:napi=threaded"], ["cilium", "flannel"]),
        (STUDY_CNIS, STUDY_CNIS),
    ],
    ids=["option-shared-by-all-goes", "name-stays", "only-name-left", "nothing-shared"],
)
def test_shorten_cni_labels_keeps_the_name_and_the_options_that_differ(labels, expected):
    assert shorten_cni_labels(labels) == dict(zip(labels, expected, strict=True))


def test_shorten_cni_labels_keeps_full_labels_that_would_come_out_the_same():
    # Same options in another order: dropping the shared ones would leave two "cilium"s.
    labels = ["cilium:a=1,b=2", "cilium:b=2,a=1", "flannel:a=1,b=2"]
    assert shorten_cni_labels(labels) == {
        "cilium:a=1,b=2": "cilium:a=1,b=2",
        "cilium:b=2,a=1": "cilium:b=2,a=1",
        "flannel:a=1,b=2": "flannel",
    }


def test_shorten_cni_labels_maps_each_label_once_in_order_of_first_appearance():
    shortened = shorten_cni_labels(["flannel:x=1", "cilium:x=1", "flannel:x=1"])
    assert list(shortened.items()) == [("flannel:x=1", "flannel"), ("cilium:x=1", "cilium")]


def test_a_single_cni_label_is_left_whole():
    assert shorten_cni_labels(["cilium:napi=threaded"]) == {
        "cilium:napi=threaded": "cilium:napi=threaded"
    }


def test_distinct_labels_drop_the_context_every_contrast_shares():
    # The kind study's policy contexts: a CNI contrast and a feature contrast.
    contexts = [
        "clients=1, engine=iptables, placement=cross-node, policy=on, rules=1000,"
        " rules_see=new-connections",
        "rules 1000 vs 0; clients=1, engine=iptables, placement=cross-node,"
        " rules_see=new-connections",
        "clients=1, placement=cross-node, policy=off",
    ]
    assert distinct_labels(contexts) == [
        "engine=iptables, policy=on, rules=1000, rules_see=new-connections",
        "rules 1000 vs 0; engine=iptables, rules_see=new-connections",
        "policy=off",
    ]
    assert common_parts(contexts) == ["clients=1", "placement=cross-node"]


def test_a_context_shared_whole_becomes_empty_and_a_name_never_goes():
    assert distinct_labels(["clients=1", "clients=1, rules=5"]) == ["", "rules=5"]
    assert distinct_labels(["flannel:x=1", "cilium:x=1"]) == ["flannel", "cilium"]


def test_a_part_with_commas_in_brackets_is_one_part():
    contexts = ['users=10, weights={"v1": 60, "v2": 40}', 'users=100, weights={"v1": 60, "v2": 40}']
    assert common_parts(contexts) == ['weights={"v1": 60, "v2": 40}']
    assert distinct_labels(contexts) == ["users=10", "users=100"]


def test_equal_labels_come_back_unchanged():
    assert distinct_labels(["clients=1, rules=0"] * 3) == ["clients=1, rules=0"] * 3
    assert distinct_labels([]) == []


def test_wrapped_labels_break_after_separators_and_keep_lines_short():
    wrapped = distinct_labels(
        ["cilium:gateway=traefik,mode=kube-proxy,napi=threaded", "flannel"], width=24
    )
    assert wrapped == ["cilium:gateway=traefik,\nmode=kube-proxy,\nnapi=threaded", "flannel"]
    assert all(len(line) <= 24 for label in wrapped for line in label.split("\n"))


def test_wrap_label_breaks_a_long_part_at_spaces_but_never_inside_a_word():
    assert (
        wrap_label("rules 1000 vs 0; engine=iptables", 12) == "rules 1000\nvs 0;\nengine=iptables"
    )


@pytest.mark.parametrize(
    ("call", "error"),
    [
        (lambda: distinct_labels("cilium"), TypeError),
        (lambda: distinct_labels(["cilium", 3]), TypeError),  # type: ignore[list-item]
        (lambda: distinct_labels(["cilium"], width=0), ValueError),
        (lambda: shorten_cni_labels("cilium"), TypeError),
        (lambda: wrap_label("cilium", 0), ValueError),
    ],
    ids=["one-string", "not-a-string", "width-0", "cni-one-string", "wrap-width-0"],
)
def test_bad_input_is_a_clear_error(call, error):
    with pytest.raises(error):
        call()
