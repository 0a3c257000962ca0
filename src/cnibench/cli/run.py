"""``cnibench run`` and ``cnibench report``: a session with its progress, then the answer (the
feature matrix and the verdict) and the per-condition table; a report of results on disk.

With ``--json`` each prints the verdict as JSON on stdout
(:func:`cnibench.report.exports.verdict_json`) and nothing else there: everything it prints
otherwise goes to stderr, down to the file descriptor, so a child process's output cannot
land in the JSON either."""

from __future__ import annotations

import argparse
import contextlib
import math
import os
import shlex
import sys
import warnings
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from cnibench.cli.exits import EXIT_FAILED, EXIT_OK
from cnibench.errors import ConfigError

__all__: list[str] = []


@contextlib.contextmanager
def _stdout_to_stderr(active: bool) -> Iterator[None]:
    """While ``active``: Python's stdout and file descriptor 1 both write to stderr, so what is
    printed inside (tables, lines, a tool's output) leaves stdout to the JSON after it."""
    if not active:
        yield
        return
    sys.stdout.flush()
    saved = os.dup(1)
    try:
        os.dup2(2, 1)
        with contextlib.redirect_stdout(sys.stderr):
            yield
    finally:
        sys.stderr.flush()
        os.dup2(saved, 1)
        os.close(saved)


def _print_json(table: Any) -> None:
    """The verdict as JSON on stdout (``--json``); ``None`` (no verdict) is an empty list."""
    from cnibench.report.exports import verdict_json

    print("[]" if table is None else verdict_json(table), flush=True)


def _run(args: argparse.Namespace) -> int:
    """``cnibench run``; with ``--json``, the verdict as JSON on stdout and all else on stderr."""
    table: Any = None
    with _stdout_to_stderr(args.json):
        code, table = _run_session(args)
    if args.json:
        _print_json(table)
    return code


def _run_session(args: argparse.Namespace) -> tuple[int, Any]:
    """``cnibench run``: options to a session, :meth:`BenchSession.run` with a progress bar,
    then the answer (feature matrix and verdict) and the per-condition table (the answer first
    into a file or pipe, last on a terminal), and the session's own lines. Returns the exit
    code and the verdict (``None`` when no result was written)."""
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
    table = None
    if outcome.results:
        # The answer goes where a reader looks first: at the top of a file or a pipe (CI logs,
        # `| less`), at the bottom of a terminal (what stays on screen when the run ends). The
        # per-condition table is the detail behind it.
        details = Console(width=max(console.width, 150))
        answer_first = not sys.stdout.isatty()
        if not answer_first:
            _print_table(outcome.results, session.scenarios, details)
        if outcome.session_dir.is_dir():
            table = _print_verdict(outcome.session_dir, config.reference, args.margin)
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
    return (EXIT_FAILED if outcome.failed else EXIT_OK), table


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

    from cnibench.report.data import SATURATION_IDLE_BOUND
    from cnibench.report.matrix import SATURATED
    from cnibench.report.tables import format_number
    from cnibench.scenarios.base import Scenario
    from cnibench.scenarios.runner import ConditionResult

    assert isinstance(console, Console)
    saturated = _saturated_counts(results)
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
        hot = saturated.get((result.scenario, result.cni, result.condition.id), 0)
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
                + (f", {SATURATED} {hot} of {len(result.ok_runs)} saturated" if hot else "")
                + (f", {summary.flagged} outlying run(s) flagged" if summary.flagged else "")
                + spread,
            )
    console.print(table)
    if saturated:
        console.print(
            f"{SATURATED} N of M saturated: N of the condition's M runs left less than"
            f" {100 * SATURATION_IDLE_BOUND:g} % of the host's CPU idle: the machine, not the"
            " datapath, limited them, and the verdict claims nothing from a contrast with one",
            markup=False,
            highlight=False,
        )
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


def _saturated_counts(results: Sequence[object]) -> dict[tuple[str, str, str], int]:
    """How many ok runs of each (scenario, configuration, condition) saturated the host, as
    :func:`cnibench.report.data.saturated_runs` flags them from their ``host_idle``; only
    conditions with one."""
    import pandas as pd

    from cnibench.report.data import HOST_IDLE_METRIC, saturated_runs
    from cnibench.scenarios.runner import ConditionResult

    rows = []
    for result in results:
        assert isinstance(result, ConditionResult)
        for run in result.ok_runs:
            for m in run.measurements:
                if m.metric == HOST_IDLE_METRIC and m.pair is None:
                    rows.append(
                        {
                            "session_id": "",
                            "run_id": run.run_id,
                            "cni": result.cni,
                            "scenario": result.scenario,
                            "condition": result.condition.id,
                            "metric": m.metric,
                            "value": m.value,
                            "unit": m.unit,
                            "status": "ok",
                        }
                    )
    if not rows:
        return {}
    flagged = saturated_runs(pd.DataFrame(rows))
    keys = zip(flagged["scenario"], flagged["cni"], flagged["condition"], strict=True)
    counts: dict[tuple[str, str, str], int] = {}
    for scenario, cni, condition in keys:
        key = (str(scenario), str(cni), str(condition))
        counts[key] = counts.get(key, 0) + 1
    return counts


def _print_verdict(results_dir: Path, reference: str | None, margin: float | None) -> Any:
    """The session's verdict on stdout: a heading, then one line per planned contrast.
    Returns the verdict's table."""
    from cnibench.report import verdict
    from cnibench.results import load_environments, load_results

    command = ["cnibench", "report", str(results_dir)]
    if reference is not None:
        command += ["--reference", reference]
    if margin is not None:
        command += ["--margin", f"{100 * margin:g}%"]
    runs = load_results(results_dir)
    environments = load_environments(results_dir, on_error="warn")
    table = verdict(runs, reference=reference, margin=margin, environments=environments)
    where = f"{shlex.join(command)} (its Verdict section)"
    _print_answer(table, full_at=where, margin=margin, runs=runs, results=results_dir)
    return table


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
    from cnibench.report.columns import wrap_words
    from cnibench.report.data import load_skipped, measured_on
    from cnibench.report.matrix import (
        cni_matrix,
        cpu_scope,
        feature_matrix,
        matrix_text,
        not_possible_notes,
    )
    from cnibench.results import load_environments

    width = answer_width()

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
        scope = cpu_scope(runs)
        lines = matrix_text(
            features, title=title, width=width, margin=margin, notes=notes, cpu_scope=scope
        )
        if where:  # every number on this screen carries n (its cell), date and machine
            lines[1:1] = wrap_words(where, width, indent="  ", hang="    ")
        for line in lines:
            print(line, flush=True)
        cnis = cni_matrix(table, runs=runs)
        if not cnis.empty:
            title = "Each CNI against the reference of its group"
            for line in matrix_text(cnis, title=title, width=width, margin=margin, cpu_scope=scope):
                print(line, flush=True)
    for line in verdict_summary(table, full_at=full_at, width=width):
        print(line, flush=True)


NARROWEST = 60
"""Fewest columns the answer is laid out in, however narrow the terminal says it is."""


def answer_width() -> int:
    """Columns for the matrix and the verdict's heading: the terminal's (``COLUMNS`` if
    set), at most :data:`cnibench.report.matrix.WIDTH` and at least :data:`NARROWEST`; a
    file or a pipe gets the widest."""
    import shutil

    from cnibench.report.matrix import WIDTH

    columns = shutil.get_terminal_size((WIDTH, 24)).columns
    return max(NARROWEST, min(WIDTH, columns))


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


def _report(args: argparse.Namespace) -> int:
    """``cnibench report``; with ``--json``, the verdict as JSON on stdout, all else on stderr
    and only the files named by an option written (no default ``report.html``)."""
    # A path that names no directory is a bad argument (exit 2); a directory whose files are
    # damaged is a failure of the data (ResultsError, exit 1).
    if not args.results.exists():
        raise ConfigError(f"results directory {args.results} does not exist")
    if not args.results.is_dir():
        raise ConfigError(f"results path {args.results} is not a directory")
    if not any(args.results.glob("**/runs/*.json")):
        # As `cnibench compare` says of an empty baseline: nothing to read is a bad argument.
        raise ConfigError(f"no results in {args.results}: no runs/<run_id>.json files found")
    with _stdout_to_stderr(args.json):
        table = _report_files(args)
    if args.json:
        _print_json(table)
    return EXIT_OK


def _report_files(args: argparse.Namespace) -> Any:
    """The report's files and its answer (the matrix and the verdict's lines); returns the
    verdict's table."""
    from cnibench.report import write_report

    html = args.html
    if html is None and args.markdown is None and args.png_dir is None:
        if args.json:
            return _json_verdict_only(args)
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
    return table


def _json_verdict_only(args: argparse.Namespace) -> Any:
    """``report --json`` without a file to write: the verdict, and its answer on stderr."""
    from cnibench.report import verdict
    from cnibench.results import load_environments, load_results

    runs = load_results(args.results, sessions=args.session or "all")
    environments = load_environments(args.results, on_error="warn")
    table = verdict(runs, reference=args.reference, margin=args.margin, environments=environments)
    where = "cnibench report " + shlex.quote(str(args.results)) + " (its Verdict section)"
    _print_answer(table, full_at=where, margin=args.margin, runs=runs, results=args.results)
    return table
