"""The first screen of a report: what each feature costs on each CNI configuration.

Two matrices are built from :func:`cnibench.report.verdict.verdict`'s frame:

- :func:`feature_matrix`: rows are features (egress gateway, WireGuard, L3/L4 policy at each
  rule count, the Service path at each number of Services, a cluster option such as the
  kube-proxy mode, L7 policy, a Gateway split, ...) in each of their metrics; columns are the
  configurations measured. A cell is the feature's cost on that configuration (treatment /
  control, or a difference where a side is near zero) with the interval that carries its
  call and runs per side, marked :data:`DETECTABLE` (a cost), :data:`SAME` (same within
  ±5 % or the margin), undecided (``?N``: runs per side that would decide ±5 % or the
  margin), :data:`SATURATED` (a run on a side saturated the host's CPU: no claim), or why
  there is no number.
- :func:`cni_matrix`: each configuration against the reference of its group of comparable
  configurations (:mod:`cnibench.report.configs`), condition by condition.

Host-wide metrics (:data:`cnibench.report.derived.HOST_WIDE`) never appear here: they are the
whole machine, not the CNI. Both are tidy frames; :func:`matrix_text` lays one out for a
terminal of :data:`WIDTH` columns, :func:`matrix_rows` for HTML and Markdown.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from typing import Any

import pandas as pd

from cnibench.metric_catalog import CatalogView, Direction, direction_of
from cnibench.report.columns import GAP, fit_columns, lay_out_row, wrap_words
from cnibench.report.configs import INSTRUMENT_WORDS
from cnibench.report.data import (
    RETRANSMIT_RATE_BOUND,
    SATURATION_IDLE_BOUND,
    high_retransmit_runs,
)
from cnibench.report.derived import AGENT_METRICS, HOST_WIDE, NODE_SUM
from cnibench.report.effects import EFFECT_FEATURE, effect_cells
from cnibench.report.labels import feature_words, shorten_cni_labels
from cnibench.report.verdict import (
    DRIFT_TOO_STRONG,
    Call,
    call_of,
    interval_text,
    metric_words,
)

__all__ = [
    "DETECTABLE",
    "GAIN",
    "LOSSY",
    "MATRIX_COLUMNS",
    "NOT_POSSIBLE_CELL",
    "SAME",
    "SATURATED",
    "SHORT_METRICS",
    "WIDTH",
    "cni_matrix",
    "cpu_scope",
    "feature_matrix",
    "matrix_legend",
    "matrix_rows",
    "matrix_text",
    "metric_key",
    "not_possible_notes",
]

WIDTH = 100
"""Columns of the terminal matrix at most (fewer on a narrower terminal)."""


SHORT_METRICS: Mapping[str, str] = CatalogView(lambda m: m.short or None)
"""How the terminal matrix names a long metric (:func:`metric_key` gives the full name): as
the metric catalog declares it."""

CPU_MEANINGS: Mapping[str, str] = {
    AGENT_METRICS[0]: "the CNI's own pods' CPU, summed",
    NODE_SUM: "the nodes' own CPU, summed",
    "cpu@egress-gw": "the egress gateway node's own CPU",
}
"""What a per-node or per-agent CPU metric counts, in the matrix's key."""

EFFECT_MEANINGS: Mapping[str, str] = {
    "P50": "half of the changes took effect within it",
    "P90": "nine in ten did",
}
"""What a time-to-effect row's percentile says, in the matrix's key."""

DETECTABLE = "●"
"""Mark of a detectable difference (Holm-corrected, its interval excludes no difference) that
is a cost: the metric got worse, or it has no better direction."""

GAIN = "○"
"""Mark of a detectable difference that is a gain: the metric got better (its direction as
:data:`cnibench.metric_catalog.CATALOG` declares it)."""

SAME = "≈"
"""Mark of "same within ±margin" (two one-sided tests)."""

LOSSY = "⚠"
"""Mark of a throughput cell with a run whose TCP senders retransmitted more than
:data:`~cnibench.report.data.RETRANSMIT_RATE_BOUND` of their segments, on either side: loss,
not the datapath's speed, limited that run."""

SATURATED = "⊘"
"""Mark of a cell whose contrast has a run, on either side, that left less than
:data:`~cnibench.report.data.SATURATION_IDLE_BOUND` of the host's CPU idle: the machine, not
the datapath, limited that run, and the verdict claims nothing from the contrast (its cell
shows the estimate alone, no interval and no call)."""

Lossy = frozenset[tuple[str, str, str]]
"""(scenario, configuration, condition) with a lossy run (:func:`lossy_conditions`)."""


def lossy_conditions(runs: pd.DataFrame | None) -> Lossy:
    """The conditions of ``runs`` (tidy results) with a run above the retransmission bound;
    none when ``runs`` is ``None`` or records no ``retransmit_rate``."""
    if runs is None or runs.empty or "metric" not in runs.columns:
        return frozenset()
    if not (runs["metric"] == "retransmit_rate").any():
        return frozenset()
    flagged = high_retransmit_runs(runs)
    return frozenset(
        zip(
            flagged["scenario"].astype(str),
            flagged["cni"].astype(str),
            flagged["condition"].astype(str),
            strict=True,
        )
    )


MATRIX_COLUMNS = (
    "row",
    "scenario",
    "feature",
    "metric",
    "unit",
    "column",
    "cell",
    "runs",
    "state",
)
"""Columns of :func:`feature_matrix` and :func:`cni_matrix`, one row per cell."""

_FEATURE_WORDS: Mapping[tuple[str, str], str] = {
    ("egress", "gateway"): "egress gateway",
    ("policy", "enforcement"): "L3/L4 policy",
    ("wireguard", "encryption"): "WireGuard",
    ("split", "shares"): "Gateway split",
    ("l7", "policy"): "L7 policy",
    ("policy", "rules"): "policy rules",
    ("policy", EFFECT_FEATURE): "policy takes effect",
    ("baseline", "cross-node"): "cross-node",
    ("baseline", "background load"): "background load",
    ("baseline", "service path"): "Service path",
    ("baseline", "other Services in the tables"): "other Services",
    ("baseline", EFFECT_FEATURE): "a new Service answers",
}
"""Each feature's words, in the order the matrix lists them: the features a platform team
switches on first, then what scales them (rules, Services), then the path's own factors."""
_FEATURE_RANK = {key: rank for rank, key in enumerate(_FEATURE_WORDS)}

_SHOWN = (NODE_SUM, "cpu@egress-gw", AGENT_METRICS[0])
"""Resource metrics a matrix shows besides the scenario's own (the rest are in the list)."""


def _shown(metric: str, scenario_metrics: Sequence[str]) -> bool:
    if metric in HOST_WIDE:
        return False
    return metric in _SHOWN or metric == "shares" or metric in scenario_metrics


def _state(row: Mapping[str, Any]) -> str:
    call = call_of(row)
    if call is Call.SATURATED:
        return "saturated"
    if call in (Call.HIGHER, Call.LOWER):
        return "detectable"
    if call is Call.SAME:
        return "same"
    if row["kind"] == "outcome":
        return "outcome"
    if not math.isfinite(float(row["ci_low"])) and row["scale"] != "split":
        return "no interval"
    return "undecided"


def _number(value: float) -> str:
    if not math.isfinite(value):
        return "n/a"
    magnitude = abs(value)
    for limit, divisor, prefix in ((1e9, 1e9, "G"), (1e6, 1e6, "M"), (1e4, 1e3, "k")):
        if magnitude >= limit:
            return f"{value / divisor:.3g}{prefix}"
    if magnitude >= 100:
        return f"{value:.0f}"
    return f"{value:.2f}" if magnitude >= 0.01 or value == 0 else f"{value:.2g}"


DRIFT_CELL = "drift"
"""What a cell says in place of its interval where the sides ran one after the other with a
drift too strong for one (:data:`cnibench.report.verdict.DRIFT_TOO_STRONG`)."""

ACROSS_SESSIONS_CELL = "across sessions"
"""A cell whose sides come from different sessions, one on a side: no interval, no claim."""


def _cell(row: Mapping[str, Any]) -> str:
    """``×0.71 0.61-0.82 n5 ●``: estimate, interval, runs per side, mark."""
    state = _state(row)
    n = int(row["n_treatment"])
    if row["scale"] == "split":
        word = "off" if row["significant"] else "ok"
        return f"max err {100 * float(row['estimate']):.1f} pt, {word}"
    if row["kind"] == "outcome":
        return f"{round(float(row['estimate']) * n)}/{n} yes"
    estimate = float(row["estimate"])
    if not math.isfinite(estimate) and " not compared: " in str(row.get("verdict", "")):
        # The configurations differ in more than the factor compared (the verdict's line
        # names how): no number to show.
        return NOT_COMPARED_CELL
    low, high = float(row["ci_low"]), float(row["ci_high"])
    if row["scale"] == "ratio":
        head = f"×{estimate:.2f}"
        ci = interval_text(low, high, null=1.0) if math.isfinite(low) else "no CI"
    else:
        head = ("+" if estimate >= 0 else "") + _number(estimate)
        ci = f"{_number(low)}..{_number(high)}" if math.isfinite(low) else "no CI"
    if row.get("design") == "across sessions" and not math.isfinite(low):
        # One session on a side: a session offset cannot be told from a difference.
        ci = ACROSS_SESSIONS_CELL
    elif DRIFT_TOO_STRONG in str(row.get("verdict", "")) and not math.isfinite(low):
        ci = DRIFT_CELL
    if state == "saturated":
        return f"{head} {SATURATED}"
    mark = {"detectable": DETECTABLE, "same": SAME}.get(state, "")
    if state == "detectable" and _better(row):
        mark = GAIN
    if state == "undecided":
        mark = _undecided_mark(row)
    return f"{head} {ci} {mark}".rstrip()


def _better(row: Mapping[str, Any]) -> bool:
    """Whether verdict line ``row``'s detectable change is an improvement of its metric."""
    direction = direction_of(str(row["metric"]))
    if direction is None:
        return False
    return (call_of(row) is Call.HIGHER) == (direction is Direction.HIGHER_IS_BETTER)


NOT_COMPARED_CELL = "not compared"
"""A cell whose configurations differ in more than the factor of its row (its verdict line
says in what): no estimate, no call."""

NO_COUNT = "?±"
"""Prefix of an undecided cell's mark where no margin is set for the row's unit, so no count
of runs decides it: ``?±0.07`` (this design detects about ±0.07 in the row's unit)."""

UNKNOWN = "?"
"""An undecided cell's mark where the runs give no estimate of what would decide it."""


def _undecided_mark(row: Mapping[str, Any]) -> str:
    """``?N`` (N runs per side decide ±margin), ``?>999``, ``?±D`` (no margin in the row's
    unit: this design detects about ±D), or :data:`UNKNOWN`."""
    needed = int(row["runs_needed"])
    if needed > 0:
        return f"?{needed}" if needed < 1000 else "?>999"
    detectable = float(row["detectable"])
    if not math.isfinite(detectable):
        return UNKNOWN
    if row["scale"] == "ratio":
        return f"{NO_COUNT}{100 * detectable:.0f}%"
    return f"{NO_COUNT}{_number(detectable)}"


def _runs(row: Mapping[str, Any]) -> str:
    n, control = int(row["n_treatment"]), int(row["n_control"])
    return f"n{n}" if n == control or row["kind"] in ("weights", "outcome") else f"n{n}/{control}"


def _row_keys(frame: pd.DataFrame) -> dict[int, str]:
    """What tells rows of one feature apart: the treatment parameters that vary within one
    configuration (rule counts, numbers of Services), never those that differ only between
    configurations (the Service proxy a baseline condition names)."""
    keys: dict[int, str] = {}
    group_by = frame["feature"].where(frame["kind"] != "cni", "cni")
    for _, group in frame.groupby([frame["scenario"], group_by], sort=False):
        params = {int(str(i)): json.loads(str(p)) for i, p in group["treatment_parameters"].items()}
        varying: set[str] = set()
        for _, per_config in group.groupby("column", sort=False):
            seen = [params[int(str(i))] for i in per_config.index]
            for key in set().union(*seen):
                if len({json.dumps(p.get(key)) for p in seen}) > 1:
                    varying.add(key)
        for index in group.index:
            shown = params[int(index)]
            keys[int(index)] = ", ".join(f"{k}={shown[k]}" for k in sorted(varying) if k in shown)
    return keys


def _lossy(record: Mapping[str, Any], lossy: Lossy) -> bool:
    if record["metric"] != "throughput" or not lossy:
        return False
    scenario = str(record["scenario"])
    sides = (
        (scenario, str(record["cni"]), str(record["treatment"])),
        (scenario, str(record["control_cni"]), str(record["control"])),
    )
    return any(side in lossy for side in sides)


def _frame(
    verdict: pd.DataFrame, kinds: Sequence[str], *, by: str, lossy: Lossy = frozenset()
) -> pd.DataFrame:
    from cnibench.scenarios import SCENARIOS

    mine = verdict[verdict["kind"].isin(kinds)].copy()
    if mine.empty:
        return pd.DataFrame(columns=list(MATRIX_COLUMNS))
    scenario_metrics = {
        name: tuple(SCENARIOS[name].primary_metrics) if name in SCENARIOS else ()
        for name in mine["scenario"].unique()
    }
    keep = [
        _shown(str(m), scenario_metrics[str(s)])
        for s, m in zip(mine["scenario"], mine["metric"], strict=True)
    ]
    mine = mine[keep]
    if mine.empty:
        return pd.DataFrame(columns=list(MATRIX_COLUMNS))
    mine["column"] = mine[by]
    if by == "cni" and (mine["kind"] == "cni").any():
        short = shorten_cni_labels(list(dict.fromkeys([*mine["cni"], *mine["control_cni"]])))
        mine["column"] = [
            f"{short[str(c)]} vs {short[str(r)]}" if k == "cni" else str(c)
            for c, r, k in zip(mine["cni"], mine["control_cni"], mine["kind"], strict=True)
        ]
    if "treatment_parameters" not in mine.columns:
        mine["treatment_parameters"] = "{}"
    keys = _row_keys(mine)
    out = []
    for index, row in mine.iterrows():
        record = {str(k): v for k, v in row.items()}
        if record["kind"] == "cni":
            words = record["scenario"]
        else:
            scenario, feature = str(record["scenario"]), str(record["feature"])
            words = feature_words(
                scenario,
                feature,
                str(record.get("backend", "")),
                # What the treatment's sessions recorded as running the feature.
                implementations=[record.get("implementation")],
            ) or _FEATURE_WORDS.get((scenario, feature), f"{scenario} {feature}")
        key = keys.get(int(str(index)), "")
        label = f"{words} ({key})" if key else words
        out.append(
            {
                "row": label,
                "scenario": record["scenario"],
                "feature": record["feature"],
                "metric": record["metric"],
                "unit": record["unit"],
                "column": record["column"],
                "cell": _cell(record) + (f" {LOSSY}" if _lossy(record, lossy) else ""),
                "runs": _runs(record),
                "state": _state(record),
            }
        )
    return pd.DataFrame(out, columns=list(MATRIX_COLUMNS))


def feature_matrix(
    verdict: pd.DataFrame,
    *,
    runs: pd.DataFrame | None = None,
    skipped: pd.DataFrame | None = None,
) -> pd.DataFrame:
    """Each feature's cost per configuration (one row per cell, :data:`MATRIX_COLUMNS`).

    Parameters
    ----------
    verdict:
        :func:`cnibench.report.verdict.verdict`'s frame with the ``treatment_parameters``
        column (it has it).
    runs:
        The tidy results the verdict was computed from: a throughput cell of a condition with
        a lossy run is marked :data:`LOSSY`. ``None``: no mark.
    skipped:
        What the clusters could not run (:func:`cnibench.report.data.load_skipped`): the
        cells of those configurations on the features of that scenario read
        :data:`NOT_POSSIBLE_CELL` instead of blank (:func:`not_possible_notes` says why).

    Returns
    -------
    pandas.DataFrame
        Feature contrasts in the column of their configuration; a cluster option's contrast
        (``kube-proxy nftables vs iptables``) in the column of the configuration without it;
        splits as their largest share error. No host-wide metric. With ``runs``, also how
        fast each timed change took effect on each configuration (P50 and P90 with their
        intervals, state ``"time"``: :func:`cnibench.report.effects.effect_cells`).
    """
    lossy = lossy_conditions(runs)
    features = _frame(verdict, ("feature", "weights"), by="cni", lossy=lossy)
    features = _not_possible_cells(features, skipped)
    options = _frame(verdict, ("option",), by="control_cni", lossy=lossy)
    matrix = _instrumented_cells(pd.concat([features, options], ignore_index=True))
    return _with_cells(matrix, effect_cells(runs) if runs is not None else [])


INSTRUMENTED_CELL = "CPU only"
"""What a cell of an instrumented configuration says where the verdict states no throughput
or latency (:func:`cnibench.report.configs.instrumented`)."""


def _instrumented_cells(matrix: pd.DataFrame) -> pd.DataFrame:
    """Fill the throughput/latency cells of instrumented configurations with why they are
    empty, on the rows where the configuration has a cell at all. Where only instrumented
    configurations measured a feature, its row names the scenario's own metrics (not the
    baseline's, whose features each measure a few of them) so that the reader sees that the
    throughput is missing and why, rather than a row of CPU alone."""
    from cnibench.backends.base import ClusterSpec
    from cnibench.scenarios import SCENARIOS

    def is_instrumented(label: str) -> bool:
        try:
            return ClusterSpec.from_label(label).options.get("napi") == "threaded"
        except ValueError:
            return False

    added = []
    for (label, scenario), group in matrix.groupby(["row", "scenario"], sort=False):
        columns = [c for c in dict.fromkeys(group["column"]) if is_instrumented(str(c))]
        others = matrix[(matrix["scenario"] == scenario) & (matrix["row"] == label)]
        metrics = dict.fromkeys(zip(others["metric"], others["unit"], strict=True))
        only_instrumented = all(is_instrumented(str(c)) for c in others["column"])
        if only_instrumented and scenario in SCENARIOS and scenario != "baseline":
            known = {str(m) for m in others["metric"]}
            own = SCENARIOS[str(scenario)]
            for metric in own.primary_metrics:
                if metric not in known and metric not in own.dependent_metrics:
                    metrics[(metric, "")] = None
        for metric, unit in metrics:
            if metric.startswith(("cpu", "ram", "cores")) or metric == "shares":
                continue
            for column in columns:
                if not ((others["column"] == column) & (others["metric"] == metric)).any():
                    feature = str(group["feature"].iloc[0])
                    where = (str(label), str(scenario), feature)
                    added.append(_word_cell(*where, metric, unit, column, "instrumented"))
    return _with_cells(matrix, added)


def _word_cell(
    row: str, scenario: str, feature: str, metric: str, unit: str, column: str, state: str
) -> dict[str, str]:
    """A matrix cell that holds words instead of a number (:data:`_WORDS` of ``state``)."""
    return {
        "row": row,
        "scenario": scenario,
        "feature": feature,
        "metric": metric,
        "unit": unit,
        "column": column,
        "cell": _WORDS[state],
        "runs": "",
        "state": state,
    }


def _with_cells(matrix: pd.DataFrame, added: Sequence[Mapping[str, str]]) -> pd.DataFrame:
    if not added:
        return matrix
    return pd.concat([matrix, pd.DataFrame(added, columns=matrix.columns)], ignore_index=True)


NOT_POSSIBLE_CELL = "not possible here"
"""What a cell says where the configuration's cluster could not run the feature's scenario."""

_WORDS = {"instrumented": INSTRUMENTED_CELL, "not possible": NOT_POSSIBLE_CELL}


def _not_possible_cells(matrix: pd.DataFrame, skipped: pd.DataFrame | None) -> pd.DataFrame:
    if skipped is None or skipped.empty or matrix.empty:
        return matrix
    added = []
    for scenario, cni in dict.fromkeys(zip(skipped["scenario"], skipped["cni"], strict=True)):
        mine = matrix[matrix["scenario"] == scenario]
        for (label, metric, unit), group in mine.groupby(["row", "metric", "unit"], sort=False):
            if (group["column"] == cni).any():
                continue  # measured there after all (another condition, another session)
            feature = str(group["feature"].iloc[0])
            added.append(_word_cell(label, scenario, feature, metric, unit, cni, "not possible"))
    return _with_cells(matrix, added)


def not_possible_notes(matrix: pd.DataFrame, skipped: pd.DataFrame | None) -> list[str]:
    """Why the :data:`NOT_POSSIBLE_CELL` cells of ``matrix`` are empty, one line per
    scenario and configuration: ``"egress on flannel: kube/flannel lacks egress-gateway"``."""
    if skipped is None or skipped.empty or matrix.empty:
        return []
    shown = matrix[matrix["cell"] == NOT_POSSIBLE_CELL]
    pairs = set(zip(shown["scenario"], shown["column"], strict=True))
    notes = []
    for scenario, cni, reason in zip(
        skipped["scenario"], skipped["cni"], skipped["reason"], strict=True
    ):
        if (scenario, cni) in pairs:
            notes.append(f"{scenario} on {cni}: {reason}")
    return list(dict.fromkeys(notes))


def cni_matrix(verdict: pd.DataFrame, *, runs: pd.DataFrame | None = None) -> pd.DataFrame:
    """Each configuration against the reference of its group, per condition and metric
    (one row per cell, :data:`MATRIX_COLUMNS`; the row names the scenario and condition;
    ``runs`` as for :func:`feature_matrix`)."""
    return _frame(verdict, ("cni",), by="cni", lossy=lossy_conditions(runs))


def matrix_legend(matrix: pd.DataFrame, margin: float | None = None) -> str:
    """What the cells of ``matrix`` say: the marks every matrix uses, then only the words and
    marks that appear in it (the instrument, cross-session cells, lossy runs)."""
    return "; ".join(_legend_parts(matrix, margin))


def _legend_parts(matrix: pd.DataFrame, margin: float | None) -> list[str]:
    runs = common_runs(matrix)
    cells = matrix["cell"].astype(str)
    same = f", {SAME} same within ±{100 * (margin or 0.05):g} %"
    n = f"n = {runs[1:]} runs per side in every cell" if runs else "nN: runs per side"
    parts = [
        "cell: treatment vs control (× ratio, or +/- difference in the row's unit), with the"
        f" CI that carries its call (95 % or more: Holm within each question); {n};"
        f" {DETECTABLE} a cost{same}, ?N undecided (N runs per side decide ±5 %); blank: not"
        " measured on that configuration"
    ]
    if cells.str.contains(f" {GAIN}", regex=False).any():
        parts.append(f"{GAIN} a gain: the metric got detectably better")
    if (cells == INSTRUMENTED_CELL).any():
        parts.append(
            f"{INSTRUMENTED_CELL}: run with napi=threaded ({INSTRUMENT_WORDS}), which slows"
            " throughput and latency: they are stated on the configuration without it"
        )
    marks = {str(cell).removesuffix(f" {LOSSY}").rsplit(" ", 1)[-1] for cell in cells}
    if any(mark.startswith(NO_COUNT) for mark in marks):
        parts.append(
            f"{NO_COUNT}D undecided, and no margin is set in the row's unit: this design"
            " detects about ±D (no count of runs decides it)"
        )
    if UNKNOWN in marks:
        parts.append(
            f"{UNKNOWN} alone: undecided, and these runs give no estimate of what would decide it"
        )
    if cells.str.contains(f" {DRIFT_CELL}", regex=False).any():
        parts.append(
            f"{DRIFT_CELL}: run one after the other with drift too strong for an interval (no"
            " claim; interleave or run more)"
        )
    if cells.str.contains(ACROSS_SESSIONS_CELL, regex=False).any():
        parts.append(
            f"{ACROSS_SESSIONS_CELL}: the sides come from different sessions, one on a side,"
            " so no claim"
        )
    if (cells == NOT_POSSIBLE_CELL).any():
        parts.append(
            f"{NOT_POSSIBLE_CELL}: that configuration's cluster cannot run the feature (why:"
            " below the matrix)"
        )
    if (matrix["state"] == "time").any():
        parts.append(
            "P50/P90 rows (s): how long after the API acknowledged a change the data path"
            " showed it, over the runs of that configuration (not a contrast), with the"
            " distribution-free 95 % interval of that percentile (≥: open above, too few runs"
            " to bound it)"
        )
    if has_saturated(matrix):
        parts.append(
            f"{SATURATED} a run on a side left less than {100 * SATURATION_IDLE_BOUND:g} % of"
            " the host's CPU idle (saturated: no claim, estimate only)"
        )
    if has_lossy(matrix):
        parts.append(
            f"{LOSSY} a run retransmitted more than {100 * RETRANSMIT_RATE_BOUND:g} % of its"
            " TCP segments (loss limited its throughput)"
        )
    return parts


def has_saturated(matrix: pd.DataFrame) -> bool:
    """Whether a cell of ``matrix`` carries :data:`SATURATED` (its legend then explains it)."""
    return bool((matrix["state"] == "saturated").any())


def has_lossy(matrix: pd.DataFrame) -> bool:
    """Whether a cell of ``matrix`` carries :data:`LOSSY` (its legend then explains it)."""
    return bool(matrix["cell"].astype(str).str.endswith(LOSSY).any())


def common_runs(matrix: pd.DataFrame) -> str:
    """``"n5"`` when every cell of ``matrix`` has that many runs per side, else ``""``."""
    runs = {str(r) for r in matrix["runs"] if r}
    return runs.pop() if len(runs) == 1 else ""


def _metric_rank(metric: str, scenario: str) -> int:
    from cnibench.scenarios import SCENARIOS

    declared = tuple(SCENARIOS[scenario].primary_metrics) if scenario in SCENARIOS else ()
    order = [*declared, "shares", "cpu@egress-gw", NODE_SUM, AGENT_METRICS[0]]
    return order.index(metric) if metric in order else len(order)


def matrix_rows(matrix: pd.DataFrame, *, short: bool = False) -> tuple[list[str], list[list[str]]]:
    """Header and rows of a matrix as a table for HTML/Markdown: one row per feature and
    metric (a feature's metrics together, in the scenario's order), one column per
    configuration (labels shortened to what differs). A row names its metric and unit
    (``throughput (bits/s)``), or with ``short`` its short name alone (:data:`SHORT_METRICS`;
    :func:`metric_key` then says what each is)."""
    if matrix.empty:
        return [], []
    columns = list(dict.fromkeys(matrix["column"]))
    short_columns = shorten_cni_labels(columns) if not any(" vs " in c for c in columns) else {}
    common = common_runs(matrix) != ""
    header = ["feature", "metric", *(short_columns.get(c, c) for c in columns)]
    appearance = {r: i for i, r in enumerate(dict.fromkeys(matrix["row"]))}
    rank_of_row = {
        str(label): _FEATURE_RANK.get((str(scenario), str(feature)), len(_FEATURE_RANK))
        for label, scenario, feature in zip(
            matrix["row"], matrix["scenario"], matrix["feature"], strict=True
        )
    }
    row_order = {r: (rank_of_row[str(r)], i) for r, i in appearance.items()}
    keyed = []
    for (label, metric, unit, scenario), group in matrix.groupby(
        ["row", "metric", "unit", "scenario"], sort=False
    ):
        cells = {
            c: cell if common or not runs else f"{cell} {runs}"
            for c, cell, runs in zip(group["column"], group["cell"], group["runs"], strict=True)
        }
        if short:
            shown = SHORT_METRICS.get(str(metric), str(metric))
        else:
            shown = metric_words(str(metric))
            shown += f" ({unit})" if unit and metric != "shares" else ""
        rank = (row_order[label], _metric_rank(str(metric), str(scenario)))
        keyed.append((rank, [str(label), shown, *(cells.get(c, "") for c in columns)]))
    return header, [row for _, row in sorted(keyed, key=lambda item: item[0])]


def metric_key(matrix: pd.DataFrame) -> str:
    """What each row of the terminal matrix measures, in the order the rows name them:
    ``"metrics: new conn/s = new_connections_per_second (1/s); cpu@agent (cores): the CNI's
    own pods' CPU, summed"``."""
    _, rows = matrix_rows(matrix, short=True)
    units = dict(zip(matrix["metric"].astype(str), matrix["unit"].astype(str), strict=True))
    full_name = {name: metric for metric, name in SHORT_METRICS.items()}
    order = dict.fromkeys(full_name.get(row[1], row[1]) for row in rows)
    parts = []
    for metric in order:
        name = SHORT_METRICS.get(metric, metric)
        text = metric if name == metric else f"{name} = {metric}"
        unit = units.get(metric, "")
        if unit and metric != "shares":
            text += f" ({unit})"
        if metric in CPU_MEANINGS:
            text += f": {CPU_MEANINGS[metric]}"
        elif metric in EFFECT_MEANINGS:
            text += f": {EFFECT_MEANINGS[metric]}"
        parts.append(text)
    return "metrics: " + "; ".join(parts) if parts else ""


def cpu_scope(runs: pd.DataFrame | None) -> str:
    """Whose cores a per-node CPU figure counts, where the results say so: on kind every node
    is a container on this one host (``""`` for other providers or without runs)."""
    if runs is None or runs.empty or "provider" not in runs.columns:
        return ""
    if "kind" not in set(runs["provider"].astype(str)):
        return ""
    return (
        "CPU on kind is in cores of the one host that every kind node shares: a node's figure"
        " is its share of that host, not a machine of its own"
    )


_LABEL_LEAST = 14
"""Narrowest metric column of the terminal matrix (indent included)."""

_CELL_COMFORT = 23
"""Width a configuration's column asks for in the terminal matrix before its cells wrap."""


def _wrap_name(name: str, width: int, indent: str) -> list[str]:
    """A metric name in lines of ``width``, broken after an ``_`` where it must be."""
    if len(indent) + len(name) <= width:
        return [indent + name]
    lines = wrap_words(name.replace("_", "_ "), width, indent=indent, hang=indent + " ")
    return [line.replace("_ ", "_") for line in lines]


def _header_pieces(label: str) -> list[str]:
    """A configuration label in the pieces its header may break into: after ``:`` or ``,``
    and before `` vs`` (``cilium:``, ``gateway=traefik,``, ``mode=kube-proxy``, `` vs
    flannel``)."""
    return label.replace(":", ":\n").replace(",", ",\n").replace(" vs ", "\n vs ").split("\n")


def _header_lines(label: str, width: int) -> list[str]:
    """A configuration label in lines of at most ``width``, joined again from its pieces
    (:func:`_header_pieces`) without a character added or lost; a piece wider than ``width``
    on a line of its own."""
    lines: list[str] = []
    for piece in _header_pieces(label):
        if lines and len(lines[-1]) + len(piece) <= width:
            lines[-1] += piece
        else:
            # A break before "vs" takes the space it replaced back when the pieces join again.
            lines.append(piece.lstrip())
    return lines


def matrix_text(
    matrix: pd.DataFrame,
    *,
    title: str,
    width: int = WIDTH,
    margin: float | None = None,
    notes: Sequence[str] = (),
    cpu_scope: str = "",
) -> list[str]:
    """A matrix laid out in ``width`` columns: a title, the legend and the key of the metrics'
    short names (:func:`metric_key`; then ``cpu_scope``, :func:`cpu_scope`, where a row is a
    CPU figure), then per feature a line with its
    name and one line per metric; configurations that do not fit beside each other go into
    further blocks. Nothing is cut: a name or cell that does not fit its column goes on in
    the next line of it, broken at a space (never inside a number), and a column is at
    least as wide as its longest word."""
    if matrix.empty:
        return [f"{title}: nothing to show"]
    header, rows = matrix_rows(matrix, short=True)
    configs = header[2:]
    lines = [f"{title}:"]
    # One paragraph per thing the legend explains, so each can be found at a glance.
    shows_cpu = matrix["metric"].astype(str).str.startswith("cpu@").any()
    scope = cpu_scope if shows_cpu else ""
    for part in [*_legend_parts(matrix, margin), metric_key(matrix), scope]:
        if part:
            lines += wrap_words(part, width, indent="  ", hang="    ")
    names = [row[1] for row in rows]
    label_width = max(_LABEL_LEAST, min(2 + max(len(n) for n in names) + GAP, width // 3))
    columns = [
        [*_header_pieces(config), *(row[2 + i] for row in rows)] for i, config in enumerate(configs)
    ]
    start = 0
    for widths in fit_columns(columns, width - label_width, comfortable=_CELL_COMFORT):
        block = range(start, start + len(widths))
        start += len(widths)
        heads = [_header_lines(configs[i], w - GAP) for i, w in zip(block, widths, strict=True)]
        lines += lay_out_row([], label_width, heads, widths)
        feature = ""
        for row in rows:
            cells = [row[2 + i] for i in block]
            if not any(cells):
                continue
            if row[0] != feature:
                feature = row[0]
                lines += wrap_words(feature, width, hang="    ")
            name = _wrap_name(row[1], label_width - GAP, "  ")
            wrapped = [wrap_words(c, w - GAP) for c, w in zip(cells, widths, strict=True)]
            lines += lay_out_row(name, label_width, wrapped, widths)
    for note in notes:  # :func:`not_possible_notes`: whole, as people grep them
        lines.append(f"  {NOT_POSSIBLE_CELL}: {note}")
    return lines
