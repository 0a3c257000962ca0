"""``cnibench clean`` and the empty ``/lib/modules`` cnibench makes for kind on a kernel that has
none (:meth:`KindProvider._ensure_lib_modules`).

An interrupted kind tier once left it behind with no engine running. ``clean`` could not list
kind clusters then ("kind get clusters failed"), so it kept the directory, and the next kind
tier failed its own "nothing left behind" check. It now goes when no cnibench kind cluster can
be left anywhere clean looked, and a note says why when it stays.

kind's answers are a stand-in (``_run`` replaced: kind with no engine, a cluster whose delete
fails); the directory, its marker and the decision are real.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pytest

from cnibench import leases
from cnibench.backends.kube import clean as kube_clean
from cnibench.backends.kube.providers import lib_modules_marker
from cnibench.errors import ProvisioningError

NO_ENGINE = "kind get clusters failed: ERROR: failed to list clusters"


@pytest.fixture
def made(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty modules directory with cnibench's marker, as an interrupted kind run leaves
    them; no engine socket where Docker's default is looked for."""
    monkeypatch.setenv(leases.LEASES_VARIABLE, str(tmp_path / "leases"))
    monkeypatch.setattr(kube_clean, "add_offline_tools_to_path", lambda: None)
    monkeypatch.setattr(kube_clean.shutil, "which", lambda tool: f"/usr/bin/{tool}")
    monkeypatch.setattr(kube_clean, "DEFAULT_DOCKER_SOCKET", tmp_path / "no-docker.sock")
    monkeypatch.delenv("DOCKER_HOST", raising=False)
    modules = tmp_path / "lib-modules"
    modules.mkdir()
    lib_modules_marker().parent.mkdir(parents=True, exist_ok=True)
    lib_modules_marker().write_text("made for kind\n")
    return modules


def _kind(monkeypatch: pytest.MonkeyPatch, clusters: dict[str, str | None]) -> None:
    """kind's answers per engine address: its cluster names, or ``None`` for no engine."""

    def run(argv: Sequence[str], *, docker_host: str = "") -> str:
        listed = clusters.get(docker_host)
        if listed is None:
            raise ProvisioningError(NO_ENGINE)
        if list(argv[:3]) == ["kind", "get", "clusters"]:
            return listed
        raise ProvisioningError("kind delete cluster failed: container is busy")

    monkeypatch.setattr(kube_clean, "_run", run)


def test_with_no_engine_anywhere_it_goes_with_its_marker(
    made: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _kind(monkeypatch, {})
    report = kube_clean.clean_kube_leftovers(modules_dir=made)
    assert f"removed the empty {made} created for kind" in report.notes
    assert not made.exists()
    assert not lib_modules_marker().exists()


def test_a_dry_run_only_says_it_would_go(made: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _kind(monkeypatch, {"": "cnibench-old01\n"})
    monkeypatch.setattr(kube_clean, "DEFAULT_DOCKER_SOCKET", made)  # an engine answers there
    report = kube_clean.clean_kube_leftovers(dry_run=True, modules_dir=made)
    assert f"would remove the empty {made} created for kind" in report.notes
    assert made.is_dir()
    assert lib_modules_marker().is_file()


def test_an_engine_that_may_run_but_did_not_answer_keeps_it(
    made: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A socket that is there but does not answer: its engine may be restarting with a
    cnibench kind cluster that needs the directory."""
    socket = tmp_path / "stopped.sock"
    socket.touch()
    monkeypatch.setenv("DOCKER_HOST", f"unix://{socket}")
    _kind(monkeypatch, {})
    report = kube_clean.clean_kube_leftovers(modules_dir=made)
    (note,) = [n for n in report.notes if str(made) in n]
    assert note == (
        f"kept the {made} created for kind: unix://{socket} did not answer, and a kind"
        " cluster there may use it"
    )
    assert made.is_dir()
    assert lib_modules_marker().is_file()


def test_a_cluster_that_is_left_keeps_it(made: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(kube_clean, "DEFAULT_DOCKER_SOCKET", made)  # an engine answers there
    _kind(monkeypatch, {"": "cnibench-stuck1\nsomeone-elses\n"})
    report = kube_clean.clean_kube_leftovers(modules_dir=made)
    assert {item.name: item.outcome for item in report.items} == {
        "cnibench-stuck1": "failed: kind delete cluster failed: container is busy"
    }
    assert f"kept the {made} created for kind: kind cluster(s) cnibench-stuck1 are left" in (
        report.notes
    )
    assert made.is_dir()


def test_a_directory_cnibench_did_not_make_is_never_touched(
    made: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    lib_modules_marker().unlink()
    _kind(monkeypatch, {})
    report = kube_clean.clean_kube_leftovers(modules_dir=made)
    assert not [n for n in report.notes if str(made) in n]
    assert made.is_dir()
