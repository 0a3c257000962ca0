"""``cnibench doctor``: which backends and tools are usable here, and why not."""

from __future__ import annotations

import os
import shutil
import subprocess

from cnibench.cli.exits import EXIT_OK
from cnibench.errors import CnibenchError

__all__ = ["ARM_VARIABLES"]

ARM_VARIABLES = ("ARM_CLIENT_ID", "ARM_CLIENT_SECRET", "ARM_SUBSCRIPTION_ID", "ARM_TENANT_ID")
"""Azure credentials the AKS provider reads (``doctor`` shows only whether they are set)."""


def _doctor() -> int:
    from rich.console import Console
    from rich.table import Table

    from cnibench.backends.lab import LabBackend, doctor_rows
    from cnibench.extras import missing_modules
    from cnibench.session import container_engine
    from cnibench.system import SYSTEM_TOOLS, missing_tools

    console = Console()
    table = Table(title="cnibench doctor")
    for column in ("what", "usable", "why"):
        table.add_column(column)
    if missing_modules("kube"):
        why = "cnibench's kube extra is not installed (pip install 'cnibench[kube]')"
        for what in ("kind", "aks", "existing", "private engine"):
            table.add_row(what, "no", why)
    else:
        for what, usable, why in _kube_rows(container_engine()):
            table.add_row(what, "yes" if usable else "no", why)
        table.add_row("private engine", *_engine_row())
    lab_ok, lab_reason = LabBackend().available()
    table.add_row("lab backend", "yes" if lab_ok else "no", lab_reason)
    rows = doctor_rows()
    for row in rows:
        table.add_row(row.feature, "yes" if row.usable else "no", row.reason)
    # Tools the lab rows did not already cover (the lab checks the ones it runs itself).
    covered = {row.feature for row in rows}
    missing = {tool.binary for tool in missing_tools()}
    for tool in SYSTEM_TOOLS:
        if tool.binary in covered:
            continue
        present = tool.binary not in missing
        table.add_row(
            tool.binary,
            "yes" if present else "no",
            tool.purpose if present else f"install Debian package {tool.package}",
        )
    console.print(table)
    return EXIT_OK


def _kube_rows(engine: str) -> list[tuple[str, bool, str]]:
    """Whether each Kubernetes provider could be used here, and why not."""
    kind = shutil.which("kind")
    if not engine:
        kind_row = ("kind", False, "no docker/podman engine answers")
    elif not kind:
        kind_row = ("kind", False, f"{engine} answers but kind is not on PATH")
    else:
        kind_row = _kind_row(engine, kind)
    missing = [name for name in ARM_VARIABLES if name not in os.environ]
    from cnibench.backends.kube.doctor import existing_cluster_report
    from cnibench.backends.kube.providers import ExistingProvider, terraform_command

    terraform = terraform_command()
    if terraform is None:
        aks_row = ("aks", False, "neither terraform nor tofu is on PATH")
    elif missing:
        aks_row = ("aks", False, f"missing environment variables {', '.join(missing)}")
    else:
        command = os.path.basename(terraform)
        aks_row = ("aks", True, f"{command} and Azure credentials in the environment")

    existing, why = existing_cluster_report(ExistingProvider().kubeconfig)
    return [kind_row, aks_row, ("existing", existing, why)]


def _engine_row() -> tuple[str, str]:
    """usable/why of the private engine (``cnibench engine up``)."""
    from cnibench.engine import engine_doctor_row

    usable, why = engine_doctor_row()
    return ("yes" if usable else "no", why)


def _kind_row(engine: str, kind: str) -> tuple[str, bool, str]:
    """kind is usable when it is recent enough for the pinned node image and helm is there."""
    from cnibench.backends.kube.providers import check_kind_version

    try:
        done = subprocess.run(
            [kind, "version"], capture_output=True, text=True, timeout=30, check=False
        )
        check_kind_version(done.stdout)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return ("kind", False, f"{kind} version failed: {exc}")
    except CnibenchError as exc:
        return ("kind", False, str(exc))
    version = " ".join(done.stdout.split()[:2]) or "kind"
    if shutil.which("helm") is None:
        return ("kind", False, f"{version}, but helm is not on PATH (CNIs install with Helm)")
    return ("kind", True, f"{engine} answers, {version} at {kind}, helm found")
