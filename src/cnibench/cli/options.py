"""The ``cnibench`` parser class and the option values its commands share (thresholds,
margins): each value is read by a small function that raises ``ArgumentTypeError``."""

from __future__ import annotations

import argparse

from cnibench.errors import ConfigError

__all__ = ["MARGIN_HELP", "installed_version"]


class _Parser(argparse.ArgumentParser):
    """argparse that raises instead of exiting, so every usage error takes one path."""

    def error(self, message: str) -> None:  # type: ignore[override]
        raise ConfigError(message)


def installed_version() -> str:
    """The installed ``cnibench`` distribution's version (its metadata), or the package's
    ``__version__`` when it runs from a source tree without being installed."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("cnibench")
    except PackageNotFoundError:
        import cnibench

        return cnibench.__version__


class _Version(argparse.Action):
    """``--version``: ``<prog> <version>`` on stdout, then exit 0. Unlike argparse's own
    action, it reads the version only when asked, not on every parse."""

    def __init__(
        self,
        option_strings: list[str],
        dest: str = argparse.SUPPRESS,
        default: str = argparse.SUPPRESS,
        help: str | None = None,
    ) -> None:
        super().__init__(option_strings, dest=dest, default=default, nargs=0, help=help)

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: object,
        option_string: str | None = None,
    ) -> None:
        print(f"{parser.prog} {installed_version()}")
        parser.exit()


MARGIN_HELP = (
    "equivalence margin: a ratio whose whole 95%% interval lies within ±M is 'same within"
    " ±M' (e.g. 2%%; default: no equivalence claim)"
)


def _margin(text: str) -> float:
    from cnibench.report.compare import parse_threshold

    try:
        value = parse_threshold(text)
    except ConfigError as exc:
        raise argparse.ArgumentTypeError(str(exc).replace("threshold", "margin")) from None
    if not 0.0 < value < 1.0:
        raise argparse.ArgumentTypeError(
            f"invalid margin {text!r}: it must be above 0 and below 100%"
        )
    return value


def _threshold(text: str) -> float:
    from cnibench.report.compare import parse_threshold

    try:
        return parse_threshold(text)
    except ConfigError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _plan_loss(text: str) -> float:
    value = _threshold(text)
    if not 0.0 < value < 1.0:
        raise argparse.ArgumentTypeError(
            f"invalid loss {text!r}: it must be above 0 and below 100%"
        )
    return value


def _session_sd(text: str) -> float:
    from cnibench.report.compare import parse_session_sd

    try:
        return parse_session_sd(text)
    except ConfigError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
