"""Issue 34, item 4: each ``--cni`` value is parsed once, into the
:class:`~cnibench.backends.base.ClusterSpec` that then travels (session, plan, runner,
scenarios, the plugin's fixtures), and ``--cluster`` is checked once.

Real: both front ends (``cnibench run`` and the plugin, in this process), the option parsing,
the lab backend's choice, the session, its plan and the runner up to the cluster pool. Faked:
:meth:`LabBackend.provision` (a real lab needs root; tests/lab provisions them), which records
the spec it was asked for and raises the :class:`UnsupportedError` of a cluster that lacks
everything, so every condition is skipped after the spec has gone all the way down.
"""

from __future__ import annotations

import textwrap
from collections import Counter
from pathlib import Path

import pytest

from cnibench import cli
from cnibench.backends import choose
from cnibench.backends.base import ClusterSpec
from cnibench.backends.lab import LabBackend
from cnibench.errors import ConfigError, UnsupportedError
from cnibench.session import BenchSession, ClusterChoice, SessionConfig, plan_conditions

pytest_plugins = ["pytester"]


class _Counted:
    """What the front ends asked of the parser, the ``--cluster`` check and the lab."""

    def __init__(self) -> None:
        self.parsed: Counter[str] = Counter()
        self.cluster_checks: Counter[str] = Counter()
        self.provisioned: list[ClusterSpec] = []

    def install(self, monkeypatch: pytest.MonkeyPatch) -> None:
        counted = self
        parse = ClusterSpec.from_label.__func__  # type: ignore[attr-defined]

        def from_label(cls: type[ClusterSpec], label: str, **options: str) -> ClusterSpec:
            counted.parsed[label] += 1
            return parse(cls, label, **options)  # type: ignore[no-any-return]

        class Choices(tuple[str, ...]):
            """The ``--cluster`` choices, counting each value looked up in them: the check."""

            def __contains__(self, value: object) -> bool:
                counted.cluster_checks[str(value)] += 1
                return super().__contains__(value)

        def provision(backend: LabBackend, spec: ClusterSpec) -> None:
            counted.provisioned.append(spec)
            raise UnsupportedError(f"lab/{spec.label} lacks everything (faked)")

        monkeypatch.setattr(ClusterSpec, "from_label", classmethod(from_label))
        # ClusterChoice.parse checks against the backends' own tuple of choices.
        monkeypatch.setattr(choose, "CLUSTER_CHOICES", Choices(choose.CLUSTER_CHOICES))
        monkeypatch.setattr(LabBackend, "provision", provision)


def test_cnibench_run_parses_each_cni_once_and_checks_the_cluster_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    counted = _Counted()
    counted.install(monkeypatch)
    argv = ["run", "--cluster", "lab", "--cni", "routed", "--cni", "vxlan:napi=threaded"]
    argv += ["--scenario", "egress,wireguard", "--profile", "smoke"]
    code = cli.main([*argv, "--results-dir", str(tmp_path / "results")])
    printed = capsys.readouterr().err
    assert code == cli.EXIT_FAILED, printed  # every condition skipped by the faked lab
    assert counted.parsed == Counter(["routed", "vxlan:napi=threaded"])
    assert counted.cluster_checks == Counter(["lab"])
    # The parsed options and the scenario's encryption reached the lab in one spec...
    assert {spec.key for spec in counted.provisioned} == {
        "routed",
        "routed+wireguard",
        "vxlan+napi=threaded",
        "vxlan+wireguard+napi=threaded",
    }
    # ... and the CNI is named as results record it: its --cni label.
    assert "skipped egress/vxlan:napi=threaded (2 of 2 conditions" in printed, printed
    assert "skipped wireguard/routed (4 of 4 conditions" in printed, printed


def test_a_cni_a_scenario_item_names_is_parsed_once_too(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``egress@vxlan``: parsed when the item is planned, checked against the backend once,
    then run as that spec (a notebook's path: the library, no front end)."""
    counted = _Counted()
    counted.install(monkeypatch)
    config = SessionConfig(cluster="lab", cnis=("routed",), results_dir=tmp_path / "results")
    with BenchSession(config) as bench:
        outcome = bench.run(plan_conditions(bench.scenarios, ["egress@vxlan", "wireguard"]))
    assert counted.parsed == Counter(["routed", "vxlan"])
    assert counted.cluster_checks == Counter(["lab"])
    assert {spec.key for spec in counted.provisioned} == {"routed", "routed+wireguard", "vxlan"}
    assert [(s.scenario, s.cni) for s in outcome.skipped] == [
        ("wireguard", "routed"),
        ("egress", "vxlan"),
    ]


def test_the_plugin_parses_each_cni_once_and_checks_the_cluster_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, pytester: pytest.Pytester
) -> None:
    """Collection, the ``cluster`` fixture and every ``bench.run`` use the spec parsed when the
    plugin read its options (they re-parsed the ``cni`` label for each test)."""
    counted = _Counted()
    counted.install(monkeypatch)
    pytester.makepyfile(
        test_suite=textwrap.dedent(
            """
            import pytest

            from cnibench.errors import UnsupportedError

            @pytest.mark.egress
            def test_egress(bench, condition):
                bench.run("egress", condition)

            def test_cluster(request, cni):
                with pytest.raises(UnsupportedError, match=f"lab/{cni} lacks"):
                    request.getfixturevalue("cluster")
            """
        )
    )
    outcome = pytester.runpytest_inprocess(
        "-p", "no:cacheprovider", "--cluster=lab", "--cni=routed", "--cni=vxlan:napi=threaded",
        f"--cnibench-results-dir={tmp_path / 'results'}",
    )  # fmt: skip
    outcome.assert_outcomes(passed=2, skipped=4)
    assert counted.parsed == Counter(["routed", "vxlan:napi=threaded"])
    assert counted.cluster_checks == Counter(["lab"])
    assert {spec.key for spec in counted.provisioned} == {"routed", "vxlan+napi=threaded"}


def test_a_notebook_s_cluster_text_is_checked_where_its_cnis_are_parsed() -> None:
    """``SessionConfig(cluster="lab", cnis=("routed",))``, as a notebook writes it: the
    configuration is the door, so a bad ``--cluster`` is refused there, in the front ends'
    words, and what goes on is a :class:`ClusterChoice` nothing checks again."""
    assert SessionConfig(cluster="kind").cluster is ClusterChoice.KIND
    with pytest.raises(ConfigError) as caught:
        SessionConfig(cluster="moon")
    assert (
        str(caught.value)
        == "unknown --cluster 'moon': choose one of auto, lab, kind, aks, existing"
    )
