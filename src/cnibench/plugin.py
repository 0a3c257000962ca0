"""pytest plugin of cnibench (entry point ``pytest11``): the benchmark suite's options and fixtures.

``pytest -k egress --cluster=lab --cni=vxlan`` runs the egress conditions on a lab with the vxlan
datapath. Options live in the ``cnibench`` group; heavy modules are imported only inside the hooks
and fixtures that need them, so the plugin costs nothing to sessions that do not benchmark. The
stateful :class:`_BenchState` exists only once a test asks for a cluster.

The options are those of ``cnibench run``, each named ``--cnibench-NAME`` (``--cnibench-profile``,
``--cnibench-runs``, ``--cnibench-results-dir``, ...) but for ``--cni`` and ``--cluster``, which
users type bare: the plugin is loaded in every pytest of the environment, where a bare
``--profile`` would meet pytest-profiling's. Errors, help and skip reasons from the shared code
name the plugin's options (:func:`in_plugin_words`).

Fixtures
--------
cni
    The CNI (or lab datapath) of the current test as results record it (its ``--cni`` label);
    tests are parametrized over ``--cni``. The session holds each parsed once
    (``cnibench_session.spec(cni)``).
cnibench_session
    The session-scoped :class:`cnibench.session.BenchSession` (one per xdist worker, so each
    worker gets its own lab or cluster).
cluster
    The cluster for the current ``cni`` (session-scoped per CNI; ``cluster.pykube`` on kube).
bench
    Runs a scenario condition: provisions (or reuses) the cluster, verifies, measures every
    repetition, records results and attaches a summary to the test report. One condition per
    test, so a suite's conditions run sequentially (each test's repetitions on one set-up, in
    pytest's order); ``cnibench run`` interleaves a scenario's conditions in rounds
    (:func:`cnibench.session.run_design`).

``--cnibench-compare-to DIR [--cnibench-fail-on-regression 5%]`` compares the session's results
with DIR when it ends, as ``cnibench compare`` does (:mod:`cnibench.report.compare`), and with the
second option fails the session unless every gated comparison is within the threshold: on a
regression (as ``cnibench compare``'s exit 1) and, with its own message, when the gate is
undecided (its exit 3). ``--cnibench-session-sd`` and ``--cnibench-allow-missing`` mean what
``--session-sd`` and ``--allow-missing`` mean there.
"""

from __future__ import annotations

import functools
import math
import re
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from cnibench.backends.base import Cluster
    from cnibench.scenarios import Condition
    from cnibench.scenarios.runner import ConditionResult
    from cnibench.session import BenchSession

__all__ = ["BARE_OPTIONS", "Bench", "in_plugin_words", "plugin_option"]

_STATE_KEY = pytest.StashKey["_BenchState"]()
_CONFIG_KEY = pytest.StashKey[Any]()
"""The session options, checked once (:func:`_session_config`)."""
_CHOICE_KEY = pytest.StashKey[Any]()
"""The session's backend and CNIs, chosen once (:func:`_choice`)."""
_SCENARIOS_KEY = pytest.StashKey[Any]()
"""The scenarios configured by the session's options, built once (:func:`_scenarios`)."""


BARE_OPTIONS = ("--cni", "--cluster")
"""The plugin's options users type bare (``pytest -k egress --cni=antrea``); every other one is
``--cnibench-NAME`` (:func:`plugin_option`)."""

_PREFIX = "--cnibench-"

_GATE_OPTIONS = ("--compare-to", "--fail-on-regression", "--session-sd", "--allow-missing")
"""The regression gate's options as ``cnibench compare`` and its output name them."""

_QUOTED_COMMAND = re.compile(
    r"\bcnibench(?: [a-z]+){1,2}(?: --[\w-]+(?:[ =][^\s;,)`'-][^\s;,)`']*)?)+"
)
"""A ``cnibench COMMAND --option VALUE ...`` a text quotes: its options are the command's."""


def plugin_option(option: str) -> str:
    """The plugin's name for an option of ``cnibench run`` (or ``cnibench compare``'s gate):
    ``--runs`` is ``--cnibench-runs``; ``--cni`` and ``--cluster`` keep their names."""
    return option if option in BARE_OPTIONS else _PREFIX + option.removeprefix("--")


def _plugin_dest(name: str) -> str:
    """Where pytest keeps the value of the session option argparse calls ``name``
    (``results_dir`` -> ``cnibench_results_dir``), for ``config.getoption``."""
    option = plugin_option("--" + name.replace("_", "-"))
    return option.removeprefix("--").replace("-", "_")


def _shared_options() -> tuple[str, ...]:
    """The options of ``cnibench run``'s table the plugin takes, as the CLI names them."""
    from cnibench.session import add_session_options

    names: list[str] = []
    add_session_options(lambda option, **_: names.append(option))
    return tuple(names)


@functools.cache
def _renamed_option() -> re.Pattern[str]:
    """A renamed option (:func:`plugin_option`) or a quoted ``cnibench`` command (group
    ``command``), whichever comes first."""
    renamed = [o for o in (*_shared_options(), *_GATE_OPTIONS) if o not in BARE_OPTIONS]
    names = "|".join(re.escape(o) for o in renamed)
    return re.compile(rf"(?P<command>{_QUOTED_COMMAND.pattern})|(?<![\w-])(?:{names})(?![\w-])")


def in_plugin_words(text: str) -> str:
    """``text`` (an error, a help text, a skip reason or a gate line of the code the plugin
    shares with ``cnibench run`` and ``cnibench compare``) with the plugin's option names:
    ``--runs must be a positive integer`` -> ``--cnibench-runs must be ...``. The options of
    a ``cnibench COMMAND ...`` it quotes stay the command's."""

    def rename(match: re.Match[str]) -> str:
        return match.group() if match.group("command") else plugin_option(match.group())

    return _renamed_option().sub(rename, text)


def _usage_error(exc: Exception) -> pytest.UsageError:
    """A one-line usage error of a :class:`~cnibench.errors.ConfigError`, in the plugin's
    option names."""
    return pytest.UsageError(in_plugin_words(str(exc)))


def _prefixed(add: Callable[..., object]) -> Callable[..., object]:
    """``add`` (``group.addoption``) taking the options of ``cnibench run`` by the plugin's
    names, their help in the plugin's words."""

    def add_option(option: str, **kwargs: Any) -> object:
        if "help" in kwargs:
            kwargs["help"] = in_plugin_words(kwargs["help"])
        return add(plugin_option(option), **kwargs)

    return add_option


def pytest_addoption(parser: pytest.Parser) -> None:
    """The ``cnibench`` option group: the options of ``cnibench run`` (named
    ``--cnibench-NAME`` but for :data:`BARE_OPTIONS`) and the regression gate's."""
    group = parser.getgroup("cnibench", "cnibench benchmark suite")
    from cnibench.session import add_session_options

    add_session_options(_prefixed(group.addoption))
    group.addoption(
        "--cnibench-compare-to",
        default=None,
        metavar="DIR",
        help="at the end, compare this session's results with the results in DIR and print the"
        " table of cnibench compare",
    )
    group.addoption(
        "--cnibench-fail-on-regression",
        default=None,
        metavar="THRESHOLD",
        help="with --cnibench-compare-to: fail the session unless every gated metric is within"
        " THRESHOLD (5%% or 0.05): on a regression, a failed run or a missing metric, and, with"
        " its own message, when the gate is undecided (cnibench compare's exit 1 and 3)",
    )
    group.addoption(
        "--cnibench-session-sd",
        default=None,
        metavar="SD",
        help="with --cnibench-compare-to: session-to-session SD to assume (3%% or 0.03) where"
        " one session a side does not estimate it (as cnibench compare --session-sd)",
    )
    group.addoption(
        "--cnibench-allow-missing",
        action="store_true",
        default=False,
        help="with --cnibench-compare-to: list the conditions and metrics of DIR this session"
        " did not measure instead of failing the gate on them (e.g. a -k subset of the suite)",
    )


def pytest_configure(config: pytest.Config) -> None:
    """Register one marker per scenario and validate option values early."""
    from cnibench.scenarios import scenario_markers

    for name, description in scenario_markers().items():
        config.addinivalue_line("markers", f"{name}: {description}")
    # Every option checked once, by the same code and with the same one-line errors as
    # cnibench run (in the plugin's option names); the CNI names once here too (from
    # collection the same error would come once per test module).
    # The backend and the CNIs (and --cnibench-reference against them) are chosen once here
    # when the session names them, else at collection: either way once (one engine probe).
    checked = _session_config(config)
    if checked.cnis or checked.reference is not None:
        _choice(config)
    _register_regression_gate(config)


def _register_regression_gate(config: pytest.Config) -> None:
    """Validate ``--cnibench-compare-to``/``--cnibench-fail-on-regression`` and load the
    baseline now, so that a bad value stops the session before anything is benchmarked;
    register the gate.

    On an xdist worker nothing is registered: the controller sees every worker's test reports
    (and the session directories they name), so it alone compares.
    """
    compare_to = config.getoption("--cnibench-compare-to", default=None)
    fail_on = config.getoption("--cnibench-fail-on-regression", default=None)
    session_sd = config.getoption("--cnibench-session-sd", default=None)
    if compare_to is None:
        for option, value in (
            ("--cnibench-fail-on-regression", fail_on),
            ("--cnibench-session-sd", session_sd),
        ):
            if value is not None:
                raise pytest.UsageError(f"{option} needs --cnibench-compare-to DIR")
        return
    from cnibench.errors import ConfigError
    from cnibench.report.compare import (
        DEFAULT_THRESHOLD,
        load_result_set,
        parse_session_sd,
        parse_threshold,
    )

    try:
        threshold = DEFAULT_THRESHOLD if fail_on is None else parse_threshold(fail_on)
    except ConfigError as exc:
        raise pytest.UsageError(f"--cnibench-fail-on-regression: {exc}") from None
    try:
        sd = None if session_sd is None else parse_session_sd(session_sd)
    except ConfigError as exc:
        raise pytest.UsageError(f"--cnibench-session-sd: {exc}") from None
    try:
        baseline = load_result_set(Path(compare_to), what="--cnibench-compare-to")
    except ConfigError as exc:
        raise _usage_error(exc) from None
    if not hasattr(config, "workerinput"):
        gate = _RegressionGate(
            baseline,
            threshold=threshold,
            fail=fail_on is not None,
            session_sd=sd,
            allow_missing=bool(config.getoption("--cnibench-allow-missing", default=False)),
        )
        config.pluginmanager.register(gate, "cnibench-regression-gate")


def _session_config(config: pytest.Config) -> Any:
    """:func:`cnibench.session.session_config` of the option group's values.

    Raises
    ------
    pytest.UsageError
        A bad value, in the words ``cnibench run`` uses but for the plugin's option names.
    """
    from cnibench.errors import ConfigError
    from cnibench.session import SESSION_OPTIONS, session_config

    known = config.stash.get(_CONFIG_KEY, None)
    if known is not None:
        return known
    values = {name: config.getoption(_plugin_dest(name)) for name in SESSION_OPTIONS}
    try:
        checked = session_config(values)
    except ConfigError as exc:
        raise _usage_error(exc) from None
    config.stash[_CONFIG_KEY] = checked
    return checked


class _BenchState:
    """The session object, created on first use and closed at the end of the session."""

    def __init__(self, config: pytest.Config) -> None:
        from cnibench.errors import ConfigError
        from cnibench.session import BenchSession

        try:
            self.session: BenchSession = BenchSession(
                _session_config(config), scenarios=_scenarios(config), choice=_choice(config)
            )
        except ConfigError as exc:
            raise _usage_error(exc) from None
        self.session.__enter__()

    def close(self) -> None:
        self.session.__exit__(None, None, None)


def _scenarios(config: pytest.Config) -> Any:
    """The scenario registry configured by ``--cnibench-weights``/``--cnibench-users``/... and
    planned for the session's backend (:meth:`~cnibench.scenarios.base.Scenario.on_backend`),
    built once: the conditions tests are parametrized with and the scenarios the session runs
    are the same.

    Raises
    ------
    pytest.UsageError
        An option the backend cannot honour (``--cnibench-engine`` on Kubernetes).
    """
    known = config.stash.get(_SCENARIOS_KEY, None)
    if known is None:
        from cnibench.errors import ConfigError
        from cnibench.scenarios import build_scenarios

        backend = _choice(config).backend
        configured = build_scenarios(_session_config(config).scenario_options)
        try:
            known = {name: s.on_backend(backend) for name, s in configured.items()}
        except ConfigError as exc:
            raise _usage_error(exc) from None
        config.stash[_SCENARIOS_KEY] = known
    return known


def _state(config: pytest.Config) -> _BenchState:
    state = config.stash.get(_STATE_KEY, None)
    if state is None:
        state = _BenchState(config)
        config.stash[_STATE_KEY] = state
    return state


def pytest_unconfigure(config: pytest.Config) -> None:
    """Tear down every cluster of the session (also after Ctrl-C or SIGTERM)."""
    state = config.stash.get(_STATE_KEY, None)
    if state is not None:
        del config.stash[_STATE_KEY]
        try:
            state.close()
        except KeyboardInterrupt:
            # Ctrl-C or SIGTERM during the final teardown, which ends first (signals_deferred)
            # and re-raises it here, after pytest's own handling of an interrupt: say it in one
            # line and exit as pytest does when interrupted, not with a traceback.
            sys.stderr.write("cnibench: interrupted during the session's final teardown\n")
            raise SystemExit(pytest.ExitCode.INTERRUPTED) from None
        checked = state.session.config
        report, reference = checked.report, checked.reference
        session_dir = state.session.store.session_dir
        if report and session_dir.is_dir():
            from cnibench.report import verdict, verdict_summary, write_report
            from cnibench.results import load_environments, load_results

            write_report(
                session_dir, html=report, reference=reference, all_metrics=checked.all_metrics
            )
            from cnibench.report.matrix import WIDTH

            writer = config.get_terminal_writer()
            table = verdict(
                load_results(session_dir),
                reference=reference,
                environments=load_environments(session_dir, on_error="warn"),
            )
            prefix = "cnibench: "
            # The heading wraps within the terminal, the prefix included (60 at the least).
            width = max(60, min(WIDTH, writer.fullwidth)) - len(prefix)
            full_at = f"the Verdict section of {report}"
            for line in verdict_summary(table, full_at=full_at, width=width):
                writer.line(f"{prefix}{line}")
            writer.line(f"cnibench: report written to {report}")


class _RegressionGate:
    """``--cnibench-compare-to``: compares this session's results with a baseline when the
    session ends.

    The session's result directories are the ones its test reports name (``Bench.run`` adds a
    ``cnibench_session`` user property, which xdist carries from the workers), plus this
    process's own session directory.
    """

    def __init__(
        self,
        baseline: Any,
        *,
        threshold: float,
        fail: bool,
        session_sd: float | None = None,
        allow_missing: bool = False,
    ) -> None:
        self.baseline = baseline
        self.threshold = threshold
        self.fail = fail
        self.session_sd = session_sd
        self.allow_missing = allow_missing
        self.session_dirs: dict[str, None] = {}
        self.text = ""
        self.lines: list[str] = []

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        for name, value in report.user_properties:
            if name == "cnibench_session":
                self.session_dirs.setdefault(str(value))

    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        if exitstatus not in (pytest.ExitCode.OK, pytest.ExitCode.TESTS_FAILED):
            return  # interrupted, usage or internal error: nothing worth comparing
        state = session.config.stash.get(_STATE_KEY, None)
        if state is not None:
            self.session_dirs.setdefault(str(state.session.store.session_dir))
        failed = self._compare()
        if failed is not None and session.exitstatus == pytest.ExitCode.OK:
            session.exitstatus = failed

    def _compare(self) -> pytest.ExitCode | None:
        """Fill ``text`` and ``lines``; the exit status the session deserves, if not OK."""
        from cnibench.errors import ConfigError, InsufficientDataError
        from cnibench.report.compare import Answer, compare_result_sets, load_result_set

        dirs = [Path(d) for d in self.session_dirs if Path(d).is_dir()]
        try:
            if not dirs:
                raise ConfigError(
                    "--cnibench-compare-to: this session recorded no results to compare"
                )
            candidate = load_result_set(dirs, what="this session's")
            comparison = compare_result_sets(
                self.baseline,
                candidate,
                threshold=self.threshold,
                session_sd=self.session_sd,
                allow_missing=self.allow_missing,
            )
        except (ConfigError, InsufficientDataError) as exc:
            self.lines = [f"cnibench: error: {in_plugin_words(str(exc))}"]
            return pytest.ExitCode.USAGE_ERROR
        # cnibench compare's words, with this session's option names (--cnibench-session-sd).
        self.text = in_plugin_words(comparison.text())
        lines = (*comparison.regression_lines(), *comparison.undecided_lines())
        self.lines = [f"cnibench: {in_plugin_words(line)}" for line in lines]
        answer = comparison.answer
        if not self.fail or answer is Answer.WITHIN:
            return None
        if answer is Answer.REGRESSED:
            why = "found a regression"
        else:
            # Undecided fails the session too (the gate did not show the metrics within the
            # threshold), in its own words: cnibench compare exits 3 where a regression is 1.
            count = len(comparison.undecided)
            why = (
                f"could not decide {count} comparison{'s' if count != 1 else ''} (undecided;"
                " each UNDECIDED line says what would decide it)"
            )
        self.lines.append(f"cnibench: the session fails: --cnibench-fail-on-regression {why}")
        return pytest.ExitCode.TESTS_FAILED

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        if not (self.text or self.lines):
            return  # the session was interrupted: nothing was compared
        terminalreporter.section("cnibench compare")
        if self.text:
            terminalreporter.line(self.text)
        for line in self.lines:
            terminalreporter.line(line, red=True)


def _choice(config: pytest.Config) -> Any:
    """:func:`cnibench.session.choose_backend` for this session, once (the plugin's session
    gets it, so the container engine is asked once).

    Raises
    ------
    pytest.UsageError
        A CNI the chosen backend lacks, a bad ``--cnibench-reference``, images not built, ...
    """
    known = config.stash.get(_CHOICE_KEY, None)
    if known is not None:
        return known
    from cnibench.errors import ConfigError
    from cnibench.session import choose_backend

    try:
        choice = choose_backend(_session_config(config))
    except ConfigError as exc:
        raise _usage_error(exc) from None
    config.stash[_CHOICE_KEY] = choice
    return choice


def _cnis_for(config: pytest.Config) -> tuple[str, ...]:
    """The session's CNIs (collection asks for them per test function)."""
    cnis: tuple[str, ...] = _choice(config).cnis
    return cnis


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """Parametrize every test using the ``cni`` fixture over the session's CNIs."""
    if "cni" in metafunc.fixturenames:
        cnis = _cnis_for(metafunc.config)
        metafunc.parametrize("cni", cnis, ids=list(cnis), scope="session")
    if "condition" in metafunc.fixturenames and not _parametrizes(metafunc, "condition"):
        # A test marked with a scenario gets every condition of that scenario as configured
        # by --cnibench-weights/-users/-rules/-clients/-engine, planned as cnibench run plans.
        from cnibench.errors import ConfigError
        from cnibench.scenarios import scenario_markers
        from cnibench.session import plan_conditions

        markers = scenario_markers()
        names = [m.name for m in metafunc.definition.iter_markers() if m.name in markers]
        if names:
            pairs = _session_config(metafunc.config).scenario_options.pairs
            try:
                planned = plan_conditions(_scenarios(metafunc.config), [names[0]], pairs=pairs)
            except ConfigError as exc:  # --cnibench-pairs N for a scenario of one pair
                raise _usage_error(exc) from None
            conditions = [p.condition for p in planned]
            metafunc.parametrize("condition", conditions, ids=[c.id for c in conditions])


def _parametrizes(metafunc: pytest.Metafunc, name: str) -> bool:
    return any(
        name in (m.args[0] if isinstance(m.args[0], (list, tuple)) else m.args[0].split(","))
        for m in metafunc.definition.iter_markers("parametrize")
    )


@pytest.fixture(scope="session")
def cnibench_session(request: pytest.FixtureRequest) -> BenchSession:
    """The benchmark session of this pytest process (one per xdist worker)."""
    return _state(request.config).session


@pytest.fixture(scope="session")
def cluster(cnibench_session: BenchSession, cni: str) -> Cluster:
    """The cluster for ``cni`` with the default spec (provisioned once per session); the
    test is skipped with the backend's reason when it makes no such cluster (e.g. a setting
    an existing cluster would have to change), before anything is created."""
    spec = cnibench_session.spec(cni)
    refusal = cnibench_session.backend.unsupported(spec)
    if refusal:
        pytest.skip(in_plugin_words(f"{spec.label}: {refusal}"))
    return cnibench_session.pool.get(spec)


class Bench:
    """What the ``bench`` fixture returns: runs conditions and reports on them."""

    def __init__(self, session: BenchSession, cni: str, request: pytest.FixtureRequest) -> None:
        self.session = session
        self.cni = cni
        self._request = request

    def run(self, scenario_name: str, condition: Condition) -> ConditionResult:
        """Run ``condition`` of ``scenario_name`` on this test's CNI.

        Skips the test (with the reason) when the cluster cannot run the condition; a set-up
        that cannot be made or verified fails the test (one line, as ``cnibench run`` prints
        it). Runs through :meth:`cnibench.session.BenchSession.run`, as the CLI does.
        """
        from cnibench.scenarios import scenario_named
        from cnibench.session import CniRequest, EventKind, PlannedCondition, ProgressEvent

        scenario = scenario_named(scenario_name, self.session.scenarios)
        notes: list[str] = []

        def note(event: ProgressEvent) -> None:
            if event.kind is EventKind.CLUSTER:
                notes.append(event.text)

        # One condition on this test's CNI (the session's own spec), through its one door.
        only = CniRequest((self.session.spec(self.cni),))
        outcome = self.session.run(
            [PlannedCondition(scenario, condition, only=only)], progress=note
        )
        if notes:  # the cluster was provisioned for this test: say what it found
            self._request.node.add_report_section("call", "cnibench cluster", "\n".join(notes))
        if outcome.skipped:
            pytest.skip(in_plugin_words(outcome.skipped[0].reason))
        if outcome.not_proven:
            pytest.fail(in_plugin_words(outcome.not_proven[0]), pytrace=False)
        (result,) = outcome.results
        self._request.node.add_report_section("call", "cnibench", _summary_text(result))
        self._request.node.user_properties.append(("cnibench_session", result.session_dir))
        return result


def _summary_text(result: ConditionResult) -> str:
    lines = [
        f"{result.scenario} {result.cni} {result.condition.id}: "
        f"{'verified' if result.verified else 'NOT verified'} ({result.verification.detail})",
        f"runs ok {len(result.ok_runs)}/{len(result.runs)} attempts; results in "
        f"{result.session_dir}",
    ]
    lines += [f"  {run.run_id} failed: {run.reason}" for run in result.runs if run.reason]
    for s in result.summaries():
        ci = f"95% CI [{s.low:.6g}, {s.high:.6g}]" if math.isfinite(s.low) else "no CI (n < 2)"
        flagged = f" ({s.flagged} outlying run(s) flagged)" if s.flagged else ""
        shown = f"{s.successes}/{s.n}={s.estimate:.6g}" if s.successes >= 0 else f"{s.estimate:.6g}"
        lines.append(f"  {s.metric:<22} n={s.n} {s.estimator}={shown} {ci} {s.unit}{flagged}")
    return "\n".join(lines)


@pytest.fixture
def bench(cnibench_session: BenchSession, cni: str, request: pytest.FixtureRequest) -> Bench:
    """Run scenario conditions on the current CNI (see :class:`Bench`)."""
    return Bench(cnibench_session, cni, request)
