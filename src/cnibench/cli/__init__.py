"""The ``cnibench`` command: a thin shell over :mod:`cnibench.session` and the backends.

Every error cnibench raises on purpose is printed as one line (``cnibench: error: ...``); usage
errors exit with 2, failed benchmarks with 1, an interrupted run with 130; ``compare`` exits 0
within threshold, 1 regressed, 3 undecided (:mod:`~cnibench.cli.exits`).

One module per command (:mod:`~cnibench.cli.run` with ``report``, :mod:`~cnibench.cli.compare`,
:mod:`~cnibench.cli.doctor`, :mod:`~cnibench.cli.maintenance` for clean, engine and images,
:mod:`~cnibench.cli.export`, :mod:`~cnibench.cli.completion`), the parser in
:mod:`~cnibench.cli.parser` and the exit codes in :mod:`~cnibench.cli.exits`.
``python -m cnibench.cli`` runs :func:`entry`.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from typing import NoReturn

from cnibench.cli.compare import _compare
from cnibench.cli.completion import completion_script
from cnibench.cli.doctor import _doctor
from cnibench.cli.exits import (
    EXIT_FAILED,
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_UNDECIDED,
    EXIT_USAGE,
)
from cnibench.cli.export import _export
from cnibench.cli.maintenance import _clean, _engine, _images
from cnibench.cli.parser import _build_parser as _build_parser
from cnibench.cli.run import _few_runs_note as _few_runs_note
from cnibench.cli.run import _print_table as _print_table
from cnibench.cli.run import _report, _run
from cnibench.errors import CnibenchError, ConfigError
from cnibench.signals import exit_now, sigterm_raises_interrupt

__all__ = [
    "EXIT_FAILED",
    "EXIT_INTERRUPTED",
    "EXIT_OK",
    "EXIT_UNDECIDED",
    "EXIT_USAGE",
    "entry",
    "main",
]


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``cnibench`` console script."""
    with sigterm_raises_interrupt():
        try:
            return _main(argv)
        except BrokenPipeError:
            # The reader went away (``cnibench clean | head``): not an error of ours. Point
            # stdout at /dev/null so the flush at exit does not fail a second time.
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
            return EXIT_OK


def entry() -> NoReturn:
    """The ``cnibench`` console script and ``python -m cnibench.cli``: :func:`main`, then an
    exit no late signal can spoil (:func:`cnibench.signals.exit_now`).

    Once ``main`` has returned, every result is written, the clusters are gone and the output
    is printed: a Ctrl-C or SIGTERM from then on changes nothing. A signal landing in the
    interpreter's finalization once crashed it ("Fatal Python error: PyThreadState_Get", exit
    -6) instead of exiting 130.
    """
    try:
        code = main()
    except KeyboardInterrupt:  # in the instant between main's return and exit_now's guard
        code = EXIT_INTERRUPTED
    exit_now(code)


def _main(argv: Sequence[str] | None) -> int:
    kept = ""  # what an interrupted run leaves on purpose
    try:
        parser = _build_parser()
        if not (sys.argv[1:] if argv is None else argv):
            parser.print_help()
            return EXIT_USAGE
        args = parser.parse_args(argv)
        if getattr(args, "keep_cluster", False):
            kept = " but the clusters --keep-cluster keeps"
        if args.command == "run":
            return _run(args)
        if args.command == "doctor":
            return _doctor()
        if args.command == "report":
            return _report(args)
        if args.command == "compare":
            return _compare(args)
        if args.command == "engine":
            return _engine(args)
        if args.command == "images":
            return _images(args)
        if args.command == "export":
            return _export(args)
        if args.command == "completion":
            print(completion_script(parser, args.shell), end="")
            return EXIT_OK
        return _clean(args)
    except ConfigError as exc:
        print(f"cnibench: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        print(
            f"cnibench: interrupted; everything this run created was removed{kept}", file=sys.stderr
        )
        return EXIT_INTERRUPTED
    except CnibenchError as exc:
        print(f"cnibench: error: {exc}", file=sys.stderr)
        return EXIT_FAILED
