"""``--cni`` values name a CNI and its options: ``NAME[:FEATURE,...,key=value,...]``."""

from __future__ import annotations

import re

import pytest

from cnibench.backends.base import ClusterSpec
from cnibench.errors import ConfigError


@pytest.mark.parametrize(
    ("label", "name", "options"),
    [
        ("cilium", "cilium", {}),
        ("cilium:gateway-api", "cilium", {"features": "gateway-api"}),
        ("cilium:mode=kube-proxy,l7", "cilium", {"mode": "kube-proxy", "features": "l7"}),
        ("cilium:egress-gateway,gateway-api", "cilium", {"features": "egress-gateway,gateway-api"}),
        ("antrea:egress-ip-range=172.18.0.5-172.18.0.9", "antrea",
         {"egress-ip-range": "172.18.0.5-172.18.0.9"}),
    ],
)  # fmt: skip
def test_a_label_names_the_cni_and_its_options(label: str, name: str, options: dict) -> None:
    spec = ClusterSpec.from_label(label)
    assert (spec.cni, dict(spec.options)) == (name, options)
    # The label results record reads back to the same spec, whatever the order typed.
    assert ClusterSpec.from_label(spec.label) == spec


def test_equal_configurations_typed_differently_share_one_label() -> None:
    one = ClusterSpec.from_label("cilium:mode=kube-proxy,l7")
    other = ClusterSpec.from_label("cilium:l7,mode=kube-proxy")
    assert one == other
    assert one.label == other.label == "cilium:l7,mode=kube-proxy"
    assert one.key == other.key  # one cluster for both


def test_the_slug_is_a_safe_file_name_part() -> None:
    from cnibench.results import _SAFE_NAME_RE

    slug = ClusterSpec.from_label("cilium:mode=kube-proxy,l7").slug
    assert _SAFE_NAME_RE.match(f"baseline-{slug}-x-r1a1"), slug
    assert ClusterSpec.from_label("flannel").slug == "flannel"


@pytest.mark.parametrize(
    ("label", "message"),
    [
        (":l7", "use NAME or NAME:OPTION"),
        ("cilium:", "use NAME or NAME:OPTION"),
        ("cilium:l7,,mode=kpr", "empty option"),
        ("cilium:mode=", "empty option"),
        ("cilium:mode=kpr,mode=kube-proxy", "option mode given twice"),
        ("cilium:l7,features=gateway-api", "either bare or as features="),
    ],
)
def test_a_malformed_label_is_one_line(label: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        ClusterSpec.from_label(label)


def test_the_lab_refuses_options_and_kube_drivers_their_unknown_features() -> None:
    from cnibench.backends.lab import LabBackend
    from cnibench.session import CniRequest, validate_cnis

    with pytest.raises(
        ConfigError,
        match=re.escape("'vxlan:mtu=9000': the lab takes only the option napi=inline|threaded"),
    ):
        validate_cnis(LabBackend(), CniRequest.parse(["vxlan:mtu=9000"]))
    with pytest.raises(ConfigError, match="'vxlan:napi=busy': unknown lab option napi=busy"):
        validate_cnis(LabBackend(), CniRequest.parse(["vxlan:napi=busy"]))
    threaded = CniRequest.parse(["routed:napi=threaded"])
    assert validate_cnis(LabBackend(), threaded) == threaded.specs

    from cnibench.backends.kube import ExistingProvider, KubeBackend

    kube = KubeBackend(ExistingProvider())  # checks names only: no cluster is reached
    with pytest.raises(ConfigError, match="unknown cilium feature warp"):
        validate_cnis(kube, CniRequest.parse(["cilium:warp"]))
    request = CniRequest.parse(["cilium:mode=kube-proxy,l7", "cilium:l7,mode=kube-proxy"])
    checked = validate_cnis(kube, request)
    assert [spec.label for spec in checked] == ["cilium:l7,mode=kube-proxy"]
