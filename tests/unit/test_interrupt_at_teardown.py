"""Ctrl-C during a session's final teardown (warm CI, 2026-12-04: a SIGINT at 22 s met a bench
session already tearing its lab down; the deferred interrupt then escaped pytest's unconfigure
as a traceback and the process died by the signal, exit -2, where pytest's own is 2).

Real signals, sent to this process inside the real ``signals_deferred``; the clusters and the
plugin's session state are stand-ins that record what was done."""

from __future__ import annotations

import os
import signal
from typing import Any

import pytest

from cnibench import plugin
from cnibench.scenarios.runner import ClusterPool
from cnibench.signals import signals_deferred


class _Cluster:
    """Tears down as the lab's does: inside its own ``signals_deferred``; the first one to go
    is sent Ctrl-C half way through its teardown."""

    def __init__(self, name: str, down: list[str]) -> None:
        self.name = name
        self.down = down

    def teardown(self) -> None:
        with signals_deferred():
            if not self.down:
                os.kill(os.getpid(), signal.SIGINT)
            self.down.append(self.name)


def test_ctrl_c_in_the_first_cluster_s_teardown_is_raised_after_the_last_one_is_down() -> None:
    down: list[str] = []
    pool = ClusterPool(backend=None)  # type: ignore[arg-type]
    pool._clusters.update({name: _Cluster(name, down) for name in ("a", "b", "c")})  # type: ignore[misc]
    with pytest.raises(KeyboardInterrupt):
        pool.teardown()
    assert sorted(down) == ["a", "b", "c"]
    assert not pool._clusters


class _State:
    """The plugin's session state, whose close is interrupted as above."""

    def __init__(self) -> None:
        self.closed = False

    def close(self) -> None:
        with signals_deferred():
            os.kill(os.getpid(), signal.SIGINT)
            self.closed = True

    @property
    def session(self) -> Any:
        raise AssertionError("nothing after an interrupted teardown reads the session")


class _Config:
    def __init__(self, state: _State) -> None:
        self.stash: dict[object, object] = {plugin._STATE_KEY: state}


def test_ctrl_c_in_the_plugin_s_final_teardown_exits_as_pytest_interrupted(
    capsys: pytest.CaptureFixture[str],
) -> None:
    state = _State()
    with pytest.raises(SystemExit) as exited:
        plugin.pytest_unconfigure(_Config(state))  # type: ignore[arg-type]
    assert exited.value.code == pytest.ExitCode.INTERRUPTED == 2
    assert state.closed
    err = capsys.readouterr().err
    assert err.splitlines() == ["cnibench: interrupted during the session's final teardown"]
