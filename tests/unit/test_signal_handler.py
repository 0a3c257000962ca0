"""SIGTERM becomes KeyboardInterrupt, except inside a finalizer, where it is delivered again.

Seen in the CI's interrupt batch: a SIGTERM that arrived while a ``subprocess.Popen`` was being
collected raised inside ``Popen.__del__``; Python printed "Exception ignored in ..." with a
traceback and dropped the interrupt.
"""

from __future__ import annotations

import os
import sys
import time
from types import FrameType

import pytest

from cnibench.session import raise_interrupt


def __del__() -> FrameType:  # noqa: N807 - a finalizer's name is what the handler looks at
    return sys._getframe()


def test_outside_a_finalizer_the_signal_interrupts_at_once() -> None:
    with pytest.raises(KeyboardInterrupt, match="signal 15"):
        raise_interrupt(15, sys._getframe())


def test_inside_a_finalizer_the_signal_is_sent_again_instead(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    sent: list[tuple[int, int]] = []
    monkeypatch.setattr(os, "kill", lambda pid, signum: sent.append((pid, signum)))
    raise_interrupt(15, __del__())  # returns: nothing raised inside the finalizer
    deadline = time.monotonic() + 5
    while not sent and time.monotonic() < deadline:
        time.sleep(0.01)
    assert sent == [(os.getpid(), 15)]
