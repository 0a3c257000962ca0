"""Every contrast exercises its feature and changes one thing (issue 48, item 3).

A Service proxy is compared only where traffic goes to a Service, and two configurations of
one CNI that differ in a data-path setting besides the option compared are "not compared:
differs in ...", a line without a number that no question's correction counts. The results
are written by the real results store and read back by ``load_results`` and
``load_environments``; which contrasts must exist, and their words, are written out here from
the issue, not derived from the code under test.
"""

from __future__ import annotations

import json
import math
import zlib
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from cnibench import report
from cnibench.backends.base import ClusterSpec
from cnibench.records import Environment, RunRecord
from cnibench.report.verdict import tested_count as _tested_count
from cnibench.results import ResultsStore, environment_fingerprint, load_environments, load_results

ROOT = Path(__file__).resolve().parents[2]
STUDY = ROOT / "docs" / "results" / "kind-2026-11-27"

POD = "cross-node-idle-sockperf"
POD_PARAMETERS = {"placement": "cross-node", "load": "idle", "tool": "sockperf"}

# Chart values as Cilium's two modes had them in the committed kind study (its fingerprints:
# sessions 2791dd and aa9e1e), cut to what the data path depends on.
KPR_AS_STUDIED = {
    "kubeProxyReplacement": True,
    "bpf": {"masquerade": True},
    "egressGateway": {"enabled": True},
}
KUBE_PROXY_MODE = {
    "kubeProxyReplacement": False,
    "bpf": {"masquerade": False},
    "egressGateway": {"enabled": False},
}
KPR_ALONE = {**KUBE_PROXY_MODE, "kubeProxyReplacement": True}


def _service(proxy: str) -> tuple[str, dict[str, object]]:
    return (
        f"{POD}-service-{proxy}-0svc",
        {**POD_PARAMETERS, "target": "service", "proxy": proxy, "services": 0},
    )


def _session(
    root: Path,
    session: str,
    cni: str,
    *,
    hour: int,
    conditions: Sequence[tuple[str, Mapping[str, object]]],
    latency_us: float,
    cni_values: Mapping[str, object] | None = None,
    datapath_settings: Mapping[str, str] | None = None,
) -> None:
    """One session of one configuration: 5 rounds of each condition, sockperf's latency and
    the agent's memory per run (a few per cent of noise, seeded by the session's name),
    written as ``cnibench run`` writes them."""
    spec = ClusterSpec.from_label(cni)
    name, options = spec.cni, dict(spec.options)
    store = ResultsStore(root, session_id=session)
    environment: Environment = environment_fingerprint(
        backend="kube",
        provider="kind",
        cni=name,
        cni_values=cni_values,
        datapath_settings=datapath_settings,
    )
    store.write_environment(environment)
    noise = np.random.default_rng(zlib.crc32(session.encode())).normal(0.0, 0.03, size=(5, 2, 2))
    for repetition in range(5):
        for index, (condition, parameters) in enumerate(conditions):
            run_id = f"{condition}-r{repetition}"
            minute = repetition * len(conditions) + index
            shift = noise[repetition, min(index, 1)]
            values = {
                "latency_avg": (latency_us * (1.0 + shift[0]), "us"),
                "ram@agent": (800.0 * (1.0 + shift[1]), "MB"),
            }
            store.write_run(
                run_id,
                [
                    RunRecord(
                        session_id=session,
                        run_id=run_id,
                        time=f"2026-12-08T{hour:02d}:{minute:02d}:00+00:00",
                        backend="kube",
                        provider="kind",
                        cni=cni,
                        cni_version="1.18.4",
                        scenario="baseline",
                        condition=condition,
                        parameters=dict(parameters),
                        repetition=repetition,
                        metric=metric,
                        value=value,
                        unit=unit,
                        verified=True,
                        environment_id=environment.environment_id,
                        options=options,
                    )
                    for metric, (value, unit) in values.items()
                ],
            )


def _verdict(root: Path) -> pd.DataFrame:
    return report.verdict(
        load_results(root, sessions="all"),
        reference="flannel" if any(root.glob("*flannel*")) else None,
        environments=load_environments(root),
    )


def _cilium_modes(root: Path, kpr_values: Mapping[str, object], **reported: str) -> pd.DataFrame:
    """Cilium with kube-proxy replacement (``kpr_values``) and in kube-proxy mode, two sessions
    each, pod to pod and through a ClusterIP of the proxy each runs."""
    for index, session in enumerate(("s1-kpr", "s2-kpr")):
        _session(
            root,
            session,
            "cilium",
            hour=index,
            conditions=[(POD, POD_PARAMETERS), _service("ebpf")],
            latency_us=30.0,
            cni_values=kpr_values,
            datapath_settings=reported or None,
        )
    for index, session in enumerate(("s3-kp", "s4-kp")):
        _session(
            root,
            session,
            "cilium:mode=kube-proxy",
            hour=2 + index,
            conditions=[(POD, POD_PARAMETERS), _service("iptables")],
            latency_us=36.0,
            cni_values=KUBE_PROXY_MODE,
        )
    return _verdict(root)


def _options(table: pd.DataFrame) -> pd.DataFrame:
    return table[table["kind"] == "option"]


# --------------------------------------------------------------------------------------------
# A Service proxy only where traffic goes to a Service
# --------------------------------------------------------------------------------------------


def test_a_service_proxy_contrast_on_pod_to_pod_traffic_is_not_a_finding(tmp_path: Path) -> None:
    for index, (cni, proxy) in enumerate(
        (("flannel", "iptables"), ("flannel:kube-proxy=nftables", "nftables"))
    ):
        for again in range(2):
            _session(
                tmp_path,
                f"s{index}{again}-{proxy}",
                cni,
                hour=2 * index + again,
                conditions=[(POD, POD_PARAMETERS), _service(proxy)],
                latency_us=30.0,
            )
    table = _verdict(tmp_path)
    options = _options(table)
    assert set(options["feature"]) == {"service proxy kube-proxy nftables vs kube-proxy iptables"}
    # Only the ClusterIP conditions are paired, each side through its own proxy.
    assert set(zip(options["treatment"], options["control"], strict=True)) == {
        (f"{POD}-service-nftables-0svc", f"{POD}-service-iptables-0svc")
    }
    assert POD not in set(options["treatment"])
    assert (
        "baseline service proxy kube-proxy nftables vs kube-proxy iptables on flannel:"
        f" {POD} not compared: the service proxy handles none of their traffic, which goes to"
        " no Service"
    ) in table.attrs["notes"]


def test_cilium_s_two_modes_are_compared_through_a_service_when_only_the_proxy_differs(
    tmp_path: Path,
) -> None:
    table = _cilium_modes(tmp_path, KPR_ALONE)
    options = _options(table)
    assert set(options["feature"]) == {"service proxy cilium eBPF vs kube-proxy iptables"}
    latency = options[options["metric"] == "latency_avg"]
    assert len(latency) == 1
    line = latency["verdict"].item()
    assert "not compared" not in line, line
    assert "×0.8" in line, line  # about 30 µs against 36 µs
    # The context names what both share, not the proxy each side's condition asks for.
    assert "target=service" in line, line
    assert "proxy=" not in line, line


# --------------------------------------------------------------------------------------------
# A second difference: "not compared: differs in ..."
# --------------------------------------------------------------------------------------------


def test_a_two_factor_difference_reads_not_compared_differs_in(tmp_path: Path) -> None:
    table = _cilium_modes(tmp_path, KPR_AS_STUDIED)
    options = _options(table)
    assert len(options) == 2  # latency and the agent's memory, through the ClusterIP
    for row in options.to_dict("records"):
        assert row["verdict"].endswith(
            f"{row['metric']} not compared: differs in egress gateway (on vs off), masquerade"
            " (bpf vs iptables)"
        ), row["verdict"]
        assert "×" not in row["verdict"], row["verdict"]
        assert all(
            math.isnan(float(row[column]))
            for column in ("estimate", "ci_low", "ci_high", "p_value", "p_adjusted")
        ), row
        assert not row["significant"]
        assert not row["equivalent"]


def test_a_contrast_not_compared_stays_out_of_its_questions_family(tmp_path: Path) -> None:
    clean = _cilium_modes(tmp_path / "clean", KPR_ALONE)
    confounded = _cilium_modes(tmp_path / "confounded", KPR_AS_STUDIED)
    assert _tested_count(_options(clean)) == 2
    assert _tested_count(_options(confounded)) == 0
    # The rest of the verdict is corrected as if the held-back contrast were not there.
    assert _tested_count(confounded) == _tested_count(clean) - 2


def test_settings_reported_by_the_agents_count_and_a_mismatch_is_named(tmp_path: Path) -> None:
    # Asked: Cilium's modes differ in the proxy alone; the agents report BPF masquerading and
    # BPF host routing under kube-proxy replacement all the same.
    table = _cilium_modes(
        tmp_path,
        KPR_ALONE,
        **{
            "service proxy": "cilium eBPF",
            "kube-proxy replacement": "true",
            "masquerade": "bpf",
            "host routing": "bpf",
        },
    )
    lines = set(_options(table)["verdict"])
    assert lines
    assert all(
        line.endswith("not compared: differs in masquerade (bpf vs iptables)") for line in lines
    )
    assert (
        "cilium: its cluster reported its data path otherwise than asked (masquerade: bpf"
        " reported, iptables asked); its contrasts go by what it reported"
    ) in table.attrs["notes"]


def test_a_setting_the_option_itself_names_is_no_second_difference(tmp_path: Path) -> None:
    # The egress gateway asked for by name brings BPF masquerading: that is what is named.
    for index, (cni, values) in enumerate(
        (("cilium", KPR_ALONE), ("cilium:egress-gateway", KPR_AS_STUDIED))
    ):
        _session(
            tmp_path,
            f"s{index}",
            cni,
            hour=index,
            conditions=[(POD, POD_PARAMETERS)],
            latency_us=30.0,
            cni_values=values,
        )
    lines = set(_options(_verdict(tmp_path))["verdict"])
    assert lines
    assert all(
        line.startswith("baseline features egress-gateway vs none on cilium")
        and line.endswith("not compared: differs in masquerade (bpf vs iptables)")
        for line in lines
    ), lines


def test_two_configurations_of_one_cni_compared_as_cnis_differ_in_no_setting(
    tmp_path: Path,
) -> None:
    # Traefik is on no baseline packet's path, so the two are compared as CNIs; but their
    # fingerprints say one had BPF masquerading and the egress gateway on.
    for index, (cni, values) in enumerate(
        (("cilium", KPR_ALONE), ("cilium:gateway=traefik", KPR_AS_STUDIED))
    ):
        _session(
            tmp_path,
            f"s{index}",
            cni,
            hour=index,
            conditions=[(POD, POD_PARAMETERS)],
            latency_us=30.0,
            cni_values=values,
        )
    table = _verdict(tmp_path)
    cni_rows = table[table["kind"] == "cni"]
    assert len(cni_rows) == 2
    assert all(
        line.endswith(
            "not compared: differs in egress gateway (on vs off), masquerade (bpf vs iptables)"
        )
        for line in cni_rows["verdict"]
    ), list(cni_rows["verdict"])


def test_without_fingerprints_an_option_contrast_goes_by_its_labels(tmp_path: Path) -> None:
    _cilium_modes(tmp_path, KPR_AS_STUDIED)
    table = report.verdict(load_results(tmp_path, sessions="all"))
    options = _options(table)
    assert set(options["treatment"]) == {f"{POD}-service-ebpf-0svc"}
    assert len(options) == 2
    assert not any("not compared" in line for line in options["verdict"])


# --------------------------------------------------------------------------------------------
# The committed kind study
# --------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def study_verdict() -> pd.DataFrame:
    return report.verdict(
        load_results(STUDY, sessions="all"),
        reference="flannel",
        environments=load_environments(STUDY),
    )


def test_the_studys_cilium_mode_contrast_is_held_back_for_what_its_fingerprints_recorded(
    study_verdict: pd.DataFrame,
) -> None:
    cilium = study_verdict[
        (study_verdict["kind"] == "option") & (study_verdict["cni"] == "cilium")
        & (study_verdict["scenario"] == "baseline")
    ]  # fmt: skip
    assert len(cilium) > 0
    assert all(json.loads(p)["target"] == "service" for p in cilium["treatment_parameters"])
    assert all(
        line.endswith("differs in egress gateway (on vs off), masquerade (bpf vs iptables)")
        for line in cilium["verdict"]
    )
    flannel = study_verdict[
        (study_verdict["kind"] == "option")
        & (study_verdict["cni"] == "flannel:kube-proxy=nftables")
    ]
    assert len(flannel) > 0
    assert all(json.loads(p)["target"] == "service" for p in flannel["treatment_parameters"])
    assert not any("not compared" in line for line in flannel["verdict"])


# --------------------------------------------------------------------------------------------
# The fingerprint's new field
# --------------------------------------------------------------------------------------------


def test_reported_settings_are_recorded_and_older_fingerprints_keep_their_ids(
    tmp_path: Path,
) -> None:
    reported = {"service proxy": "cilium eBPF", "host routing": "bpf"}
    store = ResultsStore(tmp_path, session_id="s1")
    store.write_environment(environment_fingerprint(backend="kube", datapath_settings=reported))
    (row,) = load_environments(tmp_path).to_dict("records")
    assert json.loads(row["datapath_settings"]) == reported
    # A committed fingerprint (written before the field) gives the id it was written with.
    committed = next((STUDY / "20261127T163747Z-2791dd" / "environments").glob("*.json"))
    document = json.loads(committed.read_text())
    fields = {
        k: v
        for k, v in document.items()
        if k not in ("schema", "schema_version", "session_id", "environment_id")
    }
    assert Environment(**fields).environment_id == document["environment_id"]
