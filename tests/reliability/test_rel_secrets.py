"""No secret reaches results, logs or reports (SPEC section 9, fourth rule).

Planted values: a kubeconfig bearer token (``KUBECONFIG`` points at a kubeconfig holding it),
Azure credentials (``ARM_CLIENT_SECRET`` and friends), a Terraform variable
(``TF_VAR_client_secret``) and a ``terraform.tfstate`` in the working directory holding a
secret. A real ``cnibench run --cluster lab`` (egress, smoke profile, with ``--report``) and a
``cnibench report`` (HTML, Markdown, PNGs) run with them; every file written under the
workspace (results, raw tool outputs, reports) and the captured stdout and stderr are searched
for every planted value.
"""

from __future__ import annotations

import os
import secrets
import subprocess
from pathlib import Path

import pytest
from rel_support import EGRESS_RUN, cnibench_argv, merge_summary, require_root_lab


def _planted() -> dict[str, str]:
    tag = secrets.token_hex(8)
    return {
        "kube_token": f"kubetoken{tag}",
        "arm_secret": f"armsecret{tag}",
        "arm_client": f"armclient{tag}",
        "tf_var": f"tfvar{tag}",
        "tf_state": f"tfstate{tag}",
    }


@pytest.fixture(scope="module")
def outputs(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, str], Path, str]:
    """Planted values, the workspace the commands ran in, and all they printed."""
    require_root_lab()
    planted = _planted()
    work = tmp_path_factory.mktemp("secrets")
    kubeconfig = work / "kubeconfig"
    kubeconfig.write_text(
        "apiVersion: v1\nkind: Config\nusers:\n- name: admin\n  user:\n"
        f"    token: {planted['kube_token']}\n"
    )
    (work / "terraform.tfstate").write_text(
        '{"outputs": {"kube_config_raw": {"value": "' + planted["tf_state"] + '"}}}'
    )
    env = dict(
        os.environ,
        KUBECONFIG=str(kubeconfig),
        ARM_CLIENT_SECRET=planted["arm_secret"],
        ARM_CLIENT_ID=planted["arm_client"],
        ARM_TENANT_ID="00000000-0000-0000-0000-000000000001",
        ARM_SUBSCRIPTION_ID="00000000-0000-0000-0000-000000000002",
        TF_VAR_client_secret=planted["tf_var"],
        KUBE_TOKEN=planted["kube_token"],
    )
    results = work / "results"
    printed = []
    commands = [
        [
            *EGRESS_RUN,
            "--runs",
            "1",
            "--results-dir",
            str(results),
            "--report",
            str(work / "run-report.html"),
        ],
        [
            "report",
            str(results),
            "--html",
            str(work / "report.html"),
            "--markdown",
            str(work / "report.md"),
            "--png-dir",
            str(work / "png"),
        ],
    ]
    for command in commands:
        done = subprocess.run(
            cnibench_argv(*command),
            capture_output=True,
            text=True,
            env=env,
            cwd=work,
            timeout=180,
            check=False,
        )
        assert done.returncode == 0, done.stderr[-2000:]
        printed += [done.stdout, done.stderr]
    return planted, work, "\n".join(printed)


def _written_files(work: Path) -> list[Path]:
    planted_inputs = {"kubeconfig", "terraform.tfstate"}
    return [p for p in work.rglob("*") if p.is_file() and p.name not in planted_inputs]


def test_the_commands_wrote_results_and_reports(outputs: tuple[dict[str, str], Path, str]) -> None:
    _, work, _ = outputs
    files = _written_files(work)
    assert {"report.html", "report.md", "run-report.html"} <= {p.name for p in files}
    assert any(p.parent.name == "environments" for p in files), "no environment fingerprint"


@pytest.mark.parametrize("key", ["kube_token", "arm_secret", "arm_client", "tf_var", "tf_state"])
def test_planted_secret_is_in_no_file_and_no_output(
    outputs: tuple[dict[str, str], Path, str], key: str
) -> None:
    planted, work, printed = outputs
    value = planted[key].encode()
    files = _written_files(work)
    leaks = [str(p.relative_to(work)) for p in files if value in p.read_bytes()]
    assert leaks == []
    assert planted[key] not in printed
    merge_summary("secrets", {"planted_values": len(planted), "files_searched": len(files)})
