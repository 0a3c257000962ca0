"""``cnibench compare``: the regression gate's options and its command (the gate itself is
:mod:`cnibench.report.compare`)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from cnibench.cli.exits import EXIT_FAILED, EXIT_OK, EXIT_UNDECIDED
from cnibench.cli.options import _margin, _Parser, _plan_loss, _session_sd, _threshold
from cnibench.errors import ConfigError

__all__: list[str] = []


_COMPARE_EPILOG = (
    "exit status: 0 every gated comparison within the threshold (decided); 1 a regression, a"
    " failed candidate run or a metric or condition the candidate lacks (without"
    " --allow-failed-runs / --allow-missing), also when other comparisons are undecided; 2"
    " bad input; 3 undecided: no regression, but some comparison could not be decided, each"
    " named on stderr with what would decide it (more sessions or runs, or --session-sd when"
    " the baseline holds one session)"
)


def _add_compare_parser(commands: argparse._SubParsersAction[_Parser]) -> None:
    compare = commands.add_parser(
        "compare",
        help="regression gate: is CANDIDATE_DIR worse than BASELINE_DIR by more than the"
        " threshold? Answers regressed (exit 1), within threshold (exit 0) or undecided (exit"
        " 3, naming what would decide it); the headline gives the false-alarm rate for these"
        " baselines",
        description="Compare every condition and metric of BASELINE_DIR with CANDIDATE_DIR's"
        " (ratio of geometric means with its interval) and answer each regressed, within"
        " threshold or undecided.",
        epilog=_COMPARE_EPILOG,
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
        "--session-sd",
        type=_session_sd,
        default=None,
        metavar="SD",
        help="session-to-session SD to assume (3%% or 0.03) for the metrics whose sessions do"
        " not estimate it (one session a side); without it those comparisons are undecided,"
        " since one baseline session cannot bound false alarms. The headline states it",
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
        help="also write the comparison as Markdown for a pull-request comment (regressions"
        " and undecided comparisons first, the rest folded; at most 65,536 characters)",
    )
    compare.add_argument(
        "--junit",
        type=Path,
        default=None,
        metavar="FILE",
        help="also write JUnit XML for CI: a test case per gated comparison, a failure for"
        " regressed, failed runs or missing, an error of type undecided for undecided",
    )
    compare.add_argument(
        "--allow-failed-runs",
        action="store_true",
        help="leave out candidate runs that failed or measured 0 where 0 is impossible (a"
        " rate, a latency or RTT; named in the table) instead of failing the gate on them",
    )
    compare.add_argument(
        "--allow-missing",
        action="store_true",
        help="list the metrics and conditions of BASELINE_DIR that CANDIDATE_DIR lacks instead"
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


def _compare(args: argparse.Namespace) -> int:
    """``cnibench compare``: the table on stdout; on stderr one line per failing comparison,
    then one per undecided comparison with what would decide it.

    Exit 0 when every gated comparison is within the threshold, 1 on a regression or failure
    (decided, whatever else is undecided), 3 when undecided, 2 on bad input (every input
    problem is a ``ConfigError`` here, so that 1 always means "regressed").
    """
    from cnibench.errors import InsufficientDataError
    from cnibench.report.compare import (
        Answer,
        compare_result_sets,
        load_result_set,
        plan_gate,
        write_junit,
        write_markdown,
    )

    for option, path in (("--markdown", args.markdown), ("--junit", args.junit)):
        if path is not None and not path.parent.is_dir():
            raise ConfigError(f"{option} {path}: directory {path.parent} missing")
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
            allow_missing=args.allow_missing,
            session_sd=args.session_sd,
        )
    except InsufficientDataError as exc:
        raise ConfigError(str(exc)) from exc
    print(comparison.text())
    if args.margin is not None:
        print(comparison.equivalence_line(args.margin))
    if args.markdown is not None:
        write_markdown(comparison, args.markdown)
        print(f"wrote {args.markdown}")
    if args.junit is not None:
        write_junit(comparison, args.junit)
        print(f"wrote {args.junit}")
    for line in (*comparison.regression_lines(), *comparison.undecided_lines()):
        print(f"cnibench: {line}", file=sys.stderr)
    answer = comparison.answer
    if answer is Answer.REGRESSED:
        return EXIT_FAILED
    return EXIT_UNDECIDED if answer is Answer.UNDECIDED else EXIT_OK
