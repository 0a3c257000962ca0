"""Numbers a document states about a results set, each re-derived from the records.

A document that reports a study (docs/findings.md) marks every number of its prose as
``<!-- fact KEY -->TEXT<!-- /fact -->``. :func:`fact` computes ``TEXT`` from ``KEY`` and the
results directory's records, so a test can recompute every marked number: edit one digit and
it no longer matches. :func:`marked_facts` finds the marks of a text.

A key is a kind of number followed by words that select it:

``contrast CNI TREATMENT METRIC [control=CONDITION] [vs=CNI] [kind=KIND]``
    The verdict's estimate with its 95 % interval, from :func:`cnibench.report.verdict`:
    ``×0.71 (0.61-0.82)`` for a ratio, ``+0.28 cores (0.20-0.31)`` for a difference,
    ``×1.30 (no interval)`` where the design gives none. ``vs`` selects a CNI contrast's
    control configuration, ``kind`` one of ``feature``, ``cni``, ``option``.
``median CNI CONDITION METRIC [unit=UNIT]``
    The median over the verified runs, in ``UNIT`` (``Gbit/s``, ``us``, ``ms``, ``s``,
    ``cores``, ``%``, ``conn/s``, ``req/s``, ``MB``), three significant digits:
    ``24.7 Gbit/s``. Derived metrics (``cpu@nodes``, ``cores_per_gbps``) count.
``holm CNI TREATMENT METRIC [control=...] [vs=...] [kind=...]``
    Whether that verdict line is a detectable difference after Holm's correction:
    ``detectable after Holm`` or ``not detectable after Holm (adjusted p = 0.84)``.
``call CNI TREATMENT METRIC [control=...] [vs=...] [kind=...]``
    The direction of that verdict line's call, so that a sentence's claim is checked as its
    numbers are: ``higher`` or ``lower`` (the treatment against its control, a difference
    after the correction), ``the same within ±5 %`` (or the line's margin: ``±0.05 cores``),
    ``undecided``, ``no claim (saturated)``.
``effect CNI METRIC SIZE [p=PERCENTILE]``
    A timed change's percentile (``p``, default 50) in seconds with its distribution-free 95 %
    interval and n, from :func:`cnibench.report.effects.time_to_effect`: ``0.105 s
    (0.082-0.131, n = 10)``, open above where the runs are too few (``0.31 s (≥ 0.12, n =
    10)``). ``METRIC`` is one of :data:`cnibench.report.effects.EFFECTS`
    (``new_service_time``, ...), ``SIZE`` the rules or Services the change met (``-`` where
    the change has none).
``reached CNI CONDITION METRIC``
    A yes/no metric's yes count over its runs: ``5/5``.
``runs CNI CONDITION``
    The number of verified successful runs: ``5``.
``total WHAT``
    How many ``runs`` (verified successful), ``conditions`` (configuration x condition),
    ``configurations``, ``sessions`` the set holds, the ``fewest`` runs of a condition, the
    contrasts ``tested`` (with a p-value), or those of them ``decided`` (a difference after the
    correction, or the same within the margin).
``when``
    The records' span: ``2026-11-27 15:47-17:20 UTC`` (across midnight ``2026-12-06 20:26 UTC
    to 2026-12-07 00:25 UTC``).
``machine WHAT``
    The machine the records name: ``cpus``, ``cpu`` (model), ``kernel``, ``memory`` (GiB),
    ``cni-version CNI``.
``minutes``
    The study's wall time (``study.json``), whole minutes.

``CNI`` is the recorded configuration label (``cilium:napi=threaded``), ``CONDITION`` a
condition id; a key that selects nothing, or more than one verdict line, is an error, so a
document cannot quote a number the records do not give.
"""

from __future__ import annotations

import functools
import json
import math
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from cnibench.errors import ConfigError

__all__ = [
    "CLAIM",
    "FACT",
    "SEED",
    "Facts",
    "contrast_text",
    "fact",
    "filled",
    "marked_facts",
    "unmarked_claims",
    "unmarked_numbers",
]

FACT = re.compile(r"<!-- fact (.+?) -->(.*?)<!-- /fact -->", re.S)
"""A marked number of a document: the key, then the text it must read."""

SEED = re.compile(r"<!-- (seed|quoted) -->(.*?)<!-- /\1 -->", re.S)
"""A number a document quotes from a seed study or a publication, not from the records:
marked as such (``<!-- seed -->34.7 Gbit/s<!-- /seed -->``, ``<!-- quoted -->...``)."""

_NOT_PROSE = (
    re.compile(r"```.*?```", re.S),  # code blocks: commands, ids
    re.compile(r"<!-- study-verdict \S+ -->.*?<!-- /study-verdict -->", re.S),  # quoted lines
    FACT,
    SEED,
    re.compile(r"<!--.*?-->", re.S),
    re.compile(r"`[^`]*`"),  # inline code: condition ids, options
    re.compile(r"\]\([^)]*\)"),  # link targets
    re.compile(r"<https?://[^>]*>"),
    re.compile(r"\b[Ss]eeds? \d{3}(?:'s)?"),  # the seeds' names
    re.compile(r"\b95 %"),  # the intervals' level, a choice of the design
)
"""What of a document is not its own prose: everything else holds no digit."""

_UNITS: Mapping[str, tuple[str, float]] = {
    # unit shown: (recorded unit, divisor)
    "Gbit/s": ("bits/s", 1e9),
    "Mbit/s": ("bits/s", 1e6),
    "us": ("us", 1.0),
    "ms": ("ms", 1.0),
    "s": ("s", 1.0),
    "cores": ("cores", 1.0),
    "%": ("ratio", 0.01),
    "conn/s": ("1/s", 1.0),
    "req/s": ("requests/s", 1.0),
    "MB": ("MB", 1.0),
}


_OPTIONS = frozenset({"unit", "control", "vs", "kind", "p"})
"""The option names of a key (``name=value``)."""


def marked_facts(text: str) -> list[tuple[str, str]]:
    """Each ``(key, text)`` marked in ``text``, in order."""
    return [(key.strip(), shown) for key, shown in FACT.findall(text)]


def unmarked_numbers(text: str) -> list[str]:
    """The digits of ``text``'s prose outside every marked number, with their words around:
    empty when each number is a fact (re-derived), a seed's (marked), or part of a command, an
    id, a link or a quoted verdict line."""
    for pattern in _NOT_PROSE:
        text = pattern.sub(" ", text)
    return [
        text[max(0, m.start() - 30) : m.end() + 30].replace("\n", " ")
        for m in re.finditer(r"(?<![\w.])\d+", text)  # not a word's own digits (iperf3)
    ]


CLAIM = re.compile(
    r"\b(costs|wins over|win over|beats|same within|faster than|slower than|ahead of"
    r"|outperforms)\b",
    re.I,
)
"""Words that state a contrast's direction: in a document's own prose, only a ``call`` fact may
say them, so that the records decide each claim (:func:`unmarked_claims`)."""


def unmarked_claims(text: str) -> list[str]:
    """The direction words (:data:`CLAIM`) of ``text``'s own prose outside every marked fact,
    with their words around: empty when each claim is a ``call`` fact (the verdict's call,
    re-derived). Headings (a question, not a claim), paragraphs that report a seed (``**The
    seed**``) and lines that quote a publication (``<!-- quoted -->``) are not its own."""
    kept = []
    for paragraph in re.split(r"\n\s*\n", text):
        if paragraph.lstrip().startswith("**The seed**"):
            continue
        kept.append(
            "\n".join(
                line
                for line in paragraph.splitlines()
                if not line.lstrip().startswith("#") and "<!-- quoted -->" not in line
            )
        )
    prose = "\n\n".join(kept)
    for pattern in _NOT_PROSE:
        prose = pattern.sub(" ", prose)
    return [
        prose[max(0, m.start() - 40) : m.end() + 40].replace("\n", " ")
        for m in CLAIM.finditer(prose)
    ]


def _three(value: float) -> str:
    """Three significant digits, never in exponent notation."""
    if value == 0 or not math.isfinite(value):
        return f"{value:g}"
    digits = max(0, 2 - math.floor(math.log10(abs(value))))
    return f"{value:.{digits}f}"


@dataclass
class Facts:
    """The records of one results directory and their verdict, computed once."""

    runs: pd.DataFrame
    table: pd.DataFrame
    environments: pd.DataFrame | None = None
    wall_seconds: float | None = None

    @classmethod
    def of(cls, directory: Path, *, reference: str | None = None) -> Facts:
        """The facts of a results directory (every session, as a study pools them)."""
        from cnibench.report import verdict
        from cnibench.report.data import run_values
        from cnibench.report.derived import with_derived_metrics
        from cnibench.results import load_environments, load_results

        df = load_results(directory, sessions="all")
        ok = run_values(df[(df["status"] == "ok") & df["verified"]])
        account = directory / "study.json"
        wall = json.loads(account.read_text()).get("wall_seconds") if account.exists() else None
        environments = load_environments(directory)
        return cls(
            with_derived_metrics(ok),
            verdict(df, reference=reference, environments=environments),
            environments,
            float(wall) if wall is not None else None,
        )

    def get(self, key: str) -> str:
        """The text ``key`` stands for (module docstring).

        Raises
        ------
        cnibench.errors.ConfigError
            An unknown kind, or a key that selects nothing or too much (one line).
        """
        words = key.split()
        if not words:
            raise ConfigError("an empty fact key")
        kind = words[0]
        # A CNI label may hold "=" itself (cilium:napi=threaded): options are known names.
        chosen = [w for w in words[1:] if w.split("=", 1)[0] in _OPTIONS and "=" in w]
        args = [w for w in words[1:] if w not in chosen]
        options = dict(w.split("=", 1) for w in chosen)
        handlers = {
            "contrast": self._contrast,
            "holm": self._holm,
            "call": self._call,
            "median": self._median,
            "effect": self._effect,
            "reached": self._reached,
            "runs": self._runs,
            "total": self._total,
            "when": self._when,
            "machine": self._machine,
            "minutes": self._minutes,
        }
        if kind not in handlers:
            raise ConfigError(f"fact {key!r}: unknown kind {kind!r}")
        return handlers[kind](key, args, options)

    def _select(self, key: str, cni: str, condition: str, metric: str | None) -> pd.DataFrame:
        rows = self.runs[(self.runs["cni"] == cni) & (self.runs["condition"] == condition)]
        if metric is not None:
            rows = rows[rows["metric"] == metric]
        if rows.empty:
            raise ConfigError(f"fact {key!r}: no verified run records it")
        if rows["scenario"].nunique() > 1:
            raise ConfigError(f"fact {key!r}: the condition is in several scenarios")
        return rows

    def _median(self, key: str, args: list[str], options: dict[str, str]) -> str:
        if len(args) != 3:
            raise ConfigError(f"fact {key!r}: median CNI CONDITION METRIC [unit=UNIT]")
        rows = self._select(key, args[0], args[1], args[2])
        unit = options.get("unit", "")
        value = float(np.median(rows["value"].to_numpy(dtype=np.float64)))
        if not unit:
            return _three(value)
        recorded, divisor = _UNITS.get(unit, ("", 0.0))
        if not divisor or str(rows["unit"].iloc[0]) != recorded:
            raise ConfigError(f"fact {key!r}: recorded in {rows['unit'].iloc[0]!r}, not {unit}")
        return f"{_three(value / divisor)} {unit}"

    @functools.cached_property
    def effects(self) -> pd.DataFrame:
        """The timed changes' percentiles (:func:`cnibench.report.effects.time_to_effect`)."""
        from cnibench.report.effects import time_to_effect

        return time_to_effect(self.runs)

    def _effect(self, key: str, args: list[str], options: dict[str, str]) -> str:
        from cnibench.report.effects import EFFECTS, effect_parts

        if len(args) != 3 or args[1] not in EFFECTS:
            raise ConfigError(f"fact {key!r}: effect CNI {'|'.join(EFFECTS)} SIZE [p=PERCENTILE]")
        cni, metric, size = args
        effect = EFFECTS[metric]
        change = effect.label({} if size == "-" else {effect.size: size})
        table = self.effects
        percentile = int(options.get("p", "50"))
        rows = table[
            (table["cni"] == cni)
            & (table["metric"] == metric)
            & (table["change"] == change)
            & (table["percentile"] == percentile)
        ]
        if len(rows) != 1:
            raise ConfigError(f"fact {key!r}: selects {len(rows)} timed changes, not 1")
        row = rows.iloc[0]
        estimate, interval = effect_parts(row.to_dict())
        return f"{estimate} s ({interval + ', ' if interval else ''}n = {int(row['n'])})"

    def _reached(self, key: str, args: list[str], options: dict[str, str]) -> str:
        if len(args) != 3:
            raise ConfigError(f"fact {key!r}: reached CNI CONDITION METRIC")
        values = self._select(key, args[0], args[1], args[2])["value"].to_numpy(dtype=np.float64)
        if not np.isin(values, (0.0, 1.0)).all():
            raise ConfigError(f"fact {key!r}: not a yes/no metric")
        return f"{int(values.sum())}/{values.size}"

    def _runs(self, key: str, args: list[str], options: dict[str, str]) -> str:
        if len(args) != 2:
            raise ConfigError(f"fact {key!r}: runs CNI CONDITION")
        return str(self._select(key, args[0], args[1], None)["run_id"].nunique())

    def _total(self, key: str, args: list[str], options: dict[str, str]) -> str:
        runs = self.runs.drop_duplicates("run_id")
        per_condition = runs.groupby(["cni", "scenario", "condition"]).size()
        tested = np.isfinite(self.table["p_value"].to_numpy(dtype=np.float64))
        decided = (
            self.table["significant"].astype(bool) | self.table["equivalent"].astype(bool)
        ).to_numpy()
        counts = {
            "runs": len(runs),
            "conditions": len(per_condition),
            "configurations": runs["cni"].nunique(),
            "sessions": runs["session_id"].nunique(),
            "fewest": int(per_condition.min()) if len(per_condition) else 0,
            "tested": int(tested.sum()),
            "decided": int((tested & decided).sum()),
        }
        if len(args) != 1 or args[0] not in counts:
            raise ConfigError(f"fact {key!r}: total {'|'.join(counts)}")
        return str(counts[args[0]])

    def _when(self, key: str, args: list[str], options: dict[str, str]) -> str:
        times = pd.to_datetime(self.runs["time"], utc=True)
        first, last = times.min(), times.max()
        if first.date() != last.date():  # across midnight: both dates
            return f"{first:%Y-%m-%d %H:%M} UTC to {last:%Y-%m-%d %H:%M} UTC"
        return f"{first:%Y-%m-%d %H:%M}-{last:%H:%M} UTC"

    def _machine(self, key: str, args: list[str], options: dict[str, str]) -> str:
        env = self.environments
        if env is None or env.empty or not args:
            raise ConfigError(f"fact {key!r}: no environment recorded, or no field named")
        if args[0] == "cni-version" and len(args) == 2:
            name = args[1].partition(":")[0]
            values = set(env.loc[env["cni"].astype(str) == name, "cni_version"].astype(str))
        else:
            column = {"cpus": "cpu_count", "cpu": "cpu_model", "kernel": "kernel"}.get(args[0])
            if args[0] == "memory":
                values = {f"{int(v) / 2**30:.0f} GiB" for v in env["memory_bytes"]}
            elif column is None:
                raise ConfigError(f"fact {key!r}: machine cpus|cpu|kernel|memory|cni-version CNI")
            else:
                values = set(env[column].astype(str))
        if len(values) != 1:
            raise ConfigError(f"fact {key!r}: the records name {len(values)} values")
        return values.pop()

    def _minutes(self, key: str, args: list[str], options: dict[str, str]) -> str:
        if self.wall_seconds is None:
            raise ConfigError(f"fact {key!r}: no study.json beside the records")
        return str(round(self.wall_seconds / 60.0))

    def _contrast(self, key: str, args: list[str], options: dict[str, str]) -> str:
        return contrast_text(self._line(key, args, options))

    def _holm(self, key: str, args: list[str], options: dict[str, str]) -> str:
        row = self._line(key, args, options)
        adjusted = float(row["p_adjusted"])
        if not math.isfinite(adjusted):
            return "not tested"
        if bool(row["significant"]):
            return "detectable after Holm"
        return f"not detectable after Holm (adjusted p = {adjusted:.2g})"

    def _call(self, key: str, args: list[str], options: dict[str, str]) -> str:
        from cnibench.report.verdict import Call, call_of

        row = self._line(key, args, options)
        call = call_of(row.to_dict())
        if call is Call.SATURATED:
            return "no claim (saturated)"
        if call is Call.SAME:
            margin = float(row["margin"])
            if row["scale"] == "ratio":
                return f"the same within ±{100 * margin:g} %"
            return f"the same within ±{margin:g} {row['unit']}".rstrip()
        return str(call.value)

    def _line(self, key: str, args: list[str], options: dict[str, str]) -> pd.Series:
        if len(args) != 3:
            raise ConfigError(
                f"fact {key!r}: contrast CNI TREATMENT METRIC [control=C] [vs=CNI] [kind=K]"
            )
        cni, treatment, metric = args
        table = self.table
        mask = (
            (table["cni"] == cni) & (table["treatment"] == treatment) & (table["metric"] == metric)
        )
        for column, option in (("control", "control"), ("control_cni", "vs"), ("kind", "kind")):
            if option in options:
                mask &= table[column].astype(str) == options[option]
        rows = table[mask]
        if len(rows) != 1:
            raise ConfigError(f"fact {key!r}: selects {len(rows)} verdict lines, not 1")
        return rows.iloc[0]


def contrast_text(row: pd.Series) -> str:
    """A verdict row's estimate and interval as a document quotes it."""
    from cnibench.report.verdict import Scale, interval_text

    low, high = float(row["ci_low"]), float(row["ci_high"])
    if row["scale"] == Scale.RATIO.value:
        estimate = f"×{float(row['ratio']):.2f}"
        null = 1.0
    else:
        value = float(row["estimate"])
        estimate = f"{'+' if value >= 0 else '-'}{_three(abs(value))} {row['unit']}".rstrip()
        null = 0.0
    if not (math.isfinite(low) and math.isfinite(high)):
        return f"{estimate} (no interval)"
    return f"{estimate} ({interval_text(low, high, null=null)})"


def filled(text: str, get: Callable[[str], str]) -> str:
    """``text`` with every marked number rewritten to what ``get(key)`` gives: how a document
    is brought up to date with a new results set (``python -m cnibench.report.facts``)."""
    return FACT.sub(
        lambda m: f"<!-- fact {m.group(1)} -->{get(m.group(1).strip())}<!-- /fact -->", text
    )


def fact(directory: Path, key: str) -> str:
    """The text ``key`` stands for in the results of ``directory`` (module docstring)."""
    return Facts.of(directory).get(key)


def main(argv: list[str] | None = None) -> int:
    """``python -m cnibench.report.facts DOCUMENT RESULTS_DIR``: rewrite the document's marked
    numbers from the records (a key ``@NAME KEY`` reads ``RESULTS_DIR/../NAME``)."""
    import sys

    from cnibench.results import atomic_write_bytes

    args = sys.argv[1:] if argv is None else argv
    if len(args) != 2:
        print("usage: python -m cnibench.report.facts DOCUMENT RESULTS_DIR", file=sys.stderr)
        return 2
    document, directory = Path(args[0]), Path(args[1])
    loaded: dict[Path, Facts] = {}

    def get(key: str) -> str:
        where = directory
        if key.startswith("@"):
            name, _, key = key[1:].partition(" ")
            where = directory.parent / name
        if where not in loaded:
            loaded[where] = Facts.of(where)
        return loaded[where].get(key)

    try:
        text = filled(document.read_text(), get)
        atomic_write_bytes(document, text.encode())
    except ConfigError as exc:
        print(f"cnibench facts: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
