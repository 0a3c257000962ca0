"""``cnibench export``: the runs and the verdict's contrasts as CSV, Parquet, JSON or OpenSearch
bulk NDJSON (the formats and their layout: :mod:`cnibench.report.exports`)."""

from __future__ import annotations

import argparse
from pathlib import Path

from cnibench.cli.exits import EXIT_OK
from cnibench.cli.options import MARGIN_HELP, _margin, _Parser

__all__: list[str] = []

# Kept here, not imported from cnibench.report.exports: the parser loads no pandas.
_FORMATS = ("csv", "parquet", "json", "opensearch")


def _add_export_parser(commands: argparse._SubParsersAction[_Parser]) -> None:
    export = commands.add_parser(
        "export",
        help="the runs and the verdict's contrasts as csv, parquet, json or OpenSearch bulk NDJSON",
        description="Export the runs (the tidy records of load_results) and the verdict's"
        " contrasts with their intervals. csv and parquet: FILE holds the runs and"
        " <stem>-contrasts.<ext> beside it the contrasts; json: one object with 'runs' and"
        " 'contrasts'; opensearch: bulk NDJSON, an action line and a document per run and"
        " metric (no contrasts). Each file is written atomically and replaces an existing"
        " one; FILE's directory must exist.",
    )
    export.add_argument("results", type=Path, metavar="RESULTS_DIR")
    export.add_argument(
        "--format",
        required=True,
        choices=_FORMATS,
        dest="export_format",
        help="csv, parquet, json or opensearch",
    )
    export.add_argument(
        "-o",
        "--output",
        required=True,
        type=Path,
        metavar="FILE",
        help="the file to write (csv, parquet: the runs', the contrasts' goes beside it)",
    )
    export.add_argument(
        "--session",
        action="append",
        default=[],
        metavar="ID",
        help="only this session of the directory (repeatable; default: every session)",
    )
    export.add_argument(
        "--reference",
        default=None,
        metavar="CNI",
        help="CNI the verdict compares every other CNI with (default: the first measured)",
    )
    export.add_argument("--margin", type=_margin, default=None, metavar="M", help=MARGIN_HELP)
    export.add_argument(
        "--index",
        default="cnibench-results",
        metavar="NAME",
        help="the OpenSearch index the action lines name (opensearch only; default"
        " cnibench-results)",
    )


def _export(args: argparse.Namespace) -> int:
    """``cnibench export``: every check before any result is read, then the files, then one
    ``wrote FILE`` line each."""
    from cnibench.errors import ConfigError
    from cnibench.report.exports import check_destination, write_export

    check_destination(args.output, args.export_format)
    if not args.results.is_dir():
        what = "is not a directory" if args.results.exists() else "does not exist"
        raise ConfigError(f"results directory {args.results} {what}")
    paths = write_export(
        args.results,
        args.output,
        export_format=args.export_format,
        sessions=args.session or "all",
        reference=args.reference,
        margin=args.margin,
        index=args.index,
    )
    for path in paths.files():
        print(f"wrote {path}")
    return EXIT_OK
