"""The ``cnibench`` command: a thin shell over :mod:`cnibench.session` and the backends.

Every error cnibench raises on purpose is printed as one line (``cnibench: error: ...``); usage
errors exit with 2, failed benchmarks with 1, an interrupted run with 130.
"""

from __future__ import annotations

import argparse
import math
import os
import shlex
import shutil
import subprocess
import sys
import warnings
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

from cnibench.errors import CnibenchError, ConfigError
from cnibench.signals import exit_now, sigterm_raises_interrupt

if TYPE_CHECKING:
    from cnibench.backends.kube.offline import OfflineBuilder

__all__ = ["main"]

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2
EXIT_INTERRUPTED = 130
ARM_VARIABLES = ("ARM_CLIENT_ID", "ARM_CLIENT_SECRET", "ARM_SUBSCRIPTION_ID", "ARM_TENANT_ID")
"""Azure credentials the AKS provider reads (``doctor`` shows only whether they are set)."""


class _Parser(argparse.ArgumentParser):
    """argparse that raises instead of exiting, so every usage error takes one path."""

    def error(self, message: str) -> None:  # type: ignore[override]
        raise ConfigError(message)


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
    run.add_argument("--margin", type=_margin, default=None, metavar="M", help=_MARGIN_HELP)
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
    report.add_argument("--margin", type=_margin, default=None, metavar="M", help=_MARGIN_HELP)
    report.add_argument(
        "--session",
        action="append",
        default=[],
        metavar="ID",
        help="only this session of the directory (repeatable; default: every session, each"
        " described in the environment section)",
    )

    _add_compare_parser(commands)
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


_MARGIN_HELP = (
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


def _add_compare_parser(commands: argparse._SubParsersAction[_Parser]) -> None:
    compare = commands.add_parser(
        "compare",
        help="regression gate: exit 1 when a metric of CANDIDATE_DIR is worse than"
        " BASELINE_DIR's by more than the threshold and significantly so, or a candidate run"
        " failed or has too few runs; the headline gives the false-alarm rate bench/coverage.py"
        " measured for the design",
    )
    compare.add_argument("baseline", type=Path, metavar="BASELINE_DIR")
    compare.add_argument(
        "candidate",
        type=Path,
        metavar="CANDIDATE_DIR",
        nargs="?",
        default=None,
        help="the results to gate (may be left out with --plan)",
    )
    compare.add_argument(
        "--threshold",
        type=_threshold,
        default="5%",
        metavar="T",
        help="worsening that fails the gate: a percentage (5%%) or a fraction below 1 (0.05);"
        " default 5%%",
    )
    compare.add_argument(
        "--mode",
        choices=("regression", "non-inferiority"),
        default="regression",
        help="regression (default): fail on a significant loss beyond the threshold;"
        " non-inferiority: fail unless each interval shows the loss is within the threshold",
    )
    compare.add_argument(
        "--margin",
        type=_margin,
        default=None,
        metavar="M",
        help="also print the metrics shown to be the same within ±M (95%% interval inside)",
    )
    compare.add_argument(
        "--markdown",
        type=Path,
        default=None,
        metavar="FILE",
        help="also write the comparison as Markdown (for a pull-request comment)",
    )
    compare.add_argument(
        "--allow-failed-runs",
        action="store_true",
        help="leave out candidate runs that failed or measured 0 (named in the table) instead"
        " of failing the gate on them",
    )
    compare.add_argument(
        "--plan",
        type=_plan_loss,
        nargs="?",
        const=0.10,
        default=None,
        metavar="LOSS",
        help="also print, per metric, the candidate sessions (of the baseline's runs each)"
        " that detect a LOSS (default 10%%) with power 0.8, from the variance components of"
        " BASELINE_DIR's A/A sessions (after the directories, or with LOSS: a bare --plan"
        " before CANDIDATE_DIR would take it for LOSS)",
    )


def _plan_loss(text: str) -> float:
    value = _threshold(text)
    if not 0.0 < value < 1.0:
        raise argparse.ArgumentTypeError(
            f"invalid loss {text!r}: it must be above 0 and below 100%"
        )
    return value


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
    try:
        parser = _build_parser()
        if not (sys.argv[1:] if argv is None else argv):
            parser.print_help()
            return EXIT_USAGE
        args = parser.parse_args(argv)
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
        return _clean(args)
    except ConfigError as exc:
        print(f"cnibench: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        print("cnibench: interrupted; everything this run created was removed", file=sys.stderr)
        return EXIT_INTERRUPTED
    except CnibenchError as exc:
        print(f"cnibench: error: {exc}", file=sys.stderr)
        return EXIT_FAILED


def _run(args: argparse.Namespace) -> int:
    """``cnibench run``: options to a session, :meth:`BenchSession.run` with a progress bar,
    then the answer (feature matrix and verdict) and the per-condition table (the answer first
    into a file or pipe, last on a terminal), and the session's own lines."""
    from rich.console import Console
    from rich.progress import (
        BarColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )

    from cnibench.session import session_config

    # Checked first, and before the scenarios and the statistics are imported: a bad option
    # is said in a fraction of a second.
    config = session_config(vars(args))

    from cnibench.scenarios import build_scenarios
    from cnibench.session import BenchSession, EventKind, ProgressEvent, plan_conditions

    registry = build_scenarios(config.scenario_options)
    # Scenario names are checked before a backend is chosen: a misspelt one is the first error.
    # "egress" runs on every --cni; "baseline@vxlan" or "egress@routed+vxlan" only on those.
    # Condition ids are checked once it is: some depend on it (a Kubernetes CNI's policy
    # conditions name no engine).
    plan_conditions(registry, args.scenario, pairs=config.scenario_options.pairs)
    console = Console(stderr=True)
    bar = Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        TextColumn("{task.completed}/{task.total}"),
        TimeElapsedColumn(),
        TextColumn("ETA"),
        TimeRemainingColumn(),
        console=console,
    )
    task = bar.add_task("starting", total=None)

    said: set[str] = set()

    def show(event: ProgressEvent) -> None:
        if event.kind is EventKind.PLANNED:  # every option and the plan checked: show it all
            console.print(session.backend_reason)
            bar.update(task, total=event.runs)
            bar.start()
        elif event.kind in (EventKind.DESIGN, EventKind.CLUSTER):  # one line each
            console.print(event.text, markup=False, highlight=False, soft_wrap=True)
        elif event.kind is EventKind.REFUSED:  # skipped up front: said before anything runs
            console.print(event.text, markup=False, highlight=False, soft_wrap=True)
            said.add(event.text)
            bar.update(task, advance=event.runs)
        elif event.kind is EventKind.CONDITION:
            bar.update(task, description=event.text)
        else:
            bar.update(task, advance=event.runs)

    # The session validates every option and picks the backend before anything is shown.
    with BenchSession(config, scenarios=registry) as session:
        planned = plan_conditions(
            session.scenarios,
            args.scenario,
            args.condition or (),
            pairs=config.scenario_options.pairs,
        )
        try:
            outcome = session.run(planned, interleave=not args.sequential, progress=show)
        finally:
            bar.stop()
    if outcome.results:
        # The answer goes where a reader looks first: at the top of a file or a pipe (CI logs,
        # `| less`), at the bottom of a terminal (what stays on screen when the run ends). The
        # per-condition table is the detail behind it.
        details = Console(width=max(console.width, 150))
        answer_first = not sys.stdout.isatty()
        if not answer_first:
            _print_table(outcome.results, session.scenarios, details)
        if outcome.session_dir.is_dir():
            _print_verdict(outcome.session_dir, config.reference, args.margin)
        if answer_first:
            print(flush=True)
            _print_table(outcome.results, session.scenarios, details)
    for line in outcome.lines():
        if line in said:
            continue  # a condition skipped up front was said before anything ran
        # One line each, however narrow the terminal: people grep these.
        console.print(line, markup=False, highlight=False, soft_wrap=True)
    console.print(f"results written to {outcome.session_dir}")
    if config.report is not None and outcome.session_dir.is_dir():
        from cnibench.report import write_report

        write_report(
            outcome.session_dir,
            html=config.report,
            reference=config.reference,
            all_metrics=config.all_metrics,
            margin=args.margin,
        )
        console.print(f"report written to {config.report}")
    return EXIT_FAILED if outcome.failed else EXIT_OK


def _print_table(
    results: Sequence[object], scenarios: Mapping[str, object], console: object
) -> None:
    """The estimate and interval of each condition's headline metrics
    (:meth:`Scenario.headline_metrics`), in the order the scenario gives them: the geometric
    mean of a positive quantity, the mean of a signed one, ``k/n`` of a yes/no one. A
    ``--pairs`` condition's row is its runs' aggregates, with the smallest and largest single
    pair's value beside it (``pairs 1.2G–1.4G``)."""
    from rich.console import Console
    from rich.table import Table

    from cnibench.report.tables import format_number
    from cnibench.scenarios.base import Scenario
    from cnibench.scenarios.runner import ConditionResult

    assert isinstance(console, Console)
    table = Table(
        title="95 % confidence interval per condition: geometric mean of positive metrics,"
        " mean of signed ones, share of yes (k/n, Clopper-Pearson) of yes/no ones;"
        " every run counted, outlying runs flagged"
    )
    for column in ("scenario", "cni", "condition", "metric", "n", "mean", "95% CI", "unit", "ok"):
        table.add_column(
            column,
            justify="right" if column in {"n", "mean", "95% CI"} else "left",
            # Condition ids end in what tells them apart ("...-new-connections"): wrap, never cut.
            overflow="fold",
        )
    smallest_n = 0
    for result in results:
        assert isinstance(result, ConditionResult)
        scenario = scenarios[result.scenario]
        assert isinstance(scenario, Scenario)
        failed = len(result.runs) - len(result.ok_runs)
        summaries = {summary.metric: summary for summary in result.summaries()}
        for metric in scenario.headline_metrics(result.condition):
            summary = summaries.get(metric)
            if summary is None:
                continue
            if summary.n >= 2 and summary.successes < 0:
                smallest_n = min(smallest_n, summary.n) if smallest_n else summary.n
            ci = (
                "-"
                if not math.isfinite(summary.low)
                else f"[{format_number(summary.low)}, {format_number(summary.high)}]"
            )
            shown = format_number(summary.estimate)
            per_pair = result.pair_values(metric)
            spread = (
                f", pairs {format_number(min(per_pair))}–{format_number(max(per_pair))}"
                if per_pair
                else ""
            )
            if summary.successes >= 0:
                shown = f"{summary.successes}/{summary.n} = {format_number(summary.estimate)}"
            table.add_row(
                result.scenario,
                result.cni,
                result.condition.id,
                summary.metric,
                str(summary.n),
                shown,
                ci,
                summary.unit,
                ("verified" if result.verified else "NOT verified")
                + (f", {failed} failed" if failed else "")
                + (f", {summary.flagged} outlying run(s) flagged" if summary.flagged else "")
                + spread,
            )
    console.print(table)
    for result in results:
        assert isinstance(result, ConditionResult)
        if result.precision_note:
            console.print(
                f"{result.scenario}/{result.cni}/{result.condition.id}: {result.precision_note}",
                markup=False,
                highlight=False,
            )
    note = _few_runs_note(smallest_n)
    if note:
        console.print(note, markup=False, highlight=False)


def _print_verdict(results_dir: Path, reference: str | None, margin: float | None) -> None:
    """The session's verdict on stdout: a heading, then one line per planned contrast."""
    from cnibench.report import verdict
    from cnibench.results import load_results

    command = ["cnibench", "report", str(results_dir)]
    if reference is not None:
        command += ["--reference", reference]
    if margin is not None:
        command += ["--margin", f"{100 * margin:g}%"]
    runs = load_results(results_dir)
    table = verdict(runs, reference=reference, margin=margin)
    where = f"{shlex.join(command)} (its Verdict section)"
    _print_answer(table, full_at=where, margin=margin, runs=runs, results=results_dir)


def _print_answer(
    table: Any,
    *,
    full_at: str,
    margin: float | None,
    runs: Any = None,
    results: Path | None = None,
) -> None:
    """The feature × CNI matrix (``runs``: the tidy results, to mark lossy throughput;
    ``results``: their directory, for what its clusters could not run), then the verdict's
    lines (one each, however narrow the terminal: people grep these)."""
    from cnibench.report import verdict_summary
    from cnibench.report.data import load_skipped, measured_on
    from cnibench.report.matrix import (
        cni_matrix,
        feature_matrix,
        matrix_text,
        not_possible_notes,
    )
    from cnibench.results import load_environments

    skipped = None
    where = ""
    if results is not None and runs is not None:
        skipped = load_skipped(results, sessions=set(runs["session_id"].astype(str)))
        with warnings.catch_warnings():  # a fingerprint that cannot be read: no machine
            warnings.simplefilter("ignore")
            where = measured_on(runs, load_environments(results, on_error="warn"))
    features = feature_matrix(table, runs=runs, skipped=skipped)
    if not features.empty:
        notes = not_possible_notes(features, skipped)
        title = "What each feature costs"
        lines = matrix_text(features, title=title, margin=margin, notes=notes)
        if where:  # every number on this screen carries n (its cell), date and machine
            lines.insert(1, f"  {where}")
        for line in lines:
            print(line, flush=True)
        cnis = cni_matrix(table, runs=runs)
        if not cnis.empty:
            title = "Each CNI against the reference of its group"
            for line in matrix_text(cnis, title=title, margin=margin):
                print(line, flush=True)
    for line in verdict_summary(table, full_at=full_at):
        print(line, flush=True)


def _few_runs_note(n: int) -> str:
    """Why intervals from very few runs are wide (printed under the table), or ``""``."""
    if not 2 <= n <= 3:
        return ""
    from scipy import stats as scipy_stats

    multiplier = float(scipy_stats.t.ppf(0.975, n - 1))
    return (
        f"note: with n = {n} runs an interval is the mean ± {multiplier:.1f} standard errors"
        " (of the logarithms for positive quantities, so a factor), so it is wide;"
        " --runs 5 or --profile standard narrow it"
    )


def _doctor() -> int:
    from rich.console import Console
    from rich.table import Table

    from cnibench.backends.lab import LabBackend, doctor_rows
    from cnibench.session import container_engine
    from cnibench.system import SYSTEM_TOOLS, missing_tools

    console = Console()
    table = Table(title="cnibench doctor")
    for column in ("what", "usable", "why"):
        table.add_column(column)
    for what, usable, why in _kube_rows(container_engine()):
        table.add_row(what, "yes" if usable else "no", why)
    table.add_row("private engine", *_engine_row())
    lab_ok, lab_reason = LabBackend().available()
    table.add_row("lab backend", "yes" if lab_ok else "no", lab_reason)
    rows = doctor_rows()
    for row in rows:
        table.add_row(row.feature, "yes" if row.usable else "no", row.reason)
    # Tools the lab rows did not already cover (the lab checks the ones it runs itself).
    covered = {row.feature for row in rows}
    missing = {tool.binary for tool in missing_tools()}
    for tool in SYSTEM_TOOLS:
        if tool.binary in covered:
            continue
        present = tool.binary not in missing
        table.add_row(
            tool.binary,
            "yes" if present else "no",
            tool.purpose if present else f"install Debian package {tool.package}",
        )
    console.print(table)
    return EXIT_OK


def _kube_rows(engine: str) -> list[tuple[str, bool, str]]:
    """Whether each Kubernetes provider could be used here, and why not."""
    kind = shutil.which("kind")
    if not engine:
        kind_row = ("kind", False, "no docker/podman engine answers")
    elif not kind:
        kind_row = ("kind", False, f"{engine} answers but kind is not on PATH")
    else:
        kind_row = _kind_row(engine, kind)
    missing = [name for name in ARM_VARIABLES if name not in os.environ]
    from cnibench.backends.kube.doctor import existing_cluster_report
    from cnibench.backends.kube.providers import ExistingProvider, terraform_command

    terraform = terraform_command()
    if terraform is None:
        aks_row = ("aks", False, "neither terraform nor tofu is on PATH")
    elif missing:
        aks_row = ("aks", False, f"missing environment variables {', '.join(missing)}")
    else:
        command = os.path.basename(terraform)
        aks_row = ("aks", True, f"{command} and Azure credentials in the environment")

    existing, why = existing_cluster_report(ExistingProvider().kubeconfig)
    return [kind_row, aks_row, ("existing", existing, why)]


def _engine_row() -> tuple[str, str]:
    """usable/why of the private engine (``cnibench engine up``)."""
    from cnibench.backends.kube.engine import engine_doctor_row

    usable, why = engine_doctor_row()
    return ("yes" if usable else "no", why)


def _kind_row(engine: str, kind: str) -> tuple[str, bool, str]:
    """kind is usable when it is recent enough for the pinned node image and helm is there."""
    from cnibench.backends.kube.providers import check_kind_version

    try:
        done = subprocess.run(
            [kind, "version"], capture_output=True, text=True, timeout=30, check=False
        )
        check_kind_version(done.stdout)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return ("kind", False, f"{kind} version failed: {exc}")
    except CnibenchError as exc:
        return ("kind", False, str(exc))
    version = " ".join(done.stdout.split()[:2]) or "kind"
    if shutil.which("helm") is None:
        return ("kind", False, f"{version}, but helm is not on PATH (CNIs install with Helm)")
    return ("kind", True, f"{engine} answers, {version} at {kind}, helm found")


def _report(args: argparse.Namespace) -> int:
    from cnibench.report import write_report

    # A path that names no directory is a bad argument (exit 2); a directory whose files are
    # damaged is a failure of the data (ResultsError, exit 1).
    if not args.results.exists():
        raise ConfigError(f"results directory {args.results} does not exist")
    if not args.results.is_dir():
        raise ConfigError(f"results path {args.results} is not a directory")
    html = args.html
    if html is None and args.markdown is None and args.png_dir is None:
        html = args.results / "report.html"
    paths = write_report(
        args.results,
        html=html,
        markdown=args.markdown,
        png_dir=args.png_dir,
        reference=args.reference,
        all_metrics=args.all_metrics,
        sessions=args.session or "all",
        margin=args.margin,
    )
    # The verdict the report states, printed as computed there (not a second time).
    runs, table = paths.runs, paths.verdict
    where = "the report's Verdict section"
    _print_answer(table, full_at=where, margin=args.margin, runs=runs, results=args.results)
    for path in (paths.html, paths.markdown):
        if path is not None:
            print(f"wrote {path}")
    if paths.pngs:
        print(f"wrote {len(paths.pngs)} PNG figures to {args.png_dir}")
    return EXIT_OK


def _compare(args: argparse.Namespace) -> int:
    """``cnibench compare``: the table on stdout, one line per regression on stderr.

    Exit 0 without regression, 1 with one, 2 on bad input (every input problem is a
    ``ConfigError`` here, so that 1 always means "regressed").
    """
    from cnibench.errors import InsufficientDataError
    from cnibench.report.compare import (
        compare_result_sets,
        load_result_set,
        plan_gate,
        write_markdown,
    )

    if args.markdown is not None and not args.markdown.parent.is_dir():
        raise ConfigError(f"--markdown {args.markdown}: directory {args.markdown.parent} missing")
    if args.candidate is None and args.plan is None:
        raise ConfigError(
            "the following arguments are required: CANDIDATE_DIR (or --plan, to plan from"
            " BASELINE_DIR alone)"
        )
    baseline = load_result_set(args.baseline, what="baseline")
    if args.plan is not None:
        try:
            plans = plan_gate(baseline, loss=args.plan, threshold=args.threshold)
        except InsufficientDataError as exc:
            raise ConfigError(str(exc)) from exc
        for plan in plans:
            print(plan.statement())
        if args.candidate is None:
            return EXIT_OK
    candidate = load_result_set(args.candidate, what="candidate")
    try:
        comparison = compare_result_sets(
            baseline,
            candidate,
            threshold=args.threshold,
            mode=args.mode,
            allow_failed_runs=args.allow_failed_runs,
        )
    except InsufficientDataError as exc:
        raise ConfigError(str(exc)) from exc
    print(comparison.text())
    if args.margin is not None:
        print(comparison.equivalence_line(args.margin))
    if args.markdown is not None:
        write_markdown(comparison, args.markdown)
        print(f"wrote {args.markdown}")
    for line in comparison.regression_lines():
        print(f"cnibench: {line}", file=sys.stderr)
    return EXIT_FAILED if comparison.regressed else EXIT_OK


def _clean(args: argparse.Namespace) -> int:
    from cnibench.backends.kube import clean_kube_leftovers
    from cnibench.backends.kube.engine import clean_engines
    from cnibench.backends.lab import clean_leftovers
    from cnibench.leases import clean_for

    print(clean_leftovers(dry_run=args.dry_run).summary())
    from cnibench.backends.kube.engine import running_engines

    owners = clean_for()
    engines = [e.paths.docker_host for e in running_engines() if e.running]
    kube = clean_kube_leftovers(
        dry_run=args.dry_run, kubeconfig=args.kubeconfig, docker_hosts=engines, clean_for=owners
    )
    print(kube.summary())
    # Last: kind clusters above may live in one of these engines, and one a cluster is left
    # in (kept for a live session, or not removed) stays up with it.
    left = kube.clusters_left
    print(clean_engines(dry_run=args.dry_run, clean_for=owners, clusters_left=left).summary())
    return EXIT_OK


def _engine(args: argparse.Namespace) -> int:
    """``cnibench engine up|down|status``: stdout of ``up`` is only the ``export`` line."""
    from cnibench.backends.kube.engine import (
        engine_down,
        engine_status,
        engine_up,
        format_size,
        running_engines,
    )

    if args.engine_command == "up":
        docker_host = engine_up(args.name)
        status = engine_status(args.name)
        print(
            f"cnibench: engine {args.name} answers (dockerd pid {status.pid}, data root"
            f" {status.paths.data_root}); stop it with: cnibench engine down --name {args.name}",
            file=sys.stderr,
        )
        print(f"export DOCKER_HOST={shlex.quote(docker_host)}")
    elif args.engine_command == "down":
        stopped = engine_down(args.name, purge=args.purge)
        what = "stopped" + (" and its image cache deleted" if args.purge else "")
        print(f"engine {args.name}: {what if stopped else 'was not running'}", file=sys.stderr)
    else:
        engines = running_engines()
        for status in engines:
            print(f"{status.summary()}; data {format_size(status.data_size())}")
        if not engines:
            print("no private engine on this machine")
    return EXIT_OK


def _images(args: argparse.Namespace) -> int:
    """``cnibench images build|list``: progress on stderr, the image tags on stdout."""
    from cnibench.backends.kube.offline import OfflineBuilder, offline_bin_dir, pod_image_tags
    from cnibench.backends.kube.offline.plan import offline_cnis
    from cnibench.backends.kube.offline.recipes import OFFLINE_GATEWAYS, OFFLINE_LOAD_ENGINES

    cnis = getattr(args, "cnis", [])
    known = (*offline_cnis(), *OFFLINE_GATEWAYS, *OFFLINE_LOAD_ENGINES)
    unknown = [name for name in cnis if name not in known]
    if unknown:
        raise ConfigError(
            f"no offline recipe for {', '.join(map(repr, unknown))}: choose from {', '.join(known)}"
        )
    builder = OfflineBuilder(log=lambda line: print(f"cnibench: {line}", file=sys.stderr))
    if args.images_command == "prune":
        return _prune(builder, dry_run=args.dry_run)
    if args.images_command == "push":
        return _push(builder, args.registry, cnis)
    tags = [builder.images.kind_node, *pod_image_tags(builder.images, cnis=cnis)]
    if args.images_command == "build":
        report = builder.build(cnis=cnis, images=not args.prepare)
        print(
            f"cnibench: {report.summary()}; kind and kubectl in {offline_bin_dir()}",
            file=sys.stderr,
        )
        if args.prepare:
            return EXIT_OK
        for tag in tags:
            print(tag)
        return EXIT_OK
    missing = 0
    for tag in tags:
        present = bool(builder.docker_host) and builder.image_exists(tag)
        missing += not present
        print(f"{tag}\t{'present' if present else 'missing'}")
    return EXIT_OK if not missing else EXIT_FAILED


def _push(builder: OfflineBuilder, registry: str, cnis: Sequence[str]) -> int:
    """``cnibench images push REGISTRY``: progress on stderr, the exports on stdout."""
    from cnibench.backends.kube.offline import pod_image_tags
    from cnibench.backends.kube.registry import check_registry, image_variables, push_images

    registry = check_registry(registry)
    if not builder.docker_host:
        raise ConfigError(
            "images push: DOCKER_HOST is not set; point it at the engine that built them"
            ' (eval "$(cnibench engine up)")'
        )
    report = push_images(
        builder.docker_host,
        pod_image_tags(builder.images, cnis=cnis),
        registry,
        log=lambda line: print(f"cnibench: {line}", file=sys.stderr),
    )
    print(f"cnibench: {report.summary().splitlines()[-1]}", file=sys.stderr)
    pushed = {remote for _, remote in report.pushed}
    for variable, ref in image_variables(builder.images.in_registry(registry)).items():
        if ref in pushed:
            print(f"export {variable}={ref}")
    return EXIT_OK


def _prune(builder: OfflineBuilder, *, dry_run: bool) -> int:
    """``cnibench images prune``: the stale tags, one line each, then a count."""
    from cnibench.backends.kube.offline.prune import current_tags, prune_images

    if not builder.docker_host:
        raise ConfigError(
            "images prune: DOCKER_HOST is not set; point it at the engine to prune"
            ' (eval "$(cnibench engine up)")'
        )
    report = prune_images(
        builder.docker_host, current_tags(builder.images, builder.versions), dry_run=dry_run
    )
    print(report.summary())
    return EXIT_OK if not report.failed else EXIT_FAILED


if __name__ == "__main__":
    entry()
