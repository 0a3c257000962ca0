"""The ``cnibench`` command line: one subcommand each for run, report, compare, doctor,
clean, engine, images, export and completion (the ``compare`` and ``export`` options live with
their commands, :mod:`cnibench.cli.compare` and :mod:`cnibench.cli.export`), and
``--version``."""

from __future__ import annotations

import argparse
from pathlib import Path

from cnibench.cli.compare import _add_compare_parser
from cnibench.cli.completion import SHELLS
from cnibench.cli.export import _add_export_parser
from cnibench.cli.options import MARGIN_HELP, _margin, _Parser, _Version

__all__: list[str] = []


def _build_parser() -> _Parser:
    # Imported here, not at module level: until main() has installed its handlers, a Ctrl-C
    # would print a traceback, so the module itself stays cheap to import.
    from cnibench.scenarios.options import INTERLEAVED_SERVICES_MAX
    from cnibench.session import add_session_options

    parser = _Parser(
        prog="cnibench",
        description="Which CNI should we run, and what does each feature cost? cnibench sets"
        " up a scenario on a cluster (the embedded lab, kind, AKS or an existing one), proves it"
        " is in effect, measures it with real tools and reports the cost with an interval.",
        epilog="e.g. cnibench run --scenario egress --profile quick; cnibench report results/",
    )
    parser.add_argument(
        "--version", action=_Version, help="print the installed cnibench's version and exit"
    )
    commands = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)

    run = commands.add_parser(
        "run",
        help="run scenarios and record results",
        description=_RUN_DESCRIPTION.format(services=INTERLEAVED_SERVICES_MAX),
    )
    run.add_argument(
        "--scenario",
        action="append",
        default=[],
        metavar="NAME",
        help="scenario to run (repeatable or comma-separated; NAME@cni1+cni2 runs it only on "
        "those CNIs); default: all",
    )
    add_session_options(run.add_argument)
    run.add_argument(
        "--condition",
        action="append",
        default=[],
        metavar="ID",
        help="only these condition ids (repeatable)",
    )
    run.add_argument("--margin", type=_margin, default=None, metavar="M", help=MARGIN_HELP)
    order = run.add_mutually_exclusive_group()
    order.add_argument(
        "--interleave",
        dest="sequential",
        action="store_false",
        default=False,
        help="the default: the conditions of a scenario on one cluster take turns in rounds"
        " (control, treatment, treatment, control, ...) so that drift falls on both; each"
        " round sets its condition up and verifies it again (where it cannot: see above)",
    )
    order.add_argument(
        "--sequential",
        action="store_true",
        help="one condition after the other, all its runs on one set-up (the order before"
        " interleaving was the default); recorded in the session's design.json",
    )
    run.add_argument("--json", action="store_true", help=_JSON_HELP)

    report = commands.add_parser("report", help="figures, tables and an HTML report of results")
    report.add_argument("results", type=Path, metavar="RESULTS_DIR")
    report.add_argument(
        "--html",
        type=Path,
        default=None,
        metavar="FILE",
        help="self-contained HTML report (default: RESULTS_DIR/report.html)",
    )
    report.add_argument(
        "--markdown", type=Path, default=None, metavar="FILE", help="Markdown summary"
    )
    report.add_argument(
        "--png-dir",
        type=Path,
        default=None,
        metavar="DIR",
        help="also write every figure as a PNG here",
    )
    report.add_argument(
        "--reference",
        default=None,
        metavar="CNI",
        help="CNI the verdict compares every other CNI with (default: the first measured)",
    )
    report.add_argument(
        "--all-metrics",
        action="store_true",
        help="draw every recorded metric, not only each scenario's primary metrics",
    )
    report.add_argument("--margin", type=_margin, default=None, metavar="M", help=MARGIN_HELP)
    report.add_argument(
        "--session",
        action="append",
        default=[],
        metavar="ID",
        help="only this session of the directory (repeatable; default: every session, each"
        " described in the environment section)",
    )
    report.add_argument(
        "--json",
        action="store_true",
        help=_JSON_HELP + "; writes only the files --html, --markdown and --png-dir name",
    )

    _add_compare_parser(commands)
    _add_export_parser(commands)
    completion = commands.add_parser(
        "completion",
        help="print a shell completion script: source <(cnibench completion bash)",
    )
    completion.add_argument("shell", choices=SHELLS, help="bash or zsh")
    commands.add_parser("doctor", help="which backends and tools are usable here, and why not")

    clean = commands.add_parser(
        "clean",
        help="remove labs, processes, kind clusters and engines cnibench left behind (what a"
        " live cnibench process holds is kept and named)",
        epilog="CNIBENCH_CLEAN_FOR=PID[,PID...]: clean for these processes too (a test tier or"
        " study removing what it holds itself): their claims keep nothing from this clean,"
        " while every other clean still keeps what they hold.",
    )
    clean.add_argument("--dry-run", action="store_true", help="only list what would be removed")
    clean.add_argument(
        "--kubeconfig",
        type=Path,
        default=None,
        metavar="PATH",
        help="also delete cnibench-labelled namespaces and cluster-scoped objects in this cluster",
    )
    _add_engine_parser(commands)
    _add_images_parser(commands)
    return parser


_JSON_HELP = (
    "print the verdict as JSON on stdout (a list of contrasts, every column of the verdict,"
    " NaN as null) and nothing else there: the human output goes to stderr"
)

_RUN_DESCRIPTION = (
    "Run scenarios and record results. The conditions of a scenario on one cluster run in"
    " interleaved rounds by default, one run each per round, each round setting its condition"
    " up again. They cannot be interleaved, and run one after the other on one set-up each,"
    " where a set-up cannot be repeated cheaply: the baseline's Service conditions with more"
    " than {services} further Services (--services), and a scenario's only condition on a"
    " CNI (nothing to alternate with). A line at the start names them, and the session's"
    " design.json records every group's order and why. --precision adds rounds, among the"
    " conditions not yet precise enough."
)


def _add_images_parser(commands: argparse._SubParsersAction[_Parser]) -> None:
    images = commands.add_parser(
        "images",
        help="the offline image set: every image kind and cnibench's pods need, built locally",
    )
    actions = images.add_subparsers(
        dest="images_command",
        metavar="{build,list,push,prune}",
        required=True,
        parser_class=_Parser,
    )
    build = actions.add_parser(
        "build",
        help="build (or find) them in $DOCKER_HOST from Debian packages and Go modules;"
        " a kind run uses them by default on cnibench's own engine (cnibench engine up),"
        " elsewhere with CNIBENCH_IMAGES=offline",
    )
    build.add_argument(
        "--cni",
        action="append",
        default=[],
        metavar="CNI",
        dest="cnis",
        help="also build this CNI's images: a CNI whose driver has an offline recipe (cilium:"
        " a Go build of about 10 minutes on 2 cores and a 1.1 GB image; kube-router: about 3"
        " minutes, cold); flannel's is always built. Repeatable",
    )
    build.add_argument(
        "--gateway",
        action="append",
        choices=("traefik",),
        default=[],
        metavar="GATEWAY",
        dest="cnis",
        help="also build this Gateway API implementation (traefik, for --cni X:gateway=traefik:"
        " a Go build of about 8 minutes on 2 cores, cold). Repeatable",
    )
    build.add_argument(
        "--load-engine",
        action="append",
        choices=("locust",),
        default=[],
        metavar="ENGINE",
        dest="cnis",
        help="also build the image of this load engine's pods (locust, from Debian's"
        " python3-locust, for run --load-engine locust on kind)",
    )
    build.add_argument(
        "--prepare",
        action="store_true",
        help="only the Go builds and root filesystems (no engine needed); a later build"
        " makes the images from them in seconds",
    )
    actions.add_parser("list", help="the offline image tags and whether the engine has them")
    push = actions.add_parser(
        "push",
        help="push the images build made to REGISTRY, for clusters that pull (AKS, existing);"
        " prints the CNIBENCH_IMAGE_* exports that point a run at them (or run with"
        " --image-registry REGISTRY)",
    )
    push.add_argument("registry", metavar="REGISTRY", help="HOST[:PORT][/PATH], no scheme")
    push.add_argument(
        "--cni",
        action="append",
        default=[],
        metavar="CNI",
        dest="cnis",
        help="also push this CNI's own images (for a kind cluster that pulls). Repeatable",
    )
    prune = actions.add_parser(
        "prune",
        help="remove from $DOCKER_HOST the cnibench image tags no current recipe names (old"
        " versions pile up with every release); tags a container uses are kept",
    )
    prune.add_argument("--dry-run", action="store_true", help="only say what would go")


def _add_engine_parser(commands: argparse._SubParsersAction[_Parser]) -> None:
    engine = commands.add_parser(
        "engine", help="a private dockerd for kind on machines where no container engine runs"
    )
    actions = engine.add_subparsers(
        dest="engine_command", metavar="{up,down,status}", required=True, parser_class=_Parser
    )
    name_help = "engine name (default: cnibench)"
    up = actions.add_parser(
        "up", help='start it (if needed) and print its DOCKER_HOST: eval "$(cnibench engine up)"'
    )
    up.add_argument("--name", default="cnibench", metavar="N", help=name_help)
    down = actions.add_parser("down", help="stop it and remove its run directory")
    down.add_argument("--name", default="cnibench", metavar="N", help=name_help)
    down.add_argument("--purge", action="store_true", help="also delete its image cache")
    actions.add_parser("status", help="the private engines on this machine")
