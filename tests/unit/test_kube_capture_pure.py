"""Parsing and quoting in the Kubernetes underlay capture (the scripts themselves run for real
in tests/lab/test_lab_kube_capture.py; the marker look-up runs here under the host's sh)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from cnibench.backends.kube.capture import (
    find_marker_script,
    marker_written_script,
    start_capture_script,
    started_pid,
    uplink_interface,
)
from cnibench.errors import ToolError

# ``ip -o -4 addr show`` of a kind node (one veth per pod, whose names carry ``@ifN``).
KIND_NODE = """\
1: lo    inet 127.0.0.1/8 scope host lo\\       valid_lft forever preferred_lft forever
7: eth0@if8    inet 172.18.0.3/16 brd 172.18.255.255 scope global eth0\\       valid_lft forever
9: cilium_host@cilium_net    inet 10.244.1.54/32 scope global cilium_host\\       valid_lft forever
"""


def test_uplink_is_found_by_node_address_and_veth_suffix_dropped() -> None:
    assert uplink_interface(KIND_NODE, "172.18.0.3") == "eth0"
    assert uplink_interface(KIND_NODE, "10.244.1.54") == "cilium_host"


def test_prefix_of_an_address_is_not_a_match() -> None:
    with pytest.raises(ToolError, match=r"node address 172\.18\.0\.30$"):
        uplink_interface(KIND_NODE, "172.18.0.30")


@pytest.mark.parametrize("output", ["", "sh: tcpdump: not found", "12 13"])
def test_anything_but_a_pid_means_the_capture_did_not_start(output: str) -> None:
    with pytest.raises(ToolError, match="underlay capture did not start"):
        started_pid(output)


def test_pid_is_read() -> None:
    assert started_pid("4242\n") == 4242


@pytest.mark.parametrize("marker", [b"", b"a b", b"x;rm -rf /", b"$(id)"])
def test_markers_that_need_quoting_are_refused(marker: bytes) -> None:
    with pytest.raises(ValueError, match="marker must be"):
        find_marker_script(marker, "/tmp/p", "/tmp/l")


def test_interface_names_are_quoted() -> None:
    script = start_capture_script("eth0; reboot", "/tmp/p", "/tmp/l")
    assert "-i 'eth0; reboot'" in script


@pytest.mark.parametrize(
    ("written", "answer"),
    [
        (b"\x00\x01cb-marker-42\xff", "seen"),
        (b"\x00\x01cb-marker-4\xff", "unseen"),
        (None, "unseen"),
    ],
    ids=["marker-in-binary-pcap", "only-a-prefix-of-it", "no-file-yet"],
)
def test_the_marker_is_looked_up_in_the_capture_file_which_stays(
    tmp_path: Path, written: bytes | None, answer: str
) -> None:
    pcap = tmp_path / "capture 1.pcap"  # a space: the path is quoted
    if written is not None:
        pcap.write_bytes(written)
    script = marker_written_script(b"cb-marker-42", str(pcap))
    done = subprocess.run(["sh", "-c", script], capture_output=True, text=True, check=False)
    assert (done.returncode, done.stdout, done.stderr) == (0, f"{answer}\n", "")
    assert pcap.exists() is (written is not None)
