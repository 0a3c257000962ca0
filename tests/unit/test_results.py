"""Results store: atomic files, load_results/load_environments, export, redaction, fingerprint."""

from __future__ import annotations

import json
import math
import os
import re
import subprocess
import sys
import warnings
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from cnibench.errors import ConfigError, ResultsError
from cnibench.records import Environment, RunRecord, RunStatus
from cnibench.results import (
    CorruptResultsWarning,
    MixedSessionsWarning,
    ResultsStore,
    environment_fingerprint,
    export_results,
    load_environments,
    load_results,
    redact,
    run_file_name,
    session_ids,
    sweep_temp_files,
)

# The column contract of load_results, written out (not imported) so a change must be deliberate.
FIXED_COLUMNS = [
    "session_id",
    "run_id",
    "time",
    "backend",
    "provider",
    "cni",
    "cni_version",
    "scenario",
    "condition",
    "repetition",
    "pair",
    "metric",
    "value",
    "unit",
    "verified",
    "status",
    "reason",
    "environment_id",
    "options",
    "parameters",
    "looks",
]


def _record(
    store: ResultsStore,
    run_id: str,
    metric: str = "throughput",
    value: float = 5.2e9,
    *,
    parameters: dict[str, Any] | None = None,
    time: str = "2026-11-22T10:35:00+00:00",
    repetition: int = 0,
    status: RunStatus = RunStatus.OK,
    reason: str = "",
    environment_id: str = "env123456789",
) -> RunRecord:
    return RunRecord(
        session_id=store.session_id,
        run_id=run_id,
        time=time,
        backend="lab",
        provider="lab",
        cni="vxlan",
        cni_version="6.18",
        scenario="egress",
        condition="gateway-on",
        parameters={"gateway": True} if parameters is None else parameters,
        repetition=repetition,
        metric=metric,
        value=value,
        unit="bits/s",
        verified=True,
        status=status,
        reason=reason,
        environment_id=environment_id,
        options={"encryption": "none"},
    )


@pytest.fixture
def store(tmp_path: Path) -> ResultsStore:
    store = ResultsStore(tmp_path / "results", session_id="20261122T103500Z-abcdef")
    store.create()
    return store


def _dead_pid() -> int:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


# ---------------------------------------------------------------- writing


def test_default_session_id_is_utc_time_and_six_hex(tmp_path: Path) -> None:
    store = ResultsStore(tmp_path)
    assert re.fullmatch(r"\d{8}T\d{6}Z-[0-9a-f]{6}", store.session_id)
    assert not (tmp_path / store.session_id).exists()  # nothing until the first write
    store.write_json("summary", {})
    assert (tmp_path / store.session_id).is_dir()


@pytest.mark.parametrize(
    "session_id", ["../escape", ".hidden", "a/b", ""], ids=["parent", "hidden", "slash", "empty"]
)
def test_unsafe_session_id_is_rejected(tmp_path: Path, session_id: str) -> None:
    with pytest.raises(ConfigError, match="session id"):
        ResultsStore(tmp_path, session_id=session_id or "\n")


def test_run_file_is_strict_json_with_schema(store: ResultsStore) -> None:
    path = store.write_run("r0", [_record(store, "r0", value=math.nan)])
    document = json.loads(path.read_text(), parse_constant=lambda token: pytest.fail(token))
    assert document["schema_version"] == 1
    assert document["records"][0]["value"] is None


def test_raw_outputs_are_written_beside_the_run(store: ResultsStore) -> None:
    store.write_run(
        "r0", [_record(store, "r0")], raw={"iperf3.json": "{}", "dump.bin": b"\x00\xff"}
    )
    raw_dir = store.session_dir / "raw" / "r0"
    assert (raw_dir / "iperf3.json").read_text() == "{}"
    assert (raw_dir / "dump.bin").read_bytes() == b"\x00\xff"


def test_no_temporary_file_remains_after_writes(store: ResultsStore) -> None:
    store.write_run("r0", [_record(store, "r0")], raw={"out.txt": "x"})
    store.write_json("summary", {"a": 1})
    hidden = [p for p in store.session_dir.rglob(".*") if p.is_file()]
    assert hidden == []


def test_record_of_another_run_is_rejected(store: ResultsStore) -> None:
    with pytest.raises(ConfigError, match="'r1'"):
        store.write_run("r0", [_record(store, "r1")])


def test_run_without_records_is_rejected(store: ResultsStore) -> None:
    with pytest.raises(ConfigError, match="no records"):
        store.write_run("r0", [])


def test_raw_name_with_path_is_rejected(store: ResultsStore) -> None:
    with pytest.raises(ConfigError, match="raw output name"):
        store.write_run("r0", [_record(store, "r0")], raw={"../evil": "x"})


def test_write_json_adds_suffix_and_stores_nan_as_null(store: ResultsStore) -> None:
    path = store.write_json("probe-matrix", {"share": math.nan, "rows": [1, 2]})
    assert path.name == "probe-matrix.json"
    assert json.loads(path.read_text()) == {"share": None, "rows": [1, 2]}


def test_write_json_refuses_environment_name(store: ResultsStore) -> None:
    with pytest.raises(ConfigError, match="reserved"):
        store.write_json("environment.json", {})


def test_results_dir_that_is_a_file_is_refused_up_front(tmp_path: Path) -> None:
    (tmp_path / "results").write_text("not a directory")
    with pytest.raises(ConfigError, match="is a file, not a directory"):
        ResultsStore(tmp_path / "results")


def test_results_dir_that_becomes_a_file_raises_results_error(tmp_path: Path) -> None:
    store = ResultsStore(tmp_path / "results")
    (tmp_path / "results").write_text("not a directory")
    with pytest.raises(ResultsError, match="cannot create results directory"):
        store.write_json("summary", {})


def test_write_into_unwritable_session_dir_raises_results_error(store: ResultsStore) -> None:
    store.session_dir.rmdir()
    store.session_dir.write_text("not a directory")
    with pytest.raises(ResultsError, match="cannot"):
        store.write_json("summary", {})


# ---------------------------------------------------------------- loading


def test_round_trip_keeps_values_nan_and_failure(store: ResultsStore) -> None:
    store.write_run(
        "r0",
        [
            _record(store, "r0", "throughput", 5.2e9),
            _record(
                store, "r0", "rtt", math.nan, status=RunStatus.FAILED, reason="iperf3 exited 1"
            ),
        ],
    )
    df = load_results(store.results_dir)
    assert df["metric"].tolist() == ["throughput", "rtt"]
    assert df["value"].iloc[0] == 5.2e9
    assert math.isnan(df["value"].iloc[1])
    assert df["status"].tolist() == ["ok", "failed"]
    assert df["reason"].tolist() == ["", "iperf3 exited 1"]


def test_columns_are_in_documented_order(store: ResultsStore) -> None:
    store.write_run("r0", [_record(store, "r0", parameters={"users": 10, "gateway": True})])
    columns = list(load_results(store.results_dir).columns)
    assert columns == [*FIXED_COLUMNS, "param_gateway", "param_users"]


def test_column_types(store: ResultsStore) -> None:
    store.write_run("r0", [_record(store, "r0")])
    df = load_results(store.results_dir)
    assert str(df["time"].dtype) == "datetime64[ns, UTC]"
    assert df["repetition"].dtype == "int64"
    assert df["value"].dtype == "float64"
    assert df["verified"].dtype == "bool"
    assert df["looks"].dtype == "int64"
    assert (df["looks"] == 1).all()


def test_time_is_utc(store: ResultsStore) -> None:
    store.write_run("r0", [_record(store, "r0", time="2026-11-22T12:35:00+02:00")])
    store.write_run("r1", [_record(store, "r1", time="2026-11-22T10:40:00")])
    times = load_results(store.results_dir)["time"].tolist()
    assert times == [
        pd.Timestamp("2026-11-22T10:35:00Z"),
        pd.Timestamp("2026-11-22T10:40:00Z"),
    ]


def test_options_and_parameters_are_sorted_json_text(store: ResultsStore) -> None:
    store.write_run("r0", [_record(store, "r0", parameters={"users": 10, "gateway": True})])
    row = load_results(store.results_dir).iloc[0]
    assert row["parameters"] == '{"gateway": true, "users": 10}'
    assert row["options"] == '{"encryption": "none"}'


def test_parameters_expand_into_columns_missing_where_absent(store: ResultsStore) -> None:
    store.write_run("r0", [_record(store, "r0", parameters={"users": 10})])
    store.write_run(
        "r1", [_record(store, "r1", parameters={"weights": "60/40"}, time="2026-11-22T10:36:00Z")]
    )
    df = load_results(store.results_dir)
    assert df["param_users"].tolist()[0] == 10
    assert pd.isna(df["param_users"].iloc[1])
    assert pd.isna(df["param_weights"].iloc[0])
    assert df["param_weights"].iloc[1] == "60/40"


@pytest.mark.parametrize(
    ("values", "dtype"),
    [
        ([10, 20], "Int64"),
        ([10, 2.5], "float64"),
        ([True, False], "boolean"),
    ],
    ids=["int", "int-and-float", "bool"],
)
def test_parameter_column_dtype(store: ResultsStore, values: list[Any], dtype: str) -> None:
    for index, value in enumerate(values):
        store.write_run(f"r{index}", [_record(store, f"r{index}", parameters={"p": value})])
    assert str(load_results(store.results_dir)["param_p"].dtype) == dtype


def test_mixed_parameter_kinds_become_text(store: ResultsStore) -> None:
    store.write_run("r0", [_record(store, "r0", parameters={"rules": 100})])
    store.write_run("r1", [_record(store, "r1", parameters={"rules": "all"})])
    assert load_results(store.results_dir)["param_rules"].tolist() == ["100", "all"]


def test_rows_sorted_by_time_then_record_order(store: ResultsStore) -> None:
    store.write_run("b", [_record(store, "b", "m1", time="2026-11-22T10:00:00Z")])
    store.write_run(
        "a",
        [
            _record(store, "a", "m3", time="2026-11-22T11:00:00Z"),
            _record(store, "a", "m2", time="2026-11-22T11:00:00Z"),
        ],
    )
    assert load_results(store.results_dir)["metric"].tolist() == ["m1", "m3", "m2"]


OLD, NEW = "20261122T100000Z-000001", "20261122T110000Z-000002"


def _two_sessions(root: Path) -> None:
    """An older session of WireGuard on at 0.46 Gbit/s, a newer one at 10 Gbit/s."""
    for session_id, value in ((NEW, 10e9), (OLD, 0.46e9)):
        store = ResultsStore(root, session_id=session_id)
        store.write_run("r0", [_record(store, "r0", value=value)])


def test_results_dir_with_several_sessions_warns_naming_each(tmp_path: Path) -> None:
    _two_sessions(tmp_path)
    with pytest.warns(MixedSessionsWarning) as caught:
        df = load_results(tmp_path)
    assert df["session_id"].tolist() == [OLD, NEW]
    (warning,) = caught
    assert f"{OLD} (1 runs: egress on vxlan)" in str(warning.message)
    assert NEW in str(warning.message)
    assert warning.filename == __file__  # points at the caller's line


def test_caller_picks_sessions(tmp_path: Path) -> None:
    _two_sessions(tmp_path)
    assert session_ids(tmp_path) == [OLD, NEW]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert load_results(tmp_path, sessions=[NEW])["value"].tolist() == [10e9]
        assert load_results(tmp_path, sessions=OLD)["value"].tolist() == [0.46e9]
        pooled = load_results(tmp_path, sessions="all")
        both = load_results(tmp_path, sessions=[OLD, NEW])
    assert pooled["session_id"].tolist() == both["session_id"].tolist() == [OLD, NEW]


@pytest.mark.parametrize("sessions", [["20261122T120000Z-000003"], []], ids=["unknown", "empty"])
def test_picking_no_known_session_is_a_config_error(tmp_path: Path, sessions: list[str]) -> None:
    _two_sessions(tmp_path)
    with pytest.raises(ConfigError, match="session") as caught:
        load_results(tmp_path, sessions=sessions)
    if sessions:
        assert f"choose from {OLD}, {NEW}" in str(caught.value)


def test_one_session_does_not_warn(store: ResultsStore) -> None:
    store.write_run("r0", [_record(store, "r0")])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert len(load_results(store.results_dir)) == 1


def test_session_dir_and_single_run_file_can_be_loaded(store: ResultsStore) -> None:
    store.write_run("r0", [_record(store, "r0", "a")])
    store.write_run("r1", [_record(store, "r1", "b")])
    assert load_results(store.session_dir)["metric"].tolist() == ["a", "b"]
    assert load_results(store.run_path("r1"))["metric"].tolist() == ["b"]


def test_empty_directory_gives_empty_frame_with_columns(tmp_path: Path) -> None:
    df = load_results(tmp_path)
    assert df.empty
    assert list(df.columns) == FIXED_COLUMNS
    assert str(df["time"].dtype) == "datetime64[ns, UTC]"


def test_missing_path_raises_results_error(tmp_path: Path) -> None:
    with pytest.raises(ResultsError, match=r"nope.*does not exist"):
        load_results(tmp_path / "nope")


def test_environment_id_taken_from_session_when_record_has_none(store: ResultsStore) -> None:
    environment = environment_fingerprint(backend="lab")
    store.write_environment(environment)
    store.write_run("r0", [_record(store, "r0", environment_id="")])
    assert load_results(store.results_dir)["environment_id"].tolist() == [
        environment.environment_id
    ]


@pytest.mark.parametrize(
    "content",
    [
        b'{"schema": "cnibench.run", "schema_version": 1, "records": [{"session',
        b"",
        b"\xff\xfe garbage",
        b'{"schema": "something-else", "schema_version": 1, "records": []}',
        b'{"schema": "cnibench.run", "schema_version": 1, "records": [{"metric": "x"}]}',
        b'{"schema": "cnibench.run", "schema_version": 1, "records": "none"}',
    ],
    ids=["truncated", "empty", "binary", "other-schema", "incomplete-record", "records-not-list"],
)
def test_corrupted_run_file_raises_naming_the_file(store: ResultsStore, content: bytes) -> None:
    store.write_run("good", [_record(store, "good")])
    bad = store.session_dir / "runs" / "bad.json"
    bad.write_bytes(content)
    with pytest.raises(ResultsError, match=re.escape(str(bad))) as info:
        load_results(store.results_dir)
    assert "\n" not in str(info.value)


def test_newer_schema_asks_for_upgrade(store: ResultsStore) -> None:
    path = store.session_dir / "runs"
    path.mkdir()
    (path / "r9.json").write_text('{"schema": "cnibench.run", "schema_version": 99, "records": []}')
    with pytest.raises(ResultsError, match="upgrade cnibench"):
        load_results(store.results_dir)


def test_on_error_warn_skips_corrupted_file(store: ResultsStore) -> None:
    store.write_run("good", [_record(store, "good")])
    (store.session_dir / "runs" / "bad.json").write_text("{")
    with pytest.warns(CorruptResultsWarning, match=r"bad\.json"):
        df = load_results(store.results_dir, on_error="warn")
    assert df["run_id"].tolist() == ["good"]


def test_unknown_on_error_is_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="'ignore'"):
        load_results(tmp_path, on_error="ignore")  # type: ignore[arg-type]


def test_temporary_files_are_ignored_and_swept(store: ResultsStore) -> None:
    store.write_run("r0", [_record(store, "r0")])
    runs = store.session_dir / "runs"
    stale = runs / f".r1.json.tmp-{_dead_pid()}-0a1b2c3d"
    stale.write_text('{"schema": "cnibench.run", "schema_version": 1, "records": [{"sess')
    assert load_results(store.results_dir)["run_id"].tolist() == ["r0"]
    assert store.sweep_temp() == [stale]
    assert not stale.exists()


def test_sweep_keeps_temporary_file_of_live_writer(store: ResultsStore) -> None:
    live = store.session_dir / f".r1.json.tmp-{os.getpid()}-0a1b2c3d"
    live.write_text("{")
    assert sweep_temp_files(store.results_dir) == []
    assert live.exists()


# ---------------------------------------------------------------- export


def test_csv_export_round_trip(store: ResultsStore, tmp_path: Path) -> None:
    store.write_run(
        "r0",
        [
            _record(store, "r0", "throughput", 5.2e9, parameters={"users": 10}),
            _record(store, "r0", "rtt", math.nan, parameters={"users": 10}),
        ],
    )
    df = load_results(store.results_dir)
    dest = export_results(df, tmp_path / "out" / "results.csv")
    back = pd.read_csv(dest, parse_dates=["time"], keep_default_na=False, na_values=[""])
    assert list(back.columns) == list(df.columns)
    assert back["time"].tolist() == df["time"].tolist()
    assert back["value"].iloc[0] == 5.2e9
    assert math.isnan(back["value"].iloc[1])
    assert back["param_users"].tolist() == [10, 10]
    assert back["parameters"].tolist() == df["parameters"].tolist()


def test_parquet_export_round_trip_keeps_dtypes(store: ResultsStore, tmp_path: Path) -> None:
    store.write_run("r0", [_record(store, "r0", parameters={"users": 10, "gateway": True})])
    store.write_run(
        "r1", [_record(store, "r1", math.nan, parameters={"rules": "all"}, status=RunStatus.FAILED)]
    )
    df = load_results(store.results_dir)
    back = pd.read_parquet(export_results(df, tmp_path / "results.parquet"))
    pd.testing.assert_frame_equal(back, df)


def test_export_from_path(store: ResultsStore, tmp_path: Path) -> None:
    store.write_run("r0", [_record(store, "r0")])
    dest = export_results(store.results_dir, tmp_path / "r.parquet")
    assert pd.read_parquet(dest)["run_id"].tolist() == ["r0"]


def test_export_unknown_suffix_is_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"results\.xlsx"):
        export_results(pd.DataFrame(), tmp_path / "results.xlsx")


# ---------------------------------------------------------------- redaction


@pytest.mark.parametrize(
    "key",
    [
        "token",
        "apiToken",
        "password",
        "db_password",
        "client_secret",
        "secretKey",
        "key",
        "privateKey",
        "client_key",
        "client-key-data",
        "client_certificate",
        "clientCertificate",
        "credentials",
        "kubeconfig",
        "ARM_CLIENT_SECRET",
        "ARM_SUBSCRIPTION_ID",
        "azure_tenant_id",
        "storage_sas",
    ],
)
def test_secret_keys_are_redacted(key: str) -> None:
    assert redact({key: "value-123"}) == {key: "<redacted>"}


@pytest.mark.parametrize(
    "key",
    ["routingMode", "kubeProxyReplacement", "tunnelProtocol", "mtu", "egressGateway", "monkey"],
)
def test_ordinary_keys_are_kept(key: str) -> None:
    assert redact({key: "value-123"}) == {key: "value-123"}


def test_nested_mappings_and_lists_are_redacted() -> None:
    values = {
        "encryption": {"enabled": True, "wireguard": {"privateKey": "x"}},
        "l": [{"token": 1}],
    }
    assert redact(values) == {
        "encryption": {"enabled": True, "wireguard": {"privateKey": "<redacted>"}},
        "l": [{"token": "<redacted>"}],
    }


@pytest.mark.parametrize(
    "value",
    [
        "apiVersion: v1\nkind: Config\nclusters: []\ncontexts: []\nusers: []\n",
        "-----BEGIN RSA PRIVATE KEY-----\nMIIE\n-----END RSA PRIVATE KEY-----",
    ],
    ids=["kubeconfig", "pem-private-key"],
)
def test_secret_looking_values_are_redacted_under_any_key(value: str) -> None:
    assert redact({"extra": value, "in_list": [value]}) == {
        "extra": "<redacted>",
        "in_list": ["<redacted>"],
    }


def test_redact_does_not_modify_its_input() -> None:
    values = {"token": "t", "nested": {"password": "p"}}
    redact(values)
    assert values == {"token": "t", "nested": {"password": "p"}}


# ---------------------------------------------------------------- environment


def test_fingerprint_reads_this_host() -> None:
    environment = environment_fingerprint(backend="lab", cni="vxlan")
    assert environment.kernel == os.uname().release
    assert environment.cpu_count == os.sysconf("SC_NPROCESSORS_CONF")
    assert environment.memory_bytes == os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    assert environment.cpu_model
    assert (environment.backend, environment.cni) == ("lab", "vxlan")


def test_fingerprint_never_contains_environment_variables(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("ARM_CLIENT_SECRET", "s3cr3t-from-env-4711")
    monkeypatch.setenv("KUBECONFIG", "/tmp/s3cr3t-from-env-4711")
    environment = environment_fingerprint(cni_values={"ipam": {"mode": "kubernetes"}})
    assert "s3cr3t-from-env-4711" not in json.dumps(environment.to_json_dict())


def test_fingerprint_redacts_cni_values() -> None:
    environment = environment_fingerprint(cni_values={"hubble": {"tls": {"secret": "abc"}}})
    assert environment.cni_values == {"hubble": {"tls": {"secret": "<redacted>"}}}


def test_write_environment_redacts_even_hand_built_fingerprints(store: ResultsStore) -> None:
    environment = Environment(
        kernel="6.18",
        cpu_model="cpu",
        cpu_count=2,
        memory_bytes=1,
        python="3.11",
        cnibench_version="0.1.0",
        cni_values={"auth": {"password": "hunter2"}},
    )
    path = store.write_environment(environment)
    document = json.loads(path.read_text())
    assert "hunter2" not in path.read_text()
    assert document["environment_id"] == environment.environment_id


def test_load_environments_one_row_per_session(tmp_path: Path) -> None:
    for session_id, cni in (("s1", "routed"), ("s2", "vxlan")):
        ResultsStore(tmp_path, session_id=session_id).write_environment(
            environment_fingerprint(backend="lab", cni=cni, tool_versions={"iperf3": "3.12"})
        )
    df = load_environments(tmp_path)
    assert df["session_id"].tolist() == ["s1", "s2"]
    assert df["cni"].tolist() == ["routed", "vxlan"]
    assert json.loads(df["tool_versions"].iloc[0]) == {"iperf3": "3.12"}
    assert df["cpu_count"].dtype == "int64"


def test_load_environments_of_empty_dir_has_columns(tmp_path: Path) -> None:
    df = load_environments(tmp_path)
    assert df.empty
    assert list(df.columns)[:3] == ["session_id", "environment_id", "kernel"]


def test_corrupted_environment_raises_naming_file(store: ResultsStore) -> None:
    path = store.write_environment(environment_fingerprint(backend="lab"))
    path.write_text('{"schema": "cnibench.environment"')
    with pytest.raises(ResultsError, match=re.escape(str(path))):
        load_environments(store.results_dir)


def test_every_cluster_of_a_session_has_its_row(store: ResultsStore) -> None:
    # One session on two datapaths: the report must not describe only the last cluster.
    routed = environment_fingerprint(backend="lab", cni="routed", cni_values={"mtu": 1500})
    vxlan = environment_fingerprint(backend="lab", cni="vxlan", cni_values={"mtu": 1450})
    for environment in (vxlan, routed, vxlan):  # an equal fingerprint again adds no row
        store.write_environment(environment)
    df = load_environments(store.results_dir)
    assert df["session_id"].tolist() == [store.session_id] * 2
    by_id = df.set_index("environment_id")
    assert by_id.loc[routed.environment_id, "cni"] == "routed"
    assert json.loads(by_id.loc[vxlan.environment_id, "cni_values"]) == {"mtu": 1450}


def test_environment_json_of_earlier_versions_is_still_read(store: ResultsStore) -> None:
    environment = environment_fingerprint(backend="lab", cni="vxlan")
    document = {
        "schema": "cnibench.environment",
        "schema_version": 1,
        "session_id": store.session_id,
        **environment.to_json_dict(),
    }
    (store.create() / "environment.json").write_text(json.dumps(document))
    store.write_run("r0", [_record(store, "r0", environment_id="")])
    assert load_environments(store.results_dir)["cni"].tolist() == ["vxlan"]
    # A record without an id takes the session's one fingerprint.
    assert load_results(store.results_dir)["environment_id"].tolist() == [
        environment.environment_id
    ]


def test_record_without_id_in_a_session_of_several_clusters_names_none(
    store: ResultsStore,
) -> None:
    # Which of two clusters an id-less record ran on is unknown: no guess.
    store.write_environment(environment_fingerprint(backend="lab", cni="routed"))
    store.write_environment(environment_fingerprint(backend="lab", cni="vxlan"))
    store.write_run("r0", [_record(store, "r0", environment_id="")])
    assert load_results(store.results_dir)["environment_id"].tolist() == [""]


def test_older_lab_fingerprints_name_the_datapath_as_now(store: ResultsStore) -> None:
    # Sessions recorded before the lab's "profile" was renamed still read as "datapath"; a
    # Kubernetes CNI's own value called "profile" is left alone.
    store.write_environment(
        environment_fingerprint(backend="lab", cni="vxlan", cni_values={"profile": "vxlan"})
    )
    store.write_environment(
        environment_fingerprint(backend="kube", cni="cilium", cni_values={"profile": "x"})
    )
    values = {
        row.backend: json.loads(row.cni_values)
        for row in load_environments(store.results_dir).itertuples()
    }
    assert values == {"lab": {"datapath": "vxlan"}, "kube": {"profile": "x"}}


def test_two_sessions_repeating_run_ids_are_told_apart_and_one_session_keeps_its_ids(
    tmp_path: Path,
) -> None:
    """Two sessions of one configuration name their runs alike (runs/<run_id>.json): pooled,
    each id carries its session, so a groupby on run_id never mixes the two sessions' runs."""
    root = tmp_path / "results"
    for session, value in (("20261127T100000Z-aaaaaa", 1.0), ("20261127T110000Z-bbbbbb", 2.0)):
        store = ResultsStore(root, session_id=session)
        store.create()
        store.write_run(
            "egress-vxlan-on-r0a0", [_record(store, "egress-vxlan-on-r0a0", value=value)]
        )
    pooled = load_results(root, sessions="all")
    assert sorted(pooled["run_id"]) == [
        "20261127T100000Z-aaaaaa/egress-vxlan-on-r0a0",
        "20261127T110000Z-bbbbbb/egress-vxlan-on-r0a0",
    ]
    assert pooled.groupby("run_id")["value"].sum().tolist() == [1.0, 2.0]
    assert {run_file_name(r) for r in pooled["run_id"]} == {"egress-vxlan-on-r0a0"}
    one = load_results(root, sessions=["20261127T100000Z-aaaaaa"])
    assert one["run_id"].tolist() == ["egress-vxlan-on-r0a0"]
