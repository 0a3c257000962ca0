"""The report document: one self-contained HTML file, a Markdown summary and PNG files.

:func:`write_report` loads a results directory, draws every figure that the data support
(:mod:`cnibench.report.figures`), builds the per-run tables (:mod:`cnibench.report.tables`),
opens with the verdict (the scenarios' planned contrasts, :mod:`cnibench.report.verdict`), and
writes the outputs atomically. The document is a list of blocks (heading, paragraph, table,
figure, ...) rendered by two jinja2 templates shipped in the package (``templates/report.html``,
autoescaped, and ``templates/report.md``). The HTML embeds its figures as base64 PNG and its
style inline: it needs no network and no other file. Every text it shows passes through
:mod:`cnibench.report.scrub`.
"""

from __future__ import annotations

import base64
import io
import json
import os
import re
import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import partial
from pathlib import Path
from typing import Literal

import pandas as pd
from matplotlib.figure import Figure

from cnibench import stats
from cnibench.errors import CnibenchError, ConfigError, ResultsError
from cnibench.report import figures, tables
from cnibench.report import matrix as answer
from cnibench.report.data import (
    HOST_IDLE_METRIC,
    LEVEL,
    SATURATION_IDLE_BOUND,
    group_label,
    load_request_times,
    load_skipped,
    load_split_records,
    measured_on,
    ok_runs,
    request_time_summary,
    saturated_runs,
    scenario_title,
    session_dirs,
)
from cnibench.report.effects import EFFECT_CAPTION, effect_table
from cnibench.report.scrub import environment_secrets, scrub_mapping, scrub_text
from cnibench.report.templating import numeric, report_templates
from cnibench.report.verdict import CORRECTION, tested_count, verdict, verdict_lines
from cnibench.results import (
    ALL_SESSIONS,
    REDACTED,
    atomic_write_bytes,
    load_environments,
    load_results,
)

__all__ = ["ReportPaths", "write_report"]

_DPI = 80


@dataclass(frozen=True)
class ReportPaths:
    """What :func:`write_report` wrote.

    Attributes
    ----------
    html:
        The self-contained HTML file, or None.
    markdown:
        The Markdown summary, or None.
    pngs:
        Every PNG written to the PNG directory (empty without one).
    runs:
        The tidy results the report was made from.
    verdict:
        Their verdict (:func:`cnibench.report.verdict`), as the report states it: a front end
        that also prints it need not compute it again.
    """

    html: Path | None
    markdown: Path | None
    pngs: tuple[Path, ...] = field(default=())
    runs: pd.DataFrame | None = field(default=None, compare=False, repr=False)
    verdict: pd.DataFrame | None = field(default=None, compare=False, repr=False)


# --------------------------------------------------------------------------------------------
# Rendering helpers
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Block:
    """One piece of the document, rendered by both templates (``kind`` picks the markup).

    Every text in a block has already passed the scrubber; the HTML template escapes it.
    """

    kind: Literal["heading", "paragraph", "bullets", "nav", "table", "detail", "figure"]
    text: str = ""
    level: int = 0
    anchor: str = ""
    css: str = ""
    items: tuple[str, ...] = ()
    links: tuple[tuple[str, str], ...] = ()
    headers: tuple[str, ...] = ()
    rows: tuple[tuple[str, ...], ...] = ()
    right: tuple[int, ...] = ()
    caption: str = ""
    title: str = ""
    inline: str = ""
    name: str = ""
    png: bytes = field(default=b"", repr=False)

    @property
    def png_base64(self) -> str:
        """The figure's PNG as base64 text, for a ``data:`` URL."""
        return base64.b64encode(self.png).decode("ascii")


def _png(figure: Figure) -> bytes:
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=_DPI, metadata={"Software": None})
    return buffer.getvalue()


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", text).strip("_") or "figure"


class _Document:
    """The report's blocks in order; every text is scrubbed as it comes in."""

    def __init__(self, secrets: tuple[str, ...]) -> None:
        self.secrets = secrets
        self.blocks: list[_Block] = []
        self.names: set[str] = set()

    def text(self, value: object) -> str:
        return scrub_text(str(value), secrets=self.secrets)

    @property
    def figures(self) -> list[_Block]:
        return [block for block in self.blocks if block.kind == "figure"]

    def heading(self, level: int, title: str, anchor: str = "") -> None:
        self.blocks.append(
            _Block("heading", self.text(title), level=level, anchor=_slug(anchor) if anchor else "")
        )

    def paragraph(self, text: str, *, css: str = "") -> None:
        self.blocks.append(_Block("paragraph", self.text(text), css=css))

    def bullets(self, items: Sequence[str]) -> None:
        if items:
            self.blocks.append(_Block("bullets", items=tuple(self.text(i) for i in items)))

    def nav(self, links: Sequence[tuple[str, str]]) -> None:
        self.blocks.append(
            _Block("nav", links=tuple((_slug(anchor), self.text(text)) for anchor, text in links))
        )

    def table(
        self,
        headers: Sequence[str],
        rows: Sequence[Sequence[str]],
        *,
        caption: str = "",
        css: str = "",
    ) -> None:
        cells = tuple(tuple(self.text(c) for c in row) for row in rows)
        # Columns of numbers only are right-aligned (the first column names the row).
        right = tuple(
            index
            for index in range(1, len(headers))
            if cells and all(numeric(row[index]) for row in cells)
        )
        self.blocks.append(
            _Block(
                "table",
                headers=tuple(self.text(h) for h in headers),
                rows=cells,
                right=right,
                caption=self.text(caption),
                css=css,
            )
        )

    def detail(self, title: str, mapping: Mapping[str, object]) -> None:
        """A JSON mapping: indented in the HTML, one inline line in the Markdown."""
        clean = scrub_mapping(dict(mapping), secrets=self.secrets)
        self.blocks.append(
            _Block(
                "detail",
                json.dumps(clean, indent=2, sort_keys=True),
                title=self.text(title),
                inline=self.text(json.dumps(clean, sort_keys=True)),
            )
        )

    def figure(self, name: str, caption: str, draw: Callable[[], Figure]) -> None:
        """Draw one figure; a figure the data cannot support becomes a note, not a failure."""
        try:
            rendered = draw()
        except CnibenchError as exc:
            self.paragraph(f"{caption}: not drawn ({exc})", css="note")
            return
        unique = _slug(name)
        suffix = 2
        while unique in self.names:
            unique = f"{_slug(name)}-{suffix}"
            suffix += 1
        self.names.add(unique)
        self.blocks.append(
            _Block("figure", caption=self.text(caption), name=unique, png=_png(rendered))
        )


# --------------------------------------------------------------------------------------------
# Sections
# --------------------------------------------------------------------------------------------


def _methods(doc: _Document, df: pd.DataFrame) -> None:
    doc.heading(2, "Methods", "methods")
    ok = df[df["status"] == "ok"]
    per_group = ok.drop_duplicates("run_id").groupby(["scenario", "cni", "condition"]).size()
    n_text = (
        f"{int(per_group.min())} to {int(per_group.max())}"
        if not per_group.empty and per_group.min() != per_group.max()
        else f"{int(per_group.max()) if not per_group.empty else 0}"
    )
    doc.bullets(
        [
            f"Successful runs per scenario, CNI and condition (n): {n_text}; the tables list "
            "every run.",
            "Central value: the geometric mean of a condition's runs for a positive quantity "
            "(throughput, latency, CPU, memory), the mean where a run is 0 or negative, and "
            "the share of yes (k/n) for a yes/no outcome; every successful run counts.",
            f"Intervals: {100 * LEVEL:g}% Student-t interval of the mean logarithm, "
            "exponentiated (never negative, and the geometric mean is its centre); Student-t "
            "of the mean for signed quantities; Clopper-Pearson for yes/no outcomes; none "
            "with a single run. Simulated coverage (bench/coverage.py): 95% at n = 3 to 20 "
            "for lognormal runs.",
            "Outliers: a run whose modified z-score (Iglewicz & Hoaglin, median and MAD), on "
            "the scale of the estimate (the logarithms of a positive quantity), exceeds a "
            f"limit for the number of runs ({_outlier_limits()}) is flagged and named in the "
            "figure, never dropped: dropping ordinary runs is what made the earlier intervals "
            "too narrow. The limits flag a run in about 4% of clean samples at any n "
            "(bench/outlier_thresholds.py); needs at least 3 runs.",
            "Failed runs never enter a statistic; they are listed with their reason below.",
            "Verdict: only the contrasts each scenario declares (a feature against its own "
            "control with every other recorded parameter equal; every CNI against the reference "
            "of its group on the same condition, where a group holds the configurations whose "
            "data-path factors (threaded receive, napi; Service proxy; encryption; Gateway) are "
            "all equal; two "
            "configurations of one CNI that differ in one factor as that option's contrast; "
            "each split against its configured weights), on the "
            "scenario's primary metrics. Ratio = treatment / control of the geometric means, "
            f"the centre of its {100 * LEVEL:g}% interval (Welch's t on the logarithms, as "
            "cnibench compare); a difference in the metric's unit (Welch) where a side is 0, "
            "near 0 or negative; a difference of proportions (Newcombe, Fisher's exact test) "
            "for yes/no outcomes; one pooled test per split allowing for overdispersion "
            "between runs; sides run in the same rounds are compared by their within-round "
            "differences (paired). Multiplicity: Holm's step-down correction within each "
            "question (a feature on one configuration over its metrics; one CNI against its "
            "reference in one scenario), which bounds the chance that a question gets any "
            "false cost (family-wise error) whatever the dependence between contrasts sharing "
            "a control. A line calls a cost only when its Holm-adjusted p-value is at most "
            f"{100 * (1 - LEVEL):g}%, 'same within ±5%' (or --margin) when the whole interval "
            "lies inside the margin, else 'undecided' with what this design detects and how "
            "many runs ±5% would need. Each interval is printed at the level that carries its "
            "call (1 - 0.05 p / p_adj): it excludes no change exactly when a cost is called.",
            "Tables: one row per successful run, then the mean (Avg) and the sample standard "
            "deviation (Std Dev, n-1 in the denominator).",
        ]
    )


def _outlier_limits() -> str:
    """The outlier limits at a few numbers of runs, from the rule itself."""
    return ", ".join(f"{stats.outlier_threshold(n):.2g} at {n} runs" for n in (3, 5, 10, 20))


def _environment(doc: _Document, results_path: Path, df: pd.DataFrame) -> None:
    doc.heading(2, "Environment", "environment")
    environments = load_environments(results_path)
    environments = environments[environments["session_id"].isin(set(df["session_id"]))]
    if environments.empty:
        doc.paragraph("No environment fingerprint was recorded.", css="note")
        return
    scalar = [
        "session_id",
        "environment_id",
        "backend",
        "provider",
        "cni",
        "cni_version",
        "kernel",
        "cpu_model",
        "cpu_count",
        "memory_bytes",
        "python",
        "cnibench_version",
    ]
    rows = []
    for column in scalar:
        values = environments[column].tolist()
        if column == "memory_bytes":
            values = [f"{int(v) / 2**30:.1f} GiB" for v in values]
        rows.append([column.replace("_", " ")] + [str(v) for v in values])
    # One column per cluster of each session: a session on routed and vxlan has two.
    doc.table(["field"] + [f"cluster {i + 1}" for i in range(len(environments))], rows)
    for row in environments.itertuples():
        for column in ("nodes", "cni_values", "tool_versions"):
            try:
                mapping = json.loads(str(getattr(row, column)))
            except json.JSONDecodeError:
                mapping = {"unreadable": REDACTED}
            if not isinstance(mapping, dict):
                mapping = {"value": mapping}
            which = f"{row.session_id} {row.cni} ({row.environment_id})"
            doc.detail(f"{which}: {column.replace('_', ' ')}", mapping)


def _verification(doc: _Document, results_path: Path, df: pd.DataFrame) -> None:
    doc.heading(2, "Verification evidence", "verification")
    rows = []
    shown = set(df["session_id"])
    for session_id, directory in session_dirs(results_path).items():
        if session_id not in shown:
            continue
        for file in sorted(directory.glob("verification-*.json")):
            try:
                document = json.loads(file.read_text())
            except (OSError, json.JSONDecodeError) as exc:
                rows.append([session_id, file.stem, "unreadable", str(exc)])
                continue
            if not isinstance(document, dict):
                document = {"detail": document}
            ok = document.get("ok")
            detail = document.get("detail", "")
            extra = {k: v for k, v in document.items() if k not in ("ok", "detail")}
            if extra:
                extra_text = json.dumps(scrub_mapping(extra, secrets=doc.secrets), sort_keys=True)
                detail = f"{detail} {extra_text}"
            verdict = "verified" if ok is True else "NOT verified" if ok is False else "unknown"
            rows.append([session_id, file.stem.removeprefix("verification-"), verdict, str(detail)])
    unverified = df[(df["status"] == "ok") & ~df["verified"]].drop_duplicates("run_id")
    if rows:
        doc.table(["session", "scenario-cni-condition", "result", "evidence"], rows)
    else:
        doc.paragraph("No verification files were recorded.", css="note")
    if not unverified.empty:
        doc.paragraph(
            f"{len(unverified)} successful run(s) are not marked verified: "
            + ", ".join(unverified["run_id"].astype(str)),
            css="bad",
        )


def _failed(doc: _Document, df: pd.DataFrame) -> None:
    doc.heading(2, "Failed runs", "failed")
    failed = df[df["status"] == "failed"].drop_duplicates("run_id")
    if failed.empty:
        doc.paragraph("None: every run succeeded.", css="ok")
        return
    doc.table(
        ["run", "scenario", "CNI", "condition", "reason"],
        [
            [str(r.run_id), str(r.scenario), str(r.cni), str(r.condition), str(r.reason)]
            for r in failed.itertuples()
        ],
    )


def _run_tables(doc: _Document, df: pd.DataFrame, scenario: str) -> None:
    rows = df[df["scenario"] == scenario]
    for (cni, condition), _ in rows.groupby(["cni", "condition"], sort=False):
        try:
            table = tables.table_runs(df, scenario, str(condition), cni=str(cni))
        except CnibenchError as exc:
            doc.paragraph(f"{cni} / {condition}: no table ({exc})", css="note")
            continue
        run_ids = table.attrs["run_ids"]
        body = [
            [f"{label} ({run_ids[i]})" if i < len(run_ids) else str(label)]
            + [tables.format_number(float(v)) for v in values]
            for i, (label, values) in enumerate(
                zip(table.index, table.to_numpy(dtype=float), strict=True)
            )
        ]
        doc.table(
            ["run"] + [str(c) for c in table.columns],
            body,
            caption=f"{scenario}: {group_label(str(cni), str(condition))}",
        )


def _priority_section(doc: _Document, df: pd.DataFrame, scenario: str) -> None:
    outcomes = tables.priority_outcomes(df, scenario=scenario)
    if outcomes.empty:
        return
    doc.heading(3, f"{scenario}: which policy won")
    doc.paragraph(
        "Reference: tiered CNI policies by (tier, priority), first match decides, pass defers;"
        " then Kubernetes NetworkPolicy; then the baseline tier; else allowed (Antrea's"
        " documented order). A CNI that differs from it is a finding, not an error."
    )
    doc.table(
        ["CNI", "case", "policies", "reference", "decided by (reference)", "observed", "runs"],
        [
            [
                str(r.cni),
                str(r.case),
                str(r.policies),
                str(r.reference),
                str(r.reference_winner),
                f"{r.observed} (differs)" if r.finding else str(r.observed),
                str(r.runs_matching),
            ]
            for r in outcomes.itertuples()
        ],
    )


def _scenario(
    doc: _Document,
    df: pd.DataFrame,
    scenario: str,
    times: pd.DataFrame,
    split: pd.DataFrame,
    all_metrics: bool,
    table: pd.DataFrame,
) -> None:
    # What ran, where the backend ran something other than the name says (the lab's WireGuard,
    # as its sessions recorded it): every heading and caption of the section says it.
    shown = scenario_title(df, scenario, verdict=table)
    named = f"{scenario}: {shown}" if shown != scenario else scenario
    doc.heading(2, f"Scenario: {named}", f"scenario-{scenario}")
    ok = ok_runs(df, scenario=scenario)
    if ok.empty:
        doc.paragraph("No successful run.", css="bad")
    _priority_section(doc, df, scenario)
    scenario_times = times[times["scenario"] == scenario] if not times.empty else times
    if not scenario_times.empty:
        doc.heading(3, f"{shown}: request-response times")
        summary = request_time_summary(scenario_times)
        doc.table(
            ["group", "count", "mean µs", "min µs", "max µs", "std µs"],
            [
                [
                    group_label(str(r.cni), str(r.condition)),
                    str(r.count),
                    tables.format_number(float(str(r.mean))),
                    tables.format_number(float(str(r.min))),
                    tables.format_number(float(str(r.max))),
                    tables.format_number(float(str(r.std))),
                ]
                for r in summary.itertuples()
            ],
        )
        doc.figure(
            f"{scenario}-rr-histogram",
            f"{shown}: histogram of request times (log axis)",
            partial(figures.figure_rr_histogram, scenario_times),
        )
        doc.figure(
            f"{scenario}-rr-ecdf",
            f"{shown}: ECDF of request times (log axis)",
            partial(figures.figure_rr_ecdf, scenario_times),
        )
    scenario_split = split[split["run_id"].isin(ok["run_id"])] if not split.empty else split
    if not scenario_split.empty:
        doc.heading(3, f"{shown}: traffic split")
        keys = ["cni", "weights", "load_engine"]
        for (cni, weights, engine), group in scenario_split.groupby(keys, sort=False):
            made_by = f", load by {engine}" if engine else ""
            label = f"{cni}, weights {weights}{made_by}"
            doc.figure(
                f"{scenario}-{cni}-split-shares",
                f"{shown}: share per backend in 5 s windows, {label} (one run per users level)",
                partial(figures.figure_split_shares, _first_run_per_level(group)),
            )
            doc.figure(
                f"{scenario}-{cni}-split-distance",
                f"{shown}: distance to the configured weights, {label}",
                partial(figures.figure_split_distance, group),
            )
    recorded = [str(m) for m in dict.fromkeys(ok["metric"])]
    primary, others = _plotted_metrics(scenario, recorded)
    drawn = primary + others if all_metrics else primary
    for x in ("rules", "clients"):
        column = f"param_{x}"
        if column in ok.columns and ok[column].notna().any() and ok[column].nunique() > 1:
            metrics = [
                m
                for m in ("new_connections_per_second", "throughput", "latency_mean")
                if m in drawn
            ]
            if metrics:
                doc.figure(
                    f"{scenario}-scaling-{x}",
                    f"{shown}: scaling with the number of {x}",
                    partial(
                        figures.figure_policy_scaling, df, x=x, metrics=metrics, scenario=scenario
                    ),
                )
    for metric in drawn:
        kind = "primary metric" if metric in primary else "other metric"
        doc.heading(3, f"{shown}: {metric} ({kind})")
        doc.figure(
            f"{scenario}-{metric}-bars",
            f"{shown}: {metric}, geometric mean (mean where a run is not positive) and"
            f" {100 * LEVEL:g}% CI per CNI and condition",
            partial(figures.figure_bars, df, scenario, str(metric)),
        )
        doc.figure(
            f"{scenario}-{metric}-runs",
            f"{shown}: {metric} per run",
            partial(figures.figure_runs, df, scenario, str(metric)),
        )
    if others and not all_metrics:
        doc.paragraph(
            f"Not drawn, as not primary for {scenario} ({', '.join(others)}): their values are "
            "in the run tables; --all-metrics draws them.",
            css="note",
        )
    doc.heading(3, f"{shown}: runs")
    _run_tables(doc, df, scenario)


def _plotted_metrics(scenario: str, recorded: list[str]) -> tuple[list[str], list[str]]:
    """The recorded metrics split into the scenario's primary ones (in declared order) and the rest.

    A report draws figures of the primary metrics only (``all_metrics=True`` adds the rest):
    per-node receive rates or a tool's secondary outputs mean nothing for most scenarios (the
    egress gateway's receive rate in ``baseline``). A scenario cnibench does not know declares
    nothing, so all its metrics count as primary.
    """
    from cnibench.scenarios import SCENARIOS  # as registered now (a user may add one)

    if scenario not in SCENARIOS:
        return list(recorded), []
    declared = SCENARIOS[scenario].primary_metrics
    primary = [m for m in declared if m in recorded]
    return primary, [m for m in recorded if m not in primary]


def _first_run_per_level(records: pd.DataFrame) -> pd.DataFrame:
    # One run per users level: windows of several runs of one level would overlap in time.
    firsts = records.drop_duplicates("users")["run_id"]
    return records[records["run_id"].isin(firsts)]


def _matrix_section(
    doc: _Document,
    table: pd.DataFrame,
    margin: float | None,
    runs: pd.DataFrame,
    skipped: pd.DataFrame,
    where: str = "",
) -> None:
    """The first screen: each feature's cost per configuration, then each CNI against its
    reference; host-wide figures are never here (they are in the tables). ``where``: when and
    on what machine the runs were measured (:func:`~cnibench.report.data.measured_on`)."""
    doc.heading(2, "What each feature costs", "matrix")
    if where:
        doc.paragraph(where[:1].upper() + where[1:] + ".")
    features = answer.feature_matrix(table, runs=runs, skipped=skipped)
    if features.empty:
        doc.paragraph("No feature was measured with its control in these results.", css="note")
    else:
        header, rows = answer.matrix_rows(features)
        doc.table(
            header,
            rows,
            caption=answer.matrix_legend(features, margin),
            css="matrix",
        )
        doc.bullets(
            [
                f"{answer.NOT_POSSIBLE_CELL}: {note}"
                for note in answer.not_possible_notes(features, skipped)
            ]
        )
    header, rows = effect_table(runs)
    if rows:
        doc.heading(3, "How fast changes take effect", "time-to-effect")
        doc.table(header, rows, caption=EFFECT_CAPTION, css="matrix")
    cnis = answer.cni_matrix(table, runs=runs)
    if not cnis.empty:
        doc.heading(3, "Each CNI against the reference of its group", "cni-matrix")
        header, rows = answer.matrix_rows(cnis)
        doc.table(
            header,
            rows,
            caption="Configurations are compared only where every data-path option (threaded"
            " receive, napi; Service proxy; encryption; on a split the Gateway) is equal; "
            + answer.matrix_legend(cnis, margin),
            css="matrix",
        )


def _saturation_note(table: pd.DataFrame, runs: pd.DataFrame) -> str:
    """``"3 of 4 runs saturated the host ..."`` when a run left less than
    :data:`~cnibench.report.data.SATURATION_IDLE_BOUND` of the host's CPU idle, else ``""``."""
    if runs.empty or not (runs["metric"] == HOST_IDLE_METRIC).any():
        return ""
    flagged = saturated_runs(runs)
    if flagged.empty:
        return ""
    recorded = ok_runs(runs, metric=HOST_IDLE_METRIC)
    total = len(recorded.drop_duplicates(["session_id", "run_id"]))
    aside = int((table["saturated"] > 0).sum()) if "saturated" in table.columns else 0
    return (
        f"{len(flagged)} of {total} runs saturated the host (less than"
        f" {100 * SATURATION_IDLE_BOUND:g} % of its CPU idle over the run): they measured a"
        f" machine with no CPU to spare, not the datapath. The {aside} contrast(s) with such a"
        " run on a side are not decided (no interval, no call); their runs are marked in the"
        " run tables."
    )


def _verdict_section(
    doc: _Document, table: pd.DataFrame, margin: float | None, runs: pd.DataFrame
) -> None:
    doc.heading(2, "Verdict", "verdict")
    saturation = _saturation_note(table, runs)
    if saturation:
        doc.paragraph(saturation, css="note")
    notes = [str(note) for note in table.attrs.get("notes", [])]
    if table.empty:
        doc.paragraph(
            "No planned contrast in these results: no scenario has both a feature and its "
            "control, or two CNIs on the same condition, among its successful verified runs.",
            css="note",
        )
        doc.bullets(notes)
        return
    level = float(table["level"].iloc[0])
    references = table.attrs.get("references", {})
    reference_text = (
        " CNIs are compared only within groups of configurations whose data-path options are"
        " all equal, each with its reference: "
        + "; ".join(f"{ref} for {group}" for group, ref in references.items())
        + "."
        if references
        else ""
    )
    tested = tested_count(table)
    untested = len(table) - tested
    doc.paragraph(
        f"{tested} tested contrast(s), grouped by feature: ratio = treatment / control of the"
        " geometric means (a difference in the metric's unit where a side is 0, near 0 or"
        " negative; a difference of proportions for yes/no), with its"
        f" {100 * level:g}% confidence interval and the number of runs on each side."
        f" {CORRECTION}'s correction within each question"
        + (f" ({untested} more lines state an outcome or have no interval)" if untested else "")
        + "; each interval at the level that carries its call; 'same within ±5 %' where it"
        " lies inside the margin, 'undecided' otherwise, with what would decide it."
        f"{reference_text}"
        " Host-wide CPU and RAM (the whole machine) appear only where no per-node or"
        " per-agent figure exists. How: see Methods."
    )
    doc.bullets(verdict_lines(table))
    if notes:
        doc.paragraph("Not compared:", css="note")
        doc.bullets(notes)
    # One forest per scenario: a single figure of every contrast of a two-CNI session (about
    # 160 rows) was taller than any screen.
    for scenario, contrasts in table.groupby("scenario", sort=False):
        shown = scenario_title(contrasts, str(scenario))  # what ran (the lab's WireGuard)
        doc.figure(
            f"verdict-forest-{scenario}",
            f"Verdict, {shown}: ratio and CI per contrast, at the level that carries its call"
            f" ({100 * level:g}% or more; log axis, line at 1)",
            partial(
                figures.figure_forest,
                contrasts,
                title=f"Verdict, {shown}: ratio with the CI that carries its call"
                f" ({CORRECTION} within each question)",
            ),
        )


def _overview(doc: _Document, df: pd.DataFrame, results_path: Path) -> None:
    runs = df.drop_duplicates("run_id")
    ok = int((runs["status"] == "ok").sum())
    warm = int((runs["status"] == "warmup").sum())  # measured on a new cluster, never counted
    warming = f", {warm} warm-up, not counted" if warm else ""
    doc.paragraph(
        f"Results: {results_path.name}; {runs['session_id'].nunique()} session(s), {len(runs)} "
        f"run(s) ({ok} successful, {len(runs) - ok - warm} failed{warming}); scenarios "
        f"{', '.join(dict.fromkeys(runs['scenario']))}; "
        f"CNIs {', '.join(dict.fromkeys(runs['cni']))}."
    )
    scenarios = list(dict.fromkeys(runs["scenario"]))
    doc.nav(
        [
            ("matrix", "feature × CNI"),
            ("verdict", "verdict"),
            *((f"scenario-{s}", s) for s in scenarios),
            ("methods", "methods"),
            ("environment", "environment"),
            ("verification", "verification"),
            ("failed", "failed runs"),
        ]
    )


def _iter_scenarios(df: pd.DataFrame) -> Iterator[str]:
    yield from (str(s) for s in dict.fromkeys(df["scenario"]))


# --------------------------------------------------------------------------------------------
# Entry point
# --------------------------------------------------------------------------------------------


def _target(path: str | os.PathLike[str] | None) -> Path | None:
    if path is None:
        return None
    target = Path(path)
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ResultsError(f"cannot create directory {target.parent}: {exc.strerror}") from exc
    return target


def write_report(
    results: str | os.PathLike[str],
    *,
    html: str | os.PathLike[str] | None = None,
    markdown: str | os.PathLike[str] | None = None,
    png_dir: str | os.PathLike[str] | None = None,
    title: str = "cnibench report",
    reference: str | None = None,
    all_metrics: bool = False,
    sessions: Sequence[str] | str = ALL_SESSIONS,
    margin: float | None = None,
) -> ReportPaths:
    """Write the report of a results directory: HTML, Markdown and/or PNG files.

    Parameters
    ----------
    results:
        A results directory (holding sessions) or one session directory.
    html:
        Self-contained HTML file to write (figures embedded as base64 PNG, inline CSS, no
        external resource).
    markdown:
        Markdown summary to write; it links the PNGs when ``png_dir`` is given.
    png_dir:
        Directory for one PNG per figure; created if missing.
    title:
        Title of the documents.
    reference:
        CNI the verdict compares every other CNI with (default: the first measured, i.e. the
        first ``--cni``).
    all_metrics:
        Draw figures of every recorded metric, not only of each scenario's primary metrics
        (``Scenario.primary_metrics``, the ones its verdict compares); the run tables always
        list every metric.
    margin:
        Equivalence margin of the verdict as a fraction (``--margin 2%``: 0.02), see
        :func:`cnibench.report.verdict`; ``None`` makes no equivalence claim.
    sessions:
        Which sessions of ``results`` the report covers (as for
        :func:`cnibench.results.load_results`): every one by default (pooled on purpose, each
        described in the Environment section), or session ids (:func:`cnibench.session_ids`).

    Returns
    -------
    ReportPaths
        The files written.

    Raises
    ------
    ConfigError
        If none of ``html``, ``markdown`` and ``png_dir`` is given, or ``reference`` is not a
        CNI of the results, or ``sessions`` names a session that is not there.
    ResultsError
        If ``results`` does not exist, holds no results or cannot be read, or an output cannot
        be written (one-line message naming the path). Outputs are written atomically
        (temporary file + rename), so a failed call leaves earlier reports intact.
    """
    if html is None and markdown is None and png_dir is None:
        raise ConfigError("write_report needs at least one of html=, markdown= or png_dir=")
    results_path = Path(results)
    if not results_path.is_dir():
        raise ResultsError(f"results directory {results_path} does not exist")
    # By default a report covers every session of the directory it is given, each described in
    # its Environment section: pooled on purpose.
    df = load_results(results_path, sessions=sessions)
    if df.empty:
        raise ResultsError(f"no results in {results_path}: no runs/<run_id>.json files found")
    html_path, markdown_path = _target(html), _target(markdown)
    png_path = None if png_dir is None else Path(png_dir)
    secrets = environment_secrets()
    doc = _Document(secrets)
    with warnings.catch_warnings():  # a fingerprint that cannot be read names no machine
        warnings.simplefilter("ignore")
        environments = load_environments(results_path, on_error="warn")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", stats.DegenerateDataWarning)
        table = verdict(df, reference=reference, margin=margin, environments=environments)
    # The answer first (what each feature costs, per configuration), then where it came from.
    skipped = load_skipped(results_path, sessions=set(df["session_id"].astype(str)))
    _matrix_section(doc, table, margin, df, skipped, measured_on(df, environments))
    doc.paragraph(f"Generated {datetime.now(UTC):%Y-%m-%d %H:%M:%S} UTC by cnibench.")
    _overview(doc, df, results_path)
    times = load_request_times(results_path, df=df)
    split = load_split_records(results_path, df=df)
    with warnings.catch_warnings():
        # Degenerate samples (one run, equal values) are shown as such, not warned about.
        warnings.simplefilter("ignore", stats.DegenerateDataWarning)
        _verdict_section(doc, table, margin, df)
        for scenario in _iter_scenarios(df):
            _scenario(doc, df, scenario, times, split, all_metrics, table)
    _methods(doc, df)
    _environment(doc, results_path, df)
    _verification(doc, results_path, df)
    _failed(doc, df)

    pngs: list[Path] = []
    if png_path is not None:
        try:
            png_path.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise ResultsError(f"cannot create directory {png_path}: {exc.strerror}") from exc
        for rendered in doc.figures:
            pngs.append(atomic_write_bytes(png_path / f"{rendered.name}.png", rendered.png))
    templates = report_templates()
    shown_title = doc.text(title)
    if html_path is not None:
        page = templates.get_template("report.html").render(title=shown_title, blocks=doc.blocks)
        atomic_write_bytes(html_path, _final_scrub(page, secrets).encode())
    if markdown_path is not None:
        links = {
            block.name: None
            if png_path is None
            else os.path.relpath(png_path / f"{block.name}.png", markdown_path.parent)
            for block in doc.figures
        }
        text = templates.get_template("report.md").render(
            title=shown_title, blocks=doc.blocks, png_links=links
        )
        # Blocks are separated by blank lines in the template; one is enough.
        text = re.sub(r"\n{3,}", "\n\n", text)
        atomic_write_bytes(markdown_path, _final_scrub(text, secrets).encode())
    return ReportPaths(
        html=html_path, markdown=markdown_path, pngs=tuple(pngs), runs=df, verdict=table
    )


def _final_scrub(document: str, secrets: tuple[str, ...]) -> str:
    """Remove literal secret values from the finished document, images included."""
    for value in secrets:
        document = document.replace(value, REDACTED)
    return document
