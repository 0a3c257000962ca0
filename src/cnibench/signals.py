"""How cnibench answers SIGINT (Ctrl-C) and SIGTERM: every handler it installs is here.

Three moments need care, and each has one helper:

* **While a command or a session runs**, SIGTERM raises :class:`KeyboardInterrupt` as Ctrl-C
  does, so both unwind through the same ``finally`` blocks (clusters torn down, partial
  results closed) and the command exits 130: :func:`sigterm_raises_interrupt`, used by the
  ``cnibench`` command for its whole length and by :class:`cnibench.session.BenchSession`
  for library and pytest users (nesting both is harmless).
* **While a lab is torn down**, a signal would abort the teardown half way, after its safety
  net has been removed: :func:`signals_deferred` notes the signal and delivers it when the
  block ends.
* **Once the command has returned**, results are written and clusters are gone; a signal
  landing in the interpreter's own finalization printed ``Exception ignored in: <module
  'threading'> ... KeyboardInterrupt`` or even crashed it (exit -6). :func:`exit_now` ignores
  and blocks both signals, runs the ``atexit`` hooks, flushes and leaves without that finalization.

Only the main thread can install handlers; elsewhere (``main()`` called from a worker thread)
the helpers leave signal handling to whoever owns the main thread. The locust runner's SIGALRM
watchdog lives in its own child process and is not concerned.
"""

from __future__ import annotations

import atexit
import os
import signal
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from types import FrameType
from typing import NoReturn

__all__ = ["exit_now", "raise_interrupt", "signals_deferred", "sigterm_raises_interrupt"]

_HELD = (signal.SIGINT, signal.SIGTERM)


_IMPORT_BOOTSTRAP = "<frozen importlib._bootstrap>"


def _swallows_exceptions(frame: FrameType) -> bool:
    """Whether an exception raised in ``frame`` would be printed as "Exception ignored in ..."
    and dropped: a finalizer (``__del__``), or the weakref callback importlib runs when a
    module lock is collected (``_get_module_lock.<locals>.cb``: a Ctrl-C 2 s into a run
    landed there in CI, 2026-11-28, and the run went on to its end and exited 0)."""
    code = frame.f_code
    return code.co_name == "__del__" or (
        code.co_name == "cb" and code.co_filename == _IMPORT_BOOTSTRAP
    )


def raise_interrupt(signum: int, frame: FrameType | None) -> None:
    """Signal handler making a signal (SIGINT, SIGTERM) a :class:`KeyboardInterrupt`.

    Raised where Python drops exceptions (:func:`_swallows_exceptions`: a finalizer such as
    ``subprocess.Popen.__del__``, importlib's module-lock callback) the exception would be
    printed as "Exception ignored in ..." and the command would carry on; there the signal is
    delivered again, a moment later, instead.
    """
    if frame is not None and _swallows_exceptions(frame):
        threading.Timer(0.05, os.kill, (os.getpid(), signum)).start()
        return
    raise KeyboardInterrupt(f"signal {signum}")


def _in_main_thread() -> bool:
    return threading.current_thread() is threading.main_thread()


@contextmanager
def sigterm_raises_interrupt() -> Iterator[None]:
    """Within the block, SIGTERM raises :class:`KeyboardInterrupt` (see :func:`raise_interrupt`),
    and so does SIGINT where Python's own Ctrl-C handler is in place (the same exception, but
    sent again where Python would drop it); the handlers in place before are restored
    afterwards."""
    if not _in_main_thread():
        yield
        return
    previous_int = signal.getsignal(signal.SIGINT)
    if previous_int is signal.default_int_handler:
        signal.signal(signal.SIGINT, raise_interrupt)
    previous = signal.signal(signal.SIGTERM, raise_interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)
        if previous_int is signal.default_int_handler:
            signal.signal(signal.SIGINT, previous_int)


@contextmanager
def signals_deferred() -> Iterator[None]:
    """Hold SIGINT and SIGTERM back until the block ends (main thread only).

    A signal that arrives meanwhile is only noted; when the block ends, the handler that was in
    place before runs for the first one (raising :class:`KeyboardInterrupt` as usual, or the
    default action). Handlers, not the signal mask: the kernel hands a process-directed signal
    to any thread that does not block it (e.g. port-forward threads), so masking the main
    thread alone does not hold it back.
    """
    if not _in_main_thread():
        yield
        return
    caught: list[signal.Signals] = []

    def note(signum: int, frame: FrameType | None) -> None:
        caught.append(signal.Signals(signum))

    previous = {signum: signal.signal(signum, note) for signum in _HELD}
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
        if caught:
            handler = previous[caught[0]]
            if callable(handler):
                handler(caught[0], None)
            elif handler == signal.SIG_DFL:
                signal.raise_signal(caught[0])


def exit_now(code: int) -> NoReturn:
    """End the process with ``code``; no late SIGINT or SIGTERM can change how.

    Both signals are ignored (a mask alone would not do: the kernel hands a process-directed
    signal to another thread, and Python then runs the handler in this one) and blocked, the
    ``atexit`` hooks run (logging's flush and a lab's safety-net teardown among them, whose
    clean-up commands inherit both and finish), the standard streams are flushed, and the
    process leaves with :func:`os._exit`, skipping the interpreter finalization a signal could
    otherwise interrupt.
    """
    if _in_main_thread():
        for signum in _HELD:
            signal.signal(signum, signal.SIG_IGN)
    with suppress(ValueError, OSError):
        signal.pthread_sigmask(signal.SIG_BLOCK, set(_HELD))
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        with suppress(Exception):
            stream.flush()
    os._exit(code)
