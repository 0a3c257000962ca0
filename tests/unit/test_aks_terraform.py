"""What cnibench hands Terraform for AKS, checked without Azure or a built provider: the
variables ``terraform/aks`` declares, the command python-terraform runs (Terraform or OpenTofu,
found on a real ``PATH`` of files made here), and the offline check's plan (mirror layout, CLI
configuration, ``tofu`` command lines). ``nox -s aks-validate`` runs the check itself
(tests/aks)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from cnibench.backends.base import ClusterSpec, NodeRole
from cnibench.backends.kube.cni import cni_definition
from cnibench.backends.kube.offline.tofu import (
    TofuToolchain,
    check_argv,
    cli_config,
    mirror_binary,
    provider_version,
)
from cnibench.backends.kube.providers import (
    AKS_CREDENTIAL_VARIABLES,
    AKS_VARIABLES_FILE,
    AksProvider,
    aks_variables,
    terraform_command,
)
from cnibench.errors import ConfigError, ProvisioningError

MAIN_TF = Path(__file__).resolve().parents[2] / "terraform" / "aks" / "main.tf"

CLIENT, SERVER, GATEWAY = NodeRole.CLIENT, NodeRole.SERVER, NodeRole.EGRESS_GW


def _variables(**kwargs: object) -> dict[str, object]:
    return aks_variables(
        "c", location="westeurope", vm_size="Standard_A2_v2", kubernetes_version="1.33", **kwargs
    )  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("roles", "role_nodes"),
    [
        (ClusterSpec.roles, {"client": 1, "server": 1, "egress-gw": 1}),
        ((CLIENT, CLIENT, SERVER), {"client": 2, "server": 1}),
        ((SERVER,), {"server": 1}),
    ],
    ids=["default-three-roles", "repeated-client", "one-role"],
)
def test_aks_variables_give_each_role_its_node_count(
    roles: tuple[NodeRole, ...], role_nodes: dict[str, int]
) -> None:
    assert _variables(roles=roles)["role_nodes"] == role_nodes


def test_aks_variables_refuse_a_node_count_other_than_the_roles() -> None:
    with pytest.raises(ConfigError, match="node count 4"):
        _variables(node_count=4)


def test_aks_variables_refuse_no_node() -> None:
    with pytest.raises(ConfigError, match=">= 1"):
        _variables(roles=())


def test_every_aks_variable_is_declared_and_every_required_one_given() -> None:
    text = MAIN_TF.read_text()
    declared = dict(re.findall(r'variable "(\w+)" \{(.*?)\n\}', text, flags=re.S))
    required = {name for name, body in declared.items() if "default" not in body}
    given = set(_variables())
    assert given <= set(declared)
    assert required <= given


class _RecordingTerraform:
    """Stands in for python_terraform.Terraform (Azure cannot be reached from here)."""

    def __init__(self, working_dir: str) -> None:
        self.working_dir = Path(working_dir)

    def init(self, **kwargs: object) -> tuple[int, str, str]:
        return 0, "", ""

    def apply(self, **kwargs: object) -> tuple[int, str, str]:
        return 0, "", ""

    def output(self, name: str) -> str:
        return "apiVersion: v1\nkind: Config\n"


def test_aks_variables_stay_in_the_working_copy_for_destroy(tmp_path: Path) -> None:
    """``terraform destroy`` gets no ``-var``: the working copy's ``*.auto.tfvars.json`` must
    hold what apply was given, and no credential."""
    environ = {name: f"secret-{name}" for name in AKS_CREDENTIAL_VARIABLES}
    provider = AksProvider(state_dir=tmp_path, terraform=_RecordingTerraform, environ=environ)
    spec = ClusterSpec(cni="cilium", roles=(CLIENT, SERVER, SERVER))
    made = provider.ensure(spec, cni_definition(spec))
    text = (tmp_path / made.name / AKS_VARIABLES_FILE).read_text()
    assert json.loads(text)["role_nodes"] == {"client": 1, "server": 2}
    assert "secret" not in text


def _path_with(tmp_path: Path, *commands: str) -> str:
    """A PATH of one directory holding executables named ``commands``."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    for command in commands:
        tool = bin_dir / command
        tool.write_text("#!/bin/sh\nexit 0\n")
        tool.chmod(0o755)
    return str(bin_dir)


@pytest.mark.parametrize(
    ("on_path", "chosen", "expected"),
    [
        (("terraform",), "", "terraform"),
        (("tofu",), "", "tofu"),
        (("terraform", "tofu"), "", "terraform"),
        (("terraform", "tofu"), "tofu", "tofu"),
        (("terraform",), "tofu", None),
        ((), "", None),
    ],
    ids=[
        "terraform-only",
        "tofu-only",
        "both-prefers-terraform",
        "env-chooses-tofu",
        "env-names-a-missing-command",
        "neither",
    ],
)
def test_terraform_command_choice(
    tmp_path: Path, on_path: tuple[str, ...], chosen: str, expected: str | None
) -> None:
    environ = {"PATH": _path_with(tmp_path, *on_path), "CNIBENCH_TERRAFORM": chosen}
    found = terraform_command(environ)
    assert (Path(found).name if found else None) == expected


def test_aks_provider_drives_tofu_when_it_is_the_only_one(tmp_path: Path) -> None:
    pytest.importorskip("python_terraform")
    provider = AksProvider(state_dir=tmp_path, environ={"PATH": _path_with(tmp_path, "tofu")})
    client = provider._client(tmp_path)
    assert Path(client.terraform_bin_path).name == "tofu"


def test_aks_provider_without_terraform_or_tofu_is_a_config_error(tmp_path: Path) -> None:
    pytest.importorskip("python_terraform")
    provider = AksProvider(state_dir=tmp_path, environ={"PATH": _path_with(tmp_path)})
    with pytest.raises(ConfigError, match="terraform or tofu"):
        provider._client(tmp_path)


# -- the offline check's plan ----------------------------------------------------------------


def test_mirror_binary_is_the_unpacked_layout_for_opentofus_registry_host() -> None:
    path = mirror_binary(Path("/m"), "5.2.0")
    assert path == Path(
        "/m/registry.opentofu.org/hashicorp/azurerm/5.2.0/linux_amd64"
        "/terraform-provider-azurerm_v5.2.0"
    )


def test_cli_config_installs_from_the_mirror_only() -> None:
    text = cli_config(Path("/cache/tofu-mirror"))
    assert 'path    = "/cache/tofu-mirror"' in text
    assert "filesystem_mirror" in text
    assert "direct" not in text.split("\n", 1)[1]  # the comment line aside


@pytest.mark.parametrize(
    ("text", "expected"),
    [("5.2.0\n", "5.2.0"), ("4.81.0", "4.81.0")],
    ids=["with-newline", "bare"],
)
def test_provider_version_reads_the_release(text: str, expected: str) -> None:
    assert provider_version(text) == expected


@pytest.mark.parametrize(
    "text", ["dev", "5.2", "v5.2.0", ""], ids=["dev", "two-parts", "v", "empty"]
)
def test_provider_version_refuses_anything_else(text: str) -> None:
    with pytest.raises(ProvisioningError, match=r"X\.Y\.Z"):
        provider_version(text)


@pytest.mark.parametrize(
    ("command", "argv"),
    [
        ("init", ["/t/tofu", "init", "-no-color", "-input=false", "-backend=false"]),
        ("validate", ["/t/tofu", "validate", "-no-color"]),
        ("test", ["/t/tofu", "test", "-no-color"]),
    ],
    ids=["init", "validate", "test"],
)
def test_check_argv(command: str, argv: list[str]) -> None:
    assert check_argv(Path("/t/tofu"), command) == argv


def test_toolchain_environment_points_at_the_cli_config_and_drops_a_plugin_cache() -> None:
    toolchain = TofuToolchain(Path("/t/tofu"), Path("/m/tofu.tfrc"), "5.2.0")
    env = toolchain.environment({"TF_PLUGIN_CACHE_DIR": "/elsewhere", "HOME": "/root"})
    assert env["TF_CLI_CONFIG_FILE"] == "/m/tofu.tfrc"
    assert "TF_PLUGIN_CACHE_DIR" not in env
    assert env["HOME"] == "/root"
