"""write_report on a synthetic results directory: outputs, verdict, secrets, bad input."""

from __future__ import annotations

import dataclasses
import json
import os
import re
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path

import numpy as np
import pytest

from cnibench import report
from cnibench.errors import ConfigError, ResultsError
from cnibench.records import RunRecord, RunStatus
from cnibench.results import ResultsStore, environment_fingerprint
from cnibench.scenarios import SCENARIOS

SESSION = "20261122T100000Z-abc123"
FAKE_ARM_SECRET = "arm-Secret-Value-9f8e7d6c5b"
FAKE_AZURE_SECRET = "azure-Sas-Value-1a2b3c4d5e"
FAKE_KUBE_TOKEN = "kube-token-Zx81Qw77Lm55Pp"
FAKE_BEARER = "bearer-material-0123456789abcdef"


def _record(run_id, condition, value, *, repetition, status=RunStatus.OK, reason=""):
    return RunRecord(
        session_id=SESSION,
        run_id=run_id,
        time=f"2026-11-22T10:{repetition:02d}:00+00:00",
        backend="lab",
        provider="lab",
        cni="vxlan",
        cni_version="1",
        scenario="egress",
        condition=condition,
        parameters={"gateway": condition.removeprefix("gateway-")},
        repetition=repetition,
        metric="throughput",
        value=value,
        unit="bits/s",
        verified=status == RunStatus.OK,
        status=status,
        reason=reason,
    )


def _make_results(root: Path, *, gap: float, noise: float = 0.01) -> Path:
    """Gateway-off ~10 Gbit/s, gateway-on 10 Gbit/s * (1 - gap); 5 runs each with ``noise``
    (a CV), one failure."""
    rng = np.random.default_rng(7)
    store = ResultsStore(root, session_id=SESSION)
    store.write_environment(
        environment_fingerprint(backend="lab", provider="lab", cni="vxlan", cni_version="1")
    )
    for condition, level in (("gateway-off", 10e9), ("gateway-on", 10e9 * (1 - gap))):
        for rep in range(5):
            run_id = f"egress-vxlan-{condition}-r{rep}"
            value = level * (1 + noise * rng.standard_normal())
            store.write_run(run_id, [_record(run_id, condition, value, repetition=rep)])
        store.write_json(
            f"verification-egress-vxlan-{condition}",
            {"ok": True, "detail": f"{condition}: server saw 198.18.0.13"},
        )
    failed = "egress-vxlan-gateway-on-r9"
    store.write_run(
        failed,
        [
            _record(
                failed,
                "gateway-on",
                float("nan"),
                repetition=9,
                status=RunStatus.FAILED,
                reason=f"iperf3 refused: Authorization: Bearer {FAKE_BEARER}",
            )
        ],
    )
    return root


@pytest.fixture
def results_dir(tmp_path: Path) -> Path:
    return _make_results(tmp_path / "results", gap=0.3)


def _html_text(path: Path) -> str:
    """The visible text of the HTML, without embedded images."""
    return re.sub(r"data:image/png;base64,[A-Za-z0-9+/=]+", "", path.read_text())


def test_report_writes_html_markdown_and_one_png_per_figure(results_dir, tmp_path):
    paths = report.write_report(
        results_dir,
        html=tmp_path / "out" / "report.html",
        markdown=tmp_path / "out" / "report.md",
        png_dir=tmp_path / "out" / "png",
    )
    html = paths.html.read_text()
    # The verdict's forest plot, then the bars and the per-run plot of the one metric.
    assert html.count("data:image/png;base64,") == len(paths.pngs) == 3
    assert paths.pngs[0].name == "verdict-forest-egress.png"
    assert all(p.read_bytes().startswith(b"\x89PNG") for p in paths.pngs)
    markdown = paths.markdown.read_text()
    assert "png/egress-throughput-bars.png" in markdown


def test_report_is_self_contained(results_dir, tmp_path):
    paths = report.write_report(results_dir, html=tmp_path / "r.html")
    html = paths.html.read_text()
    assert not re.search(r"""(src|href)=["'](?!data:|#)""", html)
    assert "<link" not in html
    assert "<script" not in html


def test_report_opens_with_the_matrix_then_the_verdict_stating_the_gateway_cost(
    results_dir, tmp_path
):
    paths = report.write_report(results_dir, markdown=tmp_path / "r.md")
    text = paths.markdown.read_text()
    sections = re.findall(r"^## (.+)$", text, flags=re.MULTILINE)
    assert sections[:2] == ["What each feature costs", "Verdict"]
    # Under the heading: when (the records' times) and where (this machine's fingerprint).
    first = text.split("## What each feature costs", 1)[1].strip().splitlines()[0]
    assert first.startswith("Measured 2026-11-22 10:00-10:09 UTC on "), first
    assert f"kernel {os.uname().release} (lab)." in first, first
    # 30 % less throughput with 1 % noise: the ratio is 0.70 give or take a per cent.
    assert re.search(
        r"^- egress gateway on vxlan: throughput ×0\.(69|70|71)\d?"
        r" \(95 % CI 0\.\d+-0\.\d+, n = 5 rounds, paired\)$",
        text,
        flags=re.MULTILINE,
    )


class _Outline(HTMLParser):
    """The order in which a reader meets the HTML's headings, tables and images."""

    def __init__(self) -> None:
        super().__init__()
        self.items: list[tuple[str, str]] = []
        self._heading: str | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in ("h1", "h2"):
            self._heading = ""
        elif tag in ("table", "img"):
            self.items.append((tag, ""))

    def handle_data(self, data: str) -> None:
        if self._heading is not None:
            self._heading += data

    def handle_endtag(self, tag: str) -> None:
        if tag in ("h1", "h2") and self._heading is not None:
            self.items.append((tag, self._heading.strip()))
            self._heading = None


def test_the_html_shows_the_matrix_before_any_other_table_or_figure(results_dir, tmp_path):
    paths = report.write_report(results_dir, html=tmp_path / "r.html")
    outline = _Outline()
    outline.feed(paths.html.read_text())
    # The title, the matrix's heading, then its table: the first thing on the first screen.
    assert [tag for tag, _ in outline.items[:3]] == ["h1", "h2", "table"]
    assert outline.items[1][1] == "What each feature costs"
    first_table = re.split(r"<table[^>]*>", paths.html.read_text(), maxsplit=1)[1]
    first_table = first_table.split("</table>", 1)[0]
    assert "egress gateway" in first_table
    assert "×0.7" in first_table


def test_report_says_undecided_when_interval_covers_one_and_more_than_5_percent(tmp_path):
    results = _make_results(tmp_path / "results", gap=0.0, noise=0.05)
    paths = report.write_report(results, markdown=tmp_path / "r.md")
    text = paths.markdown.read_text()
    line = next(x for x in text.splitlines() if x.startswith("- egress gateway on vxlan"))
    low, high = (float(v) for v in re.search(r"CI ([\d.]+)-([\d.]+)", line).groups())
    # "No detectable difference" read as "no difference"; "undecided" says what it is, with
    # the rounds that would decide ±5 %.
    assert "throughput undecided ×" in line
    assert low <= 1.0 <= high
    assert low < 0.95 or high > 1.05
    assert re.search(r"±5 % needs about \d+ rounds per side$", line), line


def test_report_says_same_within_5_percent_when_the_interval_lies_inside(tmp_path):
    results = _make_results(tmp_path / "results", gap=0.0)
    text = report.write_report(results, markdown=tmp_path / "r.md").markdown.read_text()
    line = next(x for x in text.splitlines() if x.startswith("- egress gateway on vxlan"))
    low, high = (float(v) for v in re.search(r"CI ([\d.]+)-([\d.]+)", line).groups())
    assert "throughput same within ±5 % ×" in line
    assert 0.95 <= low <= 1.0 <= high <= 1.05


def test_report_lists_failed_runs_and_verification(results_dir, tmp_path):
    paths = report.write_report(results_dir, html=tmp_path / "r.html")
    text = _html_text(paths.html)
    assert "egress-vxlan-gateway-on-r9" in text
    assert "iperf3 refused" in text
    assert "gateway-on: server saw 198.18.0.13" in text


def test_environment_section_describes_every_cluster_of_the_session(results_dir, tmp_path):
    # The fixture's session ran on vxlan; it also ran on a routed cluster with another MTU.
    ResultsStore(results_dir, session_id=SESSION).write_environment(
        environment_fingerprint(backend="lab", cni="routed", cni_values={"mtu": 1500})
    )
    paths = report.write_report(results_dir, markdown=tmp_path / "r.md")
    section = paths.markdown.read_text().split("## Environment")[1].split("\n## ")[0]
    cni_row = next(
        line
        for line in section.splitlines()
        if line.startswith("|") and line.split("|")[1].strip() == "cni"
    )
    assert sorted(cell.strip() for cell in cni_row.strip("|").split("|")[1:]) == ["routed", "vxlan"]
    assert '{"mtu": 1500}' in section


def test_report_tables_leave_failed_runs_out_of_the_average(results_dir, tmp_path):
    paths = report.write_report(results_dir, markdown=tmp_path / "r.md")
    table = paths.markdown.read_text().split("*egress: vxlan / gateway-on*")[1]
    run_rows = [line for line in table.splitlines() if line.startswith("| Run ")]
    assert len(run_rows) == 5
    assert "r9" not in "".join(run_rows)


def test_report_contains_no_planted_secret(results_dir, tmp_path, monkeypatch):
    monkeypatch.setenv("ARM_CLIENT_SECRET", FAKE_ARM_SECRET)
    monkeypatch.setenv("AZURE_STORAGE_SAS", FAKE_AZURE_SECRET)
    (environment_file,) = (results_dir / SESSION / "environments").iterdir()
    document = json.loads(environment_file.read_text())
    kubeconfig = (
        "apiVersion: v1\nclusters: []\ncontexts: []\nusers:\n- name: admin\n  user:\n"
        f"    token: {FAKE_KUBE_TOKEN}\n"
    )
    document["cni_values"] = {
        "kubeconfig": kubeconfig,
        "cluster": {"note": kubeconfig},
        "region": FAKE_ARM_SECRET,
        "extra": f"token={FAKE_KUBE_TOKEN}",
    }
    document["nodes"] = {"n1": {"cpus": 2, "label": f"AZURE_SAS={FAKE_AZURE_SECRET}"}}
    environment_file.write_text(json.dumps(document))
    paths = report.write_report(results_dir, html=tmp_path / "r.html", markdown=tmp_path / "r.md")
    for output in (paths.html.read_text(), paths.markdown.read_text()):
        for secret in (FAKE_ARM_SECRET, FAKE_AZURE_SECRET, FAKE_KUBE_TOKEN, FAKE_BEARER):
            assert secret not in output
        assert "&lt;redacted&gt;" in output or "<redacted>" in output


@pytest.mark.parametrize(
    "text",
    [
        f"Authorization: Bearer {FAKE_BEARER}",
        f'{{"token": "{FAKE_KUBE_TOKEN}"}}',
        f"client-key-data: {FAKE_KUBE_TOKEN}",
        f"ARM_CLIENT_SECRET={FAKE_ARM_SECRET}",
        "-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEA\n-----END RSA PRIVATE KEY-----",
    ],
    ids=["bearer", "json-token", "kubeconfig-key", "arm-variable", "pem"],
)
def test_scrub_text_removes_credentials(text):
    scrubbed = report.scrub_text(text, secrets=())
    assert "<redacted>" in scrubbed
    for secret in (FAKE_BEARER, FAKE_KUBE_TOKEN, FAKE_ARM_SECRET, "MIIEowIBAAKCAQEA"):
        assert secret not in scrubbed


def test_scrub_text_keeps_ordinary_evidence():
    text = "gateway-on: external server saw source 198.18.0.13 (pod_mtu=1450)"
    assert report.scrub_text(text, secrets=()) == text


def test_missing_results_directory_is_a_results_error(tmp_path):
    with pytest.raises(ResultsError, match="does not exist"):
        report.write_report(tmp_path / "nope", html=tmp_path / "r.html")


def test_directory_without_results_is_a_results_error(tmp_path):
    (tmp_path / "empty").mkdir()
    with pytest.raises(ResultsError, match="no results"):
        report.write_report(tmp_path / "empty", html=tmp_path / "r.html")
    assert not (tmp_path / "r.html").exists()


def test_report_without_any_output_is_a_config_error(results_dir):
    with pytest.raises(ConfigError, match="html="):
        report.write_report(results_dir)


def test_report_replaces_an_existing_file_without_leaving_temporaries(results_dir, tmp_path):
    target = tmp_path / "r.html"
    target.write_text("old")
    report.write_report(results_dir, html=target)
    assert target.read_text().startswith("<!DOCTYPE html>")
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []


def _egress_with_side_metrics(root: Path) -> Path:
    """Egress runs recording throughput plus metrics that egress does not declare primary."""
    _make_results(root, gap=0.3)
    store = ResultsStore(root, session_id=SESSION)
    for condition in ("gateway-off", "gateway-on"):
        for rep in range(3):
            run_id = f"egress-vxlan-{condition}-side-r{rep}"
            base = _record(run_id, condition, 9e9, repetition=20 + rep)
            store.write_run(
                run_id,
                [
                    base,
                    dataclasses.replace(base, metric="receive_rate@egress-gw", value=8e9),
                    dataclasses.replace(base, metric="retransmits", value=3.0, unit="count"),
                    dataclasses.replace(base, metric="cpu", value=12.0, unit="%"),
                ],
            )
    return root


@pytest.mark.parametrize("all_metrics", [False, True], ids=["primary-only", "all-metrics"])
def test_report_draws_the_primary_metrics_unless_all_metrics(tmp_path, all_metrics):
    results = _egress_with_side_metrics(tmp_path / "results")
    recorded = {"throughput", "receive_rate@egress-gw", "retransmits", "cpu"}
    declared = set(SCENARIOS["egress"].primary_metrics)
    paths = report.write_report(results, png_dir=tmp_path / "png", all_metrics=all_metrics)
    drawn = {
        p.stem.removeprefix("egress-").removesuffix("-bars")
        for p in paths.pngs
        if p.stem.endswith("-bars")
    }
    expected = recorded if all_metrics else recorded & declared
    # PNG names replace characters such as "@" by "_".
    assert drawn == {re.sub(r"[^A-Za-z0-9._-]+", "_", metric) for metric in expected}


def test_cnibench_report_all_metrics_draws_the_other_metrics(tmp_path):
    results = _egress_with_side_metrics(tmp_path / "results")
    argv = [sys.executable, "-m", "cnibench.cli", "report", str(results), "--png-dir"]
    plain = subprocess.run([*argv, str(tmp_path / "plain")], check=True, timeout=120)
    every = subprocess.run(
        [*argv, str(tmp_path / "every"), "--all-metrics"], check=True, timeout=120
    )
    assert plain.returncode == every.returncode == 0
    assert not (tmp_path / "plain" / "egress-retransmits-bars.png").exists()
    assert (tmp_path / "every" / "egress-retransmits-bars.png").exists()


def test_a_report_of_chosen_sessions_leaves_the_others_out(results_dir, tmp_path):
    other = "20261123T090000Z-def456"
    store = ResultsStore(results_dir, session_id=other)
    store.write_environment(
        environment_fingerprint(backend="lab", provider="lab", cni="routed", cni_version="1")
    )
    for rep in range(3):
        run_id = f"egress-routed-gateway-off-r{rep}"
        record = dataclasses.replace(
            _record(run_id, "gateway-off", 5e9, repetition=rep), session_id=other, cni="routed"
        )
        store.write_run(run_id, [record])
    store.write_json("verification-egress-routed-gateway-off", {"ok": True, "detail": "other"})

    both = report.write_report(results_dir, markdown=tmp_path / "both.md").markdown.read_text()
    assert SESSION in both
    assert other in both
    only = report.write_report(
        results_dir, markdown=tmp_path / "only.md", sessions=[other]
    ).markdown.read_text()
    assert other in only
    assert SESSION not in only  # not in the overview, the environment or the evidence
    assert "gateway-on" not in only
    with pytest.raises(ConfigError, match="20261124T000000Z-nope00"):
        report.write_report(
            results_dir, markdown=tmp_path / "bad.md", sessions=["20261124T000000Z-nope00"]
        )
    assert not (tmp_path / "bad.md").exists()


def test_report_margin_says_same_within_when_the_interval_is_inside(tmp_path):
    results = _make_results(tmp_path / "results", gap=0.0)
    paths = report.write_report(results, markdown=tmp_path / "r.md", margin=0.5)
    line = next(
        x for x in paths.markdown.read_text().splitlines() if x.startswith("- egress gateway on")
    )
    low, high = (float(v) for v in re.search(r"CI ([\d.]+)-([\d.]+)", line).groups())
    assert 0.5 <= low <= high <= 1.5
    assert "throughput same within ±50 % ×" in line


# --- the templates ----------------------------------------------------------------------------

SECTIONS = ("verdict", "scenario-egress", "methods", "environment", "verification", "failed")


def test_every_section_is_rendered_by_the_shipped_templates(results_dir, tmp_path):
    from importlib.resources import files

    paths = report.write_report(results_dir, html=tmp_path / "r.html", markdown=tmp_path / "r.md")
    html = paths.html.read_text()
    templates = files("cnibench.report") / "templates"
    # The page's style is the template's, as shipped in the package.
    assert (templates / "report.css").read_text().strip() in html
    for section in SECTIONS:
        assert re.search(rf'<h2 id="{section}">', html), section
        assert f'<a href="#{section}">' in html, section
    markdown = paths.markdown.read_text()
    for heading in (
        "## Verdict",
        "## Scenario: egress",
        "## Methods",
        "## Environment",
        "## Verification evidence",
        "## Failed runs",
    ):
        assert f"\n{heading}\n" in markdown, heading
    assert "\n\n\n" not in markdown


def test_hostile_labels_are_escaped_in_the_html_and_kept_in_the_markdown(tmp_path):
    root = tmp_path / "results"
    store = ResultsStore(root, session_id=SESSION)
    store.write_environment(
        environment_fingerprint(backend="lab", provider="lab", cni="vxlan", cni_version="1")
    )
    hostile = '<script>alert("x")</script>'
    for rep in range(3):
        run_id = f"egress-vxlan-gateway-off-r{rep}"
        store.write_run(run_id, [_record(run_id, "gateway-off", 1e10 + rep, repetition=rep)])
    failed = "egress-vxlan-gateway-off-r9"
    record = _record(
        failed,
        "gateway-off",
        float("nan"),
        repetition=9,
        status=RunStatus.FAILED,
        reason=f"iperf3 said {hostile}",
    )
    store.write_run(failed, [record])
    title = "<img src=x onerror=alert(1)> & co"
    paths = report.write_report(
        root, html=tmp_path / "r.html", markdown=tmp_path / "r.md", title=title
    )
    html = _html_text(paths.html)
    assert "<script" not in html
    assert "<img src=x" not in html
    assert "iperf3 said &lt;script&gt;alert(&#34;x&#34;)&lt;/script&gt;" in html
    assert "<title>&lt;img src=x onerror=alert(1)&gt; &amp; co</title>" in html
    # Markdown is text: the reason is there as written (in a table cell).
    assert hostile in paths.markdown.read_text()


def test_the_hand_builder_is_gone():
    from cnibench.report import document

    assert not hasattr(document, "_Builder")
    assert "html.escape" not in Path(document.__file__).read_text()
