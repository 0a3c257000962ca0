"""ARCHITECTURE.md's checkable claims, checked against the code they describe.

Each test quotes the sentence it keeps true: the text must still say it (so a claim is not
silently dropped while its test stays), and the code must still do it."""

from __future__ import annotations

import ast
import re
import typing
from pathlib import Path

import pytest

import cnibench
from cnibench.backends import base

ROOT = Path(__file__).resolve().parents[2]
SOURCE = Path(cnibench.__file__).parent
ARCHITECTURE = ROOT / "ARCHITECTURE.md"


def _text() -> str:
    """The document with its line breaks folded, so a sentence is found across lines."""
    return re.sub(r"\s+", " ", ARCHITECTURE.read_text())


def _claims(sentence: str) -> None:
    assert sentence in _text(), f"ARCHITECTURE.md no longer says: {sentence!r}"


def test_cluster_is_the_sum_of_the_capability_protocols_the_document_names() -> None:
    _claims("`Cluster` is the sum of small capability Protocols, one per feature:")
    text = _text()
    start = text.index("`Cluster` is the sum of small capability Protocols")
    paragraph = text[start : text.index("A scenario helper", start)]
    named = set(re.findall(r"`([A-Z][A-Za-z]+)`", paragraph)) - {"Cluster"}
    bases = {b.__name__ for b in base.Cluster.__bases__} - {"Protocol", "Generic"}
    assert named == bases, f"the document names {sorted(named)}, Cluster has {sorted(bases)}"
    for name in bases:
        assert getattr(getattr(base, name), "_is_protocol", False), f"{name} is not a Protocol"


def _functions_taking_the_whole_cluster(tree: ast.Module) -> list[str]:
    """Module-level functions (helpers, not a Scenario's or the runner's methods) with a
    parameter annotated ``Cluster``."""
    found = []
    for node in tree.body:
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        arguments = [*node.args.posonlyargs, *node.args.args, *node.args.kwonlyargs]
        for argument in arguments:
            annotation = argument.annotation
            written = annotation.id if isinstance(annotation, ast.Name) else None
            if isinstance(annotation, ast.Constant):  # a quoted annotation
                written = annotation.value
            if written == "Cluster":
                found.append(f"{node.name}({argument.arg})")
    return found


def test_scenario_helpers_take_the_small_protocol_they_need() -> None:
    _claims("A scenario helper that needs one feature takes that Protocol")
    offenders = {
        path.name: found
        for path in sorted((SOURCE / "scenarios").glob("*.py"))
        if (found := _functions_taking_the_whole_cluster(ast.parse(path.read_text())))
    }
    assert not offenders, f"helpers taking the whole Cluster: {offenders}"
    # The example the document gives is what the code says.
    _claims("(e.g. `egress._run_once(cluster: Placement, ...)`)")
    from cnibench.scenarios import egress

    hints = typing.get_type_hints(egress._run_once)
    assert hints["cluster"] is base.Placement


def test_the_helper_check_sees_a_whole_cluster_parameter() -> None:
    tree = ast.parse("def helper(cluster: Cluster, n: int) -> None: ...\n")
    assert _functions_taking_the_whole_cluster(tree) == ["helper(cluster)"]
    method = ast.parse("class S:\n    def prepare(self, cluster: Cluster) -> None: ...\n")
    assert _functions_taking_the_whole_cluster(method) == []


def test_a_cni_is_one_driver_module_and_one_register_line() -> None:
    _claims("one module in `backends/kube/cnis/` with a driver object")
    from cnibench.backends.kube.cnis import DRIVERS, cni_names

    package = SOURCE / "backends" / "kube" / "cnis"
    modules = {p.stem for p in package.glob("*.py")} - {"__init__", "base"}
    defined_in = {name: type(DRIVERS[name]).__module__.rsplit(".", 1)[-1] for name in cni_names()}
    # Each CNI's driver lives in a module of its own, and every module there is one CNI's.
    assert sorted(defined_in.values()) == sorted(modules), defined_in
    assert len(set(defined_in.values())) == len(defined_in)


def test_the_parse_once_claim_has_its_test() -> None:
    _claims("`--cni` is parsed once")
    _claims("(`tests/unit/test_parsed_once.py` counts the parses and checks)")
    assert (ROOT / "tests" / "unit" / "test_parsed_once.py").is_file()


def test_the_wait_guard_reads_every_module() -> None:
    _claims("`tests/unit/test_waiting.py` reads the syntax tree of every module in `src/cnibench`")
    guard = (ROOT / "tests" / "unit" / "test_waiting.py").read_text()
    assert 'rglob("*.py")' in guard


@pytest.mark.parametrize(
    "module",
    [
        "session/run",
        "session/choice",
        "backends/choose",
        "scenarios/runner",
        "report/verdict/plan",
        "report/verdict/measure",
        "report/verdict/words",
        "report/verdict/formatting",
    ],
)
def test_modules_the_document_names_exist(module: str) -> None:
    assert f"{module.rsplit('/', 1)[-1]}.py" in _text(), f"ARCHITECTURE.md names no {module}.py"
    assert (SOURCE / f"{module}.py").is_file()


@pytest.mark.parametrize("package", ["report/verdict"])
def test_packages_the_document_names_exist(package: str) -> None:
    assert f"`{package}/`" in _text(), f"ARCHITECTURE.md names no {package}/"
    assert (SOURCE / package / "__init__.py").is_file()


def test_only_the_session_s_option_parsing_and_the_report_parse_a_label() -> None:
    """Every call of ``ClusterSpec.from_label`` in src: the session parses ``--cni`` once
    (session/config.py), the report reads labels back from records; nothing else does."""
    import ast

    _claims("nothing in a session parses a label again")
    callers = set()
    for path in SOURCE.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr == "from_label"
            ):
                callers.add(path.relative_to(SOURCE).as_posix())
    assert "session/config.py" in callers
    assert {c for c in callers if not c.startswith("report/")} == {"session/config.py"}, callers


def test_the_session_branches_on_no_backend_name() -> None:
    """No comparison in session/ names a backend or a ``--cluster`` value: which cluster
    serves a request (``auto`` included) is the backends' rule (backends/choose.py)."""
    import ast

    from cnibench.backends.choose import CLUSTER_CHOICES

    _claims("which cluster serves a request (`choose_cluster`, the `auto` rule included)")
    names = {*CLUSTER_CHOICES, "kube"}
    found = []
    for path in sorted((SOURCE / "session").glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, ast.Compare):
                continue
            for side in (node.left, *node.comparators):
                literal = isinstance(side, ast.Constant) and side.value in names
                member = (
                    isinstance(side, ast.Attribute)
                    and isinstance(side.value, ast.Name)
                    and side.value.id == "ClusterChoice"
                )
                if literal or member:
                    found.append(f"{path.name}:{node.lineno}")
    assert found == []
