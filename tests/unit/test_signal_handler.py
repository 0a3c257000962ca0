"""cnibench.signals: SIGTERM becomes KeyboardInterrupt (except inside a finalizer, where it is
delivered again), a lab teardown defers signals, and the exit after a command cannot be spoiled.

Seen in the CI's interrupt batch: a SIGTERM that arrived while a ``subprocess.Popen`` was being
collected raised inside ``Popen.__del__``; Python printed "Exception ignored in ..." with a
traceback and dropped the interrupt.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from types import FrameType

import pytest

import cnibench
from cnibench.signals import raise_interrupt


def __del__() -> FrameType:  # noqa: N807 - a finalizer's name is what the handler looks at
    return sys._getframe()


def test_outside_a_finalizer_the_signal_interrupts_at_once() -> None:
    with pytest.raises(KeyboardInterrupt, match="signal 15"):
        raise_interrupt(15, sys._getframe())


def test_inside_a_finalizer_the_signal_is_sent_again_instead(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert _sent_again(monkeypatch, 15, __del__()) == [(os.getpid(), 15)]


def _sent_again(
    monkeypatch: pytest.MonkeyPatch, signum: int, frame: FrameType
) -> list[tuple[int, int]]:
    """What the handler, called in ``frame``, sends with ``os.kill`` within 5 s; it must
    return, raising nothing there."""
    sent: list[tuple[int, int]] = []
    monkeypatch.setattr(os, "kill", lambda pid, sig: sent.append((pid, sig)))
    raise_interrupt(signum, frame)
    deadline = time.monotonic() + 5
    while not sent and time.monotonic() < deadline:
        time.sleep(0.01)
    return sent


def test_inside_importlib_s_module_lock_callback_the_signal_is_sent_again_instead(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """CI, 2026-11-28: a Ctrl-C 2 s into a run raised inside ``_get_module_lock``'s weakref
    callback; Python printed "Exception ignored in: <function _get_module_lock.<locals>.cb>"
    and the run went on to exit 0. A frame of that name and file is what the handler sees."""
    namespace: dict[str, object] = {"sys": sys}
    exec(
        compile("def cb():\n    return sys._getframe()\n", "<frozen importlib._bootstrap>", "exec"),
        namespace,
    )
    frame = namespace["cb"]()  # type: ignore[operator]
    assert _sent_again(monkeypatch, 2, frame) == [(os.getpid(), 2)]


def test_a_function_named_cb_elsewhere_is_interrupted_at_once() -> None:
    def cb() -> FrameType:
        return sys._getframe()

    with pytest.raises(KeyboardInterrupt, match="signal 2"):
        raise_interrupt(2, cb())


# --- the helpers, each in a process of its own (signals reach the whole process) ---------------


def _run(script: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-P", "-c", textwrap.dedent(script)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_sigterm_raises_interrupt_inside_and_the_old_handler_is_back_after() -> None:
    done = _run(
        """
        import os, signal
        from cnibench.signals import sigterm_raises_interrupt
        signal.signal(signal.SIGTERM, lambda *_: print("previous handler"))
        with sigterm_raises_interrupt():
            try:
                os.kill(os.getpid(), signal.SIGTERM)
                for _ in range(1000):
                    pass
            except KeyboardInterrupt as exc:
                print("interrupted:", exc)
        os.kill(os.getpid(), signal.SIGTERM)
        """
    )
    assert done.stdout.splitlines() == ["interrupted: signal 15", "previous handler"], done.stderr


def test_signals_deferred_finishes_the_block_then_delivers_the_signal() -> None:
    done = _run(
        """
        import os, signal
        from cnibench.signals import signals_deferred
        try:
            with signals_deferred():
                os.kill(os.getpid(), signal.SIGINT)
                for _ in range(1000):
                    pass
                print("block finished", flush=True)
        except KeyboardInterrupt:
            print("interrupted after the block")
        """
    )
    assert done.stdout.splitlines() == ["block finished", "interrupted after the block"]
    assert done.returncode == 0, done.stderr


def test_exit_now_runs_the_atexit_hooks_to_the_end_whatever_signal_comes() -> None:
    # A second thread is alive, as a lab's port-forward threads are: the kernel may hand the
    # SIGINT to it, and Python then runs the handler in the main thread all the same, so a
    # mask on the main thread alone would not keep the hook from being interrupted.
    done = _run(
        """
        import atexit, os, signal, threading, time
        from cnibench.signals import exit_now
        threading.Thread(target=time.sleep, args=(30,), daemon=True).start()
        def hook():
            for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGINT):
                os.kill(os.getpid(), signum)
                time.sleep(0.1)
            print("hook finished", flush=True)
        atexit.register(hook)
        exit_now(7)
        """
    )
    assert (done.returncode, done.stdout.strip()) == (7, "hook finished"), done.stderr
    assert "Traceback" not in done.stderr, done.stderr


def test_only_the_signals_module_installs_sigint_or_sigterm_handlers() -> None:
    """Every handler for SIGINT and SIGTERM lives in ``cnibench.signals`` (one place to read);
    the locust runner's SIGALRM watchdog runs in a child process of its own."""
    source = Path(cnibench.__file__).parent
    installers = re.compile(r"signal\.(signal|pthread_sigmask|set_wakeup_fd)\(")
    found = {
        str(path.relative_to(source))
        for path in source.rglob("*.py")
        if installers.search(path.read_text())
    }
    assert found == {"signals.py", "tools/locust_runner.py"}
    watchdog = (source / "tools/locust_runner.py").read_text()
    assert installers.findall(watchdog) == ["signal"]
    assert "signal.signal(signal.SIGALRM" in watchdog
