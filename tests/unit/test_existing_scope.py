"""Issue 33, item 1: ``--cluster existing`` never changes the cluster's CNI or kube-proxy
settings. A condition whose cluster would need such a change is skipped before any cluster
is made, with the setting named in one line.

No API server here (tests/kube has one): the kubeconfig names a closed loopback port and no
pullable tools image is set, so any attempt to provision would end the run with an error line
at once; a run whose every condition is refused shows none, which is how these tests see
that nothing was provisioned. Nothing is faked.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from cnibench import cli
from cnibench.backends.base import ClusterSpec
from cnibench.backends.kube import ExistingProvider, KindProvider, KubeBackend
from cnibench.backends.kube.existing import NEVER_CHANGES, existing_refusal
from cnibench.backends.lab import LabBackend
from cnibench.errors import ConfigError
from cnibench.scenarios.runner import ClusterPool
from cnibench.session import (
    BackendChoice,
    BenchSession,
    EventKind,
    ProgressEvent,
    SessionConfig,
    plan_conditions,
)

pytest_plugins = ["pytester"]

_UNREACHABLE = """\
apiVersion: v1
kind: Config
clusters:
- name: closed
  cluster: {server: "https://127.0.0.1:9"}
contexts:
- name: closed
  context: {cluster: closed, user: nobody}
current-context: closed
users:
- name: nobody
  user: {token: not-a-secret}
"""


@pytest.fixture
def kubeconfig(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A kubeconfig of a server that is not there, as ``$KUBECONFIG``; no registry images
    named, so a provision attempt fails at once (``require_pullable``)."""
    path = tmp_path / "kubeconfig"
    path.write_text(_UNREACHABLE)
    monkeypatch.setenv("KUBECONFIG", str(path))
    for variable in ("CNIBENCH_IMAGE_TOOLS", "CNIBENCH_IMAGE_SOCKPERF", "CNIBENCH_IMAGES"):
        monkeypatch.delenv(variable, raising=False)
    return path


@pytest.mark.parametrize(
    ("spec", "reason"),
    [
        (ClusterSpec("cilium", options={"napi": "threaded"}), f"napi=threaded: {NEVER_CHANGES}"),
        (ClusterSpec("flannel", encryption="wireguard"), f"encryption wireguard: {NEVER_CHANGES}"),
        (
            ClusterSpec("flannel", options={"kube-proxy": "nftables"}),
            f"kube-proxy=nftables: {NEVER_CHANGES} (its Services go through the proxy it runs;"
            " --proxy chooses the conditions)",
        ),
        (
            ClusterSpec("kube-router", options={"gateway": "traefik"}),
            "gateway=traefik: --cluster existing never installs a Gateway API implementation"
            " (its CRDs and GatewayClass are cluster-wide): use the CNI's own, if the cluster"
            " runs it (e.g. cilium:gateway-api)",
        ),
        (ClusterSpec("calico"), ""),
        (ClusterSpec("cilium", options={"napi": "inline"}), ""),
        (ClusterSpec("cilium", options={"mode": "kube-proxy", "features": "l7"}), ""),
        (ClusterSpec("antrea", options={"egress-ip-range": "10.0.0.1-10.0.0.4"}), ""),
    ],
    ids=[
        "napi-threaded",
        "encryption",
        "kube-proxy-mode",
        "traefik-gateway",
        "plain-cni",
        "napi-default-spelt-out",
        "cilium-mode-and-features-describe-it",
        "egress-ip-range-is-cnibench-own-input",
    ],
)
def test_what_an_existing_cluster_would_have_to_change_is_refused(
    spec: ClusterSpec, reason: str
) -> None:
    assert existing_refusal(spec) == reason


def test_the_kube_backend_refuses_only_where_the_setting_cannot_be_had(tmp_path: Path) -> None:
    threaded = ClusterSpec("flannel", options={"napi": "threaded"})
    nftables = ClusterSpec("flannel", options={"kube-proxy": "nftables"})
    existing = KubeBackend(ExistingProvider(tmp_path / "kubeconfig"))
    kind = KubeBackend(KindProvider(tmp_path / "state"))
    assert existing.unsupported(threaded) == f"napi=threaded: {NEVER_CHANGES}"
    assert existing.unsupported(nftables).startswith(f"kube-proxy=nftables: {NEVER_CHANGES}")
    assert existing.unsupported(ClusterSpec("flannel")) == ""
    # kind makes the cluster with these settings: nothing to refuse.
    assert kind.unsupported(threaded) == ""
    assert kind.unsupported(nftables) == ""
    assert kind.unsupported(ClusterSpec("flannel", encryption="wireguard")) == ""


def test_the_lab_refuses_nothing_it_validated() -> None:
    lab = LabBackend()
    for spec in lab.validate([ClusterSpec("vxlan", options={"napi": "threaded"})]):
        assert lab.unsupported(spec) == ""
        assert lab.unsupported(ClusterSpec(spec.cni, encryption="wireguard")) == ""


def test_cnibench_run_says_each_refused_condition_once_before_anything_runs(
    kubeconfig: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["run", "--cluster", "existing", "--cni", "flannel:napi=threaded"]
    argv += ["--scenario", "egress,wireguard", "--profile", "smoke"]
    code = cli.main([*argv, "--results-dir", str(tmp_path / "results")])
    lines = capsys.readouterr().err.splitlines()
    assert code == cli.EXIT_FAILED
    skips = [line for line in lines if line.startswith("skipped ")]
    threaded = f"napi=threaded: {NEVER_CHANGES}"
    assert skips == [
        f"skipped egress/flannel:napi=threaded (2 of 2 conditions: gateway-off, gateway-on):"
        f" {threaded}",
        f"skipped wireguard/flannel:napi=threaded (2 of 4 conditions: off-rr, off-iperf3):"
        f" {threaded}",
        # The scenario's encryption is its cluster's: named before the CNI's own option.
        "skipped wireguard/flannel:napi=threaded (2 of 4 conditions: on-rr, on-iperf3):"
        f" encryption wireguard: {NEVER_CHANGES}",
    ]
    # Said right after the backend line, before the bar or anything provisioned.
    assert lines[: len(skips) + 1] == ["--cluster existing", *skips]
    assert "nothing was measured: every condition was skipped" in lines
    assert not [line for line in lines if "error" in line]  # no provision was attempted


def test_the_session_refuses_up_front_and_provisions_only_the_rest(
    kubeconfig: Path, tmp_path: Path
) -> None:
    """wireguard on a plain --cni: ``off`` is the cluster as it is, ``on`` would change it.
    The refusal comes first; the one provision attempted (for ``off``) is what fails, at
    once, for want of a registry tools image."""
    backend = KubeBackend(ExistingProvider(kubeconfig))
    spec = ClusterSpec("calico")
    config = SessionConfig(cluster="existing", cnis=(spec.label,), results_dir=tmp_path / "results")
    choice = BackendChoice(backend, "--cluster existing", (spec,))
    events: list[ProgressEvent] = []
    with BenchSession(config, choice=choice) as session:
        planned = plan_conditions(session.scenarios, ["wireguard"])
        with pytest.raises(ConfigError, match="cannot use the locally built"):
            session.run(planned, progress=events.append)
    kinds = [event.kind for event in events]
    assert kinds[:2] == [EventKind.PLANNED, EventKind.REFUSED]
    assert events[1].text == (
        "skipped wireguard/calico (2 of 4 conditions: on-rr, on-iperf3): encryption"
        f" wireguard: {NEVER_CHANGES}"
    )
    assert events[1].runs == 2 * config.profile.runs
    assert kinds[2] is EventKind.CONDITION
    assert events[2].text.startswith("wireguard calico off-")


class _SayingCluster:
    """Stand-in for a provisioned cluster (none can be made here): it has notes, and says a
    line later through what :meth:`listen` was given, as a kube cluster on an existing
    cluster does before it creates a cluster-wide object."""

    notes = ("CNI: calico (DaemonSet calico-system/calico-node)",)

    def __init__(self) -> None:
        self.listener: Callable[[str], None] | None = None

    def listen(self, listener: Callable[[str], None]) -> None:
        self.listener = listener

    def say(self, line: str) -> None:
        assert self.listener is not None, "the pool never listened"
        self.listener(line)


class _OneClusterBackend:
    """Stand-in backend giving :class:`_SayingCluster` (the pool's only use of it)."""

    def __init__(self) -> None:
        self.cluster = _SayingCluster()

    def provision(self, spec: ClusterSpec) -> _SayingCluster:
        return self.cluster


def test_the_pool_passes_on_what_a_cluster_says_later_to_whoever_listens_then() -> None:
    """Issue 33, item 2: the announcement of a cluster-wide object reaches the session's
    progress (CLUSTER lines) at the moment it is made, prefixed with the cluster's --cni."""
    backend = _OneClusterBackend()
    pool = ClusterPool(backend)  # type: ignore[arg-type]
    heard: list[str] = []
    pool.notice = heard.append
    pool.get(ClusterSpec("calico"))
    backend.cluster.say("creating cluster-wide ClusterRole cnibench-1-prometheus for Prometheus")
    assert heard == [
        "calico: CNI: calico (DaemonSet calico-system/calico-node)",
        "calico: creating cluster-wide ClusterRole cnibench-1-prometheus for Prometheus",
    ]
    pool.notice = None  # between two run()s of a session nobody listens: nothing breaks
    backend.cluster.say("said to nobody")
    pool.notice = heard.append
    backend.cluster.say("heard again")
    assert heard[-1] == "calico: heard again"
    assert len(heard) == 3


USER_SUITE = """
import pytest

def test_my_own_check(cluster):
    raise AssertionError("ran on a cluster that would have to change")

@pytest.mark.egress
def test_my_egress(bench, cni, condition):
    bench.run("egress", condition)
"""


def test_the_plugin_skips_what_the_existing_cluster_would_have_to_change(
    kubeconfig: Path, pytester: pytest.Pytester
) -> None:
    """A user's suite on ``--cluster existing --cni flannel:napi=threaded``: the ``cluster``
    fixture and every ``bench.run`` skip with the reason before anything is provisioned (a
    provision would have errored: no server answers, no registry image is named)."""
    pytester.makepyfile(test_user=USER_SUITE)
    result = pytester.runpytest_subprocess(
        "-rs", "--cluster=existing", "--cni=flannel:napi=threaded", "--cnibench-profile=smoke"
    )
    output = result.stdout.str() + result.stderr.str()
    assert result.ret == 0, output
    result.assert_outcomes(skipped=3)
    reason = f"napi=threaded: {NEVER_CHANGES}"
    skips = [line for line in result.outlines if line.startswith("SKIPPED")]
    assert skips, output
    assert all(line.endswith(reason) for line in skips), output
    # The fixture's skip names the --cni it was asked for (bench.run's are per condition).
    assert any(line.endswith(f"test_user.py:3: flannel:napi=threaded: {reason}") for line in skips)
