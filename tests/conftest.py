"""Suite-wide policy: a required tier never skips silently.

``CNIBENCH_REQUIRE=lab`` (set by ``.ci/run``) turns every skip in the tiers that need this
machine's real tools and kernel (tests/integration, tests/lab, tests/bench, tests/reliability)
into a failure; ``kube`` does the same for tests/kube and ``kind`` for tests/kind. A skipped
tier then shows up red, never as a green run that tested nothing.
"""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest

TIER_DIRS = {
    "lab": ("integration", "lab", "bench", "reliability"),
    "kube": ("kube",),
    "kind": ("kind",),
}


def pytest_configure(config: pytest.Config) -> None:
    """A shell starts a background job (``.ci/run &``, ``nohup``) with SIGINT ignored, and every
    child inherits that: the cnibench runs the interrupt tests start would then ignore the
    Ctrl-C they are sent and time out. Give this process, and so each child, Python's usual
    SIGINT handling (nothing changes when SIGINT is not ignored)."""
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)


def _required_dirs() -> set[str]:
    tiers = {t.strip() for t in os.environ.get("CNIBENCH_REQUIRE", "").split(",") if t.strip()}
    return {d for tier in tiers for d in TIER_DIRS.get(tier, ())}


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]):
    outcome = yield
    report = outcome.get_result()
    if not report.skipped or hasattr(report, "wasxfail"):
        return
    parts = Path(str(item.path)).relative_to(Path(__file__).parent).parts
    if parts and parts[0] in _required_dirs():
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
        report.outcome = "failed"
        report.longrepr = f"required tier skipped (CNIBENCH_REQUIRE): {reason}"


LAST_DIRS = ("kube", "kind")
"""Tiers run after every other, in this order: their binaries and images are built by
``nox -s tests`` in the background (``scripts/kube-tier.sh``, then ``cnibench images build
--prepare``), on the CPU the other tiers leave idle; the kube tier waits for its build, the
kind tier for the image builder's lock."""


KIND_LAST = ("test_kind_cilium.py",)
"""kind modules run after the tier's others: Cilium's images are the last the background
prepare builds (its build is the longest, about 10 minutes cold, so it runs last), and the
flannel and kube-router modules need only what is built before them (the image builder takes
no lock once a build's steps are current)."""


FOLDER_MARKERS = {
    "lab": "lab",
    "reliability": "lab",
    "kube": "kube",
    "kind": "kind",
    "aks": "aks",
}
"""The marker every test of a folder gets (``-m kube`` selects the kube tier): a test's needs
follow from where it lives, not from a line each module must remember. tests/integration mixes
tiers and marks its lab modules itself."""


OPT_IN_DIRS = {"aks": "CNIBENCH_AKS_VALIDATE"}
"""Folders collected only when their variable is set (or the folder is named on the command
line): tests/aks needs OpenTofu and the azurerm provider built from Go modules, over an hour
cold, so only ``nox -s aks-validate`` runs it, never ``nox -s tests``."""


def pytest_ignore_collect(collection_path: Path, config: pytest.Config) -> bool | None:
    root = Path(__file__).parent
    if collection_path.parent != root or collection_path.name not in OPT_IN_DIRS:
        return None
    if os.environ.get(OPT_IN_DIRS[collection_path.name]):
        return None
    named = any(
        Path(arg.split("::")[0]).resolve().is_relative_to(collection_path) for arg in config.args
    )
    return None if named else True


def _tier(item: pytest.Item) -> str:
    root = Path(__file__).parent
    path = Path(str(item.path))
    return path.relative_to(root).parts[0] if path.is_relative_to(root) else ""


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        marker = FOLDER_MARKERS.get(_tier(item))
        if marker:
            item.add_marker(marker)

    def rank(item: pytest.Item) -> tuple[int, int]:
        tier = _tier(item)
        group = LAST_DIRS.index(tier) + 1 if tier in LAST_DIRS else 0
        return group, int(tier == "kind" and Path(str(item.path)).name in KIND_LAST)

    items.sort(key=rank)  # stable: the order inside each group is kept


STAND_IN_TIERS = ("unit", "integration")
"""Tiers that drive kind, engines and ``cnibench clean`` with stand-ins only."""


@pytest.fixture(autouse=True)
def _stand_ins_keep_off_the_hosts_kind_state(
    request: pytest.FixtureRequest,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    """The kind tier runs beside the others (nox -s tests): a test here whose stand-in kind
    "creates" a cluster must not hold a lease on a real cluster's name, and one whose stand-in
    clean "removes" every cluster must not remove the /lib/modules the kind tier made. Their
    leases and kind state go to a directory of this run's own."""
    if _tier(request.node) not in STAND_IN_TIERS:
        return
    base = tmp_path_factory.getbasetemp()
    monkeypatch.setenv("CNIBENCH_LEASES", str(base / "stand-in-leases"))
    monkeypatch.setenv("CNIBENCH_KIND_STATE", str(base / "stand-in-kind-state"))
