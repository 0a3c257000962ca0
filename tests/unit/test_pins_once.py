"""Issue 50, item 7: a release pinned in one place. Traefik's release was written three times
(the public image, the offline image's tag, the recipe that builds it) and the offline
Kubernetes release twice; an update that missed one built one release and tagged another.

The scan reads every string literal of ``src/`` that is not a docstring: each pinned release
may appear in exactly one, its constant's."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from cnibench.backends.kube.images import (
    OFFLINE_IMAGES,
    OFFLINE_KUBERNETES_VERSION,
    TRAEFIK_VERSION,
    Images,
)
from cnibench.backends.kube.offline.recipes import OfflineVersions
from suite_support import code_strings

SRC = Path(__file__).resolve().parents[2] / "src" / "cnibench"


@pytest.mark.parametrize("pin", [TRAEFIK_VERSION, OFFLINE_KUBERNETES_VERSION])
def test_a_pinned_release_is_written_once(pin: str) -> None:
    places = [
        f"{path.relative_to(SRC)}: {text!r}"
        for path in sorted(SRC.rglob("*.py"))
        for text in code_strings(ast.parse(path.read_text()))
        if pin in text
    ]
    assert len(places) == 1, places


def test_the_images_and_the_recipes_read_the_same_pins() -> None:
    versions = OfflineVersions()
    assert versions.traefik == TRAEFIK_VERSION
    assert versions.kubernetes == OFFLINE_KUBERNETES_VERSION
    assert Images().traefik.endswith(f":{TRAEFIK_VERSION}")
    assert f":{TRAEFIK_VERSION}-offline-" in OFFLINE_IMAGES.traefik
    assert f":{OFFLINE_KUBERNETES_VERSION}-offline-" in OFFLINE_IMAGES.kind_node
