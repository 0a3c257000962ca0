"""``cnibench export`` and :mod:`cnibench.report.exports`: each format read back, the
OpenSearch bulk file's shape and field names, and bad input refused in one line before any
file is written."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from cnibench import report
from cnibench.errors import ConfigError
from cnibench.records import RunRecord, RunStatus
from cnibench.report.exports import (
    DEFAULT_INDEX,
    EXPORT_FORMATS,
    check_destination,
    opensearch_bulk,
    verdict_json,
    write_export,
)
from cnibench.results import ResultsStore, environment_fingerprint, load_environments, load_results

ROOT = Path(__file__).resolve().parents[2]
STUDY = ROOT / "docs" / "results" / "kind-2026-11-27"
SESSION = "20261122T100000Z-abc123"


def _record(run_id: str, condition: str, rep: int, metric: str, value: float, unit: str,
            *, pair: int | None = None, status: RunStatus = RunStatus.OK) -> RunRecord:  # fmt: skip
    return RunRecord(
        session_id=SESSION,
        run_id=run_id,
        time=f"2026-11-22T10:{rep:02d}:00+00:00",
        backend="lab",
        provider="lab",
        cni="vxlan",
        cni_version="1",
        scenario="egress",
        condition=condition,
        parameters={"gateway": condition.removeprefix("gateway-"), "tool": "iperf3"},
        repetition=rep,
        metric=metric,
        value=value,
        unit=unit,
        verified=status == RunStatus.OK,
        status=status,
        reason="" if status == RunStatus.OK else "iperf3 refused",
        pair=pair,
    )


def _write_results(root: Path) -> Path:
    """Egress on vxlan, gateway off and on, 4 runs each with throughput (bits/s) and
    latency_p99 (us); one run also records a single pair's throughput; one run failed."""
    store = ResultsStore(root, session_id=SESSION)
    store.write_environment(
        environment_fingerprint(backend="lab", provider="lab", cni="vxlan", cni_version="1")
    )
    for condition, level in (("gateway-off", 10e9), ("gateway-on", 7e9)):
        for rep in range(4):
            run_id = f"egress-vxlan-{condition}-r{rep}"
            records = [
                _record(run_id, condition, rep, "throughput", level * (1 + 0.01 * rep), "bits/s"),
                _record(run_id, condition, rep, "latency_p99", 50.0 + rep, "us"),
            ]
            if rep == 0:
                records.append(
                    _record(run_id, condition, rep, "throughput", level / 2, "bits/s", pair=0)
                )
            store.write_run(run_id, records)
    failed = "egress-vxlan-gateway-on-r9"
    store.write_run(
        failed,
        [_record(failed, "gateway-on", 9, "throughput", float("nan"), "bits/s",
                 status=RunStatus.FAILED)],
    )  # fmt: skip
    return root


@pytest.fixture(scope="module")
def results_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _write_results(tmp_path_factory.mktemp("exports") / "results")


@pytest.fixture(scope="module")
def frames(results_dir: Path) -> tuple[pd.DataFrame, pd.DataFrame]:
    runs = load_results(results_dir, sessions="all")
    return runs, report.verdict(runs)


def test_csv_is_read_back_as_the_runs_and_the_contrasts(results_dir, frames, tmp_path) -> None:
    runs, table = frames
    paths = write_export(results_dir, tmp_path / "out.csv", export_format="csv")
    assert paths.contrasts == tmp_path / "out-contrasts.csv"
    back = pd.read_csv(paths.runs, parse_dates=["time"])
    assert list(back.columns) == list(runs.columns)
    assert len(back) == len(runs)
    assert back["value"].tolist() == pytest.approx(runs["value"].tolist(), nan_ok=True)
    assert (back["time"] == runs["time"]).all()
    contrasts = pd.read_csv(paths.contrasts)
    assert list(contrasts.columns) == list(table.columns)
    assert contrasts["contrast"].tolist() == table["contrast"].tolist()
    assert contrasts["ci_low"].tolist() == pytest.approx(table["ci_low"].tolist(), nan_ok=True)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out-contrasts.csv", "out.csv"]


def test_parquet_keeps_every_column_and_dtype(results_dir, frames, tmp_path) -> None:
    runs, table = frames
    paths = write_export(results_dir, tmp_path / "out.parquet", export_format="parquet")
    back = pd.read_parquet(paths.runs)
    assert list(back.columns) == list(runs.columns)
    assert back["time"].dtype == runs["time"].dtype
    assert back["pair"].dtype == runs["pair"].dtype
    assert back["value"].tolist() == pytest.approx(runs["value"].tolist(), nan_ok=True)
    assert paths.contrasts is not None
    contrasts = pd.read_parquet(paths.contrasts)
    assert contrasts["verdict"].tolist() == table["verdict"].tolist()
    assert contrasts["significant"].tolist() == table["significant"].tolist()


def test_json_is_one_object_with_runs_and_contrasts(results_dir, frames, tmp_path) -> None:
    runs, table = frames
    paths = write_export(results_dir, tmp_path / "out.json", export_format="json")
    assert paths.contrasts is None
    document = json.loads(paths.runs.read_text())
    assert document["schema"] == "cnibench.export"
    assert len(document["runs"]) == len(runs)
    assert len(document["contrasts"]) == len(table)
    failed = [row for row in document["runs"] if row["status"] == "failed"]
    assert [row["value"] for row in failed] == [None]  # NaN as null
    back = pd.DataFrame.from_records(document["runs"])
    assert list(back.columns) == list(runs.columns)
    assert pd.to_datetime(back["time"]).tolist() == runs["time"].tolist()
    assert list(pd.DataFrame(document["contrasts"]).columns) == list(table.columns)


def test_opensearch_lines_alternate_action_and_document(results_dir, frames, tmp_path) -> None:
    runs, _ = frames
    paths = write_export(
        results_dir, tmp_path / "out.ndjson", export_format="opensearch", index="perf-lab"
    )
    text = paths.runs.read_text()
    assert text.endswith("\n")  # the _bulk API needs the last line ended
    lines = [json.loads(line) for line in text.splitlines()]
    actions, documents = lines[0::2], lines[1::2]
    own_values = runs[runs["pair"].isna()]
    assert len(documents) == len(own_values) == 17  # 8 runs × 2 metrics + the failed one
    assert all(set(action) == {"index"} for action in actions)
    assert {action["index"]["_index"] for action in actions} == {"perf-lab"}
    assert len({action["index"]["_id"] for action in actions}) == len(actions)
    assert all("uuid" in document and "metric" in document for document in documents)


def _documents(results_dir: Path) -> list[dict[str, object]]:
    runs = load_results(results_dir, sessions="all")
    text = opensearch_bulk(runs, load_environments(results_dir)).decode()
    return [json.loads(line) for line in text.splitlines()[1::2]]


def test_opensearch_documents_use_k8s_netperf_names_where_they_mean_the_same(
    results_dir,
) -> None:
    documents = _documents(results_dir)
    throughput = next(
        d for d in documents if d["metric"] == "throughput" and d["run_id"].endswith("off-r0")
    )
    assert throughput["uuid"] == SESSION
    assert throughput["timestamp"] == "2026-11-22T10:00:00+00:00"
    assert throughput["driver"] == "iperf3"
    assert throughput["value"] == 10e9
    assert throughput["throughput"] == pytest.approx(10e3)  # Mb/s
    assert throughput["tputMetric"] == "Mb/s"
    assert throughput["parameters"] == {"gateway": "off", "tool": "iperf3"}
    metadata = throughput["metadata"]
    assert isinstance(metadata, dict)
    assert metadata["kernel"]
    assert metadata["cni"] == "vxlan"
    latency = next(d for d in documents if d["metric"] == "latency_p99")
    assert latency["ltcyMetric"] == "usec"
    assert "throughput" not in latency
    assert "profile" not in latency  # k8s-netperf's profile is a traffic type, not ours


def test_opensearch_export_of_the_committed_study_has_one_document_per_run_and_metric(
    tmp_path,
) -> None:
    runs = load_results(STUDY, sessions="all")
    paths = write_export(STUDY, tmp_path / "study.ndjson", export_format="opensearch")
    lines = paths.runs.read_text().splitlines()
    own_values = runs[runs["pair"].isna()]
    assert len(lines) == 2 * len(own_values)
    assert len(own_values) == len(own_values.drop_duplicates(["session_id", "run_id", "metric"]))
    assert all("index" in json.loads(line) for line in lines[0::2])
    assert {json.loads(line)["uuid"] for line in lines[1::2]} == set(runs["session_id"])


def test_verdict_json_is_a_list_with_nan_as_null(frames) -> None:
    _, table = frames
    contrasts = json.loads(verdict_json(table))
    assert len(contrasts) == len(table)
    for column in ("contrast", "metric", "estimate", "ratio", "ci_low", "ci_high", "call_level",
                   "p_value", "p_adjusted", "significant", "equivalent", "question",
                   "n_treatment", "n_control", "verdict"):  # fmt: skip
        assert all(column in row for row in contrasts), column
    nan_table = table.assign(ci_low=float("nan"))
    assert {row["ci_low"] for row in json.loads(verdict_json(nan_table))} == {None}


BAD_DESTINATIONS = [
    ("xlsx", "out.xlsx", "unknown export format 'xlsx'"),
    ("csv", "out.parquet", "has the suffix of parquet files, not of csv"),
    ("opensearch", "out.json", "has the suffix of json files, not of opensearch"),
    ("csv", "missing/out.csv", "directory {tmp}/missing does not exist"),
    ("json", "a-file/out.json", "directory {tmp}/a-file does not exist"),
    ("json", "a-dir", "cannot write {tmp}/a-dir: it is a directory"),
    ("csv", "x.csv", "cannot write {tmp}/x-contrasts.csv: it is a directory"),
]


@pytest.mark.parametrize(
    ("export_format", "dest", "message"),
    BAD_DESTINATIONS,
    ids=[f"{f}-{d}" for f, d, _ in BAD_DESTINATIONS],
)
def test_a_bad_destination_is_refused_before_anything_is_read(
    tmp_path, export_format, dest, message
) -> None:
    (tmp_path / "a-file").write_text("taken\n")
    (tmp_path / "a-dir").mkdir()
    (tmp_path / "x-contrasts.csv").mkdir()
    with pytest.raises(ConfigError) as raised:
        check_destination(tmp_path / dest, export_format)
    assert message.format(tmp=tmp_path) in str(raised.value)


def test_an_export_that_fails_leaves_no_file_behind(results_dir, tmp_path) -> None:
    with pytest.raises(ConfigError, match="reference CNI 'flannel' is not in the results"):
        write_export(results_dir, tmp_path / "out.csv", export_format="csv", reference="flannel")
    with pytest.raises(ConfigError, match="invalid OpenSearch index 'Perf'"):
        write_export(results_dir, tmp_path / "out.ndjson", export_format="opensearch", index="Perf")
    assert list(tmp_path.iterdir()) == []


def test_an_existing_file_is_replaced_whole_and_no_temporary_file_stays(
    results_dir, tmp_path
) -> None:
    dest = tmp_path / "out.json"
    dest.write_text("old export\n")
    write_export(results_dir, dest, export_format="json")
    assert json.loads(dest.read_text())["version"] == 1
    assert [p.name for p in tmp_path.iterdir()] == ["out.json"]


def test_the_command_lists_the_formats_and_index_the_module_has() -> None:
    from cnibench.cli.export import _FORMATS
    from cnibench.cli.parser import _build_parser

    assert _FORMATS == EXPORT_FORMATS
    args = _build_parser().parse_args(["export", "r", "--format", "csv", "-o", "x.csv"])
    assert args.index == DEFAULT_INDEX


def _cli(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "cnibench.cli", *argv],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_cnibench_export_writes_both_files_and_names_them(results_dir, tmp_path) -> None:
    done = _cli("export", str(results_dir), "--format", "csv", "-o", str(tmp_path / "r.csv"))
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        f"wrote {tmp_path / 'r.csv'}",
        f"wrote {tmp_path / 'r-contrasts.csv'}",
    ]


CLI_BAD_INPUT = [
    (["--format", "xlsx", "-o", "{tmp}/out.xlsx"], "argument --format: invalid choice: 'xlsx'"),
    (["--format", "csv", "-o", "{tmp}/a-file/out.csv"], "directory {tmp}/a-file does not exist"),
    (["--format", "csv", "-o", "{tmp}"], "cannot write {tmp}: it is a directory"),
    (["--format", "opensearch", "-o", "{tmp}/o.ndjson", "--index", "A B"], "invalid OpenSearch"),
]


@pytest.mark.parametrize(
    ("argv", "message"), CLI_BAD_INPUT, ids=["unknown-format", "parent-is-a-file",
                                             "output-is-a-directory", "bad-index"]
)  # fmt: skip
def test_cnibench_export_bad_input_is_one_line_and_exit_2(
    results_dir, tmp_path, argv, message
) -> None:
    (tmp_path / "a-file").write_text("taken\n")
    done = _cli("export", str(results_dir), *(a.format(tmp=tmp_path) for a in argv))
    assert done.returncode == 2, done.stderr
    (line,) = done.stderr.splitlines()
    assert line.startswith("cnibench: error: ")
    assert message.format(tmp=tmp_path) in line
    assert "Traceback" not in done.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a-file"]


def test_cnibench_export_of_a_missing_results_dir_is_exit_2(tmp_path) -> None:
    done = _cli(
        "export", str(tmp_path / "nowhere"), "--format", "json", "-o", str(tmp_path / "o.json")
    )
    assert done.returncode == 2
    assert (
        done.stderr == f"cnibench: error: results directory {tmp_path / 'nowhere'} does not exist\n"
    )
    assert list(tmp_path.iterdir()) == []


def test_parquet_without_pyarrow_is_one_line_naming_it(monkeypatch, tmp_path) -> None:
    """pyarrow is installed here (a dependency of cnibench), so its absence is simulated."""
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "pyarrow" else real(name, *a)
    )
    with pytest.raises(ConfigError, match=r"^the parquet format needs pyarrow: pip install"):
        check_destination(tmp_path / "out.parquet", "parquet")
