"""`cnibench images prune` chooses what to remove, and `engine status` sizes the data root.

The removal itself runs against a real engine in tests/kind/test_engine.py; here, what is
stale and how big a directory is."""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path

from cnibench.backends.kube.images import OFFLINE_IMAGES
from cnibench.backends.kube.offline.prune import current_tags, stale_tags
from cnibench.backends.kube.offline.recipes import OfflineVersions
from cnibench.engine import disk_usage, format_size


def test_every_tag_a_build_of_everything_makes_is_current() -> None:
    current = current_tags(OFFLINE_IMAGES, OfflineVersions())
    # The node image, the tools image and each offline CNI's image: none may be pruned.
    assert OFFLINE_IMAGES.kind_node in current
    assert OFFLINE_IMAGES.tools in current
    for name in ("flannel", "cilium", "kube-router"):
        assert any(tag.startswith(f"localhost/cnibench-{name}:") for tag in current), name
    assert any(tag.startswith("localhost/cnibench-kind-base:") for tag in current)


def test_a_superseded_version_is_stale_and_nothing_outside_cnibench_is() -> None:
    old = dataclasses.replace(
        OFFLINE_IMAGES, kind_node="localhost/cnibench-kind-node:v1.33.0-offline-1"
    )
    current = current_tags(OFFLINE_IMAGES, OfflineVersions())
    present = [
        *current,
        old.kind_node,
        "localhost/cnibench-tools:offline-0",
        "localhost/someone-else:1",
        "docker.io/library/debian:bookworm",
    ]
    assert stale_tags(present, current) == (
        "localhost/cnibench-kind-node:v1.33.0-offline-1",
        "localhost/cnibench-tools:offline-0",
    )


def test_a_new_kubernetes_version_makes_the_old_base_image_stale() -> None:
    before = current_tags(OFFLINE_IMAGES, OfflineVersions())
    after = current_tags(
        OFFLINE_IMAGES, dataclasses.replace(OfflineVersions(), kubernetes="v9.9.9")
    )
    (old_base,) = (t for t in before if t.startswith("localhost/cnibench-kind-base:"))
    assert old_base not in after
    assert stale_tags(before, after) == (old_base,)


def test_disk_usage_counts_blocks_and_each_hard_link_once(tmp_path: Path) -> None:
    data = tmp_path / "data"
    (data / "a" / "b").mkdir(parents=True)
    payload = os.urandom(256 * 1024)
    (data / "a" / "file").write_bytes(payload)
    os.link(data / "a" / "file", data / "a" / "b" / "link")
    sparse = data / "sparse"
    with sparse.open("wb") as handle:
        handle.truncate(64 * 1024**2)  # 64 MiB long, no block written
    (data / "dangling").symlink_to(tmp_path / "nowhere")
    size = disk_usage(data)
    assert 256 * 1024 <= size < 2 * 256 * 1024 + 64 * 1024
    assert disk_usage(tmp_path / "absent") == 0


def test_sizes_are_written_for_people() -> None:
    assert [format_size(n) for n in (0, 2048, 150 * 1024**2, 1536 * 1024**2, 12 * 1024**3)] == [
        "0 B",
        "2 KiB",
        "150 MiB",
        "1.5 GiB",
        "12.0 GiB",
    ]
