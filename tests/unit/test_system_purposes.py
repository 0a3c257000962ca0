"""The demo installs only what the lab runs (issue 34 item 11): no browser, compiler, container
engine or image tools, which only the test tiers and kind need."""

from __future__ import annotations

import ast

import pytest

from cnibench import system
from cnibench.tools import TOOLS
from noxfile_syntax import function_node


def test_the_lab_set_leaves_out_the_test_and_kind_tools(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(system, "_present", lambda tool: False)  # a fresh machine
    lab = {tool.package for tool in system.missing_tools("lab")}
    everything = {tool.package for tool in system.missing_tools()}
    for heavy in ("chromium", "docker.io", "containerd", "gcc", "mmdebstrap", "hey"):
        assert heavy in everything
        assert heavy not in lab
    # What the demo's scenarios run: namespaces, WireGuard, policy engines, Prometheus, and
    # every measurement tool.
    for needed in ("iproute2", "nftables", "wireguard-tools", "prometheus", "nginx-light"):
        assert needed in lab
    assert {tool.package for tool in TOOLS.values()} <= lab


def test_an_unknown_purpose_is_refused() -> None:
    with pytest.raises(ValueError, match="needed_for"):
        system.SystemTool("x", "x", "x", "demo")


def test_nox_demo_installs_for_the_lab_only() -> None:
    """The demo session passes --for lab to the installer (read from the noxfile's syntax
    tree, so a comment saying so would not pass)."""
    calls = [
        n
        for n in ast.walk(function_node("demo"))
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id == "_system"
    ]
    assert len(calls) == 1
    assert [a.value for a in calls[0].args[1:] if isinstance(a, ast.Constant)] == ["--for", "lab"]
