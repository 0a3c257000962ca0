"""A lab with ``napi=threaded`` moves each machine's NAPI pollers into that machine's cgroups.
A poller can end between the listing and the move (its device's NAPI instances re-created)
and its PID go to another kernel thread, which the cgroup refuses with EINVAL: seen once on
2026-11-27, when it ended a whole ``nox -s demo`` run. The lab lists the pollers again.

The kernel's side is faked here (the listing and the cgroup write); tests/lab runs the real
thing (test_lab_node_cpu.py).
"""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from cnibench.backends.lab import cluster as lab_cluster
from cnibench.errors import ProvisioningError


class _Cgroups:
    """Refuses a PID no longer a poller, as a cgroup's ``cgroup.procs`` does."""

    def __init__(self, pollers: dict[str, list[int]]) -> None:
        self.available = True
        self.pollers = pollers
        self.adopted: dict[str, list[int]] = {}

    def adopt(self, member: str, pids: list[int]) -> None:
        for pid in pids:
            if pid not in self.pollers[member]:
                raise ProvisioningError(f"move pid {pid} into cgroup {member}: EINVAL")
        self.adopted[member] = list(pids)


def _lab(cgroups: _Cgroups) -> SimpleNamespace:
    plan = SimpleNamespace(napi_threaded=True, machines={"egress-gw": "ns-gw"})
    return SimpleNamespace(_plan=plan, _cgroups=cgroups, lab_id="t")


def test_a_poller_that_ends_between_listing_and_move_is_listed_again(monkeypatch):
    cgroups = _Cgroups({"egress-gw": [202]})
    listings = iter([[101], [202]])  # the first poller ends; its successor is 202
    monkeypatch.setattr(
        lab_cluster, "napi_thread_pids", lambda netns, names: {names[0]: next(listings)}
    )
    monkeypatch.setattr(lab_cluster, "NAPI_ADOPT_PAUSE_S", 0.0)
    lab_cluster.LabCluster._adopt_napi_threads(_lab(cgroups))  # type: ignore[arg-type]
    assert cgroups.adopted == {"egress-gw": [202]}


def test_a_poller_that_cannot_be_moved_at_all_still_fails_provisioning(monkeypatch):
    cgroups = _Cgroups({"egress-gw": []})
    calls = []

    def listing(netns, names):
        calls.append(netns)
        return {names[0]: [101]}

    monkeypatch.setattr(lab_cluster, "napi_thread_pids", listing)
    monkeypatch.setattr(lab_cluster, "NAPI_ADOPT_S", 0.2)
    monkeypatch.setattr(lab_cluster, "NAPI_ADOPT_PAUSE_S", 0.05)
    with pytest.raises(ProvisioningError) as raised:
        lab_cluster.LabCluster._adopt_napi_threads(_lab(cgroups))  # type: ignore[arg-type]
    assert str(raised.value) == (
        "lab t: waited 0.2 s for the NAPI pollers of ns-gw to move into the cgroup of"
        " egress-gw: last seen: move pid 101 into cgroup egress-gw: EINVAL"
    )
    assert len(calls) >= 2  # listed again while the time lasted (once more at its end)


def test_a_device_without_pollers_fails_at_once(monkeypatch):
    calls = []

    def listing(netns, names):
        calls.append(netns)
        return {names[0]: []}

    monkeypatch.setattr(lab_cluster, "napi_thread_pids", listing)
    with pytest.raises(ProvisioningError, match="has no NAPI thread"):
        lab_cluster.LabCluster._adopt_napi_threads(_lab(_Cgroups({"egress-gw": []})))  # type: ignore[arg-type]
    assert len(calls) == 1
